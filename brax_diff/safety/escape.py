"""Upstream text in what brax-diff prints: one line on stderr (no GitHub workflow command), data
and properties of a workflow command, and Markdown that forms no link, HTML or code-span exit.

Upstream strings (spec keys, environment and variant names, values, finding messages quoting
them) are chosen by whoever writes the repository; in CI, the runner reads every stdout/stderr
line that starts with ``::`` (after blanks), or holds ``##[`` anywhere, as a workflow command,
and a report's Markdown is rendered where links and HTML act. Today's upstream names need none
of these escapes.
"""

from __future__ import annotations

import re

# What ends a line for the Actions runner (and terminals), and the other control characters
# (a terminal escape sequence can rewrite what was printed above it).
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _percent(match: re.Match) -> str:
    code = ord(match.group())
    return f"%{code:02X}" if code < 0x100 else f"%u{code:04X}"


def one_line(text: str) -> str:
    """``text`` as one line that is no workflow command: CR and LF as GitHub writes them (%0D,
    %0A), other control characters alike, a leading ``::`` as ``%3A:``, and ``##[`` anywhere as
    ``#%23[`` (the runner still reads the legacy ``##[command]`` form wherever it is in a line).
    A plain line is never unescaped by the runner, so ``%`` stays as it is (a message with "50%"
    reads as one)."""
    out = _CONTROL.sub(_percent, str(text)).replace("##[", "#%23[")
    stripped = out.lstrip()
    if stripped.startswith("::"):
        out = out[:len(out) - len(stripped)] + "%3A" + stripped[1:]
    return out


def json_for_a_log(text: str) -> str:
    """JSON text printed where a CI runner reads it: ``##[`` (which can only be inside a JSON
    string) as ``\\u0023#[``, the same string to any JSON reader, no legacy workflow command to
    the runner. No JSON line starts with ``::``."""
    return text.replace("##[", "\\u0023#[")


def command_data(text: str) -> str:
    """A workflow command's message, as GitHub escapes it: the runner unescapes %25, %0D, %0A."""
    return str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def command_property(text: str) -> str:
    """A workflow command's property (file=, title=): also ``:`` and ``,``, which end it."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")


# -- Markdown -------------------------------------------------------------------------------

_NEWLINES = re.compile("[\r\n\u2028\u2029\x85]+")


def md_code(text: str) -> str:
    """``text`` as one inline code span: a fence longer than any run of backticks in it (so a
    backtick cannot close the span early: CommonMark's rule), ``|`` escaped for a table cell (GFM
    honours ``\\|`` inside a span), line breaks as the space a span shows them as."""
    body = _NEWLINES.sub(" ", str(text)).replace("|", "\\|")
    runs = [len(run) for run in re.findall("`+", body)]
    fence = "`" * (max(runs) + 1 if runs else 1)
    pad = " " if runs and (body.startswith("`") or body.endswith("`")) else ""
    return f"{fence}{pad}{body}{pad}{fence}"


# Outside a code span: what opens a link or an image ([, ], and ! before [), raw HTML or an
# autolink (<), code (`), a table column (|), and the backslash that would undo an escape.
_MD_SPECIAL = re.compile(r"([\\`\[\]<>|!])")


def md_text(text: str) -> str:
    """An upstream name as Markdown text: its special characters backslash-escaped (CommonMark
    shows each as itself), line breaks as spaces. ``_`` and ``*`` are left as they are: they
    emphasise at most, and names such as ``Go1_Getup`` keep their committed spelling."""
    return _MD_SPECIAL.sub(r"\\\1", _NEWLINES.sub(" ", str(text)))


# Inside prose that also holds brax-diff's own code spans (a finding's message): a tag or an
# autolink needs "<" before a letter, "/", "!" or "?"; an inline link needs "](".
_HTML_OPEN = re.compile(r"<(?=[A-Za-z/!?])")


def md_prose(text: str) -> str:
    """A message brax-diff wrote around upstream text, for a table cell: no HTML or autolink
    (``<`` before a letter as ``&lt;``), no inline link (``](`` as ``]\\(``), one line, ``|``
    escaped. brax-diff's own backticks stay code spans."""
    # A "|" already escaped stays as it is: a cell built of escaped parts is escaped once.
    out = re.sub(r"(?<!\\)\|", r"\\|", _NEWLINES.sub(" ", str(text)))
    return _HTML_OPEN.sub("&lt;", out).replace("](", "]\\(")
