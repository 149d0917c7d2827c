"""Playground's side of an RSL-RL run: ``learning/train_rsl_rl.py`` (its absl flag defaults,
what ``main`` hands the torch wrapper and the runner) and ``mujoco_playground/_src/wrapper_torch.py``
(the action clip and the ``time_outs`` the wrapper reports to RSL-RL).

A flag's value is its ``flags.DEFINE_*`` default (the run with no flags given); a value is
read only where ``main`` shows it is used (``_NUM_ENVS.value`` read in ``main``), else it is
an explained unknown.
"""

from __future__ import annotations

import libcst as cst

from ..engine.pyast import call_kwargs, dotted_name, literal, NotLiteral
from .code import File, Missing, Read

SCRIPT = "learning/train_rsl_rl.py"
WRAPPER = "mujoco_playground/_src/wrapper_torch.py"
WRAPPER_CLASS = "RSLRLBraxWrapper"


class TrainScript:
    """``learning/train_rsl_rl.py`` at one Playground commit."""

    def __init__(self, snapshot) -> None:
        self.file = File(snapshot, SCRIPT)
        self.main = self.file.function("main")
        self.flags: dict[str, tuple[str, Read]] = {}  # flag name -> (module variable, default)
        if self.file.module is not None:
            self._read_flags()

    def _read_flags(self) -> None:
        for statement in self.file.module.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if not (isinstance(small, cst.Assign) and isinstance(small.value, cst.Call)):
                    continue
                name = dotted_name(small.value.func) or ""
                if not name.rsplit(".", 1)[-1].startswith("DEFINE_") or len(small.value.args) < 2:
                    continue
                try:
                    flag, default = literal(small.value.args[0].value), literal(small.value.args[1].value)
                except NotLiteral:
                    continue
                variable = small.targets[0].target
                if isinstance(variable, cst.Name) and isinstance(flag, str):
                    self.flags[flag] = (variable.value, Read(default, (self.file.at(small),),
                                                             f"--{flag} default in {SCRIPT}"))

    def flag(self, flag: str) -> Read | Missing:
        """The default of ``--flag``, with the line ``main`` reads it on."""
        if flag not in self.flags:
            return self.file.missing(f"no absl flag --{flag} defined")
        variable, read = self.flags[flag]
        use = self.file.find(self.main, (cst.SimpleStatementLine,), f"{variable}.value")
        if use is None:
            return self.file.missing(f"main() does not read {variable}.value", "main")
        return Read(read.value, read.lines + (self.file.at(use),), read.note)

    def num_envs(self) -> Read | Missing:
        """``num_envs = 1 if _PLAY_ONLY.value else _NUM_ENVS.value``: --num_envs when training."""
        found = self.flag("num_envs")
        if isinstance(found, Missing):
            return found
        statement = self.file.find(self.main, (cst.Assign,), "num_envs=")
        if statement is None or "_PLAY_ONLY" not in self.file.code(statement) and \
                self.flags["num_envs"][0] not in self.file.code(statement):
            return self.file.missing("no `num_envs = ...` taken from --num_envs", "main")
        return Read(found.value, found.lines + (self.file.at(statement),), found.note + " (training, not --play_only)")

    def wrapper_call(self) -> cst.Call | None:
        """The ``RSLRLBraxWrapper(...)`` call in ``main``."""
        return next(self.file.nodes(self.main, lambda n: isinstance(n, cst.Call)
                                    and (dotted_name(n.func) or "").endswith(WRAPPER_CLASS)), None)

    def wrapper_argument(self, wrapper: "Wrapper", param: str) -> tuple[cst.CSTNode, cst.Arg] | Missing:
        """The expression ``main`` passes for the wrapper's ``param`` (by keyword or position)."""
        call = self.wrapper_call()
        if call is None:
            return self.file.missing(f"main() builds no {WRAPPER_CLASS}", "main")
        keywords = call_kwargs(call)
        if param in keywords:
            return keywords[param].value, keywords[param]
        order = wrapper.parameters()
        positional = [a for a in call.args if a.keyword is None and a.star == ""]
        if param in order and order.index(param) < len(positional):
            arg = positional[order.index(param)]
            return arg.value, arg
        return self.file.missing(f"{WRAPPER_CLASS}(...) gets no {param}", "main")

    def learn_iterations(self) -> Read | Missing:
        """``runner.learn(num_learning_iterations=train_cfg.max_iterations, ...)``: the config's key."""
        call = self.file.find(self.main, (cst.Call,), ".learn(", "num_learning_iterations=")
        if call is None:
            return self.file.missing("no runner.learn(num_learning_iterations=...) call", "main")
        value = call_kwargs(call)["num_learning_iterations"].value
        text = self.file.code(value)
        return Read(text.rsplit(".", 1)[-1], (self.file.at(call),), f"num_learning_iterations={text}")

    def obs_groups(self) -> list[tuple[cst.CSTNode, dict]]:
        """Each ``train_cfg.obs_groups = {...}`` in ``main`` with its literal value."""
        out = []
        for node in self.file.nodes(self.main, lambda n: isinstance(n, cst.Assign)):
            if (dotted_name(node.targets[0].target) or "").endswith(".obs_groups"):
                try:
                    out.append((node, literal(node.value)))
                except NotLiteral:
                    out.append((node, {}))
        return out

    def impl_assignment(self) -> cst.CSTNode | None:
        """``env_cfg.impl = _IMPL.value``: the physics backend the environment steps with."""
        return self.file.find(self.main, (cst.Assign,), ".impl=", ".value")


class Wrapper:
    """``RSLRLBraxWrapper`` in ``wrapper_torch.py``: what RSL-RL gets from each env step."""

    def __init__(self, snapshot) -> None:
        self.file = File(snapshot, WRAPPER)
        self.init = self.file.method(WRAPPER_CLASS, "__init__")
        self.step = self.file.method(WRAPPER_CLASS, "step")

    def parameters(self) -> list[str]:
        if self.init is None:
            return []
        names = [p.name.value for p in self.init.params.params]
        return names[1:] if names and names[0] == "self" else names

    def action_clip(self) -> Read | Missing:
        """``torch.clip(action, low, high)`` at the top of ``step``: the Gaussian's sample is clipped."""
        call = self.file.find(self.step, (cst.Call,), "clip(action")
        if call is None:
            return self.file.missing("no clip(action, ...) in step()", f"{WRAPPER_CLASS}.step")
        try:
            bounds = [literal(a.value) for a in call.args[1:3]]
        except NotLiteral:
            bounds = [self.file.code(a.value) for a in call.args[1:3]]
        return Read(bounds, (self.file.at(call),), f"`{self.file.code(call)}` in {WRAPPER_CLASS}.step")

    def time_outs(self) -> Read | Missing:
        """The ``"time_outs"`` entry of the extras ``step`` returns, and what it holds."""
        for node in self.file.nodes(self.step, lambda n: isinstance(n, cst.DictElement)):
            if isinstance(node.key, cst.SimpleString) and node.key.evaluated_value == "time_outs":
                return Read(self.file.code(node.value), (self.file.at(node),),
                            f"extras[\"time_outs\"] = {self.file.code(node.value)} in {WRAPPER_CLASS}.step")
        return self.file.missing("step() returns no extras[\"time_outs\"]", f"{WRAPPER_CLASS}.step")
