"""``rsl-rl-lib``'s own code at a ref (leggedrobotics/rsl_rl): the PPO defaults, how it
computes returns and advantages, its losses, its policy and its observation normalizer.

Paths are those of the 3.x releases (the API Playground's ``train_rsl_rl.py`` calls: a
``policy`` config with ``class_name="ActorCritic"`` and ``empirical_normalization``). At a ref
where a file or a method has another shape, each reader returns :class:`Missing` naming the
file and function; the side's fact is then an explained unknown.
"""

from __future__ import annotations

import libcst as cst

from .code import File, Missing, Read

PPO_FILE = "rsl_rl/algorithms/ppo.py"
ACTOR_CRITIC_FILE = "rsl_rl/modules/actor_critic.py"
NORMALIZATION_FILE = "rsl_rl/networks/normalization.py"
RUNNER_FILE = "rsl_rl/runners/on_policy_runner.py"
MLP_FILE = "rsl_rl/networks/mlp.py"


class Library:
    """The files of one rsl_rl commit the readers ask about, each parsed once."""

    def __init__(self, snapshot) -> None:
        self.snapshot = snapshot
        self.ppo = File(snapshot, PPO_FILE)
        self.actor_critic = File(snapshot, ACTOR_CRITIC_FILE)
        self.normalization = File(snapshot, NORMALIZATION_FILE)
        self.runner = File(snapshot, RUNNER_FILE)
        self.mlp = File(snapshot, MLP_FILE)

    # -- defaults -----------------------------------------------------------------------
    def ppo_default(self, param: str) -> Read | Missing:
        """``PPO.__init__``'s default for ``param`` (what runs when the config leaves it out)."""
        found = self.ppo.default(self.ppo.method("PPO", "__init__"), param)
        if found is None:
            return self.ppo.missing(f"no default for {param}", "PPO.__init__")
        return Read(found.value, found.lines, f"PPO.__init__ default of {param}")

    def policy_default(self, param: str) -> Read | Missing:
        found = self.actor_critic.default(self.actor_critic.method("ActorCritic", "__init__"), param)
        if found is None:
            return self.actor_critic.missing(f"no default for {param}", "ActorCritic.__init__")
        return Read(found.value, found.lines, f"ActorCritic.__init__ default of {param}")

    # -- returns and advantages -----------------------------------------------------------
    def timeout_bootstrap(self) -> Read | Missing:
        """``if "time_outs" in extras: rewards += gamma * values * time_outs`` in
        ``PPO.process_env_step``: a time-out step's reward gets γ·V(s_t)."""
        method = self.ppo.method("PPO", "process_env_step")
        test = self.ppo.find(method, (cst.If,), '"time_outs"in')
        bump = self.ppo.find(test, (cst.AugAssign,), "rewards+=", "self.gamma", "values")
        if test is None or bump is None:
            return self.ppo.missing("no `rewards += gamma * values * time_outs` under `if \"time_outs\" in extras`",
                                    "PPO.process_env_step")
        return Read("bootstrap_current_state", (self.ppo.at(test.test), self.ppo.at(bump)),
                    "discount x V(s_t) added to the reward of a step whose extras[\"time_outs\"] is set")

    def gae(self) -> Read | Missing:
        """GAE in ``PPO.compute_returns`` (cut at ``dones``), which the runner calls once per
        iteration, after the rollout and before ``update()``: advantages are per update."""
        method = self.ppo.method("PPO", "compute_returns")
        delta = self.ppo.find(method, (cst.Assign,), "delta=", "gamma", "next_values")
        call = self.runner.find(self.runner.method("OnPolicyRunner", "learn"), (cst.Call,), "compute_returns(")
        update = self.runner.find(self.runner.method("OnPolicyRunner", "learn"), (cst.Call,), ".update(")
        if delta is None:
            return self.ppo.missing("no TD error `delta = ... gamma * next_values ...`", "PPO.compute_returns")
        if call is None or update is None:
            return self.runner.missing("no compute_returns()/update() calls", "OnPolicyRunner.learn")
        return Read("per_update", (self.ppo.at(delta), self.runner.at(call), self.runner.at(update)),
                    "compute_returns() once per iteration, before update()'s epochs")

    def advantage_form(self) -> Read | Missing:
        """The advantage the policy loss uses: ``advantages = returns - values`` with ``returns =
        advantage + values`` of the GAE recursion in ``PPO.compute_returns``: plain GAE."""
        method = self.ppo.method("PPO", "compute_returns")
        recursion = self.ppo.find(method, (cst.Assign,), "advantage=delta+", "self.gamma*self.lam*advantage")
        advantages = self.ppo.find(method, (cst.Assign,), ".advantages=", ".returns-", ".values")
        if recursion is None or advantages is None:
            return self.ppo.missing("no GAE recursion `advantage = delta + ... gamma * lam * advantage` and "
                                    "`advantages = returns - values`", "PPO.compute_returns")
        return Read("gae", (self.ppo.at(recursion), self.ppo.at(advantages)),
                    "GAE: advantages = returns - values, returns from the lambda-recursion")

    def advantage_normalization(self) -> Read | Missing:
        """``normalize_advantage_per_mini_batch``: False normalizes once over the batch in
        ``compute_returns``, True each minibatch in ``update``."""
        returns = self.ppo.find(self.ppo.method("PPO", "compute_returns"), (cst.If,),
                                "notself.normalize_advantage_per_mini_batch", ".std()")
        minibatch = self.ppo.find(self.ppo.method("PPO", "update"), (cst.If,),
                                  "self.normalize_advantage_per_mini_batch", ".std()")
        if returns is None or minibatch is None:
            return self.ppo.missing("no advantage normalization under normalize_advantage_per_mini_batch",
                                    "PPO.compute_returns/update")
        return Read(None, (self.ppo.at(returns.test), self.ppo.at(minibatch.test)))

    # -- losses --------------------------------------------------------------------------
    def loss(self) -> Read | Missing:
        """``loss = surrogate_loss + self.value_loss_coef * value_loss - self.entropy_coef * entropy``."""
        node = self.ppo.find(self.ppo.method("PPO", "update"), (cst.Assign,),
                             "loss=", "self.value_loss_coef*value_loss", "self.entropy_coef*entropy")
        if node is None:
            return self.ppo.missing("no `loss = ... + self.value_loss_coef * value_loss - self.entropy_coef * ...`",
                                    "PPO.update")
        return Read(self.ppo.code(node), (self.ppo.at(node),))

    def value_loss(self) -> Read | Missing:
        """The squared error of the value (``.pow(2).mean()``), clipped around the old value
        by ``clip_param`` under ``use_clipped_value_loss``."""
        method = self.ppo.method("PPO", "update")
        test = self.ppo.find(method, (cst.If,), "self.use_clipped_value_loss", "clamp(", "self.clip_param")
        squared = self.ppo.find(method, (cst.Assign,), "value_loss=", ".pow(2).mean()")
        if test is None or squared is None:
            return self.ppo.missing("no squared value loss clipped by clip_param under use_clipped_value_loss",
                                    "PPO.update")
        return Read("mse", (self.ppo.at(test.test), self.ppo.at(squared)))

    def adaptive_kl(self) -> Read | Missing:
        """``if self.desired_kl is not None and self.schedule == "adaptive"``: the learning
        rate moves with the measured KL; any other schedule keeps it fixed."""
        node = self.ppo.find(self.ppo.method("PPO", "update"), (cst.If,), 'self.schedule=="adaptive"')
        if node is None:
            return self.ppo.missing('no `self.schedule == "adaptive"` branch', "PPO.update")
        return Read("adaptive", (self.ppo.at(node.test),))

    def optimizer(self) -> Read | Missing:
        """``optim.Adam(self.policy.parameters(), lr=...)``: one optimizer over actor and critic;
        ``eps`` is torch's default (1e-8) unless passed."""
        call = self.ppo.find(self.ppo.method("PPO", "__init__"), (cst.Call,), "Adam(self.policy.parameters()")
        if call is None:
            return self.ppo.missing("no Adam(self.policy.parameters(), ...)", "PPO.__init__")
        eps = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "eps"), None)
        return Read(eps, (self.ppo.at(call),))

    def grad_clip(self) -> Read | Missing:
        """One ``clip_grad_norm_`` over the policy's parameters (3.x: actor and critic together),
        or one over the actor's and one over the critic's (4.0+: each network its own norm)."""
        method = self.ppo.method("PPO", "update")
        call = self.ppo.find(method, (cst.Call,), "clip_grad_norm_(self.policy.parameters()", "self.max_grad_norm")
        if call is not None:
            return Read("global", (self.ppo.at(call),), "one clip over the actor's and critic's gradients together")
        actor = self.ppo.find(method, (cst.Call,), "clip_grad_norm_(self.actor.parameters()", "self.max_grad_norm")
        critic = self.ppo.find(method, (cst.Call,), "clip_grad_norm_(self.critic.parameters()", "self.max_grad_norm")
        if actor is not None and critic is not None:
            return Read("per_network", (self.ppo.at(actor), self.ppo.at(critic)),
                        "the actor's and the critic's gradients clipped each to its own norm")
        return self.ppo.missing("no clip_grad_norm_ of self.policy's, or of self.actor's and self.critic's, "
                                "parameters by self.max_grad_norm", "PPO.update")

    # -- policy ---------------------------------------------------------------------------
    def distribution(self) -> Read | Missing:
        """``Normal(mean, std)`` in ``ActorCritic._update_distribution``."""
        node = self.actor_critic.find(self.actor_critic.method("ActorCritic", "_update_distribution"),
                                      (cst.Call,), "Normal(mean,std)")
        if node is None:
            return self.actor_critic.missing("no Normal(mean, std)", "ActorCritic._update_distribution")
        return Read("normal", (self.actor_critic.at(node),), "torch Normal, no squashing in the policy")

    def entropy(self) -> Read | Missing:
        prop = self.actor_critic.method("ActorCritic", "entropy")
        node = self.actor_critic.find(prop, (cst.Call,), "self.distribution.entropy()")
        if node is None:
            return self.actor_critic.missing("no self.distribution.entropy()", "ActorCritic.entropy")
        return Read("analytic", (self.actor_critic.at(node),), "the Normal's closed-form entropy")

    def std_parameter(self) -> Read | Missing:
        """``self.std = nn.Parameter(init_noise_std * ...)`` under ``noise_std_type == "scalar"``."""
        init = self.actor_critic.method("ActorCritic", "__init__")
        node = self.actor_critic.find(init, (cst.Assign,), "self.std=", "Parameter(", "init_noise_std")
        if node is None:
            return self.actor_critic.missing("no self.std = nn.Parameter(init_noise_std * ...)",
                                             "ActorCritic.__init__")
        return Read("scalar", (self.actor_critic.at(node),))

    def init_weights_called(self) -> bool:
        """Whether ActorCritic calls MLP.init_weights (else nn.Linear keeps torch's own init)."""
        init = self.actor_critic.method("ActorCritic", "__init__")
        return self.actor_critic.find(init, (cst.Call,), "init_weights(") is not None

    def linear_layers(self) -> Read | Missing:
        node = self.mlp.find(self.mlp.method("MLP", "__init__"), (cst.Call,), "nn.Linear(")
        if node is None:
            return self.mlp.missing("no nn.Linear layers", "MLP.__init__")
        return Read("kaiming_uniform", (self.mlp.at(node),),
                    "nn.Linear's own init (kaiming_uniform, a=sqrt(5)); ActorCritic does not call init_weights")

    # -- observations ---------------------------------------------------------------------
    def normalizer(self) -> Read | Missing:
        """``EmpiricalNormalization``: ``(x - mean) / (std + eps)``, no clip; running mean and
        variance merged batch by batch."""
        init = self.normalization.method("EmpiricalNormalization", "__init__")
        eps = self.normalization.default(init, "eps")
        forward = self.normalization.find(self.normalization.method("EmpiricalNormalization", "forward"),
                                          (cst.Return,), "self._std+self.eps")
        if eps is None or forward is None:
            return self.normalization.missing("no eps default or `(x - mean) / (std + eps)`",
                                              "EmpiricalNormalization")
        clipped = "clamp(" in self.normalization.code(forward) or "clip(" in self.normalization.code(forward)
        return Read((eps.value, clipped), eps.lines + (self.normalization.at(forward),))

    def normalizer_updates(self) -> Read | Missing:
        """``self.policy.update_normalization(obs)`` in ``PPO.process_env_step``: every env step."""
        node = self.ppo.find(self.ppo.method("PPO", "process_env_step"), (cst.Call,), "update_normalization(")
        if node is None:
            return self.ppo.missing("no update_normalization(obs)", "PPO.process_env_step")
        return Read("per_env_step", (self.ppo.at(node),), "statistics updated with each step's observations")

    def empirical_normalization(self) -> Read | Missing:
        """The runner turns the deprecated ``empirical_normalization`` into the policy's
        ``actor_obs_normalization``/``critic_obs_normalization``."""
        node = self.runner.find(self.runner.module.module if self.runner.module else None, (cst.Assign,),
                                'policy_cfg["actor_obs_normalization"]=', 'self.cfg["empirical_normalization"]')
        if node is None:
            return self.runner.missing("no policy_cfg[\"actor_obs_normalization\"] = cfg[\"empirical_normalization\"]",
                                       "OnPolicyRunner")
        return Read(None, (self.runner.at(node),))

    def rollout(self) -> Read | Missing:
        """``for _ in range(self.cfg["num_steps_per_env"])`` in ``OnPolicyRunner.learn``: one
        unroll of every env per iteration."""
        node = self.runner.find(self.runner.method("OnPolicyRunner", "learn"), (cst.For,),
                                'range(self.cfg["num_steps_per_env"])')
        if node is None:
            return self.runner.missing('no `for _ in range(self.cfg["num_steps_per_env"])`', "OnPolicyRunner.learn")
        return Read(1, (self.runner.at(node),), "one unroll of num_steps_per_env steps per iteration")
