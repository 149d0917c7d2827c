import json
from pathlib import Path

import pytest

import brax_diff
from brax_diff.errors import ConfigError
from brax_diff.facts.model import Extraction
from brax_diff.report.render import (EnvRow, build_report, changes_since, env_matrix, read_previous, render_json,
                              render_markdown, render_rules_markdown, templates_dir, topic_anchors,
                              worst_at_or_above)
from brax_diff.compare.rules import load_rules
from brax_diff.facts.vocabulary import TOPICS
from report_fixtures import BRAX_SHA, SLM_SHA, SPEC, brax_extraction, slm_extraction

ROOT = Path(__file__).resolve().parent.parent
SCOPE = {"family": "dm_control", "env": None, "variant": "ppo_playground", "spec": SPEC}


def model(brax=None, slm=None, **kw):
    return build_report(brax or brax_extraction(), slm or slm_extraction(), load_rules(), scope=SCOPE, **kw)


def section(markdown: str, title: str) -> str:
    """From a heading to the next heading of the same or a higher level."""
    start = markdown.index(title)
    level = len(title) - len(title.lstrip("#"))
    ends = [markdown.find("\n" + "#" * k + " ", start + len(title)) for k in range(2, level + 1)]
    ends = [e for e in ends if e != -1]
    return markdown[start:min(ends)] if ends else markdown[start:]


def test_templates_load_from_the_top_level_folder_in_a_checkout():
    assert templates_dir() == Path(brax_diff.__file__).parent.parent / "templates"
    assert (templates_dir() / "report.md.j2").is_file()


def test_json_report_holds_sources_facts_differences_and_summary():
    m = json.loads(render_json(model()))
    assert [s["name"] for s in m["sources"]] == ["brax", "playground", "slm"]
    assert m["sources"][0]["commit"] == BRAX_SHA and m["sources"][0]["date"] == "2025-06-01T10:00:00+00:00"
    assert m["brax"]["facts"]["transitions_per_update"]["value"] == 983040
    assert m["slm"]["facts"]["clip_epsilon"]["note"] == "spec: agent.algorithm.clip_eps_spec.start_val"
    diffs = {d["key"]: d for d in m["differences"]}
    assert diffs["transitions_per_update"]["severity"] == "CRITICAL"
    assert diffs["transitions_per_update"]["fix"]["value"] == 480
    # clip_epsilon_final (0.3 vs 0.2) differs with clip_epsilon; the schedules and entropy_coef_final match
    # and lr_decay_steps (Brax constant, SLM-Lab decaying over 1e8 frames) is MINOR
    # 6 setup keys match; std_max (a cap above the action range) and advantage_form (lambda 0.95) are MINOR;
    # clip_epsilon_final is clip_epsilon's difference (both constant): listed in its row, not counted
    assert m["summary"] == {"CRITICAL": 2, "IMPORTANT": 11, "MINOR": 16, "match": 26, "unknown": 0}
    assert "clip_epsilon_final" not in diffs
    assert diffs["clip_epsilon"]["folded"] == [{"key": "clip_epsilon_final", "status": "differs", "brax": 0.3,
                                                "slm": 0.2, "reason": "Brax 0.3 vs SLM-Lab 0.2 (Brax 1.5x larger)"}]
    assert m["recommended"][0]["rule"] == "BD001"
    assert m["recommended"][0]["keys"] == ["unrolls_per_update", "transitions_per_update"]
    assert m["findings"][0]["side"] == "slm" and m["findings"][0]["key"] == "minibatch_transitions"
    assert m["changes"] is None and m["matrix"] is None and m["verification"] is None


def test_markdown_header_names_every_source_with_full_sha_and_date():
    md = render_markdown(model())
    assert md.startswith("# Brax PPO vs SLM-Lab PPO: dm_control\n")
    header = md[: md.index("## Summary")]
    assert f"[`{BRAX_SHA}`](https://github.com/google/brax/commit/{BRAX_SHA})" in header
    assert f"[`{SLM_SHA}`](https://github.com/kengz/SLM-Lab/commit/{SLM_SHA}) | 2025-06-03T10:00:00+00:00" in header
    assert "| MuJoCo Playground | [google-deepmind/mujoco_playground]" in header
    assert "SLM-Lab variant `ppo_playground`" in header


def test_markdown_has_the_14_topics_in_order_with_linked_values():
    md = render_markdown(model())
    positions = [md.index(f"### {i}. {title}\n") for i, (_, title) in enumerate(TOPICS, start=1)]
    assert positions == sorted(positions) and len(positions) == 14  # the 13 reference topics and the training setup
    batch = section(md, "### 1. Batch collection")
    row = next(line for line in batch.splitlines() if line.startswith("| `transitions_per_update`"))
    assert "| `983040` · [L586][google/brax/brax/training/agents/ppo/train.py#L586] |" in row
    assert f"| `61440` · [L132][kengz/SLM-Lab/{SPEC}#L132] |" in row
    # Each line link is defined once, at the end, with the commit it was read at.
    assert (f"\n[google/brax/brax/training/agents/ppo/train.py#L586]: "
            f"https://github.com/google/brax/blob/{BRAX_SHA}/brax/training/agents/ppo/train.py#L586\n") in md
    assert f"\n[kengz/SLM-Lab/{SPEC}#L132]: https://github.com/kengz/SLM-Lab/blob/{SLM_SHA}/{SPEC}#L132\n" in md
    assert "CRITICAL** BD001" in row and "set `agent.algorithm.time_horizon: 480`" in row
    # A matching key is one line (its lines are in the JSON), not a row of links.
    assert "| `num_envs` |" not in batch and "\nMatching: `num_envs` 2048, `unroll_length` 30" in batch
    assert "**BD001 batch-volume**" in batch and "Risk (high)" in batch
    assert "[Andrychowicz et al. 2021](https://arxiv.org/abs/2006.05990)" in batch
    assert "No key of this topic" not in md  # every topic has facts here
    # Summary links point at GitHub's anchors of those headings.
    assert f"[`clip_epsilon`](#{topic_anchors()['clip_epsilon']})" in md
    assert topic_anchors()["lr_schedule"] == "6-learning-rate-schedule"


def test_severity_tables_and_recommended_order_read_like_the_reference():
    md = render_markdown(model())
    # Each key's detail is in one place, its topic; the summary names the CRITICAL ones and links there.
    assert "### CRITICAL" not in md
    summary = section(md, "## Summary")
    critical = next(line for line in summary.splitlines() if line.startswith("| 🔴 **CRITICAL** |"))
    assert "[`transitions_per_update`](#1-batch-collection)" in critical and "clip_epsilon" not in critical
    order = section(md, "## Recommended order")
    lines = [line for line in order.splitlines() if line[:1].isdigit()]
    assert lines[0].startswith("1. 🔴 **CRITICAL**, risk high, BD001 batch-volume")
    # low-risk IMPORTANT fixes before the high-risk one, as the reference's phases are ordered
    grad = next(i for i, line in enumerate(lines) if "BD023" in line)
    squash = next(i for i, line in enumerate(lines) if "BD024" in line)
    assert grad < squash
    assert "set `agent.net.clip_grad_val: null`" in lines[grad]


def test_findings_section_lists_each_finding_with_its_line():
    md = render_markdown(model())
    findings = section(md, "## Findings")
    assert "| SLM-Lab | WARNING | spec_code_inconsistency | minibatch_size 4096 is rounded" in findings
    assert f"| [{SPEC}#L134][kengz/SLM-Lab/{SPEC}#L134] |" in findings
    assert f"\n[kengz/SLM-Lab/{SPEC}#L134]: https://github.com/kengz/SLM-Lab/blob/{SLM_SHA}/{SPEC}#L134\n" in md


def test_verification_leads_with_the_gap_and_joins_each_key(tmp_path):
    pytest.importorskip("scipy", reason="the verdicts need the verify extra's statistics")
    from verify_fixtures import load, write_synthetic

    from brax_diff.report.verification import verification_entries

    assert "Verification" not in render_markdown(model())
    path = write_synthetic(tmp_path / "verify")
    entries = verification_entries(load(path), path.parent, tmp_path / "reports")
    md = render_markdown(model(verification=entries))
    section_text = section(md, "## Verification")
    assert "10 seeds per arm, every arm stopped at 1,600 env steps" in section_text
    assert ("decisive only where the exact sign-flip permutation test and the paired bootstrap-t (symmetric and "
            "equal-tailed) of the mean paired difference all reject") in section_text
    assert "one list held under one Holm-Bonferroni at 5 % (3 tests)" in section_text
    assert "4 full episodes of the stochastic policy" in section_text
    rows = [line for line in section_text.splitlines() if line.startswith("| ")]
    assert rows[2].startswith("| SLM-Lab's settings (baseline) vs Brax's trainer (reference) | -550 |")
    assert rows[2].endswith("| baseline scores lower |")
    assert rows[4].startswith("| every expressible fix, trainer-level, code changes included (all_fixes) vs SLM-Lab's "
                              "settings (baseline) | +438 |")
    assert "| Fraction of the gap the fixes close | 0.796 | [" in section_text and "at 95% (Fieller)" in section_text
    assert "Learning curves: [CartpoleBalance](../verify/plots/CartpoleBalance-gap.png)." in section_text
    loo = [line for line in rows if line.startswith("| [`")]
    assert loo[0].startswith("| [`learning_rate`](../verify/plots/CartpoleBalance-loo-learning_rate.png) | +418")
    assert loo[1].startswith("| [`clip_epsilon`]") and ("not resolved: a true shift of ±45.6 or more would have been found "
                                                          "with 80% probability, an effect of more seeds solving only if "
                                                          "70% or more of them newly solve") in loo[1]
    clip = section(md, "### 12. Clipping epsilon")
    assert "| Fix | Verification |" in clip
    assert "[inconclusive](../verify/plots/CartpoleBalance-loo-clip_epsilon.png) at 10 seeds, loo" in clip


def test_a_gap_only_verification_says_leave_one_out_was_not_run_and_its_size(tmp_path):
    pytest.importorskip("scipy", reason="the verdicts need the verify extra's statistics")
    from verify_fixtures import load, write_synthetic

    from brax_diff.report.verification import verification_entries

    data = load(write_synthetic(tmp_path / "verify"))
    data["plan"]["arm_groups"] = ["gap"]
    data["verdicts"] = [v for v in data["verdicts"] if v["family"] == "gap"]
    entries = verification_entries(data, tmp_path / "verify", tmp_path / "reports")
    assert entries["protocol"]["fixes_moved"] == 2  # clip_epsilon and learning_rate
    section_text = section(render_markdown(model(verification=entries)), "## Verification")
    assert ("leave-one-out: all_fixes with one fix undone) was not run here; `brax-diff verify --arms gap,loo` "
            "runs it (2 more arms, one per fix, meant for a GPU)") in section_text
    assert ("| every expressible fix, trainer-level, code changes included (all_fixes) vs SLM-Lab's settings "
            "(baseline) |") in section_text
    # a verify.json from before the spec_fixes arm, whose all_fixes was the written variant
    data["plan"]["all_fixes"] = {"from": "spec", "variants": {"CartpoleBalance": "ppo_playground_brax"}}
    entries = verification_entries(data, tmp_path / "verify", tmp_path / "reports")
    section_text = section(render_markdown(model(verification=entries)), "## Verification")
    assert "| the spec variant `brax-diff fix` writes (all_fixes) vs SLM-Lab's settings (baseline) |" in section_text


def test_output_is_byte_identical_for_the_same_inputs_in_any_order():
    brax = brax_extraction()
    shuffled = Extraction(brax.side, dict(reversed(brax.sources.items())), dict(reversed(brax.scope.items())),
                          dict(reversed(brax.facts.items())), list(reversed(brax.findings)))
    a, b = model(brax), model(shuffled)
    assert render_json(a) == render_json(b)
    assert render_markdown(a) == render_markdown(b)
    assert render_markdown(a) == render_markdown(model())


def test_changes_since_previous_list_moved_facts_and_classifications():
    old = json.loads(render_json(model(brax_extraction(sha="a" * 40), slm_extraction({"clip_epsilon": 0.3}))))
    new = model(previous=old)
    changes = new["changes"]
    assert changes["sources"] == [{"name": "brax", "title": "Brax", "from": "a" * 40, "to": BRAX_SHA,
                                   "from_date": "2025-06-01T10:00:00+00:00", "to_date": "2025-06-01T10:00:00+00:00"}]
    assert changes["facts"]["brax"] == []
    assert changes["facts"]["slm"] == [{"key": "clip_epsilon", "change": "changed", "from": 0.3, "to": 0.2}]
    assert changes["classifications"] == [{"key": "clip_epsilon", "from": {"status": "match", "severity": None},
                                           "to": {"status": "differs", "severity": "IMPORTANT"}}]
    md = section(render_markdown(new), "## Changes since the previous report")
    assert "- Brax: `aaaaaaaaaaaa`" in md and "→ `bbbbbbbbbbbb`" in md
    assert "  - `clip_epsilon` changed: 0.3 → 0.2" in md
    assert "  - `clip_epsilon`: match → differs (IMPORTANT)" in md
    assert "No Brax fact moved." in md


def test_regenerating_over_a_report_with_the_same_content_keeps_its_changes():
    old = json.loads(render_json(model(brax_extraction(drop=("discount",)))))
    first = json.loads(render_json(model(previous=old)))
    assert first["changes"]["facts"]["brax"] == [{"key": "discount", "change": "added", "from": None, "to": 0.995}]
    second = model(previous=first)  # same inputs again: idempotent, so --check stays green
    assert render_json(second) == render_json(first)
    assert changes_since(None, second) is None
    assert "No previous report to compare with." in render_markdown(model())


def test_env_matrix_has_a_column_per_varying_key_and_lists_shared_differences_once():
    table = load_rules()
    rows = [
        EnvRow("CartpoleBalance", brax_extraction(env="CartpoleBalance"), slm_extraction(), "ppo_playground"),
        EnvRow("BallInCup", brax_extraction({"discount": 0.95}, env="BallInCup"), slm_extraction(), "ppo_playground"),
        EnvRow("FingerSpin", brax_extraction({"discount": 0.95}, env="FingerSpin"),
               slm_extraction({"discount": 0.95, "epochs_per_update": 4}, variant="ppo_playground_fingerspin"),
               "ppo_playground_fingerspin"),
    ]
    matrix = env_matrix(rows, table)
    assert [r["env"] for r in matrix["rows"]] == ["BallInCup", "CartpoleBalance", "FingerSpin"]
    assert matrix["columns"] == ["epochs_per_update", "discount"]  # report order: batch before discount
    cells = {r["env"]: r["cells"]["discount"] for r in matrix["rows"]}
    assert cells["BallInCup"] == {"brax": 0.95, "slm": 0.995, "status": "differs", "severity": "CRITICAL"}
    assert cells["CartpoleBalance"]["status"] == "match"
    assert cells["FingerSpin"] == {"brax": 0.95, "slm": 0.95, "status": "match", "severity": None}
    uniform = {u["key"]: u for u in matrix["uniform"]}
    assert uniform["clip_epsilon"] == {"key": "clip_epsilon", "brax": 0.3, "slm": 0.2, "status": "differs",
                                       "severity": "IMPORTANT"}
    assert "activation" not in uniform and "discount" not in uniform  # matches everywhere / varies

    md = section(render_markdown(model(matrix=matrix)), "## Per-environment matrix")
    assert "| Environment | Variant | `epochs_per_update` | `discount` |" in md
    assert "| BallInCup | ppo_playground | `16` | `0.95` / `0.995` CRITICAL |" in md
    assert "| FingerSpin | ppo_playground_fingerspin | `16` / `4` IMPORTANT | `0.95` |" in md
    assert "Differences shared by all 3 environments:" in md
    assert "| `clip_epsilon` | `0.3` | `0.2` | IMPORTANT |" in md


def test_fail_on_threshold_selects_differences_at_or_above():
    m = model()
    assert {d["key"] for d in worst_at_or_above(m, "CRITICAL")} == {"unrolls_per_update", "transitions_per_update"}
    assert len(worst_at_or_above(m, "IMPORTANT")) == 13
    assert len(worst_at_or_above(m, "MINOR")) == 29  # lr_decay_steps and advantage_form among them


def test_read_previous_rejects_files_that_are_not_reports(tmp_path):
    assert read_previous(tmp_path / "absent.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.json: invalid JSON at line 1: Expecting property name"):
        read_previous(bad)
    bad.write_text('{"schema": 99}', encoding="utf-8")
    with pytest.raises(ConfigError, match="schema 1"):
        read_previous(bad)


def test_committed_rules_doc_is_generated_from_the_table():
    # Regenerate with: brax-diff rules --format md > docs/rules.md
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == render_rules_markdown(load_rules())


def test_rules_doc_describes_every_rule_and_predicate():
    doc = render_rules_markdown(load_rules())
    for rule in load_rules().rules:
        assert f"## {rule.code} {rule.name}\n" in doc
    assert "| `other: {KEY: P}` | the predicate holds for another key's comparison |" in doc
    assert "| (Brax's value is larger (a list: longer) and for `transitions_per_update`" in doc


def test_markdown_links_at_most_three_lines_per_value():
    from brax_diff.facts.model import Provenance
    from brax_diff.report.render import linked
    prov = [Provenance("https://github.com/google/brax", "c" * 40, "train.py", line).to_json() for line in range(1, 6)]
    assert linked(983040, prov) == ("`983040` · [L1][google/brax/train.py#L1] · [L2][google/brax/train.py#L2] · "
                                    "[L3][google/brax/train.py#L3] (+2 in the JSON)")
    assert linked([256, 256], []) == "`[256, 256]`"
    assert linked("a|b", prov[:1]) == "`a\\|b` · [L1][google/brax/train.py#L1]"
    uncommitted = Provenance("https://github.com/kengz/SLM-Lab", "c" * 40, "spec.yaml", 7, uncommitted=True)
    assert linked(0.25, [uncommitted.to_json()]) == "`0.25` · L7 (uncommitted)"


def test_one_moved_fact_changes_only_its_own_rows_and_the_link_definitions():
    before = render_markdown(model()).splitlines()
    brax = brax_extraction({"clip_epsilon": 0.25}, sha="d" * 40)  # a new Brax commit moves one value
    after = render_markdown(build_report(brax, slm_extraction(), load_rules(),
                                         scope={"family": "dm_control", "env": None, "variant": "ppo_playground",
                                                "spec": SPEC})).splitlines()
    assert len(before) == len(after)
    changed = [new for old, new in zip(before, after) if old != new]
    body = [line for line in changed if not line.startswith("[google/brax/")]
    row = "| `clip_epsilon` (and `clip_epsilon_final`: Brax 0.3 vs SLM-Lab 0.2 (Brax 1.5x larger)) | `0.25` · [L206]"
    expected = ["| Brax | [google/brax](",  # source
                "9. 🟠 **IMPORTANT**, risk medium, BD032", row]  # fix; the key's one row, in its topic
    assert [line[:len(start)] for line, start in zip(body, expected)] == expected and len(body) == 3
    assert all("/blob/" + "d" * 40 + "/" in line for line in changed if line not in body)


def test_incomplete_family_config_sends_the_reader_to_the_matrix():
    from brax_diff.facts.model import Finding, Provenance

    brax = brax_extraction()
    where = Provenance("https://github.com/google-deepmind/mujoco_playground", BRAX_SHA,
                       "mujoco_playground/config/manipulation_params.py", 120)
    brax.find(Finding("base_config_incomplete", "INFO", "brax_ppo_config raises for envs that match no branch",
                      (where,)))
    matrix = {"columns": ["discount"], "uniform": [], "matching": [], "incomparable": [],
              "rows": [{"env": "A", "variant": SCOPE["variant"], "cells": {}},
                       {"env": "B", "variant": "other_variant", "cells": {}}]}
    text = render_markdown(model(brax=brax, matrix=matrix))
    header = text[:text.index("| Source |")]
    assert "> **What the family trains with.** Brax's values below are what its environments train with, not its " \
           "base config (brax_ppo_config raises for envs that match no branch" in header
    assert ", [mujoco_playground/config/manipulation_params.py#L120][google-deepmind/mujoco_playground/" in header
    assert "1 key(s) take different values across the 2 environments; each environment's are in the matrix: " \
           "`discount`." in header
    assert f"1 of 2 environments train with `{SCOPE['variant']}`; the others with `other_variant`." in header
    assert f"]: {where.url}\n" in text
    assert "What the family trains with" not in render_markdown(model())  # an environment's report


def test_long_floats_print_short_in_markdown_and_whole_in_json():
    from brax_diff.report.render import format_value

    assert format_value(1.6487212707001282) == "1.649"
    assert format_value(0.006737946999085467) == "0.006738"
    assert format_value(0.033) == "0.033" and format_value(1e-08) == "1e-08"


def test_a_declared_value_the_code_overrides_is_important_in_its_row_and_in_the_findings():
    from brax_diff.facts.model import Fact, Finding, Provenance

    slm = slm_extraction()
    spec_line = Provenance("https://github.com/kengz/SLM-Lab", SLM_SHA, SPEC, 40)
    guard = Provenance("https://github.com/kengz/SLM-Lab", SLM_SHA, "slm_lab/agent/algorithm/ppo.py", 77)
    fact = slm.facts["unroll_length"]
    slm.add(Fact("unroll_length", fact.value, (spec_line, guard), fact.note, declared=fact.value + 7))
    slm.find(Finding("declared_not_effective", "IMPORTANT",
                     f"unroll_length: the spec asks for {fact.value + 7} (agent.algorithm.time_horizon), but the code "
                     f"runs {fact.value} (overridden at slm_lab/agent/algorithm/ppo.py:77)", (spec_line, guard),
                     "unroll_length"))
    md = render_markdown(model(slm=slm))
    row = next(line for line in section(md, "## Topics").splitlines() if line.startswith("| `unroll_length` |"))
    assert f"(declared `{fact.value + 7}`; 🟠 **IMPORTANT**: the code overrides it)" in row
    findings = section(md, "## Findings")
    assert ("| SLM-Lab | 🟠 **IMPORTANT** | declared_not_effective | unroll_length: the spec asks for "
            f"{fact.value + 7}") in findings
    assert "| SLM-Lab | WARNING | spec_code_inconsistency |" in findings  # other kinds unchanged
    # Findings sort by severity: the IMPORTANT one before the WARNING.
    assert findings.index("declared_not_effective") < findings.index("spec_code_inconsistency")


def test_a_fix_value_that_holds_only_with_the_other_edits_says_so():
    m = model()
    key = next(d["key"] for d in m["differences"] if d["severity"])
    fix = {"spec": "agent.algorithm.minibatch_size", "summary": "set", "text": "Split like Brax.", "value": 131072}
    outcome = {"kind": "spec", "summary": "set `agent.algorithm.minibatch_size: 2097152`", "moves": [], "where": [],
               "reason": None, "edits": [{"rule": "BD006", "spec": "agent.algorithm.minibatch_size", "value": 2097152}]}
    m["recommended"] = [{"severity": "IMPORTANT", "risk": "low", "rule": "BD006", "rule_name": "gradient-steps",
                         "keys": [key], "fix": fix, "outcomes": [{"keys": [key], "outcome": outcome}]}]
    text = render_markdown(m)
    assert ("(`2097152` holds with every spec edit of this list written, as `brax-diff fix` writes them together; "
            "for this step alone the rule's value is `131072`.)") in text
    outcome["edits"][0]["value"] = 131072  # the same value alone and together: nothing to say
    assert "holds with every spec edit" not in render_markdown(m)


def test_the_report_closes_with_what_to_do_and_folds_the_matrix():
    from brax_diff.facts.model import Finding

    slm = slm_extraction()
    slm.find(Finding("cannot_train", "ERROR", "train() stops: no such scheduler", ()))
    matrix = {"columns": ["discount"], "uniform": [], "matching": [], "incomparable": [],
              "rows": [{"env": "A", "variant": SCOPE["variant"], "cells": {"discount": None}}]}
    md = render_markdown(model(slm=slm, matrix=matrix))
    todo = section(md, "## What to do")
    assert todo.startswith("## What to do\n\nFirst, 1 ERROR finding(s) above: train() stops: no such scheduler. "
                           "Nothing below trains until that is fixed.\n")
    steps = [line for line in section(md, "## Recommended order").splitlines() if line[:1].isdigit()]
    assert f"{len(steps)} step(s) in all" in todo
    # No fix solver ran for this model: no spec edit is checked, so none is named as one to try.
    assert "The spec edits to try first" not in todo
    assert "<details><summary>1 environments x 1 keys that vary</summary>" in md
    assert md.index("## What to do") > md.index("## Per-environment matrix")
