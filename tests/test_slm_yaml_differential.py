"""Issue 26, item 2 (YAML): brax-diff's resolution of an SLM-Lab spec must equal what SLM-Lab
itself loads - ``set_variables`` (``-s``/``--set``) on the text, then ``yaml.safe_load`` (or
``json.loads`` for .json) - or the variant is reported as one SLM-Lab cannot run.

The Hypothesis test generates small specs (anchors, ``<<`` merges, one or two merge keys, lists
of merged mappings, numbers written as YAML 1.1 reads them or not, placeholders) and compares.
CI budget: 150 examples, derandomized, no deadline: about 3 s."""

from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import slm_fixtures as fx
from brax_diff.errors import SpecError
from brax_diff.extractors.slm.extractor import SlmExtractor
from brax_diff.extractors.slm.spec import SpecFile, substitute
from brax_diff.sources.repository import Repository
from gitfixture import make_repo


def slm_lab_loads(text: str, sets: dict[str, str], name: str, is_json: bool = False):
    """What SLM-Lab's spec_util.get parses (before its own key checks): the oracle."""
    substituted = substitute(text, sets)  # SLM-Lab's set_variables, restated (tested below)
    return (json.loads(substituted) if is_json else yaml.safe_load(substituted))[name]


def test_substitute_is_slm_labs_set_variables():
    # SLM-Lab: a number replaces "${k}" (quotes too) with str(int(x)) or str(x); other text as is.
    text = 'a: "${lr}"\nb: ${lr}\nc: ${frames}\nd: "${env}"\n'
    assert substitute(text, {"lr": "1e-5", "frames": "1e7", "env": "playground/X"}) == \
        'a: 1e-05\nb: 1e-05\nc: 10000000\nd: "playground/X"\n'


# -- named cases: each failed before ---------------------------------------------------------------

def test_of_two_separate_merge_keys_the_later_wins_as_in_pyyaml():
    text = textwrap.dedent("""
        _a: &a {lr: 1.0, gamma: 0.9}
        _b: &b {lr: 2.0}
        v:
          <<: *a
          <<: *b
    """)
    assert slm_lab_loads(text, {}, "v") == {"lr": 2.0, "gamma": 0.9}
    assert SpecFile(text, "s.yaml").resolve("v").data == {"lr": 2.0, "gamma": 0.9}  # brax-diff gave lr 1.0


def test_a_list_of_merged_mappings_keeps_the_first_winning():
    text = "_a: &a {lr: 1.0}\n_b: &b {lr: 2.0, eps: 0.1}\nv:\n  <<: [*a, *b]\n"
    assert SpecFile(text, "s.yaml").resolve("v").data == slm_lab_loads(text, {}, "v") == {"lr": 1.0, "eps": 0.1}


def test_an_exponent_in_a_json_spec_is_a_number_as_json_loads_reads_it():
    text = '{"v": {"lr": 1e-3, "n": 4, "flag": true, "none": null, "s": "1e-3"}}'
    spec = SpecFile(text, "s.json").resolve("v")
    assert spec.data == slm_lab_loads(text, {}, "v", is_json=True) == {"lr": 0.001, "n": 4, "flag": True,
                                                                       "none": None, "s": "1e-3"}


def _variant_error(tmp_path, old: str, new: str, sets: dict[str, str]) -> tuple[str, int]:
    spec = textwrap.dedent(fx.SPEC).lstrip("\n")
    assert old in spec
    changed = spec.replace(old, new, 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: changed}])
    with pytest.raises(SpecError) as caught:
        SlmExtractor(Repository(path, "slm").resolve("HEAD"), sets=sets).variant("ppo_fx")
    return str(caught.value), changed.splitlines().index(new.splitlines()[0].rstrip("\n")) + 1


@pytest.mark.parametrize("old, new, sets, message", [
    # YAML 1.1 reads 1e-3 as the string '1e-3'; torch.optim.Adam compares it with 0.0 and fails.
    ("    lr: 2.5e-4\n", "    lr: 1e-3\n", {"max_frame": "1e6"},
     "agent.net.optim_spec.lr is the text '1e-3', which SLM-Lab passes on unconverted (YAML 1.1 reads an "
     "exponent without a '.' as text: write 1.0e-3); SLM-Lab cannot run this variant"),
    # --set lr=1e-5 puts 1e-05 in the text: a string again.
    ("    lr: 2.5e-4\n", '    lr: "${lr}"\n', {"max_frame": "1e6", "lr": "1e-5"},
     "agent.net.optim_spec.lr is the text '1e-05', which SLM-Lab passes on unconverted (YAML 1.1 reads an "
     "exponent without a '.' as text: write 1.0e-05); SLM-Lab cannot run this variant"),
    ("      training_epoch: 5\n", "      training_epoch: 16.0\n", {"max_frame": "1e6"},
     "agent.algorithm.training_epoch is 16.0, not an integer (SLM-Lab's update loops range(training_epoch)); "
     "SLM-Lab cannot run this variant"),
    ("      training_epoch: 5\n", "      training_epoch: -2\n", {"max_frame": "1e6"},
     "agent.algorithm.training_epoch is -2: SLM-Lab's update loops range(training_epoch) runs no pass, so the "
     "variant never trains; SLM-Lab cannot run this variant"),
    ('  max_frame: "${max_frame}"\n', "  max_frame: 1e7\n", {},
     "env.max_frame is str '1e7'; SLM-Lab's spec check (spec_util.check) requires int or float; "
     "SLM-Lab cannot run this variant"),
])
def test_a_value_slm_lab_does_not_convert_is_a_variant_it_cannot_run(tmp_path, old, new, sets, message):
    error, line = _variant_error(tmp_path, old, new, sets)
    assert error == f"{fx.SPEC_PATH}: line {line}: variant ppo_fx: {message}"


def test_numbers_yaml_reads_as_numbers_still_resolve(tmp_path):
    spec = textwrap.dedent(fx.SPEC).lstrip("\n").replace("    lr: 2.5e-4\n", "    lr: 1.0e-3\n", 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    facts = SlmExtractor(Repository(path, "slm").resolve("HEAD"), sets={"max_frame": "1e6"}).variant("ppo_fx").facts
    assert facts["learning_rate"].value == 0.001


# -- the differential: generated specs ----------------------------------------------------------------

KEYS = ("lr", "gamma", "eps", "n", "name")
NUMBER_TEXTS = ("1e-3", "1.0e-3", "3", "-2", "16.0", "0.5", "1e7", "1.0e+7", "1_000", "0x10", ".5", "+1", "~",
                "true", "yes", "on", "null", "3e-4", "2.5e-4", "'1e-3'", '"7"', "PPO", "1:30")
scalars = st.sampled_from(NUMBER_TEXTS + ("${x}", '"${x}"'))
mappings = st.dictionaries(st.sampled_from(KEYS), scalars, min_size=1, max_size=4)


@st.composite
def specs(draw) -> tuple[str, dict[str, str]]:
    anchors = draw(st.lists(mappings, min_size=1, max_size=3))
    lines = []
    for index, fields in enumerate(anchors):
        lines.append(f"_a{index}: &a{index}")
        lines += [f"  {k}: {v}" for k, v in fields.items()]
    lines.append("v:")
    merge_keys = draw(st.lists(st.lists(st.integers(0, len(anchors) - 1), min_size=1, max_size=3), max_size=2))
    for group in merge_keys:
        lines.append(f"  <<: *a{group[0]}" if len(group) == 1 else f"  <<: [{', '.join(f'*a{i}' for i in group)}]")
    own = draw(st.dictionaries(st.sampled_from(KEYS), scalars, max_size=3))
    lines += [f"  {k}: {v}" for k, v in own.items()]
    if not merge_keys and not own:
        lines.append("  only: 1")
    sets = draw(st.sampled_from([{}, {"x": "1e-5"}, {"x": "1e7"}, {"x": "3"}, {"x": "Adam"}]))
    return "\n".join(lines) + "\n", sets


@settings(max_examples=150, deadline=None, derandomize=True)
@given(specs())
def test_brax_diff_resolves_a_spec_as_slm_lab_loads_it(generated):
    text, sets = generated
    expected = slm_lab_loads(text, sets, "v")
    try:
        got = SpecFile(text, "s.yaml", sets if "${x}" in text else {}).resolve("v").data
    except SpecError as exc:
        # Refused: only for a placeholder left unset (SLM-Lab fails on it too) or an unused set.
        assert "${x}" in str(exc) or "placeholder" in str(exc), exc
        return
    if "${x}" not in text:
        expected = slm_lab_loads(text, {}, "v")
    assert got == expected


def test_mse_loss_with_reduction_sum_is_not_read_as_a_mean(tmp_path):
    # SLM-Lab's get_loss_fn passes the spec's other keys to the class: reduction="sum" sums the
    # squared errors. brax-diff read the class name and reported mse (a mean).
    spec = textwrap.dedent(fx.SPEC).lstrip("\n").replace("  loss_spec: {name: MSELoss}\n",
                                                         "  loss_spec: {name: MSELoss, reduction: sum}\n", 1)
    path = tmp_path / "SLM-Lab"
    make_repo(path, [{**fx.repo_files(), fx.SPEC_PATH: spec}])
    fact = SlmExtractor(Repository(path, "slm").resolve("HEAD"), sets={"max_frame": "1e6"}).variant("ppo_fx") \
        .facts["value_loss"]
    assert fact.value is None
    assert fact.unknown == "value_loss: torch.nn.MSELoss(reduction='sum') is not a mean over elements"
