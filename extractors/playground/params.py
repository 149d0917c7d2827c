"""MuJoCo Playground's tuned configs, run by the data-flow engine for a family or an env: Brax PPO's
``brax_ppo_config`` here, and any other config function of the same files by name (the RSL-RL
side's ``rsl_rl_config``, :mod:`..rsl_rl.params`), whose nested ``ConfigDict`` sections are read
by dotted path (:attr:`Config.settings`).

``mujoco_playground/config/<family>_params.py`` defines ``brax_ppo_config(env_name)``: it builds a
``ConfigDict`` of ``train()`` keyword arguments (``network_factory`` holds ``make_ppo_networks()``
arguments) and changes it per environment. :class:`ParamsFunction` runs that function in
:mod:`.flow` with ``env_name`` bound to one env (or with every branch of the function left out:
the family's base config), the ``ConfigDict`` modelled by :mod:`.playground_env`, and reads the
config it returns, with the lines that set each key. A statement the engine does not follow makes
the keys it may set unknown, naming the file and function. The registered environments are read
from the family registry's ``_envs = {...}`` dict (and ``register_environment("Name", ...)``
calls), never by importing it. Branch conditions are recorded per env: a branch that fires for no
registered env is reported as dead.
"""

from __future__ import annotations

import difflib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from brax_diff.errors import BraxDiffError
from brax_diff.facts.model import Finding, Provenance
from brax_diff.sources.repository import Snapshot

from ..brax.scope import Scope, Setting, descendants, first_positional
from .env import CONFIG_DICT, FAMILY_REGISTRIES, MODEL, REGISTRY_FUNCTION, ROOTS, EnvConfigs
from ..engine import flow
from ..engine.pyast import Code, NotLiteral, dotted_name, literal, parse_file, parse_module

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
    # Every field by dotted path, a nested ConfigDict's fields as ``section.name``
    # (``algorithm.gamma``); a section that is not a ConfigDict the engine follows is one
    # unknown entry under its own name.
    settings: dict[str, Setting] = field(default_factory=dict)
    # Each ConfigDict of the config by dotted path ("" the config itself) -> why it may hold
    # fields the engine cannot list (``update`` of fields not known), else None.
    sections: dict[str, str | None] = field(default_factory=dict)
    unreadable: str | None = None  # why the engine gives no config at all (also in ``unknown``)


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


_PARSE = object()  # ParamsFunction's default: parse the params file itself


class ParamsFunction:
    """A config function of one family at one Playground commit: ``brax_ppo_config`` unless
    ``name`` says another (the RSL-RL side runs ``rsl_rl_config`` of the same files)."""

    # What a branch the engine cannot decide for an env does: False, it is not taken (a
    # finding says so); None, the engine runs both ways and merges them, so that a key the
    # branch sets is an unknown naming the condition.
    UNDECIDED: bool | None = False

    def __init__(self, snapshot: Snapshot, family: str, env_configs: EnvConfigs | None = None,
                 name: str = PARAMS_FUNCTION, module: Any = _PARSE) -> None:
        """``module``: the params file already parsed by the caller (None: it could not be
        read, so there is no function to run); by default it is parsed here."""
        self.snapshot = snapshot
        self.name = name
        self.env_configs = env_configs
        self.family = family
        self.path = FAMILY_PATHS[family][0]
        if module is _PARSE:
            try:
                module = parse_file(snapshot, self.path)
            except SyntaxError as exc:
                raise BraxDiffError(f"playground: {exc} at {snapshot.ref} ({snapshot.sha[:12]})") from None
        self.module = module
        self._dead: list[Finding] | None = None
        self._configs: dict[str | None, Config] = {}
        self._engine = None
        self.function = self.module.function(name) if self.module is not None else None
        self.env_param = None
        if self.function is not None and self.function.params.params:
            self.env_param = self.function.params.params[0].name.value

    def at(self, node: cst.CSTNode) -> Provenance:
        return self.snapshot.where(self.path, self.module.line(node))

    def origin(self, env: str | None, override: bool) -> str:
        """How a setting's fact says where it comes from."""
        base = f"{self.family} config" if env is None else f"{self.family} config for {env}"
        return base + (" (override)" if override else "")

    # -- running ----------------------------------------------------------------------
    def evaluate(self, env: str | None) -> Config:
        """The config for ``env`` (None: the base config, no env branch evaluated).

        The function runs in the data-flow engine (:mod:`.flow`) with a model of ``ConfigDict``
        (:mod:`.playground_env`), ``env_name`` bound to ``env``: whatever statements build the
        config (``create(**base)``, items, ``update``, ``unlocked()``, copies, helpers, loops,
        ``match``), the config is what the function returns. For the base config every ``if`` of
        the function is left out (no environment's branch)."""
        if self.function is None:
            return Config()
        if env not in self._configs:
            self._configs[env] = _Run(self, env).config()
        return self._configs[env]

    # -- the environment's own config --------------------------------------------------
    def _is_env_config(self, value: cst.CSTNode) -> bool:
        """``<registry>.get_default_config(env_name)``: the environment's own config."""
        return (isinstance(value, cst.Call) and (dotted_name(value.func) or "").rsplit(".", 1)[-1] == REGISTRY_FUNCTION
                and len(value.args) == 1 and self._is_env(value.args[0].value))

    def engine(self) -> flow.Engine:
        """The engine the environments' configs run in (one per Playground commit), else one of
        this function's own; either evaluates the nodes of :attr:`module`."""
        if self._engine is None:
            if self.env_configs is not None:
                self._engine = self.env_configs.engine
                self._engine.loader.modules.setdefault(self.path, self.module)
            else:
                self._engine = flow.Engine(flow.Loader(self.snapshot, ROOTS, {self.path: self.module}), assume=MODEL)
        return self._engine

    def _env_config_field(self, value: cst.CSTNode, state: dict):
        """For ``env_config.<field>``, a maker of the Setting the environment's config gives it:
        its value and lines for an env scope; for the family's base config (no env) or a
        field the engine cannot read, ``Code`` saying why (an explained unknown downstream)."""
        if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name)
                and value.value.value in state.get("env_config", ())):
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
                                   f"{self.name} raises for envs that match no branch: only {self.family} "
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
            message = (f"{self.name}: branch `{self.module.code(test)}` never fires for any registered "
                       f"{self.family} env" + (f" ({'; '.join(hints)})" if hints else ""))
            out.append(Finding("dead_branch", "WARNING", message, (self.at(test),)))
        return out

    def unregistered_names(self, envs: list[str]) -> list[Finding]:
        """Names in live conditions that reach no registered env: INFO, or WARNING where a
        registered env's name is close (the branch's settings were meant for it and miss it).
        A name that the condition matches exactly (``==``, ``in (...)``) must be registered; one
        it matches as a prefix or suffix (``.startswith``) must begin or end a registered name."""
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
                if name in registered or (self._as_pattern(test, name)
                                          and any(e.startswith(name) or e.endswith(name) for e in envs)):
                    continue
                close = difflib.get_close_matches(name, envs, n=1, cutoff=0.8) or [e for e in envs
                                                                                  if e.startswith(name)][:1]
                hint = f" (it looks like registered {close[0]!r}, which the branch does not reach)" if close else ""
                out.append(Finding("unregistered_env_name", "WARNING" if close else "INFO",
                                   f"{self.name}: {name!r} in `{self.module.code(test)}` is not a "
                                   f"registered {self.family} env{hint}", (self.at(test),)))
        return out

    def _as_pattern(self, test: cst.CSTNode, name: str) -> bool:
        """Whether ``test`` decides ``name`` as a prefix or suffix: it answers for ``name`` with
        something appended (or prepended) as it answers for ``name`` itself."""
        try:
            exact = self.condition(test, name)
            return exact == self.condition(test, name + "\0") or exact == self.condition(test, "\0" + name)
        except Unevaluable:
            return True  # undecided: no finding


def _strings(node: cst.CSTNode) -> list[str]:
    return [c.evaluated_value for c in descendants(node) if isinstance(c, cst.SimpleString)
            and isinstance(c.evaluated_value, str)]


def family_error(family: str) -> BraxDiffError:
    return BraxDiffError(f"unknown Playground family {family!r} (known: {', '.join(FAMILY_PATHS)})")


class _Run:
    """One engine run of the config function for one env (None: the base config)."""

    def __init__(self, params: ParamsFunction, env: str | None) -> None:
        self.params = params
        self.env = env
        self.engine = params.engine()
        self.settings: dict[int, tuple[flow.V, Setting]] = {}  # id(value) -> (value, its Setting)
        self.result = Config()
        self.function_node = params.function
        self.values = _assigned_values(params.function)  # id(target) -> the expression assigned
        self.branch_lines = _branch_lines(params.module, params.function)
        self.state = {"env_config": _env_config_names(params, params.function), "env": env}

    def config(self) -> Config:
        engine, params = self.engine, self.params
        module = engine.module_at(params.path)
        function = engine.lookup(module, params.name) if module is not None else None
        if function is None or not isinstance(function.data, flow.Function):
            self._unreadable(f"{params.name}() is not a function the engine can run")
            return self.result
        argument = flow.const(self.env) if self.env is not None else flow.sym("param", params.env_param or "env_name")
        hooks = (engine.decide, engine.on_setattr, engine.on_create)
        engine.decide, engine.on_setattr, engine.on_create = self._decide, self._on_setattr, self._on_create
        failures = len(engine.failures)
        try:
            with self._observing_env_config():
                # The function's other parameters (``impl``) are left open: what the caller passes is
                # not known here, so a condition on them is not decided.
                others = {p.name.value: flow.sym("param", p.name.value)
                          for p in (*params.function.params.params[1:], *params.function.params.kwonly_params)}
                value, frame = engine.run(function, argument, **others) if params.env_param else engine.run(function)
        finally:
            engine.decide, engine.on_setattr, engine.on_create = hooks
        for failure in engine.failures[failures:]:
            where = failure.error.where
            if failure.definite and where is not None and where.path == params.path and failure.error.kind not in (
                    "TypeError",) and self.result.rejected is None:
                self.result.rejected = where
        # After a raise, the config the function was building; when undecided branches are merged,
        # a result that is not one ConfigDict (one per path) is not replaced by a local.
        fallback = params.UNDECIDED is False or self.result.rejected is not None
        config = value if _is_config(value) else self._fallback(frame) if fallback else None
        if config is None:
            self._unreadable(f"{params.name}({self.env!r}) gives no ConfigDict the engine follows: "
                             f"{flow.why_not_constant(value) if not flow.is_const(value) else value.data}")
            return self.result
        for name, field_value in config.data.attrs.items():
            if name == NETWORK_FACTORY:
                self.result.network = ({n: self._setting(v) for n, v in field_value.data.attrs.items()}
                                       if _is_config(field_value) else {})
            else:
                self.result.train[name] = self._setting(field_value)
        self.result.settings = self._dotted(config, "")
        return self.result

    def _unreadable(self, why: str) -> None:
        self.result.unknown.append((self.params.module.line(self.params.function), why))
        self.result.unreadable = why

    def _dotted(self, config: flow.V, prefix: str) -> dict[str, Setting]:
        """The config's fields by dotted path: a nested ConfigDict's as ``name.field``."""
        out: dict[str, Setting] = {}
        self.result.sections[prefix[:-1]] = self.engine.opened.get(config.data)
        for name, value in config.data.attrs.items():
            if _is_config(value):
                out.update(self._dotted(value, f"{prefix}{name}."))
            else:
                out[prefix + name] = self._setting(value)
        return out

    def _fallback(self, frame) -> flow.V | None:
        """After a raise: the config the function was building (its first ConfigDict local)."""
        for value in (frame.locals.values() if frame is not None else ()):
            if _is_config(value):
                return value
        return None

    @contextmanager
    def _observing_env_config(self):
        """``<registry>.get_default_config(env_name)`` is answered symbolically: the fields the
        config reads from it are the environment's own (:class:`EnvConfigs`), read per environment."""
        registry = self.engine.module(FAMILY_REGISTRIES[self.params.family])
        found = self.engine.lookup(registry, REGISTRY_FUNCTION) if registry is not None else None
        if found is None or not isinstance(found.data, flow.Function):
            yield
            return
        with self.engine.observing(found.data):
            yield

    # -- hooks ------------------------------------------------------------------------------
    def _in_function(self, frame) -> bool:
        return frame.function is not None and frame.function.node is self.function_node

    def _decide(self, node: cst.If | cst.Match, test: flow.V, truth, frame):
        if frame.module.path != self.params.path:
            return truth
        if self.env is None:
            return flow.SKIP if self._in_function(frame) else truth
        if not isinstance(node, cst.If):  # a match: its cases are run as they come
            return truth
        line = frame.module.source.line(node.test)
        if truth is True:
            self.result.taken.add(line)
        elif truth is None and self._in_function(frame):  # as documented: UNDECIDED says what runs
            self.result.unknown.append((line, self._undecided(node.test, frame)))
            return self.params.UNDECIDED
        return truth

    def _undecided(self, test: cst.CSTNode, frame) -> str:
        try:
            self.params.condition(test, self.env)
        except Unevaluable as reason:
            return str(reason)
        return f"`{frame.module.source.code(test)}` is not decided for {self.env!r}"

    def _on_setattr(self, obj: flow.V, name: str, value: flow.V, frame, node) -> None:
        if frame.module.path != self.params.path or node is None or not _is_config(obj):
            return
        expression = self.values.get(id(node))
        self._record(value, node, expression, frame)

    def _on_create(self, made: flow.V, kwargs: dict) -> None:
        if not self.engine.sites:
            return
        frame, call = self.engine.sites[-1]
        if frame.module.path != self.params.path:
            return
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in kwargs:
                self._record(kwargs[arg.keyword.value], arg, arg.value, frame)

    def _record(self, value: flow.V, where: cst.CSTNode, expression: cst.CSTNode | None, frame) -> None:
        at = self.engine.where(frame.module, where)
        line = frame.module.source.line(where)
        origin = self.params.origin(self.env, any(a <= line <= b for a, b in self.branch_lines))
        field = self.params._env_config_field(expression, self.state) if expression is not None else None
        if field is not None:
            self.settings[id(value)] = (value, field(at, origin))
            return
        if expression is not None and _is_literal(expression):
            provenance = (at,)
        else:
            provenance = (at,) + tuple(p for p in sorted(flow.all_lines(value), key=_order) if p != at)
        self.settings[id(value)] = (value, Setting(None, provenance, origin))

    def _setting(self, value: flow.V) -> Setting:
        """The Setting of a config field's final value: as recorded where it was set (the
        environment's own field as such), else its value with the lines that made it."""
        found = self.settings.get(id(value))
        recorded = found[1] if found is not None and found[0] is value else None
        if recorded is not None and (recorded.value is not None or recorded.written is not None):
            return recorded  # the environment's own field, or why it is unknown
        provenance = recorded.provenance if recorded is not None else tuple(sorted(flow.all_lines(value), key=_order))
        origin = recorded.origin if recorded is not None else self.params.origin(self.env, False)
        if flow.is_const(value):
            return Setting(flow.plain(value), provenance, origin)
        return Setting(Code(_why(value)), provenance, origin)


def _why(value: flow.V) -> str:
    if isinstance(value.data, flow.Sym):
        return flow.describe(value)
    return flow.why_not_constant(value)


def _order(provenance: Provenance):
    return (provenance.path, provenance.line)


def _is_config(value: flow.V | None) -> bool:
    return value is not None and isinstance(value.data, flow.Instance) and value.data.cls is CONFIG_DICT


def _is_literal(node: cst.CSTNode) -> bool:
    try:
        literal(node)
    except NotLiteral:
        return False
    return True


def _assigned_values(function: cst.FunctionDef) -> dict[int, cst.CSTNode]:
    """id(attribute target) -> the expression assigned to it, for the function's assignments."""
    out: dict[int, cst.CSTNode] = {}
    for node in descendants(function):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                out[id(target.target)] = node.value
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            out[id(node.target)] = node.value
    return out


def _branch_lines(module, function: cst.FunctionDef) -> list[tuple[int, int]]:
    """Line ranges of the bodies of the function's branches (if/elif/else, match cases):
    a setting made there is an override."""
    out = []
    for node in descendants(function):
        if isinstance(node, (cst.If, cst.Else, cst.MatchCase)):
            body = node.body
            statements = list(body.body) if hasattr(body, "body") else [body]
            if statements:
                out.append((module.line(statements[0]), _last_line(module, statements[-1])))
    return out


def _last_line(module, node: cst.CSTNode) -> int:
    last = module.line(node)
    for child in descendants(node):
        line = module.positions.get(child)
        if line is not None and line > last:
            last = line
    return last


def _env_config_names(params: ParamsFunction, function: cst.FunctionDef) -> set[str]:
    """Names assigned ``<registry>.get_default_config(env_name)`` in the function."""
    names = set()
    for node in descendants(function):
        if isinstance(node, cst.Assign) and params._is_env_config(node.value):
            names |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
    return names
