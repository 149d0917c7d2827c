"""MuJoCo Playground's tuned Brax PPO configs, evaluated statically for a family or an env.

``mujoco_playground/config/<family>_params.py`` defines ``brax_ppo_config(env_name)``:
a ``config_dict.create(...)`` of ``train()`` keyword arguments (``network_factory=
config_dict.create(...)`` holds ``make_ppo_networks()`` arguments), then ``if/elif``
branches on ``env_name`` that assign ``rl_config.x = ...`` or
``rl_config.network_factory.y = ...`` or replace ``rl_config.network_factory``.

:class:`ParamsFunction` walks that function for one env name (or none: the family's
base config) and returns the layered settings with the lines they come from. The
registered environments are read from the family registry's ``_envs = {...}`` dict
(and ``register_environment("Name", ...)`` calls), never by importing it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from brax_diff.errors import BraxDiffError
from brax_diff.facts import Finding, Provenance
from brax_diff.sources import Snapshot

from .brax_scope import IndexedModule, Scope, Setting, descendants, first_positional
from .playground_env import REGISTRY_FUNCTION, EnvConfigs
from .pyast import Code, NotLiteral, call_kwargs, dotted_name, literal, parse_module

# Playground family -> (params file, registry package) inside the Playground repository.
FAMILY_PATHS = {
    "dm_control": ("mujoco_playground/config/dm_control_suite_params.py",
                   "mujoco_playground/_src/dm_control_suite/__init__.py"),
    "locomotion": ("mujoco_playground/config/locomotion_params.py",
                   "mujoco_playground/_src/locomotion/__init__.py"),
    "manipulation": ("mujoco_playground/config/manipulation_params.py",
                     "mujoco_playground/_src/manipulation/__init__.py"),
}
PARAMS_FUNCTION = "brax_ppo_config"
NETWORK_FACTORY = "network_factory"  # the config key whose dict goes to make_ppo_networks()
REGISTRY_DICTS = ("_envs", "ALL_ENVS", "_ENVS")


class Unevaluable(Exception):
    """A branch condition the static evaluator cannot decide (it reads more than env_name)."""


@dataclass
class Config:
    """The layered result of one walk of brax_ppo_config."""

    train: Scope = field(default_factory=dict)
    network: Scope | None = None  # None: the config sets no network_factory
    taken: set[int] = field(default_factory=set)  # lines of the branch conditions that fired
    rejected: Provenance | None = None  # a `raise` reached: the function refuses this env
    unknown: list[tuple[int, str]] = field(default_factory=list)  # undecidable conditions


def registered_envs(snapshot: Snapshot, family: str) -> list[str]:
    """Env names registered in the family's registry module, sorted."""
    path = FAMILY_PATHS[family][1]
    try:
        module = parse_module(snapshot.read(path), path)
    except SyntaxError as exc:
        raise BraxDiffError(f"playground: {exc} at {snapshot.ref}") from None
    names: set[str] = set()
    for node in module.body:
        for small in getattr(node, "body", ()) if isinstance(node, cst.SimpleStatementLine) else ():
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                if any(isinstance(t, cst.Name) and t.value in REGISTRY_DICTS for t in targets):
                    names.update(_string_keys(small.value))
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and \
                    (dotted_name(small.value.func) or "").endswith("register_environment"):
                first = first_positional(small.value)
                if isinstance(first, cst.SimpleString):
                    names.add(first.evaluated_value)
    return sorted(names)


def _string_keys(node: cst.CSTNode | None) -> set[str]:
    if isinstance(node, cst.Dict):
        return {e.key.evaluated_value for e in node.elements
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)}
    if isinstance(node, (cst.Tuple, cst.List)):
        return {e.value.evaluated_value for e in node.elements if isinstance(e.value, cst.SimpleString)}
    return set()


class ParamsFunction:
    """``brax_ppo_config`` of one family at one Playground commit."""

    def __init__(self, snapshot: Snapshot, family: str, env_configs: EnvConfigs | None = None) -> None:
        self.snapshot = snapshot
        self.env_configs = env_configs
        self.family = family
        self.path = FAMILY_PATHS[family][0]
        try:
            self.module = IndexedModule(snapshot.read(self.path), self.path)
        except SyntaxError as exc:
            raise BraxDiffError(f"playground: {exc} at {snapshot.ref} ({snapshot.sha[:12]})") from None
        self._dead: list[Finding] | None = None
        self.function = self.module.function(PARAMS_FUNCTION)
        self.env_param = None
        if self.function is not None and self.function.params.params:
            self.env_param = self.function.params.params[0].name.value

    def at(self, node: cst.CSTNode) -> Provenance:
        return self.snapshot.where(self.path, self.module.line(node))

    # -- walking ------------------------------------------------------------------------
    def evaluate(self, env: str | None) -> Config:
        """The config for ``env`` (None: the base config, no env branch evaluated)."""
        config = Config()
        if self.function is not None:
            origin = f"{self.family} config" if env is None else f"{self.family} config for {env}"
            self._block(self.function.body.body, env, config, origin, state={"var": None, "env_config": None, "env": env})
        return config

    def _block(self, statements, env: str | None, config: Config, origin: str, state: dict) -> bool:
        """Run statements; False once a return/raise ends the function."""
        for statement in statements:
            if isinstance(statement, cst.If):
                if env is None:
                    continue  # the family's base config: no env branch
                if not self._branch(statement, env, config, origin, state):
                    return False
                continue
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Return):
                        return False
                    if isinstance(small, cst.Raise):
                        config.rejected = self.at(small)
                        return False
                    if isinstance(small, cst.Assign):
                        self._assign(small, config, origin, state)
        return True

    def _branch(self, node: cst.If, env: str, config: Config, origin: str, state: dict) -> bool:
        """Evaluate an if/elif/else chain; False when the taken block ended the function."""
        try:
            fired = self.condition(node.test, env)
        except Unevaluable as reason:
            config.unknown.append((self.module.line(node.test), str(reason)))
            fired = False
        if fired:
            config.taken.add(self.module.line(node.test))
            return self._block(node.body.body, env, config, origin + " (override)", state)
        if isinstance(node.orelse, cst.If):
            return self._branch(node.orelse, env, config, origin, state)
        if isinstance(node.orelse, cst.Else):
            return self._block(node.orelse.body.body, env, config, origin + " (override)", state)
        return True

    def _assign(self, node: cst.Assign, config: Config, origin: str, state: dict) -> None:
        value = node.value
        for target in (t.target for t in node.targets):
            path = _attribute_path(target)
            if isinstance(target, cst.Name) and self._is_env_config(value):
                state["env_config"] = target.value  # env_config = <family>.get_default_config(env_name)
                continue
            if isinstance(target, cst.Name) and _is_create(value) and state["var"] is None:
                state["var"] = target.value  # rl_config = config_dict.create(...)
                self._create(value, config, origin, state)
                continue
            if path is None or state["var"] is None or path[0] != state["var"]:
                continue
            if len(path) == 2 and path[1] == NETWORK_FACTORY:  # rl_config.network_factory = create(...)
                config.network = self._kwargs(value, origin, state) if _is_create(value) else {}
            elif len(path) == 2:
                config.train[path[1]] = self._setting(value, node, origin, state)
            elif len(path) == 3 and path[1] == NETWORK_FACTORY:
                if config.network is None:
                    config.network = {}
                config.network[path[2]] = self._setting(value, node, origin, state)

    def _create(self, call: cst.Call, config: Config, origin: str, state: dict) -> None:
        for name, arg in call_kwargs(call).items():
            if name == NETWORK_FACTORY:
                config.network = self._kwargs(arg.value, origin, state) if _is_create(arg.value) else {}
            else:
                config.train[name] = self._setting(arg.value, arg, origin, state)

    def _kwargs(self, call: cst.CSTNode, origin: str, state: dict) -> Scope:
        return {name: self._setting(arg.value, arg, origin, state) for name, arg in call_kwargs(call).items()}

    def _setting(self, value: cst.CSTNode, where: cst.CSTNode, origin: str, state: dict) -> Setting:
        field = self._env_config_field(value, state)
        if field is not None:
            return field(self.at(where), origin)
        return Setting(self.module.literal_or_code(value), (self.at(where),), origin)

    # -- the environment's own config --------------------------------------------------
    def _is_env_config(self, value: cst.CSTNode) -> bool:
        """``<registry>.get_default_config(env_name)``: the environment's own config."""
        return (isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == REGISTRY_FUNCTION
                and len(value.args) == 1 and self._is_env(value.args[0].value))

    def _env_config_field(self, value: cst.CSTNode, state: dict):
        """For ``env_config.<field>``, a maker of the Setting the environment's config gives it:
        its value and lines for an env scope; for the family's base config (no env) or a
        field the engine cannot read, ``Code`` saying why (an explained unknown downstream)."""
        if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name)
                and state.get("env_config") is not None and value.value.value == state["env_config"]):
            return None
        name, env = value.attr.value, state.get("env")
        if env is None:
            why = f"set per environment from {REGISTRY_FUNCTION}({self.env_param}).{name}"
            return lambda at, origin: Setting(Code(why), (at,), origin)
        if self.env_configs is None:
            return None
        found = self.env_configs.field(self.family, env, name)
        if found.unknown is not None:
            return lambda at, origin: Setting(Code(found.unknown), (at, *found.provenance), origin)
        written = self.module.code(value)
        return lambda at, origin: Setting(found.value, (at, *found.provenance), f"{origin}; {env}'s own config",
                                          written)

    # -- conditions -------------------------------------------------------------------
    def condition(self, test: cst.CSTNode, env: str) -> bool:
        """Decide ``env_name == "X"``, ``in (...)``, ``!=``, ``not in``, ``.startswith()``,
        ``.endswith()``, ``and``/``or``/``not`` for one env name."""
        if isinstance(test, cst.BooleanOperation):
            left = self.condition(test.left, env)
            if isinstance(test.operator, cst.And):
                return left and self.condition(test.right, env)
            return left or self.condition(test.right, env)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return not self.condition(test.expression, env)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            if not self._is_env(test.left):
                raise Unevaluable(f"`{self.module.code(test)}` reads more than {self.env_param}")
            target = test.comparisons[0]
            right = self._literal(target.comparator, test)
            operator = target.operator
            if isinstance(operator, cst.Equal):
                return env == right
            if isinstance(operator, cst.NotEqual):
                return env != right
            if isinstance(operator, cst.In):
                return env in right
            if isinstance(operator, cst.NotIn):
                return env not in right
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and self._is_env(test.func.value):
            method = test.func.attr.value
            if method in ("startswith", "endswith") and test.args:
                prefix = self._literal(test.args[0].value, test)
                prefix = tuple(prefix) if isinstance(prefix, list) else prefix
                return getattr(env, method)(prefix)
        raise Unevaluable(f"`{self.module.code(test)}` is not a condition on {self.env_param}")

    def _is_env(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Name) and node.value == self.env_param

    def _literal(self, node: cst.CSTNode, test: cst.CSTNode) -> Any:
        try:
            return literal(node)
        except NotLiteral:
            raise Unevaluable(f"`{self.module.code(test)}` compares with a non-literal") from None

    def conditions(self) -> list[cst.CSTNode]:
        """Every if/elif test in the function, in source order."""
        if self.function is None:
            return []
        return [node.test for node in descendants(self.function.body) if type(node) is cst.If]

    # -- findings -----------------------------------------------------------------------
    def rejecting_else(self) -> Finding | None:
        """INFO when an ``else: raise`` rejects envs that match no branch: then no env
        trains with the base config alone (the family scope is a baseline, not a recipe)."""
        if self.function is None:
            return None
        for node in descendants(self.function.body):
            if isinstance(node, cst.Else):
                raises = [n for n in descendants(node.body) if isinstance(n, cst.Raise)]
                if raises:
                    return Finding("base_config_incomplete", "INFO",
                                   f"{PARAMS_FUNCTION} raises for envs that match no branch: only {self.family} "
                                   f"envs named in a branch train, each with its branch applied to this base config",
                                   (self.at(raises[0]),))
        return None

    def dead_branches(self, envs: list[str]) -> list[Finding]:
        """Branches whose condition fires for no registered env of the family."""
        if self._dead is None:
            self._dead = self._find_dead(envs)
        return list(self._dead)

    def _find_dead(self, envs: list[str]) -> list[Finding]:
        fired: set[int] = set()
        undecidable: set[int] = set()
        for env in envs:
            config = self.evaluate(env)
            fired |= config.taken
            undecidable |= {line for line, _ in config.unknown}
        out = []
        for test in self.conditions():
            line = self.module.line(test)
            if line in fired or line in undecidable:
                continue
            try:
                self.condition(test, "")  # only conditions on env_name count
            except Unevaluable:
                continue
            names = [n for n in _strings(test)]
            hints = []
            for name in names:
                close = difflib.get_close_matches(name, envs, n=1, cutoff=0.8)
                close += [e for e in envs if e.lower() == name.lower() and e not in close]
                if close and close[0] != name:
                    hints.append(f"{name!r} looks like registered {close[0]!r}")
            message = (f"{PARAMS_FUNCTION}: branch `{self.module.code(test)}` never fires for any registered "
                       f"{self.family} env" + (f" ({'; '.join(hints)})" if hints else ""))
            out.append(Finding("dead_branch", "WARNING", message, (self.at(test),)))
        return out

    def unregistered_names(self, envs: list[str]) -> list[Finding]:
        """Names in live conditions that are not registered (INFO: the branch still fires)."""
        out = []
        registered = set(envs)
        dead = {f.provenance[0].line for f in self.dead_branches(envs)}
        for test in self.conditions():
            if self.module.line(test) in dead:
                continue
            try:
                self.condition(test, "")  # only conditions on env_name name envs
            except Unevaluable:
                continue
            for name in _strings(test):
                if name not in registered and not any(e.startswith(name) for e in envs):
                    out.append(Finding("unregistered_env_name", "INFO",
                                       f"{PARAMS_FUNCTION}: {name!r} in `{self.module.code(test)}` is not a "
                                       f"registered {self.family} env", (self.at(test),)))
        return out


def _strings(node: cst.CSTNode) -> list[str]:
    return [c.evaluated_value for c in descendants(node) if isinstance(c, cst.SimpleString)
            and isinstance(c.evaluated_value, str)]


def _is_create(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and (dotted_name(node.func) or "").rsplit(".", 1)[-1] in (
        "create", "ConfigDict", "dict")


def _attribute_path(node: cst.CSTNode) -> list[str] | None:
    name = dotted_name(node)
    return name.split(".") if name else None


def family_error(family: str) -> BraxDiffError:
    return BraxDiffError(f"unknown Playground family {family!r} (known: {', '.join(FAMILY_PATHS)})")
