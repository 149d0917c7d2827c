import pytest

from extractors.pyast import Code, NotLiteral, PyModule, literal

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
    from brax_diff.limits import LimitExceeded

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
    from brax_diff.limits import LimitExceeded

    with pytest.raises(LimitExceeded, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        PyModule(source, "f.py")


def test_a_flat_chain_libcst_nests_is_a_syntax_error():
    with pytest.raises(SyntaxError, match=r"^f.py: cannot parse: nested deeper than the recursion limit$"):
        PyModule("x = " + " and ".join(["a"] * 5000) + "\n", "f.py")
