import pytest

from brax_diff.extractors.engine.pyast import Code, NotLiteral, PyModule, literal

SOURCE = '''
def train(
    env,
    num_timesteps: int,
    learning_rate: float = 1e-4,
    steps: int = 60_000_000,
    layers=(32,) * 4,
    name: str = "welford",
    clip: float | None = None,
    factory=nets.make,
    neg=-0.5,
):
  pass
'''


def test_signature_defaults_values_and_lines():
    mod = PyModule(SOURCE, "train.py")
    fn = mod.function("train")
    defaults = mod.signature_defaults(fn)
    assert set(defaults) == {"learning_rate", "steps", "layers", "name", "clip", "factory", "neg"}
    assert defaults["learning_rate"].value == 1e-4 and defaults["learning_rate"].line == 5
    assert defaults["steps"].value == 60_000_000
    assert defaults["layers"].value == (32, 32, 32, 32)
    assert defaults["name"].value == "welford"
    assert defaults["clip"].value is None and defaults["clip"].line == 9
    assert defaults["factory"].value == Code("nets.make")
    assert defaults["neg"].value == -0.5
    assert mod.function("missing") is None


def test_literal_rejects_calls_and_resolves_names():
    mod = PyModule("a = f(1)\nb = X * 2\n")
    call, binop = [n.value for n in mod.module.body[0].body + mod.module.body[1].body]
    with pytest.raises(NotLiteral):
        literal(call)
    assert literal(binop, {"X": 21}) == 42


# -- limits (issue 12) -------------------------------------------------------------------------

def _default(expression: str):
    mod = PyModule(f"def train(x={expression}):\n  pass\n", "train.py")
    return mod.signature_defaults(mod.function("train"))["x"].value


@pytest.mark.parametrize("expression, message", [
    # (10**10**10 runs in a process of its own: test_extract_brax, since it hung before.)
    ("9" * 5001, "train.py: line 1: an integer of 5001 digits; the limit is 100"),
    ("'x' * 10**6", "train.py: line 1: a repeated sequence longer than 100000 items (limit)"),
    ("(1,) * 4 * 10**5", "train.py: line 1: a repeated sequence longer than 100000 items (limit)"),
    ("2**400", "train.py: line 1: 2 ** 400 has more than 100 digits (limit)"),
    ("2**300 * 2**300", "train.py: line 1: a product with more than 100 digits (limit)"),
])
def test_huge_literals_are_refused_before_they_are_computed(expression, message):
    # A 5,001-digit literal was a ValueError; "x" * 10**9 would have taken a gigabyte.
    from brax_diff.safety.limits import LimitExceeded

    with pytest.raises(LimitExceeded) as caught:
        _default(expression)
    assert str(caught.value) == message


def test_values_within_the_limits_still_evaluate():
    assert _default("2**64") == 18446744073709551616
    assert _default("(256,) * 4") == (256, 256, 256, 256)
    assert _default("10**99") == 10**99
    assert _default("'%05d' % 3") == Code("'%05d' % 3")  # %-formatting is not evaluated ("%0999999999d")
    assert _default("-'a'") == Code("-'a'") and _default("{[1]: 2}") == Code("{[1]: 2}")


@pytest.mark.parametrize("source, message", [
    ("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "f.py: line 1: nesting deeper than 64 levels (limit)"),
    ("x = " + "[" * 100 + "]" * 100 + "\n", "f.py: line 1: nesting deeper than 64 levels (limit)"),
    ("x = " + "+".join(["1"] * 400) + "\n", "f.py: line 1: code nests deeper than 64 levels (limit)"),
    ("if a:\n  pass\n" + "elif a:\n  pass\n" * 100, "f.py: line 1\\d\\d: code nests deeper than 64 levels (limit)"),
])
def test_deeply_nested_code_stops_at_a_limit_naming_the_line(source, message):
    # 5,000 parentheses crashed the interpreter in libcst (SIGSEGV); 100 nested lists or a
    # 400-term sum were RecursionErrors.
    from brax_diff.safety.limits import LimitExceeded

    with pytest.raises(LimitExceeded, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        PyModule(source, "f.py")


def test_a_flat_chain_libcst_nests_is_a_syntax_error():
    with pytest.raises(SyntaxError, match=r"^f.py: cannot parse: nested deeper than the recursion limit$"):
        PyModule("x = " + " and ".join(["a"] * 5000) + "\n", "f.py")


# -- start lines without libcst's PositionProvider (issue 14) ------------------------------

_LINES_SOURCE = '''"""Module docstring
over two lines."""
import os  # comment


@decorator(
    arg=1,
)
def f(a,
      b=(1,
         2),
      *, c="x\\
y"):
    x = """a
b"""; y = 2
    if a and \\
            b:
        return [
            a,
            b,
        ]
    elif c:  # comment
        pass
    else:
        z = {"k": (lambda q: q)(
            3)}
    return f"{a}" + \\
        'tail'


class C(Base,
        metaclass=M):
    attr: int = 3

    async def g(self):
        async with x as y, z:
            await y
\r
w = 1\r\nv = 2\r'''


def _provider_lines(module):
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return {node: pos.start.line for node, pos in positions.items()}


@pytest.mark.parametrize("source", [_LINES_SOURCE, "", "\n", "x = 1", "# only a comment\n\n", "if x:\n    pass\n"])
def test_start_lines_match_libcsts_position_provider(source):
    """PyModule's lean codegen state gives every node PositionProvider's start line, and
    visits the nodes in the provider's order (walk() relies on it)."""
    import libcst as cst

    from brax_diff.extractors.engine.pyast import start_lines

    module = cst.parse_module(source)
    lean, expected = start_lines(module), _provider_lines(module)
    assert list(lean) == list(expected)
    assert lean == expected


def test_start_lines_match_on_upstream_files():
    """The same on every Python file of a real checkout (the extractors' own package here)."""
    from pathlib import Path

    import libcst as cst

    from brax_diff.extractors.engine.pyast import start_lines

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "extractors").glob("*.py")) + sorted((root / "brax_diff").glob("*.py"))
    assert files
    for path in files:
        module = cst.parse_module(path.read_text())
        assert start_lines(module) == _provider_lines(module), path


def test_code_and_string_memos_give_libcsts_answers():
    import libcst as cst

    module = PyModule("x = 'a' 'b'\ny = b'z'\nz = (  1 +\n 2 )\n")
    strings = [n for n in module.positions if isinstance(n, (cst.SimpleString, cst.ConcatenatedString))]
    for node in strings:
        assert module.string(node) == node.evaluated_value
        assert module.string(node) == node.evaluated_value  # from the memo
    binary = next(n for n in module.positions if isinstance(n, cst.BinaryOperation))
    assert module.code(binary) == module.module.code_for_node(binary).strip() == module.code(binary)
    kinds = (cst.Assign,)
    assert module.of_kinds(kinds) == tuple(n for n in module.walk() if isinstance(n, kinds))
    assert module.of_kinds(kinds) is module.of_kinds(kinds)


def test_paused_gc_is_reentrant_and_restores_the_collector():
    import gc

    from brax_diff.extractors.engine.pyast import paused_gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer pause alone
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with paused_gc():
            raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a collector the caller turned off stays off
    finally:
        gc.enable()
