"""Published results (`report --results`): both shapes of SLM-Lab's BENCHMARKS.md tables, CSV and
YAML files, the status rule, the budget each row's run had, and the rows not taken. The join and
its ranking are tests/test_results_join.py."""

from __future__ import annotations


import pytest

from brax_diff.errors import BraxDiffError
from brax_diff.compare.results import frames_number, parse_benchmarks, parse_table, read_benchmarks, read_table, status

# Up to mid-March 2026: algorithm, status, score, target.
WITH_TARGETS = """
# Benchmarks

#### Phase 5.3: Manipulation

| ENV | Algorithm | Status | MA | SPEC_NAME | HF Data | Target (ref) | FPS | Frames | Wall Clock |
|-----|-----------|--------|-----|-----------|---------|--------------|-----|--------|------------|
| playground/PandaPickCube | PPO | ✅ | 4586.13 | ppo_playground_loco | [run](https://example.org/a) | 4500 | 9K | 100M | 3h |
| | SAC | 🔄 | - | sac_playground | - | | - | - | - |
| playground/PandaPickCubeCartesian | PPO | ⚠️ | 10.58* | ppo_playground_manip | [run_b_2026_03_15](https://example.org/b) | ~12 | 9K | 65M | 3h |
| playground/PandaOpenCabinet | PPO | ❌ | - | ppo_playground_loco | - | 1,250 | - | - | - |
| playground/PandaPickCube | PPO | ✅ | 1.0 | ppo_playground_loco | - | 1 | - | - | - |

Other table, not Playground's:

| ENV | MA |
|-----|-----|
| CartPole-v1 | 499 |
"""
# Later: the status and target columns dropped; the budget on the section's Settings line.
WITHOUT_TARGETS = """
### Phase 5: Playground

**Settings**: max_frame 100M | num_envs 2048 | max_session 4

#### Phase 5.3: Manipulation

| ENV | MA | SPEC_NAME | HF Data |
|-----|-----|-----------|---------|
| playground/PandaPickCube | 4400.0 | ppo_playground_loco | [run](https://example.org/c) |
| playground/PandaPickCubeCartesian | 11.0 | ppo_playground_manip | [run](https://example.org/d) |
"""


def test_both_table_shapes_are_read():
    old = parse_benchmarks(WITH_TARGETS)
    assert sorted(old) == ["PandaOpenCabinet", "PandaPickCube", "PandaPickCubeCartesian"]
    assert (old["PandaPickCube"].score, old["PandaPickCube"].target, old["PandaPickCube"].symbol) == (4586.13, 4500.0,
                                                                                                     "✅")
    assert (old["PandaPickCubeCartesian"].score, old["PandaPickCubeCartesian"].target) == (10.58, 12.0)  # * and ~
    assert (old["PandaOpenCabinet"].score, old["PandaOpenCabinet"].target) == (None, 1250.0)
    assert old["PandaPickCube"].line == WITH_TARGETS.splitlines().index(
        next(line for line in WITH_TARGETS.splitlines() if "playground/PandaPickCube |" in line)) + 1
    new = parse_benchmarks(WITHOUT_TARGETS)
    assert {env: (r.score, r.target, r.symbol) for env, r in new.items()} == {
        "PandaPickCube": (4400.0, None, None), "PandaPickCubeCartesian": (11.0, None, None)}


def test_csv_and_yaml_files():
    csv_rows = parse_table("env,score,target\nplayground/PandaPickCube,10,20\nPandaOpenCabinet,5,\n", "r.csv")
    assert {e: (r.score, r.target) for e, r in csv_rows.items()} == {"PandaPickCube": (10.0, 20.0),
                                                                      "PandaOpenCabinet": (5.0, None)}
    listed = parse_table("- {env: PandaPickCube, score: 3, target: 4}\n", "r.yaml")
    mapped = parse_table("PandaPickCube: {score: 3, target: 4}\n", "r.yml")
    assert listed == mapped and listed["PandaPickCube"].score == 3.0
    with pytest.raises(BraxDiffError, match="a CSV needs the columns env and score"):
        parse_table("name,value\nx,1\n", "r.csv")
    with pytest.raises(BraxDiffError, match="expected a list"):
        parse_table("just text\n", "r.yaml")


def test_status_is_the_ratio_to_the_target_or_the_tables_own_without_one():
    assert status(100.0, 100.0, None) == (1.0, "pass")
    assert status(85.0, 100.0, "✅") == (0.85, "near")  # the target decides, not the table's symbol
    assert status(79.9, 100.0, None) == (0.799, "fail")
    assert status(-1.0, -2.0, None) == (None, "pass")  # a non-positive target: no ratio
    assert status(5.0, None, "⚠️") == (None, "near")
    assert status(5.0, None, None) == (None, "unknown")
    assert status(None, 10.0, "✅") == (None, "unknown")


def test_each_row_keeps_its_variant_budget_and_run_and_the_rows_not_taken():
    rows, skipped = read_benchmarks(WITH_TARGETS)
    cartesian = rows["PandaPickCubeCartesian"]
    assert (cartesian.variant, cartesian.frames, cartesian.frames_from, cartesian.run, cartesian.algorithm) == (
        "ppo_playground_manip", 65_000_000, "Frames column", "run_b_2026_03_15", "PPO")
    assert cartesian.frames_line == cartesian.line  # the row's own cell
    assert rows["PandaOpenCabinet"].frames is None  # "-" and no Settings line above: no budget
    # The SAC row continues PandaPickCube's; a second PPO row for it is named, not silently kept.
    assert [(s.env, s.why) for s in skipped] == [
        ("PandaPickCube", "algorithm SAC: brax-diff compares PPO"),
        ("PandaPickCube", f"a second PPO row for PandaPickCube: the first, line {rows['PandaPickCube'].line}, "
                          "is joined")]
    assert rows["PandaPickCube"].score == 4586.13  # the first row wins, and says so
    later, none = read_benchmarks(WITHOUT_TARGETS)
    settings_line = WITHOUT_TARGETS.splitlines().index("**Settings**: max_frame 100M | num_envs 2048 | max_session 4") + 1
    assert none == () and {(r.frames, r.frames_from, r.frames_line) for r in later.values()} == {
        (100_000_000, "Settings line", settings_line)}
    # A heading of the Settings line's level or above ends its section.
    assert read_benchmarks(WITHOUT_TARGETS.replace("#### Phase 5.3", "### Phase 6"))[0]["PandaPickCube"].frames is None


def test_a_documented_command_line_budget_applies_to_its_section():
    text = ("### Phase 5\n\n```bash\nslm-lab run spec.yaml NAME train -s env=playground/ENV -s max_frame=2e7\n```\n\n"
            "| ENV | MA | SPEC_NAME |\n|---|---|---|\n| playground/PandaPickCube | 3 | v |\n")
    row = read_benchmarks(text)[0]["PandaPickCube"]
    assert (row.frames, row.frames_from, row.variant) == (20_000_000, "-s max_frame", "v")
    assert read_benchmarks(text.replace("max_frame=2e7", "max_frame=MAX_FRAME"))[0]["PandaPickCube"].frames is None


def test_frames_as_written():
    assert [frames_number(t) for t in ("100M", "65M", "1.5B", "2e5", "10e6", "100000000", "1,000", "20k")] == [
        100_000_000, 65_000_000, 1_500_000_000, 200_000, 10_000_000, 100_000_000, 1000, 20_000]
    assert [frames_number(t) for t in ("4e6-10e6", "-", "", None, "0", "-5M", "1.5", "abc")] == [None] * 8


def test_a_results_file_names_variants_budgets_and_other_algorithms():
    rows, skipped = read_table("env,score,target,variant,frames,status,algorithm\n"
                               "PandaPickCube,10,20,v1,50M,near,PPO\nPandaPickCube,11,20,v1,,,PPO\n"
                               "PandaOpenCabinet,3,4,,,,SAC\n", "r.csv")
    assert (rows["PandaPickCube"].variant, rows["PandaPickCube"].frames, rows["PandaPickCube"].symbol) == (
        "v1", 50_000_000, "⚠️")
    assert [s.why for s in skipped] == ["row 2: a second row for PandaPickCube: the first is joined",
                                        "row 3: algorithm SAC: brax-diff compares PPO"]


def test_a_results_file_with_a_byte_order_mark_reads_its_header(tmp_path):
    from brax_diff.compare.results import load

    path = tmp_path / "scores.csv"
    path.write_bytes("\ufeffenv,score,target\nCartpoleBalance,900,1000\n".encode("utf-8"))
    scores, _, _ = load(str(path), None)
    assert scores.rows["CartpoleBalance"].score == 900.0
    assert scores.rows["CartpoleBalance"].target == 1000.0


@pytest.mark.parametrize("text, limit", [
    ("[" * 3000 + "]" * 3000, "nesting deeper than"),
    # 9**6 values from 300 bytes: the bounded loader refuses it before building anything.
    ("a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcde", "bcdef")), "aliases expand past"),
], ids=["nested-3000-deep", "alias-bomb"])
def test_a_hostile_results_yaml_is_one_error_line(tmp_path, text, limit):
    from brax_diff.compare.results import load

    path = tmp_path / "scores.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BraxDiffError, match=limit):
        load(str(path), None)


# -- issue 35: results of more than one algorithm or spelling ---------------------------------

@pytest.mark.parametrize("text", [
    "Env, Score ,Target,Algorithm\nCartpoleBalance,500,900,SAC\nCartpoleBalance,800,900,PPO\n",
    "env,score,target,ALGORITHM\nCartpoleBalance,500,900,sac\nCartpoleBalance,800,900,ppo\n",
], ids=["spreadsheet-header", "upper-case-column"])
def test_a_csv_algorithm_column_is_read_whatever_its_case(text):
    # Before: "Algorithm" was never read, the SAC row (first) was joined as the PPO score.
    rows, skipped = read_table(text, "scores.csv")
    assert (rows["CartpoleBalance"].score, rows["CartpoleBalance"].target) == (800.0, 900.0)
    assert [s.why.lower() for s in skipped] == ["row 1: algorithm sac: brax-diff compares ppo"]


def test_a_yaml_row_list_reads_its_algorithm_key_whatever_its_case():
    rows, skipped = read_table("- {env: CartpoleBalance, score: 500, Algorithm: SAC}\n"
                               "- {env: CartpoleBalance, Score: 800}\n", "scores.yaml")
    assert rows["CartpoleBalance"].score == 800.0
    assert [s.why for s in skipped] == ["row 1: algorithm SAC: brax-diff compares PPO"]


def test_a_yaml_mapping_that_names_an_environment_twice_is_refused():
    # YAML keeps the last of two equal keys: the PPO score was lost without a word.
    with pytest.raises(BraxDiffError, match=r"^--results scores.yaml: CartpoleBalance is given twice \(lines 1 and 2\) "
                                            r"and YAML keeps only the last"):
        read_table("CartpoleBalance: {score: 800}\nCartpoleBalance: {score: 500, algorithm: SAC}\n", "scores.yaml")


def test_an_escaped_pipe_is_inside_its_cell_and_a_capitalised_prefix_is_read():
    table = ("| ENV | Algorithm | MA | SPEC_NAME |\n|---|---|---|---|\n"
             "| playground/CartpoleBalance | PPO | 800 | ppo\\|x |\n"
             "| Playground/CartpoleBalance | PPO | 3 | s |\n"
             "| playground/cartpolebalance | SAC | 5 | s |\n")
    rows, skipped = read_benchmarks(table)
    assert (rows["CartpoleBalance"].score, rows["CartpoleBalance"].variant) == (800.0, "ppo|x")
    # The second spelling is named, not dropped: before, "Playground/" rows vanished.
    assert [(s.env, s.line, s.why) for s in skipped] == [
        ("CartpoleBalance", 4, "a second PPO row for CartpoleBalance: the first, line 3, is joined"),
        ("cartpolebalance", 5, "algorithm SAC: brax-diff compares PPO")]
