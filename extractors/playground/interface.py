"""The facts every side shares through Playground's code: what the env does with an action and a
reward (per environment), and what the training wrapper leaves of the final observation.

Each side calls these with the Playground snapshot it runs against, so two sides on different
Playground commits can differ here. Readers: :mod:`.env_step` (the control the env's ``step``
hands the physics), :mod:`.reward_floor`, :mod:`.autoreset`.
"""

from __future__ import annotations

from brax_diff.facts.model import Fact

from .autoreset import read_final_observation
from .env_step import REGISTRY_DIRS, envs_entry, parse, read_action_clip
from .reward_floor import read_floor

STEP_KEYS = ("env_action_clip", "reward_floor")  # read from the env's own step
ENV_KEYS = (*STEP_KEYS, "final_observation")  # what each environment decides through Playground's code


def family_of(snapshot, env: str) -> str | None:
    """The Playground family whose registry names ``env`` (None: none does)."""
    for family, folder in REGISTRY_DIRS.items():
        registry = parse(snapshot, f"mujoco_playground/_src/{folder}/__init__.py")
        if registry is not None and envs_entry(registry, env) is not None:
            return family
    return None


def env_facts(snapshot, env: str, family: str | None = None) -> list[Fact]:
    """``env_action_clip`` and ``reward_floor`` for ``env`` at ``snapshot`` (Playground)."""
    family = family or family_of(snapshot, env)
    if family is None:
        why = f"{env} is in no Playground registry ({', '.join(sorted(REGISTRY_DIRS.values()))})"
        return [Fact(key, None, (), unknown=f"{key}: {why}") for key in STEP_KEYS]
    clip = read_action_clip(snapshot, family, env)
    out = [Fact("env_action_clip", clip.value, clip.provenance, clip.note or None,
                unknown=f"env_action_clip: {clip.unknown.removeprefix('action clip: ')}" if clip.unknown else None)]
    floor = read_floor(snapshot, family, env)
    if floor.unknown is not None:
        out.append(Fact("reward_floor", None, floor.provenance,
                        unknown=f"reward_floor: {floor.unknown.removeprefix('reward floor: ')}"))
    elif floor.floor is None:
        out.append(Fact("reward_floor", None, floor.provenance,
                        f"{env}'s step clips no reward from below (a reward of bounded terms may still never go "
                        "below 0: only the step's own clip is read)"))
    else:
        out.append(Fact("reward_floor", floor.floor, floor.provenance,
                        f"{env}'s step clips every step's reward at {floor.floor:g} from below"))
    return out


def final_observation_fact(snapshot, who: str) -> Fact:
    """``final_observation`` for a side whose training env is Playground's ``wrap_for_brax_training``
    (``who`` says how the side reaches it, for the note)."""
    found = read_final_observation(snapshot)
    if found.unknown is not None:
        return Fact("final_observation", None, found.provenance, unknown=f"final_observation: {found.unknown}")
    return Fact("final_observation", found.value, found.provenance, f"{found.note}; {who}")


def final_observation_through(snapshot, path: str, playground, who: str, needle: str = "wrap_for_brax_training(") \
        -> Fact:
    """``final_observation`` for a side whose ``path`` (in ``snapshot``) builds or passes Playground's
    ``wrap_for_brax_training`` (``needle``): Playground's answer, with that line. ``who`` names the
    side's code for the note."""
    key = "final_observation"
    text = snapshot.read(path) if snapshot is not None and snapshot.exists(path) else ""
    line = next((i + 1 for i, t in enumerate(text.splitlines()) if needle in t), None)
    if line is None:
        return Fact(key, None, (), unknown=f"{key}: {path} does not name wrap_for_brax_training: the training "
                                           "wrapper is not read")
    at = snapshot.where(path, line)
    if playground is None:
        return Fact(key, None, (at,), unknown=f"{key}: {who} steps Playground's wrap_for_brax_training, and no "
                                              "Playground repository is read")
    fact = final_observation_fact(playground, f"{who} steps it ({path}:{line})")
    return Fact(key, fact.value, (*fact.provenance, at), fact.note, unknown=fact.unknown)
