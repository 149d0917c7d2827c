"""The report's Fix column and recommended order come from `brax-diff fix`'s solver: each
spec edit is written into a copy of the variant and read back by SLM-Lab's own extractor
(fixture repositories of SLM-Lab's shape, tests/upstream_repos.py)."""

from __future__ import annotations

import json

import pytest

import slm_fixtures as fx
from brax_diff.cli import main
from brax_diff.facts.model import Extraction, Finding, Provenance
from upstream_repos import SPEC_PATH, make_upstreams, repo_flags

GUARD_LINE = fx.line_of(fx.PPO, "self.time_horizon = math.ceil(self.time_horizon / num_envs) * num_envs")


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("report-fixes") / "up")


@pytest.fixture(scope="module")
def reports(upstreams, tmp_path_factory):
    """The dm_control report (JSON and Markdown) and `fix`'s JSON for the same scope."""
    out = tmp_path_factory.mktemp("out")
    code = main(["report", *repo_flags(upstreams), "--family", "dm_control", "-q", "--output",
                 str(out / "dm_control.md")])
    assert code == 0
    fixed = out / "fix.json"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["fix", *repo_flags(upstreams), "--family", "dm_control", "--diff", "--format", "json", "-q"])
    assert code == 0
    fixed.write_text(buffer.getvalue(), encoding="utf-8")
    return {"json": json.loads((out / "dm_control.json").read_text(encoding="utf-8")),
            "md": (out / "dm_control.md").read_text(encoding="utf-8"), "fix": json.loads(buffer.getvalue())}


def outcome(reports, key):
    return next(d for d in reports["json"]["differences"] if d["key"] == key)["outcome"]


def row(md: str, key: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| `{key}` |") and "BD" in line)


def test_a_horizon_the_batch_guard_rounds_is_a_code_change_naming_the_guard_line(reports):
    # BD001 asks 120 steps at 64 envs (Brax's 7,680 transitions); the fixture's guard rounds it to 128
    for key in ("unrolls_per_update", "transitions_per_update"):
        o = outcome(reports, key)
        assert o["kind"] == "code" and o["edits"] == []
        assert o["reason"] == "the batch guard replaces `agent.algorithm.time_horizon: 120` with 128"
        assert [(p["path"], p["line"]) for p in o["where"]][:1] == [("slm_lab/agent/algorithm/ppo.py", GUARD_LINE)]
    cell = row(reports["md"], "transitions_per_update").rsplit(" | ", 1)[-1]
    assert cell == (f"code change: the batch guard replaces `agent.algorithm.time_horizon: 120` with 128 "
                    f"(ppo.py:[L{GUARD_LINE}][kengz/SLM-Lab/slm_lab/agent/algorithm/ppo.py#L{GUARD_LINE}]) |")
    # BD002 and BD007 (Brax's 30 steps) are rounded to 64 the same way: no horizon is recommended at all
    for key in ("unroll_length", "gae_horizon"):
        assert outcome(reports, key)["reason"] == "the batch guard replaces `agent.algorithm.time_horizon: 30` with 64"
    assert "time_horizon:" not in "".join(d["outcome"]["summary"] for d in reports["json"]["differences"]
                                          if d["outcome"])


def test_keys_of_one_spec_key_get_one_value_the_solvers_choice(reports):
    chosen: dict[str, object] = {}
    for d in reports["json"]["differences"]:
        for edit in (d["outcome"] or {}).get("edits", []):
            assert chosen.setdefault(edit["spec"], edit["value"]) == edit["value"], (d["key"], edit)
    # BD006 (32 minibatches of the batch) and BD005 (Brax's minibatch size) both set minibatch_size:
    # the recommended order's first, BD006, writes 512; BD005's key says it cannot have its own
    assert chosen["agent.algorithm.minibatch_size"] == 512
    assert outcome(reports, "minibatches_per_epoch")["summary"] == "set `agent.algorithm.minibatch_size: 512`"
    mb = outcome(reports, "minibatch_transitions")
    assert mb["kind"] == "code"
    assert mb["reason"] == ("its fix would set `agent.algorithm.minibatch_size`, which BD006's fix sets to 512 "
                            "(one value per spec key); with it, minibatch_transitions reads 512")
    # and the step of BD006 says what its edit does to the other key
    assert outcome(reports, "minibatches_per_epoch")["moves"] == [
        {"key": "minibatch_transitions", "brax": 960, "from": 64, "to": 512}]


def test_a_distribution_class_the_code_lacks_is_a_code_change(reports):
    o = outcome(reports, "action_distribution")
    assert o["kind"] == "code"
    assert o["reason"].startswith("`agent.algorithm.action_pdtype: NormalTanh` names what the code lacks: "
                                  "agent.algorithm.action_pdtype 'NormalTanh' is not a continuous distribution")
    steps = [s for s in reports["json"]["recommended"] if s["rule"] == "BD024"]
    assert steps[0]["outcomes"] == [{"keys": ["action_distribution"], "outcome": o}]
    assert "set `agent.algorithm.action_pdtype" not in reports["md"]


def test_an_edit_that_takes_and_trains_is_recommended_with_what_else_it_moves(reports):
    assert outcome(reports, "discount") == {
        "kind": "spec", "summary": "set `agent.algorithm.gamma: 0.99`", "reason": None, "where": [], "moves": [],
        "edits": [{"spec": "agent.algorithm.gamma", "value": 0.99, "rule": "BD033"}]}
    assert row(reports["md"], "discount").endswith("| set `agent.algorithm.gamma: 0.99` |")
    # 64 envs (Brax's) take the 16-step horizon to 64 through the guard: the row says so
    assert row(reports["md"], "num_envs").endswith(
        "| set `env.num_envs: 64` (it also moves `gae_horizon` 16 → 64, Brax 30; `transitions_per_update` "
        "128 → 4096, Brax 7680; `unroll_length` 16 → 64, Brax 30) |")
    order = reports["md"][reports["md"].index("## Recommended order"):]
    assert "Each spec edit below was written into a copy of variant `ppo_fx` and read back" in order


def test_the_report_says_what_fix_does_for_every_key(reports):
    report = {d["key"]: d["outcome"] for d in reports["json"]["differences"] if d["outcome"]}
    fixed = reports["fix"]
    # a key folded into its parent's row (one difference, one row) has no row and no outcome of its own
    folded = {f["key"] for d in reports["json"]["differences"] for f in d.get("folded", [])}
    in_solver = set(fixed["outcomes"]) - folded
    assert in_solver and in_solver <= set(report)
    for key in in_solver:
        assert report[key] == fixed["outcomes"][key], key
    written = {(w["spec"], json.dumps(w["value"])) for w in fixed["written"]}
    matched = set(fixed["matched"])
    for key, o in report.items():
        if o["kind"] == "spec":  # written by fix, and read back as Brax's
            assert {(e["spec"], json.dumps(e["value"])) for e in o["edits"]} <= written and key in matched, key
        elif key in in_solver:
            assert o["kind"] == "code" and key not in matched, key
        else:  # outside what a spec variant holds (the run's length): never presented as checked
            assert o["kind"] in ("unchecked", "code"), key
    # every edit fix writes is the recommendation of some key
    recommended = {(e["spec"], json.dumps(e["value"])) for o in report.values() for e in o["edits"]}
    assert recommended == written


def test_without_a_spec_to_write_the_rules_fixes_are_labelled_not_checked(tmp_path, capsys):
    paths = make_upstreams(tmp_path / "up")
    # the spec is JSON-only here: `fix` writes YAML spec files, so the solver cannot run
    code = main(["report", *repo_flags(paths), "--family", "dm_control", "--spec", fx.JSON_SPEC_PATH,
                 "--variant", "ppo_json", "--format", "json", "--output", "-", "-q"])
    if code != 0:
        pytest.skip(capsys.readouterr().err)
    model = json.loads(capsys.readouterr().out)
    assert model["fixes_checked"]["checked"] is False
    assert "writes YAML spec files" in model["fixes_checked"]["why"]
    spec_fixes = [d for d in model["differences"] if d["fix"] and d["fix"]["spec"] and d["severity"]]
    assert spec_fixes and all(d["outcome"]["kind"] == "unchecked" for d in spec_fixes)


def test_an_edit_that_breaks_training_is_taken_out_and_named():
    from brax_diff.fix.solver import Edit, _breaks_training

    spec_line = Provenance("https://github.com/kengz/SLM-Lab", "0" * 40, SPEC_PATH, 200, True)
    code_line = Provenance("https://github.com/kengz/SLM-Lab", "0" * 40, "slm_lab/agent/algorithm/ppo.py", 90)
    edits = {
        "agent.algorithm.gamma": Edit("agent.algorithm.gamma", 0.99, "BD033", "discount", None, ("discount",), None,
                                      0.995, ()),
        "agent.algorithm.minibatch_size": Edit("agent.algorithm.minibatch_size", 1920, "BD006", "gradient-steps",
                                               None, ("minibatches_per_epoch",), None, 2048, ()),
    }
    inherited = Finding("cannot_train", "ERROR", "lr_scheduler_spec.name 'LinearToMin' is not defined")
    repack = Finding("cannot_train", "ERROR", "train() re-packs each minibatch with venv_pack(x, num_envs=2048); a "
                     "minibatch of 1920 transitions cannot be viewed so", (code_line, spec_line))
    before = Extraction("slm", {}, {}, {}, [inherited])
    after = Extraction("slm", {}, {}, {}, [inherited, repack])
    lines = {"agent.algorithm.gamma": {190}, "agent.algorithm.minibatch_size": {200}}
    dropped = _breaks_training(edits, after, before, lines, SPEC_PATH)
    assert list(dropped) == ["BD006"]  # the rule whose written line the failure names; not the inherited one
    assert dropped["BD006"].reason.startswith("with `agent.algorithm.minibatch_size: 1920` written the variant "
                                              "cannot train: train() re-packs each minibatch")
    assert dropped["BD006"].reason_where == [code_line]
    assert _breaks_training(edits, before, before, lines, SPEC_PATH) == {}


def test_a_value_the_spec_reading_refuses_is_taken_out_and_named():
    from brax_diff.errors import SpecError
    from brax_diff.fix.solver import Edit, _refused

    edits = {"agent.algorithm.minibatch_size": Edit("agent.algorithm.minibatch_size", 0, "BD006", "gradient-steps",
                                                    None, ("minibatches_per_epoch",), None, 2048, ())}
    refused = _refused(edits, SpecError(f"{SPEC_PATH}: line 812: variant ppo_x_brax: agent.algorithm.minibatch_size "
                                        "must be at least 1, not 0"))
    assert refused.rule == "BD006"
    assert refused.reason == ("`agent.algorithm.minibatch_size: 0` is refused when the spec is read: "
                              "agent.algorithm.minibatch_size must be at least 1, not 0")
    assert _refused(edits, SpecError("something else")) is None
