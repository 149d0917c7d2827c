"""Brax's own training script, ``brax/training/learner.py``, as a reference: the ``ppo.train``
call its ``main`` makes with every absl flag at its default (``--learner ppo``).

The data-flow engine (:mod:`brax_diff.extractors.engine.flow`) runs ``main`` over that one module, with a
model of absl's ``flags.DEFINE_*`` (a holder whose ``value`` is the flag's default and which is
not ``present`` on the command line); ``ppo.train`` and ``make_ppo_networks`` stay outside the
files run, so their calls are recorded with what they receive: ``train``'s keyword arguments,
and ``network_factory``'s ``functools.partial`` chain. These become the scopes the Brax code
reader takes, as a Playground config's would. The script never reads Playground's
``*_params.py``: every environment gets the same flags.
"""

from __future__ import annotations

from brax_diff.facts.model import Provenance

from ..engine import flow
from .scope import Code, Scope, Setting
from ..engine.flow import Class, Engine, Loader, V, const

LEARNER = "brax/training/learner.py"
LEARNER_MODULE = "brax.training.learner"
PPO_TRAIN = "brax.training.agents.ppo.train.train"
FLAG = Class("FlagHolder", [], {}, None)
FLAG_KINDS = ("integer", "float", "string", "bool", "boolean", "enum", "enum_class", "list", "multi_string",
              "multi_integer", "multi_float", "multi_enum")
ORIGIN = "learner.py flag default"


# The modules run: the script, the networks module for the names its flags select
# (``brax_networks.ACTIVATION[flag]``) and PPO's optimizer module for its enum defaults
# (``ppo_optimizer.LRSchedule.NONE``: the member train() compares against, not an opaque name);
# ``ppo.train`` and the rest stay external.
RUN = {LEARNER_MODULE: LEARNER, "brax.training.networks": "brax/training/networks.py",
       "brax.training.agents.ppo.optimizer": "brax/training/agents/ppo/optimizer.py"}


class _OnlyModules(Loader):
    """Only the modules of ``RUN`` are run; every other import is an external name."""

    def find(self, dotted: str) -> str | None:
        path = RUN.get(dotted)
        return path if path is not None and self.snapshot.exists(path) else None


def _define(engine: Engine, args: list[V], kwargs: dict[str, V]) -> V:
    name = args[0] if args else kwargs.get("name", const(None))
    default = args[1] if len(args) > 1 else kwargs.get("default", const(None))
    if flow.is_const(name) and flow.plain(name) == "learner":  # the PPO reference: --learner ppo
        default = const("ppo", flow.all_lines(default))
    # The flag's own line too: a default read from another module (an enum member) carries only that module's.
    return engine.instance(V(FLAG), {"value": default.with_lines(name.lines), "present": const(False), "name": name})


MODEL = {f"absl.flags.DEFINE_{kind}": _define for kind in FLAG_KINDS}


class LearnerScopes:
    """The train() and make_ppo_networks() scopes learner.py's ``main`` passes, or why not."""

    def __init__(self, snapshot) -> None:
        self.snapshot = snapshot
        self._done: tuple[Scope, Scope, str | None] | None = None

    def scopes(self) -> tuple[Scope, Scope, str | None]:
        """(train scope, network scope, why they are empty)."""
        if self._done is None:
            self._done = self._run()
        return self._done

    def _run(self) -> tuple[Scope, Scope, str | None]:
        if not self.snapshot.exists(LEARNER):
            return {}, {}, f"{LEARNER} not found"
        engine = Engine(_OnlyModules(self.snapshot, ("brax",)), assume=MODEL, watch={"train"})
        module = engine.module(LEARNER_MODULE)
        main = engine.lookup(module, "main") if module is not None else None
        if main is None or not isinstance(main.data, flow.Function):
            return {}, {}, f"main() not found in {LEARNER}"
        engine.call(main, const([]))
        calls = [c for c in engine.calls if c.name == "train" and flow.qualified_name(c.callee) == PPO_TRAIN]
        if not calls:
            return {}, {}, f"main() in {LEARNER} makes no ppo.train call the engine reaches with --learner ppo"
        call = calls[-1]
        at = self.snapshot.where(call.path, call.line)
        train = {name: self._setting(value, at) for name, value in call.kwargs.items() if name != "network_factory"}
        network = {name: self._setting(value, at) for name, value in _partial_kwargs(call.kwargs.get("network_factory"))}
        return train, network, None

    def _setting(self, value: V, call_at: Provenance) -> Setting:
        lines = tuple(sorted(flow.all_lines(value))) + (call_at,)
        if flow.is_const(value):
            return Setting(flow.plain(value), lines, ORIGIN)
        return Setting(Code(flow.describe(value)), lines, ORIGIN)


def _partial_kwargs(factory: V | None) -> list[tuple[str, V]]:
    """The keyword arguments of a ``functools.partial`` chain, innermost first (an outer one wins)."""
    chain = []
    while factory is not None and isinstance(factory.data, flow.Partial):
        chain.append(factory.data)
        factory = factory.data.function
    out: dict[str, V] = {}
    for partial in reversed(chain):
        out.update(partial.kwargs)
    return sorted(out.items())
