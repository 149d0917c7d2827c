"""The per-step reward floor of an environment (:mod:`brax_diff.extractors.playground.reward_floor`),
read through Playground's registry to the class's own ``step``, and the results join's collapse
diagnosis (a score of exactly 0 where no step can earn below 0). Hand-written fixture modules in
Playground's shape."""

from __future__ import annotations

from brax_diff.extractors.playground.reward_floor import read_floor
from brax_diff.sources.repository import Repository
from gitfixture import make_repo

REGISTRY = '''
import functools
from mujoco_playground._src.locomotion.go1 import joystick as go1_joystick
from mujoco_playground._src.locomotion.go1 import handstand as go1_handstand
from mujoco_playground._src.locomotion.op3 import joystick as op3_joystick

_envs = {
    "Go1JoystickFlatTerrain": functools.partial(go1_joystick.Joystick, task="flat_terrain"),
    "Go1Handstand": go1_handstand.Handstand,
    "Go1Footstand": go1_handstand.Footstand,
    "Op3Joystick": op3_joystick.Joystick,
    "Op3Plain": op3_joystick.Plain,
    "Op3Odd": op3_joystick.Odd,
    "Missing": go1_joystick.Nowhere,
}
'''
GO1 = '''
class Joystick:
  def step(self, state, action):
    rewards = {"a": 1.0}
    reward = sum(rewards.values()) * self.dt
    reward = jp.clip(reward, 0.0, 10000.0)
    return reward
'''
HANDSTAND = '''
class Handstand:
  def step(self, state, action):
    reward = jp.clip(sum(state.values()), -1e4, 1e4)
    return reward


class Footstand(Handstand):
  pass
'''
OP3 = '''
class Joystick:
  def step(self, state, action):
    reward = jp.maximum(state - 1, jp.zeros_like(state))
    return reward


class Plain:
  def step(self, state, action):
    reward = sum(state.values()) * self.dt
    return reward


class Odd:
  def step(self, state, action):
    reward = jp.clip(state, self.low, 1.0)
    return reward
'''


def test_the_floor_is_read_through_the_registry_to_the_class_step(tmp_path):
    base = "mujoco_playground/_src/locomotion"
    make_repo(tmp_path / "pg", [{f"{base}/__init__.py": REGISTRY, f"{base}/go1/joystick.py": GO1,
                                 f"{base}/go1/handstand.py": HANDSTAND, f"{base}/op3/joystick.py": OP3}])
    snapshot = Repository(tmp_path / "pg", "playground").resolve("HEAD")

    def floor(env):
        found = read_floor(snapshot, "locomotion", env)
        return found.floor, [(p.path.rsplit("/", 2)[-2] + "/" + p.path.rsplit("/", 1)[-1], p.line)
                             for p in found.provenance], found.unknown

    assert floor("Go1JoystickFlatTerrain") == (0.0, [("go1/joystick.py", 5)], None)  # the last clip of the reward
    assert floor("Go1Handstand") == (-1e4, [("go1/handstand.py", 3)], None)
    assert floor("Op3Joystick") == (0.0, [("op3/joystick.py", 3)], None)  # maximum(x, zeros_like(x))
    # No clip in step: no floor, and the lines say where the reward is made (nothing more is claimed).
    assert floor("Op3Plain") == (None, [("op3/joystick.py", 9)], None)
    # Footstand(Handstand): the base class in the same module defines step.
    assert floor("Go1Footstand") == (-1e4, [("go1/handstand.py", 3)], None)
    assert floor("Op3Odd")[2].endswith("Odd.step clips the reward with a lower bound that is not a number")
    assert floor("Missing")[2] == ("reward floor: mujoco_playground/_src/locomotion/go1/joystick.py defines no "
                                   "class Nowhere")
    assert floor("NotRegistered")[2] == ("reward floor: mujoco_playground/_src/locomotion/__init__.py: "
                                         "_envs['NotRegistered'] is not a class of an imported module")
    assert read_floor(snapshot, "dm_control", "X").unknown.endswith("__init__.py is missing or not Python")
