"""The stand_in arm without Brax: its settings in the plan, its training loop, and the
equivalence test (TOST) that decides whether its scores are Brax's. No jax; fast."""

from __future__ import annotations

import numpy as np
import pytest

from test_verify_plan import BRAX_VALUES, SLM_VALUES, extraction

from brax_diff.facts.vocabulary import KEYS
from brax_diff.verify import build_plan
from brax_diff.verify.equivalence import equivalence_summary, tost
from brax_diff.verify.settings import BRAX_SEMANTICS, SEMANTICS, TrainerSettings, settings_from_facts

BRAX_WITH_SEMANTICS = dict(BRAX_VALUES, gae_recompute="per_minibatch", advantage_form="vtrace_pg",
                           obs_norm_update="per_batch_before_sgd",
                           entropy_estimator="sampled_squashed", grad_clip_scope=None,
                           truncation="mask_bootstrap_last_state", value_target_normalization=False)
SLM_WITH_SEMANTICS = dict(SLM_VALUES, gae_recompute="per_update", obs_norm_update="per_env_step",
                          entropy_estimator="analytic", grad_clip_scope="per_network")


def plan(arms=("gap", "stand_in"), engine="single", brax_values=BRAX_WITH_SEMANTICS):
    return build_plan(extraction("brax", brax_values), extraction("slm", SLM_WITH_SEMANTICS), envs=["CartpoleBalance"],
                      seeds=2, budget=1600, arms=arms, engine=engine)


def test_stand_in_runs_brax_values_and_brax_semantics_and_no_other_arm_moves_a_semantic():
    built = plan()
    runs = {r.arm: r for r in built.runs if r.seed == 0}
    assert list(runs) == ["baseline", "all_fixes", "reference", "stand_in"]
    stand_in = TrainerSettings.from_json(runs["stand_in"].settings)
    assert {k: getattr(stand_in, k) for k in BRAX_SEMANTICS} == BRAX_SEMANTICS
    assert stand_in.advantage_form == "vtrace_pg" and stand_in.value_target_normalization is False
    assert (stand_in.clip_epsilon, stand_in.unrolls_per_update, stand_in.value_loss_coef) == (0.3, 2, 0.25)
    for arm in ("baseline", "all_fixes"):
        settings = TrainerSettings.from_json(runs[arm].settings)
        assert {k: getattr(settings, k) for k in SEMANTICS} == {**{k: v[0] for k, v in SEMANTICS.items()},
                                                                "entropy_estimator": None}, arm
    assert built.to_json()["equivalence_margin"] == 100.0
    assert "equivalence_margin" not in plan(arms=("gap",)).to_json()
    # the seed-batched engine has SLM-Lab's semantics only: stand_in trains on the single one
    batched = {r.arm: r.engine for r in plan(engine="batched").runs}
    assert batched["stand_in"] == "single" and batched["baseline"] != "single"


def test_the_trainer_names_each_semantic_as_the_vocabulary_does():
    """The plan moves an extracted value straight into a setting: a trainer spelling the
    vocabulary lacks makes the stand_in refuse Brax's own facts (it did, for advantage_form)."""
    for name, values in SEMANTICS.items():
        assert set(values) <= set(KEYS[name].choices), name


def test_a_semantic_fact_is_applied_only_when_asked():
    values = dict(BRAX_WITH_SEMANTICS, num_envs=16)
    assert settings_from_facts(values)[0].gae_recompute == "per_update"
    assert settings_from_facts(values, semantics=True)[0].gae_recompute == "per_minibatch"


def test_per_minibatch_needs_whole_unrolls_and_brax_value_loss():
    with pytest.raises(Exception, match="whole unrolls"):
        TrainerSettings(num_envs=4, unroll_length=10, minibatch_transitions=8, gae_recompute="per_minibatch",
                        advantage_form="vtrace_pg", value_target_normalization=False)
    with pytest.raises(Exception, match="no value target normalization"):
        TrainerSettings(num_envs=4, unroll_length=10, minibatch_transitions=20, gae_recompute="per_minibatch")
    with pytest.raises(Exception, match="needs gae_recompute per_minibatch"):
        TrainerSettings(advantage_form="vtrace_pg")


class _WalkEnv:
    """Observations that drift with the action; reward = action; truncation every 7 steps."""

    num_envs, obs_size, action_size, episode_length, action_repeat = 3, 2, 1, 7, 1

    def __init__(self):
        import torch

        self.torch, self.t = torch, 0
        self.state = torch.zeros(3, 2)

    def reset(self, seed):
        self.state = self.torch.arange(6, dtype=self.torch.float32).reshape(3, 2)
        return self.state.clone()

    def step(self, action):
        torch = self.torch
        self.t += 1
        self.state = self.state + torch.cat([action, -action], dim=1) + 1.0
        truncated = torch.full((3,), float(self.t % 7 == 0))
        return self.state.clone(), action[:, 0], torch.zeros(3), truncated


def stand_in_settings(**changes):
    values = dict(num_envs=3, unroll_length=5, unrolls_per_update=2, minibatch_transitions=10, epochs_per_update=2,
                  policy_hidden_layers=(8,), value_hidden_layers=(8,), action_distribution="tanh_normal",
                  std_transform="softplus", std_min=0.001, std_max=None, lr_schedule="constant",
                  value_target_normalization=False, **BRAX_SEMANTICS)
    values.update(changes)
    return TrainerSettings(**values)


def test_stand_in_trains_updates_obs_statistics_once_per_batch_and_is_deterministic():
    torch = pytest.importorskip("torch")
    from brax_diff.verify import ppo_torch

    settings = stand_in_settings()
    counts = []
    log = ppo_torch.train(_WalkEnv(), settings, budget=60, seed=3,
                          evaluate=lambda agent: counts.append(agent.obs_stats.count) or 0.0, eval_every=30)
    # every batch is 2 unrolls x 5 steps x 3 envs = 30 observations, folded in once before its SGD
    assert counts == [0, 30, 60] and log.updates == 2
    again = ppo_torch.train(_WalkEnv(), settings, budget=60, seed=3)
    assert again.reward_per_step == log.reward_per_step
    agent = ppo_torch.PPO(settings, 2, 1, 1.0)
    assert len(agent.optimizers) == 1  # global clip scope: one Adam over both networks
    assert len(agent.optimizers[0].param_groups[0]["params"]) == 8
    per_env = ppo_torch.train(_WalkEnv(), stand_in_settings(obs_norm_update="per_env_step"), budget=60, seed=3,
                              evaluate=lambda agent: counts.append(agent.obs_stats.count) or 0.0, eval_every=30)
    assert counts[3:] == [3, 33, 63] and per_env.reward_per_step != log.reward_per_step
    assert torch.isfinite(torch.tensor(log.reward_per_step)).all()


def test_sequences_keep_brax_order_and_the_bootstrap_observation():
    pytest.importorskip("torch")
    from brax_diff.verify import ppo_torch

    settings = stand_in_settings()
    agent, env = ppo_torch.PPO(settings, 2, 1, 1.0), _WalkEnv()
    obs = agent.observe(env.reset(0))
    batch, last = agent.collect(env, obs)
    assert isinstance(batch, ppo_torch.Sequences)
    assert tuple(batch.obs.shape) == (5, 6, 2) and tuple(batch.bootstrap_obs.shape) == (6, 2)
    # sequence u x num_envs + e: unroll 1 of env 0 starts where unroll 0's bootstrap observation is
    assert bool((batch.obs[0, 3] == batch.bootstrap_obs[0]).all()) and bool((batch.bootstrap_obs[3:] == last).all())
    assert float(batch.truncated[1, 3]) == 1.0  # step 7 is the second step of unroll 1


# -- equivalence (TOST) -------------------------------------------------------------------------------
def test_tost_shows_equivalence_only_inside_the_margin():
    rng = np.random.default_rng(0)
    reference = rng.normal(500, 30, 10)
    same = tost(reference + rng.normal(0, 5, 10), reference, margin=100)
    assert same["equivalent"] is True and same["p_lower"] < 0.05 and same["p_upper"] < 0.05
    far = tost(reference + 300, reference, margin=100)
    assert far["equivalent"] is False and far["p_upper"] > 0.5 and far["difference"] == pytest.approx(300)
    assert tost([1.0, 2.0], [1.0, 2.0])["equivalent"] is None  # C(4, 2) = 6 splits: p >= 1/6
    assert "no split is rare enough" in tost([1.0, 2.0], [1.0, 2.0])["reason"]


def test_tost_exact_p_value_on_a_hand_example():
    # x + margin = [11, 12, 13] vs y = [0, 1, 2]: the observed split is the most extreme of C(6, 3) = 20
    out = tost([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], margin=10.0, alpha=0.1)
    assert out["p_lower"] == pytest.approx(1 / 20)
    # upper: y = [0, 1, 2] vs x - margin = [-9, -8, -7]: also the most extreme split
    assert out["p_upper"] == pytest.approx(1 / 20) and out["equivalent"] is True
    paired = tost([1.0, 2.0, 3.0, 4.0, 5.0], [1.5, 1.5, 3.5, 3.5, 5.0], margin=10.0, paired=True)
    assert paired["p_lower"] == pytest.approx(1 / 32) and paired["equivalent"] is True


def test_a_sampled_tost_p_value_is_never_zero():
    """20 seeds a side is C(40, 20) splits, past exact enumeration: the p of a sample of splits
    counts the observed one, (hits + 1) / (samples + 1), never 0 (the replication's first
    verify.json printed 'p 0')."""
    from brax_diff.verify.equivalence import SAMPLES

    reference = np.linspace(300.0, 500.0, 20)
    out = tost(reference + 15.0, reference, margin=100.0)
    assert out["equivalent"] is True and out["p_lower"] == pytest.approx(1 / (SAMPLES + 1), abs=1e-6)
    paired = tost(reference + 15.0 + np.linspace(-1, 1, 20), reference, margin=100.0, paired=True)
    assert paired["p_lower"] == pytest.approx(1 / (SAMPLES + 1), abs=1e-6) and paired["p_upper"] > 0


@pytest.mark.parametrize("shape", ["normal", "bimodal"])
def test_tost_false_equivalence_rate_at_the_margin_is_at_most_alpha(shape):
    """At a true difference of exactly the margin (the hardest null), 'equivalent' comes out at
    most alpha of the time, on normal and on solve-or-plateau (bimodal) scores, 8 seeds a side."""
    rng = np.random.default_rng(1)
    margin, trials, hits = 100.0, 150, 0

    def scores(n):
        if shape == "normal":
            return rng.normal(400, 150, n)
        solved = rng.random(n) < 0.2
        return np.where(solved, rng.normal(980, 10, n), rng.normal(300, 90, n))

    for _ in range(trials):
        hits += bool(tost(scores(8) + margin, scores(8), margin=margin)["equivalent"])
    assert hits / trials <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / trials)


def test_equivalence_summary_is_true_only_when_every_env_is():
    rng = np.random.default_rng(2)
    ref = rng.normal(500, 10, 6)
    summary = equivalence_summary({"A": (list(ref + 1), list(ref)), "B": (list(ref + 400), list(ref))})
    assert summary["envs"]["A"]["equivalent"] is True and summary["envs"]["B"]["equivalent"] is False
    assert summary["equivalent"] is False and summary["margin"] == 100.0
    assert equivalence_summary({"A": ([1.0], [1.0])})["equivalent"] is None


def _recorded(built, scores):
    from brax_diff.verify.cache import OK, RunResult

    return [RunResult(spec, OK, spec.scoring.checkpoints, [0.0, scores[spec.arm][spec.seed]],
                      scores[spec.arm][spec.seed], spec.budget, 10.0, score_kind=spec.scoring.kind)
            for spec in built.runs]


def test_the_gap_is_measured_against_the_stand_in_too_in_a_family_of_its_own():
    """Issue 23: the gap against the reference and against the stand-in. Each stand-in row reads
    "<arm> vs stand_in", the way the rows against the reference read; issue 37: both families
    are one list of conclusions, held under one Holm (3 gap + 2 stand_in comparisons here)."""
    from brax_diff.verify.runner import equivalence, gap_summary, verdicts

    built, scores = _gap_and_stand_in_at_ten_seeds()
    runs = _recorded(built, scores)
    decided = verdicts(built, runs)
    family = {v["name"]: v for v in decided if v["family"] == "stand_in"}
    assert sorted(family) == ["stand_in_vs_all_fixes", "stand_in_vs_baseline"]  # no spec_fixes arm planned
    assert {v["tests_in_family"] for v in family.values()} == {5}
    assert family["stand_in_vs_baseline"]["delta"] == pytest.approx(770.0 - 220.0)
    assert family["stand_in_vs_baseline"]["verdict"] == "supported"
    gap = gap_summary(built, runs, decided)
    behind = gap["baseline_vs_stand_in"]
    assert (behind["arm"], behind["vs"], behind["verdict"]) == ("baseline", "stand_in", "not_supported")
    assert behind["delta"] == pytest.approx(220.0 - 770.0) and behind["ci"][1] < 0
    assert gap["all_fixes_vs_stand_in"]["delta"] == pytest.approx(658.0 - 770.0)
    assert {v["tests_in_family"] for v in decided if v["family"] == "gap"} == {5}
    same = equivalence(built, runs)
    assert same["envs"]["CartpoleBalance"]["equivalent"] is True and same["equivalent"] is True
    paired = same["envs"]["CartpoleBalance"]["paired_difference"]
    # per seed stand_in - reference: +10, -10, +15, -10, -5 twice: mean 0, resolved as no difference
    assert paired["seeds"] == 10 and paired["difference"] == pytest.approx(0.0) and paired["lower_in"] == 6
    assert paired["p"] == pytest.approx(1.0) and paired["ci"][0] < 0 < paired["ci"][1]


def test_a_difference_inside_the_margin_is_still_said_to_be_a_difference():
    """TOST answers "within the margin"; the paired test answers "zero". A stand-in 40 lower on
    every seed is equivalent within +-100 and still different, and the text says both."""
    from brax_diff.verify.equivalence import paired_difference
    from brax_diff.verify.runner import _equivalence

    reference = [300.0, 420.0, 380.0, 450.0, 350.0, 410.0, 330.0, 470.0, 390.0, 360.0]
    stand_in = [r - 40.0 + (3.0 if i % 2 else -3.0) for i, r in enumerate(reference)]
    entry = equivalence_summary({"A": (stand_in, reference)}, paired={"A": (stand_in, reference)})["envs"]["A"]
    assert entry["equivalent"] is True
    paired = entry["paired_difference"]
    assert paired["difference"] == pytest.approx(-40.0) and paired["lower_in"] == 10
    assert paired["p"] == pytest.approx(2 / 2**10, abs=1e-6) and paired["ci"][1] < 0
    line = _equivalence(entry)
    assert "equivalent;" in line and "stand_in lower in 10: different" in line
    # at 5 seeds the smallest two-sided p is 1/16: said, never a p that cannot occur
    few = paired_difference(stand_in[:5], reference[:5])
    assert few["p"] is None and few["ci"] is None and "cannot reject at 0.05" in few["reason"]


def _gap_and_stand_in_at_ten_seeds():
    """A plan of the gap and stand_in arms at 10 seeds, with scores where all_fixes closes most
    of the gap and the stand-in sits on the reference."""
    built = build_plan(extraction("brax", BRAX_WITH_SEMANTICS), extraction("slm", SLM_WITH_SEMANTICS),
                       envs=["CartpoleBalance"], seeds=10, budget=1600, arms=("gap", "stand_in"))
    scores = {"baseline": [210.0, 230.0, 190.0, 250.0, 220.0] * 2,
              "all_fixes": [640.0, 700.0, 610.0, 680.0, 660.0] * 2,
              "reference": [760.0, 800.0, 720.0, 780.0, 790.0] * 2,
              "stand_in": [770.0, 790.0, 735.0, 770.0, 785.0] * 2}
    return built, scores


def test_the_equivalence_and_the_paired_difference_join_the_list_of_conclusions_holm():
    """Issue 37: every claim the conclusions list is under one Holm: the stand-in's
    equivalence (one intersection-union test) and its paired difference per environment are
    two more tests beside the 5 comparisons, and "equivalent" holds only at the level it gets."""
    from brax_diff.verify.runner import judge

    built, scores = _gap_and_stand_in_at_ten_seeds()
    decided, same = judge(built, _recorded(built, scores))
    assert {v["tests_in_family"] for v in decided} == {7}
    test = same["envs"]["CartpoleBalance"]
    assert same["p"] == max(test["p_lower"], test["p_upper"])
    assert 0.05 / 7 <= same["level"] <= 0.05 + 1e-12 and same["equivalent"] is (same["p"] <= same["level"])
    assert 0.05 / 7 <= test["paired_difference"]["level"] <= 0.05 + 1e-12  # stats.ALPHA is 1 - 0.95
