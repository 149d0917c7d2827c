"""Playground's tuned RSL-RL configs: ``rsl_rl_config(env_name)`` in
``mujoco_playground/config/<family>_params.py``, evaluated for one environment (or none: the
family's base config).

The function builds ``rl_config = config_dict.create(...)`` with nested
``policy=config_dict.create(...)`` and ``algorithm=config_dict.create(...)``, then ``if``
branches on ``env_name`` assign ``rl_config.x = ...`` or ``rl_config.algorithm.y = ...``.
Settings are kept by dotted path (``algorithm.gamma``); a branch condition that reads more
than ``env_name`` is undecidable (reported, not guessed), and a branch that fires for no
registered environment of the family is a ``dead_branch`` finding, as on Brax's side.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from brax_diff.facts.model import Finding, Provenance

from ..engine.pyast import NotLiteral, call_kwargs, descendants, dotted_name, literal
from .code import File, Read

PARAMS_FUNCTION = "rsl_rl_config"
# The Playground families that have an RSL-RL config, and their params files.
FAMILY_PARAMS = {
    "locomotion": "mujoco_playground/config/locomotion_params.py",
    "manipulation": "mujoco_playground/config/manipulation_params.py",
}


class Undecidable(Exception):
    """A branch condition that reads more than the environment's name."""


@dataclass
class Config:
    """One walk of ``rsl_rl_config``: dotted path -> Read, and what the walk met."""

    settings: dict[str, Read] = field(default_factory=dict)
    taken: set[int] = field(default_factory=set)  # lines of the conditions that fired
    undecided: list[tuple[Provenance, str]] = field(default_factory=list)
    rejected: Provenance | None = None  # a raise reached: no config for this env


class ParamsFunction:
    """``rsl_rl_config`` of one family at one Playground commit."""

    def __init__(self, snapshot, family: str) -> None:
        self.family = family
        self.file = File(snapshot, FAMILY_PARAMS[family])
        self.function = self.file.function(PARAMS_FUNCTION)
        params = self.function.params.params if self.function is not None else ()
        self.env_param = params[0].name.value if params else None
        self._dead: list[Finding] | None = None

    @property
    def problem(self) -> str | None:
        """Why the function cannot be read at all (None when it can)."""
        if self.function is None:
            return self.file.missing(f"no {PARAMS_FUNCTION}() function").why
        return None

    def evaluate(self, env: str | None) -> Config:
        config = Config()
        if self.function is not None:
            self._block(self.function.body.body, env, config, {"var": None})
        return config

    def _block(self, statements, env: str | None, config: Config, state: dict) -> bool:
        for statement in statements:
            if isinstance(statement, cst.If):
                if env is not None and not self._branch(statement, env, config, state):
                    return False
                continue
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Return):
                    if small.value is not None and _is_create(small.value) and state["var"] is None:
                        self._create(small.value, "", config)  # return config_dict.create(...)
                    return False
                if isinstance(small, cst.Raise):
                    config.rejected = self.file.at(small)
                    return False
                if isinstance(small, cst.Assign):
                    self._assign(small, config, state, override=bool(config.taken))
        return True

    def _branch(self, node: cst.If, env: str, config: Config, state: dict) -> bool:
        try:
            fired = self.condition(node.test, env)
        except Undecidable as reason:
            config.undecided.append((self.file.at(node.test), str(reason)))
            fired = False
        if fired:
            config.taken.add(self.file.module.line(node.test))
            return self._block(node.body.body, env, config, state)
        if isinstance(node.orelse, cst.If):
            return self._branch(node.orelse, env, config, state)
        if isinstance(node.orelse, cst.Else):
            return self._block(node.orelse.body.body, env, config, state)
        return True

    def _assign(self, node: cst.Assign, config: Config, state: dict, override: bool) -> None:
        for target in (t.target for t in node.targets):
            if isinstance(target, cst.Name) and _is_create(node.value) and state["var"] is None:
                state["var"] = target.value
                self._create(node.value, "", config)
                continue
            path = (dotted_name(target) or "").split(".")
            if state["var"] is None or path[0] != state["var"] or len(path) < 2:
                continue
            key = ".".join(path[1:])
            if _is_create(node.value):
                self._create(node.value, key + ".", config)
            else:
                config.settings[key] = self._read(node.value, node, override)

    def _create(self, call: cst.Call, prefix: str, config: Config) -> None:
        for name, arg in call_kwargs(call).items():
            if _is_create(arg.value):
                self._create(arg.value, f"{prefix}{name}.", config)
            else:
                config.settings[prefix + name] = self._read(arg.value, arg, False)

    def _read(self, value: cst.CSTNode, where: cst.CSTNode, override: bool) -> Read:
        origin = f"{PARAMS_FUNCTION} ({self.family})" + (", an env branch" if override else "")
        return Read(self.file.module.literal_or_code(value), (self.file.at(where),), origin)

    # -- conditions on env_name --------------------------------------------------------
    def condition(self, test: cst.CSTNode, env: str) -> bool:
        if isinstance(test, cst.BooleanOperation):
            left = self.condition(test.left, env)
            if isinstance(test.operator, cst.And):
                return left and self.condition(test.right, env)
            return left or self.condition(test.right, env)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return not self.condition(test.expression, env)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and self._is_env(test.left):
            right = self._literal(test.comparisons[0].comparator, test)
            operator = test.comparisons[0].operator
            if isinstance(operator, cst.Equal):
                return env == right
            if isinstance(operator, cst.NotEqual):
                return env != right
            if isinstance(operator, (cst.In, cst.NotIn)) and isinstance(right, (list, tuple, set, str)):
                return (env in right) == isinstance(operator, cst.In)
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and self._is_env(test.func.value) \
                and test.func.attr.value in ("startswith", "endswith") and test.args:
            affix = self._literal(test.args[0].value, test)
            return getattr(env, test.func.attr.value)(tuple(affix) if isinstance(affix, list) else affix)
        raise Undecidable(f"`{self.file.code(test)}` is not a condition on {self.env_param} alone")

    def _is_env(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Name) and node.value == self.env_param

    def _literal(self, node: cst.CSTNode, test: cst.CSTNode) -> Any:
        try:
            return literal(node)
        except NotLiteral:
            raise Undecidable(f"`{self.file.code(test)}` compares with a non-literal") from None

    def conditions(self) -> list[cst.CSTNode]:
        if self.function is None:
            return []
        return [node.test for node in descendants(self.function.body) if type(node) is cst.If]

    # -- findings -----------------------------------------------------------------------
    def dead_branches(self, envs: list[str]) -> list[Finding]:
        """Branches whose condition fires for no registered environment of the family."""
        if self._dead is None:
            self._dead = self._find_dead(envs)
        return list(self._dead)

    def _find_dead(self, envs: list[str]) -> list[Finding]:
        fired: set[int] = set()
        undecided: set[int] = set()
        for env in envs:
            config = self.evaluate(env)
            fired |= config.taken
            undecided |= {p.line for p, _ in config.undecided}
        out = []
        for test in self.conditions():
            line = self.file.module.line(test)
            if line in fired or line in undecided:
                continue
            try:
                self.condition(test, "")
            except Undecidable:
                continue
            hints = []
            for name in _strings(test):
                close = difflib.get_close_matches(name, envs, n=1, cutoff=0.8)
                close += [e for e in envs if e.lower() == name.lower() and e not in close]
                if close and close[0] != name:
                    hints.append(f"{name!r} looks like registered {close[0]!r}")
            out.append(Finding("dead_branch", "WARNING",
                               f"{PARAMS_FUNCTION}: branch `{self.file.code(test)}` never fires for any registered "
                               f"{self.family} env" + (f" ({'; '.join(hints)})" if hints else ""),
                               (self.file.at(test),)))
        return out


def _strings(node: cst.CSTNode) -> list[str]:
    return [c.evaluated_value for c in descendants(node)
            if isinstance(c, cst.SimpleString) and isinstance(c.evaluated_value, str)]


def _is_create(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] in (
        "create", "ConfigDict", "dict")
