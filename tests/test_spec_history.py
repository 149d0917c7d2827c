"""SLM-Lab's own history of a spec key (:mod:`brax_diff.history.spec_keys`), and the recommended
order that says when an edit was tried and changed back (and lists it after the others)."""

from __future__ import annotations

import json

from brax_diff.cli import main
from brax_diff.history.spec_keys import SpecHistory
from brax_diff.sources.repository import Repository
from gitfixture import _git, add_commit
import slm_fixtures as sfx
from test_setup import SLM_SPEC, repos  # noqa: F401 (the fixture repositories)
from upstream_repos import MAPPING_FILE

GAMMA = "      gamma: 0.995\n"


def test_a_value_set_and_changed_back_is_named_with_both_commits(repos):  # noqa: F811
    slm = repos["slm"]
    tried = add_commit(slm, {sfx.SPEC_PATH: SLM_SPEC.replace(GAMMA, "      gamma: 0.9\n")}, message="try 0.9")
    back = add_commit(slm, {sfx.SPEC_PATH: SLM_SPEC}, message="back to 0.995")
    add_commit(slm, {"README.md": "unrelated\n"}, message="unrelated")
    try:
        repository = Repository(slm, "slm")
        history = SpecHistory(repository, repository.resolve("HEAD").sha, sfx.SPEC_PATH)
        values = history.values("ppo_fx", "agent.algorithm.gamma")
        assert [(c, v) for c, _, v in values][-2:] == [(tried, 0.9), (back, 0.995)]
        record = history.tried("ppo_fx", "agent.algorithm.gamma", 0.9)
        assert (record["set_at"], record["changed_at"], record["changed_to"], record["removed"]) == (
            tried, back, 0.995, False)
        assert history.tried("ppo_fx", "agent.algorithm.gamma", 0.995) is None  # what it has now
        assert history.tried("ppo_fx", "agent.algorithm.gamma", 0.5) is None  # never tried
        assert history.tried("no_such_variant", "agent.algorithm.gamma", 0.9) is None
        # Only as far back as the ref asked for: before the try, nothing was tried.
        assert SpecHistory(repository, _git(slm, "rev-parse", f"{tried}~1"), sfx.SPEC_PATH).tried(
            "ppo_fx", "agent.algorithm.gamma", 0.9) is None
    finally:
        _git(slm, "reset", "-q", "--hard", "HEAD~3")


def test_the_recommended_order_says_what_was_tried_and_lists_it_last(repos, capsys, tmp_path):  # noqa: F811
    flags = ["--brax-repo", str(repos["brax"]), "--playground-repo", str(repos["playground"]),
             "--slm-repo", str(repos["slm"]), "--mapping", str(repos["slm"] / MAPPING_FILE)]

    def steps(*extra) -> list[dict]:
        assert main(["report", *flags, "--family", "manipulation", "--format", "json", "--output", "-", "--quiet",
                     *extra]) == 0
        return json.loads(capsys.readouterr().out)["recommended"]

    before = steps()
    target = next(s for s in before if s["fix"] and s["fix"].get("spec") and "value" in s["fix"]
                  and s["fix"]["spec"].startswith("agent.algorithm.") and s["severity"] == before[0]["severity"])
    spec_key, value = target["fix"]["spec"], target["fix"]["value"]
    slm = repos["slm"]
    written = f"      {spec_key.rsplit('.', 1)[1]}: {json.dumps(value)}\n"
    anchor = "ppo_fx_small:\n  agent:\n    name: PPO\n    algorithm:\n      <<: *algorithm\n"
    assert anchor in SLM_SPEC
    tried = add_commit(slm, {sfx.SPEC_PATH: SLM_SPEC.replace(anchor, anchor + written)}, message="try it")
    back = add_commit(slm, {sfx.SPEC_PATH: SLM_SPEC}, message="changed back")
    try:
        after = steps()
        moved = next(s for s in after if s["rule"] == target["rule"])
        assert [(t["set_at"], t["changed_at"]) for t in moved["tried"]] == [(tried, back)] and moved["demoted"]
        same = [s for s in after if s["severity"] == moved["severity"]]
        assert same[-1]["rule"] == target["rule"] or all(s["demoted"] for s in same[same.index(moved):])
        assert main(["report", *flags, "--family", "manipulation", "--format", "md", "--output", "-", "--quiet"]) == 0
        text = capsys.readouterr().out
        assert f"**SLM-Lab tried it**: the spec set `{spec_key}: " in text
        assert f"(Listed after the other {moved['severity']} steps: it was tried and changed back.)" in text
        # fix --phase numbers the steps as the report does, the demoted one included.
        number = after.index(moved) + 1
        assert main(["fix", *flags, "--family", "manipulation", "--phase", str(number), "--format", "json", "--quiet",
                     "--output", str(tmp_path / "s.yaml")]) == 0
        assert json.loads(capsys.readouterr().out)["scope"]["fixes"].endswith(f"({moved['rule']} {moved['rule_name']})")
        # --history-ref limits the search: before the try, nothing was tried.
        assert all(not s["tried"] for s in steps("--history-ref", f"{tried}~1"))
    finally:
        _git(slm, "reset", "-q", "--hard", "HEAD~2")
