"""The `brax-diff` command line. Library code lives outside this package; each command
module only parses flags, calls the library and prints.

The parser is :mod:`argparse` (:mod:`.parser`); a command module declares its flags in
``register`` and imports the library inside its command function, so `brax-diff --version`
and `--help` import neither GitPython, Jinja, PyYAML nor libcst.
"""

from __future__ import annotations

import gc
import os
import signal
import sys

from .. import __version__
from ..errors import BraxDiffError
from ..safety.escape import one_line
from . import extract, fix, history, report, verify
from .parser import CommandParser, HelpExit

HELP = "Compare Brax PPO (JAX) and SLM-Lab PPO (PyTorch) settings from the code itself, at any git refs."


def _print_version() -> None:
    print(f"brax-diff {__version__}")
    raise HelpExit(0)


def build_parser() -> CommandParser:
    """The whole command line: ``brax-diff`` and every command under it, as argparse parsers
    (``parser.commands["extract"].commands["brax"]`` is `brax-diff extract brax`)."""
    parser = CommandParser("brax-diff", description=HELP)
    parser.eager("--version", "Print brax-diff's version and exit.", _print_version, "-V")
    for module in (report, fix, verify, history, extract):  # the order `brax-diff --help` lists them
        module.register(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: a BraxDiffError (bad usage too) becomes one line on stderr and its exit code."""
    try:
        namespace = build_parser().parse_args(argv)
    except BraxDiffError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:  # --help, --version, a bare group's help
        return int(exc.code or 0)
    try:
        os.getcwd()
    except OSError:  # the directory it was started in was deleted: relative paths mean nothing
        print("error: the current directory no longer exists", file=sys.stderr)
        return 2
    if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to print results
        if sys.stderr is not None:
            print("error: standard output is closed", file=sys.stderr)
        return 2
    kwargs = {k: v for k, v in vars(namespace).items() if not k.startswith("_")}
    # An extraction allocates millions of objects that live to the end (parsed modules, engine
    # values): at the default threshold (700) the collector re-scanned them over and over (a
    # quarter of a cold report's CPU); every 100,000 allocations it takes a tenth, same memory.
    gc.set_threshold(100_000)
    from ..safety.io import Interrupted, signals_as_exceptions  # after parsing: it imports PyYAML

    try:
        # SIGTERM raises like SIGINT, so temporary files and staging directories are removed.
        with signals_as_exceptions():
            result = namespace._run(**kwargs)
    except Interrupted as exc:
        print(f"error: interrupted ({signal.Signals(exc.signum).name})", file=sys.stderr)
        return 128 + exc.signum
    except BraxDiffError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (`| head`): exit 1, quietly, as click did
        _quiet_stdout()
        return 1
    except OSError as exc:  # the machine refused: a full disk or stdout, no file descriptors, cwd deleted
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {one_line(exc.strerror or exc)}{one_line(where)}", file=sys.stderr)
        _quiet_stdout()
        return 2
    return result if isinstance(result, int) else 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush of a closed pipe says nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout replaced (tests) or already gone
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
