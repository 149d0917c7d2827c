"""The report's Verification section leads with what a maintainer may conclude and what not
(brax_diff.report.verification.conclusions): the stand-in's standing first, then each
comparison resolved or not with what its seeds could have found, then the scale."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("scipy", reason="the verdicts need the verify extra's statistics")

from verify_fixtures import synthetic_result  # noqa: E402

from brax_diff.report.verification import verification_entries  # noqa: E402
from brax_diff.verify.runner import VerifyResult, gap_summary, verdicts  # noqa: E402


def entries(result=None, runs=None, **extra):
    """The report's model of a verify.json made of ``runs`` (default: the synthetic result's)."""
    result = result or synthetic_result()
    runs = runs if runs is not None else result.results
    decided = verdicts(result.plan, runs)
    data = VerifyResult(result.plan, runs, decided, gap_summary(result.plan, runs, decided), platform={"cpu": "x"})
    return verification_entries({**data.to_json(), **extra}, Path("."), Path("."))


def test_resolved_comparisons_are_what_may_be_concluded_and_no_stand_in_comes_first_among_the_rest():
    said = entries()["conclusions"]
    assert said["may"][0].startswith("SLM-Lab's settings (baseline) vs Brax's trainer (reference): baseline scores "
                                     "lower, by 550 ([") and said["may"][0].endswith(" at 95.0%, 10 paired seeds).")
    assert any(line.startswith("Every expressible fix, trainer-level, code changes included (all_fixes) vs SLM-Lab's "
                               "settings (baseline): all_fixes scores higher, by 438 (") for line in said["may"])
    assert said["may_not"][0].startswith("No stand-in ran (`--arms gap,stand_in` runs it)")
    assert said["may_not"][-1].startswith("What happens at SLM-Lab's own operating point: these runs measure another "
                                          "regime (1,600 env steps a run), in which the arms make baseline 10, "
                                          "all_fixes 10, reference 5 updates.")
    assert "not the published gap" in said["may_not"][-1]


def test_a_stand_in_not_shown_equivalent_is_said_first_with_its_difference():
    equivalence = {"margin": 100.0, "alpha": 0.05, "equivalent": False,
                   "envs": {"CartpoleBalance": {"difference": 143.5, "p_lower": 0.001, "p_upper": 0.71,
                                                "equivalent": False, "n_stand_in": 10, "n_reference": 10}}}
    model = entries(equivalence=equivalence)
    first = model["conclusions"]["may_not"][0]
    assert first.startswith("**The stand-in is not shown to be Brax's trainer**: its scores are not shown within ±100 "
                            "of the reference's on CartpoleBalance (mean stand_in − reference: CartpoleBalance +143.5)")
    assert model["equivalence"]["envs"] == [{"env": "CartpoleBalance", "equivalent": False, "difference": 143.5,
                                             "p_lower": 0.001, "p_upper": 0.71, "n_stand_in": 10,
                                             "n_reference": 10}]
    shown = dict(equivalence, equivalent=True, envs={"CartpoleBalance": dict(
        equivalence["envs"]["CartpoleBalance"], difference=4.0, p_upper=0.001, equivalent=True)})
    said = entries(equivalence=shown)["conclusions"]
    assert said["may"][0].startswith("The stand-in (Brax's settings and loss semantics in the PyTorch trainer) scores "
                                     "as Brax's own trainer does, within ±100 on every environment")
    assert not any("stand-in" in line for line in said["may_not"])


def test_a_stand_in_equivalent_within_the_margin_but_different_says_both():
    """The paired test (verify.json paired_difference) can resolve a difference that TOST still
    calls equivalent within the margin: the report then says "to within that margin" and names
    the difference, with its interval and seeds; an old verify.json without it reads as before."""
    paired = {"test": "sign_flip_paired", "seeds": 20, "alpha": 0.05, "difference": -54.2, "p": 0.0063,
              "ci": [-90.6, -17.7], "lower_in": 16}
    equivalence = {"margin": 100.0, "alpha": 0.05, "equivalent": True,
                   "envs": {"CartpoleBalance": {"difference": -54.2, "p_lower": 0.0076, "p_upper": 0.00001,
                                                "equivalent": True, "n_stand_in": 20, "n_reference": 20,
                                                "paired_difference": paired}}}
    model = entries(equivalence=equivalence)
    said = model["conclusions"]
    assert said["may"][0].endswith("the gap against it is the gap against Brax, to within that margin.")
    assert ("The stand-in's scores are not Brax's trainer's exactly: paired by seed, they differ on CartpoleBalance "
            "by -54.2 [-90.6, -17.7] over 20 seeds (p 0.0063).") in " ".join(said["may_not"])
    assert model["equivalence"]["paired"] is True
    assert model["equivalence"]["envs"][0]["paired"] == {"difference": -54.2, "p": 0.0063, "ci": [-90.6, -17.7],
                                                         "seeds": 20, "different": True}
    unresolved = dict(paired, p=0.1, ci=[-80.2, 8.3])
    quiet = entries(equivalence=dict(equivalence, envs={"CartpoleBalance": dict(
        equivalence["envs"]["CartpoleBalance"], paired_difference=unresolved)}))["conclusions"]
    assert quiet["may"][0].endswith("the gap against it is the gap against Brax.")
    assert not any("exactly" in line for line in quiet["may_not"])
    del equivalence["envs"]["CartpoleBalance"]["paired_difference"]
    assert "paired" not in entries(equivalence=equivalence)["equivalence"]


def test_an_unresolved_gap_says_what_its_seeds_could_have_found_and_no_fraction():
    result = synthetic_result()
    noise = [300.0, -250.0, 280.0, -310.0, 260.0, -240.0, 330.0, -270.0, 290.0, -300.0]
    runs = [dataclasses.replace(r, score=r.score + 30.0 + noise[r.spec.seed] - 550.0)
            if r.spec.arm == "reference" else r for r in result.results]
    said = entries(result, runs)["conclusions"]["may_not"]
    unresolved = next(line for line in said if line.startswith("SLM-Lab's settings (baseline) vs Brax's trainer"))
    assert "not resolved at 10 paired seeds (mean difference -39)" in unresolved
    assert "or more would have been found with 80% probability, an effect of more seeds solving only if " in unresolved
    assert unresolved.endswith("of them newly solve, a smaller one would not.")
    assert ("How much of the gap the fixes close: the gap itself is not resolved, so the fraction is unbounded."
            in said)


def test_a_fraction_without_its_interval_is_never_shown_as_a_number():
    """A verify.json written before "unbounded" existed kept the ratio's point estimate."""
    result = synthetic_result()
    decided = verdicts(result.plan, result.results)
    gap = dict(gap_summary(result.plan, result.results, decided), closed_fraction=-6.02)
    gap.pop("closed_fraction_ci")
    model = verification_entries({"plan": result.plan.to_json(), "verdicts": decided, "gap": gap,
                                  "runs": [r.to_json() for r in result.results]}, Path("."), Path("."))
    assert model["gap"]["closed_fraction"] == "unbounded"


def test_per_environment_means_and_solved_counts_per_arm():
    table = entries()["per_env"]
    assert [a["name"] for a in table["arms"]] == ["baseline", "all_fixes", "reference"]
    cells = table["rows"][0]["cells"]
    assert table["rows"][0]["env"] == "CartpoleBalance" and table["threshold"] == 800.0
    assert cells["baseline"] == {"n": 10, "mean": pytest.approx(220.0), "solved": 0}
    assert cells["reference"] == {"n": 10, "mean": pytest.approx(770.0), "solved": 2}  # 800 once in 5, twice over


def test_a_bounded_fraction_is_concluded_only_when_its_interval_excludes_zero():
    said = entries()["conclusions"]
    moved = next(line for line in said["may"] if line.startswith("The fixes (all_fixes) move"))
    assert moved.startswith("The fixes (all_fixes) move SLM-Lab's score toward Brax's trainer's by a fraction 0.796 [")
    assert moved.endswith("at 95% (Fieller) of the gap")
    result = synthetic_result()
    noise = [1, -0.9, 1.1, -1.05, 0.95, -1, 1.05, -0.95, 0.9, -1.1]  # all_fixes 260 +- 300: a fraction near 0
    runs = [dataclasses.replace(r, score=260.0 + 300.0 * noise[r.spec.seed]) if r.spec.arm == "all_fixes" else r
            for r in result.results]
    said = entries(result, runs)["conclusions"]
    # Fieller on the paired per-seed differences, at the level of the gap's own row
    assert "Whether the fixes (all_fixes) close any of the gap: the fraction 0.0727 [-0.465, 0.61] at 98.33% " \
           "(Fieller) holds 0." in said["may_not"]
    assert not any("move SLM-Lab's score" in line for line in said["may"])


def test_a_pooled_row_whose_environments_disagree_in_sign_is_read_per_environment():
    """Issue 37: spec_fixes was +59 on one environment and -13 on the other; the pooled row
    described neither. Per environment rows are decided in the same Holm as the pooled ones and
    shown where the signs disagree."""
    import json

    committed = Path(__file__).resolve().parent.parent / "reports" / "phase5-seed" / "verify" / "verify.json"
    model = verification_entries(json.loads(committed.read_text()), Path("."), Path("."))
    gap = model["gap"]
    assert "spec_fixes_vs_reference" in gap["sign_disagrees"]
    envs = gap["per_env"]["spec_fixes_vs_reference"]
    assert envs["CartpoleSwingup"]["delta"] > 0 > envs["CartpoleBalance"]["delta"]
    said = model["conclusions"]
    assert any(line.startswith("The spec variant `brax-diff fix` writes (spec_fixes) vs Brax's trainer (reference), "
                               "pooled over the environments: their differences have opposite signs")
               for line in said["may_not"])
    # 8 rows, pooled and on each of 2 environments, the equivalence and the paired difference per environment
    assert model["protocol"]["tests_in_list"] == 27
    assert all(e["tests_in_family"] == 27 for name, e in gap.items() if isinstance(e, dict) and "tests_in_family" in e)
