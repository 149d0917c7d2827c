"""The whole SLM-Lab spec file is loaded as SLM-Lab loads it (issue 35, item 3): spec_util.get
runs yaml.safe_load on the whole file before it picks a variant, so a file it cannot load runs
no variant, and a key YAML does not read as text names no variant."""

from __future__ import annotations

import textwrap

import pytest
import yaml

import slm_fixtures as fx
from brax_diff.cli import main
from brax_diff.errors import SpecError
from extractors.slm.spec import SpecFile
from gitfixture import make_repo

BASE = "_base: &base\n  agent: {name: x}\n  env: {name: e}\nppo: {<<: *base}\n"


@pytest.mark.parametrize("other, problem", [
    ("other: {x: !foo 1}", "could not determine a constructor for the tag '!foo'"),
    ("other: {x: !!python/tuple [1, 2]}", "could not determine a constructor for the tag "
                                          "'tag:yaml.org,2002:python/tuple'"),
    ("other: {x: !!int abc}", "tag:yaml.org,2002:int 'abc': invalid literal for int()"),
    ("other: {x: 2020-13-45}", "tag:yaml.org,2002:timestamp '2020-13-45': month must be in 1..12"),
    ("other: {? [a, b] : 1}", "found unhashable key"),
    ("other: {x: !!bool maybe}", "tag:yaml.org,2002:bool 'maybe'"),
], ids=["unknown-tag", "python-tuple", "int-abc", "invalid-date", "complex-key", "bool-maybe"])
def test_another_variant_safe_load_refuses_makes_the_file_an_error(other, problem):
    # Before: `ppo` was built alone and reported as if SLM-Lab could run it.
    with pytest.raises(SpecError) as caught:
        SpecFile(BASE + other + "\n", "spec.yaml").resolve("ppo")
    assert str(caught.value).startswith("spec.yaml: SLM-Lab cannot load this file (yaml.safe_load fails at line 5: ")
    assert problem in str(caught.value) and str(caught.value).endswith("so no variant of it runs")


@pytest.mark.parametrize("key, read_as", [("on", "True"), ("null", "None"), ("yes", "True"), ("~", "None")])
def test_a_variant_whose_key_yaml_reads_as_no_string_is_no_variant(key, read_as):
    # safe_load builds `on:` as True: spec_dict["on"] is not there, SLM-Lab's assert fails.
    spec = SpecFile(BASE + f"{key}: {{agent: {{name: y}}}}\n", "spec.yaml")
    assert spec.variants() == ["ppo"] and spec.resolve("ppo").data["agent"] == {"name": "x"}
    with pytest.raises(SpecError, match=rf"^spec.yaml: no variant '{key}'; YAML reads the key {key}: as {read_as}, "
                                        r"which SLM-Lab's lookup by name never finds \(choose from: ppo\)$"):
        spec.resolve(key)


SHAPES = ["other: !!int [1]", "other: {x: !!map [1]}", "other: {x: !!set {a, b}}", "other: {x: !!omap [1]}",
          "other: {x: !!omap [x: 1]}", "other: {<<: 3}", "other: {<<: [1]}", "other: &r [*r]", "? !!set {x}\n: 1",
          "other: {x: !!binary YWJj}", "other: {!!int 1: 2}", "other: {x: !!float abc}", "other: {x: !!str [1]}",
          "other: {x: !!seq {a: 1}}", "other: {= : 1}", "other: {x: !!null 3}", "!!int abc: {x: 1}", "!!int 3: {x: 1}",
          "other: {<<: {<<: 5}}", "other: !!map {<<: [*base, {x: !!int q}]}", "other: {? {a: 1} : 1}",
          "other: {x: !!timestamp 2001-12-14}", "other: {x: 1e3, y: .inf}"]


@pytest.mark.parametrize("other", SHAPES)
def test_the_file_loads_here_exactly_when_safe_load_loads_it(other):
    """SLM-Lab's loader replayed on each shape: brax-diff refuses the file iff yaml.safe_load does."""
    text = BASE + other + "\n"
    try:
        yaml.safe_load(text)
        loads = True
    except Exception:  # noqa: BLE001 (PyYAML lets ValueError and KeyError escape too)
        loads = False
    try:
        SpecFile(text, "spec.yaml").resolve("ppo")
        ours = True
    except SpecError:
        ours = False
    assert ours == loads


def test_an_alias_bomb_in_another_variant_costs_the_files_size_not_its_expansion():
    # safe_load shares an alias's object: SLM-Lab loads this; the check visits each node once.
    levels = "".join(f"_a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 9)}]\n" for i in range(1, 12))
    spec = SpecFile(BASE + "_a0: &a0 [1]\n" + levels, "spec.yaml")
    assert spec.resolve("ppo").data["env"] == {"name": "e"}


def test_extract_slm_names_the_unloadable_file_in_one_error_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = textwrap.dedent(fx.SPEC).lstrip("\n") + "broken_other:\n  agent: {x: !!python/tuple [1, 2]}\n"
    make_repo(tmp_path / "SLM-Lab", [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    code = main(["extract", "slm", "--repo", str(tmp_path / "SLM-Lab"), "--set", "max_frame=1000",
                 "--variant", "ppo_fx", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {fx.SPEC_PATH}: SLM-Lab cannot load this file (yaml.safe_load fails at line ")


def test_a_spec_of_more_values_than_the_limit_stops_while_composing():
    # Issue 35 item 6: a 52 MiB spec (under the 64 MiB file cap) composed for 435 s to a
    # MemoryError; composing now stops at the 200,000th value (about ten seconds of PyYAML).
    from brax_diff.safety.limits import LimitExceeded

    text = "v:\n  agent:\n" + "".join(f"    k{i}: {i}\n" for i in range(150_000))
    with pytest.raises(LimitExceeded, match=r"^big.yaml: line 100000: more than 200000 values \(limit\)$"):
        SpecFile(text, "big.yaml")
