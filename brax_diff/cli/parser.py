"""The command-line parser: :mod:`argparse`, with the manners the CLI had under click/typer.

Only the standard library is imported here, so ``brax-diff --version`` and ``--help`` start
without pydantic, GitPython, Jinja or PyYAML. What it keeps from click:

* an option's value is the next word whatever it looks like (``--brax-repo -x`` gives
  ``-x``); ``--opt=value`` works too; ``--`` ends the options;
* bad usage is one line, ``error: <message> (see brax-diff <cmd> --help)``, exit 2, with
  click's messages (``No such option: --x``, ``Option '--y' requires an argument.``,
  ``No such command 'z'.``, ``Got unexpected extra argument(s) (...)``), the leftmost
  mistake first; ``--help`` wins over a bad value or a stray word, not over an unknown option;
* integers are read as typer read them (``1_000``, `` 5 ``, ``3.0``), converted after parsing
  so that only the value that counts is checked;
* the help page is click's: ``Usage:``, the description, ``Options:`` and ``Commands:``
  wrapped to the terminal (at most 80 columns), ``[default: ...]`` after the help text;
* a group (``brax-diff``, ``brax-diff extract``) given no words prints its help on stderr
  and exits 2.
"""

from __future__ import annotations

import argparse
import re
import sys

from ..errors import BraxDiffError

TYPE_CHECKING = False  # typing is not imported for this
if TYPE_CHECKING:
    from typing import Callable

HELP = "Show this message and exit."


class UsageError(BraxDiffError):
    """Bad usage of the command line: one line, exit 2. The message is kept as written."""

    exit_code = 2

    def __init__(self, message: str, prog: str) -> None:
        Exception.__init__(self, f"{message} (see {prog} --help)")


class HelpExit(SystemExit):
    """``--help``/``--version`` printed what was asked (or a bare group its help): exit now."""


def _escape(value: str) -> str:
    """Untrusted words in a message, without terminal control characters (as click shows them)."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m[0]):02x}", value)


_INTEGER = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")


def integer(text: str) -> int:
    """An int as typer (pydantic, lax) read one: ``7``, `` 7 ``, ``+7``, ``1_000``, ``7.0``."""
    if isinstance(text, int):  # a default
        return text
    text = text.strip()
    if not _INTEGER.fullmatch(text):
        raise ValueError("Input should be a valid integer, unable to parse string as an integer")
    return int(text.split(".", 1)[0])


def path(text: str):
    """A filesystem path (pathlib is imported when one is given)."""
    from pathlib import Path

    return Path(text)


# What an option's value is, shown in --help after the flag (`--brax-repo PATH|URL`); a flag
# means the same in every command, so its name decides. Others show their name in capitals.
_METAVARS = {"set": "KEY=VALUE", "keys": "KEY,...", "explain": "KEY", "spec": "PATH", "rules": "FILE",
             "mapping": "FILE", "previous": "FILE", "summary": "FILE", "verification": "FILE",
             "throughput": "FILE", "brax-json": "FILE", "slm-json": "FILE", "cache-dir": "DIR", "cache": "DIR",
             "fail-on": "SEVERITY", "output": "PATH", "address": "HOST:PORT", "name": "VARIANT", "all-fixes": "spec|settings"}


def _metavar(names: tuple[str, ...], type: Callable) -> str:
    """The metavar of an option named ``names`` whose value ``type`` converts."""
    word = next((n for n in names if n[:2] == "--"), names[0]).lstrip("-")
    if type is integer:
        return "N"
    if word == "repo" or word.endswith("-repo"):
        return "PATH|URL"
    if word in ("brax", "playground", "slm", "rsl-rl", "ref") or word.endswith("-ref"):
        return "REF"
    if word in _METAVARS:
        return _METAVARS[word]
    return "PATH" if type is path else word.upper().replace("-", "_")


class CommandParser(argparse.ArgumentParser):
    """One command (or group of commands) of ``brax-diff``.

    Options are declared with :meth:`option` and :meth:`flag`; a group's commands with
    :meth:`command` and :meth:`group`; ``commands`` maps a group's command names to their
    parsers.
    """

    def __init__(self, prog: str, description: str | None = None) -> None:
        super().__init__(prog=prog, description=description, add_help=False, allow_abbrev=False,
                         exit_on_error=False, formatter_class=_argparse_formatter)
        self.commands: dict[str, CommandParser] = {}
        self._subparsers_action = None
        self._eager: dict[str, Callable[[], None]] = {}
        self._keyword_defaults: dict[str, object] = {}
        self.set_defaults(_parser=self)
        self.eager("--help", HELP, self.print_help_and_exit, "-h")

    # -- declaring options ------------------------------------------------------------------

    def option(self, dest: str, *names: str, help: str, type: Callable = str, repeat: bool = False,
               metavar: str | None = None) -> argparse.Action:
        """An option taking one value (``repeat``: one per use, collected in a list), passed
        to the command function as its keyword argument ``dest``, whose default is the
        option's. ``type`` (``str``, :func:`integer` or :func:`path`) converts the value after
        parsing, the default too, as click did. ``metavar`` names the value in --help
        (default: from the flag's name, :func:`_metavar`)."""
        default = self._keyword_defaults.get(dest)
        action = self.add_argument(*names, dest=dest, help=help, default=default,
                                   action="append" if repeat else "store",
                                   metavar=metavar or _metavar(names, type))
        action.convert = None if type is str else type
        return action

    def flag(self, dest: str, *names: str, help: str) -> argparse.Action:
        """An on/off switch, off unless given (the keyword argument ``dest`` defaults to False)."""
        if self._keyword_defaults.get(dest, False) is not False:
            raise TypeError(f"{self.prog} {names[0]}: a flag's keyword argument {dest} must default to False")
        return self.add_argument(*names, dest=dest, help=help, action="store_true")

    def eager(self, name: str, help: str, run: Callable[[], None], *short: str) -> None:
        """A flag like ``--version`` (``short``: its one-letter spellings, ``-V``): runs (and
        exits) before anything else is looked at."""
        self.add_argument(name, *short, dest=f"_eager_{name}", help=help, action="store_true")
        self._eager[name] = run

    def command(self, name: str, run: Callable, help: str | None = None) -> CommandParser:
        """A command of this group: ``run`` is called with every option as a keyword argument
        (its keyword-only parameters, whose defaults the options take); its description is
        ``help`` or ``run``'s docstring."""
        parser = self._add(name, help if help is not None else _docstring(run))
        parser.set_defaults(_run=run)
        parser._keyword_defaults = dict(run.__kwdefaults__ or {})
        return parser

    def group(self, name: str, help: str) -> CommandParser:
        """A group of commands inside this group (``brax-diff extract``)."""
        return self._add(name, help)

    def option_names(self) -> list[str]:
        """Every option string this command accepts (``--help`` included), as declared."""
        return [name for action in self._actions for name in action.option_strings]

    def leaves(self, path: tuple[str, ...] = ()):
        """(command path, parser) for each command under this group, e.g. (("extract", "brax"), ...)."""
        for name, parser in self.commands.items():
            if parser.commands:
                yield from parser.leaves((*path, name))
            else:
                yield (*path, name), parser

    def _add(self, name: str, description: str | None) -> CommandParser:
        if self._subparsers_action is None:
            self._subparsers_action = self.add_subparsers(dest="_command", metavar="COMMAND", prog=self.prog,
                                                          parser_class=CommandParser)
        parser = self._subparsers_action.add_parser(name, prog=f"{self.prog} {name}", description=description)
        self.commands[name] = parser
        return parser

    # -- parsing ----------------------------------------------------------------------------

    def parse_args(self, args=None, namespace=None):  # noqa: D102 (argparse's, without its extras check)
        return self.parse_known_args(args, namespace)[0]

    def parse_known_args(self, args=None, namespace=None):
        """Parse ``args`` the way click did (see the module docstring); never returns extras."""
        args = list(sys.argv[1:] if args is None else args)
        if self.commands:
            return self._parse_group(args)
        given, eager, extra = self._scan(args, interspersed=True)
        namespace = self._store(given, namespace)
        self._run_eager(eager)
        order = list(dict.fromkeys(action for action, _, _ in given))
        for action in order + [a for a in self._actions if a not in order]:
            # After --help, in the order given, then the defaults: the value that counts only.
            convert = getattr(action, "convert", None)
            value = getattr(namespace, action.dest, None)
            if convert is not None and value is not None:
                try:
                    setattr(namespace, action.dest, convert(value))
                except (TypeError, ValueError) as exc:
                    hint = " / ".join(f"'{name}'" for name in action.option_strings)
                    raise UsageError(f"Invalid value for {hint}: {exc}", self.prog) from None
        if extra:
            raise UsageError(f"Got unexpected extra argument(s) ({' '.join(map(_escape, extra))})", self.prog)
        return namespace, []

    def _parse_group(self, args: list[str]):
        if not args:  # a bare group: its help, on stderr, exit 2 (click's no_args_is_help)
            sys.stderr.write(self.format_help())
            raise HelpExit(2)
        _, eager, rest = self._scan(args, interspersed=False)
        self._run_eager(eager)
        if not rest:
            raise UsageError("Missing command.", self.prog)
        name = rest[0]
        if name not in self.commands:
            if name[:1] == "-":  # a word after `--` that looks like an option
                self._scan([name], interspersed=False)
            from difflib import get_close_matches

            matches = get_close_matches(name, list(self.commands))
            suggest = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
            raise UsageError(f"No such command {name!r}.{suggest}", self.prog)
        return self.commands[name].parse_known_args(rest[1:])

    def _store(self, given: list[tuple[argparse.Action, str, str | None]], namespace) -> argparse.Namespace:
        """The defaults, then each option given, stored by its argparse action, in order."""
        namespace = argparse.Namespace() if namespace is None else namespace
        for action in self._actions:
            if action.dest is not argparse.SUPPRESS and not hasattr(namespace, action.dest):
                setattr(namespace, action.dest, action.default)
        for dest, value in self._defaults.items():
            if not hasattr(namespace, dest):
                setattr(namespace, dest, value)
        for action, name, value in given:
            action(self, namespace, [] if value is None else value, name)
        return namespace

    def _scan(self, args: list[str], interspersed: bool):
        """Read ``args`` left to right as click's parser did; the first mistake is a UsageError.

        Returns the options given, as (action, the name used, the value or None for a
        flag), the eager flags given (in order), and the words that are not options: a
        command's extra arguments, or a group's command and all that follows it. An option
        taking a value takes the next word whatever it is."""
        given: list[tuple[argparse.Action, str, str | None]] = []
        eager: list[str] = []
        words: list[str] = []
        rest = list(args)
        while rest:
            arg = rest.pop(0)
            if arg == "--":
                break
            if arg[:1] != "-" or len(arg) == 1:
                if not interspersed:
                    rest.insert(0, arg)
                    break
                words.append(arg)
                continue
            if arg[:2] != "--":
                self._scan_short(arg, rest, given, eager)
                continue
            name, equals, value = arg.partition("=")
            action = self._option_string_actions.get(name)
            if action is None:
                from difflib import get_close_matches

                longs = [s for s in self._option_string_actions if s[:2] == "--"]
                possible = get_close_matches(name, longs)
                suggest = f" (Possible options: {', '.join(sorted(possible))})" if possible else ""
                raise UsageError(f"No such option: {_escape(name)}{suggest}", self.prog)
            if action.nargs == 0:
                if equals:
                    raise UsageError(f"Option {name!r} does not take a value.", self.prog)
                self._given(action, name, None, given, eager)
                continue
            if not equals:
                if not rest:
                    raise UsageError(f"Option {name!r} requires an argument.", self.prog)
                value = rest.pop(0)
            given.append((action, name, value))
        return given, eager, words + rest

    def _scan_short(self, arg: str, rest: list[str], given: list, eager: list[str]) -> None:
        """``-q`` or a cluster of short flags (``-qq``); a short option taking a value takes
        the rest of the word, else the next word."""
        for i, char in enumerate(arg[1:], start=2):
            name = arg[0] + char
            action = self._option_string_actions.get(name)
            if action is None:
                raise UsageError(f"No such option: {_escape(name)}", self.prog)
            if action.nargs == 0:
                self._given(action, name, None, given, eager)
                continue
            value = arg[i:]
            if not value:
                if not rest:
                    raise UsageError(f"Option {name!r} requires an argument.", self.prog)
                value = rest.pop(0)
            given.append((action, name, value))
            return

    @staticmethod
    def _given(action: argparse.Action, name: str, value: str | None, given: list, eager: list[str]) -> None:
        if action.dest.startswith("_eager_"):
            eager.append(action.dest[len("_eager_"):])
        else:
            given.append((action, name, value))

    def _run_eager(self, eager: list[str]) -> None:
        for name in eager:  # the first given runs (and exits)
            self._eager[name]()

    # -- help -------------------------------------------------------------------------------

    def print_help_and_exit(self) -> None:
        sys.stdout.write(self.format_help())
        sys.stdout.flush()
        raise HelpExit(0)

    def format_help(self) -> str:
        """The help page as click lays it out."""
        out = _Formatter()
        out.write_usage(self.prog, "[OPTIONS] COMMAND [ARGS]..." if self.commands else "[OPTIONS]")
        if self.description:
            out.write_paragraph()
            out.indent += 2
            out.write_text(self.description)
            out.indent -= 2
        rows = [_option_row(a) for a in self._actions if a.option_strings and "--help" not in a.option_strings]
        rows.append(_option_row(self._option_string_actions["--help"]))
        out.section("Options", rows)
        if self.commands:
            limit = out.width - 6 - max(len(name) for name in self.commands)
            out.section("Commands", [(name, _short_help(parser.description or "", limit))
                                     for name, parser in self.commands.items()])
        return out.getvalue()

    def format_usage(self) -> str:
        out = _Formatter()
        out.write_usage(self.prog, "[OPTIONS] COMMAND [ARGS]..." if self.commands else "[OPTIONS]")
        return out.getvalue()

    def error(self, message: str):
        """argparse's own complaints (none are expected past :meth:`_scan`): one line."""
        raise UsageError(message, self.prog)


def _argparse_formatter(prog: str) -> argparse.HelpFormatter:
    """What argparse checks each add_argument with; a fixed width spares it a terminal query
    (and importing shutil) per option. The help pages are :class:`_Formatter`'s."""
    return argparse.HelpFormatter(prog, width=80)


def _docstring(function: Callable) -> str | None:
    """``inspect.getdoc`` without importing inspect: the docstring, its indentation removed."""
    doc = function.__doc__
    if not doc:
        return None
    lines = doc.expandtabs().split("\n")
    margin = min((len(line) - len(line.lstrip()) for line in lines[1:] if line.lstrip()), default=0)
    lines = [lines[0].lstrip()] + [line[margin:] for line in lines[1:]]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _option_row(action: argparse.Action) -> tuple[str, str]:
    names = ", ".join(sorted(action.option_strings, key=lambda s: 2 if s[:2] == "--" else 1))
    if action.nargs != 0:
        names += f" {action.metavar}"
    text = action.help or ""
    if action.nargs != 0 and action.default is not None:
        text = f"{text}  [default: {action.default}]" if text else f"[default: {action.default}]"
    return names, text


def _short_help(text: str, limit: int) -> str:
    """The first sentence of ``text``, or its start and ``...``, in ``limit`` characters (click's rule)."""
    end = text.find("\n\n")
    words = (text[:end] if end != -1 else text).split()
    if not words:
        return ""
    total = 0
    for i, word in enumerate(words):
        total += len(word) + (i > 0)
        if total > limit:
            break
        if word[-1] == ".":
            return " ".join(words[:i + 1])
        if total == limit and i != len(words) - 1:
            break
    else:
        return " ".join(words)
    total += len("...")
    while i > 0:
        total -= len(words[i]) + (i > 0)
        if total <= limit:
            break
        i -= 1
    return " ".join(words[:i]) + "..."


def _terminal_width() -> int:
    import shutil

    return max(min(shutil.get_terminal_size().columns, 80) - 2, 50)


class _Formatter:
    """click's HelpFormatter, the parts the help pages use."""

    def __init__(self) -> None:
        self.width = _terminal_width()
        self.indent = 0
        self.buffer: list[str] = []

    def getvalue(self) -> str:
        return "".join(self.buffer)

    def write_usage(self, prog: str, args: str) -> None:
        prefix = f"Usage: {prog} "
        self.buffer.append(_wrap(args, self.width - self.indent, prefix, " " * len(prefix)) + "\n")

    def write_paragraph(self) -> None:
        if self.buffer:
            self.buffer.append("\n")

    def write_text(self, text: str) -> None:
        indent = " " * self.indent
        self.buffer.append(_wrap_paragraphs(text, self.width, indent, indent) + "\n")

    def section(self, heading: str, rows: list[tuple[str, str]]) -> None:
        self.write_paragraph()
        self.buffer.append(f"{'':>{self.indent}}{heading}:\n")
        self.indent += 2
        self.write_dl(rows)
        self.indent -= 2

    def write_dl(self, rows: list[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        first_col = min(max(len(first) for first, _ in rows), col_max) + col_spacing
        for first, second in rows:
            self.buffer.append(f"{'':>{self.indent}}{first}")
            if not second:
                self.buffer.append("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.buffer.append(" " * (first_col - len(first)))
            else:
                self.buffer.append("\n" + " " * (first_col + self.indent))
            lines = _wrap_paragraphs(second, max(self.width - first_col - 2, 10)).splitlines()
            self.buffer.append(f"{lines[0]}\n" if lines else "\n")
            for line in lines[1:]:
                self.buffer.append(f"{'':>{first_col + self.indent}}{line}\n")


def _wrapper(width: int, initial: str, subsequent: str):
    import textwrap

    class Wrapper(textwrap.TextWrapper):
        def _handle_long_word(self, reversed_chunks, cur_line, cur_len, width):  # click's: cut at the width
            space_left = max(width - cur_len, 1)
            last = reversed_chunks[-1]
            cur_line.append(last[:space_left])
            reversed_chunks[-1] = last[space_left:]

    return Wrapper(width, initial_indent=initial, subsequent_indent=subsequent, replace_whitespace=False)


def _wrap(text: str, width: int, initial: str = "", subsequent: str = "") -> str:
    return _wrapper(width, initial, subsequent).fill(text.expandtabs())


def _wrap_paragraphs(text: str, width: int, initial: str = "", subsequent: str = "") -> str:
    """click's wrap_text(preserve_paragraphs=True): paragraphs split by blank lines, each
    refilled at its own indentation; one starting with a ``\\b`` line is kept as it is."""
    paragraphs: list[tuple[int, bool, str]] = []
    buf: list[str] = []
    indent = None

    def flush() -> None:
        if buf:
            if buf[0].strip() == "\b":
                paragraphs.append((indent or 0, True, "\n".join(buf[1:])))
            else:
                paragraphs.append((indent or 0, False, " ".join(buf)))
            buf.clear()

    for line in text.expandtabs().splitlines():
        if not line:
            flush()
            indent = None
        else:
            if indent is None:
                stripped = line.lstrip()
                indent = len(line) - len(stripped)
                line = stripped
            buf.append(line)
    flush()
    out = []
    for extra, raw, body in paragraphs:
        wrapper = _wrapper(width, initial + " " * extra, subsequent + " " * extra)
        if raw:
            out.append("\n".join((wrapper.initial_indent if i == 0 else wrapper.subsequent_indent) + line
                                 for i, line in enumerate(body.splitlines())))
        else:
            out.append(wrapper.fill(body))
    return "\n\n".join(out)
