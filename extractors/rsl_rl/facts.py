"""The RSL-RL side's canonical facts: Playground's config for a scope, its training script
and torch wrapper, and rsl-rl-lib's code, mapped onto brax_diff.facts.vocabulary's keys.

Each key is one small reader below; a value the code does not give is an explained unknown
(``value: null`` and a finding naming the file, the function and what was looked for).
"""

from __future__ import annotations

from typing import Any, Callable

from brax_diff.facts.model import Extraction, Fact, Finding
from brax_diff.facts.vocabulary import KEYS, PER_ENVIRONMENT, canonical_activation

from .code import Missing, Read
from .evaluation import RUNNER, read_learn
from .interface import interface_facts
from .library import Library
from .params import PARAMS_FUNCTION, Config, ParamsFunction
from .script import SCRIPT, TrainScript, Wrapper


class Facts:
    """Builds one scope's Extraction (family: ``env`` None)."""

    def __init__(self, extraction: Extraction, params: ParamsFunction, config: Config, family: str, env: str | None,
                 library: Library, script: TrainScript, wrapper: Wrapper, env_field: Callable) -> None:
        self.x, self.params, self.config, self.family, self.env = extraction, params, config, family, env
        self.lib, self.script, self.wrapper, self.env_field = library, script, wrapper, env_field

    # -- plumbing ------------------------------------------------------------------------
    def setting(self, path: str) -> Read | Missing:
        """A config key by dotted path, else the library's default for it, else Missing (also
        when the engine does not follow what the config gives it: never the default then)."""
        unknown = self.params.unknown(self.config, self.env, path)
        if unknown is not None:
            return unknown
        found = self.config.settings.get(path)
        if found is not None:
            return Read(found.value, found.provenance, found.origin)
        section, _, name = path.rpartition(".")
        if section == "algorithm":
            return self.lib.ppo_default(name)
        if section == "policy":
            return self.lib.policy_default(name)
        return Missing(f"{PARAMS_FUNCTION} ({self.family}) sets no {path}, and rsl-rl-lib gives it no default")

    def put(self, key: str, value: Any, *reads: Read | Missing, note: str | None = None) -> None:
        """``key`` from ``reads`` (its inputs): the first Missing makes it an explained unknown."""
        for read in reads:
            if isinstance(read, Missing):
                self.unknown(key, read)
                return
        lines = tuple(line for read in reads for line in read.lines)
        notes = [note] if note else [r.note for r in reads if r.note][:1]
        self.x.add(Fact(key, value, lines, note="; ".join(notes) or None))

    def unknown(self, key: str, missing: Missing, kind: str = "pattern_not_found", severity: str = "WARNING") -> None:
        self.x.unknown(key, missing.why, Finding(kind, severity, missing.why, missing.lines, key), missing.lines)

    def copy(self, key: str, read: Read | Missing, convert: Callable = lambda v: v, note: str | None = None) -> None:
        if isinstance(read, Missing):
            self.unknown(key, read)
            return
        self.put(key, convert(read.value), read, note=note)

    # -- every key -----------------------------------------------------------------------
    def build(self) -> Extraction:
        self.batch()
        self.returns()
        self.value()
        self.optimizer()
        self.policy()
        self.observations()
        self.setup()
        for fact in interface_facts(self.lib.snapshot, self.wrapper.file.snapshot, self.family, self.env):
            if self.env is None and fact.key in PER_ENVIRONMENT:  # left to the environments
                self.x.add(fact)
            else:
                self.x.put(fact)
        for key in KEYS:
            if key not in self.x.facts:
                self.unknown(key, Missing(f"{key}: no RSL-RL reader gives a value"))
        return self.x

    def batch(self) -> None:
        num_envs, steps = self.script.num_envs(), self.setting("num_steps_per_env")
        epochs, minibatches = self.setting("algorithm.num_learning_epochs"), self.setting("algorithm.num_mini_batches")
        rollout = self.lib.rollout()
        self.copy("num_envs", num_envs)
        self.copy("unroll_length", steps)
        self.copy("gae_horizon", steps, note="GAE runs over each env's num_steps_per_env steps of the iteration")
        self.copy("unrolls_per_update", rollout)
        self.copy("epochs_per_update", epochs)
        self.copy("minibatches_per_epoch", minibatches)
        if all(isinstance(r, Read) for r in (num_envs, steps, epochs, minibatches)):
            batch = num_envs.value * steps.value
            self.put("transitions_per_update", batch, num_envs, steps, rollout,
                     note="num_envs x num_steps_per_env")
            self.put("minibatch_transitions", batch // minibatches.value, num_envs, steps, minibatches,
                     note="num_envs x num_steps_per_env / num_mini_batches")
            self.put("gradient_steps_per_update", epochs.value * minibatches.value, epochs, minibatches,
                     note="num_learning_epochs x num_mini_batches")
        else:
            first = next(r for r in (num_envs, steps, epochs, minibatches) if isinstance(r, Missing))
            for key in ("transitions_per_update", "minibatch_transitions", "gradient_steps_per_update"):
                self.unknown(key, first)

    def returns(self) -> None:
        self.copy("discount", self.setting("algorithm.gamma"))
        self.copy("gae_lambda", self.setting("algorithm.lam"))
        self.copy("gae_recompute", self.lib.gae())
        self.copy("advantage_form", self.lib.advantage_form())
        bootstrap, time_outs = self.lib.timeout_bootstrap(), self.wrapper.time_outs()
        if isinstance(bootstrap, Read) and isinstance(time_outs, Missing):
            self.put("truncation", "terminal", bootstrap,
                     note="the wrapper reports no time_outs: a time limit ends GAE like a termination")
        else:
            self.put("truncation", "bootstrap_current_state", bootstrap, time_outs,
                     note=f"{time_outs.note if isinstance(time_outs, Read) else ''}; {bootstrap.note if isinstance(bootstrap, Read) else ''}")
        per_minibatch, shape = self.setting("algorithm.normalize_advantage_per_mini_batch"), \
            self.lib.advantage_normalization()
        self.put("advantage_normalization", True, shape, note="always on: over the batch or per minibatch")
        if isinstance(per_minibatch, Read):
            self.put("advantage_normalization_scope", "minibatch" if per_minibatch.value else "batch",
                     per_minibatch, shape, note=f"normalize_advantage_per_mini_batch={per_minibatch.value}")
        else:
            self.unknown("advantage_normalization_scope", per_minibatch)
        self.put("reward_scale", 1.0, self.lib.timeout_bootstrap(),
                 note="PPO.process_env_step stores the env's reward unscaled")
        self.put("reward_scale_site", "none", self.lib.timeout_bootstrap(),
                 note="no reward multiplier in PPO.process_env_step")

    def value(self) -> None:
        form, clipped, clip = self.lib.value_loss(), self.setting("algorithm.use_clipped_value_loss"), \
            self.setting("algorithm.clip_param")
        self.copy("value_loss", form)
        self.copy("value_loss_coef", self.setting("algorithm.value_loss_coef"),
                  note="loss = surrogate + value_loss_coef * mean squared (clipped) value error - entropy_coef * entropy")
        if isinstance(clipped, Read) and isinstance(clip, Read):
            self.put("value_clipping", clip.value if clipped.value else None, clipped, clip, form,
                     note=f"use_clipped_value_loss={clipped.value}: the value is clipped by clip_param around the old one")
        else:
            self.unknown("value_clipping", clipped if isinstance(clipped, Missing) else clip)
        self.put("value_target_normalization", False, form, note="returns are used as computed")
        self.copy("value_hidden_layers", self.setting("policy.critic_hidden_dims"), list)
        self.copy("clip_epsilon", clip)
        self.copy("clip_epsilon_schedule", clip, lambda v: "constant")
        self.copy("clip_epsilon_final", clip)

    def optimizer(self) -> None:
        rate, schedule, adaptive = self.setting("algorithm.learning_rate"), self.setting("algorithm.schedule"), \
            self.lib.adaptive_kl()
        self.copy("learning_rate", rate)
        if isinstance(schedule, Read) and isinstance(adaptive, Read):
            moving = schedule.value == adaptive.value
            self.put("lr_schedule", "adaptive_kl" if moving else "constant", schedule, adaptive,
                     note=f"schedule={schedule.value!r}" + (" (rate x/÷ 1.5 to keep the KL near desired_kl)"
                                                           if moving else ""))
            if moving:
                self.put("lr_final_factor", None, schedule, adaptive,
                         note="moves with the measured KL, within [1e-5, 1e-2]; no final factor")
            else:
                self.put("lr_final_factor", 1.0, schedule, adaptive)
            self.put("lr_decay_steps", None, schedule, adaptive, note="no decay over env steps")
        else:
            missing = schedule if isinstance(schedule, Missing) else adaptive
            for key in ("lr_schedule", "lr_final_factor", "lr_decay_steps"):
                self.unknown(key, missing)
        adam = self.lib.optimizer()
        if isinstance(adam, Read) and adam.value is None:
            self.put("adam_eps", 1e-8, adam, note="torch.optim.Adam's default eps (PPO passes none)")
        elif isinstance(adam, Read):
            self.unknown("adam_eps", Missing(f"Adam's eps is `{adam.value}`, not read", adam.lines))
        else:
            self.unknown("adam_eps", adam)
        self.copy("max_grad_norm", self.setting("algorithm.max_grad_norm"))
        self.copy("grad_clip_scope", self.lib.grad_clip())
        entropy = self.setting("algorithm.entropy_coef")
        self.copy("entropy_coef", entropy)
        self.copy("entropy_schedule", entropy, lambda v: "constant")
        self.copy("entropy_coef_final", entropy)
        self.copy("entropy_estimator", self.lib.entropy())

    def policy(self) -> None:
        clip = self.wrapper.action_clip()
        distribution = self.lib.distribution()
        if isinstance(distribution, Read) and isinstance(clip, Read):
            self.put("action_distribution", "normal", distribution, clip,
                     note=f"a Normal; the sampled action is clipped to {clip.value} in the torch wrapper, "
                          "not squashed (log-probs are the unclipped sample's)")
        else:
            self.copy("action_distribution", distribution)
        state_dependent = self.setting("policy.state_dependent_std")
        self.copy("std_state_dependent", state_dependent, bool)
        std_type, parameter = self.setting("policy.noise_std_type"), self.lib.std_parameter()
        if isinstance(std_type, Read) and std_type.value == "scalar" and isinstance(parameter, Read):
            self.put("std_transform", "other", std_type, parameter,
                     note="noise_std_type='scalar': the parameter is the std itself, no transform")
        elif isinstance(std_type, Read) and std_type.value == "log":
            self.put("std_transform", "exp", std_type)
        else:
            self.unknown("std_transform", std_type if isinstance(std_type, Missing)
                         else parameter if isinstance(parameter, Missing)
                         else Missing(f"noise_std_type={std_type.value!r} not read", std_type.lines))
        noise = self.setting("policy.init_noise_std")
        self.put("std_min", None, *([parameter] if isinstance(parameter, Read) else [parameter]),
                 note="the std is not bounded below")
        self.put("std_max", None, *([parameter] if isinstance(parameter, Read) else [parameter]),
                 note="the std is not bounded above")
        if isinstance(noise, Read) and "std_max" in self.x.facts:
            fact = self.x.facts["std_max"]
            self.x.facts["std_max"] = Fact("std_max", None, fact.provenance + noise.lines,
                                           note=f"not bounded; starts at init_noise_std={noise.value}")
        self.copy("policy_hidden_layers", self.setting("policy.actor_hidden_dims"), list)
        self.copy("activation", self.setting("policy.activation"), canonical_activation)
        if self.lib.init_weights_called():
            self.unknown("kernel_init", Missing("ActorCritic calls init_weights: the scales are not read",
                                                self.lib.linear_layers().lines if isinstance(
                                                    self.lib.linear_layers(), Read) else ()))
        else:
            self.copy("kernel_init", self.lib.linear_layers())
        self.put("shared_network", False, self.lib.std_parameter(),
                 note="ActorCritic builds separate actor and critic MLPs")

    def observations(self) -> None:
        enabled = self.setting("empirical_normalization")
        translated = self.lib.empirical_normalization()
        if isinstance(translated, Missing):
            translated = Missing(f"{translated.why}: rsl_rl at this ref does not read empirical_normalization; each "
                                 "network's own obs_normalization (its actor/critic section, 4.0+) decides, and is "
                                 "not read", translated.lines)
        normalizer, updates = self.lib.normalizer(), self.lib.normalizer_updates()
        self.put("obs_normalization", enabled.value if isinstance(enabled, Read) else None, enabled, translated,
                 note="empirical_normalization -> actor/critic_obs_normalization (OnPolicyRunner)")
        if isinstance(translated, Missing):
            # rsl_rl at this ref does not read empirical_normalization (4.0+: each network's own
            # obs_normalization in its actor/critic section decides): nothing follows from it.
            for key in ("obs_norm_method", "obs_norm_std_eps", "obs_clip", "obs_norm_update"):
                self.unknown(key, translated)
            return
        on = isinstance(enabled, Read) and bool(enabled.value)
        if isinstance(normalizer, Read):
            eps, clipped = normalizer.value
            self.put("obs_norm_method", "welford" if on else "none", normalizer, enabled,
                     note="running mean and variance merged batch by batch (EmpiricalNormalization)")
            self.put("obs_norm_std_eps", eps, normalizer, note="(x - mean) / (std + eps)")
            if clipped:
                self.unknown("obs_clip", Missing("EmpiricalNormalization.forward clips: the bound is not read",
                                                 normalizer.lines))
            else:
                self.put("obs_clip", None, normalizer, note="normalized observations are not clipped")
        else:
            for key in ("obs_norm_method", "obs_norm_std_eps", "obs_clip"):
                self.unknown(key, normalizer)
        if on:
            self.copy("obs_norm_update", updates)
        else:
            self.put("obs_norm_update", None, enabled)

    def setup(self) -> None:
        iterations, steps, num_envs = self.script.learn_iterations(), self.setting("num_steps_per_env"), \
            self.script.num_envs()
        budget = self.setting(iterations.value) if isinstance(iterations, Read) else iterations
        if all(isinstance(r, Read) for r in (budget, steps, num_envs)):
            self.put("training_env_steps", budget.value * steps.value * num_envs.value, iterations, budget, steps,
                     num_envs, note="max_iterations x num_steps_per_env x num_envs")
        else:
            self.unknown("training_env_steps",
                         next(r for r in (budget, steps, num_envs) if isinstance(r, Missing)))
        self.action_repeat()
        self.episode_length()
        self.obs_keys()
        self.physics()
        self.evaluation()

    def evaluation(self) -> None:
        """How the run is scored and reset: OnPolicyRunner.learn (:mod:`.evaluation`)."""
        snapshot = self.lib.snapshot
        learn = read_learn(snapshot)
        keys = ("num_resets_per_eval", "env_steps_between_resets", "eval_policy", "eval_interval_env_steps")
        if learn.why is not None:
            for key in keys:
                self.unknown(key, Missing(f"{key}: {learn.why}"))
            return
        step = Read(None, (snapshot.where(RUNNER, learn.step_line),))
        if learn.resets:
            for key in keys[:2]:
                self.unknown(key, Missing(f"{key}: {RUNNER}: OnPolicyRunner.learn calls self.env.reset, whose "
                                          "schedule is not read", tuple(snapshot.where(RUNNER, line)
                                                                         for line in learn.resets)))
        else:
            note = "OnPolicyRunner.learn never resets the envs together; each restarts alone at its episode's end"
            self.put("num_resets_per_eval", 0, step, note=note)
            self.put("env_steps_between_resets", 0, step, note=note)
        if learn.collect is None or learn.log_line is None:
            why = "logs no rewbuffer of episode returns" if learn.collect is None else "logs nothing per iteration"
            self.unknown("eval_policy", Missing(f"eval_policy: {RUNNER}: OnPolicyRunner.learn {why}", step.lines))
            self.unknown("eval_interval_env_steps", Missing(f"eval_interval_env_steps: {RUNNER}: OnPolicyRunner."
                                                            f"learn {why}", step.lines))
            return
        logged = Read(None, (snapshot.where(RUNNER, learn.log_line), snapshot.where(*learn.collect)))
        self.put("eval_policy", "training_episodes", step, logged,
                 note="the mean return of the training episodes (rewbuffer), logged once per iteration; "
                      "train_rsl_rl.py runs no evaluation during training")
        steps, num_envs = self.setting("num_steps_per_env"), self.script.num_envs()
        if isinstance(steps, Read) and isinstance(num_envs, Read):
            self.put("eval_interval_env_steps", steps.value * num_envs.value, steps, num_envs, logged,
                     note="one iteration between two logs: num_steps_per_env x num_envs")
        else:
            self.unknown("eval_interval_env_steps", steps if isinstance(steps, Missing) else num_envs)

    def action_repeat(self) -> None:
        found = self.script.wrapper_argument(self.wrapper, "action_repeat")
        if isinstance(found, Missing):
            self.unknown("action_repeat", found)
            return
        node, arg = found
        text = self.script.file.code(node)
        if text.isdigit():
            self.x.add(Fact("action_repeat", int(text), (self.script.file.at(arg),),
                            note=f"{self.wrapper_name()}(..., action_repeat={text}) in {SCRIPT}"))
        else:
            self.unknown("action_repeat", Missing(f"{SCRIPT}: main passes action_repeat `{text}`, not a literal",
                                                  (self.script.file.at(arg),)))

    def wrapper_name(self) -> str:
        return "RSLRLBraxWrapper"

    def episode_length(self) -> None:
        found = self.script.wrapper_argument(self.wrapper, "episode_length")
        if isinstance(found, Missing):
            self.unknown("episode_length", found)
            return
        node, arg = found
        text = self.script.file.code(node)
        at = self.script.file.at(arg)
        if not text.endswith(".episode_length"):
            self.unknown("episode_length", Missing(f"{SCRIPT}: main passes episode_length `{text}`, not the "
                                                   "environment config's", (at,)))
            return
        if self.env is None:
            self.unknown("episode_length", Missing(f"set per environment from `{text}` ({SCRIPT})", (at,)),
                         "per_environment", "INFO")
            return
        value, lines, why = self.env_field(self.family, self.env, "episode_length")
        if why is not None:
            self.unknown("episode_length", Missing(why, (at, *lines)))
            return
        self.x.add(Fact("episode_length", value, (at, *lines), note=f"`{text}` passed to RSLRLBraxWrapper"))

    def obs_keys(self) -> None:
        groups = self.script.obs_groups()
        if not groups:
            missing = self.script.file.missing("main() sets no train_cfg.obs_groups", "main")
            self.unknown("policy_obs_keys", missing)
            self.unknown("value_obs_keys", missing)
            return
        lines = tuple(self.script.file.at(node) for node, _ in groups)
        policies = {tuple(g.get("policy", ())) for _, g in groups if isinstance(g, dict)}
        critics = sorted({tuple(g.get("critic", ())) for _, g in groups if isinstance(g, dict)})
        if len(policies) == 1 and len(next(iter(policies))) == 1:
            self.x.add(Fact("policy_obs_keys", next(iter(policies))[0], lines, note="obs_groups[\"policy\"]"))
        else:
            self.unknown("policy_obs_keys", Missing(f"{SCRIPT}: obs_groups[\"policy\"] is not one group", lines))
        if len(critics) == 1 and len(critics[0]) == 1:
            self.x.add(Fact("value_obs_keys", critics[0][0], lines, note="obs_groups[\"critic\"]"))
        else:
            choices = " or ".join(f"`{'+'.join(c)}`" for c in critics)
            self.unknown("value_obs_keys", Missing(
                f"{SCRIPT}: main: obs_groups[\"critic\"] is {choices} depending on whether the environment's "
                "observation_size is a dict at run time (not read statically)", lines), "not_static")

    def physics(self) -> None:
        node = self.script.impl_assignment()
        impl = self.script.flag("impl")
        if node is None or isinstance(impl, Missing):
            self.unknown("physics_backend", impl if isinstance(impl, Missing)
                         else self.script.file.missing("no env_cfg.impl = _IMPL.value", "main"))
            return
        self.put("physics_backend", impl.value, impl, Read(None, (self.script.file.at(node),)),
                 note="env_cfg.impl = --impl's default")
