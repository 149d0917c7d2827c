"""The canonical vocabulary: the keys both sides are mapped onto before comparison.

Each key is declared once, here, with its topic (the report section it belongs to), its
kind of value, its unit and what it means. Extractors may only emit these keys; the
comparison, the rules and the report all speak this vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    name: str
    topic: str  # one of TOPICS
    kind: str  # "int" | "float" | "bool" | "enum" | "list" | "str"
    unit: str  # "" when dimensionless
    doc: str
    choices: tuple[str, ...] = ()  # for kind == "enum"
    # Decided per environment on at least one side: a family report compares it in the
    # environment matrix only (the family's own config does not decide it).
    per_environment: bool = False
    # A dependent key: when ``fold_when`` (a rule predicate, brax_diff/compare/rules.py, on the
    # comparison of this key) holds, its difference is ``fold_into``'s seen again, and it is
    # listed in that key's row instead of counted as a row of its own (one difference, one row).
    fold_into: str | None = None
    fold_when: object = None
    # Decided by the environment's own code, the same on both sides when they run one Playground
    # commit: the results ranking still counts its shared value (a floor of 0, no clip), which
    # tells environments apart even where the sides agree.
    context: bool = False


# The reference report's 13 topics, in its order.
TOPICS: tuple[tuple[str, str], ...] = (
    ("batch", "Batch collection"),
    ("reward", "Reward scaling"),
    ("observations", "Observation normalization"),
    ("value", "Value function"),
    ("advantages", "GAE and advantages"),
    ("lr_schedule", "Learning-rate schedule"),
    ("entropy", "Entropy"),
    ("gradient_clipping", "Gradient clipping"),
    ("action_distribution", "Action distribution"),
    ("initialization", "Initialization"),
    ("architecture", "Architecture"),
    ("clip_epsilon", "Clipping epsilon"),
    ("discount", "Discount"),
    # Not a topic of the reference report: what decides whether two scores can be compared at all.
    ("setup", "Training setup"),
)
TOPIC_TITLES = dict(TOPICS)

def _BOTH_CONSTANT(schedule: str) -> dict:  # noqa: N802 (reads as the condition it builds)
    """The predicate "``schedule`` is constant on both sides"."""
    return {"other": {schedule: {"all_of": [{"brax_is": "constant"}, {"slm_is": "constant"}]}}}


_KEYS = (
    # -- batch collection ----------------------------------------------------------
    Key("num_envs", "batch", "int", "envs", "Environments stepped in parallel during collection."),
    Key("unroll_length", "batch", "int", "env steps",
        "Sequential env steps in one unroll of every env (Brax `unroll_length`, SLM-Lab `time_horizon`)."),
    Key("unrolls_per_update", "batch", "int", "unrolls",
        "Sequential unrolls collected, env state rolling forward, before one update."),
    Key("transitions_per_update", "batch", "int", "transitions",
        "Transitions in the batch one update trains on: num_envs x unroll_length x unrolls_per_update."),
    Key("epochs_per_update", "batch", "int", "passes",
        "Passes over the batch per update (Brax `num_updates_per_batch`, SLM-Lab `training_epoch`)."),
    Key("minibatches_per_epoch", "batch", "int", "minibatches", "Minibatches the batch is split into per pass."),
    Key("minibatch_transitions", "batch", "int", "transitions", "Transitions in one minibatch."),
    Key("gradient_steps_per_update", "batch", "int", "steps",
        "Optimizer steps per update: epochs_per_update x minibatches_per_epoch."),
    Key("gae_horizon", "advantages", "int", "env steps", "Length of the segments GAE runs over."),
    # -- reward --------------------------------------------------------------------
    Key("reward_scale", "reward", "float", "", "Multiplier on rewards before GAE."),
    Key("reward_scale_site", "reward", "enum", "",
        "Where the reward multiplier is applied. A scale of 1 applies nowhere: when either side's `reward_scale` is "
        "1, a different site is that scale's difference, listed in `reward_scale`'s row.",
        ("loss", "env", "none"), fold_into="reward_scale",
        fold_when={"other": {"reward_scale": {"any_of": [{"brax_is": 1.0}, {"slm_is": 1.0}]}}}),
    # -- observations ---------------------------------------------------------------
    Key("obs_normalization", "observations", "bool", "", "Observations standardized by running statistics."),
    Key("obs_norm_method", "observations", "enum", "", "How the running statistics are kept.",
        ("welford", "ema", "none")),
    Key("obs_norm_std_eps", "observations", "float", "", "Epsilon added to the std (or variance) when normalizing."),
    Key("obs_clip", "observations", "float", "std units",
        "Normalized observations are clipped to [-obs_clip, obs_clip]; null when not clipped."),
    Key("obs_norm_update", "observations", "enum", "",
        "When the running observation statistics are updated: once per update from the whole batch, before "
        "(`per_batch_before_sgd`) or after (`per_batch_after_sgd`) its gradient steps, or at every env step as "
        "observations arrive (`per_env_step`); null when observations are not normalized.",
        ("per_batch_before_sgd", "per_batch_after_sgd", "per_env_step")),
    # -- value function -------------------------------------------------------------
    Key("value_loss", "value", "enum", "", "Form of the value loss.", ("mse", "l1", "huber", "distributional")),
    Key("value_loss_coef", "value", "float", "",
        "Multiplier on the mean squared value error in the total loss (Brax's `0.5 * vf_loss_coefficient` "
        "counts as the product)."),
    Key("value_clipping", "value", "float", "",
        "Clip range of the value prediction around the old value; null when unclipped."),
    Key("value_target_normalization", "value", "bool", "", "Value targets normalized by running return statistics."),
    Key("value_hidden_layers", "architecture", "list", "units", "Hidden layer widths of the value network."),
    # -- advantages ------------------------------------------------------------------
    Key("gae_lambda", "advantages", "float", "", "GAE lambda."),
    Key("truncation", "advantages", "enum", "",
        "What GAE does at a time-limit truncation: `terminal` cuts it like a termination (no bootstrap); "
        "`mask_bootstrap_last_state` drops the truncated step and cuts the trace, so the step before it "
        "bootstraps from the value of the episode's last state (Brax's truncation mask); "
        "`bootstrap_next_obs_across_reset` bootstraps from the value of the next stored observation, which after "
        "the auto-reset is the next episode's first state, and the trace runs on across the boundary; "
        "`bootstrap_final_obs` bootstraps from the value of the episode's final observation and cuts the trace; "
        "`bootstrap_current_state` adds discount x V(state the time limit hits) to that step's reward (Brax's "
        "`bootstrap_on_timeout`).",
        ("terminal", "mask_bootstrap_last_state", "bootstrap_next_obs_across_reset", "bootstrap_final_obs",
         "bootstrap_current_state")),
    Key("final_observation", "advantages", "enum", "",
        "Whether the observation an episode ends on (at a time limit too) reaches the learner: `discarded` when "
        "the training env's auto-reset replaces it with the next episode's first observation and keeps no copy "
        "(Playground's BraxAutoResetWrapper), `kept` when a copy is stored for the learner. Bootstrapping a "
        "truncated step from its own final state (`truncation: bootstrap_final_obs`) needs it kept. Decided by "
        "the training wrapper the environment is stepped through, at the Playground commit each side runs.",
        ("discarded", "kept"), per_environment=True),
    Key("gae_recompute", "advantages", "enum", "",
        "When advantages and value targets are computed: `per_minibatch` inside the loss, with the value "
        "parameters of that gradient step; `per_update` once per update, before its epochs, and then held fixed.",
        ("per_minibatch", "per_update")),
    Key("advantage_form", "advantages", "enum", "",
        "What the advantage in the policy loss is, before any normalization: `gae`, the backward sum of discounted "
        "TD errors, A_t = delta_t + gamma * lambda * A_{t+1} (Schulman et al. 2016, eq. 16); `vtrace_pg`, one reward "
        "plus the discounted lambda-return of the next step, A_t = r_t + gamma * G_{t+1} - V(s_t) = delta_t + gamma * "
        "A^GAE_{t+1} (IMPALA's policy-gradient advantage, Espeholt et al. 2018, with V-trace's c = lambda): lambda "
        "is not applied to the first step of the trace. Normalization is `advantage_normalization`'s.",
        ("gae", "vtrace_pg")),
    Key("discount", "discount", "float", "", "Discount factor gamma."),
    Key("advantage_normalization", "advantages", "bool", "", "Advantages standardized before the policy loss."),
    Key("advantage_normalization_scope", "advantages", "enum", "",
        "What the advantage mean and std are computed over.", ("minibatch", "batch")),
    # -- optimizer --------------------------------------------------------------------
    Key("learning_rate", "lr_schedule", "float", "", "Adam's (initial) learning rate."),
    Key("lr_schedule", "lr_schedule", "enum", "", "How the learning rate moves during training.",
        ("constant", "linear_decay", "adaptive_kl", "cosine", "other")),
    Key("lr_final_factor", "lr_schedule", "float", "",
        "Final learning rate as a fraction of the initial one (1.0 when constant)."),
    Key("lr_decay_steps", "lr_schedule", "int", "env steps",
        "Env steps (all envs together) over which a decaying learning rate reaches its final factor "
        "(SLM-Lab `lr_scheduler_spec.frame`, i.e. the run's `max_frame`); null when the rate is constant."),
    Key("adam_eps", "lr_schedule", "float", "", "Adam's epsilon."),
    Key("max_grad_norm", "gradient_clipping", "float", "",
        "Gradients clipped to this global norm; null when not clipped."),
    Key("grad_clip_scope", "gradient_clipping", "enum", "",
        "What one gradient-norm clip covers: the policy's and the value's gradients together (`global`, one "
        "optimizer) or each network's own (`per_network`); null when nothing is clipped.",
        ("global", "per_network")),
    # -- entropy ----------------------------------------------------------------------
    Key("entropy_coef", "entropy", "float", "", "Entropy bonus coefficient (initial value when scheduled)."),
    Key("entropy_schedule", "entropy", "enum", "", "How the entropy coefficient moves.",
        ("constant", "linear_decay", "other")),
    Key("entropy_coef_final", "entropy", "float", "",
        "Entropy coefficient at the end of its schedule (entropy_coef when constant: with both schedules "
        "constant, a difference here is `entropy_coef`'s, listed in its row).",
        fold_into="entropy_coef", fold_when=_BOTH_CONSTANT("entropy_schedule")),
    Key("entropy_estimator", "entropy", "enum", "",
        "How the entropy in the bonus is computed: `analytic`, the closed form of the action distribution; "
        "`sampled_squashed`, the Gaussian's closed form plus tanh's log-det-Jacobian at one sampled action, a "
        "one-sample estimate of the squashed distribution's entropy.",
        ("analytic", "sampled_squashed")),
    # -- policy -----------------------------------------------------------------------
    Key("action_distribution", "action_distribution", "enum", "", "The policy's action distribution.",
        ("normal", "tanh_normal")),
    Key("std_state_dependent", "action_distribution", "bool", "",
        "The std is an output of the policy network (else a state-independent parameter)."),
    Key("std_transform", "action_distribution", "enum", "", "How the raw std parameter becomes the std.",
        ("softplus", "exp", "clamped_exp", "other")),
    Key("std_min", "action_distribution", "float", "", "Smallest std (the std value, not log-std)."),
    Key("std_max", "action_distribution", "float", "",
        "Largest std (the std value, not log-std); null when unbounded."),
    Key("action_bounding", "action_distribution", "enum", "",
        "How the policy's sampled action is bounded before the env receives it: `tanh` squashes it into (-1, 1) "
        "(the log-probability is the squashed distribution's, Brax's NormalTanhDistribution); `clip` clips it to "
        "[-1, 1] after sampling (Playground's torch wrapper), so the loss scores the unclipped sample; `none` "
        "sends the raw sample, whose tails reach the env (see `env_action_clip` for what the env then does).",
        ("tanh", "clip", "none")),
    Key("policy_hidden_layers", "architecture", "list", "units", "Hidden layer widths of the policy network."),
    Key("activation", "architecture", "enum", "",
        "Hidden activation (swish and SiLU are one name: `silu`).", ("silu", "relu", "tanh", "elu", "other")),
    Key("kernel_init", "initialization", "enum", "", "Initializer of the hidden layers' weights.",
        ("lecun_uniform", "orthogonal", "xavier_uniform", "kaiming_uniform", "other")),
    Key("shared_network", "architecture", "bool", "", "Policy and value share a torso."),
    # -- ppo --------------------------------------------------------------------------
    Key("clip_epsilon", "clip_epsilon", "float", "",
        "PPO's probability-ratio clip range: the ratio is clipped to [1 - eps, 1 + eps] (initial value when "
        "scheduled)."),
    Key("clip_epsilon_schedule", "clip_epsilon", "enum", "", "How the clip range moves during training.",
        ("constant", "linear_decay", "other")),
    Key("clip_epsilon_final", "clip_epsilon", "float", "",
        "Clip range at the end of its schedule (clip_epsilon when constant: with both schedules constant, a "
        "difference here is `clip_epsilon`'s, listed in its row).",
        fold_into="clip_epsilon", fold_when=_BOTH_CONSTANT("clip_epsilon_schedule")),
    # -- training setup (per environment) ----------------------------------------------
    Key("episode_length", "setup", "int", "env steps",
        "Env steps before the time limit truncates an episode, counted as the training wrapper counts them: "
        "Brax's EpisodeWrapper adds `action_repeat` per agent step, so with an action repeat of 4 an episode of "
        "1,000 steps is 250 agent decisions (and its return sums 250 repeated-action rewards). Returns at "
        "different lengths are not comparable (Brax `episode_length`, passed to the training wrapper; SLM-Lab "
        "`PlaygroundVecEnv(episode_length=...)`).", per_environment=True),
    Key("action_repeat", "setup", "int", "steps",
        "Times each action is applied (and its rewards summed) per env step.", per_environment=True),
    Key("training_env_steps", "setup", "int", "env steps",
        "Env steps of the whole training run, all envs together. Brax: what train() runs (`num_timesteps` "
        "rounded up to whole training steps; the request is `declared`), counting each of `action_repeat` "
        "steps; SLM-Lab: `max_frame`, frames of its vector env, one per agent step (x `action_repeat` in "
        "Brax's unit: the results join converts).", per_environment=True),
    Key("num_resets_per_eval", "setup", "int", "resets",
        "Times every training env is reset, all together, between two evaluations (Brax `num_resets_per_eval`: "
        "each reset starts all episodes afresh; 0: envs reset only when their episode ends, SLM-Lab's vector "
        "envs).", per_environment=True),
    Key("env_steps_between_resets", "setup", "int", "env steps",
        "Env steps each training env runs before every training env is reset together to a fresh initial state "
        "(Brax: with `num_resets_per_eval` > 0, after each reset epoch of `num_training_steps_per_epoch` training "
        "steps); 0: never, an env restarts only when its episode ends, and Playground's auto-reset wrapper "
        "restarts it at its cached first state. Below `episode_length`, training never sees an episode past this "
        "step nor a time-limit truncation.", per_environment=True),
    Key("eval_interval_env_steps", "setup", "int", "env steps",
        "Env steps of training between two scores of the run, all envs together, in the unit of "
        "`training_env_steps` (Brax: `num_timesteps` split into max(num_evals - 1, 1) epochs of whole training "
        "steps; SLM-Lab: `meta.eval_frequency` frames with `meta.rigorous_eval`, else `meta.log_frequency`, "
        "where it logs the training episodes' returns). Fewer steps between scores: more points on the learning "
        "curve, and a final score taken nearer the end.", per_environment=True),
    Key("eval_policy", "setup", "enum", "",
        "What a score is the return of: fresh episodes of the policy's mode (`deterministic`) or of actions "
        "sampled from it (`sampled`) in an evaluation env, or the episodes training itself runs, sampled "
        "while the policy learns (`training_episodes`: SLM-Lab without `meta.rigorous_eval`).",
        ("deterministic", "sampled", "training_episodes"), per_environment=True),
    Key("policy_obs_keys", "setup", "str", "",
        "The observation group the policy network sees (`state` for an observation that is not a dict).",
        per_environment=True),
    Key("value_obs_keys", "setup", "str", "",
        "The observation group the value network sees (`privileged_state`: a critic with privileged inputs).",
        per_environment=True),
    Key("env_action_clip", "setup", "enum", "",
        "What the environment's own `step` does with the action before the physics: `clip` clips the control it "
        "makes from it (motor targets to the joint or control range, a tanh counts); `none` hands "
        "`mjx_env.step` the action (scaled, offset) unclipped, and MuJoCo then clamps a control only where the "
        "model declares its actuator ctrllimited (not read). With `action_bounding: none`, an unbounded sample "
        "reaches the motors as far as the model allows.", ("clip", "none"), per_environment=True, context=True),
    Key("reward_floor", "reward", "float", "",
        "The lowest per-step reward the environment's `step` allows (`jp.clip(reward, 0.0, ...)` gives 0); null "
        "when its step clips no reward from below. With a floor of 0, an average return of exactly 0 means no "
        "step ever earned anything: a collapse, not a weak policy.", per_environment=True, context=True),
    Key("matmul_precision", "setup", "enum", "",
        "Precision of the learner's float32 matrix multiplications on an Ampere-or-newer NVIDIA GPU: `tf32` "
        "(TF32 inputs, JAX's default there and SLM-Lab's `allow_tf32 = True`) or `float32` (PyTorch's default, "
        "or JAX with `jax_default_matmul_precision` highest). Read from the code; an environment variable set "
        "outside it is not seen.", ("tf32", "float32")),
    Key("physics_backend", "setup", "str", "",
        "The MuJoCo implementation the environment steps with (the env config's `impl`: `jax` for MJX, `warp` "
        "for MuJoCo Warp).", per_environment=True),
)

KEYS: dict[str, Key] = {k.name: k for k in _KEYS}
PER_ENVIRONMENT = frozenset(k.name for k in _KEYS if k.per_environment)
FOLDS = {k.name: (k.fold_into, k.fold_when) for k in _KEYS if k.fold_into is not None}
CONTEXT = frozenset(k.name for k in _KEYS if k.context)


def topic_of(key: str) -> str:
    return KEYS[key].topic


def keys_in_topic(topic: str) -> list[str]:
    return [k.name for k in _KEYS if k.topic == topic]


def canonical_activation(name: str) -> str:
    """One name per activation: swish and SiLU are the same function."""
    lowered = name.lower().rstrip("_")
    return {"swish": "silu", "silu": "silu", "relu": "relu", "tanh": "tanh", "elu": "elu"}.get(lowered, lowered)
