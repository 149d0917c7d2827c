"""Canonical facts -> the settings one PPO run trains with.

:class:`TrainerSettings` is the whole configuration of a run of :mod:`.ppo_torch`, one
field per canonical key the PyTorch trainer can express (same names as
``brax_diff/facts/vocabulary.py``), plus the few run-shape fields that are no canonical key.
Each field is documented where it is declared, CleanRL-style: a reader sees every
hyperparameter and its default in one place.

The defaults are SLM-Lab's ``ppo_playground`` DM Control values; they fill in a key an
extraction did not produce, and :func:`settings_from_facts` reports which ones it used.
This module is static: no torch, no jax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from ..errors import BraxDiffError


# Where a run's initial weights come from (TrainerSettings.initial_weights).
INITIAL_WEIGHTS = ("torch_generators", "brax_keys")
# What GAE may do at a time limit in this trainer (vocabulary `truncation`): SLM-Lab's and Brax's.
TRUNCATIONS = ("bootstrap_next_obs_across_reset", "mask_bootstrap_last_state")
# The loss-level semantics of issue 22 (vocabulary enums), each with the values this trainer runs:
# SLM-Lab's first (the default), Brax's second, named as the vocabulary names them (the plan
# moves an extracted value straight into a setting): for `advantage_form`, "gae" is lambda-GAE
# (SLM-Lab's calc_gaes); "vtrace_pg" is Brax's compute_gae, r + discount x vs_{t+1} - V_t on the
# lambda-returns vs.
SEMANTICS = {
    "gae_recompute": ("per_update", "per_minibatch"),
    "advantage_form": ("gae", "vtrace_pg"),
    "grad_clip_scope": ("per_network", "global"),
    "obs_norm_update": ("per_env_step", "per_batch_before_sgd"),
    "entropy_estimator": ("analytic", "sampled_squashed"),
}


@dataclass(frozen=True)
class TrainerSettings:
    # -- batch collection ---------------------------------------------------------------
    num_envs: int = 2048
    """Environments stepped in parallel."""
    unroll_length: int = 30
    """Env steps per unroll of every env (SLM-Lab `time_horizon`)."""
    unrolls_per_update: int = 1
    """Unrolls collected back to back (env state rolling on) before one update; SLM-Lab does 1."""
    epochs_per_update: int = 16
    """Passes over the batch per update (SLM-Lab `training_epoch`)."""
    minibatch_transitions: int = 4096
    """Transitions per minibatch (SLM-Lab `minibatch_size`; rounded down to divide the batch)."""
    # -- returns and advantages ------------------------------------------------------
    discount: float = 0.995
    """Discount gamma."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    reward_scale: float = 10.0
    """Rewards are multiplied by this before GAE (where it happens, env or loss, changes nothing here)."""
    truncation: str = "bootstrap_next_obs_across_reset"
    """What GAE does at a time-limit truncation: "bootstrap_next_obs_across_reset" keeps the GAE chain
    (SLM-Lab: only `terminated` cuts it); "mask_bootstrap_last_state" masks truncated steps out of GAE
    the way Brax does."""
    advantage_normalization: bool = True
    """Advantages are standardized (mean 0, std 1) before the policy loss."""
    advantage_normalization_scope: str = "minibatch"
    """"minibatch": standardized within each minibatch (SLM-Lab); "batch": once over the whole batch."""
    # -- observations ------------------------------------------------------------------
    obs_normalization: bool = True
    """Observations standardized by running mean/std (Welford, updated on every collected step)."""
    obs_clip: float | None = None
    """Normalized observations clipped to [-obs_clip, obs_clip]; None: not clipped (SLM-Lab's
    TorchNormalizeObservation does not clip)."""
    obs_norm_std_eps: float = 1e-8
    """Added to the variance before the square root."""
    # -- value function -------------------------------------------------------------
    value_loss_coef: float = 0.5
    """Multiplier on the mean squared value error."""
    value_target_normalization: bool = True
    """Value targets and predictions divided by the running std of the targets (floored at 1,
    clipped to +-10) before the MSE, SLM-Lab's ReturnNormalizer."""
    value_clipping: float | None = None
    """CleanRL-style clipped value loss with this range; None: unclipped."""
    # -- optimizer ---------------------------------------------------------------------
    learning_rate: float = 1e-3
    """Adam's initial learning rate (actor and critic each have their own Adam)."""
    lr_schedule: str = "linear_decay"
    """"constant" or "linear_decay" (to lr_final_factor at the end of the budget, stepped per update)."""
    lr_final_factor: float = 0.033
    """Final learning rate as a fraction of the initial one."""
    lr_decay_steps: int | None = None
    """Env steps (all envs together) the decay runs over: SLM-Lab's ``lr_scheduler_spec.frame``,
    i.e. the real run's ``max_frame``, so a short run sees the first steps of the real schedule;
    None: over this run's own budget (a compressed schedule)."""
    adam_eps: float = 1e-5
    """Adam's epsilon."""
    max_grad_norm: float | None = 1.0
    """Global gradient norm clip per network; None: not clipped."""
    entropy_coef: float = 0.01
    """Entropy bonus coefficient."""
    clip_epsilon: float = 0.2
    """PPO's probability-ratio clip range."""
    # -- policy -------------------------------------------------------------------------
    action_distribution: str = "normal"
    """"normal" (actions clipped to [-1, 1] by the env) or "tanh_normal" (squashed)."""
    std_transform: str = "clamped_exp"
    """Raw std output -> std: "clamped_exp" exp(clamp(x, log std_min, log std_max)), "exp", "softplus"
    softplus(x) + std_min."""
    std_min: float = math.exp(-5.0)
    """Smallest std (SLM-Lab clamps log-std at -5)."""
    std_max: float | None = math.exp(0.5)
    """Largest std (SLM-Lab clamps log-std at 0.5); None: unbounded."""
    policy_hidden_layers: tuple[int, ...] = (64, 64)
    """Hidden widths of the policy network."""
    value_hidden_layers: tuple[int, ...] = (256, 256, 256)
    """Hidden widths of the value network."""
    activation: str = "silu"
    """Hidden activation: silu, relu, tanh or elu."""
    kernel_init: str = "orthogonal"
    """Hidden and output weights: "orthogonal" (gain sqrt 2, SLM-Lab) or "lecun_uniform"; biases 0."""
    # -- loss semantics (issue 22): SLM-Lab's by default, Brax's in the stand_in arm ------------
    gae_recompute: str = "per_update"
    """"per_update": advantages and value targets once per update, before the epochs, then fixed
    (SLM-Lab); "per_minibatch": recomputed inside every minibatch's loss with the value parameters of
    that step, over whole unroll sequences (Brax's compute_ppo_loss: minibatches are sequences, the
    value loss is 0.5 x (vs - V)^2 x 2 value_loss_coef on the lambda-returns vs, the advantages are
    standardized with the population std). Needs minibatches of whole unrolls."""
    advantage_form: str = "gae"
    """"gae": lambda-GAE; "vtrace_pg": Brax's r + discount x vs_{t+1} - V_t (per_minibatch only)."""
    grad_clip_scope: str = "per_network"
    """"per_network": each network its own Adam and its own clip (SLM-Lab); "global": one Adam over the
    policy's and the value's parameters, one clip over all their gradients (Brax's optax chain)."""
    obs_norm_update: str = "per_env_step"
    """"per_env_step": statistics updated as each observation arrives, stored normalized (SLM-Lab);
    "per_batch_before_sgd": raw observations stored, statistics updated once from the batch before its
    SGD, normalized at use (Brax)."""
    entropy_estimator: str | None = None
    """"analytic": the Gaussian's closed form; "sampled_squashed": plus tanh's log-det-Jacobian at one
    sampled raw action (Brax); None: follows action_distribution (analytic for normal,
    sampled_squashed for tanh_normal), this trainer's behaviour before the key existed."""
    # -- training setup ----------------------------------------------------------------------
    env_steps_between_resets: int = 0
    """Every training env is reset together, each to a fresh initial state, after the first update
    by which each env has run this many env steps since the last such reset (Brax's train() with
    num_resets_per_eval > 0 resets after whole training steps, with keys split from the first
    env's: ``envs.PlaygroundVecEnv.reset_all``); 0: never, an env restarts only when its episode
    ends, at its cached first state (Playground's auto-reset wrapper, SLM-Lab)."""
    # -- run shape (no canonical key) -------------------------------------------------------
    initial_weights: str = "torch_generators"
    """Where the networks' initial weights come from: "torch_generators", this trainer's own streams
    (``ppo_torch.STREAMS``: policy_init, value_init) with ``kernel_init``; "brax_keys", the weights
    Brax's ``ppo.train`` starts from at this seed (``make_ppo_networks``' flax init from its
    key_policy and key_value, copied into the torch layers: the stand_in, so that it starts each
    seed where the reference starts it). Needs Brax's policy shape: a tanh_normal MLP."""
    episode_length: int | None = None
    """Episode step limit; None: the environment's own (1000 for DM Control). Shorter only for tests."""

    def __post_init__(self) -> None:
        for name in ("policy_hidden_layers", "value_hidden_layers"):
            object.__setattr__(self, name, tuple(int(w) for w in getattr(self, name)))
        problems = list(self.problems())
        if problems:
            raise BraxDiffError("trainer settings: " + "; ".join(problems))

    # -- derived quantities -----------------------------------------------------------
    @property
    def transitions_per_update(self) -> int:
        return self.num_envs * self.unroll_length * self.unrolls_per_update

    @property
    def effective_minibatch(self) -> int:
        """SLM-Lab's rounding: at most the batch, and a divisor of it."""
        batch = self.transitions_per_update
        size = min(self.minibatch_transitions, batch)
        return batch // (batch // size)

    @property
    def minibatches_per_epoch(self) -> int:
        return self.transitions_per_update // self.effective_minibatch

    def problems(self):
        for name in ("num_envs", "unroll_length", "unrolls_per_update", "epochs_per_update",
                     "minibatch_transitions"):
            if int(getattr(self, name)) < 1:
                yield f"{name} must be >= 1, got {getattr(self, name)}"
        if isinstance(self.env_steps_between_resets, bool) or not isinstance(self.env_steps_between_resets, int) \
                or self.env_steps_between_resets < 0:
            yield f"env_steps_between_resets must be a whole number >= 0, got {self.env_steps_between_resets!r}"
        if self.truncation not in TRUNCATIONS:
            yield f"truncation {self.truncation!r} is not one this trainer runs ({', '.join(TRUNCATIONS)})"
        if self.advantage_normalization_scope not in ("minibatch", "batch"):
            yield f"advantage_normalization_scope must be minibatch or batch, got {self.advantage_normalization_scope!r}"
        if self.lr_schedule not in ("constant", "linear_decay"):
            yield f"lr_schedule {self.lr_schedule!r} is not one this trainer runs (constant, linear_decay)"
        if self.action_distribution not in ("normal", "tanh_normal"):
            yield f"action_distribution must be normal or tanh_normal, got {self.action_distribution!r}"
        if self.std_transform not in ("clamped_exp", "exp", "softplus"):
            yield f"std_transform {self.std_transform!r} is not one this trainer runs (clamped_exp, exp, softplus)"
        if self.activation not in ("silu", "relu", "tanh", "elu"):
            yield f"activation {self.activation!r} is not one this trainer runs"
        if self.kernel_init not in ("orthogonal", "lecun_uniform"):
            yield f"kernel_init {self.kernel_init!r} is not one this trainer runs (orthogonal, lecun_uniform)"
        if self.initial_weights not in INITIAL_WEIGHTS:
            yield f"initial_weights {self.initial_weights!r} is not one this trainer runs ({', '.join(INITIAL_WEIGHTS)})"
        elif self.initial_weights == "brax_keys" and self.action_distribution != "tanh_normal":
            yield ("initial_weights brax_keys copies Brax's tanh_normal policy MLP: it needs action_distribution "
                   f"tanh_normal, got {self.action_distribution!r}")
        for name, allowed in SEMANTICS.items():
            value = getattr(self, name)
            if not (value in allowed or name == "entropy_estimator" and value is None):
                yield f"{name} {value!r} is not one this trainer runs ({', '.join(allowed)})"
        if self.gae_recompute == "per_minibatch":
            if self.effective_minibatch % self.unroll_length:
                yield (f"gae_recompute per_minibatch needs minibatches of whole unrolls: {self.effective_minibatch} "
                       f"transitions is not a multiple of unroll_length {self.unroll_length}")
            if self.value_target_normalization or self.value_clipping is not None:
                yield "gae_recompute per_minibatch is Brax's loss: no value target normalization, no value clipping"
        elif self.advantage_form != "gae":
            yield "advantage_form vtrace_pg is computed inside the loss: it needs gae_recompute per_minibatch"

    def to_json(self) -> dict:
        data = asdict(self)
        for name in ("policy_hidden_layers", "value_hidden_layers"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TrainerSettings":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def moved(self, **changes: Any) -> "TrainerSettings":
        return replace(self, **changes)


FIELDS = tuple(f.name for f in fields(TrainerSettings))

# The stand_in arm: every semantic at Brax's value (with Brax's truncation mask). These keys are
# applied only where asked (settings_from_facts(semantics=True)), so baseline and all_fixes keep
# this trainer's SLM-Lab semantics, and all_fixes stays "what SLM-Lab's settings can move".
BRAX_SEMANTICS = {**{name: values[1] for name, values in SEMANTICS.items()},
                  "truncation": "mask_bootstrap_last_state"}

# Canonical keys that are a consequence of other keys: their difference is explained by the
# keys they are computed from, so they get no run of their own.
DERIVED_KEYS = {
    "transitions_per_update": "num_envs x unroll_length x unrolls_per_update",
    "minibatch_transitions": "transitions_per_update / minibatches_per_epoch",
    "gradient_steps_per_update": "epochs_per_update x minibatches_per_epoch",
    "gae_horizon": "unroll_length (GAE runs over one unroll in both trainers)",
    "lr_decay_steps": "lr_schedule (a constant rate has no horizon to move)",
    "num_resets_per_eval": "env_steps_between_resets (what the resets do to the training data; the evaluation "
                           "schedule is the plan's own)",
}

# Canonical keys the PyTorch trainer cannot express, and why (the plan lists them as skipped).
UNSUPPORTED_KEYS = {
    "reward_scale_site": "env vs loss: the same multiplier before GAE, nothing to run",
    "obs_norm_method": "welford only (an EMA variant is not implemented)",
    "value_loss": "mse only",
    "entropy_schedule": "constant only",
    "std_state_dependent": "state-dependent std only",
    "shared_network": "separate policy and value networks only",
    "clip_epsilon_schedule": "a constant clip range only",
    "gae_recompute": "a semantic of Brax's loss: the stand_in arm runs Brax's, no other arm moves it",
    "grad_clip_scope": "a semantic of Brax's loss: the stand_in arm runs Brax's, no other arm moves it",
    "obs_norm_update": "a semantic of Brax's loss: the stand_in arm runs Brax's, no other arm moves it",
    "entropy_estimator": "a semantic of Brax's loss: the stand_in arm runs Brax's, no other arm moves it",
    "advantage_form": "a semantic of Brax's loss: the stand_in arm runs Brax's, no other arm moves it",
}

# What the trainer always does for those keys: a baseline whose SLM-Lab value differs is not
# SLM-Lab's settings there, and the plan says so.
TRAINER_FIXED = {
    "obs_norm_method": "welford",
    "value_loss": "mse",
    "entropy_schedule": "constant",
    "clip_epsilon_schedule": "constant",
    "std_state_dependent": True,
    "shared_network": False,
    "gae_recompute": "per_update",
    "grad_clip_scope": "per_network",
    "obs_norm_update": "per_env_step",
}

# A schedule's end value and the schedule it ends: under a constant schedule on both sides the
# end is the start, so its difference is the start value's and moves with it.
SCHEDULE_ENDS = {
    "clip_epsilon_final": ("clip_epsilon_schedule", "clip_epsilon"),
    "entropy_coef_final": ("entropy_schedule", "entropy_coef"),
}


def _coerce(key: str, value: Any) -> Any:
    """A canonical fact's value as this trainer's field value."""
    if key == "minibatches_per_epoch":
        return value  # converted by the caller, it needs the batch
    if key in ("policy_hidden_layers", "value_hidden_layers"):
        return tuple(int(v) for v in value)
    if key == "activation":
        from ..facts.vocabulary import canonical_activation

        return canonical_activation(str(value))
    return value


def expressible(key: str) -> bool:
    """Can a run move this canonical key on its own?"""
    return key in FIELDS or key == "minibatches_per_epoch" or key == "minibatch_transitions"


def apply_fact(settings: TrainerSettings, key: str, value: Any) -> TrainerSettings:
    """``settings`` with one canonical key set to ``value``.

    ``minibatches_per_epoch`` is expressed as the minibatch size that splits this run's
    batch into that many minibatches.
    """
    if key == "minibatches_per_epoch":
        count = max(1, int(value))
        return settings.moved(minibatch_transitions=max(1, settings.transitions_per_update // count))
    if key not in FIELDS:
        raise BraxDiffError(f"the PyTorch trainer cannot express key {key!r}")
    return settings.moved(**{key: _coerce(key, value)})


def settings_from_facts(values: Mapping[str, Any], base: TrainerSettings | None = None, semantics: bool = False
                        ) -> tuple[TrainerSettings, list[str]]:
    """Settings from canonical ``{key: value}``; returns them and the fields left at defaults.

    The loss semantics (``SEMANTICS``) are applied only with ``semantics=True`` (the stand_in arm).

    ``minibatches_per_epoch`` is applied after the batch keys so that it sees the batch.
    A key whose value is None where the field needs a number keeps the default.
    """
    settings = base or TrainerSettings()
    used: set[str] = set()
    for key in sorted(values):
        if key in FIELDS and key != "minibatches_per_epoch" and key not in SEMANTICS:
            value = values[key]
            if value is None and key not in ("obs_clip", "max_grad_norm", "std_max", "value_clipping"):
                continue
            settings = apply_fact(settings, key, value)
            used.add(key)
    if "minibatch_transitions" not in values and values.get("minibatches_per_epoch") is not None:
        settings = apply_fact(settings, "minibatches_per_epoch", values["minibatches_per_epoch"])
        used.add("minibatch_transitions")
    if semantics:  # together and last: they constrain each other and the minibatch shape
        chosen = {key: values[key] for key in SEMANTICS if values.get(key) is not None}
        settings = settings.moved(**chosen)
        used.update(chosen)
    defaults = [name for name in FIELDS if name not in used]
    return settings, defaults


_OPTIONAL_NUMBERS = {"obs_clip": float, "max_grad_norm": float, "std_max": float, "value_clipping": float,
                     "episode_length": int, "lr_decay_steps": int, "entropy_estimator": str}


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["num_envs=256", "policy_hidden_layers=32,32"]`` -> typed values for the fields."""
    out: dict[str, Any] = {}
    defaults = TrainerSettings()
    for item in items or []:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in FIELDS:
            raise BraxDiffError(f"bad override {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(FIELDS)}")
        current = getattr(defaults, name)
        if current is None:  # an optional number: its type by name
            current = _OPTIONAL_NUMBERS[name]()
        text = text.strip()
        try:
            if isinstance(current, tuple):
                out[name] = tuple(int(v) for v in text.split(",") if v.strip())
            elif text.lower() in ("none", "null"):
                out[name] = None
            elif isinstance(current, bool):
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(text)
                out[name] = text.lower() in ("true", "1")
            elif isinstance(current, int):
                out[name] = _whole_number(text)
            elif isinstance(current, float):
                out[name] = float(text)
            else:
                out[name] = text
        except ValueError:
            raise BraxDiffError(f"bad override {item!r}: {text!r} is not a {type(current).__name__}") from None
    return out


def split_sets(items: list[str] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """``verify --set`` items -> (trainer overrides, SLM-Lab spec variables).

    A name that is a field of :class:`TrainerSettings` is an override for every PyTorch run;
    any other name (``max_frame``, ``env``) is a ``${name}`` substitution in the SLM-Lab spec,
    as ``extract slm --set`` does; the extractor rejects one the spec does not use."""
    fields_, spec_vars = [], {}
    given: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BraxDiffError(f"--set {item!r}: expected NAME=VALUE, e.g. --set max_frame=100000000")
        # Twice with two values is an error, as for `extract --set` (SLM-Lab's -s takes the first).
        if given.setdefault(name.strip(), value.strip()) != value.strip():
            raise BraxDiffError(f"--set {name.strip()} is given twice ({given[name.strip()]!r} and "
                                f"{value.strip()!r}): give it once")
        if name.strip() in FIELDS:
            fields_.append(item)
        elif name.strip().isidentifier():
            spec_vars[name.strip()] = value.strip()
        else:
            raise BraxDiffError(f"--set {item!r}: {name.strip()!r} is neither a trainer setting nor a spec variable")
    return parse_overrides(fields_), spec_vars


def _whole_number(text: str) -> int:
    """``"100000000"``, ``"1e8"`` or ``"1_000_000"`` -> an int; anything else is a ValueError."""
    try:
        return int(text)
    except ValueError:
        number = float(text)
        if not math.isfinite(number) or number != int(number):
            raise ValueError(text) from None
        return int(number)


# Canonical key -> keyword of brax.training.agents.ppo.train, for keys that map one to one.
BRAX_TRAIN_KWARGS = {
    "num_envs": "num_envs",
    "unroll_length": "unroll_length",
    "epochs_per_update": "num_updates_per_batch",
    "minibatches_per_epoch": "num_minibatches",
    "discount": "discounting",
    "gae_lambda": "gae_lambda",
    "reward_scale": "reward_scaling",
    "obs_normalization": "normalize_observations",
    "obs_norm_std_eps": "normalize_observations_std_eps",
    "learning_rate": "learning_rate",
    "entropy_coef": "entropy_cost",
    "clip_epsilon": "clipping_epsilon",
    "max_grad_norm": "max_grad_norm",
    "advantage_normalization": "normalize_advantage",
}
# Canonical `truncation` -> Brax's `bootstrap_on_timeout` (the other values are not Brax's to run).
BRAX_BOOTSTRAP_ON_TIMEOUT = {"mask_bootstrap_last_state": False, "bootstrap_current_state": True}
# Canonical key -> keyword of brax.training.agents.ppo.networks.make_ppo_networks.
BRAX_NETWORK_KWARGS = {
    "policy_hidden_layers": "policy_hidden_layer_sizes",
    "value_hidden_layers": "value_hidden_layer_sizes",
    "activation": "activation",
    "action_distribution": "distribution_type",
    "std_state_dependent": "state_dependent_std",
    "kernel_init": "kernel_init",
}


def brax_train_settings(values: Mapping[str, Any]) -> dict:
    """Brax-side canonical values -> ``{"train": kwargs, "network": kwargs}`` for Brax's trainer.

    Keys with no fact are left out, so Brax's own defaults apply. ``batch_size`` (unroll
    sequences per minibatch) follows from num_envs x unrolls_per_update / minibatches; the
    canonical value loss coefficient counts Brax's 0.5 factor, so ``vf_loss_coefficient``
    is twice it. All values are JSON-native (activation and init by name).
    """
    train: dict[str, Any] = {}
    for key, kwarg in BRAX_TRAIN_KWARGS.items():
        if values.get(key) is not None or (key == "max_grad_norm" and key in values):
            train[kwarg] = values[key]
    if values.get("truncation") in BRAX_BOOTSTRAP_ON_TIMEOUT:
        train["bootstrap_on_timeout"] = BRAX_BOOTSTRAP_ON_TIMEOUT[values["truncation"]]
    if values.get("value_loss_coef") is not None:
        train["vf_loss_coefficient"] = 2.0 * float(values["value_loss_coef"])
    minibatches = values.get("minibatches_per_epoch")
    if minibatches is None and values.get("minibatch_transitions") and values.get("transitions_per_update"):
        minibatches = int(values["transitions_per_update"]) // int(values["minibatch_transitions"])
        train["num_minibatches"] = minibatches
    num_envs, unrolls = values.get("num_envs"), values.get("unrolls_per_update")
    if num_envs and unrolls and minibatches:
        train["batch_size"] = max(1, int(num_envs) * int(unrolls) // int(minibatches))
    if values.get("lr_schedule") not in (None, "constant"):
        train["learning_rate_schedule"] = values["lr_schedule"]
    network: dict[str, Any] = {}
    for key, kwarg in BRAX_NETWORK_KWARGS.items():
        if values.get(key) is not None:
            value = values[key]
            network[kwarg] = list(value) if isinstance(value, (list, tuple)) else value
    return {"train": dict(sorted(train.items())), "network": dict(sorted(network.items()))}
