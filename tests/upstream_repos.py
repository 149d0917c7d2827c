"""Fixture Brax, Playground and SLM-Lab repositories for end-to-end runs of the real extractors.

Built from the hand-written files in brax_fixtures.py and slm_fixtures.py. The Playground
registry also names CartpoleBalance, an env no branch of the params function mentions (as
upstream), so it takes its family's default variant. The SLM-Lab spec's variants are mapped
with ``MAPPING`` (the fixture spec does not use SLM-Lab's real variant names).
"""

from __future__ import annotations

from pathlib import Path

import brax_fixtures
import slm_fixtures
from gitfixture import make_repo

MAPPING = """
family_defaults:
  dm_control: [ppo_fx]
  locomotion: [ppo_fx_rs]
  manipulation: [ppo_fx_small]
variants:
  ppo_fx: {family: dm_control}
  ppo_fx_big_mb: {family: dm_control, envs: [FingerSpin]}
  ppo_fx_rs: {family: locomotion}
  ppo_fx_unread: {family: locomotion, envs: ["Go1*"]}
  ppo_fx_small: {family: manipulation, envs: ["Panda*"]}
"""
MAPPING_FILE = "brax-diff-mapping.yaml"
SPEC_PATH = slm_fixtures.SPEC_PATH

# The variant MAPPING gives each env of the fixture registries.
EXPECTED_VARIANT = {
    "AcrobotSwingup": "ppo_fx", "BallInCup": "ppo_fx", "CartpoleBalance": "ppo_fx", "CheetahRun": "ppo_fx",
    "FingerSpin": "ppo_fx_big_mb", "FingerTurnEasy": "ppo_fx", "PendulumSwingup": "ppo_fx", "WalkerRun": "ppo_fx",
    "Go1JoystickFlatTerrain": "ppo_fx_unread", "Go1Getup": "ppo_fx_unread", "SpotGetup": "ppo_fx_rs",
    "H1Walk": "ppo_fx_rs",
    "PandaPickCube": "ppo_fx_small", "PandaPickCubeCartesian": "ppo_fx_small",
    "PandaPickCubeOrientation": "ppo_fx_small",
}


def playground_files() -> dict[str, str]:
    files = dict(brax_fixtures.PLAYGROUND)
    registry = brax_fixtures.DM_REGISTRY_TEXT
    files[brax_fixtures.DM_REGISTRY] = registry.replace(
        '    "CheetahRun": cheetah.Run,\n', '    "CartpoleBalance": cheetah.Run,\n    "CheetahRun": cheetah.Run,\n')
    assert files[brax_fixtures.DM_REGISTRY] != registry
    return files


def make_upstreams(root: Path, *, slm_extra: dict[str, str] | None = None) -> dict[str, Path]:
    """Brax, Playground and an SLM-Lab checkout (with ``MAPPING_FILE`` committed) under ``root``."""
    paths = {"brax": root / "brax", "playground": root / "playground", "slm": root / "slm"}
    make_repo(paths["brax"], [brax_fixtures.BRAX_OLD], origin="https://github.com/google/brax.git")
    make_repo(paths["playground"], [playground_files()],
              origin="https://github.com/google-deepmind/mujoco_playground.git")
    make_repo(paths["slm"], [{**slm_fixtures.repo_files(), MAPPING_FILE: MAPPING, **(slm_extra or {})}],
              origin="https://github.com/kengz/SLM-Lab.git", branch="master")  # SLM-Lab's branch
    return paths


def repo_flags(paths: dict[str, Path]) -> list[str]:
    return ["--brax-repo", str(paths["brax"]), "--playground-repo", str(paths["playground"]),
            "--slm-repo", str(paths["slm"]), "--mapping", str(paths["slm"] / MAPPING_FILE)]
