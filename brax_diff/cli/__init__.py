"""The `brax-diff` command line. Library code lives outside this package; each command
module only parses flags, calls the library and prints."""

from __future__ import annotations

import signal
import sys

import typer

from .. import __version__
from ..errors import BraxDiffError
from ..io import Interrupted, signals_as_exceptions
from . import extract, fix, history, report, verify
from .common import HELP_MARKUP

app = typer.Typer(
    name="brax-diff",
    help="Compare Brax PPO (JAX) and SLM-Lab PPO (PyTorch) settings from the code itself, at any git refs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=HELP_MARKUP,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"brax-diff {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print brax-diff's version and exit.")) -> None:
    """Compare Brax PPO (JAX) and SLM-Lab PPO (PyTorch) settings from the code itself, at any git refs."""


for module in (extract, report, fix, verify, history):
    module.register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point: a BraxDiffError becomes one line on stderr and its exit code."""
    try:
        # Without standalone mode click returns the code of ctx.exit()/typer.Exit(n).
        # SIGTERM raises like SIGINT, so temporary files and staging directories are removed.
        with signals_as_exceptions():
            result = app(args=argv, standalone_mode=False, prog_name="brax-diff")
    except Interrupted as exc:
        print(f"error: interrupted ({signal.Signals(exc.signum).name})", file=sys.stderr)
        return 128 + exc.signum
    except BraxDiffError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # click's own usage errors already printed their line
        return int(exc.code or 0)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # Usage errors (bad option, unknown command) come from click, which typer may vendor.
        if type(exc).__module__.endswith("click.exceptions"):
            if hasattr(exc, "format_message"):  # a usage error: one line, like any bad input
                command = getattr(getattr(exc, "ctx", None), "command_path", None) or "brax-diff"
                print(f"error: {exc.format_message()} (see {command} --help)", file=sys.stderr)
                return int(getattr(exc, "exit_code", 2))
            print("error: aborted", file=sys.stderr)
            return 1
        raise
    return result if isinstance(result, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
