"""Hand-built extractions shaped like the real ones (Brax dm_control vs SLM-Lab
ppo_playground), for the compare / rules / render / report CLI tests.

The values are the kind the extractors return at the seed-era refs; the lines are made
up. Nothing here is upstream code.
"""

from __future__ import annotations

from brax_diff.facts.model import Extraction, Fact, Finding, Provenance, SourceInfo

BRAX_REPO = "https://github.com/google/brax"
PLAYGROUND_REPO = "https://github.com/google-deepmind/mujoco_playground"
SLM_REPO = "https://github.com/kengz/SLM-Lab"
BRAX_SHA = "b" * 40
PLAYGROUND_SHA = "p" * 40
SLM_SHA = "s" * 40
TRAIN = "brax/training/agents/ppo/train.py"
PARAMS = "mujoco_playground/config/dm_control_suite_params.py"
SPEC = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"

BRAX_VALUES = {
    "num_envs": (2048, PARAMS, 20),
    "unroll_length": (30, PARAMS, 21),
    "unrolls_per_update": (16, TRAIN, 586),
    "transitions_per_update": (983040, TRAIN, 586),
    "epochs_per_update": (16, PARAMS, 22),
    "minibatches_per_epoch": (32, PARAMS, 23),
    "minibatch_transitions": (30720, TRAIN, 600),
    "gradient_steps_per_update": (512, TRAIN, 601),
    "gae_horizon": (30, TRAIN, 610),
    "reward_scale": (10.0, PARAMS, 24),
    "reward_scale_site": ("loss", "brax/training/agents/ppo/losses.py", 212),
    "obs_normalization": (True, PARAMS, 25),
    "obs_norm_method": ("welford", "brax/training/acme/running_statistics.py", 50),
    "obs_norm_std_eps": (0.0, "brax/training/acme/running_statistics.py", 60),
    "value_loss": ("mse", "brax/training/agents/ppo/losses.py", 252),
    "value_loss_coef": (0.25, "brax/training/agents/ppo/losses.py", 263),
    "value_clipping": (None, TRAIN, 210),
    "value_target_normalization": (False, TRAIN, 211),
    "value_hidden_layers": ([256, 256, 256, 256, 256], PARAMS, 30),
    "truncation": ("mask_bootstrap_last_state", "brax/training/agents/ppo/losses.py", 68),
    "gae_recompute": ("per_minibatch", "brax/training/agents/ppo/losses.py", 221),
    "advantage_form": ("vtrace_pg", "brax/training/agents/ppo/losses.py", 100),
    "obs_norm_update": ("per_batch_before_sgd", TRAIN, 614),
    "grad_clip_scope": (None, TRAIN, 216),
    "entropy_estimator": ("sampled_squashed", "brax/training/distribution.py", 83),
    "gae_lambda": (0.95, TRAIN, 213),
    "discount": (0.995, PARAMS, 26),
    "advantage_normalization": (True, TRAIN, 214),
    "advantage_normalization_scope": ("batch", "brax/training/agents/ppo/losses.py", 280),
    "learning_rate": (1e-3, PARAMS, 27),
    "lr_schedule": ("constant", TRAIN, 215),
    "lr_final_factor": (1.0, TRAIN, 215),
    "lr_decay_steps": (None, TRAIN, 215),
    "adam_eps": (1e-8, TRAIN, 400),
    "max_grad_norm": (None, TRAIN, 216),
    "entropy_coef": (0.01, PARAMS, 28),
    "entropy_schedule": ("constant", TRAIN, 217),
    "entropy_coef_final": (0.01, PARAMS, 28),
    "action_distribution": ("tanh_normal", "brax/training/distribution.py", 100),
    "std_state_dependent": (True, "brax/training/distribution.py", 101),
    "std_transform": ("softplus", "brax/training/distribution.py", 102),
    "std_min": (0.001, "brax/training/distribution.py", 103),
    "std_max": (None, "brax/training/distribution.py", 104),
    "policy_hidden_layers": ([32, 32, 32, 32], PARAMS, 31),
    "activation": ("silu", "brax/training/networks.py", 40),
    "kernel_init": ("lecun_uniform", "brax/training/networks.py", 41),
    "shared_network": (False, "brax/training/agents/ppo/networks.py", 50),
    "clip_epsilon": (0.3, TRAIN, 206),
    "clip_epsilon_schedule": ("constant", TRAIN, 206),
    "clip_epsilon_final": (0.3, TRAIN, 206),
    "episode_length": (1000, "mujoco_playground/_src/dm_control_suite/cartpole.py", 49),
    "action_repeat": (1, PARAMS, 36),
    "training_env_steps": (60_000_000, PARAMS, 30),
    "policy_obs_keys": ("state", "brax/training/agents/ppo/networks.py", 98),
    "value_obs_keys": ("state", "brax/training/agents/ppo/networks.py", 99),
    "physics_backend": ("warp", "mujoco_playground/_src/dm_control_suite/cartpole.py", 53),
}

# value, path, line, spec key (None: from code)
SLM_VALUES = {
    "num_envs": (2048, 140, "env.num_envs"),
    "unroll_length": (30, 132, "agent.algorithm.time_horizon"),
    "unrolls_per_update": (1, None, None),
    "transitions_per_update": (61440, 132, None),
    "epochs_per_update": (16, 133, "agent.algorithm.training_epoch"),
    "minibatches_per_epoch": (15, 134, None),
    "minibatch_transitions": (4096, 134, "agent.algorithm.minibatch_size"),
    "gradient_steps_per_update": (240, 134, None),
    "gae_horizon": (30, 132, "agent.algorithm.time_horizon"),
    "reward_scale": (10.0, 141, "env.reward_scale"),
    "reward_scale_site": ("env", None, None),
    "obs_normalization": (True, 84, "env.normalize_obs"),
    "obs_norm_method": ("welford", None, None),
    "obs_norm_std_eps": (1e-8, None, None),
    "value_loss": ("mse", 112, "agent.net.loss_spec.name"),
    "value_loss_coef": (0.5, 97, "agent.algorithm.val_loss_coef"),
    "value_clipping": (None, None, None),
    "value_target_normalization": (False, 99, "agent.algorithm.normalize_v_targets"),
    "value_hidden_layers": ([256, 256, 256], 63, "agent.net.critic_arc"),
    "truncation": ("bootstrap_next_obs_across_reset", None, None),
    "gae_recompute": ("per_update", None, None),
    "advantage_form": ("gae", None, None),
    "obs_norm_update": ("per_env_step", None, None),
    "grad_clip_scope": ("per_network", None, None),
    "entropy_estimator": ("analytic", None, None),
    "gae_lambda": (0.95, 90, "agent.algorithm.lam"),
    "discount": (0.995, 131, "agent.algorithm.gamma"),
    "advantage_normalization": (True, None, None),
    "advantage_normalization_scope": ("minibatch", None, None),
    "learning_rate": (0.001, 118, "agent.net.optim_spec.lr"),
    "lr_schedule": ("linear_decay", 122, "agent.net.lr_scheduler_spec.name"),
    "lr_final_factor": (0.033, 124, "agent.net.lr_scheduler_spec.min_factor"),
    "lr_decay_steps": (100_000_000, 123, "agent.net.lr_scheduler_spec.frame"),
    "adam_eps": (1e-5, 119, "agent.net.optim_spec.eps"),
    "max_grad_norm": (1.0, 109, "agent.net.clip_grad_val"),
    "entropy_coef": (0.01, 95, "agent.algorithm.entropy_coef_spec.start_val"),
    "entropy_schedule": ("constant", 94, "agent.algorithm.entropy_coef_spec.name"),
    "entropy_coef_final": (0.01, 95, "agent.algorithm.entropy_coef_spec.start_val"),
    "action_distribution": ("normal", 87, "agent.algorithm.action_pdtype"),
    "std_state_dependent": (False, None, None),
    "std_transform": ("clamped_exp", None, None),
    "std_min": (0.0067, None, None),
    "std_max": (1.6487, None, None),
    "policy_hidden_layers": ([64, 64], 47, "agent.net.actor_arc"),
    "activation": ("silu", 50, None),
    "kernel_init": ("orthogonal", 107, "agent.net.init_fn"),
    "shared_network": (False, 105, "agent.net.shared"),
    "clip_epsilon": (0.2, 93, "agent.algorithm.clip_eps_spec.start_val"),
    "clip_epsilon_schedule": ("constant", 92, "agent.algorithm.clip_eps_spec.name"),
    "clip_epsilon_final": (0.2, 93, "agent.algorithm.clip_eps_spec.start_val"),
    "episode_length": (1000, None, None),
    "action_repeat": (1, None, None),
    "training_env_steps": (60_000_000, 142, "env.max_frame"),
    "policy_obs_keys": ("state", None, None),
    "value_obs_keys": ("state", None, None),
    "physics_backend": ("warp", None, None),
}
SLM_CODE = "slm_lab/agent/algorithm/ppo.py"


def brax_extraction(overrides: dict | None = None, *, family: str | None = "dm_control",
                    env: str | None = None, sha: str = BRAX_SHA, drop: tuple[str, ...] = ()) -> Extraction:
    """The Brax side; ``overrides`` replaces values by key (keeping the line)."""
    x = Extraction(
        side="brax",
        sources={"brax": SourceInfo(BRAX_REPO, sha, "2025-06-01T10:00:00+00:00", "main"),
                 "playground": SourceInfo(PLAYGROUND_REPO, PLAYGROUND_SHA, "2025-06-02T10:00:00+00:00", "main")},
        scope={"family": family, "env": env},
    )
    for key, (value, path, line) in BRAX_VALUES.items():
        if key in drop:
            continue
        repo, commit = (PLAYGROUND_REPO, PLAYGROUND_SHA) if path.startswith("mujoco_playground") else (BRAX_REPO, sha)
        value = (overrides or {}).get(key, value)
        x.add(Fact(key, value, (Provenance(repo, commit, path, line),)))
    return x


def slm_extraction(overrides: dict | None = None, *, variant: str = "ppo_playground", sha: str = SLM_SHA,
                   drop: tuple[str, ...] = ()) -> Extraction:
    """The SLM-Lab side; spec facts carry ``spec: PATH`` notes as the extractor's do."""
    x = Extraction(
        side="slm",
        sources={"slm": SourceInfo(SLM_REPO, sha, "2025-06-03T10:00:00+00:00", "master")},
        scope={"variant": variant, "family": "dm_control", "envs": []},
    )
    for key, (value, line, spec) in SLM_VALUES.items():
        if key in drop:
            continue
        path = SPEC if line is not None else SLM_CODE
        prov = (Provenance(SLM_REPO, sha, path, line or 200),)
        value = (overrides or {}).get(key, value)
        x.add(Fact(key, value, prov, note=f"spec: {spec}" if spec else None))
    x.find(Finding("spec_code_inconsistency", "WARNING", "minibatch_size 4096 is rounded to divide the batch",
                   (Provenance(SLM_REPO, sha, SPEC, 134),), key="minibatch_transitions"))
    return x
