"""A checkout brax-diff runs in is not trusted (issue 35, item 4): its settings file cannot
choose the fact cache nor name files outside it; upstream text printed as a GitHub workflow
command or into Markdown cannot become a command, a link or HTML."""

from __future__ import annotations

from pathlib import Path

import pytest

from brax_diff.cli import main
from brax_diff.config import load_settings
from brax_diff.errors import ConfigError
from test_hardening import one_error_line
from test_report_cli import run
from test_report_cli import workspace  # noqa: F401 (a fixture)


# -- settings files -------------------------------------------------------------------------

def test_a_checkouts_settings_file_cannot_choose_the_fact_cache(workspace, capsys):
    # The case: a checkout ships brax-diff.toml pointing at a planted cache beside it.
    work = workspace["work"]
    planted = work / "planted"
    planted.mkdir()
    (work / "brax-diff.toml").write_text('cache-dir = "planted"\n')
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "brax-diff.toml: cache-dir cannot be set in a settings file", "BRAX_DIFF_CACHE_DIR")
    assert list(planted.iterdir()) == [] and not (work / "reports").exists()  # nothing read there, nothing written
    (work / "brax-diff.toml").write_text('[tool.brax-diff]\ncache_dir = "/var/cache/x"\n')  # any spelling, any path
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "brax-diff.toml: cache_dir cannot be set")
    (work / "pyproject.toml").write_text('[tool.brax-diff]\ncache-dir = "planted"\n')
    (work / "brax-diff.toml").unlink()
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "pyproject.toml [tool.brax-diff]: cache-dir cannot be set")


def test_a_cache_dir_flag_wins_over_the_file(tmp_path):
    (tmp_path / "brax-diff.toml").write_text('cache-dir = "planted"\n')
    with pytest.raises(ConfigError):
        load_settings(tmp_path)
    assert load_settings(tmp_path, cache_dir="/mine").cache_dir == "/mine"  # the user's choice


@pytest.mark.parametrize("value", ["../../x", "/tmp/elsewhere", "~/reports", "in/../../out"])
def test_reports_dir_outside_the_checkout_is_refused_and_nothing_is_written(workspace, capsys, value):
    work = workspace["work"]
    (work / "brax-diff.toml").write_text(f'reports-dir = "{value}"\n')
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, f"brax-diff.toml: reports-dir '{value}' leads outside the checkout ({work})")
    assert not (work.parent.parent / "x").exists() and not (work.parent / "out").exists()


def test_reports_dir_through_a_symlink_leading_out_is_refused(workspace, capsys, tmp_path):
    work = workspace["work"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "reports").symlink_to(outside)
    (work / "brax-diff.toml").write_text('reports-dir = "reports"\n')
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "reports-dir 'reports' leads outside the checkout")
    assert list(outside.iterdir()) == []


def test_paths_inside_the_checkout_stay_allowed_from_below_its_root(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "tools" / "sub").mkdir(parents=True)
    (checkout / "tools" / "brax-diff.toml").write_text(
        'reports-dir = "../reports"\nrules = "r.yaml"\nmapping = "' + str(checkout / "m.yaml") + '"\n')
    settings = load_settings(checkout / "tools" / "sub")  # the file is in tools/; the checkout is its work tree
    assert (settings.reports_dir, settings.rules, settings.mapping) == (
        str(checkout / "reports"), str(checkout / "tools" / "r.yaml"), str(checkout / "m.yaml"))


@pytest.mark.parametrize("key", ["rules", "mapping"])
def test_rules_and_mapping_outside_the_checkout_are_refused_unless_given_as_flags(tmp_path, capsys, monkeypatch, key):
    secret = tmp_path / "secret.yaml"
    secret.write_text("rules: []\n")
    checkout = tmp_path / "checkout"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "brax-diff.toml").write_text(f'{key} = "../secret.yaml"\n')
    with pytest.raises(ConfigError, match=rf"brax-diff.toml: {key} '../secret.yaml' leads outside the checkout "
                                          rf"\({checkout}\): .* pass --{key} for one elsewhere"):
        load_settings(checkout)
    assert getattr(load_settings(checkout, **{key: str(secret)}), key) == str(secret)  # the user's own flag
    monkeypatch.chdir(checkout)
    assert main(["rules"]) == 2
    one_error_line(capsys, f"{key} '../secret.yaml' leads outside the checkout")


def test_the_verify_run_cache_is_never_a_folder_the_checkout_can_ship(tmp_path, monkeypatch):
    # Before: `verify` and `report --verify` read .brax-diff-cache/verify in the directory run in,
    # so a checkout that ships one had its planted results read back as trainings.
    import os

    from brax_diff.cli.verify import default_run_cache

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".brax-diff-cache" / "verify").mkdir(parents=True)
    assert default_run_cache() == Path(os.environ["BRAX_DIFF_CACHE_DIR"]) / "verify"
    monkeypatch.delenv("BRAX_DIFF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path.parent / "xdg"))
    assert default_run_cache() == tmp_path.parent / "xdg" / "brax-diff" / "verify"


# -- stderr and GitHub workflow commands -----------------------------------------------------

HOSTILE_KEY = "clip\n::error::pwned\r::warning file=x::y ##[error]legacy"


def no_workflow_command(text: str) -> None:
    """What GitHub's runner does: a line that starts with '::' after blanks is a command, and so
    is one holding the legacy '##[command]' form anywhere (ActionCommand.TryParse)."""
    for line in text.splitlines():
        assert not line.strip().startswith("::") and "##[" not in line, line


def test_an_upstream_key_with_a_newline_is_one_line_on_stderr_not_a_workflow_command(capsys):
    from brax_diff.cli.story import PlainConsole, Story

    model = {"scope": {"env": "::error::env", "family": "f", "variant": "v"},
             "sources": [{"name": "slm", "ref": "master", "commit": "a" * 40}],
             "differences": [{"key": HOSTILE_KEY, "severity": "CRITICAL"}], "summary": {"match": 0},
             "findings": [{"severity": "ERROR", "side": "slm", "kind": "cannot_train",
                           "message": f"spec key {HOSTILE_KEY!s}", "provenance": []}]}
    story = Story(PlainConsole())
    story.warn(f"spec key {HOSTILE_KEY} is not read")
    story.summary(model)
    err = capsys.readouterr().err
    no_workflow_command(err)
    assert err.splitlines() == [
        "warning: spec key clip%0A::error::pwned%0D::warning file=x::y #%23[error]legacy is not read",
        "%3A:error::env (f): SLM-Lab variant v; SLM-Lab master aaaaaaa",
        "  CRITICAL 1: clip%0A::error::pwned%0D::warning file=x::y #%23[error]legacy",
        "  IMPORTANT 0", "  MINOR 0", "  match 0",
        "ERROR SLM-Lab cannot_train: spec key clip%0A::error::pwned%0D::warning file=x::y #%23[error]legacy"]


def test_an_error_quoting_upstream_text_is_one_line(workspace, capsys, monkeypatch):
    from brax_diff.cli import report as report_cli
    from brax_diff.errors import SpecError

    class Refusing:
        def __init__(self, *args, **kwargs):
            raise SpecError(f"spec key {HOSTILE_KEY!s}: not a number")

    monkeypatch.setattr(report_cli, "load_extractors", lambda: (Refusing, Refusing))
    assert run(workspace, "--family", "dm_control") == 2
    # BraxDiffError already folds its message to one line; the guard is that it stays so.
    err = one_error_line(capsys, "spec key clip ::error::pwned ::warning file=x::y #%23[error]legacy: not a number")
    no_workflow_command(err)


def test_annotations_escape_data_and_properties_as_github_does():
    from brax_diff.report.review import github_annotations

    class Move:
        now, was, path, line, report = "CRITICAL", "MINOR", "reports/a,b:c.md", 3, "dm_control"
        key = "k%\n::error::x"

        def sentence(self):
            return f"{self.key} moved\r\n::error::y"

    out = github_annotations([Move()])
    assert out == ("::error file=reports/a%2Cb%3Ac.md,line=3,title=brax-diff%3A k%25%0A%3A%3Aerror%3A%3Ax moved "
                   "(dm_control)::k%25%0A::error::x moved%0D%0A::error::y\n")
    assert out.count("\n") == 1  # one command: the key's newline is data (%0A), not a second line


# -- Markdown -------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
LINK = "x](javascript:alert(1))"
HTML = "<script>alert(1)</script>"


def rendered_html(markdown: str) -> str:
    """The Markdown as a CommonMark renderer with tables and raw HTML shows it, every link
    destination allowed (markdown-it refuses javascript: itself; other renderers may not)."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    md.validateLink = lambda url: True
    return md.render(markdown)


def hostile_model() -> dict:
    """A committed report's model with upstream strings an attacker chose."""
    import json

    model = json.loads((ROOT / "reports" / "upstream" / "dm_control.json").read_text())
    row = model["matrix"]["rows"][0]
    row["env"], row["variant"] = f"[Cartpole]({LINK[3:]} {HTML}", f"v`{LINK}"
    model["scope"]["variant"] = f"ppo` {LINK} `"
    difference = next(d for d in model["differences"] if d["status"] == "differs")
    difference["slm"]["value"] = f"{HTML} [a]({LINK[3:]}"
    old, difference["key"] = difference["key"], f"k`{LINK}\n| x |"
    for step in model["recommended"]:  # the steps name the key too
        step["keys"] = [difference["key"] if k == old else k for k in step["keys"]]
    model["findings"][0]["message"] = f"spec key `a` is {HTML} and [b]({LINK[3:]}"
    model["findings"][0]["provenance"][0]["path"] = "a]\n[x]: javascript:alert(2)\n[b.py"
    return model


def test_upstream_strings_in_the_markdown_form_no_link_html_or_table_column():
    from brax_diff.report.render import render_markdown

    markdown = render_markdown(hostile_model())
    html = rendered_html(markdown)
    assert "<script" not in html and "javascript:" not in "".join(
        part.split('"', 1)[0] for part in html.split('href="')[1:])  # no link goes there
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not dropped
    assert "\n[x]: javascript" not in markdown  # the path made no link definition
    # Each table row keeps its column count: a key's "|" and newline are cell content.
    for table in html.split("<table>")[1:]:
        rows = table.split("</table>")[0].split("<tr>")[1:]
        assert len({row.count("<td") + row.count("<th") for row in rows}) == 1


def test_the_escapes_leave_todays_reports_byte_identical():
    """Every committed report re-rendered from its JSON is the committed Markdown: none of
    today's upstream names needed an escape."""
    import json

    from brax_diff.report.render import render_markdown, render_results_markdown

    for path in sorted((ROOT / "reports").glob("*/*.json")):
        model = json.loads(path.read_text())
        render = render_results_markdown if model.get("kind") == "results" else render_markdown
        assert render(model) == path.with_suffix(".md").read_text(), path


def test_code_spans_and_names_escape_what_breaks_out():
    from brax_diff.safety.escape import md_code, md_prose, md_text

    assert md_code("num_envs") == "`num_envs`"
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``" and md_code("a|b\nc") == "`a\\|b c`"
    assert md_text("CartpoleBalance") == "CartpoleBalance" and md_text("Go1_Getup") == "Go1_Getup"
    assert md_text("[a](javascript:x) <b>") == "\\[a\\](javascript:x) \\<b\\>"
    assert md_prose("spec `a` < 3 and <img src=x>") == "spec `a` < 3 and &lt;img src=x>"
    assert md_prose("[a](javascript:x)") == "[a]\\(javascript:x)"


def test_upstream_strings_in_the_results_markdown_form_no_link_or_html():
    import json

    from brax_diff.report.render import render_results_markdown

    model = json.loads((ROOT / "reports" / "upstream" / "results.json").read_text())
    model["rows"][0]["env"] = f"[Cartpole]({LINK[3:]} {HTML}"
    if model.get("unjoined"):
        model["unjoined"][0]["env"] = f"{HTML} [u]({LINK[3:]}"
    model["not_published"] = [*model.get("not_published", []), f"[n]({LINK[3:]}"]
    html = rendered_html(render_results_markdown(model))
    assert "<script" not in html and "javascript:" not in "".join(
        part.split('"', 1)[0] for part in html.split('href="')[1:])


def test_the_step_summary_forms_no_link_or_html_from_upstream_keys_and_values():
    from brax_diff.report.review import Move, markdown_summary

    moves = [Move("value", "dm_control", f"k`{LINK}", f"[e]({LINK[3:]}", (("SLM-Lab", 1, f"{HTML}`{LINK}"),),
                  was="MINOR", now="CRITICAL"),
             Move("finding", "dm_control", "dead_branch", "dm_control", now="WARNING",
                  note=f"finding new: {HTML} [x]({LINK[3:]}")]
    html = rendered_html(markdown_summary(moves))
    assert "<script" not in html and "javascript:" not in "".join(
        part.split('"', 1)[0] for part in html.split('href="')[1:])
    rows = html.split("<tbody>")[1].split("<tr>")[1:]
    assert [row.count("<td") for row in rows] == [6, 6]  # no cell split by an upstream "|"


def test_the_history_markdown_forms_no_link_or_html_from_upstream_keys_values_and_paths():
    from brax_diff.facts.model import Fact, Provenance
    from brax_diff.history.walk import Change, _change_line

    where = Provenance("https://github.com/kengz/SLM-Lab", "a" * 40, "spec) [x](javascript:alert(3).yaml", 3)
    line = _change_line(Change(f"k`{LINK}", "changed", Fact("k", 1, (where,)), Fact("k", f"{HTML}`{LINK}", (where,))))
    html = rendered_html(line)
    assert "<script" not in html and "javascript:" not in "".join(
        part.split('"', 1)[0] for part in html.split('href="')[1:])


def test_extract_output_on_stdout_is_no_workflow_command_and_no_rich_markup(capsys):
    from brax_diff.cli.common import print_extractions, print_verdicts
    from brax_diff.facts.model import Extraction, Fact, Finding

    print_verdicts([("::error::variant", False, "spec key ##[error]x\nnext"), ("ppo", True, None)], "master")
    x = Extraction("slm", {}, {"variant": "v"})
    x.facts["clip_epsilon"] = Fact("clip_epsilon", "[bold]0.2[/bold]\n::error::y ##[warning]z")
    x.findings.append(Finding("cannot_train", "ERROR", "key [red]a[/red]\n::error::f", (), None))
    print_extractions([x], "table")
    out = capsys.readouterr().out
    no_workflow_command(out)
    assert "%3A:error::variant: fails: spec key #%23[error]x%0Anext" in out
    assert "[bold]0.2[/bold]%0A::error::y #%23[warning]z" in out  # shown as written, not styled
    assert "cannot_train: key [red]a[/red]%0A::error::f" in out


def test_a_reports_folder_the_checkout_ships_as_a_symlink_out_is_not_written_through(workspace, capsys, tmp_path):
    # No settings file: the default reports/ is the checkout's, and a symlink there sent the
    # reports wherever it pointed.
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (workspace["work"] / "reports").symlink_to(outside)
    assert run(workspace, "--family", "dm_control") == 2
    one_error_line(capsys, "reports leads outside the checkout", "through a symbolic link; pass --output DIR")
    assert list(outside.iterdir()) == []
    assert run(workspace, "--family", "dm_control", "--output", str(outside)) == 0  # named on purpose
    assert sorted(p.name for p in outside.iterdir()) == ["dm_control.json", "dm_control.md"]


def test_json_on_stdout_carries_no_legacy_workflow_command_and_reads_back_the_same(capsys):
    import json

    from brax_diff.cli.common import print_json

    print_json({"spec": {"x##[error]pwned": "##[stop-commands]t"}})
    out = capsys.readouterr().out
    no_workflow_command(out)
    assert json.loads(out) == {"spec": {"x##[error]pwned": "##[stop-commands]t"}}
