"""An environment's own ``step``, found through Playground's registry, and what it does with the action.

Playground's families register their environments in ``mujoco_playground/_src/<family>/__init__.py``
(``_envs = {"Go1JoystickFlatTerrain": functools.partial(go1_joystick.Joystick, ...)}`` with
``from ... import module as alias`` lines). :func:`find_step` follows that to the class and its own
``step`` method; :mod:`.reward_floor` and :func:`read_action_clip` read it. Statically (stdlib
``ast`` over git blobs): nothing runs.

What the action becomes: every Playground env hands the physics a control through
``mjx_env.step(model, data, ctrl, n_substeps)``. The DM Control envs pass the action itself; the
locomotion envs make motor targets ``default_pose + action * action_scale`` and, in most of them,
clip those to the joint (or control) range; manipulation envs add a scaled action to the last
control and clip. :func:`read_action_clip` traces the control argument back through the step's
assignments to the action: ``clip`` when a clip lies on that path, ``none`` when only arithmetic
does (MuJoCo itself then clamps the control only for actuators its model declares ctrllimited,
which this reader does not read), unknown when the path goes through a call it does not model.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from brax_diff.facts.model import Provenance

from ..syntax import parse_ast

REGISTRY_DIRS = {"dm_control": "dm_control_suite", "locomotion": "locomotion", "manipulation": "manipulation"}
CLIP_CALLS = frozenset({"clip", "clamp", "minimum", "maximum"})  # jp.clip(x, lo, hi); nested min/max bounds
# Calls that carry a value on unchanged in kind (array conversions): the action stays the action.
CARRY_FUNCTIONS = frozenset({"array", "asarray", "as_tensor", "from_dlpack", "to_dlpack", "_torch_to_jax",
                             "_jax_to_torch"})  # f(x, ...)
CARRY_METHODS = frozenset({"astype", "reshape", "squeeze", "flatten", "float", "to"})  # x.m(...)


parse = parse_ast  # the readers here and in autoreset, interface: one tree per blob per run


def _imports(module: ast.Module) -> dict[str, str]:
    """alias -> module path for ``from a.b import c as alias`` and ``from a.b import c``."""
    out = {}
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for name in node.names:
                out[name.asname or name.name] = f"{node.module}.{name.name}"
    return out


def envs_entry(module: ast.Module, env: str) -> ast.expr | None:
    for node in module.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_envs" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(key, ast.Constant) and key.value == env:
                    return value
    return None


def _class_of(value: ast.expr) -> tuple[str, str] | None:
    """(module alias, class name) of ``alias.Class`` or ``partial(alias.Class, ...)``."""
    if isinstance(value, ast.Call) and value.args:
        value = value.args[0]
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id, value.attr
    return None


@dataclass(frozen=True)
class EnvStep:
    """The class's own ``step`` (``node``) in ``path``, or why it cannot be found (``unknown``,
    with the lines it got to in ``provenance``)."""

    path: str
    cls: str
    node: ast.FunctionDef | None
    provenance: tuple[Provenance, ...] = ()
    unknown: str | None = None


def find_step(snapshot, family: str, env: str) -> EnvStep:
    """``env``'s class and its own ``step`` method, through the family's registry at ``snapshot``."""
    folder = REGISTRY_DIRS.get(family)
    if folder is None:
        return EnvStep("", "", None, (), f"no registry folder for family {family!r}")
    registry_path = f"mujoco_playground/_src/{folder}/__init__.py"
    registry = parse(snapshot, registry_path)
    if registry is None:
        return EnvStep(registry_path, "", None, (), f"{registry_path} is missing or not Python")
    entry = envs_entry(registry, env)
    named = _class_of(entry) if entry is not None else None
    module_path = _imports(registry).get(named[0]) if named else None
    if named is None or module_path is None:
        return EnvStep(registry_path, "", None,
                       (snapshot.where(registry_path, entry.lineno),) if entry is not None else (),
                       f"{registry_path}: _envs[{env!r}] is not a class of an imported module")
    path = module_path.replace(".", "/") + ".py"
    module = parse(snapshot, path)
    classes = {n.name: n for n in (module.body if module else []) if isinstance(n, ast.ClassDef)}
    cls = classes.get(named[1])
    if cls is None:
        return EnvStep(path, named[1], None, (), f"{path} defines no class {named[1]}")
    seen, owner = [], cls
    while owner is not None and owner.name not in seen:  # a base class in the same module defines it
        seen.append(owner.name)
        step = next((n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name == "step"), None)
        if step is not None:
            return EnvStep(path, owner.name, step, (snapshot.where(path, step.lineno),))
        bases = [b.id for b in owner.bases if isinstance(b, ast.Name)]
        owner = classes.get(bases[0]) if len(bases) == 1 and len(owner.bases) == 1 else None
    return EnvStep(path, named[1], None, (snapshot.where(path, cls.lineno),),
                   f"{path}: {named[1]}.step is inherited from a class outside {path} (read only the module's "
                   "own classes)")


@dataclass(frozen=True)
class ActionClip:
    """``value``: ``clip`` or ``none`` (what the env's step does to the action before the physics);
    ``unknown``: why it cannot be read."""

    env: str
    value: str | None
    provenance: tuple[Provenance, ...] = ()
    note: str = ""
    unknown: str | None = None


def _call_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return None


def _physics_call(step: ast.FunctionDef) -> ast.Call | None:
    """The ``mjx_env.step(model, data, ctrl, n_substeps)`` call: a module's ``step`` with a control."""
    calls = [n for n in ast.walk(step) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "step" and isinstance(n.func.value, ast.Name) and len(n.args) >= 3]
    return calls[0] if len(calls) == 1 else None


def _targets(node: ast.AST) -> list[ast.AST]:
    """What a statement other than ``name = value`` binds (tuple targets, ``+=``, loops, ``with ... as``)."""
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
        return [node.target]
    if isinstance(node, ast.With):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    return []


class ActionPath:
    """Where a value in ``function`` comes from, walking its assignments back to the parameter
    ``action`` (an env's ``step(self, state, action)``, a learner-side wrapper's ``step(self, actions)``)."""

    def __init__(self, step: ast.FunctionDef, action: str) -> None:
        self.action = action
        self.assigned: dict[str, list[ast.Assign]] = {}
        self.unmodelled: set[str] = set()  # names bound otherwise (tuple targets, +=, loops, with ... as)
        for node in ast.walk(step):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigned.setdefault(node.targets[0].id, []).append(node)
            else:
                for target in _targets(node):
                    self.unmodelled |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        self.top = {id(n) for n in step.body}  # the step's own statements, not under a branch
        self.clips: list[int] = []  # lines of the clips (or squashes) on the path

    def kind(self, node: ast.expr, before: int, depth: int = 0) -> str | None:
        """``action`` (the action, only arithmetic or conversions between), ``clipped``, ``squashed``
        (through tanh), ``other`` (no action in it) or None (a path this reader does not model)."""
        if depth > 20:
            return None
        if isinstance(node, ast.Name):
            if node.id in self.unmodelled:
                return None
            defs = [a for a in self.assigned.get(node.id, ()) if a.lineno < before]
            if not defs:
                return "action" if node.id == self.action else "other"
            if any(id(d) not in self.top for d in defs):
                return None  # assigned under a branch or in a nested function: not followed
            last = defs[-1]
            return self.kind(last.value, last.lineno, depth + 1)
        if isinstance(node, (ast.Constant, ast.Attribute)):
            # self._default_pose, state.data.ctrl: not the action (an attribute of the action is not modelled)
            return None if isinstance(node, ast.Attribute) and self._mentions_action(node) else "other"
        if isinstance(node, ast.Subscript):
            return "other" if not self._mentions_action(node) else None
        if isinstance(node, ast.BinOp):
            return self._combine([self.kind(node.left, before, depth + 1), self.kind(node.right, before, depth + 1)])
        if isinstance(node, ast.UnaryOp):
            return self.kind(node.operand, before, depth + 1)
        name = _call_name(node)
        if name in CLIP_CALLS and node.args:
            inner = self.kind(node.args[0], before, depth + 1)
            if inner in ("action", "clipped", "squashed"):
                self.clips.append(node.lineno)
                return "clipped"
            return inner
        if name == "tanh" and node.args:
            inner = self.kind(node.args[0], before, depth + 1)
            if inner == "action":
                self.clips.append(node.lineno)
                return "squashed"
            return None if inner != "other" else inner
        if name in CARRY_METHODS and isinstance(node.func, ast.Attribute):
            return self.kind(node.func.value, before, depth + 1)
        if name in CARRY_FUNCTIONS and node.args:
            return self.kind(node.args[0], before, depth + 1)
        return "other" if not self._mentions_action(node) and not self._mentions_assigned(node) else None

    def _mentions_action(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id == self.action for n in ast.walk(node))

    def _mentions_assigned(self, node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in self.assigned for n in ast.walk(node))

    @staticmethod
    def _combine(kinds: list[str | None]) -> str | None:
        if None in kinds:
            return None
        if len({k for k in kinds if k != "other"}) > 1:
            return None  # a clipped action added to the raw one: not one of the modelled shapes
        for kind in ("clipped", "squashed", "action"):
            if kind in kinds:
                return kind
        return "other"


def read_action_clip(snapshot, family: str, env: str) -> ActionClip:
    """Whether ``env``'s own ``step`` clips the control it makes from the action, at ``snapshot``."""
    found = find_step(snapshot, family, env)
    if found.node is None:
        return ActionClip(env, None, found.provenance, unknown=f"action clip: {found.unknown}")
    call = _physics_call(found.node)
    where = f"{found.path}: {found.cls}.step"
    if call is None:
        return ActionClip(env, None, found.provenance,
                          unknown=f"action clip: {where} makes no single mjx_env.step(model, data, ctrl, ...) call")
    args = found.node.args.args
    trace = ActionPath(found.node, args[2].arg if len(args) > 2 else "action")
    kind = trace.kind(call.args[2], call.lineno)
    at = tuple(snapshot.where(found.path, line) for line in sorted({call.lineno, *trace.clips}))
    if kind in ("clipped", "squashed"):
        return ActionClip(env, "clip", at, f"{found.cls}.step clips the control it makes from the action "
                                           "before mjx_env.step")
    if kind == "action":
        return ActionClip(env, "none", at, f"{found.cls}.step hands mjx_env.step the action (scaled, offset) "
                                           "unclipped; MuJoCo clamps a control only where its actuator is "
                                           "ctrllimited")
    return ActionClip(env, None, at, unknown=f"action clip: {where}: the control mjx_env.step receives "
                                             + ("does not come from the action" if kind == "other" else
                                                "comes through a call or branch this reader does not model"))


BOUNDING = {"clipped": "clip", "squashed": "tanh", "action": "none"}


def read_wrapper_action(snapshot, path: str, cls_name: str, callees: tuple[str, ...]) -> ActionClip:
    """How ``cls_name.step(self, actions)`` in ``path`` bounds the actions it is given before the
    call that steps the env (``self.<callee>(..., actions, ...)``): ``clip``, ``tanh`` or ``none``."""
    module = parse(snapshot, path)
    cls = next((n for n in (module.body if module else []) if isinstance(n, ast.ClassDef) and n.name == cls_name),
               None)
    step = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "step"), None) if cls else None
    if step is None or len(step.args.args) < 2:
        return ActionClip("", None, (), unknown=f"{path}: no {cls_name}.step(self, actions) (read at this ref)")
    where = f"{path}: {cls_name}.step"
    calls = [n for n in ast.walk(step) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in callees and isinstance(n.func.value, (ast.Name, ast.Attribute))]
    if len(calls) != 1:
        return ActionClip("", None, (snapshot.where(path, step.lineno),),
                          unknown=f"{where} makes {len(calls)} calls of {' / '.join(callees)} (one was expected)")
    path_of = ActionPath(step, step.args.args[1].arg)
    kinds = {path_of.kind(arg, calls[0].lineno) for arg in calls[0].args}
    found = kinds - {"other"}
    at = tuple(snapshot.where(path, line) for line in sorted({calls[0].lineno, *path_of.clips}))
    if len(found) != 1 or None in found:
        return ActionClip("", None, at, unknown=f"{where}: the actions reach self.{calls[0].func.attr}(...) through "
                                                "a call or branch this reader does not model")
    value = BOUNDING[found.pop()]
    return ActionClip("", value, at, {"clip": f"{cls_name}.step clips the actions before stepping the env",
                                      "tanh": f"{cls_name}.step squashes the actions with tanh before stepping "
                                              "the env",
                                      "none": f"{cls_name}.step steps the env with the actions as given (only "
                                              "array conversions between)"}[value])
