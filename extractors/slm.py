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
"""

from __future__ import annotations

import fnmatch
import math
from importlib import resources
from typing import Any

import yaml

from brax_diff.errors import BraxDiffError, ConfigError, SpecError
from brax_diff.facts import Extraction, Fact, Finding, Provenance
from brax_diff.io import read_text
from brax_diff.limits import load_yaml
from brax_diff.sources import Snapshot
from brax_diff.vocabulary import KEYS, canonical_activation

from . import slm_code as code
from .slm_spec import ResolvedSpec, SpecFile

DEFAULT_SPEC = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"
FAMILIES = ("dm_control", "locomotion", "manipulation")

# Spec names -> canonical enum values.
DISTRIBUTIONS = {"Normal": "normal", "NormalTanh": "tanh_normal", "TanhNormal": "tanh_normal"}
VALUE_LOSSES = {"MSELoss": "mse", "SmoothL1Loss": "huber", "HuberLoss": "huber"}
KERNEL_INITS = {"orthogonal_": "orthogonal", "xavier_uniform_": "xavier_uniform",
                "kaiming_uniform_": "kaiming_uniform", "lecun_uniform_": "lecun_uniform"}
VAR_SCHEDULES = {"no_decay": "constant", "linear_decay": "linear_decay"}
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
TORCH_ADAM_EPS = 1e-8  # torch.optim.Adam's default eps
TORCH_ADAM_LR = 1e-3  # torch.optim.Adam's default lr


def load_mapping(path: str | None = None) -> dict:
    """The variant -> family/envs mapping: the shipped file, or the user's ``path``."""
    if path:
        text = read_text(path, "mapping file", ConfigError)
        origin = path
    else:
        text = resources.files("brax_diff").joinpath("data/slm_mapping.yaml").read_text(encoding="utf-8")
        origin = "shipped slm_mapping.yaml"
    try:
        data = load_yaml(text, f"mapping file {origin}")
    except yaml.YAMLError as exc:
        raise ConfigError(f"mapping file {origin}: invalid YAML: {str(exc).splitlines()[0]}") from None
    return validate_mapping(data, origin)


def validate_mapping(data: Any, origin: str = "mapping") -> dict:
    if not isinstance(data, dict) or not isinstance(data.get("variants", {}), dict) or not isinstance(
            data.get("family_defaults", {}), dict):
        raise ConfigError(f"{origin}: expected mappings 'variants' and 'family_defaults'")
    for name, entry in data.get("variants", {}).items():
        if not isinstance(entry, dict) or entry.get("family") not in FAMILIES:
            raise ConfigError(f"{origin}: variant {name}: 'family' must be one of {', '.join(FAMILIES)}")
        if not isinstance(entry.get("envs", []), list):
            raise ConfigError(f"{origin}: variant {name}: 'envs' must be a list")
    for family, candidates in data.get("family_defaults", {}).items():
        if family not in FAMILIES or not isinstance(candidates, (list, str)):
            raise ConfigError(f"{origin}: family_defaults.{family}: expected a family and a variant (list)")
    return data


class SlmExtractor:
    """One SLM-Lab snapshot and spec file; facts per variant."""

    def __init__(self, snapshot: Snapshot, spec: str = DEFAULT_SPEC, sets: dict[str, str] | None = None,
                 mapping: dict | None = None) -> None:
        self.snapshot = snapshot
        self.spec_path = spec
        if not snapshot.exists(spec):
            raise SpecError(f"spec file {spec} not found at {snapshot.ref} ({snapshot.sha[:12]})")
        self.spec_file = SpecFile(snapshot.read(spec), spec, sets)
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
            for exact in (True, False):
                for name, entry in self.mapping.get("variants", {}).items():
                    if name not in present or (family and entry.get("family") != family):
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
        return extraction


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
        self.find("pattern_not_found", "WARNING", f"{what} not found in {path} at this ref", key=key)

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
                      f"{'.'.join(path)} is ${{{var}}}; set it with --set {var}=... to name the environment",
                      (self.at_spec(".".join(path)),))
        self.algorithm = self._algorithm()
        self.env_code = self.tree.ask(code.read_env)
        self._batch()
        self._reward_and_observations()
        self._value_and_advantages()
        self._net()
        self.out.findings.sort(key=Finding.sort_key)

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

    def _batch(self) -> None:
        env_code = self.env_code
        num_envs, num_envs_at, num_envs_note = self.setting(
            "env.num_envs", env_code.keys.get("num_envs") if env_code else None)
        num_envs = num_envs if isinstance(num_envs, int) else 1
        self.add("num_envs", num_envs, num_envs_at, num_envs_note)
        horizon, horizon_at, _ = self.algo("time_horizon")
        minibatch, minibatch_at, _ = self.algo("minibatch_size")
        epochs, epochs_at, epochs_note = self.algo("training_epoch")
        if not isinstance(horizon, int) or not isinstance(minibatch, int):
            self.find("missing_setting", "WARNING", "time_horizon or minibatch_size is not an integer "
                      "(absent with no default?); batch facts skipped", (self.at_spec("agent.algorithm"),))
            return
        for dotted, value, at in (("env.num_envs", num_envs, num_envs_at),
                                  ("agent.algorithm.time_horizon", horizon, horizon_at),
                                  ("agent.algorithm.minibatch_size", minibatch, minibatch_at)):
            if value < 1:  # SLM-Lab divides by each of them
                where = f"{at.path}: line {at.line}" if at else self.spec.path
                raise SpecError(f"{where}: variant {self.spec.name}: {dotted} must be at least 1, not {value}")
        guard = None
        if self.algorithm is not None:
            values = {k: f.value for k, f in self.algorithm.defaults.items()}
            values.update({k: v for k, v in (self.spec.get("agent.algorithm") or {}).items()})
            guard = code.run_guard(self.algorithm, values, num_envs)
        eff_h, eff_mb, trigger = horizon, minibatch, None
        guard_at: dict[str, Provenance] = {}
        if guard is not None:
            if guard.stopped:
                self.find("pattern_not_found", "WARNING",
                          f"batch guard in {self.algorithm.path} not evaluated: {guard.stopped}")
            eff_h = guard.state.get("self.time_horizon", horizon)
            eff_mb = guard.state.get("self.minibatch_size", minibatch)
            trigger = guard.state.get("self.training_frequency")
            for attr, line in guard.written.items():
                guard_at[attr] = self.snapshot.where(self.algorithm.path, line)
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (eff_h, eff_mb)):
                self.find("pattern_not_found", "WARNING",
                          f"batch guard in {self.algorithm.path} gave time_horizon {eff_h!r} and minibatch_size "
                          f"{eff_mb!r}; the spec's values are used")
                eff_h, eff_mb, guard_at = horizon, minibatch, {}
        h_prov = [horizon_at, guard_at.get("self.time_horizon")] if eff_h != horizon else [horizon_at]
        mb_prov = [minibatch_at, guard_at.get("self.minibatch_size")] if eff_mb != minibatch else [minibatch_at]
        adjusted = " (rounded up to a multiple of num_envs by the batch guard)" if eff_h != horizon else ""
        self.add("unroll_length", eff_h, h_prov, f"spec: agent.algorithm.time_horizon{adjusted}", horizon)
        self.add("gae_horizon", eff_h, h_prov,
                 "spec: agent.algorithm.time_horizon; GAE runs over the whole collected batch", horizon)
        memory_name = str(self.spec.get("agent.memory.name") or "OnPolicyBatchReplay")
        trigger_at = self.tree.ask(code.read_training_trigger, memory_name)
        if trigger is not None and trigger_at is not None and trigger_at.value:
            unrolls = trigger // eff_h if eff_h and trigger % eff_h == 0 else None
            self.add("unrolls_per_update", unrolls,
                     [guard_at.get("self.training_frequency"), self.at_code(trigger_at)],
                     "training_frequency = time_horizon: the memory triggers one update per time_horizon "
                     "steps of all envs")
        else:
            self.missing_pattern("training_frequency trigger", f"{code.MEMORY_DIR}/", "unrolls_per_update")
        batch = num_envs * eff_h
        self.add("transitions_per_update", batch, [num_envs_at] + h_prov, "num_envs x time_horizon",
                 num_envs * horizon)
        self.add("epochs_per_update", epochs, epochs_at, epochs_note)
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
            self.add("gradient_steps_per_update", epochs * count, [epochs_at, self.at_code(split)],
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
        scale, scale_at, scale_note = self.setting("env.reward_scale", env_code.keys.get("reward_scale"))
        if env_code.reward_scale is not None and "reward_scale" in env_code.keys:
            scale = 1.0 if scale is None else scale
            self.add("reward_scale", float(scale), [scale_at, self.at_code(env_code.reward_scale)], scale_note)
            self.add("reward_scale_site", "env", self.at_code(env_code.reward_scale),
                     "a reward wrapper multiplies env rewards before storage (skipped when 1.0)")
        else:
            builder = self.snapshot.where(code.ENV_INIT, env_code.playground_line)
            self.add("reward_scale", 1.0, [builder, scale_at] if scale_at and scale is not None else builder,
                     "no reward scaling for playground envs at this ref", scale)
            self.add("reward_scale_site", "none", builder,
                     "make_env applies no reward scale at this ref")
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

    # -- value function, GAE, PPO loss ---------------------------------------------------
    def _value_and_advantages(self) -> None:
        gamma, gamma_at, gamma_note = self.algo("gamma")
        lam, lam_at, lam_note = self.algo("lam")
        if gamma is not None:
            self.add("discount", float(gamma), gamma_at, gamma_note)
        if lam is not None:
            self.add("gae_lambda", float(lam), lam_at, lam_note)
        gae = self.tree.ask(code.read_gae)
        if gae is None or gae.value is None:
            self.missing_pattern("calc_gaes", code.MATH_UTIL, "bootstrap_on_timeout")
        else:
            truncation_bootstraps = gae.value == "terminateds"
            self.add("bootstrap_on_timeout", truncation_bootstraps, self.at_code(gae),
                     "GAE masks on terminateds only: a truncated step bootstraps from the next stored "
                     "state's value (after an auto-reset, the new episode's first state), and the GAE "
                     "trace runs on across the truncation"
                     if truncation_bootstraps else "GAE masks on dones: truncation is treated as termination")
        coef, coef_at, coef_note = self.algo("val_loss_coef")
        loss_line = self.tree.ask(code.read_value_loss)
        if coef is not None:
            self.add("value_loss_coef", float(coef), [coef_at] + ([self.at_code(loss_line)] if loss_line else []),
                     f"{coef_note}; val_loss_coef x MSELoss (a mean of squares, no 0.5)")
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
        if clip_eps is not None:
            self.add("clip_epsilon", float(clip_eps), clip_eps_at, clip_eps_note)
        self._schedule_name("agent.algorithm.clip_eps_spec.name")
        entropy_name = self._schedule_name("agent.algorithm.entropy_coef_spec.name")
        entropy, entropy_at, entropy_note = self.setting("agent.algorithm.entropy_coef_spec.start_val", None)
        if entropy is not None:
            self.add("entropy_coef", float(entropy), entropy_at, entropy_note)
            self.add("entropy_schedule", VAR_SCHEDULES.get(str(entropy_name), "other"),
                     self.at_spec("agent.algorithm.entropy_coef_spec.name"),
                     "spec: agent.algorithm.entropy_coef_spec.name")
        self._action_distribution()

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
        clamp = self.tree.ask(code.read_log_std_clamp)
        if clamp is None:
            self.missing_pattern("log-std clamp in init_action_pd", code.POLICY_UTIL, "std_min")
        else:
            lo, hi = clamp.value
            note = f"log-std clamped to [{lo}, {hi}] then exp"
            self.add("std_transform", "clamped_exp", self.at_code(clamp), note)
            if lo is not None:
                self.add("std_min", math.exp(lo), self.at_code(clamp), f"exp({lo})")
            self.add("std_max", math.exp(hi) if hi is not None else None, self.at_code(clamp),
                     f"exp({hi})" if hi is not None else "no upper clamp")

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

        shared, shared_at, shared_note = net_setting("shared")
        self.add("shared_network", bool(shared), shared_at, shared_note)
        self._layers("actor_arc", "policy_hidden_layers", True)
        self._layers("critic_arc", "value_hidden_layers", False)
        log_std_init, log_std_at, log_std_note = net_setting("log_std_init")
        param = self.tree.ask(code.read_log_std_param)
        self.add("std_state_dependent", log_std_init is None,
                 [log_std_at] + ([self.at_code(param)] if param else []),
                 f"{log_std_note}; log_std_init null -> the std is a head of the policy net, "
                 "else a state-independent nn.Parameter")
        loss, loss_at, loss_note = net_setting("loss_spec")
        loss_name = (loss or {}).get("name") if isinstance(loss, dict) else None
        if loss_name:
            self.add("value_loss", VALUE_LOSSES.get(loss_name, "mse"),
                     self.at_spec("agent.net.loss_spec.name") if self.spec.has("agent.net.loss_spec.name")
                     else loss_at, f"{loss_note}: {loss_name}")
        clip, clip_at, clip_note = net_setting("clip_grad_val")
        scope = self.tree.ask(code.read_grad_clip)
        self.add("max_grad_norm", None if clip is None else float(clip),
                 [clip_at] + ([self.at_code(scope)] if scope else []),
                 f"{clip_note}; clip_grad_norm_ per network (actor and critic separately)"
                 if scope and scope.value == "per_network" else clip_note)
        self._init(net_setting)
        self._optimizer(net_setting)

    def _layers(self, arc_key: str, fact_key: str, set_activation: bool) -> None:
        arc_path = f"agent.net.{arc_key}"
        arc = self.spec.get(arc_path)
        if not isinstance(arc, dict):
            return
        widths, activations = [], []
        for module in _sequential_modules(arc):
            if not isinstance(module, dict) or len(module) != 1:
                continue
            (layer, args), = module.items()
            if layer in LAYER_NAMES and isinstance(args, dict) and "out_features" in args:
                widths.append(args["out_features"])
            elif layer not in LAYER_NAMES and args in (None, {}):
                activations.append(canonical_activation(layer))
        if widths:
            self.add(fact_key, widths, self.at_spec(arc_path), f"spec: {arc_path} (out_features of each layer)")
        if set_activation and activations:
            kinds = sorted(set(activations))
            value = kinds[0] if kinds[0] in KEYS["activation"].choices else "other"
            self.add("activation", value, self.at_spec(arc_path), f"spec: {arc_path}")

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

    def _optimizer(self, net_setting) -> None:
        optim, optim_at, optim_note = net_setting("optim_spec")
        optim = optim if isinstance(optim, dict) else {}
        optim_name = optim.get("name", "Adam")
        if optim_name not in self.tree.ask(code.read_optimizers):
            self.find("spec_code_mismatch", "ERROR", f"agent.net.optim_spec.name {optim_name!r}: not in torch.optim",
                      (self.at_spec("agent.net.optim_spec.name"),))
        if "lr" in optim:
            self.add("learning_rate", float(optim["lr"]), self.at_spec("agent.net.optim_spec.lr"),
                     "spec: agent.net.optim_spec.lr")
        elif optim_name == "Adam":
            self.add("learning_rate", TORCH_ADAM_LR, optim_at, "torch.optim.Adam default lr")
        if "eps" in optim:
            self.add("adam_eps", float(optim["eps"]), self.at_spec("agent.net.optim_spec.eps"),
                     "spec: agent.net.optim_spec.eps")
        elif optim_name == "Adam":
            self.add("adam_eps", TORCH_ADAM_EPS, optim_at, "torch.optim.Adam default eps (spec sets none)")
        self._lr_schedule(net_setting)

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
            self.add("lr_schedule", "linear_decay" if linear else "other", [name_at, branch_at],
                     f"spec: agent.net.lr_scheduler_spec.name; {name}: LambdaLR stepped once per update, "
                     "over frame / (training_frequency x num_envs) updates")
            if final is not None:
                self.add("lr_final_factor", float(final), final_at, final_note)
            return
        if name in code.TORCH_LR_SCHEDULERS and schedulers.fallback_line:
            self.add("lr_schedule", "other", [name_at, self.snapshot.where(schedulers.path,
                                                                           schedulers.fallback_line)],
                     f"spec: agent.net.lr_scheduler_spec.name; torch.optim.lr_scheduler.{name}")
            return
        fallback = self.snapshot.where(schedulers.path, schedulers.fallback_line or 1)
        self.find("spec_code_mismatch", "ERROR",
                  f"agent.net.lr_scheduler_spec.name {name!r}: get_lr_scheduler has no branch for it and "
                  f"torch.optim.lr_scheduler has no such class; training fails at this ref",
                  (name_at, fallback), "lr_schedule")
        self.add("lr_schedule", None, [name_at, fallback],
                 "spec: agent.net.lr_scheduler_spec.name; not defined at this ref", name)


def _sequential_modules(arc: dict) -> list:
    """The layer list of a torcharc spec's ``modules: {body: {Sequential: [...]}}``."""
    for module in (arc.get("modules") or {}).values():
        if isinstance(module, dict) and isinstance(module.get("Sequential"), list):
            return module["Sequential"]
    return []
