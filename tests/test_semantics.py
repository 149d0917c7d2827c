"""What the PPO code does, read on both sides from the code that acts: truncation, when GAE is
computed, what one gradient clip covers, when the observation statistics move, how the entropy is
estimated. Hand-written fixture repositories, each variant one commit."""

from __future__ import annotations

import pytest

import brax_fixtures as bfx
import slm_fixtures as sfx
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.extractors.slm.extractor import SlmExtractor
from brax_diff.sources.repository import Repository
from gitfixture import make_repo

SEMANTIC_KEYS = ("truncation", "gae_recompute", "grad_clip_scope", "obs_norm_update", "entropy_estimator")

# -- Brax variants of the newer fixture shape -------------------------------------------------
TRAIN_TIMEOUT = bfx.TRAIN_NEW.replace("    bootstrap_on_timeout: bool = False,\n",
                                      "    bootstrap_on_timeout: bool = True,\n")
UPDATE_LINE = "    normalizer_params = running_statistics.update(normalizer_params, data.observation)\n"
SGD_SCAN = ("    carry, metrics = jax.lax.scan(\n"
            "        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),\n"
            "        carry, (), length=num_updates_per_batch)\n")
TRAIN_UPDATE_AFTER = bfx.TRAIN_NEW.replace(UPDATE_LINE, "").replace(SGD_SCAN, SGD_SCAN + UPDATE_LINE)
LOSSES_UNMASKED = bfx.LOSSES_NEW.replace("  advantages = out * truncation_mask\n", "  advantages = out\n")
# Upstream's advantage (brax/training/agents/ppo/losses.py::compute_gae): one reward plus the next
# step's lambda-return, not the GAE sum; and a shape that is neither.
GAE_RETURN = "  advantages = out * truncation_mask\n  return out + values, advantages\n"
LOSSES_VTRACE = bfx.LOSSES_NEW.replace(GAE_RETURN, (
    "  vs = out + values\n"
    "  vs_t_plus_1 = jnp.concatenate([vs[1:], bootstrap_value[None]], axis=0)\n"
    "  advantages = (rewards + discount * (1 - termination) * vs_t_plus_1 - values) * truncation_mask\n"
    "  return vs, advantages\n"))
LOSSES_TD0 = bfx.LOSSES_NEW.replace(GAE_RETURN, "  advantages = deltas * truncation_mask\n"
                                                "  return out + values, advantages\n")
assert bfx.LOSSES_NEW != LOSSES_VTRACE and bfx.LOSSES_NEW != LOSSES_TD0
BRAX = {"old": 0, "new": 1, "timeout": 2, "update_after": 3, "unmasked": 4, "vtrace": 5, "td0": 6}

# -- SLM-Lab variants ------------------------------------------------------------------------------
ACTOR_CRITIC_DONES = sfx.ACTOR_CRITIC.replace('batch["terminateds"]', 'batch["dones"]')
GAE_CALL = '''            with torch.no_grad():
                v_preds = self.calc_v(batch["states"])
                batch["advs"], batch["v_targets"] = self.calc_gae_advs_v_targets(batch, v_preds)
'''
PPO_GAE_PER_MINIBATCH = sfx.PPO.replace(GAE_CALL, "").replace(
    '''                    pdparams, v_preds = self.calc_pdparam_v(minibatch)
''', '''                    pdparams, v_preds = self.calc_pdparam_v(minibatch)
                    minibatch["advs"], minibatch["v_targets"] = self.calc_gae_advs_v_targets(minibatch, v_preds)
''')
PLAYGROUND_NO_RESET = sfx.PLAYGROUND.replace("pg_wrapper.wrap_for_brax_training(", "pg_wrapper.wrap_plain(")
SPEC_SHARED = sfx.SPEC + '''
ppo_fx_shared:
  agent:
    name: PPO
    algorithm:
      <<: *algorithm
      time_horizon: 16
      training_epoch: 5
    memory: {name: OnPolicyBatchReplay}
    net:
      <<: *net
      shared: true
  env:
    <<: *env
    num_envs: 8
  meta: {max_session: 1}
'''
# A recursion without lambda (discounted sums of TD errors, gamma only): not GAE as the extractor reads it.
MATH_UTIL_NO_LAMBDA = sfx.MATH_UTIL.replace("deltas[t] + gamma * lam * not_terminateds[t] * future",
                                            "deltas[t] + gamma * not_terminateds[t] * future")
assert MATH_UTIL_NO_LAMBDA != sfx.MATH_UTIL
# SLM-Lab before e6aca181 read the time limit as an attribute of Playground's State, which has none
# (Brax's EpisodeWrapper writes it to state.info["truncation"]): getattr's default, always.
PLAYGROUND_GETATTR = sfx.PLAYGROUND.replace('truncation = self._state.info.get("truncation", None)',
                                            'truncation = getattr(self._state, "truncation", None)')
# A step that hands on done or truncated as terminated: a shape the reader does not know.
PLAYGROUND_OR = sfx.PLAYGROUND.replace("terminated = dones & ~truncated", "terminated = np.logical_or(dones, truncated)")
assert PLAYGROUND_GETATTR != sfx.PLAYGROUND and PLAYGROUND_OR != sfx.PLAYGROUND
SLM = {"base": 0, "dones": 1, "per_minibatch": 2, "no_reset": 3, "no_lambda": 4, "getattr": 5, "or": 6}
ALGORITHM_DIR = "slm_lab/agent/algorithm"


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("semantics")
    brax = make_repo(root / "brax", [bfx.BRAX_OLD, bfx.BRAX_NEW, {bfx.TRAIN: TRAIN_TIMEOUT},
                                     {bfx.TRAIN: TRAIN_UPDATE_AFTER},
                                     {bfx.TRAIN: bfx.TRAIN_NEW, bfx.LOSSES: LOSSES_UNMASKED},
                                     {bfx.LOSSES: LOSSES_VTRACE}, {bfx.LOSSES: LOSSES_TD0}])
    playground = make_repo(root / "playground", [bfx.PLAYGROUND])
    slm = make_repo(root / "slm", [
        {**sfx.repo_files(), sfx.SPEC_PATH: SPEC_SHARED},
        {f"{ALGORITHM_DIR}/actor_critic.py": ACTOR_CRITIC_DONES},
        {f"{ALGORITHM_DIR}/actor_critic.py": sfx.ACTOR_CRITIC, f"{ALGORITHM_DIR}/ppo.py": PPO_GAE_PER_MINIBATCH},
        {f"{ALGORITHM_DIR}/ppo.py": sfx.PPO, "slm_lab/env/playground.py": PLAYGROUND_NO_RESET},
        {"slm_lab/env/playground.py": sfx.PLAYGROUND, "slm_lab/lib/math_util.py": MATH_UTIL_NO_LAMBDA},
        {"slm_lab/env/playground.py": PLAYGROUND_GETATTR, "slm_lab/lib/math_util.py": sfx.MATH_UTIL},
        {"slm_lab/env/playground.py": PLAYGROUND_OR}])
    return {"root": root, "brax": brax, "playground": playground, "slm": slm}


def brax_extractor(repos, variant: str) -> BraxExtractor:
    return BraxExtractor(Repository(repos["root"] / "brax", "brax").resolve(repos["brax"][BRAX[variant]]),
                         Repository(repos["root"] / "playground", "playground").resolve(repos["playground"][0]))


def slm_variant(repos, commit: str, variant: str = "ppo_fx"):
    snapshot = Repository(repos["root"] / "slm", "slm").resolve(repos["slm"][SLM[commit]])
    return SlmExtractor(snapshot, sets={"max_frame": "1e6"}).variant(variant)


def lines(fact, path: str) -> set[int]:
    return {p.line for p in fact.provenance if p.path == path}


def finding(extraction, key: str):
    found = [f for f in extraction.findings if f.key == key]
    assert len(found) == 1, found
    return found[0]


# -- Brax --------------------------------------------------------------------------------------------
def test_brax_reads_each_semantic_from_the_code_that_acts(repos):
    dm = brax_extractor(repos, "new").family("dm_control")  # normalize_observations=True, max_grad_norm 0.7
    assert {k: dm.value(k) for k in SEMANTIC_KEYS} == {
        "truncation": "mask_bootstrap_last_state", "gae_recompute": "per_minibatch", "grad_clip_scope": "global",
        "obs_norm_update": "per_batch_before_sgd", "entropy_estimator": "sampled_squashed"}
    losses, train, dist = bfx.LOSSES_NEW, bfx.TRAIN_NEW, bfx.DISTRIBUTION_TEXT
    call = bfx.line_of(losses, "vs, advantages = compute_gae(")
    # the mask 1 - truncation, the trace it multiplies (in the scan body), the masked advantages, the call
    assert lines(dm.facts["truncation"], bfx.LOSSES) == {
        bfx.line_of(losses, "truncation_mask = 1 - truncation"), bfx.line_of(losses, "acc = delta + discount"),
        bfx.line_of(losses, "advantages = out * truncation_mask"), call}
    assert lines(dm.facts["gae_recompute"], bfx.LOSSES) == {call}
    assert lines(dm.facts["gae_recompute"], bfx.TRAIN) == {bfx.line_of(train, "carry, metrics = jax.lax.scan(")}
    assert lines(dm.facts["grad_clip_scope"], bfx.TRAIN) == {bfx.line_of(train, "optax.clip_by_global_norm("),
                                                             bfx.line_of(train, "optimizer.init(init_params)")}
    assert lines(dm.facts["obs_norm_update"], bfx.TRAIN) == {bfx.line_of(train, "running_statistics.update("),
                                                             bfx.line_of(train, "carry, metrics = jax.lax.scan(", 2)}
    assert lines(dm.facts["entropy_estimator"], bfx.LOSSES) == {bfx.line_of(losses, "entropy = jnp.mean(")}
    assert lines(dm.facts["entropy_estimator"], bfx.DISTRIBUTION) == {
        bfx.line_of(dist, "def entropy(self, parameters, seed):"),  # the closed form plus, at a sampled action,
        bfx.line_of(dist, "forward_log_det_jacobian(dist"), bfx.line_of(dist, "return 2.0 * (jnp.log(2.0)")}  # tanh's


def test_brax_without_clipping_or_normalization_has_nothing_to_scope(repos):
    old = brax_extractor(repos, "old").defaults()  # no max_grad_norm, normalize_observations=False
    assert (old.value("grad_clip_scope"), old.value("obs_norm_update")) == (None, None)
    assert not old.facts["grad_clip_scope"].is_unknown and not old.facts["obs_norm_update"].is_unknown


def test_brax_bootstrap_on_timeout_bootstraps_from_the_current_state(repos):
    defaults = brax_extractor(repos, "timeout").defaults()
    assert defaults.value("truncation") == "bootstrap_current_state"
    assert lines(defaults.facts["truncation"], bfx.TRAIN) >= {
        bfx.line_of(TRAIN_TIMEOUT, "bootstrap_on_timeout: bool = True"),
        bfx.line_of(TRAIN_TIMEOUT, "reward=data.reward + discounting")}


def test_brax_statistics_updated_after_sgd(repos):
    dm = brax_extractor(repos, "update_after").family("dm_control")
    assert dm.value("obs_norm_update") == "per_batch_after_sgd"
    assert bfx.line_of(TRAIN_UPDATE_AFTER, "running_statistics.update(") in lines(dm.facts["obs_norm_update"],
                                                                                 bfx.TRAIN)


def test_brax_normal_distribution_entropy_is_analytic(repos):
    panda = brax_extractor(repos, "new").env("PandaPickCube")  # distribution_type="normal"
    assert (panda.value("action_distribution"), panda.value("entropy_estimator")) == ("normal", "analytic")


def test_brax_gae_shape_not_understood_is_unknown_with_a_finding(repos):
    defaults = brax_extractor(repos, "unmasked").defaults()
    fact = defaults.facts["truncation"]
    assert fact.value is None and fact.is_unknown
    assert "compute_gae() does not multiply both the advantages and the GAE trace by 1 - truncation" in fact.unknown
    assert finding(defaults, "truncation").kind == "pattern_not_found"
    assert bfx.LOSSES in finding(defaults, "truncation").message


# -- SLM-Lab ------------------------------------------------------------------------------------------
def test_slm_reads_each_semantic_from_the_code_that_acts(repos):
    facts = slm_variant(repos, "base").facts
    assert {k: facts[k].value for k in SEMANTIC_KEYS} == {
        "truncation": "bootstrap_next_obs_across_reset", "gae_recompute": "per_update",
        "grad_clip_scope": "per_network", "obs_norm_update": "per_env_step", "entropy_estimator": "analytic"}

    def at(fact, name: str) -> set[int]:
        return lines(fact, name if "/" in name else f"{ALGORITHM_DIR}/{name}")

    gae_call = sfx.line_of(sfx.ACTOR_CRITIC, "math_util.calc_gaes(")
    assert at(facts["truncation"], "actor_critic.py") == {gae_call}
    assert lines(facts["truncation"], "slm_lab/lib/math_util.py") == {
        sfx.line_of(sfx.MATH_UTIL, "not_terminateds = 1 - terminateds"), sfx.line_of(sfx.MATH_UTIL, "deltas = ")}
    # The auto-reset, and what step hands on as terminated: done with info["truncation"] taken out.
    assert lines(facts["truncation"], "slm_lab/env/playground.py") == {
        sfx.line_of(sfx.PLAYGROUND, "wrap_for_brax_training("), sfx.line_of(sfx.PLAYGROUND, "dones = np.asarray("),
        sfx.line_of(sfx.PLAYGROUND, 'truncation = self._state.info.get("truncation", None)'),
        sfx.line_of(sfx.PLAYGROUND, "if truncation is not None:"),
        sfx.line_of(sfx.PLAYGROUND, "truncated = np.asarray(truncation)"),
        sfx.line_of(sfx.PLAYGROUND, "terminated = dones & ~truncated")}
    assert "done & ~info['truncation'] as terminated" in facts["truncation"].note
    assert not [f for f in slm_variant(repos, "base").findings if f.key == "truncation"]
    assert at(facts["gae_recompute"], "actor_critic.py") == {gae_call}
    assert at(facts["gae_recompute"], "ppo.py") == {sfx.line_of(sfx.PPO, "util.split_minibatch(")}
    assert lines(facts["grad_clip_scope"], "slm_lab/agent/net/base.py") == {
        sfx.line_of(sfx.NET_BASE, "clip_grad_norm_")}
    assert at(facts["grad_clip_scope"], "ppo.py") == {sfx.line_of(sfx.PPO, "self.net.train_step(policy_loss, "),
                                                     sfx.line_of(sfx.PPO, "self.critic_net.train_step(")}
    assert lines(facts["obs_norm_update"], "slm_lab/env/wrappers.py") == {
        sfx.line_of(sfx.WRAPPERS, "self.count = self.count + obs"),
        sfx.line_of(sfx.WRAPPERS, "self.mean = self.mean +")}
    assert at(facts["entropy_estimator"], "ppo.py") == {sfx.line_of(sfx.PPO, "entropy = action_pd.entropy()")}
    assert at(facts["entropy_estimator"], "policy_util.py") == {sfx.line_of(sfx.POLICY_UTIL, "ACTION_PDS = {")}


def test_slm_shared_net_clips_globally_and_no_clip_scopes_nothing(repos):
    shared = slm_variant(repos, "base", "ppo_fx_shared").facts
    assert (shared["shared_network"].value, shared["grad_clip_scope"].value) == (True, "global")
    assert lines(shared["grad_clip_scope"], f"{ALGORITHM_DIR}/ppo.py") == {
        sfx.line_of(sfx.PPO, "self.net.train_step(policy_loss + val_loss")}
    unclipped = slm_variant(repos, "base", "ppo_fx_rs").facts  # clip_grad_val: null
    assert unclipped["grad_clip_scope"].value is None and not unclipped["grad_clip_scope"].is_unknown


def test_slm_gae_on_dones_treats_a_truncation_as_terminal(repos):
    facts = slm_variant(repos, "dones").facts
    assert facts["truncation"].value == "terminal"
    assert lines(facts["truncation"], f"{ALGORITHM_DIR}/actor_critic.py") == {
        sfx.line_of(ACTOR_CRITIC_DONES, "math_util.calc_gaes(")}


def test_slm_time_limit_read_from_an_attribute_playgrounds_state_lacks_is_terminal_with_a_finding(repos):
    extraction = slm_variant(repos, "getattr")
    fact = extraction.facts["truncation"]
    # calc_gaes cuts on terminateds, and step hands on the done flag itself: a time limit is a termination.
    assert fact.value == "terminal"
    assert "hands on the state's done flag as terminated" in fact.note
    getattr_line = sfx.line_of(PLAYGROUND_GETATTR, 'truncation = getattr(self._state, "truncation", None)')
    assert lines(fact, "slm_lab/env/playground.py") == {
        getattr_line, sfx.line_of(PLAYGROUND_GETATTR, "if truncation is not None:"),
        sfx.line_of(PLAYGROUND_GETATTR, "dones = np.asarray(")}
    found = finding(extraction, "truncation")
    assert (found.kind, found.severity) == ("always_default", "IMPORTANT")
    assert [(p.path, p.line) for p in found.provenance] == [("slm_lab/env/playground.py", getattr_line)]
    assert "Playground's State has no attribute 'truncation'" in found.message
    assert "state.info['truncation']" in found.message and "every time limit ends as a termination" in found.message


def test_slm_terminated_of_another_shape_is_unknown_with_a_finding(repos):
    extraction = slm_variant(repos, "or")
    fact = extraction.facts["truncation"]
    assert fact.value is None
    assert "calc_gaes cuts its bootstrap on the terminateds the env's step hands on: PlaygroundVecEnv.step returns " \
           "terminated `numpy.logical_or(" in fact.unknown
    assert "a shape the extractor does not read" in fact.unknown
    assert finding(extraction, "truncation").kind == "pattern_not_found"


def test_slm_gae_inside_the_minibatch_loop_is_unknown_with_a_finding(repos):
    extraction = slm_variant(repos, "per_minibatch")
    fact = extraction.facts["gae_recompute"]
    assert fact.value is None and f"calc_gaes runs inside the minibatch loop of {ALGORITHM_DIR}/ppo.py train()" in \
        fact.unknown
    assert finding(extraction, "gae_recompute").kind == "pattern_not_found"
    assert extraction.facts["truncation"].value == "bootstrap_next_obs_across_reset"  # calc_gaes itself unchanged


def test_slm_without_the_playground_auto_reset_the_next_state_is_unknown(repos):
    extraction = slm_variant(repos, "no_reset")
    fact = extraction.facts["truncation"]
    assert fact.value is None and "depends on the env's auto-reset" in fact.unknown
    assert "wrap_for_brax_training" in finding(extraction, "truncation").message


# -- advantage_form (issue 22 item 1) ---------------------------------------------------------------
def test_brax_advantage_is_a_reward_plus_the_next_lambda_return(repos):
    dm = brax_extractor(repos, "vtrace").family("dm_control")
    assert dm.value("advantage_form") == "vtrace_pg"
    assert dm.value("truncation") == "mask_bootstrap_last_state"  # the mask is still read
    assert lines(dm.facts["advantage_form"], bfx.LOSSES) >= {
        bfx.line_of(LOSSES_VTRACE, "advantages = (rewards + discount"),
        bfx.line_of(LOSSES_VTRACE, "vs, advantages = compute_gae(")}
    assert "vs_{t+1}" in dm.facts["advantage_form"].note


def test_brax_advantage_that_is_the_gae_sum_is_gae(repos):
    for variant in ("new", "unmasked"):
        assert brax_extractor(repos, variant).family("dm_control").value("advantage_form") == "gae"


def test_brax_advantage_of_another_shape_is_unknown_with_a_finding(repos):
    defaults = brax_extractor(repos, "td0").defaults()  # one-step TD errors: neither form
    fact = defaults.facts["advantage_form"]
    assert fact.value is None and "neither the GAE recursion nor a reward plus the next lambda-return" in fact.unknown
    assert finding(defaults, "advantage_form").kind == "pattern_not_found"


def test_slm_advantage_is_gae(repos):
    fact = slm_variant(repos, "base").facts["advantage_form"]
    assert fact.value == "gae"
    assert lines(fact, "slm_lab/lib/math_util.py") >= {sfx.line_of(sfx.MATH_UTIL, "deltas = "),
                                                        sfx.line_of(sfx.MATH_UTIL, "gaes[t] = future = ")}
    assert lines(fact, f"{ALGORITHM_DIR}/actor_critic.py") == {sfx.line_of(sfx.ACTOR_CRITIC, "math_util.calc_gaes(")}


def test_slm_recursion_without_lambda_is_unknown_with_a_finding(repos):
    extraction = slm_variant(repos, "no_lambda")
    fact = extraction.facts["advantage_form"]
    assert fact.value is None and "no backward recursion delta_t + gamma * lam * A_(t+1)" in fact.unknown
    assert finding(extraction, "advantage_form").kind == "pattern_not_found"
    assert extraction.facts["truncation"].value == "bootstrap_next_obs_across_reset"


def test_advantage_form_rule_weighs_the_first_step_factor_against_lambda():
    from brax_diff.compare.pairing import compare
    from brax_diff.facts.model import Extraction, Fact
    from brax_diff.compare.rules import classify, load_rules

    def classified(lam: float):
        brax, slm = Extraction("brax", {}, {}), Extraction("slm", {}, {})
        for x, form in ((brax, "vtrace_pg"), (slm, "gae")):
            x.add(Fact("advantage_form", form, ()))
            x.add(Fact("gae_lambda", lam, ()))
        return {c.key: c for c in classify(compare(brax, slm), load_rules())}["advantage_form"]

    assert (classified(0.95).severity, classified(0.95).rule) == ("MINOR", "BD045")
    assert classified(0.3).severity == "IMPORTANT"
