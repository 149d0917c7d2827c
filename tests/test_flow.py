"""The data-flow engine (extractors/engine/flow.py) on small hand-written modules."""

from __future__ import annotations

import pytest

from brax_diff.sources.repository import Repository
from brax_diff.extractors.engine import flow
from brax_diff.extractors.engine.flow import Engine, Loader, const, describe, linear, plain, sym
from gitfixture import make_repo

CONFIG = '''
import math
import os

import torch
from pkg import helpers
from pkg.helpers import *

SCALE = 2 * 0.25


def set_attr(obj, attr_dict, keys=None):
    if attr_dict is None:
        return obj
    if keys is not None:
        attr_dict = {k: attr_dict[k] for k in keys if k in attr_dict}
    for attr, val in attr_dict.items():
        setattr(obj, attr, val)
    return obj


class Base:
    def __init__(self, spec):
        self.spec = spec
        self.setup()

    def setup(self):
        self.base_ran = True


class Algo(Base):
    def setup(self):
        super().setup()
        set_attr(self, dict(coef=1.0, size=4))
        set_attr(self, self.spec, ["coef", "size", "horizon"])
        if self.size % 8 != 0:
            self.size = math.ceil(self.size / 8) * 8
        self.eps = helpers.twice(self.spec.get("eps", 0.1))

    def loss(self, pred, target):
        return 2 * self.coef * self.loss_fn(pred, target)

    def train(self):
        return "first"

    def train(self):
        return "second"


def chain(x):
    y = x * 0.5
    y = y * SCALE
    y += 1
    return y


def branches(flag):
    if torch.cuda.is_available():
        value = 1
    else:
        value = 2
    if flag:
        same = 3
    else:
        same = 3
    return value, same


def checks(spec):
    assert "shared" in spec, "Specify shared"
    return spec["shared"]


def maybe(spec):
    if torch.cuda.is_available():
        raise ValueError("only on some machines")
    return spec["k"]


def losses(v_error, vf):
    v_loss = v_error * v_error
    v_loss = torch.mean(v_loss) * vf
    v_loss = v_loss * 0.5
    return v_loss


def from_star():
    return star_value


def profiled(fn):
    def wrapper(*args):
        if os.getenv("PROFILE", "false").lower() == "true":
            return fn(*args)
        return fn(*args)
    return wrapper


@profiled
def traced(x):
    return torch.clamp(x, 0, 1)


def env_reads():
    return os.getenv("PROFILE"), os.environ.get("PROFILE", "x"), os.getenv("OTHER", "d")
'''

HELPERS = '''
star_value = 7


def twice(x):
    return 2 * x
'''


# A loss called the way a trainer calls it: a partial binds one argument, the step passes
# another as a keyword, a wrapper forwards **kwargs, and the library scans and differentiates.
STEPS = '''
import functools

import jax


def loss(params, data, coef=1e-4, scale=1.0):
    return coef * scale * params


def wrap(fn):
    g = jax.value_and_grad(fn)

    def h(*args, **kwargs):
        return g(*args, **kwargs)
    return h


def train(scale, coef):
    loss_fn = functools.partial(loss, scale=scale)
    grad_fn = wrap(loss_fn)

    def step(carry, data, coef=None):
        return grad_fn(carry, data,
                       coef=coef)

    def epoch(carry):
        return jax.lax.scan(functools.partial(step, coef=coef * 2), carry, ())

    def hidden(carry, options):
        return grad_fn(carry, None, **options)

    return epoch, hidden
'''


@pytest.fixture(scope="module")
def engine_repo(tmp_path_factory):
    path = tmp_path_factory.mktemp("flow") / "repo"
    shas = make_repo(path, [{"pkg/__init__.py": "", "pkg/config.py": CONFIG, "pkg/helpers.py": HELPERS,
                             "pkg/steps.py": STEPS, "ns/inner/mod.py": "VALUE = 3\n"}])
    return Repository(path, "slm").resolve(shas[0])


def new_engine(snapshot, **kwargs) -> tuple[Engine, flow.Module]:
    engine = Engine(Loader(snapshot, ("pkg", "ns")), **kwargs)
    return engine, engine.module("pkg.config")


def test_constants_fold_through_statements_and_module_names(engine_repo):
    engine, module = new_engine(engine_repo)
    result = engine.call(engine.lookup(module, "chain"), const(3.0))
    assert plain(result) == 3.0 * 0.5 * 0.5 + 1


def test_constructor_binds_arguments_runs_super_and_follows_helpers(engine_repo):
    engine, module = new_engine(engine_repo)
    algo = engine.call(engine.lookup(module, "Algo"), const({"coef": 0.5, "size": 10, "horizon": 16, "eps": 0.2}))
    attrs = {k: plain(v) for k, v in algo.data.attrs.items() if flow.is_const(v)}
    assert attrs["coef"] == 0.5 and attrs["horizon"] == 16 and attrs["base_ran"] is True
    assert attrs["size"] == 16  # rounded up to a multiple of 8 by the guard
    assert attrs["eps"] == 0.4  # through a helper of another module


def test_symbolic_values_keep_their_constant_factors(engine_repo):
    engine, module = new_engine(engine_repo)
    algo = engine.call(engine.lookup(module, "Algo"), const({"coef": 0.5}))
    value = engine.call(engine.getattr(algo, "loss"), sym("param", "p"), sym("param", "t"))
    parts = linear(value)
    assert parts.coefficient == 1.0 and [describe(a) for a in parts.atoms] == ["Algo(...).loss_fn(p, t)"]
    v_loss = engine.call(engine.lookup(module, "losses"), sym("param", "e"), const(0.5))
    assert linear(v_loss).coefficient == 0.25  # `* vf` then `* 0.5` on the next line


def test_the_last_def_is_the_one_python_keeps(engine_repo):
    engine, module = new_engine(engine_repo)
    algo = engine.call(engine.lookup(module, "Algo"), const({}))
    assert plain(engine.call(engine.getattr(algo, "train"))) == "second"


def test_undecided_condition_merges_both_paths(engine_repo):
    engine, module = new_engine(engine_repo)
    result = engine.call(engine.lookup(module, "branches"), sym("param", "flag"))
    value, same = result.data
    assert isinstance(value.data, flow.Phi) and sorted(plain(o) for o in value.data.options) == [1, 2]
    assert "torch.cuda.is_available()" in value.data.why
    assert plain(same) == 3  # both paths agree: no Phi


def test_assumptions_decide_external_calls(engine_repo):
    engine, module = new_engine(engine_repo, assume={"torch.cuda.is_available": False})
    value, _ = engine.call(engine.lookup(module, "branches"), const(True)).data
    assert plain(value) == 2


def test_a_raise_every_run_reaches_is_a_definite_failure_with_its_line(engine_repo):
    engine, module = new_engine(engine_repo)
    engine.call(engine.lookup(module, "checks"), const({"type": "X"}))
    failures = engine.definite_failures()
    assert [f.kind for f in failures] == ["AssertionError", "KeyError"]
    assert "Specify shared" in failures[0].message
    assert failures[0].where.line == CONFIG.lstrip("\n").splitlines().index(
        '    assert "shared" in spec, "Specify shared"') + 1


def test_a_raise_only_some_paths_reach_is_not_definite(engine_repo):
    engine, module = new_engine(engine_repo)
    result = engine.call(engine.lookup(module, "maybe"), const({"k": 5}))
    assert plain(result) == 5 and engine.definite_failures() == []
    assert [f.definite for f in engine.failures] == [False]


def test_star_imports_and_namespace_packages(engine_repo):
    engine, module = new_engine(engine_repo)
    assert plain(engine.call(engine.lookup(module, "from_star"))) == 7
    namespace = engine.module("ns.inner.mod")
    assert plain(engine.lookup(namespace, "VALUE")) == 3


def test_lines_name_where_values_are_written_and_transformed(engine_repo):
    engine, module = new_engine(engine_repo)
    result = engine.call(engine.lookup(module, "chain"), const(3.0))
    text = CONFIG.lstrip("\n").splitlines()
    expected = {i + 1 for i, line in enumerate(text) if line.strip() in (
        "SCALE = 2 * 0.25", "y = x * 0.5", "y = y * SCALE", "y += 1")}
    assert {p.line for p in flow.all_lines(result)} == expected


def test_environ_answers_the_environment_variables_it_names_and_no_others(engine_repo):
    engine, module = new_engine(engine_repo, environ={"PROFILE": "false"})
    profile, also, other = engine.call(engine.lookup(module, "env_reads")).data
    assert plain(profile) == "false" and plain(also) == "false"
    assert not flow.is_const(other) and "os.getenv" in describe(other)


def test_a_decided_environment_variable_runs_a_decorated_function_once(engine_repo):
    for environ, clamps in (({"PROFILE": "false"}, 1), (None, 2)):  # undecided: both sides of the if
        engine, module = new_engine(engine_repo, environ=environ, watch={"clamp"})
        engine.call(engine.lookup(module, "traced"), sym("param", "x"))
        assert len([c for c in engine.calls if c.name == "clamp"]) == clamps


def test_a_call_through_scan_partials_keywords_and_kwargs_reaches_the_observed_function(engine_repo):
    engine = Engine(Loader(engine_repo, ("pkg",)))
    module = engine.module("pkg.steps")
    epoch, hidden = engine.call(engine.lookup(module, "train"), const(3.0), const(0.5)).data
    loss = engine.lookup(module, "loss").data
    with engine.observing(loss) as seen:
        engine.call(epoch, sym("param", "carry"))
        engine.call(hidden, sym("param", "carry"), sym("param", "options"))
    (call,) = seen.invocations  # the scanned step's call; the one with **options is not made
    assert plain(call.kwargs["coef"]) == 1.0 and plain(call.kwargs["scale"]) == 3.0  # 0.5 * 2, bound by the partial
    text = STEPS.lstrip("\n").splitlines()
    keyword = text.index("                       coef=coef)") + 1
    passing = [engine.where(frame.module, arg).line for frame, node in call.sites for arg in node.args
               if arg.keyword is not None and arg.keyword.value == "coef"]
    assert keyword in passing  # the step's keyword is among the calls in progress
    (frame, node, why), = seen.unfollowed
    assert frame.function.name == "hidden" and why == "`**options` is not a known dict"
    assert plain(engine.call(engine.lookup(module, "loss"), const(2.0), const(0))) == 2e-4  # not observed: it runs


def test_a_modules_getattr_answers_a_name_it_does_not_bind(tmp_path):
    """PEP 562: ``module.NAME`` that the module does not bind asks its ``__getattr__`` (Playground's
    family packages compute ``ALL_ENVS`` so); a name it refuses still raises."""
    make_repo(tmp_path / "r", [{
        "pkg/__init__.py": "",
        "pkg/family.py": '''
_envs = {"A": 1, "B": 2}


def __getattr__(name):
  if name == "ALL_ENVS":
    return tuple(_envs.keys())
  raise AttributeError(name)
''',
        "pkg/user.py": '''
from pkg import family

ALL = family.ALL_ENVS + ("C",)
''',
    }])
    engine = Engine(Loader(Repository(tmp_path / "r", "x").resolve("HEAD"), ("pkg",)))
    assert plain(engine.lookup(engine.module("pkg.user"), "ALL")) == ("A", "B", "C")
    assert engine.lookup(engine.module("pkg.family"), "MISSING") is None


ENUMS = '''
import enum


class Schedule(enum.Enum):
    NONE = "NONE"
    ADAPTIVE = "ADAPTIVE"


def adaptive(name):
    schedule = Schedule(name or Schedule.NONE)
    return schedule == Schedule.ADAPTIVE
'''


def test_an_enum_called_with_a_members_value_is_that_member(tmp_path):
    """Brax's `LRSchedule(learning_rate_schedule or LRSchedule.NONE) == LRSchedule.ADAPTIVE_KL`."""
    shas = make_repo(tmp_path / "repo", [{"pkg/__init__.py": "", "pkg/enums.py": ENUMS}])
    engine = Engine(Loader(Repository(tmp_path / "repo", "slm").resolve(shas[0]), ("pkg",)))
    adaptive = engine.lookup(engine.module("pkg.enums"), "adaptive")
    assert plain(engine.call(adaptive, const(None))) is False
    assert plain(engine.call(adaptive, const("ADAPTIVE"))) is True
    assert not flow.is_const(engine.call(adaptive, sym("param", "name")))  # a value not known stays undecided


def test_an_object_of_a_class_read_is_no_builtin_type(tmp_path):
    """isinstance(obj, dict) of an object whose class (and its bases) the engine reads is False;
    a class deriving from a builtin or an external class stays undecided."""
    shas = make_repo(tmp_path / "repo", [{"pkg/__init__.py": "", "pkg/kinds.py": '''
import somelib


class Plain:
    pass


class Mapping(dict):
    pass


class Outside(somelib.Base):
    pass


def kinds():
    return isinstance(Plain(), dict), isinstance(Plain(), (int, str)), isinstance(Mapping(), dict), \\
        isinstance(Outside(), dict)
'''}])
    engine = Engine(Loader(Repository(tmp_path / "repo", "x").resolve(shas[0]), ("pkg",)))
    plain_dict, plain_scalar, mapping, outside = engine.call(
        engine.lookup(engine.module("pkg.kinds"), "kinds")).data
    assert (plain(plain_dict), plain(plain_scalar)) == (False, False)
    assert not flow.is_const(mapping) and not flow.is_const(outside)

def test_two_names_read_from_a_module_that_is_not_there_are_not_the_same_value(tmp_path):
    """An import of a module the package lacks is one Unknown, and reading or calling it hands the
    same Unknown back: `==` and `is` of two such names stay undecided, never true."""
    shas = make_repo(tmp_path / "repo", [{"pkg/__init__.py": "", "pkg/user.py": '''
from pkg import absent


def same(name):
    schedule = absent.Schedule(name or absent.Schedule.NONE)
    return schedule == absent.Schedule.ADAPTIVE, schedule is absent.Schedule.ADAPTIVE
'''}])
    engine = Engine(Loader(Repository(tmp_path / "repo", "x").resolve(shas[0]), ("pkg",)))
    equal, same = engine.call(engine.lookup(engine.module("pkg.user"), "same"), const(None)).data
    assert not flow.is_const(equal) and not flow.is_const(same)
