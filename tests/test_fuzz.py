"""Property-based fuzzing (issue 12): `brax-diff report` over a fixture SLM-Lab spec and a
fixture Brax ``train()`` that Hypothesis mutates (YAML structure, aliases and merges,
numbers of any size, deep nesting; defaults replaced by arbitrary expressions, parameters
renamed and reordered, functions renamed).

Whatever the input, a run must end without a traceback, exit 0 or 2 (2 with one
``error:`` line), give byte-identical output when run again (the second run reads the
fact cache the first one wrote), and finish in bounded time.

The examples are derandomized so CI runs the same ones every time;
``HYPOTHESIS_PROFILE=fuzz`` runs many more, at random.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import textwrap
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brax_fixtures as bfx
import slm_fixtures as sfx
from brax_diff.cli import main
from gitfixture import add_commit, make_repo

settings.register_profile("ci", max_examples=40, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("fuzz", max_examples=500, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

MAPPING = """
family_defaults:
  dm_control: [ppo_fx]
variants:
  ppo_fx: {family: dm_control, envs: [BallInCup]}
"""
SPEC = textwrap.dedent(sfx.SPEC).lstrip("\n")  # as committed
TRAIN = textwrap.dedent(bfx.TRAIN_OLD).lstrip("\n")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    make_repo(root / "brax", [bfx.BRAX_OLD], origin="https://github.com/google/brax.git")
    make_repo(root / "playground", [bfx.PLAYGROUND])
    make_repo(root / "slm", [sfx.repo_files()], origin="https://github.com/kengz/SLM-Lab.git")
    (root / "work").mkdir()
    (root / "work" / "mapping.yaml").write_text(MAPPING)
    (root / "work" / "brax-diff.toml").write_text(
        f'brax-repo = "{root / "brax"}"\nplayground-repo = "{root / "playground"}"\nslm-repo = "{root / "slm"}"\n'
        'mapping = "mapping.yaml"\n')
    return root


def run_report(workspace: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    os.chdir(workspace / "work")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["report", "--env", "BallInCup", "--format", "json", "--output", "-", *args])
    except BaseException:  # noqa: BLE001 (the property: nothing escapes main())
        pytest.fail(f"brax-diff report {' '.join(args)} raised:\n{traceback.format_exc()}")
    finally:
        os.chdir(previous)
    return code, out.getvalue(), err.getvalue()


def check_runs(workspace: Path, *args: str) -> None:
    first = run_report(workspace, *args)
    code, out, err = first
    assert code in (0, 2), (code, err)
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and err.endswith(errors[0] + "\n") and not out, err
    else:
        assert json.loads(out)["scope"]["env"] == "BallInCup"
    assert "Traceback" not in err
    assert run_report(workspace, *args) == first  # byte-identical, from the fact cache this time


# -- YAML ------------------------------------------------------------------------------------

_KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
_SCALARS = st.one_of(
    st.integers(-10**40, 10**40).map(str),
    st.integers(0, 6000).map(lambda n: "9" * n or "0"),
    st.floats().map(repr),
    st.sampled_from(["null", "~", "true", "no", "0", "-1", "1e-8", ".inf", ".nan", "0x1F", "1_000", "0o17",
                     "'${max_frame}'", '"${nope}"', "${env}", "[]", "{}", "''", "*policy", "*nope", "!!binary AA==",
                     "!!python/object:os.system x", "&x 1", "|\n  block"]),
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=12).map(json.dumps),
)
_FLOW = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        st.dictionaries(_KEY, inner, max_size=4).map(lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}")),
    max_leaves=12)
_DEEP = st.one_of(st.integers(1, 60), st.integers(61, 300)).map(lambda n: "[" * n + "]" * n)
_VALUE_LINE = r"^(\s*)(-\s+)?([A-Za-z_][\w]*):\s+\S"


def _bomb(levels: int, width: int) -> str:
    lines = ["_b0: &b0 {" + ", ".join(f"k{i}: {i}" for i in range(width)) + "}"]
    lines += [f"_b{lv}: &b{lv} {{" + ", ".join(f"k{i}: *b{lv - 1}" for i in range(width)) + "}"
              for lv in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@st.composite
def mutated_spec(draw) -> str:
    lines = SPEC.splitlines()
    prefix = ""
    for _ in range(draw(st.integers(1, 4))):
        # Mostly mutations that keep the YAML well formed (so the extractor sees them), some that break it.
        op = draw(st.sampled_from(["value"] * 6 + ["alias"] * 2 + ["merge"] * 2 + ["bomb", "many", "insert",
                                                                                  "duplicate", "delete", "swap",
                                                                                  "indent"]))
        index = draw(st.integers(0, len(lines) - 1))
        line = lines[index]
        indent = line[:len(line) - len(line.lstrip())]
        if op == "value" and ":" in line and not line.lstrip().startswith("#"):
            head = line.split(":", 1)[0]
            lines[index] = f"{head}: {draw(st.one_of(_FLOW, _DEEP))}"
        elif op == "insert":
            lines.insert(index + 1, f"{indent}{draw(_KEY)}: {draw(_FLOW)}")
        elif op == "delete" and len(lines) > 1:
            del lines[index]
        elif op == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif op == "duplicate":
            lines.insert(index, line)
        elif op == "alias" and ":" in line:
            head = line.split(":", 1)[0]
            target = draw(st.sampled_from(["*policy", "*value", "*env", "*algorithm", "*net", "*b0", "*b3", "*nope"]))
            lines[index] = f"{head}: {target}"
        elif op == "bomb":
            prefix = _bomb(draw(st.integers(1, 7)), draw(st.integers(1, 10)))
        elif op == "merge":
            lines.insert(index + 1, f"{indent}<<: {draw(st.sampled_from(['*env', '*algorithm', '*b2', '[*env, *net]', '3']))}")
        elif op == "many":
            lines[index + 1:index + 1] = [f"{indent}k{i}: {i}" for i in range(draw(st.integers(10, 3000)))]
        elif op == "indent":
            lines[index] = " " * draw(st.integers(0, 9)) + line.lstrip()
    return prefix + "\n".join(lines) + "\n"


@given(spec=mutated_spec())
def test_a_mutated_spec_never_crashes_and_reruns_byte_identically(workspace, spec):
    sha = add_commit(workspace / "slm", {sfx.SPEC_PATH: spec}, message="fuzzed spec")
    check_runs(workspace, "--slm", sha)


# -- Python ----------------------------------------------------------------------------------

_NUMBER = st.one_of(st.integers(-10**30, 10**30).map(str), st.integers(1, 6000).map(lambda n: "9" * n),
                    st.floats(allow_nan=False).map(repr), st.sampled_from(["0", "1e308", "1e-320", "0x10", "1_0"]))
_ATOM = st.one_of(_NUMBER, st.sampled_from(["True", "None", "num_envs", "batch_size", "'welford'", "b'x'", "(32,)",
                                           "[]", "{}", "f(1)", "jax.nn.relu", "lambda x: x", "...", "'%09d'"]))
_OPERATORS = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "@", "<<", "and", "if True else"])
_EXPR = st.recursive(
    _ATOM,
    lambda inner: st.one_of(
        st.tuples(inner, _OPERATORS, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        inner.map(lambda e: f"-{e}"),
        st.lists(inner, max_size=3).map(lambda items: "(" + ", ".join(items) + ",)"),
        st.tuples(inner, st.integers(0, 10**6)).map(lambda t: f"({t[0]},) * {t[1]}")),
    max_leaves=10)
_DEEP_CODE = st.one_of(st.integers(1, 60), st.integers(61, 3000)).map(lambda n: "(" * n + "1" + ")" * n)
_SIGNATURE = r"^    (\w+)(: [\w.\[\], |]+)? = (.+),$"
_FUNCTIONS = ["def train(", "def training_step(", "def sgd_step(", "def minibatch_step(", "jax.lax.scan("]


@st.composite
def mutated_train(draw) -> str:
    lines = TRAIN.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["default"] * 4 + ["rename", "reorder", "function", "delete", "deep"]))
        params = [i for i, line in enumerate(lines) if re.match(_SIGNATURE, line)]
        if not params and op in ("default", "rename", "reorder"):
            continue
        if op == "default":
            index = draw(st.sampled_from(params))
            name = re.match(_SIGNATURE, lines[index]).group(1)
            lines[index] = f"    {name} = {draw(st.one_of(_EXPR, _DEEP_CODE))},"
        elif op == "rename":
            index = draw(st.sampled_from(params))
            lines[index] = lines[index].replace(" ", f" {draw(_KEY)}", 1) if draw(st.booleans()) else \
                re.sub(r"^    (\w+)", lambda m: f"    {m.group(1)}_{draw(_KEY)}", lines[index])
        elif op == "reorder":
            shuffled = draw(st.permutations([lines[i] for i in params]))
            for i, line in zip(params, shuffled):
                lines[i] = line
        elif op == "function":
            old = draw(st.sampled_from(_FUNCTIONS))
            lines = [line.replace(old, old.replace("(", f"_{draw(_KEY)}(")) for line in lines]
        elif op == "delete":
            del lines[draw(st.integers(0, len(lines) - 1))]
        elif op == "deep":
            lines.append(f"x = {draw(_DEEP_CODE)}")
    return "\n".join(lines) + "\n"


@given(train=mutated_train())
def test_a_mutated_train_never_crashes_and_reruns_byte_identically(workspace, train):
    sha = add_commit(workspace / "brax", {bfx.TRAIN: train}, message="fuzzed train")
    check_runs(workspace, "--brax", sha)
