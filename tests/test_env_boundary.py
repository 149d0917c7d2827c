"""How actions, rewards and observations cross the env boundary, read from hand-written modules
shaped like Playground's, SLM-Lab's and the learners' code: ``env_action_clip``, ``reward_floor``,
``final_observation``, ``action_bounding`` and ``matmul_precision``.

Each reader is checked twice: against the values the shapes are written to have, and, in the
differential tests at the end, against what the same modules compute when executed (numpy stands
in for jax.numpy and torch; nothing upstream is imported)."""

from __future__ import annotations

import textwrap
import types

import numpy as np
import pytest

from brax_diff.extractors.playground.autoreset import read_final_observation
from brax_diff.extractors.playground.env_step import read_action_clip, read_wrapper_action
from brax_diff.extractors.playground.interface import env_facts, family_of
from brax_diff.extractors.playground.reward_floor import read_floor
from brax_diff.extractors.precision import jax_precision, torch_precision
from brax_diff.sources.repository import Repository
from gitfixture import make_repo

BASE = "mujoco_playground/_src/locomotion"
REGISTRY = '''
import functools
from mujoco_playground._src.locomotion.go1 import joystick as go1_joystick
from mujoco_playground._src.locomotion.barkour import joystick as barkour_joystick
from mujoco_playground._src.locomotion.panda import pick as panda_pick

_envs = {
    "Go1JoystickFlatTerrain": functools.partial(go1_joystick.Joystick, task="flat_terrain"),
    "BarkourJoystick": barkour_joystick.Joystick,
    "BarkourSquashed": barkour_joystick.Squashed,
    "BarkourHelper": barkour_joystick.Helper,
    "BarkourBranch": barkour_joystick.Branch,
    "PandaPickCube": panda_pick.PickCube,
    "PandaPickCubeOrientation": panda_pick.PickCubeOrientation,
}
'''
# Motor targets from the action, no clip; the reward clipped at 0 from below.
GO1 = '''
import jax.numpy as jp
from mujoco_playground._src import mjx_env


class Joystick:
  def step(self, state, action):
    motor_targets = self._default_pose + action * self._config.action_scale
    data = mjx_env.step(self.mjx_model, state.data, motor_targets, self.n_substeps)
    rewards = {k: v * self._scales[k] for k, v in self._terms(data).items()}
    reward = jp.clip(sum(rewards.values()) * self.dt, 0.0, 10000.0)
    return mjx_env.State(data, state.obs, reward, 0.0, {}, state.info)
'''
BARKOUR = '''
import jax.numpy as jp
from mujoco_playground._src import mjx_env


class Joystick:
  def step(self, state, action):
    motor_targets = self._default_pose + action * self._config.action_scale
    motor_targets = jp.clip(motor_targets, self._lowers, self._uppers)
    data = mjx_env.step(self.mjx_model, state.data, motor_targets, self.n_substeps)
    reward = jp.clip(sum(self._terms(data).values()) * self.dt, 0.0, 10000.0)
    return mjx_env.State(data, state.obs, reward, 0.0, {}, state.info)


class Squashed:
  def step(self, state, action):
    data = mjx_env.step(self.mjx_model, state.data, jp.tanh(action) * self._scale, self.n_substeps)
    r = sum(self._terms(data).values())
    return mjx_env.State(data, state.obs, r, 0.0, {}, state.info)


class Helper:
  def step(self, state, action):
    ctrl, _ = self._move(state.data.ctrl, action)
    data = mjx_env.step(self.mjx_model, state.data, ctrl, self.n_substeps)
    reward = jp.maximum(sum(self._terms(data).values()), jp.zeros_like(self.dt))
    return mjx_env.State(data, state.obs, reward, 0.0, {}, state.info)


class Branch:
  def step(self, state, action):
    ctrl = action
    if self._clip:
      ctrl = jp.clip(action, -1.0, 1.0)
    data = mjx_env.step(self.mjx_model, state.data, ctrl, self.n_substeps)
    return mjx_env.State(data, state.obs, 1.0, 0.0, {}, state.info)
'''
# A delta added to the last control, clipped; a subclass that inherits step.
PANDA = '''
import jax.numpy as jp
from mujoco_playground._src import mjx_env


class PickCube:
  def step(self, state, action):
    delta = action * self._action_scale
    ctrl = state.data.ctrl + delta
    ctrl = jp.clip(ctrl, self._lowers, self._uppers)
    data = mjx_env.step(self._mjx_model, state.data, ctrl, self.n_substeps)
    reward = jp.clip(sum(self._terms(data).values()), -1e4, 1e4)
    return mjx_env.State(data, state.obs, reward, 0.0, {}, state.info)


class PickCubeOrientation(PickCube):
  pass
'''
# The auto-reset wrapper's step: the returned obs is where(done, first_obs, state.obs).
WRAPPER = '''
import jax
import jax.numpy as jp
from brax.envs.wrappers import training as brax_training


class Wrapper:
  def __init__(self, env):
    self.env = env


def wrap_for_brax_training(env, episode_length=1000, action_repeat=1):
  env = brax_training.VmapWrapper(env)
  env = brax_training.EpisodeWrapper(env, episode_length, action_repeat)
  env = BraxAutoResetWrapper(env)
  return env


class BraxAutoResetWrapper(Wrapper):
  def step(self, state, action):
    reset_obs = state.info['AutoResetWrapper_first_obs']
    state = self.env.step(state, action)

    def where_done(x, y):
      return jp.where(state.done, x, y)

    obs = jax.tree.map(where_done, reset_obs, state.obs)
    next_info = state.info
    return state.replace(obs=obs, info=next_info)
'''
# The shape of the open fix (mujoco_playground PR #320): the step's own observation stored first.
WRAPPER_KEEPS = WRAPPER.replace("    next_info = state.info\n",
                                "    next_info = state.info\n    next_info['AutoResetWrapper_final_obs'] = state.obs\n")
README = '''
# Playground

Users with NVIDIA Ampere GPUs may see JAX's default use of TF32 for matmuls hurt training; run
`export JAX_DEFAULT_MATMUL_PRECISION=highest`.
'''


@pytest.fixture(scope="module")
def playground(tmp_path_factory):
    path = tmp_path_factory.mktemp("pg")
    files = {f"{BASE}/__init__.py": REGISTRY, f"{BASE}/go1/joystick.py": GO1, f"{BASE}/barkour/joystick.py": BARKOUR,
             f"{BASE}/panda/pick.py": PANDA, "mujoco_playground/_src/wrapper.py": WRAPPER, "README.md": README}
    shas = make_repo(path, [files, {"mujoco_playground/_src/wrapper.py": WRAPPER_KEEPS}])
    repo = Repository(path, "playground")
    return repo.resolve(shas[0]), repo.resolve(shas[1])


def _lines(found):
    return [(p.path.rsplit("/", 1)[-1], p.line) for p in found.provenance]


def test_the_control_each_env_hands_the_physics(playground):
    snapshot = playground[0]
    clip = {env: read_action_clip(snapshot, "locomotion", env) for env in
            ("Go1JoystickFlatTerrain", "BarkourJoystick", "BarkourSquashed", "PandaPickCube",
             "PandaPickCubeOrientation", "BarkourHelper", "BarkourBranch")}
    assert clip["Go1JoystickFlatTerrain"].value == "none" and _lines(clip["Go1JoystickFlatTerrain"]) == [
        ("joystick.py", 8)]
    assert clip["BarkourJoystick"].value == "clip" and _lines(clip["BarkourJoystick"]) == [
        ("joystick.py", 8), ("joystick.py", 9)]  # the clip and the physics call
    assert clip["BarkourSquashed"].value == "clip"  # a tanh bounds it too
    assert clip["PandaPickCube"].value == "clip"  # a clipped delta on the last control
    assert clip["PandaPickCubeOrientation"].value == "clip"  # the base class's step, in the same module
    # A control made by a helper, or clipped under a branch: not followed, and said so.
    assert clip["BarkourHelper"].value is None
    assert clip["BarkourHelper"].unknown.endswith("Helper.step: the control mjx_env.step receives comes through a "
                                                  "call or branch this reader does not model")
    assert clip["BarkourBranch"].value is None and "Branch.step" in clip["BarkourBranch"].unknown


def test_the_reward_floor_follows_the_name_the_state_receives(playground):
    snapshot = playground[0]
    assert read_floor(snapshot, "locomotion", "Go1JoystickFlatTerrain").floor == 0.0
    assert read_floor(snapshot, "locomotion", "BarkourHelper").floor == 0.0  # jp.maximum(x, zeros_like)
    assert read_floor(snapshot, "locomotion", "PandaPickCube").floor == -1e4
    squashed = read_floor(snapshot, "locomotion", "BarkourSquashed")  # `r`, passed as the State's reward
    assert squashed.floor is None and squashed.unknown is None and _lines(squashed) == [("joystick.py", 17)]


def test_env_facts_name_the_family_and_say_what_they_cannot_read(playground):
    snapshot = playground[0]
    assert family_of(snapshot, "BarkourJoystick") == "locomotion" and family_of(snapshot, "Nowhere") is None
    facts = {f.key: f for f in env_facts(snapshot, "Go1JoystickFlatTerrain")}
    assert (facts["env_action_clip"].value, facts["reward_floor"].value) == ("none", 0.0)
    assert "clips every step's reward at 0" in facts["reward_floor"].note
    missing = {f.key: f for f in env_facts(snapshot, "Nowhere")}
    assert all(f.is_unknown and "Nowhere is in no Playground registry" in f.unknown for f in missing.values())


def test_the_final_observation_is_discarded_unless_the_wrapper_keeps_a_copy(playground):
    before, after = (read_final_observation(s) for s in playground)
    assert (before.value, _lines(before)) == ("discarded", [("wrapper.py", 26)])
    assert (after.value, _lines(after)) == ("kept", [("wrapper.py", 28)])


def test_a_wrapper_that_builds_no_class_of_its_own_is_unknown(tmp_path):
    text = WRAPPER.replace("env = BraxAutoResetWrapper(env)", "env = brax_training.AutoResetWrapper(env)")
    make_repo(tmp_path / "pg", [{"mujoco_playground/_src/wrapper.py": text}])
    found = read_final_observation(Repository(tmp_path / "pg", "pg").resolve("HEAD"))
    assert found.value is None and "outermost wrapper (a class of this module with its own step) not found" in \
        found.unknown


# -- the learner side: what a wrapper's step does with the actions ---------------------------

SLM_STEP = '''
import jax.numpy as jnp
import numpy as np


class PlaygroundVecEnv:
    def step(self, actions):
        jax_actions = jnp.array(actions, dtype=jnp.float32)
        self._state = self._jit_step(self._state, jax_actions)
        return self._state
'''
SHAPES = {
    "none": SLM_STEP,
    "clip": SLM_STEP.replace("jnp.array(actions,", "jnp.clip(actions, -1.0, 1.0).astype(").replace(
        "dtype=jnp.float32)", "jnp.float32)"),
    "tanh": SLM_STEP.replace("jnp.array(actions, dtype=jnp.float32)", "jnp.tanh(actions)"),
    None: SLM_STEP.replace("jnp.array(actions, dtype=jnp.float32)", "self._scale(actions)"),
}


@pytest.mark.parametrize("expected", ["none", "clip", "tanh", None])
def test_how_a_learner_side_wrapper_bounds_its_actions(tmp_path, expected):
    make_repo(tmp_path / "slm", [{"slm_lab/env/playground.py": SHAPES[expected]}])
    found = read_wrapper_action(Repository(tmp_path / "slm", "slm").resolve("HEAD"), "slm_lab/env/playground.py",
                                "PlaygroundVecEnv", ("_jit_step",))
    assert found.value == expected
    if expected is None:
        assert found.unknown.endswith("through a call or branch this reader does not model")


# -- numeric precision -------------------------------------------------------------------------

def _snapshot(tmp_path, files):
    make_repo(tmp_path / "r", [files])
    return Repository(tmp_path / "r", "r").resolve("HEAD")


def test_jax_precision_is_tf32_by_default_cited_from_the_readme(playground, tmp_path):
    snapshot = _snapshot(tmp_path, {"train.py": "import jax\n"})
    fact = jax_precision([(snapshot, "train.py")], (playground[0], "README.md"))
    assert fact.value == "tf32" and _lines(fact) == [("README.md", 3)]
    assert "environment variable set outside the code" in fact.note


def test_jax_precision_set_in_the_code(playground, tmp_path):
    top = _snapshot(tmp_path / "a", {"train.py": 'import jax\njax.config.update("jax_default_matmul_precision", '
                                                   '"highest")\n'})
    assert jax_precision([(top, "train.py")], (playground[0], "README.md")).value == "float32"
    inside = _snapshot(tmp_path / "b", {"env.py": 'import jax\n\ndef make(n):\n  if n > 6:\n'
                                                  '    jax.config.update("jax_default_matmul_precision", "highest")\n'})
    fact = jax_precision([(inside, "env.py")], (playground[0], "README.md"))
    assert fact.value is None and fact.unknown == ("matmul_precision: the JAX side sets the matmul precision at "
                                                   "env.py:5 in make() under `n > 6`, which is not decided here")


PERF = '''
import torch


def _perf_gpu():
    if not torch.cuda.is_available():
        return
    major, _ = torch.cuda.get_device_capability()
    if major >= 8:
        torch.backends.cuda.matmul.allow_tf32 = True
'''


def test_torch_precision(tmp_path):
    snapshot = _snapshot(tmp_path, {"perf.py": PERF, "train.py": "import os\nimport torch\n",
                                    "high.py": 'import torch\ntorch.set_float32_matmul_precision("highest")\n'})
    capability = lambda guard: guard is None or guard == "major >= 8"  # noqa: E731
    fact = torch_precision([(snapshot, "perf.py")], "SLM-Lab", accepted_guard=capability)
    assert fact.value == "tf32" and _lines(fact) == [("perf.py", 9)] and "when major >= 8" in fact.note
    # The same setting where a capability test is not part of the key: unknown, naming the condition.
    assert torch_precision([(snapshot, "perf.py")], "SLM-Lab").unknown.startswith(
        "matmul_precision: SLM-Lab sets the matmul precision at perf.py:9 in _perf_gpu()")
    assert torch_precision([(snapshot, "high.py")], "x").value == "float32"
    default = torch_precision([(snapshot, "train.py")], "RSL-RL", cite=(snapshot, "train.py", 2))
    assert default.value == "float32" and _lines(default) == [("train.py", 2)]
    assert torch_precision([(snapshot, "train.py")], "RSL-RL").is_unknown  # nothing to cite: not a value


# -- differential: the readers against the same modules executed ----------------------------------

def _numpy_jax():
    """jax.numpy, jax.tree.map and a recording mjx_env.step, made of numpy (for executing fixtures)."""
    jp = types.SimpleNamespace(clip=np.clip, tanh=np.tanh, maximum=np.maximum, zeros_like=np.zeros_like,
                               where=np.where, float32=np.float32, array=np.asarray)
    recorded = {}

    def step(model, data, ctrl, n_substeps):
        recorded["ctrl"] = np.asarray(ctrl)
        return data

    class State:
        def __init__(self, data, obs, reward, done, metrics, info):
            self.data, self.obs, self.reward, self.done, self.metrics, self.info = data, obs, reward, done, metrics, info

    mjx_env = types.SimpleNamespace(step=step, State=State)
    jax = types.SimpleNamespace(tree=types.SimpleNamespace(map=lambda f, *xs: f(*xs)), numpy=jp)
    return jp, mjx_env, jax, recorded


def _execute(source: str, **names) -> dict:
    body = "\n".join(line for line in textwrap.dedent(source).splitlines() if not line.startswith(("import", "from")))
    namespace = dict(names)
    exec(compile(body, "<fixture>", "exec"), namespace)  # noqa: S102 (hand-written fixture modules)
    return namespace


def _env_instance(cls, **attrs):
    env = cls.__new__(cls)
    defaults = dict(_default_pose=np.zeros(3), _config=types.SimpleNamespace(action_scale=0.5),
                    _lowers=-np.ones(3), _uppers=np.ones(3), _scale=2.0, _action_scale=0.1, mjx_model=None,
                    _mjx_model=None, n_substeps=1, dt=0.02, _scales={"a": 1.0, "b": 1.0})
    for name, value in {**defaults, **attrs}.items():
        setattr(env, name, value)
    env._terms = lambda data: {"a": -5.0, "b": 1.0}  # a step that should earn below 0
    return env


@pytest.mark.parametrize("env,source,cls", [
    ("Go1JoystickFlatTerrain", GO1, "Joystick"), ("BarkourJoystick", BARKOUR, "Joystick"),
    ("BarkourSquashed", BARKOUR, "Squashed"), ("PandaPickCube", PANDA, "PickCube"),
    ("PandaPickCubeOrientation", PANDA, "PickCubeOrientation")])
def test_differential_the_env_readers_agree_with_executing_the_step(playground, env, source, cls):
    jp, mjx_env, jax, recorded = _numpy_jax()
    module = _execute(source, jp=jp, mjx_env=mjx_env, jax=jax)
    instance = _env_instance(module[cls])
    state = types.SimpleNamespace(data=types.SimpleNamespace(ctrl=np.zeros(3)), obs=np.zeros(2), info={})
    out = instance.step(state, np.full(3, 1e6))  # a sample far past [-1, 1]
    bounded = bool(np.all(np.abs(recorded["ctrl"]) <= 1e3))
    clip = read_action_clip(playground[0], "locomotion", env)
    assert clip.unknown is None and (clip.value == "clip") == bounded
    floor = read_floor(playground[0], "locomotion", env)
    executed = float(out.reward)
    if floor.floor is None:
        assert executed < 0  # nothing stops a step from earning below 0
    else:
        assert executed == pytest.approx(max(floor.floor, executed)) and (executed == floor.floor) == (
            floor.floor == 0.0)


@pytest.mark.parametrize("index", [0, 1])
def test_differential_the_final_observation_against_executing_the_wrapper(playground, index):
    jp, mjx_env, jax, _ = _numpy_jax()
    source = (WRAPPER, WRAPPER_KEEPS)[index]
    module = _execute(source, jp=jp, jax=jax, brax_training=None)

    class Inner:
        def step(self, state, action):
            return types.SimpleNamespace(obs=np.array([7.0]), done=np.array(True), info=dict(state.info),
                                         replace=lambda **kw: types.SimpleNamespace(**kw))

    wrapper = module["BraxAutoResetWrapper"](Inner())
    start = types.SimpleNamespace(info={"AutoResetWrapper_first_obs": np.array([0.0])})
    out = wrapper.step(start, None)
    seen = [np.asarray(v).tolist() for v in [out.obs, *out.info.values()]]
    executed = "kept" if [7.0] in seen else "discarded"  # the final observation [7.0] anywhere the learner looks
    assert read_final_observation(playground[index]).value == executed


@pytest.mark.parametrize("expected", ["none", "clip", "tanh"])
def test_differential_the_action_bounding_against_executing_the_step(tmp_path, expected):
    jp, _, _, recorded = _numpy_jax()
    jp.array = lambda x, dtype=None: np.asarray(x, dtype=dtype)
    module = _execute(SHAPES[expected], jnp=jp, np=np)
    env = module["PlaygroundVecEnv"].__new__(module["PlaygroundVecEnv"])
    env._state = None
    env._jit_step = lambda state, actions: recorded.setdefault("actions", np.asarray(actions))
    env.step(np.full(2, 3.0))
    executed = "none" if recorded["actions"].max() == 3.0 else "tanh" if recorded["actions"].max() < 1.0 else "clip"
    make_repo(tmp_path / "slm", [{"slm_lab/env/playground.py": SHAPES[expected]}])
    found = read_wrapper_action(Repository(tmp_path / "slm", "slm").resolve("HEAD"), "slm_lab/env/playground.py",
                                "PlaygroundVecEnv", ("_jit_step",))
    assert found.value == executed


@pytest.mark.parametrize("capability,expected", [((8, 0), "tf32"), ((7, 5), "float32")])
def test_differential_torch_precision_against_executing_the_perf_module(tmp_path, capability, expected):
    matmul = types.SimpleNamespace(allow_tf32=False)  # torch's default
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: True,
                                                             get_device_capability=lambda: capability),
                                  backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=matmul)))
    _execute(PERF, torch=torch)["_perf_gpu"]()
    executed = "tf32" if matmul.allow_tf32 else "float32"
    snapshot = _snapshot(tmp_path, {"perf.py": PERF})
    # The key is defined on an Ampere-or-newer GPU: the reader's value is what such a GPU executes.
    fact = torch_precision([(snapshot, "perf.py")], "SLM-Lab",
                           accepted_guard=lambda guard: guard is None or guard == "major >= 8")
    assert (fact.value == executed) == (capability[0] >= 8)
    assert expected == executed
