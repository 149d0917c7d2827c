"""SLM-Lab's side: a spec variant's effective PPO settings at a git ref, as canonical facts.

The spec gives the declared values (``slm_spec``), SLM-Lab's code at the same commit
gives the defaults for absent keys, the adjustments made before training and what each
setting does (``slm_code``). Every fact points at the YAML line its value is written on,
or at the code line it comes from; a derived fact lists all its inputs. Where the code
changes a spec value (rounding ``time_horizon`` to ``num_envs``, ...), ``Fact.value`` is
what trains and ``Fact.declared`` what the spec says. Spec-sourced facts carry
``note="spec: agent.algorithm.time_horizon"``-style key paths so fixes can name them.

A spec that names something the code does not define, or sets a key no code reads, is
an ERROR finding (``spec_code_mismatch`` / ``unread_spec_key``) with both provenances.

The variant is also built and trained once by the data-flow engine (:mod:`brax_diff.extractors.slm.run`):
the batch guard, the value loss handed to the critic's ``train_step`` (on the branch the
variant takes), the ratio clamp, the schedulers, the actor/critic nets and the specs they
are built from, the env wrapper chain's reward multiplier and the layer keeping observation
statistics, ``calc_gaes`` (what cuts its bootstrap, and where train() runs it), the gradient
clips (whose parameters) and the entropy in the policy loss are read from what that run
computes. A raise every run reaches is a ``cannot_train`` ERROR with its line; with any
``cannot_train`` or ``spec_code_mismatch`` finding the variant cannot train at this ref
(:func:`trains`). Every canonical key is in every extraction: a key the code's shape does
not let the extractor read is null with ``unknown`` and a finding saying why.
"""

from __future__ import annotations

import libcst as cst

import fnmatch
import math
from typing import Any

from brax_diff.errors import BraxDiffError, SpecError
from brax_diff.facts.model import Extraction, Fact, Finding, Provenance
from brax_diff.sources.repository import Snapshot
from brax_diff.facts.vocabulary import KEYS, canonical_activation

from ..engine import flow, semantics
from ..playground import state as playground_state
from . import code as code
from .run import SlmRun
from . import interface
from .setup import SETUP_KEYS, SetupFacts
from .spec import ResolvedSpec, read_spec_file
from ..mapping import FAMILIES, load_mapping, validate_mapping  # noqa: F401 (re-exported)
from ..engine.value_loss import value_loss_form

DEFAULT_SPEC = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"

# Spec names -> canonical enum values.
DISTRIBUTIONS = {"Normal": "normal", "NormalTanh": "tanh_normal", "TanhNormal": "tanh_normal"}
KERNEL_INITS = {"orthogonal_": "orthogonal", "xavier_uniform_": "xavier_uniform",
                "kaiming_uniform_": "kaiming_uniform", "lecun_uniform_": "lecun_uniform"}
LINEAR_SCHEDULERS = {"LinearToZero": 0.0}  # name -> final factor; LinearToMin reads min_factor
LAYER_NAMES = ("LazyLinear", "Linear")
# Parts of a variant SLM-Lab indexes as dicts: not being one is bad input, not a finding.
REQUIRED_MAPPINGS = ("agent", "agent.algorithm", "agent.net", "env")
NULLABLE_MAPPINGS = ("agent.memory", "agent.algorithm.clip_eps_spec", "agent.algorithm.entropy_coef_spec",
                     "agent.net.optim_spec", "agent.net.loss_spec", "agent.net.lr_scheduler_spec",
                     "agent.net.actor_arc", "agent.net.critic_arc")
# Spec values read as numbers, and as names (looked up in tables): a value of another type is
# one SpecError naming its line, not a TypeError deep in a fact.
SPEC_NUMBERS = ("env.num_envs", "env.reward_scale", "env.clip_obs", "agent.algorithm.time_horizon",
                "agent.algorithm.minibatch_size", "agent.algorithm.training_epoch", "agent.algorithm.gamma",
                "agent.algorithm.lam",
                "agent.algorithm.val_loss_coef", "agent.algorithm.clip_eps_spec.start_val",
                "agent.algorithm.entropy_coef_spec.start_val", "agent.net.clip_grad_val", "agent.net.optim_spec.lr",
                "agent.net.optim_spec.eps", "agent.net.lr_scheduler_spec.min_factor", "agent.net.log_std_init")
SPEC_NAMES = ("env.name", "agent.memory.name", "agent.algorithm.name", "agent.algorithm.action_pdtype",
              "agent.algorithm.clip_eps_spec.name", "agent.algorithm.entropy_coef_spec.name", "agent.net.type",
              "agent.net.optim_spec.name", "agent.net.loss_spec.name", "agent.net.lr_scheduler_spec.name",
              "agent.net.hid_layers_activation", "agent.net.init_fn")
# Keys SLM-Lab's own machinery reads from every algorithm/net spec, outside the class.
ALGORITHM_KEYS_READ_ELSEWHERE = {"name"}
# torch.distributions classes whose entropy() is a closed form of their parameters (none samples).
TORCH_CLOSED_FORM_ENTROPY = frozenset({"Normal", "MultivariateNormal", "Beta", "Gumbel", "LogNormal", "Categorical",
                                       "Bernoulli", "Laplace", "Uniform"})
TORCH_ADAM_EPS = 1e-8  # torch.optim.Adam's default eps
TORCH_ADAM_LR = 1e-3  # torch.optim.Adam's default lr
# Findings that say the variant cannot train at the ref (the others inform).
BLOCKING_KINDS = ("cannot_train", "spec_code_mismatch")


def trains(extraction: Extraction) -> tuple[bool, str | None]:
    """Whether a variant can train at its ref, and if not the first reason, with its line."""
    blocking = [f for f in extraction.findings if f.kind in BLOCKING_KINDS and f.severity == "ERROR"]
    if not blocking:
        return True, None
    first = sorted(blocking, key=lambda f: (f.kind != "cannot_train", f.message))[0]
    where = ", ".join(f"{p.path}:{p.line}" for p in first.provenance[:2])
    return False, first.message + (f" ({where})" if where else "")


class SlmExtractor:
    """One SLM-Lab snapshot and spec file; facts per variant."""

    def __init__(self, snapshot: Snapshot, spec: str = DEFAULT_SPEC, sets: dict[str, str] | None = None,
                 mapping: dict | None = None, playground: Snapshot | None = None) -> None:
        """``playground``: the Playground commit the env builder calls into (its registry's
        configs decide part of the setup, :meth:`setup`); without it those parts stay unknown."""
        self.snapshot = snapshot
        self.playground = playground
        self._env_configs = None
        self.spec_path = spec
        if not snapshot.exists(spec):
            raise SpecError(f"spec file {spec} not found at {snapshot.ref} ({snapshot.sha[:12]})")
        self.spec_file = read_spec_file(snapshot.read(spec), spec, sets)
        self.mapping = validate_mapping(mapping) if mapping is not None else load_mapping()
        self.tree = code.SourceTree(snapshot)

    # -- mapping ------------------------------------------------------------------------
    def variants(self) -> list[str]:
        return self.spec_file.variants()

    def family_of(self, variant: str) -> str | None:
        entry = self.mapping.get("variants", {}).get(variant)
        return entry.get("family") if entry else None

    def envs_of(self, variant: str) -> list[str]:
        entry = self.mapping.get("variants", {}).get(variant) or {}
        return sorted(str(e) for e in entry.get("envs", []))

    def variant_for(self, family: str | None = None, env: str | None = None) -> str:
        """The env's own variant when the mapping has one (exact name before patterns),
        else the family's default: the first of its candidates this spec defines."""
        present = set(self.variants())
        if env:
            # The env's family first (exact name before patterns), then a variant of another family
            # that names the env exactly: a mapping that says so is followed, never ignored.
            for exact, same_family in ((True, True), (False, True), (True, False)):
                for name, entry in self.mapping.get("variants", {}).items():
                    if name not in present or (same_family and family and entry.get("family") != family):
                        continue
                    patterns = [str(e) for e in entry.get("envs", [])]
                    if any((p == env) if exact else fnmatch.fnmatchcase(env, p) for p in patterns):
                        return name
        if family is None:
            raise BraxDiffError(f"no SLM-Lab variant is mapped to env {env!r}; name its family or use --variant")
        candidates = self.mapping.get("family_defaults", {}).get(family)
        if candidates is None:
            raise BraxDiffError(f"no default SLM-Lab variant for family {family!r} in the mapping")
        for name in [candidates] if isinstance(candidates, str) else candidates:
            if name in present:
                return name
        raise BraxDiffError(f"{self.spec_path} at {self.snapshot.ref} defines none of the {family} variants "
                            f"{', '.join([candidates] if isinstance(candidates, str) else candidates)}")

    # -- facts --------------------------------------------------------------------------
    def variant(self, name: str) -> Extraction:
        spec = self.spec_file.resolve(name)
        spec.require_mappings(REQUIRED_MAPPINGS, NULLABLE_MAPPINGS)
        spec.require_types(SPEC_NUMBERS, SPEC_NAMES)
        extraction = Extraction(
            side="slm",
            sources={"slm": self.snapshot.info()},
            scope={"variant": name, "family": self.family_of(name), "envs": self.envs_of(name)},
        )
        _VariantFacts(self, spec, extraction).build()
        for fact in interface.variant_facts(self.snapshot):
            extraction.put(fact)
        extraction.complete(KEYS, "SLM-Lab's spec and code")
        return extraction

    def setup(self, variant: str, env: str) -> Extraction:
        """The training setup ``variant`` runs Playground environment ``env`` with: the env
        its builder makes for ``playground/<env>`` (:mod:`brax_diff.extractors.slm.setup`)."""
        spec = self.spec_file.resolve(variant)
        extraction = Extraction(side="slm", sources={"slm": self.snapshot.info()},
                                scope={"variant": variant, "env": env})
        libraries = None
        if self.playground is not None:
            from ..playground.env import EnvConfigs

            if self._env_configs is None:
                self._env_configs = EnvConfigs(self.playground)
            libraries = self._env_configs.registry_model()
            extraction.sources["playground"] = self.playground.info()
        run = SlmRun(self.snapshot, spec, f"playground/{env}", libraries)
        SetupFacts(self.snapshot, run, env, extraction, playground=self._env_configs if libraries else None).build()
        for fact in interface.setup_facts(self.snapshot, self.playground, env):
            extraction.put(fact)
        self._run_length(spec, extraction)
        return extraction

    def _run_length(self, spec: ResolvedSpec, extraction: Extraction) -> None:
        """``training_env_steps`` in Brax's unit for this environment: ``env.max_frame`` counts the
        vector env's frames, one per agent step, each ``action_repeat`` underlying steps. A
        ``max_frame`` that is no run length leaves the variant's own fact (an explained unknown)."""
        value = spec.get("env.max_frame")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or value != int(value):
            return
        line = spec.line("env.max_frame")
        at = (self.snapshot.where(spec.path, line),) if line is not None else ()
        repeat = extraction.facts.get("action_repeat")
        if repeat is None or repeat.is_unknown or not isinstance(repeat.value, int):
            extraction.add(Fact("training_env_steps", None, at, unknown="training_env_steps: max_frame counts agent "
                                "steps, and this environment's action repeat is unknown"))
            return
        extraction.add(Fact("training_env_steps", int(value) * repeat.value, (*at, *repeat.provenance),
                            f"max_frame {int(value):,} frames (agent steps) x action_repeat {repeat.value}: env "
                            "steps as Brax counts them"))

    def run_env_name(self, variant: str, spec: ResolvedSpec) -> str | None:
        """The env a run builds when ``${env}`` is unset: the variant's first mapped env."""
        name = spec.get("env.name")
        if not (isinstance(name, str) and "${" in name and "playground" in self.spec_path):
            return None
        envs = [e for e in self.envs_of(variant) if not any(c in e for c in "*?[")]
        return f"playground/{envs[0]}" if envs else "playground/${env}"


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _VariantFacts:
    """Builds one variant's facts; each ``_topic`` method adds one group of keys."""

    def __init__(self, owner: SlmExtractor, spec: ResolvedSpec, extraction: Extraction) -> None:
        self.owner = owner
        self.snapshot = owner.snapshot
        self.tree = owner.tree
        self.spec = spec
        self.out = extraction

    # provenance helpers
    def at_spec(self, dotted: str) -> Provenance:
        return self.snapshot.where(self.spec.path, self.spec.line(dotted) or 1)

    def at_code(self, found: code.Found) -> Provenance:
        return self.snapshot.where(found.path, found.line)

    def add(self, key: str, value: Any, provenance, note: str | None = None, declared: Any = None) -> None:
        assert key in KEYS, key
        if isinstance(provenance, Provenance) or provenance is None:  # None: neither spec nor code sets it
            provenance = (provenance,)
        provenance = tuple(p for p in provenance if p is not None)
        try:
            fact = Fact(key, value, provenance, note, declared if declared != value else None)
        except TypeError:  # a spec value no canonical key can hold (a mapping where a number goes)
            where = f"{provenance[0].path}: line {provenance[0].line}: " if provenance else f"{self.spec.path}: "
            raise SpecError(f"{where}variant {self.spec.name}: {key} would be {_short_repr(value)}, "
                            "which is not a value") from None
        self.out.add(fact)

    def find(self, kind: str, severity: str, message: str, provenance=(), key: str | None = None) -> None:
        self.out.find(Finding(kind, severity, message, tuple(provenance), key))

    def missing_pattern(self, what: str, path: str, key: str | None = None) -> None:
        why = f"{what} not found in {path}"
        if key is not None:
            self.unknown(key, why)
        else:
            self.find("pattern_not_found", "WARNING", why)

    def unknown(self, key: str, why: str, provenance=(), kind: str = "pattern_not_found") -> None:
        """``key`` cannot be read: a null fact saying why, and a finding for the key."""
        if key in self.out.facts and not self.out.facts[key].is_unknown:
            return
        message = f"{key}: {why}"
        where = tuple(p for p in provenance if p is not None)
        self.out.unknown(key, message, Finding(kind, "WARNING", message, where, key), where)

    def lines(self, value: flow.V) -> list[Provenance]:
        return sorted(flow.all_lines(value))

    def setting(self, dotted: str, default: code.Found | None) -> tuple[Any, Provenance | None, str | None]:
        """A spec value with its line and ``spec:`` note, else the code default."""
        if self.spec.has(dotted):
            return self.spec.get(dotted), self.at_spec(dotted), f"spec: {dotted}"
        if default is not None:
            return default.value, self.at_code(default), f"default in code (spec: {dotted} absent)"
        return None, None, None

    def build(self) -> None:
        for path, var in self.spec.unset:
            self.find("unset_placeholder", "INFO",
                      f"{'.'.join(path)} is ${{{var}}}; set it with --set {var}=... "
                      f"({'the run length' if var == 'max_frame' else 'the environment'})",
                      (self.at_spec(".".join(path)),))
        self.algorithm = self._algorithm()
        self.env_code = self.tree.ask(code.read_env)
        self.run = SlmRun(self.snapshot, self.spec, self.owner.run_env_name(self.spec.name, self.spec))
        self._runnability()
        self._batch()
        self._reward_and_observations()
        self._obs_norm_update()
        self._value_and_advantages()
        self._net()
        self._budget()
        self._evaluation()
        for key in SETUP_KEYS:  # what the env builder makes of each environment: SlmExtractor.setup
            self.out.add(Fact(key, None, (), unknown=f"{key}: set per environment by the env builder "
                                                     "(see the environment matrix)"))
        for key in interface.ENV_KEYS:  # each environment's own step: SlmExtractor.setup
            self.out.add(Fact(key, None, (), unknown=f"{key}: set per environment by Playground's code for it "
                                                     "(see the environment matrix)"))
        self._ignored_sets()
        self._declared_not_effective()
        self.out.findings.sort(key=Finding.sort_key)

    # -- declared vs effective ---------------------------------------------------------------
    def _declared_not_effective(self) -> None:
        """A spec value the code replaces before it acts (a batch guard's rounding, a scheduler
        that takes 0.0 for unset, an env that ignores its reward scale): each fact whose
        ``declared`` differs from its value gives an IMPORTANT finding naming both values and
        the code lines that override it (what trains is not what the spec says). Facts with the same cause share one finding; derived facts
        (no ``spec:`` key of their own) are explained by their inputs' findings."""
        explained = {f.key for f in self.out.findings if f.kind == "declared_not_effective"}
        causes: dict[tuple, list[Fact]] = {}
        for fact in self.out.facts.values():
            if fact.declared is None or fact.is_unknown or fact.value is None or fact.key in explained:
                continue
            dotted = _spec_key(fact.note)
            if dotted is None or not self.spec.has(dotted):
                continue
            spec_at = self.at_spec(dotted)
            code_at = tuple(p for p in fact.provenance if p != spec_at)
            causes.setdefault((dotted, repr(fact.declared), repr(fact.value), code_at), []).append(fact)
        for (dotted, _, _, code_at), facts in causes.items():  # the lines are the finding's provenance
            overriding = sorted({f"{p.path}:{p.line}" for p in code_at})
            self.find("declared_not_effective", "IMPORTANT",
                      f"{', '.join(f.key for f in facts)}: the spec asks for {facts[0].declared!r} ({dotted}), "
                      f"but the code runs {facts[0].value!r}"
                      + (f" (overridden at {', '.join(overriding)})" if overriding else ""),
                      (self.at_spec(dotted), *code_at), facts[0].key)

    def _ignored_sets(self) -> None:
        """A ``--set KEY=VALUE`` (SLM-Lab's ``-s``) is text put in place of ``${KEY}``: a variant
        that writes the value itself where the others write ``${KEY}`` ignores it. An IMPORTANT finding
        names the set and the variant's line; on ``env.max_frame`` the run's length keeps the
        variant's value with the set one as ``declared``."""
        spec_file = self.owner.spec_file
        used_lines = set(self.spec.lines.values())
        for key, given in sorted(spec_file.sets.items()):
            placeholder_lines = spec_file.placeholder_lines(key)
            if placeholder_lines & used_lines:
                continue
            written = [(path, self.spec.lines[path]) for path in spec_file.placeholder_paths(key)
                       if path in self.spec.lines]
            where = tuple(self.snapshot.where(self.spec.path, line) for _, line in written)
            shown = "; ".join(f"{'.'.join(path)} is {self.spec.get('.'.join(path))!r}" for path, _ in written)
            fact = self.out.facts.get("training_env_steps")
            max_frame = any(path == ("env", "max_frame") for path, _ in written)
            if max_frame and fact is not None and not fact.is_unknown:
                number = float(given) if _is_number_text(given) else given
                declared = int(number) if isinstance(number, float) and number.is_integer() else number
                self.out.add(Fact(fact.key, fact.value, fact.provenance,
                                  f"{fact.note}; --set {key}={given} is ignored" if fact.note else None,
                                  declared if declared != fact.value else None))
            self.find("declared_not_effective", "IMPORTANT",
                      f"--set {key}={given} is ignored by {self.spec.name}: the variant has no ${{{key}}}"
                      + (f"; {shown}" if shown else ""), where, "training_env_steps" if max_frame else None)

    def _budget(self) -> None:
        """``env.max_frame``: the run's length in env steps, all envs together (SLM-Lab's
        ``-s max_frame=N`` on the command line when the spec leaves it ``${max_frame}``)."""
        value, at, note = self.setting("env.max_frame", None)
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value != int(value) or value <= 0):
            why = ("the spec leaves env.max_frame to the command line: give it with --set max_frame=N"
                   if isinstance(value, str) and "${" in value else f"env.max_frame is {value!r}, not a run length")
            self.unknown("training_env_steps", why, (at,), kind="unset_placeholder" if "--set" in why else
                         "pattern_not_found")
            return
        self.add("training_env_steps", int(value), at, note)

    # -- evaluation protocol -------------------------------------------------------------------
    def _evaluation(self) -> None:
        """How a session scores the run (``slm_lab/experiment/control.py``): with
        ``meta.rigorous_eval`` a separate env every ``meta.eval_frequency`` frames, running the
        policy's samples; without, the training env itself, whose episodes' returns are logged
        every ``meta.log_frequency`` frames. ``run_rl`` resets a vector env only when its episodes
        end (its own resets are for a single env)."""
        keys = ("eval_policy", "eval_interval_env_steps", "num_resets_per_eval", "env_steps_between_resets")
        ev = self.tree.ask(code.read_evaluation)
        if ev is None:
            for key in keys:
                self.unknown(key, f"{code.CONTROL} not found: the session's scoring is not read")
            return
        rigorous, rigorous_at, _ = self.setting("meta.rigorous_eval", ev.rigorous_default)
        control = self.snapshot.where(code.CONTROL, 1)
        if rigorous_at is None or not isinstance(rigorous, (bool, int)):
            why = (f"{code.CONTROL} reads no rigorous_eval with a literal default"
                   if rigorous_at is None else f"meta.rigorous_eval is {rigorous!r}")
            for key in ("eval_policy", "eval_interval_env_steps"):
                self.unknown(key, why, (rigorous_at or control,))
        else:
            self._eval_policy(ev, bool(rigorous), rigorous_at)
            self._eval_interval(ev, bool(rigorous), rigorous_at)
        guarded = ev.loop is not None and ev.loop_resets and all(r.value for r in ev.loop_resets)
        if ev.loop is None or not (guarded or not ev.loop_resets):
            for key in ("num_resets_per_eval", "env_steps_between_resets"):
                self.unknown(key, f"{code.CONTROL} run_rl: the training loop resets the env in a shape the "
                                  "extractor does not read", (control,))
            return
        loop = [self.at_code(ev.loop), *(self.at_code(r) for r in ev.loop_resets)]
        self.add("num_resets_per_eval", 0, loop,
                 "run_rl's loop resets the env only when it is not a vector env: a Playground vector env resets "
                 "each episode as it ends, never all together")
        self.add("env_steps_between_resets", 0, loop,
                 "run_rl never resets a vector env's envs together: each runs until its episode ends")

    def _eval_policy(self, ev: code.EvalCode, rigorous: bool, rigorous_at: Provenance) -> None:
        if not rigorous:
            if ev.shared_env is None:
                self.unknown("eval_policy", f"{code.CONTROL}: without rigorous_eval, no `self.eval_env = self.env`: "
                                            "which env is scored is not read", (rigorous_at,))
                return
            self.add("eval_policy", "training_episodes", [rigorous_at, self.at_code(ev.shared_env)],
                     "rigorous_eval off: the session scores the training env's own episodes (sampled actions, "
                     "while the policy learns)")
            return
        if ev.sampler is None:
            self.unknown("eval_policy", f"{code.POLICY_UTIL} sample_action: no action_pd.sample() found",
                         (rigorous_at,))
            return
        self.add("eval_policy", "sampled", [rigorous_at, self.at_code(ev.sampler)],
                 "rigorous_eval on: a separate eval env runs the agent's act, which samples the action "
                 "(policy_util.sample_action)")

    def _eval_interval(self, ev: code.EvalCode, rigorous: bool, rigorous_at: Provenance) -> None:
        name = "eval_frequency" if rigorous else "log_frequency"
        default = ev.frequency_defaults.get(name)
        if self.spec.has(f"meta.{name}") and ev.frequency_from_meta is not None:
            value, at, note = self.spec.get(f"meta.{name}"), self.at_spec(f"meta.{name}"), f"spec: meta.{name}"
        elif default is not None:
            value, at, note = default.value, self.at_code(default), f"default in code (spec: meta.{name} absent)"
        else:
            self.unknown("eval_interval_env_steps", f"{code.ENV_INIT} _set_env_attributes sets no {name} default",
                         (rigorous_at,))
            return
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value != int(value) or value <= 0):
            self.unknown("eval_interval_env_steps", f"meta.{name} is {value!r}, not a number of frames", (at,))
            return
        self.add("eval_interval_env_steps", int(value), [at, rigorous_at],
                 f"{note}: the session scores every {name} frames (rigorous_eval "
                 f"{'on' if rigorous else 'off'})")

    # -- can it train at this ref? ---------------------------------------------------------
    def _runnability(self) -> None:
        """The raises a run of this variant reaches on every path, and the failures the
        run's shapes decide: each an ERROR ``cannot_train`` finding with its line."""
        env, env_failures, env_calls = self.run.env()
        for error in env_failures[:1]:
            self.cannot_train(f"make_env(spec) stops: {error.message}", error.where)
        if self.run.is_playground():
            builders = [c for c in env_calls if c.name in ("make", "make_vec") and c.args
                        and isinstance(c.args[0].data, str) and c.args[0].data.startswith("playground/")]
            built = [c for c in env_calls if c.name == "PlaygroundVecEnv"]
            if builders and not built:
                self.cannot_train(f"make_env has no builder for playground/ envs at this ref: it calls "
                                  f"gymnasium.{flow.short_name(builders[0].callee)}({builders[0].args[0].data!r}), "
                                  "and gymnasium registers no playground/ env", self.run.where(builders[0]),
                                  self.at_spec("env.name"))
        _, init_failures, why = self.run.algorithm()
        for error in init_failures[:1]:
            self.cannot_train(f"building the algorithm stops: {error.message}", error.where)
        if why is not None and self.algorithm is not None:
            self.find("pattern_not_found", "WARNING", f"the algorithm could not be built by the engine: {why}")
        records, train_failures = self.run.train()
        for error in train_failures[:1]:
            self.cannot_train(f"train() stops: {error.message}", error.where)
        self._repack(records)

    def cannot_train(self, message: str, *where: Provenance | None) -> None:
        self.find("cannot_train", "ERROR", message, tuple(w for w in where if w is not None))

    def _repack(self, records) -> None:
        """``venv_pack(x, num_envs)`` views each minibatch as (-1, num_envs) rows: a
        minibatch of a size num_envs does not divide cannot be re-packed."""
        packs = [r for r in records if r.name == "venv_pack" and len(r.args) >= 2
                 and flow.is_const(r.args[1]) and isinstance(r.args[1].data, int)]
        own = self.algorithm.path if self.algorithm else None
        packs.sort(key=lambda r: r.path != own)  # the re-pack in the algorithm's own minibatch loop first
        minibatch = self.run.attr("minibatch_size")
        horizon = self.run.attr("time_horizon")
        if not packs or minibatch is None or horizon is None or not (flow.is_const(minibatch) and
                                                                     flow.is_const(horizon)):
            return
        num_envs = packs[0].args[1].data
        size, batch = flow.plain(minibatch), flow.plain(horizon) * num_envs
        if not isinstance(size, int) or size <= 0:
            return
        split = self.tree.ask(code.read_minibatch_split, self.algorithm) if self.algorithm else None
        sizes = [size] + ([batch % size] if batch % size and split is not None and split.value == "ceil" else [])
        bad = [n for n in sizes if n % num_envs]
        if bad:
            self.cannot_train(f"train() re-packs each minibatch with venv_pack(x, num_envs={num_envs}), a view to "
                              f"(-1, {num_envs}) rows; a minibatch of {bad[0]} transitions cannot be viewed so "
                              f"(minibatch_size {size}, batch {batch})", self.run.where(packs[0]),
                              *self.lines(minibatch)[:2])

    # -- algorithm: defaults, keys read, the batch guard ---------------------------------
    def _algorithm(self) -> code.AlgorithmCode | None:
        name = self.spec.get("agent.algorithm.name")
        algorithm = self.tree.ask(code.read_algorithm, str(name)) if name else None
        if algorithm is None:
            self.find("spec_code_mismatch", "ERROR",
                      f"agent.algorithm.name {name!r}: no such algorithm class under {code.ALGORITHM_DIR}",
                      (self.at_spec("agent.algorithm.name"),), None)
            return None
        read = set(algorithm.keys) | ALGORITHM_KEYS_READ_ELSEWHERE
        for key in self.spec.get("agent.algorithm", {}) or {}:
            if key not in read:
                self.find("unread_spec_key", "ERROR",
                          f"agent.algorithm.{key} is set but {name}.init_algorithm_params does not read it",
                          (self.at_spec(f"agent.algorithm.{key}"),
                           self.snapshot.where(algorithm.path, algorithm.init_line)))
        memory = self.spec.get("agent.memory.name")
        if memory and self.tree.find_class(code.MEMORY_DIR, str(memory)) is None:
            self.find("spec_code_mismatch", "ERROR", f"agent.memory.name {memory!r}: no such memory class",
                      (self.at_spec("agent.memory.name"),))
        return algorithm

    def algo(self, key: str) -> tuple[Any, Provenance | None, str | None]:
        defaults = self.algorithm.defaults if self.algorithm else {}
        return self.setting(f"agent.algorithm.{key}", defaults.get(key))

    def effective_algo(self, key: str) -> tuple[Any, list, str | None, Any, str | None]:
        """``agent.algorithm.<key>`` as the constructed algorithm holds it: the spec's (or the
        code default's) value unless ``init_algorithm_params`` and what it calls set ``self.<key>``
        to another. Returns (value, lines, note, declared, why unknown)."""
        value, at, note = self.algo(key)
        ran = self.run.constructed_attr(key)
        if ran is None:
            return value, [at], note, value, None
        if not flow.is_const(ran):
            return None, [at, *self.lines(ran)], note, value, (
                f"self.{key} is not computed statically after the algorithm's construction "
                f"({flow.why_not_constant(ran)})")
        now = flow.plain(ran)
        if now == value and type(now) is type(value):
            return value, [at], note, value, None
        return now, [at, *self.lines(ran)], f"{note}; the algorithm sets self.{key} = {now!r}", value, None

    def _batch(self) -> None:
        env_code = self.env_code
        num_envs, num_envs_at, num_envs_note = self.setting(
            "env.num_envs", env_code.keys.get("num_envs") if env_code else None)
        num_envs = num_envs if isinstance(num_envs, int) else 1
        self.add("num_envs", num_envs, num_envs_at, num_envs_note)
        horizon, horizon_at, _ = self.algo("time_horizon")
        minibatch, minibatch_at, _ = self.algo("minibatch_size")
        epochs, epochs_at, epochs_note, epochs_declared, epochs_unknown = self.effective_algo("training_epoch")
        if not isinstance(horizon, int) or not isinstance(minibatch, int):
            why = "time_horizon or minibatch_size is not an integer (absent with no default?)"
            for key in ("unroll_length", "gae_horizon", "unrolls_per_update", "transitions_per_update",
                        "minibatch_transitions", "minibatches_per_epoch", "gradient_steps_per_update",
                        "epochs_per_update"):
                self.unknown(key, why, (self.at_spec("agent.algorithm"),), kind="missing_setting")
            return
        for dotted, value, at in (("env.num_envs", num_envs, num_envs_at),
                                  ("agent.algorithm.time_horizon", horizon, horizon_at),
                                  ("agent.algorithm.minibatch_size", minibatch, minibatch_at)):
            if value < 1:  # SLM-Lab divides by each of them
                where = f"{at.path}: line {at.line}" if at else self.spec.path
                raise SpecError(f"{where}: variant {self.spec.name}: {dotted} must be at least 1, not {value}")
        eff_h, eff_mb, trigger = horizon, minibatch, None
        guard_at: dict[str, list[Provenance]] = {}
        for attr in ("time_horizon", "minibatch_size", "training_frequency"):
            value = self.run.attr(attr)
            if value is None:
                continue
            if not flow.is_const(value):
                self.find("pattern_not_found", "WARNING",
                          f"batch guard: self.{attr} is not computed statically ({flow.why_not_constant(value)})")
                continue
            guard_at[attr] = self.lines(value)
            if attr == "time_horizon":
                eff_h = flow.plain(value)
            elif attr == "minibatch_size":
                eff_mb = flow.plain(value)
            else:
                trigger = flow.plain(value)
        h_prov = [horizon_at, *guard_at.get("time_horizon", [])] if eff_h != horizon else [horizon_at]
        mb_prov = [minibatch_at, *guard_at.get("minibatch_size", [])] if eff_mb != minibatch else [minibatch_at]
        adjusted = " (adjusted by the batch guard in init_algorithm_params)" if eff_h != horizon else ""
        self.add("unroll_length", eff_h, h_prov, f"spec: agent.algorithm.time_horizon{adjusted}", horizon)
        self.add("gae_horizon", eff_h, h_prov,
                 "spec: agent.algorithm.time_horizon; GAE runs over the whole collected batch", horizon)
        memory_name = str(self.spec.get("agent.memory.name") or "OnPolicyBatchReplay")
        trigger_at = self.tree.ask(code.read_training_trigger, memory_name)
        if trigger is not None and trigger_at is not None and trigger_at.value:
            unrolls = trigger // eff_h if eff_h and trigger % eff_h == 0 else None
            self.add("unrolls_per_update", unrolls,
                     [*guard_at.get("training_frequency", [])[:1], self.at_code(trigger_at)],
                     "training_frequency = time_horizon: the memory triggers one update per time_horizon "
                     "steps of all envs")
        else:
            self.missing_pattern("training_frequency trigger", f"{code.MEMORY_DIR}/", "unrolls_per_update")
        batch = num_envs * eff_h
        self.add("transitions_per_update", batch, [num_envs_at] + h_prov, "num_envs x time_horizon",
                 num_envs * horizon)
        if epochs_unknown:
            self.unknown("epochs_per_update", epochs_unknown, epochs_at)
        else:
            self.add("epochs_per_update", epochs, epochs_at, epochs_note, epochs_declared)
        self.add("minibatch_transitions", eff_mb, mb_prov, "spec: agent.algorithm.minibatch_size"
                 + (" (adjusted by the batch guard)" if eff_mb != minibatch else ""), minibatch)
        split = self.tree.ask(code.read_minibatch_split, self.algorithm) if self.algorithm else None
        if split is None:
            self.missing_pattern("split_minibatch", code.LIB_DIR, "minibatches_per_epoch")
            return
        count = math.ceil(batch / eff_mb) if split.value == "ceil" else batch // eff_mb
        if batch % eff_mb:
            self.find("uneven_minibatches", "INFO",
                      f"{batch} transitions / minibatch {eff_mb}: the last minibatch holds {batch % eff_mb}"
                      if split.value == "ceil" else f"{batch % eff_mb} transitions per epoch are dropped",
                      (self.at_code(split),), "minibatches_per_epoch")
        self.add("minibatches_per_epoch", count, [self.at_code(split)] + mb_prov + h_prov + [num_envs_at],
                 f"{split.value}(transitions_per_update / minibatch_transitions)")
        if isinstance(epochs, int):
            self.add("gradient_steps_per_update", epochs * count, [*epochs_at, self.at_code(split)],
                     "epochs_per_update x minibatches_per_epoch (each step updates actor and critic)")

    # -- env: reward scale, observation normalization -------------------------------------
    def _reward_and_observations(self) -> None:
        env_code = self.env_code
        if env_code is None:
            self.missing_pattern("make_env", code.ENV_INIT)
            return
        # Other envs get unreserved keys as gym.make kwargs; the playground builder drops them.
        name = str(self.spec.get("env.name") or "")
        playground = name.startswith("playground/") or ("${" in name and "playground" in self.spec.path)
        for key in self.spec.get("env", {}) or {}:
            if key not in env_code.keys and (playground or env_code.passthrough is None):
                self.find("unread_spec_key", "ERROR",
                          f"env.{key} is set but make_env at this ref does not read it "
                          "(for playground envs nothing else does)",
                          (self.at_spec(f"env.{key}"), self.snapshot.where(code.ENV_INIT, env_code.playground_line)))
        self._reward_scale()
        norm, norm_at, norm_note = self.setting("env.normalize_obs", env_code.keys.get("normalize_obs"))
        norm = bool(norm)
        self.add("obs_normalization", norm, norm_at, norm_note)
        wrapper = env_code.obs_norm_gpu or env_code.obs_norm_cpu
        if not norm:
            self.add("obs_norm_method", "none", norm_at, norm_note)
            self.add("obs_clip", None, norm_at, "no normalization, no clip")
            return
        if wrapper is None:
            self.missing_pattern("observation normalization wrapper", code.ENV_INIT, "obs_norm_method")
            return
        self.add("obs_norm_method", "welford", self.at_code(wrapper),
                 "running mean/var, parallel Welford update over all envs' observations")
        if env_code.obs_eps is not None:
            self.add("obs_norm_std_eps", env_code.obs_eps.value, self.at_code(env_code.obs_eps),
                     "added to the variance before the square root")
        else:
            self.unknown("obs_norm_std_eps", f"TorchNormalizeObservation.__init__(epsilon=...) not found in "
                                             f"{code.ENV_WRAPPERS}")
        if env_code.obs_norm_gpu is not None:
            clip_at = [self.at_code(env_code.obs_norm_gpu)]
            note = "GPU path (device auto -> cuda): TorchNormalizeObservation, no clip"
            if env_code.obs_clip_cpu is not None:
                note += "; the CPU path clips at clip_obs (default 10.0)"
                clip_at.append(self.at_code(env_code.obs_clip_cpu))
            self.add("obs_clip", None, clip_at, note)
        elif env_code.obs_clip_cpu is not None:
            clip_value, clip_src, clip_note = self.setting("env.clip_obs", env_code.keys.get("clip_obs"))
            self.add("obs_clip", 10.0 if clip_value is None else float(clip_value),
                     [clip_src, self.at_code(env_code.obs_clip_cpu)], clip_note)
        else:
            self.unknown("obs_clip", f"no ClipObservation in the playground builder of {code.ENV_INIT}, and no GPU "
                                     "normalizer that does not clip")

    def _obs_norm_update(self) -> None:
        """When the observation statistics move: the wrapper of the env make_env builds whose step
        writes them from the observations it normalizes (:meth:`SlmRun.observation_statistics`)."""
        key = "obs_norm_update"
        enabled = self.out.facts.get("obs_normalization")
        if enabled is None or enabled.is_unknown:
            self.unknown(key, f"obs_normalization not read ({code.ENV_INIT} make_env)")
            return
        if not enabled.value:
            self.add(key, None, enabled.provenance, "observations are not normalized")
            return
        env, failures, _ = self.run.env()
        found = self.run.observation_statistics(env)
        if found.why is not None or found.update is None:
            why = found.why or f"no layer of the env make_env builds ({code.ENV_INIT}) keeps observation statistics"
            if failures:
                why = f"make_env(spec) stops before the env is built ({why})"
            self.unknown(key, why, enabled.provenance)
            return
        self.add(key, found.update, list(found.lines) + list(enabled.provenance),
                 f"{found.wrapper}.step updates the running statistics from each env step's observations (all envs) "
                 "before normalizing them")

    def _reward_scale(self) -> None:
        """The constant between the simulator's reward and the agent, read down the wrapper
        chain make_env(spec) returns (a ``reward_scale`` argument followed into the env class
        that multiplies by it, a TransformReward's function, ...)."""
        env, failures, _ = self.run.env()
        scale = self.run.reward_scale(env)
        declared = self.spec.get("env.reward_scale") if self.spec.has("env.reward_scale") else None
        spec_note = "spec: env.reward_scale; " if self.spec.has("env.reward_scale") else ""
        if scale.why is not None:
            why = scale.why if not failures else f"make_env(spec) stops before the env is built ({scale.why})"
            where = list(scale.lines) + ([self.at_spec("env.reward_scale")] if declared is not None else [])
            self.unknown("reward_scale", why, where)
            self.unknown("reward_scale_site", why, where)
            return
        lines = list(scale.lines)
        if scale.site == "none":
            builder = self.snapshot.where(code.ENV_INIT, self.env_code.playground_line if self.env_code else 1)
            lines = [builder] + ([self.at_spec("env.reward_scale")] if declared is not None else [])
        self.add("reward_scale", float(scale.factor), lines,
                 f"{spec_note}{scale.note}" if scale.site == "env" else
                 f"{spec_note}no layer of the env make_env builds scales rewards at this ref", declared)
        self.add("reward_scale_site", scale.site, lines,
                 f"{scale.note}, before storage" if scale.site == "env" else "make_env applies no reward scale")

    # -- value function, GAE, PPO loss ---------------------------------------------------
    def _value_and_advantages(self) -> None:
        for key, spec_key in (("discount", "gamma"), ("gae_lambda", "lam")):
            value, at, note, declared, why = self.effective_algo(spec_key)
            if why:
                self.unknown(key, why, at)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                self.add(key, float(value), at, note,
                         float(declared) if isinstance(declared, (int, float)) and declared != value else None)
            else:
                self.unknown(key, f"agent.algorithm.{spec_key} is {value!r} and the algorithm sets no default",
                             at, kind="missing_setting")
        self._gae()
        self._value_loss()
        clip_vloss, clip_vloss_at, _ = self.algo("clip_vloss")
        clip_eps, clip_eps_at, clip_eps_note = self.setting("agent.algorithm.clip_eps_spec.start_val", None)
        self.add("value_clipping", clip_eps if clip_vloss else None, clip_vloss_at,
                 "clip_vloss: value clipped around the old value by clip_eps" if clip_vloss else
                 "clip_vloss false: value loss unclipped")
        vnorm, vnorm_at, vnorm_note = self.algo("normalize_v_targets")
        self.add("value_target_normalization", bool(vnorm), vnorm_at, vnorm_note)
        advs, advs_at, advs_note = self.algo("normalize_advantages")
        standardize = code.read_advantage_standardization(self.algorithm) if self.algorithm else None
        if standardize is None:
            self.missing_pattern("advantage standardization in calc_policy_loss", "the algorithm",
                                 "advantage_normalization")
        else:
            self.add("advantage_normalization", bool(advs) if advs is not None else True,
                     [p for p in (advs_at, self.at_code(standardize))],
                     f"{advs_note or 'always'}: standardized inside calc_policy_loss")
            self.add("advantage_normalization_scope", "minibatch", self.at_code(standardize),
                     "calc_policy_loss runs once per minibatch")
        self._clip_epsilon()
        self._schedule_name("agent.algorithm.clip_eps_spec.name")
        self._schedule("clip_eps_scheduler", "agent.algorithm.clip_eps_spec", None,
                       "clip_epsilon_schedule", "clip_epsilon_final")
        self._schedule_name("agent.algorithm.entropy_coef_spec.name")
        self._schedule("entropy_coef_scheduler", "agent.algorithm.entropy_coef_spec", "entropy_coef",
                       "entropy_schedule", "entropy_coef_final")
        self._action_distribution()

    def _gae(self) -> None:
        """``calc_gaes`` as train() calls it, run by the engine: where in train() it runs
        (``gae_recompute``) and what cuts its bootstrap term and trace (``truncation``)."""
        records, _ = self.run.train()
        gaes = [i for i, r in enumerate(records) if r.name == "calc_gaes" and isinstance(r.callee.data, flow.Function)]
        if not gaes:
            why = f"train() calls no {code.MATH_UTIL} calc_gaes() the engine follows"
            self.unknown("gae_recompute", why)
            self.unknown("truncation", why)
            self.unknown("advantage_form", why)
            return
        record = records[gaes[0]]
        loop = [i for i, r in enumerate(records) if r.name in ("split_minibatch", "train_step")]
        if loop and max(gaes) < min(loop):
            first = records[min(loop)]
            self.add("gae_recompute", "per_update", [self.run.where(record), self.run.where(first)],
                     f"calc_gaes runs once in train(), before the epochs' minibatch loop ({first.name} at "
                     f"{first.path}:{first.line}): advantages and value targets stay fixed for the update")
        else:
            train = f"{self.algorithm.path if self.algorithm else code.ALGORITHM_DIR} train()"
            self.unknown("gae_recompute", f"calc_gaes runs inside the minibatch loop of {train} (or train() hands no "
                                          "loss to a train_step): a schedule the extractor does not read",
                         [self.run.where(record)])
        self._truncation(record)
        self._advantage_form(record)

    def _advantage_form(self, record) -> None:
        """calc_gaes run once more: its TD errors ``deltas`` (a reward summand) and the backward
        recursion over them, ``delta_t + gamma * lam * (...) * A_{t+1}`` (a local of its loop), whose
        values fill the array it returns: the advantages the policy loss takes."""
        key = "advantage_form"
        rewards = self.run.argument(record, "rewards")
        gamma, lam = self.run.argument(record, "gamma"), self.run.argument(record, "lam")
        _, frame = self.run.engine.run(record.callee, *record.args, **record.kwargs)
        deltas = frame.locals.get("deltas") if frame is not None else None
        where = [self.run.where(record)]
        if rewards is None or deltas is None or not any(p is rewards for p in semantics.summands(deltas)):
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL} computes no TD errors `deltas` from its rewards", where)
            return
        # Numbers only: a spec's `gamma: ~` reaches calc_gaes as None (SLM-Lab itself fails there).
        numbers = [flow.plain(v) if v is not None and flow.is_const(v) else None for v in (gamma, lam)]
        if not all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in numbers):
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL} is given gamma={numbers[0]!r}, lam={numbers[1]!r}: "
                              "the recursion's rate gamma * lam is not a known number", where)
            return
        rate = numbers[0] * numbers[1]

        def from_deltas(v: flow.V) -> bool:  # deltas[t]
            data = semantics.unwrapped(v).data
            return isinstance(data, flow.Sym) and data.op == "item" and bool(data.args) and data.args[0] is deltas

        def rate_factor(v: flow.V) -> bool:  # the constant gamma * lam (the loop's first pass multiplies by A = 0)
            return any(flow.is_const(x) and isinstance(x.data, float) and math.isclose(x.data, rate, rel_tol=1e-9)
                       for x in semantics.walk(v))

        def recursion_step(v: flow.V) -> bool:  # delta_t + gamma * lam x ... x A_(t+1)
            parts = flow.terms(v)
            rest = [p for p in parts if not from_deltas(p)]
            return rate is not None and len(parts) == 2 and len(rest) == 1 and rate_factor(rest[0])

        steps = [o for v in frame.locals.values() if v is not deltas
                 for o in (v.data.options if isinstance(v.data, flow.Phi) else [v]) if recursion_step(o)]
        if not steps:
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL}: no backward recursion delta_t + gamma * lam * A_(t+1) "
                              "over its `deltas`: a shape the extractor does not read", where)
            return
        lines = sorted(p for p in set(deltas.lines) | set(steps[0].lines) | semantics.product_lines(steps[0])
                       if p.path != self.spec.path) + where
        self.add(key, "gae", lines, "calc_gaes returns the backward sum of the TD errors `deltas` "
                                    "(delta_t + gamma * lam * A_(t+1)): the policy loss takes these advantages")

    def _truncation(self, record) -> None:
        """calc_gaes run once more on the arguments train() gives it: the term of ``deltas`` that
        bootstraps from ``v_preds[1:]`` and the signals ``1 - x`` that cut it. Cut by the
        terminations only, it bootstraps at a truncation from the next stored state, which the
        Playground env's auto-reset makes the next episode's first."""
        key = "truncation"
        v_preds = self.run.argument(record, "v_preds")
        _, frame = self.run.engine.run(record.callee, *record.args, **record.kwargs)
        deltas = frame.locals.get("deltas") if frame is not None else None
        where = [self.run.where(record)]
        if v_preds is None or deltas is None:
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL} computes no `deltas` from `v_preds`", where)
            return
        bootstrap = [t for t in flow.terms(deltas)
                     if any(_next_step(a, v_preds) for a in semantics.factors(t))]
        if len(bootstrap) != 1:
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL}: `deltas` has no single term bootstrapping from "
                              "v_preds[1:]", where)
            return
        cuts = semantics.masks(bootstrap[0])
        cut_by = {semantics.last_name(m) or flow.describe(m) for m in cuts}
        read = set().union(*(semantics.names_read(v) for v in frame.locals.values()))
        lines = sorted(p for p in semantics.product_lines(bootstrap[0]) | {p for m in cuts for p in m.lines}
                       if p.path != self.spec.path) + where
        if cut_by & {"dones", "done"}:
            self.add(key, "terminal", lines, "calc_gaes cuts the bootstrap on dones (terminated or truncated): a "
                                             "truncation is treated as a termination")
            return
        if not cuts or not cut_by <= {"terminateds", "terminated"} or any("trunc" in n for n in read):
            shown = ", ".join(sorted(cut_by)) or "nothing"
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL}: the bootstrap term is cut by {shown}: a shape the "
                              "extractor does not read", lines)
            return
        if not any(_steps_of(a, v_preds) == (None, -1, None) for t in flow.terms(deltas) for a in semantics.factors(t)):
            self.unknown(key, f"calc_gaes() in {code.MATH_UTIL}: `deltas` does not subtract v_preds[:-1], so "
                              "v_preds[t + 1] need not be the next stored state's value", lines)
            return
        env, _, env_calls = self.run.env()
        resets = [c for c in env_calls if c.name == "wrap_for_brax_training"]
        if not resets:
            self.unknown(key, "calc_gaes bootstraps a truncated step from the next stored state's value; what that "
                              "state is after a truncation depends on the env's auto-reset, which the extractor reads "
                              "for playground/ envs only (wrap_for_brax_training)", lines)
            return
        # What `terminateds` holds is what the env's step hands on as terminated.
        ends = self.run.terminations(env)
        lines = sorted(set(lines) | set(ends.lines))
        if ends.kind is None:
            self.unknown(key, f"calc_gaes cuts its bootstrap on the terminateds the env's step hands on: {ends.why}",
                         lines)
        elif ends.kind == "done":
            self.add(key, "terminal", lines,
                     f"calc_gaes cuts its bootstrap on terminateds, and {ends.note}: Playground's done is set at a "
                     "time limit too, so a truncation is treated as a termination")
            self._truncation_read_as_default(ends)
        else:
            self.add(key, "bootstrap_next_obs_across_reset", sorted(set(lines) | {self.run.where(resets[0])}),
                     f"calc_gaes reads no truncation signal, only terminateds ({ends.note}) cut its bootstrap term: "
                     "at a truncation the delta uses V(states[t+1]), which after Playground's auto-reset "
                     "(wrap_for_brax_training) is the next episode's first state, and the GAE trace runs on across "
                     "the boundary")

    def _truncation_read_as_default(self, ends) -> None:
        """The why of a time limit ending as a termination: an attribute step asks of
        Playground's State that the State does not have, so its default is always taken."""
        for name, at in ends.absent:
            where_else = f"; Brax's EpisodeWrapper writes it to state.info[{name!r}]" \
                if name in playground_state.INFO_KEYS else ""
            self.find("always_default", "IMPORTANT",
                      f"truncation: the env's step reads getattr(state, {name!r}, default) at {at.path}:{at.line}, "
                      f"and Playground's State has no attribute {name!r} (its fields are "
                      f"{', '.join(playground_state.STATE_FIELDS)}{where_else}): the default is always taken, "
                      "terminated is the state's done flag, and every time limit ends as a termination "
                      "(no bootstrap)", (at,), "truncation")

    def statements(self, lines) -> list[str]:
        """The code statements on these provenance lines (spec lines left out), for notes."""
        out = []
        for path in sorted({p.path for p in lines if p.path != self.spec.path}):
            module = self.tree.module(path)
            if module is None:
                continue
            wanted = {p.line for p in lines if p.path == path}
            for node in module.of_kinds((cst.Assign, cst.Return, cst.AugAssign)):
                if module.line(node) in wanted:
                    text = " ".join(module.code(node).split())
                    if text not in out:
                        out.append(text)
        return out

    def _losses_to_train_step(self):
        """(loss term, record) for every term of a loss train() hands to a net's train_step
        that is made from what calc_val_loss returned."""
        records, _ = self.run.train()
        results = [r.result for r in records if r.name == "calc_val_loss"]
        result_ids = {id(r) for r in results}  # `results` keeps them alive: ids stay theirs
        found = []
        for record in records:
            callee = record.callee.data
            if record.name != "train_step":
                continue
            args = list(record.args)
            if isinstance(callee, flow.Function) and args:  # called unbound: self is the first argument
                params = [p.name.value for p in callee.node.params.params]
                if params[:1] == ["self"]:
                    args = args[1:]
            loss = args[0] if args else record.kwargs.get("loss")
            if loss is None:
                continue
            for term in flow.terms(loss):
                # One walk of the term for all results (a walk per result took a second a variant).
                if flow.mentions(term, lambda v: id(v) in result_ids):
                    known = [i for i, (seen, _) in enumerate(found) if seen is term]
                    if not known:
                        found.append((term, record))
                    elif record.path.startswith(code.ALGORITHM_DIR):  # cite the algorithm's call, not a wrapper's
                        found[known[0]] = (term, record)
        return found

    def _value_loss(self) -> None:
        """The value term of the loss train() hands to train_step, on the branch this
        variant runs: its constant factors are the coefficient, what is left the form."""
        keys = ("value_loss", "value_loss_coef")
        instance, _, why = self.run.algorithm()
        if instance is None:
            for key in keys:
                self.unknown(key, f"the algorithm could not be built: {why or 'see the cannot_train finding'}")
            return
        terms = self._losses_to_train_step()
        if not terms:
            for key in keys:
                self.unknown(key, f"no loss made by calc_val_loss reaches a train_step in "
                                  f"{self.algorithm.path if self.algorithm else 'the algorithm'} train()")
            return
        readings = {}
        for term, record in terms:
            parts = flow.linear(term)
            form, form_why = value_loss_form(parts.atoms)
            readings.setdefault((parts.coefficient, form), (term, parts, form_why, record))
        if len(readings) > 1:
            shown = "; ".join(f"{c} x {f}" for c, f in readings)
            for key in keys:
                self.unknown(key, f"the value losses train() hands to train_step differ: {shown}")
            return
        (coef, form), (term, parts, form_why, record) = next(iter(readings.items()))
        where = sorted(parts.lines) + [self.run.where(record)]
        _, _, coef_note = self.algo("val_loss_coef")
        executed = self.statements(parts.lines)
        if form is None:
            self.unknown("value_loss", form_why, where)
        else:
            loss_at = self.at_spec("agent.net.loss_spec.name") if self.spec.has("agent.net.loss_spec.name") else None
            self.add("value_loss", form, [loss_at] + where, form_why)
        if coef is None:
            self.unknown("value_loss_coef", f"cannot evaluate the constant factors of the value loss "
                                            f"`{flow.describe(term)}`: {parts.why}", where)
            return
        self.add("value_loss_coef", float(coef), where,
                 f"{coef_note or 'val_loss_coef'}; the value loss handed to train_step is "
                 f"{' then '.join(f'`{t}`' for t in executed) or flow.describe(term)}")

    def _clip_epsilon(self) -> None:
        """The bounds of the clamp on the probability ratio in the policy loss train() computes."""
        records, _ = self.run.train()
        found = {}
        for record in records:
            if record.name != "clamp":
                continue
            low = record.args[1] if len(record.args) > 1 else record.kwargs.get("min")
            high = record.args[2] if len(record.args) > 2 else record.kwargs.get("max")
            if low is None or high is None or not (flow.is_const(low) and flow.is_const(high)):
                continue
            lo, hi = flow.plain(low), flow.plain(high)
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and abs(lo + hi - 2.0) < 1e-9 and hi > 1:
                eps = float(f"{hi - 1.0:.12g}")
                found.setdefault(eps, (low, high, record))
        if len(found) != 1:
            why = ("no clamp of the ratio to [1 - eps, 1 + eps] in the losses train() computes" if not found else
                   f"train() clamps the ratio with several ranges: {sorted(found)}")
            for key in ("clip_epsilon",):
                self.unknown(key, why)
            return
        (eps, (low, high, record)), = found.items()
        where = sorted(flow.all_lines(low) | flow.all_lines(high)) + [self.run.where(record)]
        note = "spec: agent.algorithm.clip_eps_spec.start_val" if self.spec.has(
            "agent.algorithm.clip_eps_spec.start_val") else "the clip scheduler's start value"
        self.add("clip_epsilon", eps, where, f"{note}; the ratio is clamped to [{flow.plain(low):.6g}, "
                                             f"{flow.plain(high):.6g}]")

    def _schedule(self, attr: str, dotted: str, start_key: str | None, shape_key: str, final_key: str) -> None:
        """A VarScheduler the algorithm builds from ``dotted``: its updater (a math_util
        function) evaluated at the schedule's start, middle and end steps says the shape;
        its value at the end is the final value."""
        scheduler = self.run.attr(attr)
        keys = [k for k in (start_key, shape_key, final_key) if k]
        if scheduler is None or not isinstance(scheduler.data, flow.Instance):
            why = (f"{dotted} is not set: the algorithm builds no {attr}" if not self.spec.get(dotted) else
                   f"the algorithm built no {attr} (see the findings)")
            for key in keys:
                self.unknown(key, why, [self.at_spec(dotted)] if self.spec.has(dotted) else [])
            return
        attrs = scheduler.data.attrs
        updater, start, end = attrs.get("_updater"), attrs.get("start_val"), attrs.get("end_val")
        first = attrs.get("start_step", flow.sym("param", "start_step"))
        last = attrs.get("end_step", flow.sym("param", "end_step"))
        name_at = self.at_spec(f"{dotted}.name") if self.spec.has(f"{dotted}.name") else None
        if start_key and start is not None and flow.is_const(start) and isinstance(flow.plain(start), (int, float)):
            self.add(start_key, float(flow.plain(start)), self.lines(start) or [self.at_spec(f"{dotted}.start_val")],
                     f"spec: {dotted}.start_val")
        elif start_key:
            self.unknown(start_key, f"{attr}.start_val is not a number the engine computes")
        if updater is None or start is None or end is None or not isinstance(updater.data, flow.Function):
            for key in (shape_key, final_key):
                self.unknown(key, f"{attr} has no updater function and start/end values to evaluate")
            return
        function = updater.data
        where = [name_at, self.run.engine.where(function.module, function.node)]
        shape, final, at = self._schedule_shape(updater, start, end, first, last)
        if final is None:
            for key in (shape_key, final_key):
                self.unknown(key, f"{function.name}({dotted}) at the end step is not computed statically: "
                                  f"{flow.why_not_constant(at[2])}", where)
            return
        # What the spec asks for, where the scheduler's code replaced one of its values.
        values = {"start_val": start, "end_val": end, "start_step": first, "end_step": last}
        written, overrides = self._overridden(dotted, values)
        declared_shape = declared_final = None
        if overrides:
            declared_shape, declared_final, _ = self._schedule_shape(updater, *({**values, **written}.values()))
        replaced = "; ".join(f"the spec's {dotted}.{name} {self.spec.get(f'{dotted}.{name}')!r} is replaced by "
                             f"{flow.plain(values[name])!r} in the code" for name in written)
        self.add(shape_key, shape, where + overrides, f"spec: {dotted}.name; math_util.{function.name} evaluated at "
                 "the schedule's start, middle and end" + (f"; {replaced}" if replaced else ""), declared_shape)
        final_from = next(iter(written), "end_val" if shape != "constant" else "start_val")
        self.add(final_key, float(final), where + self.lines(at[2]) + overrides,
                 f"spec: {dotted}.{final_from}; " + (f"{function.name} at the end step" if shape != "constant" else
                                                     "constant") + (f"; {replaced}" if replaced else ""),
                 None if declared_final is None else float(declared_final))

    def _schedule_shape(self, updater: flow.V, start: flow.V, end: flow.V, first: flow.V, last: flow.V):
        """(shape, final value, the updater's values at the start, middle and end steps); the
        shape and final are None when the end value is not computed statically."""
        mid = flow.const((flow.plain(first) + flow.plain(last)) / 2) if flow.is_const(first) and flow.is_const(
            last) else flow.sym("param", "mid_step")
        at = [self.run.engine.call(updater, start, end, first, last, step) for step in (first, mid, last)]
        numbers = [flow.plain(v) if flow.is_const(v) and isinstance(flow.plain(v), (int, float)) else None for v in at]
        begin, middle, final = numbers
        if final is None:
            return None, None, at
        if begin is not None and middle is not None and begin == final == middle:
            shape = "constant"
        elif begin is not None and middle is not None and abs(middle - (begin + final) / 2) <= 1e-9 * max(
                1.0, abs(begin), abs(final)):
            shape = "linear_decay"
        else:
            shape = "other"
        return shape, final, at

    def _overridden(self, dotted: str, values: dict[str, flow.V]) -> tuple[dict[str, flow.V], list[Provenance]]:
        """The spec values under ``dotted`` the code replaced before use (SLM-Lab's VarScheduler
        takes an ``end_val`` of 0.0 for unset): each as the spec writes it, with the spec line
        and the code lines that replace it."""
        written: dict[str, flow.V] = {}
        lines: list[Provenance] = []
        for name, value in values.items():
            declared = self.spec.get(f"{dotted}.{name}")
            if not self.spec.has(f"{dotted}.{name}") or not _is_number(declared) or value is None or not (
                    flow.is_const(value) and _is_number(flow.plain(value))) or float(flow.plain(value)) == float(
                    declared):
                continue
            at = self.at_spec(f"{dotted}.{name}")
            written[name] = flow.const(declared, [at])
            lines += [at] + [p for p in self.lines(value) if p.path != self.spec.path]
        return written, lines

    def _schedule_name(self, dotted: str) -> str | None:
        name = self.spec.get(dotted)
        if name is None:
            return None
        defined = self.tree.ask(code.read_var_schedulers)
        if defined and name not in defined:
            self.find("spec_code_mismatch", "ERROR",
                      f"{dotted} {name!r}: VarScheduler looks it up in math_util, which has no such function",
                      (self.at_spec(dotted), self.snapshot.where(code.MATH_UTIL, 1)))
        return name

    def _action_distribution(self) -> None:
        pdtype, pd_at, pd_note = self.algo("action_pdtype")
        table = self.tree.ask(code.read_action_pds)
        if table is None:
            self.missing_pattern("ACTION_PDS", code.POLICY_UTIL, "action_distribution")
            return
        # "default"/absent: the first of ACTION_PDS' list for the action type (Playground: multi-dim).
        name = table.value["default"] if pdtype in (None, "default") else str(pdtype)
        if name not in table.value["names"]:
            self.find("spec_code_mismatch", "ERROR",
                      f"agent.algorithm.action_pdtype {name!r} is not a continuous distribution the code "
                      f"defines (ACTION_PDS: {', '.join(table.value['names'])})",
                      (pd_at, self.at_code(table)), "action_distribution")
            self.add("action_distribution", None, [pd_at, self.at_code(table)],
                     f"{pd_note}; not defined at this ref, training would fail", name)
        else:
            self.add("action_distribution", DISTRIBUTIONS.get(name, name.lower()), [pd_at, self.at_code(table)],
                     pd_note)
        self._entropy_estimator(name if name in table.value["names"] else None, [pd_at, self.at_code(table)])
        clamp = self.tree.ask(code.read_log_std_clamp)
        if clamp is None:
            self.missing_pattern("log-std clamp in init_action_pd", code.POLICY_UTIL, "std_min")
        else:
            lo, hi = clamp.value
            note = f"log-std clamped to [{lo}, {hi}] then exp"
            self.add("std_transform", "clamped_exp", self.at_code(clamp), note)
            if lo is not None:
                self.add("std_min", math.exp(lo), self.at_code(clamp), f"exp({lo})")
            else:
                self.add("std_min", 0.0, self.at_code(clamp), "no lower clamp: exp of the log-std, > 0")
            self.add("std_max", math.exp(hi) if hi is not None else None, self.at_code(clamp),
                     f"exp({hi})" if hi is not None else "no upper clamp")

    def _entropy_estimator(self, pd_name: str | None, pd_at: list) -> None:
        """The entropy in the policy loss train() computes: ``entropy()`` of the action
        distribution, given no sample; the class is what ``get_action_pd_cls`` resolves the spec's
        distribution to (run by the engine), and torch's distributions compute it in closed form."""
        key = "entropy_estimator"
        records, _ = self.run.train()
        losses = [r for r in records if r.name == "calc_policy_loss"]
        where_loss = self.algorithm.path if self.algorithm else code.ALGORITHM_DIR
        calls = [c for r in losses for c in semantics.calls_of(r.result, "entropy")]
        if not calls:
            self.unknown(key, f"calc_policy_loss() in {where_loss} computes no entropy() of the action distribution "
                              "the engine follows")
            return
        where = sorted({p for c in calls for p in c.lines})
        if any(len(c.data.args) > 1 or c.data.kwargs for c in calls):
            self.unknown(key, f"calc_policy_loss() in {where_loss} gives entropy() an argument: an estimator the "
                              "extractor does not read", where)
            return
        if pd_name is None:
            self.unknown(key, "the action distribution is not defined at this ref", where)
            return
        module = self.run.engine.module("slm_lab.agent.algorithm.policy_util")
        resolve = self.run.engine.lookup(module, "get_action_pd_cls") if module is not None else None
        if resolve is None:
            self.unknown(key, f"get_action_pd_cls() not found in {code.POLICY_UTIL}", where)
            return
        cls = self.run.engine.call(resolve, flow.const(pd_name), flow.const("multi_continuous"))
        name = flow.qualified_name(cls) or ""
        if name.rsplit(".", 1)[0] != "torch.distributions" or name.rsplit(".", 1)[-1] not in TORCH_CLOSED_FORM_ENTROPY:
            self.unknown(key, f"{pd_name} resolves to `{flow.describe(cls)}`, whose entropy() the extractor does not "
                              "know", where)
            return
        self.add(key, "analytic", where + sorted(cls.lines) + pd_at,
                 f"calc_policy_loss takes {name}.entropy() of the action distribution, given no sample: torch's "
                 "closed form")

    # -- networks, optimizer, schedule ------------------------------------------------------
    def _net(self) -> None:
        net_type = self.spec.get("agent.net.type")
        found = self.tree.ask(code.read_net_class, str(net_type)) if net_type else None
        if found is None:
            self.find("spec_code_mismatch", "ERROR",
                      f"agent.net.type {net_type!r}: no such net class under {code.NET_DIR}",
                      (self.at_spec("agent.net.type"),))
            return
        net, read = found
        read = dict(read)
        read.update(self.tree.ask(code.read_net_spec_keys_in_algorithms))
        for key in self.spec.get("agent.net", {}) or {}:
            bare = key.removeprefix("actor_").removeprefix("critic_")
            if key not in read and bare not in read:
                self.find("unread_spec_key", "ERROR", f"agent.net.{key} is set but {net_type} does not read it",
                          (self.at_spec(f"agent.net.{key}"), self.snapshot.where(net.path, net.class_line)))

        def net_setting(key: str):
            return self.setting(f"agent.net.{key}", net.defaults.get(key))

        self._shared_and_layers()
        log_std_init, log_std_at, log_std_note = net_setting("log_std_init")
        param = self.tree.ask(code.read_log_std_param)
        self.add("std_state_dependent", log_std_init is None,
                 [log_std_at] + ([self.at_code(param)] if param else []),
                 f"{log_std_note}; log_std_init null -> the std is a head of the policy net, "
                 "else a state-independent nn.Parameter")
        clip, clip_at, clip_note = net_setting("clip_grad_val")
        scope = self.tree.ask(code.read_grad_clip)
        self.add("max_grad_norm", None if clip is None else float(clip),
                 [clip_at] + ([self.at_code(scope)] if scope else []),
                 f"{clip_note}; clip_grad_norm_ per network (actor and critic separately)"
                 if scope and scope.value == "per_network" else clip_note)
        self._grad_clip_scope()
        self._init(net_setting)
        self._optimizer(net_setting)

    def _grad_clip_scope(self) -> None:
        """The nets whose parameters train() clips (``clip_grad_norm_(net.parameters(), ...)`` in
        each net's ``train_step``): the actor's and the critic's separately, or one shared net."""
        key = "grad_clip_scope"
        records, _ = self.run.train()
        clips = [r for r in records if r.name == "clip_grad_norm_"]
        if not clips:
            clip = self.out.facts.get("max_grad_norm")
            if clip is not None and not clip.is_unknown and clip.value is None:
                self.add(key, None, clip.provenance, "clip_grad_val null: no gradient clipping")
            else:
                self.unknown(key, f"train() clips no gradients the engine follows (clip_grad_norm_ in {code.NET_BASE} "
                                  "train_step)")
            return
        owners = [_parameters_owner(r.args[0]) if r.args else None for r in clips]
        nets = {name: self.run.attr(name) for name in ("net", "critic_net")}
        clipped = [name for name, net in nets.items()
                   if net is not None and any(o is not None and o.data is net.data for o in owners)]
        steps = [self.run.where(r) for r in records if r.name == "train_step" and r.path.startswith(code.ALGORITHM_DIR)]
        where = [self.run.where(clips[0])] + sorted(set(steps))
        shared = self.run.attr("shared")
        if any(o is None for o in owners) or not clipped:
            train = f"{self.algorithm.path if self.algorithm else code.ALGORITHM_DIR} train()"
            self.unknown(key, f"{train} clips the parameters of something other than the algorithm's nets", where)
        elif clipped == ["net", "critic_net"]:
            self.add(key, "per_network", where, "each net's train_step clips its own parameters' gradient norm: the "
                                                "actor's and the critic's separately")
        elif clipped == ["net"] and shared is not None and flow.is_const(shared) and flow.plain(shared) is True:
            self.add(key, "global", where, "one shared net: its train_step clips the gradient norm of the policy and "
                                           "value loss together")
        else:
            self.unknown(key, f"train() clips the parameters of {' and '.join(clipped)} only (shared: "
                              f"{flow.describe(shared) if shared is not None else 'unset'})", where)

    def _shared_and_layers(self) -> None:
        """``self.shared`` as the algorithm's init_nets sets it, and the layers of the nets it
        builds, read from the net spec each net class is constructed with (after the
        actor_/critic_ prefixes are split off, so an ``arc`` both share counts for both)."""
        instance, failures, why = self.run.algorithm()
        stopped = failures[0].message if failures else why
        shared = self.run.attr("shared")
        if shared is not None and flow.is_const(shared) and isinstance(flow.plain(shared), bool):
            self.add("shared_network", flow.plain(shared), self.lines(shared) or [self.at_spec("agent.net")],
                     "spec: agent.net.shared" if self.spec.has("agent.net.shared") else "set by init_nets")
        else:
            why_shared = (f"init_nets stops before it is set: {stopped}" if stopped else
                          "init_nets sets no self.shared the engine can compute")
            self.unknown("shared_network", why_shared, [f.where for f in failures[:1]])
        actor = self.run.net_spec_of("net")
        critic = self.run.net_spec_of("critic_net")
        shared_torso = shared is not None and flow.is_const(shared) and flow.plain(shared) is True
        self._layers(actor, "actor", "policy_hidden_layers", True, stopped)
        if shared_torso:
            self._layers(actor, "actor", "value_hidden_layers", False, stopped,
                         "shared: the value head sits on the policy's torso")
        else:
            self._layers(critic, "critic", "value_hidden_layers", False, stopped)

    def _arc_key(self, role: str) -> str:
        for key in (f"{role}_arc", "arc"):
            if self.spec.has(f"agent.net.{key}"):
                return f"agent.net.{key}"
        return f"agent.net.{role}_arc"

    def _layers(self, net_spec: flow.V | None, role: str, fact_key: str, set_activation: bool,
                stopped: str | None, extra: str | None = None) -> None:
        keys = [fact_key] + (["activation"] if set_activation else [])
        if net_spec is None or not isinstance(net_spec.data, dict):
            why = (f"the {role} net is not built: {stopped}" if stopped else
                   f"the algorithm builds no {role} net the engine can follow")
            for key in keys:
                self.unknown(key, why)
            return
        spec = net_spec.data
        arc_path = self._arc_key(role)
        widths, activations, where, source = [], [], [], None
        arc = spec.get("arc")
        if arc is not None and flow.is_const(arc) and isinstance(flow.plain(arc), dict):
            # The Sequential the widths are read from (written in the variant, or in the anchor it
            # inherits), not the arc's first line: a merged anchor's `input: x` comes before it.
            modules = flow.plain(arc).get("modules") or {}
            sequential = next((f"{arc_path}.modules.{name}.Sequential" for name, module in modules.items()
                               if isinstance(module, dict) and isinstance(module.get("Sequential"), list)), None)
            source = arc_path
            where = ([self.at_spec(sequential)] if sequential and self.spec.line(sequential) is not None
                     else self.lines(arc)[:1] or [self.at_spec(arc_path)])
            for module in _sequential_modules(flow.plain(arc)):
                if not isinstance(module, dict) or len(module) != 1:
                    continue
                (layer, args), = module.items()
                if layer in LAYER_NAMES and isinstance(args, dict) and "out_features" in args:
                    widths.append(args["out_features"])
                elif layer not in LAYER_NAMES and args in (None, {}):
                    activations.append(canonical_activation(layer))
        elif "hid_layers" in spec and flow.is_const(spec["hid_layers"]):
            source = f"agent.net.{role}_hid_layers" if self.spec.has(f"agent.net.{role}_hid_layers") \
                else "agent.net.hid_layers"
            widths = list(flow.plain(spec["hid_layers"]))
            where = self.lines(spec["hid_layers"])[:1]
            activation = spec.get("hid_layers_activation")
            if activation is not None and flow.is_const(activation) and isinstance(flow.plain(activation), str):
                activations = [canonical_activation(flow.plain(activation))]
        note = f"spec: {source} (out_features of each layer)" + (f"; {extra}" if extra else "")
        if widths:
            self.add(fact_key, widths, where, note)
        else:
            self.unknown(fact_key, f"the {role} net spec has no layer list the extractor reads (arc Sequential "
                                   "LazyLinear/Linear layers, or hid_layers)", where)
        if set_activation:
            if activations:
                kinds = sorted(set(activations))
                value = kinds[0] if len(kinds) == 1 and kinds[0] in KEYS["activation"].choices else "other"
                self.add("activation", value, where, f"spec: {source}")
            else:
                self.unknown("activation", f"the {role} net spec names no hidden activation", where)

    def _init(self, net_setting) -> None:
        init_fn, init_at, init_note = net_setting("init_fn")
        activation, _, _ = net_setting("hid_layers_activation")
        gain = self.tree.ask(code.read_init_gain)
        if init_fn is None:
            self.add("kernel_init", "kaiming_uniform", init_at,
                     f"{init_note}; init_fn null: torch's nn.Linear default (kaiming_uniform, a=sqrt(5))")
            return
        name = KERNEL_INITS.get(str(init_fn), "other")
        note = f"{init_note}: {init_fn}"
        if gain and ("orthogonal" in str(init_fn) or "xavier" in str(init_fn)):
            note += (f"; gain = calculate_gain(hid_layers_activation={activation!r}), "
                     "which need not be the arc's activation")
        self.add("kernel_init", name, [init_at] + ([self.at_code(gain)] if gain else []), note)

    def _optimizer_receives(self, keyword: str) -> tuple[tuple[Any, list] | None, str | None]:
        """What the constructed algorithm's optimizer receives as ``keyword`` (on every branch the
        engine could not decide): ((value, lines), None) when they agree on a constant;
        (None, why) when one is not constant or they disagree; (None, None) when the engine built
        no optimizer call with that keyword (the spec's value stands)."""
        built = self.run.constructed_attr("optim")  # the actor's (or the shared net's), as optim_spec is read
        options = built.data.options if built is not None and isinstance(built.data, flow.Phi) else (built,)
        calls = [o.data for o in options if o is not None and isinstance(o.data, flow.Sym) and o.data.op == "call"]
        passed = [dict(call.kwargs)[keyword] for call in calls if keyword in dict(call.kwargs)]
        if not passed:
            return None, None
        if not all(flow.is_const(v) for v in passed):
            odd = next(v for v in passed if not flow.is_const(v))
            return None, f"the optimizer's {keyword} is not computed statically ({flow.why_not_constant(odd)})"
        values = {flow.plain(v) for v in passed}
        if len(values) > 1:
            return None, f"the optimizers are constructed with different {keyword}: {sorted(values)}"
        return (values.pop(), sorted({line for v in passed for line in flow.all_lines(v)})), None

    def _optimizer(self, net_setting) -> None:
        optim, optim_at, optim_note = net_setting("optim_spec")
        optim = optim if isinstance(optim, dict) else {}
        optim_name = optim.get("name", "Adam")
        if optim_name not in self.tree.ask(code.read_optimizers):
            self.find("spec_code_mismatch", "ERROR", f"agent.net.optim_spec.name {optim_name!r}: not in torch.optim",
                      (self.at_spec("agent.net.optim_spec.name"),))
        received, received_why = self._optimizer_receives("lr")
        if received_why:
            self.unknown("learning_rate", received_why)
        elif received is not None and received[0] != optim.get("lr", received[0]):
            value, lines = received
            self.add("learning_rate", float(value), [self.at_spec("agent.net.optim_spec.lr"), *lines],
                     f"spec: agent.net.optim_spec.lr; the optimizer is constructed with lr={value!r}",
                     float(optim["lr"]))
        elif "lr" in optim:
            self.add("learning_rate", float(optim["lr"]), self.at_spec("agent.net.optim_spec.lr"),
                     "spec: agent.net.optim_spec.lr")
        elif optim_name == "Adam":
            self.add("learning_rate", TORCH_ADAM_LR, optim_at, "torch.optim.Adam default lr")
        else:
            self.unknown("learning_rate", f"optim_spec sets no lr and {optim_name}'s default is not known here")
        if "eps" in optim:
            self.add("adam_eps", float(optim["eps"]), self.at_spec("agent.net.optim_spec.eps"),
                     "spec: agent.net.optim_spec.eps")
        elif optim_name == "Adam":
            self.add("adam_eps", TORCH_ADAM_EPS, optim_at, "torch.optim.Adam default eps (spec sets none)")
        else:
            self.unknown("adam_eps", f"the optimizer is {optim_name}, not Adam, and optim_spec sets no eps")
        self._lr_schedule(net_setting)

    def _lr_decay_steps(self, default: code.Found, branch_at: Provenance) -> None:
        """The frames a linear schedule decays over (LambdaLR steps once per update of
        training_frequency x num_envs frames, so the horizon in env steps is ``frame``)."""
        dotted = "agent.net.lr_scheduler_spec.frame"
        value, at, note = self.setting(dotted, default)
        horizon = _lr_decay_horizon(value)
        if horizon is None:
            self.unknown("lr_decay_steps", f"{dotted} is {value!r}, the run's length, which the spec leaves to the "
                                           "command line: give it with --set max_frame=N", (at or branch_at,),
                         kind="unset_placeholder")
            return
        self.add("lr_decay_steps", horizon, [at, branch_at], note)

    def _lr_schedule(self, net_setting) -> None:
        spec_value, spec_at, spec_note = net_setting("lr_scheduler_spec")
        schedulers = self.tree.ask(code.read_lr_scheduler)
        if schedulers is None:
            self.missing_pattern("get_lr_scheduler", code.NET_UTIL, "lr_schedule")
            return
        noop = self.snapshot.where(schedulers.path, schedulers.noop_line or 1)
        if not spec_value:
            self.add("lr_schedule", "constant", [spec_at, noop], f"{spec_note}; null -> NoOpLRScheduler")
            self.add("lr_final_factor", 1.0, [spec_at, noop], f"{spec_note}; constant")
            self.add("lr_decay_steps", None, [spec_at, noop], f"{spec_note}; constant")
            return
        if not isinstance(spec_value, dict):
            raise SpecError(f"{self.spec.path}: agent.net.lr_scheduler_spec must be a mapping or null "
                            f"(line {self.spec.line('agent.net.lr_scheduler_spec')})")
        name = str(spec_value.get("name"))
        name_at = self.at_spec("agent.net.lr_scheduler_spec.name")
        if name in schedulers.custom:
            branch = schedulers.custom[name]
            branch_at = self.at_code(branch)
            keys = schedulers.custom_keys.get(name, {})
            for key in spec_value:
                if key != "name" and key not in keys:
                    self.find("unread_spec_key", "ERROR",
                              f"agent.net.lr_scheduler_spec.{key} is set but the {name} branch does not read it",
                              (self.at_spec(f"agent.net.lr_scheduler_spec.{key}"), branch_at))
            final, final_at, final_note = None, [name_at, branch_at], "spec: agent.net.lr_scheduler_spec.name"
            if name in LINEAR_SCHEDULERS:
                final = LINEAR_SCHEDULERS[name]
            elif "min_factor" in keys:
                final, at, final_note = self.setting("agent.net.lr_scheduler_spec.min_factor", keys["min_factor"])
                final_at = [at, branch_at]
            linear = "max(" in branch.value and "1 - x" in branch.value
            # A linear decay to a final factor of 1 (LinearToMin, min_factor 1.0) never moves.
            constant = linear and _is_one(final)
            self.add("lr_schedule", "constant" if constant else "linear_decay" if linear else "other",
                     [name_at, branch_at] + (final_at if constant else []),
                     f"spec: agent.net.lr_scheduler_spec.name; {name}: LambdaLR stepped once per update, "
                     "over frame / (training_frequency x num_envs) updates"
                     + ("; it decays to a final factor of 1, so the rate stays constant" if constant else ""))
            if final is not None:
                self.add("lr_final_factor", float(final), final_at, final_note)
            else:
                self.unknown("lr_final_factor", f"the {name} branch of get_lr_scheduler has no final factor the "
                                                "extractor reads", final_at)
            if constant:
                self.add("lr_decay_steps", None, final_at, f"{final_note}; constant (final factor 1)")
            elif linear and "frame" in keys:
                self._lr_decay_steps(keys["frame"], branch_at)
            else:
                self.unknown("lr_decay_steps", f"the {name} branch of get_lr_scheduler reads no frame the "
                                               "extractor follows", [name_at, branch_at])
            return
        if name in code.TORCH_LR_SCHEDULERS and schedulers.fallback_line:
            self.add("lr_schedule", "other", [name_at, self.snapshot.where(schedulers.path,
                                                                           schedulers.fallback_line)],
                     f"spec: agent.net.lr_scheduler_spec.name; torch.optim.lr_scheduler.{name}")
            why = (f"torch.optim.lr_scheduler.{name}: its final factor and horizon depend on its arguments, which "
                   "the extractor does not evaluate")
            self.unknown("lr_final_factor", why, [name_at])
            self.unknown("lr_decay_steps", why, [name_at])
            return
        fallback = self.snapshot.where(schedulers.path, schedulers.fallback_line or 1)
        self.find("spec_code_mismatch", "ERROR",
                  f"agent.net.lr_scheduler_spec.name {name!r}: get_lr_scheduler has no branch for it and "
                  f"torch.optim.lr_scheduler has no such class; training fails at this ref",
                  (name_at, fallback), "lr_schedule")
        why = f"lr_scheduler_spec.name {name!r} is not defined at this ref: training fails before it is used"
        self.out.add(Fact("lr_schedule", None, (name_at, fallback), "spec: agent.net.lr_scheduler_spec.name",
                          name, unknown=f"lr_schedule: {why}"))
        self.unknown("lr_final_factor", why, (name_at, fallback))
        self.unknown("lr_decay_steps", why, (name_at, fallback))


def _spec_key(note: str | None) -> str | None:
    """The spec key a fact's note names (``spec: agent.algorithm.time_horizon; ...``)."""
    if not note or not note.startswith("spec: "):
        return None
    key = note[len("spec: "):].split(";", 1)[0].split(" ", 1)[0]
    return key or None


def _is_number_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parameters_owner(value: flow.V) -> flow.V | None:
    """``net`` of ``net.parameters()``."""
    data = value.data
    if isinstance(data, flow.Sym) and data.op == "call" and data.args:
        callee = data.args[0].data
        if isinstance(callee, flow.Sym) and callee.op == "attr" and callee.name == "parameters" and callee.args:
            return callee.args[0]
    return None


def _steps_of(value: flow.V, v_preds: flow.V) -> tuple | None:
    """(start, stop, step) when ``value`` is a constant slice of ``v_preds``."""
    data = value.data  # the engine keeps a slice as item(container, start, stop, step)
    if not (isinstance(data, flow.Sym) and data.op == "item" and len(data.args) == 4 and data.args[0] is v_preds):
        return None
    return tuple(flow.plain(p) for p in data.args[1:]) if all(flow.is_const(p) for p in data.args[1:]) else None


def _next_step(value: flow.V, v_preds: flow.V) -> bool:
    """``v_preds[1:]``: the value of the state after each step."""
    return _steps_of(value, v_preds) == (1, None, None)


def _is_one(value: Any) -> bool:
    """A spec number (``1``, ``1.0``, ``"1.0"``) equal to 1."""
    if isinstance(value, bool):
        return False
    try:
        return float(value) == 1.0
    except (TypeError, ValueError):
        return False


def _lr_decay_horizon(value: Any) -> int | None:
    """A spec's ``frame`` as a whole number of env steps (``1e8`` and ``"1e8"`` included), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) and number > 0 and number == int(number) else None


def _sequential_modules(arc: dict) -> list:
    """The layer list of a torcharc spec's ``modules: {body: {Sequential: [...]}}``."""
    for module in (arc.get("modules") or {}).values():
        if isinstance(module, dict) and isinstance(module.get("Sequential"), list):
            return module["Sequential"]
    return []
