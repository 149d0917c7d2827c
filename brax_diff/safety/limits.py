"""Bounds on the work any input can cause, and the readers that enforce them.

Specs, rules, mappings, settings, reports and caches are read through these helpers, so
a hostile or corrupt file costs at most a bounded amount of time and memory and ends in
one :class:`LimitExceeded` line that names the file, the line and the limit:

* nesting: :data:`MAX_NESTING` levels of mappings/lists (YAML, JSON, TOML, Python code);
* expansion: :data:`MAX_VALUES` values one YAML document may expand to through aliases;
* numbers: integers of at most :data:`MAX_INT_DIGITS` digits, read or computed;
* sequences: strings and lists computed by ``*`` or ``+`` (or a string method, a join, a
  format width) of at most :data:`MAX_SEQUENCE` items.

:func:`operation_refused` is the one check every evaluator (Brax literals, SLM-Lab's
batch guard, rule fix templates) asks before computing ``a ** b`` or ``s * n``.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from typing import Any

from ..errors import BraxDiffError

# Real inputs stay far below these: upstream specs nest about 8 levels, Python code about
# 16 (ast depth), reports about 10; the largest spec variant expands to a few thousand values.
MAX_NESTING = 64
MAX_VALUES = 200_000
MAX_INT_DIGITS = 100
MAX_SEQUENCE = 100_000
MAX_FILE_BYTES = 64 * 1024 * 1024  # one input file (a spec blob, a rules file, a report)

_LOG10_2 = math.log10(2)


class LimitExceeded(BraxDiffError):
    """An input asked for more work than the limits allow (exit 2, one line)."""


def at_line(origin: str, line: int | None) -> str:
    """``file: line N`` (or just ``file`` when the line is unknown)."""
    return f"{origin}: line {line}" if line else origin


# --------------------------------------------------------------------------------------
# Numbers and operations
# --------------------------------------------------------------------------------------


def int_digits(value: int) -> int:
    """Decimal digits of ``value`` (without computing its decimal form)."""
    return int(abs(value).bit_length() * _LOG10_2) + 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def operation_refused(op: str, left: Any, right: Any) -> str | None:
    """Why ``left op right`` must not be computed (its result would pass a limit), else None.

    ``op`` is Python's symbol (``"**"``, ``"*"``, ``"+"``, ``"%"``, ...). Only the size of
    the result is judged, from the operands' sizes, before anything is computed.
    """
    if op == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        digits = right * (abs(left).bit_length() - 1) * _LOG10_2
        if digits > MAX_INT_DIGITS:
            return f"{left} ** {right} has more than {MAX_INT_DIGITS} digits (limit)"
    if op == "*":
        if _is_int(left) and _is_int(right) and int_digits(left) + int_digits(right) - 1 > MAX_INT_DIGITS:
            return f"a product with more than {MAX_INT_DIGITS} digits (limit)"
        for seq, count in ((left, right), (right, left)):
            size = _length(seq)
            if size is not None and _is_int(count) and size * max(count, 0) > MAX_SEQUENCE:
                return f"a repeated sequence longer than {MAX_SEQUENCE} items (limit)"
    if op in ("+", "-") and _is_int(left) and _is_int(right) and max(int_digits(left), int_digits(right)) > MAX_INT_DIGITS:
        return f"an integer with more than {MAX_INT_DIGITS} digits (limit)"
    if op == "+":
        sizes = (_length(left), _length(right))
        if None not in sizes and sizes[0] + sizes[1] > MAX_SEQUENCE:
            return f"a concatenation longer than {MAX_SEQUENCE} items (limit)"
    if op == "<<" and _is_int(left) and _is_int(right) and left and right > 0 and \
            (abs(left).bit_length() + right) * _LOG10_2 > MAX_INT_DIGITS:
        return f"a shift to more than {MAX_INT_DIGITS} digits (limit)"
    if op == "%" and isinstance(left, (str, bytes)):
        # printf-style formatting takes widths from the format string ("%0999999999d").
        return "%-formatting of a string is not evaluated"
    return None


_WIDTHS = re.compile(r"\d+")


def format_spec_refused(spec: str) -> str | None:
    """Why a format spec (``">999999999"``, ``".5000f"``) must not be applied: a width or
    precision past MAX_SEQUENCE makes a string that long (or a float's digits that many)."""
    if any(len(run) > 6 or int(run) > MAX_SEQUENCE for run in _WIDTHS.findall(spec)):
        return f"a format width or precision over {MAX_SEQUENCE} (limit)"
    return None


_PERCENT_SPECS = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d*)(?:\.(\*|\d*))?")
_BRACE_SPECS = re.compile(r"\{[^{}]*?:([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}")


def template_refused(template: str, style: str) -> str | None:
    """Why ``template % args`` (style ``%``) or ``template.format(...)`` (style ``{}``) must
    not be computed: a width or precision in it passes MAX_SEQUENCE, or comes from an argument
    (``%*d``, ``{:{}}``), which the check cannot see before formatting."""
    if style == "%":
        specs = [width + "." + precision for width, precision in _PERCENT_SPECS.findall(template)]
    else:
        specs = _BRACE_SPECS.findall(template)
    for spec in specs:
        if "*" in spec and style == "%" or "{" in spec:
            return "a format width taken from an argument is not evaluated"
        refused = format_spec_refused(spec)
        if refused:
            return refused
    return None


def result_refused(value: Any) -> str | None:
    """Why a computed value must not be kept: an integer over MAX_INT_DIGITS digits or a
    string/list over MAX_SEQUENCE items (checked after an operation whose cost is bounded)."""
    if _is_int(value) and int_digits(value) > MAX_INT_DIGITS:
        return f"an integer with more than {MAX_INT_DIGITS} digits (limit)"
    size = _length(value)
    if size is not None and size > MAX_SEQUENCE:
        return f"a sequence longer than {MAX_SEQUENCE} items (limit)"
    return None


def int_literal_refused(text: str) -> str | None:
    """Why an integer literal (``1_000``, ``0x10``, 5,001 digits) must not be converted."""
    digits = sum(ch.isalnum() for ch in text)
    if digits > MAX_INT_DIGITS:
        return f"an integer of {digits} digits; the limit is {MAX_INT_DIGITS}"
    return None


# --------------------------------------------------------------------------------------
# Text and JSON
# --------------------------------------------------------------------------------------


def decode_text(data: bytes, origin: str) -> str:
    """UTF-8 text, or one line naming the file and the offending byte."""
    if len(data) > MAX_FILE_BYTES:
        raise LimitExceeded(f"{origin}: {len(data)} bytes; the limit is {MAX_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BraxDiffError(f"{at_line(origin, line)}: not UTF-8 text (byte 0x{data[exc.start]:02x} "
                            f"at offset {exc.start})") from None


# Strings (and TOML comments) first, so brackets inside them are not counted.
_STRINGS = {
    "json": r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"',  # the loop unrolled: 4x faster in re, same strings
    "python": r'''"""(?:\\.|[\s\S])*?"""|\'\'\'(?:\\.|[\s\S])*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*''',
    "toml": r'''"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*''',
}
_BRACKETS = {"json": "[]{}", "python": "[](){}", "toml": "[]{}"}
_TOKENS = {syntax: re.compile(f"{strings}|[{re.escape(_BRACKETS[syntax])}\\n]") for syntax, strings in _STRINGS.items()}
# Everything but the brackets outside strings: removed in one C-speed pass (a quote that opens
# no string goes alone, as the token scan skips it), leaving the brackets to count.
_NOT_BRACKETS = {syntax: re.compile(f"{strings}|[^{re.escape(_BRACKETS[syntax])}\"'#]+|[\"'#]")
                 for syntax, strings in _STRINGS.items()}
_STEPS = {"[": 1, "{": 1, "(": 1, "]": -1, "}": -1, ")": -1}


def check_nesting(text: str, origin: str, syntax: str = "json") -> None:
    """Reject JSON, TOML or Python brackets nested deeper than MAX_NESTING before a recursive
    parser meets them (libcst crashes the interpreter past a few thousand)."""
    brackets = _NOT_BRACKETS[syntax].sub("", text)
    # The deepest nesting, counted in C (a report reads a few hundred cached facts files).
    if max(itertools.accumulate(map(_STEPS.__getitem__, brackets)), default=0) <= MAX_NESTING:
        return
    depth, line = 0, 1  # too deep: find the line to name
    for match in _TOKENS[syntax].finditer(text):
        token = match.group()
        if token in "[{(":
            depth += 1
            if depth > MAX_NESTING:
                raise LimitExceeded(f"{at_line(origin, line)}: nesting deeper than {MAX_NESTING} levels (limit)")
        elif token in "]})":
            depth -= 1
        else:
            line += token.count("\n")


def check_code_depth(source: str, origin: str) -> None:
    """Reject Python whose syntax tree nests deeper than MAX_NESTING (upstream code: 19).

    ``ast`` parses without running anything; code it cannot parse (a newer grammar) is left
    to libcst, whose recursion the caller bounds."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg):
            raise LimitExceeded(f"{at_line(origin, exc.lineno)}: nesting deeper than Python's parser allows") from None
        return
    except (RecursionError, MemoryError):
        raise LimitExceeded(f"{origin}: nesting deeper than Python's parser allows") from None
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise LimitExceeded(f"{at_line(origin, getattr(node, 'lineno', None))}: code nests deeper than "
                                f"{MAX_NESTING} levels (limit)")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _bounded_int(text: str) -> int:
    refused = int_literal_refused(text)
    if refused:
        raise ValueError(refused)
    return int(text)


def load_json(text: str, origin: str) -> Any:
    """``json.loads`` within the limits; a bad document is ValueError (JSONDecodeError or a limit)."""
    check_nesting(text, origin)
    return json.loads(text, parse_int=_bounded_int)


__all__ = ["MAX_NESTING", "MAX_VALUES", "MAX_INT_DIGITS", "MAX_SEQUENCE", "MAX_FILE_BYTES", "LimitExceeded",
           "operation_refused", "int_literal_refused", "format_spec_refused", "template_refused", "result_refused", "int_digits", "decode_text", "load_json", "check_nesting",
           "check_code_depth", "at_line"]
