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
