"""`brax-diff fix` on fixture repositories of SLM-Lab's shape: the variant it writes, what
reading it back shows, the residual, --explain, and bad input."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest

import slm_fixtures as fx
from brax_diff.cli import main
from brax_diff.sources.repository import Repository
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.extractors.slm.extractor import SlmExtractor
from brax_diff.extractors.slm.spec import SpecFile
from gitfixture import _git
from upstream_repos import MAPPING_FILE, SPEC_PATH, make_upstreams, repo_flags

ORIGINAL = textwrap.dedent(fx.SPEC).lstrip("\n")
# every key the fixture's dm_control fixes write, each read back as Brax's value
FIXED_TO_MATCH = ["discount", "num_envs", "epochs_per_update", "minibatches_per_epoch", "gradient_steps_per_update",
                  "reward_scale", "learning_rate", "lr_schedule", "lr_final_factor", "entropy_coef",
                  "entropy_coef_final", "max_grad_norm", "value_loss_coef", "adam_eps", "clip_epsilon",
                  "clip_epsilon_final", "value_hidden_layers", "policy_hidden_layers"]


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory):
    return make_upstreams(tmp_path_factory.mktemp("fix") / "up")


@pytest.fixture()
def fresh(tmp_path):
    """Repositories of its own, for a test that edits the SLM-Lab work tree."""
    return make_upstreams(tmp_path / "up")


def run_fix(paths, capsys, *args) -> tuple[int, str, str]:
    code = main(["fix", *repo_flags(paths), *args])
    out, err = capsys.readouterr()
    return code, out, err


def fix_json(paths, capsys, *args) -> dict:
    code, out, err = run_fix(paths, capsys, "--family", "dm_control", "--format", "json", "--quiet", *args)
    assert code == 0, err
    return json.loads(out)


def extract_written(paths, text: str, variant: str = "ppo_fx_brax"):
    """The written spec text read by the SLM-Lab extractor on its own (not through `fix`)."""
    from brax_diff.fix.solver import OverlaySnapshot

    snapshot = Repository(paths["slm"], "slm").resolve("HEAD")
    return SlmExtractor(OverlaySnapshot(snapshot, {SPEC_PATH: text}), spec=SPEC_PATH).variant(variant)


def brax_dm_control(paths):
    brax = Repository(paths["brax"], "brax").resolve("HEAD")
    playground = Repository(paths["playground"], "playground").resolve("HEAD")
    return BraxExtractor(brax, playground).family("dm_control")


# -- the variant written ---------------------------------------------------------------------


def test_output_writes_a_variant_whose_re_extraction_matches_brax_on_what_it_changed(upstreams, capsys, tmp_path):
    out = tmp_path / "spec.yaml"
    model = fix_json(upstreams, capsys, "--output", str(out))
    text = out.read_text(encoding="utf-8")
    # comments, anchors, merge keys and every original line, byte for byte; the variant after them
    assert text.startswith(ORIGINAL) and "\nppo_fx_brax:\n" in text[len(ORIGINAL):]
    assert (upstreams["slm"] / SPEC_PATH).read_text(encoding="utf-8") == ORIGINAL  # a copy: the spec untouched
    # the original variants resolve exactly as before (values and lines)
    before, after = SpecFile(ORIGINAL, SPEC_PATH, {}), SpecFile(text, SPEC_PATH, {})
    assert after.variants() == before.variants() + ["ppo_fx_brax"]
    for variant in before.variants():
        assert (before.resolve(variant).data, before.resolve(variant).lines) == \
            (after.resolve(variant).data, after.resolve(variant).lines)
    # read back on its own, the variant has Brax's value for every key its spec fixes reach
    brax, slm = brax_dm_control(upstreams), extract_written(upstreams, text)
    for key in FIXED_TO_MATCH:
        assert slm.facts[key].value == brax.facts[key].value, key
    assert set(FIXED_TO_MATCH) <= set(model["matched"])
    written = {w["spec"]: w["value"] for w in model["written"]}
    assert written["agent.algorithm.gamma"] == 0.99 and written["agent.net.clip_grad_val"] is None
    assert written["agent.net.critic_arc"] == [64, 64, 64] and written["env.num_envs"] == 64
    # BD001's value follows BD003's envs (Brax's 7,680 transitions over 64 envs: 120 steps), and the
    # fixture's batch guard rounds 120 to 128: an edit that does not make the key match is not written
    assert "agent.algorithm.time_horizon" not in written
    assert "time_horizon: 120" in next(d["why"] for d in model["dropped"] if d["rule"] == "BD001")
    # each key it sets names its rule and the Brax line it follows
    assert "      gamma: 0.99  # BD033 discount: Brax mujoco_playground/config/dm_control_suite_params.py:" in text
    assert "    num_envs: 64  # BD003 parallel-envs: Brax " in text


def test_the_residual_splits_code_changes_from_differences_a_fix_introduced(upstreams, capsys, tmp_path):
    model = fix_json(upstreams, capsys, "--output", str(tmp_path / "spec.yaml"))
    groups = {name: {row["key"]: row for row in rows} for name, rows in model["residual"].items()}
    assert set(groups["code_change"]) == {"unrolls_per_update", "obs_norm_std_eps",
                                          "truncation", "gae_recompute", "obs_norm_update", "entropy_estimator",
                                          "action_distribution", "std_transform", "std_min", "std_max", "kernel_init",
                                          "action_bounding"}
    # PlaygroundVecEnv.step sends the raw sample: no spec key bounds it
    assert [w["path"] for w in groups["code_change"]["action_bounding"]["where"]] == ["slm_lab/env/playground.py"]
    # a code change names the SLM-Lab code that decides it (its first lines: the GAE call, the env's
    # auto-reset and the done flag its step hands on as terminated)
    assert [(w["path"], w["line"]) for w in groups["code_change"]["truncation"]["where"]] == [
        ("slm_lab/agent/algorithm/actor_critic.py", fx.line_of(fx.ACTOR_CRITIC, "math_util.calc_gaes(")),
        ("slm_lab/env/playground.py", fx.line_of(fx.PLAYGROUND, "wrap_for_brax_training(")),
        ("slm_lab/env/playground.py", fx.line_of(fx.PLAYGROUND, "dones = np.asarray("))]
    # a fix written that the code does not take is a code change too, with what reading it back showed
    assert "does not take" in groups["code_change"]["action_distribution"]["why"]
    assert "NormalTanh" in groups["code_change"]["action_distribution"]["why"]
    # the fixture's batch guard rounds time_horizon 120 up to 128 (a multiple of the envs): BD001 is
    # not written, and BD003's 64 envs alone take the batch to 64 x 64 (16 steps rounded to 64)
    assert "the code runs 128" in groups["code_change"]["unrolls_per_update"]["why"]
    assert groups["introduced"]["transitions_per_update"]["slm"] == 4096
    # the envs' fix moves the GAE horizon further from Brax's 30 steps, through the guard
    gae = groups["introduced"]["gae_horizon"]
    assert (gae["brax"], gae["slm_before"], gae["slm"]) == (30, 16, 64)
    assert "env.num_envs" in gae["by"]
    assert set(groups["introduced"]) == {"unroll_length", "gae_horizon", "transitions_per_update",
                                         "minibatch_transitions", "reward_scale_site"}
    assert not groups["unknown"] and not groups["not_applied"]
    assert {d["rule"] for d in model["dropped"]} == {"BD001", "BD002", "BD007", "BD024", "BD027"}
    assert model["settled"] and model["rounds"] == 2


def test_markdown_residual_and_the_same_bytes_every_time(upstreams, capsys, tmp_path):
    target = tmp_path / "a.yaml"
    first = run_fix(upstreams, capsys, "--family", "dm_control", "--output", str(target), "--quiet")
    written = target.read_bytes()
    second = run_fix(upstreams, capsys, "--family", "dm_control", "--output", str(target), "--quiet")
    assert first[0] == second[0] == 0
    assert first[1] == second[1]
    assert target.read_bytes() == written
    md = first[1]
    assert md.startswith("# brax-diff fix: ppo_fx_brax (ppo_fx with every fix the spec can express), dm_control\n")
    assert "## Written: 14 spec key(s); 20 difference(s) now match Brax" in md
    assert "### Needs a code change (12)" in md and "### Introduced by a fix (5)" in md
    assert "| `gae_horizon` | `30` | `16` → `64` | `env.num_envs`" in md
    assert f"SLM-Lab HEAD ({first_sha(upstreams)}), its {SPEC_PATH} read back from {tmp_path / 'a.yaml'}\n" in md


def first_sha(paths) -> str:
    return _git(paths["slm"], "rev-parse", "--short=7", "HEAD")


def test_diff_is_a_dry_run_of_the_same_text(upstreams, capsys, tmp_path):
    code, out, err = run_fix(upstreams, capsys, "--family", "dm_control", "--diff", "--quiet")
    assert code == 0, err
    patch = out[:out.index("\n# brax-diff fix:")]
    assert patch.startswith(f"--- a/{SPEC_PATH}\n+++ b/{SPEC_PATH}\n")
    added = [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    target = tmp_path / "spec.yaml"
    run_fix(upstreams, capsys, "--family", "dm_control", "--output", str(target), "--quiet")
    assert "\n".join(added) + "\n" == target.read_text()[len(ORIGINAL):]
    assert not any(line.startswith("-") and not line.startswith("---") for line in patch.splitlines())
    assert (upstreams["slm"] / SPEC_PATH).read_text() == ORIGINAL


def test_in_place_adds_the_variant_to_the_work_tree_and_reads_it_back_from_disk(fresh, capsys):
    code, out, err = run_fix(fresh, capsys, "--family", "dm_control", "--in-place", "--format", "json")
    assert code == 0, err
    spec = fresh["slm"] / SPEC_PATH
    text = spec.read_text()
    assert text.startswith(ORIGINAL) and "\nppo_fx_brax:\n" in text
    assert _git(fresh["slm"], "status", "--porcelain") == f"M {SPEC_PATH}"
    model = json.loads(out)
    slm_source = next(s for s in model["sources"] if s["name"] == "slm")
    assert slm_source["ref"] == "WORKTREE" and slm_source["uncommitted"] == [SPEC_PATH]
    assert "--slm-variant ppo_fx_brax" in err
    # a second run: the name is taken; the file stays as the first run left it
    code, _, err = run_fix(fresh, capsys, "--family", "dm_control", "--in-place")
    assert code == 2 and err.count("\n") == 1 and "already has 'ppo_fx_brax'" in err
    assert spec.read_text() == text
    # --name gives another variant beside it, whose base is the same
    code, _, err = run_fix(fresh, capsys, "--family", "dm_control", "--in-place", "--keys", "discount",
                           "--name", "ppo_fx_gamma", "--quiet")
    assert code == 0, err
    assert spec.read_text().startswith(text)
    gamma = SpecFile(spec.read_text(), SPEC_PATH, {}).resolve("ppo_fx_gamma").data
    assert gamma["agent"]["algorithm"]["gamma"] == 0.99
    assert gamma["env"] == SpecFile(ORIGINAL, SPEC_PATH, {}).resolve("ppo_fx").data["env"]


def test_a_variant_that_cannot_train_is_said_before_writing_and_the_next_command_shows_it(tmp_path, capsys):
    """SLM-Lab's code lacks the scheduler the spec names: the variant fix writes inherits it and
    cannot train. fix says so in one line before the file changes, still writes (the residual
    lists the finding), and prints the report command that shows the new variant, since a
    plain `report --slm WORKTREE` keeps comparing the mapped one."""
    paths = make_upstreams(tmp_path / "up", slm_extra={"slm_lab/agent/net/net_util.py": fx.NET_UTIL_WITHOUT_MIN})
    code, out, err = run_fix(paths, capsys, "--family", "dm_control", "--in-place", "--keys", "discount")
    assert code == 0, err
    lines = err.splitlines()
    warning = next(line for line in lines if line.startswith("warning:"))
    assert warning.startswith("warning: ppo_fx_brax cannot train at WORKTREE: agent.net.lr_scheduler_spec.name "
                              "'LinearToMin': get_lr_scheduler has no branch for it")
    assert warning.endswith("; inherited from ppo_fx, which no fix in scope changes")
    assert lines.index(warning) < lines.index(f"wrote {paths['slm'] / SPEC_PATH}")
    assert "\nppo_fx_brax:\n" in (paths["slm"] / SPEC_PATH).read_text()
    see = f"see it: brax-diff report --slm WORKTREE --spec {SPEC_PATH} --variant ppo_fx_brax --family dm_control"
    assert see in lines
    report = see.removeprefix("see it: brax-diff ").split() + [*repo_flags(paths), "--format", "json", "--output", "-"]
    assert main(report) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["scope"]["variant"] == "ppo_fx_brax"
    # The family's comparison is what its environments train with: discount matches in each of them.
    discount = [d for d in shown["differences"] if d["key"] == "discount"]
    cells = [row["cells"].get("discount") for row in shown["matrix"]["rows"]]
    assert (discount and discount[0]["status"] == "match") or (
        "discount" in shown["varying"] and all(c is None or c["status"] in ("match", "unknown") for c in cells))
    # a variant that trains gets no such line
    code, _, err = run_fix(make_upstreams(tmp_path / "ok"), capsys, "--family", "dm_control", "--diff",
                           "--keys", "discount")
    assert code == 0 and "cannot train" not in err


# -- scopes: one phase, named keys, an alternative --------------------------------------------


def test_keys_scope_writes_only_those_fixes(upstreams, capsys, tmp_path):
    model = fix_json(upstreams, capsys, "--keys", "discount,value_loss_coef", "--output", str(tmp_path / "s.yaml"))
    assert [(w["spec"], w["value"]) for w in model["written"]] == [("agent.algorithm.gamma", 0.99),
                                                                  ("agent.algorithm.val_loss_coef", 0.25)]
    assert sorted(model["matched"]) == ["discount", "value_loss_coef"]
    not_applied = {row["key"]: row["why"] for row in model["residual"]["not_applied"]}
    assert not_applied["clip_epsilon"] == "outside the fixes of discount, value_loss_coef"
    assert "epochs_per_update" in not_applied
    assert "# ppo_fx_brax: ppo_fx with the fixes of discount, value_loss_coef (dm_control;" in \
        (tmp_path / "s.yaml").read_text()


def test_phase_scope_is_one_step_of_the_recommended_order(upstreams, capsys, tmp_path):
    # phase 2 of the fixture's recommended order (as `report` numbers it) is BD001: time_horizon only
    model = fix_json(upstreams, capsys, "--phase", "2", "--output", str(tmp_path / "s.yaml"))
    assert [(w["spec"], w["value"], w["rule"]) for w in model["written"]] == \
        [("agent.algorithm.time_horizon", 960, "BD001")]
    assert model["scope"]["fixes"] == "phase 2 of the recommended order (BD001 batch-volume)"
    assert {row["key"] for row in model["residual"]["introduced"]} >= {"gae_horizon", "unroll_length"}


@pytest.mark.parametrize("scope", [["--family", "dm_control"], ["--env", "BallInCup"]])
def test_every_phase_is_the_reports_step_of_the_same_number(upstreams, capsys, tmp_path, scope):
    """`fix --phase N` fixes the keys of the report's step N, for a family and an environment
    (the report numbers its rows, one difference one row, over the keys its scope compares)."""
    assert main(["report", *repo_flags(upstreams), *scope, "--format", "json", "--output", "-", "--quiet"]) == 0
    steps = json.loads(capsys.readouterr().out)["recommended"]
    assert steps
    checked = 0
    for number, step in enumerate(steps, start=1):
        code, out, err = run_fix(upstreams, capsys, *scope, "--format", "json", "--quiet", "--phase", str(number),
                                 "--output", str(tmp_path / f"s{number}.yaml"))
        if code == 2:  # a code change: fix says which step it is, by the report's name for it
            assert f"phase {number} ({step['rule']} {step['rule_name']}, {', '.join(step['keys'])})" in err, err
            continue
        assert code == 0, err
        assert json.loads(out)["scope"]["fixes"] == (f"phase {number} of the recommended order ({step['rule']} "
                                                     f"{step['rule_name']})")
        checked += 1
    assert checked >= 1


def test_alternative_more_envs_keeps_brax_horizon_and_multiplies_the_envs(upstreams, capsys, tmp_path):
    model = fix_json(upstreams, capsys, "--alternative", "more-envs", "--output", str(tmp_path / "s.yaml"))
    # Brax's 30 steps at 256 envs: the fixture's guard rounds the horizon to 256, so the
    # alternative does not take either, and BD003's own fix (num_envs: 64) is written
    assert not [w for w in model["written"] if w["rule"] == "BD001"]
    assert next(d["why"] for d in model["dropped"] if d["rule"] == "BD001").startswith(
        "writing env.num_envs: 256, agent.algorithm.time_horizon: 30 does not take")
    assert {w["spec"]: w["value"] for w in model["written"]}["env.num_envs"] == 64
    assert model["scope"]["fixes"] == "every fix the spec can express; BD001 more-envs"


def test_explain_sets_each_option_residual_side_by_side(upstreams, capsys):
    code, out, err = run_fix(upstreams, capsys, "--family", "dm_control", "--explain", "transitions_per_update",
                             "--format", "json", "--quiet")
    assert code == 0, err
    model = json.loads(out)
    assert model["rule"] == "BD001"
    assert [c["option"] for c in model["options"]] == ["longer-horizon", "more-envs"]
    # the fixture's guard rounds either option's horizon: neither is written (each a code change)
    assert [[(w["spec"], w["value"]) for w in c["written"]] for c in model["options"]] == [[], []]
    rows = {row["key"]: row for row in model["rows"]}
    assert [c["group"] for c in rows["transitions_per_update"]["cells"]] == ["introduced", "introduced"]
    assert "truncation" in {r["key"] for r in model["same_in_every_option"]}
    assert (upstreams["slm"] / SPEC_PATH).read_text() == ORIGINAL  # --explain writes nothing
    code, md, _ = run_fix(upstreams, capsys, "--family", "dm_control", "--explain", "transitions_per_update",
                          "--quiet")
    assert "| Key | Brax | SLM-Lab before | longer-horizon | more-envs |" in md
    assert "with 64 envs that is a time_horizon of 120" in md  # the numbers written, not the report's first ones


# -- bad input: one error line, exit 2, the spec untouched ---------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--keys", "nope", "--diff"], "unknown key 'nope'"),
    (["--keys", "truncation", "--diff"], "--keys truncation: its fix is a code change (BD040"),
    (["--keys", "activation", "--diff"], "--keys activation: already matches Brax"),
    (["--phase", "99", "--diff"], "unknown phase 99: the recommended order has"),
    (["--phase", "0", "--diff"], "unknown phase 0"),
    (["--phase", "10", "--diff"], "phase 10 (BD040 truncation, truncation): its fix is a code change"),
    (["--keys", "discount", "--phase", "1", "--diff"], "--phase and --keys exclude each other"),
    (["--alternative", "sideways", "--diff"], "unknown --alternative 'sideways' (the rules offer: longer-horizon, "
                                              "more-envs)"),
    (["--keys", "discount", "--alternative", "more-envs", "--diff"], "--alternative more-envs belongs to BD001"),
    (["--explain", "nope"], "--explain nope: unknown key"),
    (["--explain", "discount", "--diff"], "--explain writes nothing; drop --diff"),
    (["--diff", "--in-place"], "--in-place and --diff exclude each other"),
    ([], "say where the variant goes"),
    (["--variant", "ppo_nope", "--diff"], "no variant 'ppo_nope'"),
    (["--name", "ppo_fx_small", "--diff"], "already has 'ppo_fx_small'"),
    (["--name", "bad-name", "--diff"], "use letters, digits and _"),
    (["--spec", "../elsewhere.yaml", "--diff"], "a path inside the SLM-Lab repository"),
    (["--format", "xml", "--diff"], "unknown --format 'xml'"),
])
def test_bad_input_is_one_error_line_and_exit_2(upstreams, capsys, args, message):
    code, out, err = run_fix(upstreams, capsys, "--family", "dm_control", *args)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert out == ""
    assert _git(upstreams["slm"], "status", "--porcelain") == ""


def test_in_place_on_a_spec_that_cannot_be_round_tripped_leaves_it_untouched(fresh, capsys):
    spec = fresh["slm"] / SPEC_PATH
    # two equal keys: PyYAML (SLM-Lab) keeps the last one, ruamel.yaml refuses the file
    text = ORIGINAL.replace("  meta: {max_session: 1}\n", "  meta: {max_session: 1}\n  meta: {max_session: 2}\n", 1)
    spec.write_text(text)
    code, out, err = run_fix(fresh, capsys, "--family", "dm_control", "--in-place")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and "cannot be round-tripped" in err
    assert spec.read_text() == text


def test_output_that_is_a_directory_or_the_spec_itself_is_refused(fresh, capsys, tmp_path):
    code, _, err = run_fix(fresh, capsys, "--family", "dm_control", "--output", str(tmp_path))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    code, _, err = run_fix(fresh, capsys, "--family", "dm_control", "--output", str(fresh["slm"] / SPEC_PATH))
    assert code == 2 and "is the spec file itself; use --in-place" in err
    assert (fresh["slm"] / SPEC_PATH).read_text() == ORIGINAL


def test_in_place_needs_a_work_tree(tmp_path, capsys):
    paths = make_upstreams(tmp_path / "up")
    bare = tmp_path / "slm.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(paths["slm"]), str(bare)], check=True)
    code = main(["fix", "--brax-repo", str(paths["brax"]), "--playground-repo", str(paths["playground"]),
                 "--slm-repo", str(bare), "--mapping", str(paths["slm"] / MAPPING_FILE), "--slm", "HEAD",
                 "--family", "dm_control", "--in-place"])
    _, err = capsys.readouterr()
    assert code == 2 and "has no work tree" in err and err.count("\n") == 1


def test_env_scope_starts_from_the_variant_mapped_to_that_env(upstreams, capsys):
    code, out, err = run_fix(upstreams, capsys, "--env", "FingerSpin", "--diff", "--format", "json", "--quiet")
    assert code == 0, err
    model = json.loads(out)
    assert (model["base_variant"], model["variant"]) == ("ppo_fx_big_mb", "ppo_fx_big_mb_brax")
    assert (model["scope"]["env"], model["scope"]["family"]) == ("FingerSpin", "dm_control")
    assert "+ppo_fx_big_mb_brax:\n" in model["diff"]
    code, _, err = run_fix(upstreams, capsys, "--env", "NoSuchEnv", "--diff")
    assert code == 2 and "'NoSuchEnv' is not a registered Playground environment" in err


# -- verify: "this spec, trained" and "these settings, trained" are one run ----------------------


def verify_plan(paths, capsys, *args) -> dict:
    code = main(["verify", "--plan", "--brax-repo", str(paths["brax"]), "--playground-repo", str(paths["playground"]),
                 "--slm-repo", str(paths["slm"]), "--set", "max_frame=1000000", "--format", "json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def arm_settings(plan: dict, arm: str) -> dict:
    settings = [r["settings"] for r in plan["runs"] if r["arm"] == arm]
    assert settings and all(s == settings[0] for s in settings)  # every seed trains the same settings
    return settings[0]


@pytest.mark.parametrize("scope", [[], ["--keys", "discount,value_loss_coef"]])
def test_verify_spec_fixes_is_the_variant_fix_writes_for_the_same_scope(fresh, capsys, scope):
    plan = verify_plan(fresh, capsys, "--variant", "ppo_fx", *scope)
    assert plan["spec_fixes"]["variants"] == {"CartpoleBalance": "ppo_fx_brax"}
    assert plan["all_fixes"]["title"] == "all_fixes (trainer-level, code changes included)"
    code, _, err = run_fix(fresh, capsys, "--env", "CartpoleBalance", "--in-place", "--quiet", *scope)
    assert code == 0, err
    written = verify_plan(fresh, capsys, "--slm", "WORKTREE", "--slm-variant", "ppo_fx_brax")
    assert arm_settings(plan, "spec_fixes") == arm_settings(written, "baseline")
    assert arm_settings(plan, "spec_fixes") != arm_settings(plan, "baseline")
    if scope:  # only the two keys move; a difference outside the scope stays at SLM-Lab's value
        assert arm_settings(plan, "spec_fixes") == {**arm_settings(plan, "baseline"), "discount": 0.99,
                                                    "value_loss_coef": 0.25}
    else:
        # no horizon is written (the guard rounds 120 to 128); 64 envs take its 16 steps to 64
        assert arm_settings(plan, "spec_fixes")["unroll_length"] == 64
        ablations = {a["key"]: a for a in plan["spec_fixes"]["ablations"]}
        assert ablations["truncation"]["action"] == "not_in_spec"
        assert ablations["unroll_length"]["action"] == "variant"
        assert ablations["unroll_length"]["reason"] == "the written variant sets 64"
        # the trainer-level arm moves what the spec cannot carry
        assert arm_settings(plan, "all_fixes")["truncation"] == "mask_bootstrap_last_state"


def test_verify_all_fixes_settings_keeps_the_trainer_level_arm(fresh, capsys):
    plan = verify_plan(fresh, capsys, "--variant", "ppo_fx", "--all-fixes", "settings")
    assert plan["all_fixes"]["from"] == "settings" and plan["spec_fixes"] is None
    fixes = arm_settings(plan, "all_fixes")
    assert (fixes["unroll_length"], fixes["unrolls_per_update"], fixes["truncation"]) == (30, 4,
                                                                                          "mask_bootstrap_last_state")
    code = main(["verify", "--plan", "--all-fixes", "sideways", "--variant", "ppo_fx", *repo_flags(fresh)[:6]])
    assert code == 2 and "--all-fixes must be spec or settings" in capsys.readouterr().err


def test_report_verify_trains_the_same_written_variant(fresh, capsys, monkeypatch, tmp_path):
    """`report --verify` plans as `verify` does: spec_fixes is the variant `fix` writes."""
    import brax_diff.verify as verify_package
    import brax_diff.verify.worker as runner
    from brax_diff.verify.for_report import verify_scope
    from brax_diff.config import load_settings
    from brax_diff.report.render import Scope

    planned = []
    monkeypatch.setattr(verify_package, "training_stack_missing", lambda: None)
    monkeypatch.setattr(runner, "pick_device", lambda: "cpu")  # the cpu preset, as on this machine
    monkeypatch.setattr(verify_package, "run_plan", lambda plan, *args, **kwargs: planned.append(plan) or
                        type("Result", (), {"to_json": lambda self: {}})())
    settings = load_settings(brax_repo=str(fresh["brax"]), playground_repo=str(fresh["playground"]),
                             slm_repo=str(fresh["slm"]), slm_ref="HEAD")
    brax_x = BraxExtractor(Repository(fresh["brax"], "brax").resolve("HEAD"),
                           Repository(fresh["playground"], "playground").resolve("HEAD"))
    sets = {"max_frame": "1000000"}
    slm_x = SlmExtractor(Repository(fresh["slm"], "slm").resolve("HEAD"), spec=SPEC_PATH, sets=sets)
    verify_scope(brax_x, slm_x, Scope(family="dm_control", env="CartpoleBalance"), "ppo_fx", settings,
                tmp_path / "verify", sets)
    plan, = planned
    assert plan.fixed_variants == {"CartpoleBalance": "ppo_fx_brax"}
    cli = verify_plan(fresh, capsys, "--variant", "ppo_fx", "--preset", "cpu")
    assert next(r.settings for r in plan.runs if r.arm == "spec_fixes") == arm_settings(cli, "spec_fixes")
    assert arm_settings(cli, "spec_fixes")["truncation"] == "bootstrap_next_obs_across_reset"  # a code change: kept


def test_a_written_layer_list_links_to_its_sequential_not_the_anchors_first_line(upstreams, capsys, tmp_path):
    """The written variant's layer widths cite the Sequential the fix wrote, not the first line of
    the arc's value (a merged anchor's `input: x` lies above it)."""
    out = tmp_path / "s.yaml"
    model = fix_json(upstreams, capsys, "--keys", "value_hidden_layers", "--output", str(out))
    assert [w["spec"] for w in model["written"]] == ["agent.net.critic_arc"]
    text = out.read_text()
    written = extract_written(upstreams, text)
    lines = text.splitlines()
    start = lines.index("ppo_fx_brax:")
    sequential = next(n for n in range(start, len(lines)) if lines[n].strip().startswith("Sequential:")) + 1
    # The written list's first layer (the line after `Sequential:`), inside the written variant.
    assert [p.line for p in written.facts["value_hidden_layers"].provenance] == [sequential + 1]
    assert lines[sequential].strip() == "- LazyLinear: {out_features: 64}"
