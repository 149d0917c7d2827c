"""Playground's tuned RSL-RL configs: ``rsl_rl_config(env_name)`` in
``mujoco_playground/config/<family>_params.py``, run for one environment (or none: the
family's base config) by the same data-flow engine and ``ConfigDict`` model that run
``brax_ppo_config`` (:class:`brax_diff.extractors.playground.params.ParamsFunction`).

The function builds ``rl_config = config_dict.create(...)`` with nested
``policy=config_dict.create(...)`` and ``algorithm=config_dict.create(...)`` and changes it per
environment, in whatever statements the engine follows (attribute and item assignments,
``update``, ``unlocked()``, augmented assignments, helpers, loops, ``match``). Settings are
read by dotted path (``algorithm.gamma``). A branch the engine cannot decide for an
environment is run both ways and merged: a key it sets is an unknown naming the condition,
never the base value; a branch that fires for no registered environment of the family is a
``dead_branch`` finding, as on Brax's side.
"""

from __future__ import annotations

from brax_diff.facts.model import Provenance

from ..engine.pyast import Code
from ..playground.params import Config, ParamsFunction as _ConfigFunction
from .code import File, Missing

PARAMS_FUNCTION = "rsl_rl_config"
# The Playground families that have an RSL-RL config, and their params files.
FAMILY_PARAMS = {
    "locomotion": "mujoco_playground/config/locomotion_params.py",
    "manipulation": "mujoco_playground/config/manipulation_params.py",
}


class ParamsFunction(_ConfigFunction):
    """``rsl_rl_config`` of one family at one Playground commit."""

    UNDECIDED = None  # an undecided branch: both ways, merged (a key it sets is unknown)

    def __init__(self, snapshot, family: str, env_configs=None) -> None:
        # A params file that is missing or does not parse is a finding on this side, not an error;
        # parsed once, by File, for both.
        self.file = File(snapshot, FAMILY_PARAMS[family])
        super().__init__(snapshot, family, env_configs, name=PARAMS_FUNCTION, module=self.file.module)

    @property
    def problem(self) -> str | None:
        """Why the function cannot be read at all (None when it can)."""
        if self.function is None:
            return self.file.missing(f"no {PARAMS_FUNCTION}() function").why
        return None

    def origin(self, env: str | None, override: bool) -> str:
        return f"{PARAMS_FUNCTION} ({self.family})" + (", an env branch" if override else "")

    def where(self, line: int) -> Provenance:
        return self.snapshot.where(self.path, line)

    def undecided(self, config: Config) -> list[tuple[Provenance, str]]:
        """The branch conditions the engine did not decide for this scope, with why."""
        return [(self.where(line), why) for line, why in config.unknown if why != config.unreadable]

    def unknown(self, config: Config, env: str | None, path: str) -> Missing | None:
        """Why ``path`` has no value the engine gives (None when it has one, or when the config
        leaves it to rsl-rl-lib's default): the whole config, a section of it, or the key
        itself is something the engine does not follow."""
        at = f"{self.path} at {self.snapshot.ref} ({self.snapshot.sha[:12]})"
        call = f"{PARAMS_FUNCTION}({env!r})" if env is not None else f"{PARAMS_FUNCTION} ({self.family})"
        if config.unreadable is not None:
            if self.function is None:  # the file or the function is not there
                return Missing(f"{path}: {config.unreadable} at {self.snapshot.ref} ({self.snapshot.sha[:12]})")
            return Missing(f"{path}: {at}: {config.unreadable}", (self.where(self.module.line(self.function)),))
        parts = path.split(".")
        for end in range(1, len(parts) + 1):
            found = config.settings.get(".".join(parts[:end]))
            if found is None or not isinstance(found.value, Code):
                continue
            what = path if end == len(parts) else f"{path} (its section {'.'.join(parts[:end])})"
            return Missing(f"{call}, {at}: {what} is not known statically: {found.value}", found.provenance)
        if path in config.settings:
            return None
        # Absent: rsl-rl-lib's default, unless the deepest section the config has may hold
        # fields the engine cannot list.
        for end in range(len(parts) - 1, -1, -1):
            section = ".".join(parts[:end])
            if section in config.sections:
                why = config.sections[section]
                if why is None:
                    return None
                return Missing(f"{call}, {at}: {path} is not known statically: "
                               f"{section or 'the config'} may hold fields not listed: {why}",
                               (self.where(self.module.line(self.function)),))
        return None
