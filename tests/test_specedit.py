"""brax_diff.fix.specedit: a new variant added to a spec file by a ruamel.yaml round trip."""

from __future__ import annotations

import textwrap

import pytest
import yaml

import slm_fixtures as fx
from brax_diff.errors import SpecError
from brax_diff.fix.specedit import SpecDocument, Write, set_path
from brax_diff.extractors.slm.spec import SpecFile

SPEC = textwrap.dedent(fx.SPEC).lstrip("\n")
SETS = {"max_frame": "1e6"}
HEADER = ["ppo_fx_brax: ppo_fx with two fixes (a test)."]
WRITES = [
    Write(("agent", "algorithm", "time_horizon"), 120, "BD001 batch-volume: Brax train.py:1"),
    Write(("agent", "algorithm", "val_loss_coef"), 0.25, "BD015 value-loss-coefficient: Brax losses.py:2"),
    Write(("agent", "net", "clip_grad_val"), None, "BD023 gradient-clipping: Brax train.py:3"),
    Write(("agent", "net", "optim_spec", "eps"), 1e-8, "BD021 adam-epsilon: Brax train.py:4"),
]


def written(writes=WRITES, name="ppo_fx_brax", base="ppo_fx", text=SPEC):
    return SpecDocument(text, fx.SPEC_PATH, SETS).with_variant(base, name, list(writes), HEADER)


def test_the_original_text_is_kept_byte_for_byte_and_the_variant_appended():
    text = written()
    assert text.startswith(SPEC)  # every comment, anchor, merge key and line number as it was
    new = text[len(SPEC):]
    assert new.startswith("\n# ppo_fx_brax: ppo_fx with two fixes (a test).\nppo_fx_brax:\n")
    assert new.count("\nppo_fx_brax:") == 1


def test_the_variant_reuses_the_anchors_and_sets_only_what_it_changes():
    new = written()[len(SPEC):]
    assert "      <<: *algorithm\n" in new  # merged, not copied
    assert "      <<: *net\n" in new
    assert "    <<: *env\n" in new
    assert "lam:" not in new and "entropy_coef_spec" not in new  # inherited through the merge
    assert "      time_horizon: 120  # BD001 batch-volume: Brax train.py:1\n" in new
    assert "      val_loss_coef: 0.25  # BD015 value-loss-coefficient: Brax losses.py:2\n" in new
    assert "      clip_grad_val: null  # BD023 gradient-clipping: Brax train.py:3\n" in new
    # a nested key under an anchored mapping (the optimizer below *net): the other keys are copied
    assert "        eps: 1.0e-08  # BD021 adam-epsilon: Brax train.py:4\n" in new
    assert "        lr: 0.00025\n" in new or "        lr: 2.5e-4\n" in new


def test_the_variant_reads_back_as_the_base_with_the_writes_and_the_others_as_before():
    text = written()
    before, after = SpecFile(SPEC, fx.SPEC_PATH, SETS), SpecFile(text, fx.SPEC_PATH, SETS)
    expected = before.resolve("ppo_fx").data
    for write in WRITES:
        expected = set_path(expected, write.path, write.value)
    got = after.resolve("ppo_fx_brax").data
    assert got == expected
    assert got["agent"]["net"]["clip_grad_val"] is None
    assert got["agent"]["net"]["optim_spec"]["eps"] == 1e-8 and isinstance(got["agent"]["net"]["optim_spec"]["eps"],
                                                                            float)
    assert after.variants() == before.variants() + ["ppo_fx_brax"]
    for variant in before.variants():
        old, new = before.resolve(variant), after.resolve(variant)
        assert (old.data, old.lines) == (new.data, new.lines)
    # PyYAML (SLM-Lab's reader) agrees on the whole file
    assert yaml.safe_load(text)["ppo_fx"] == yaml.safe_load(SPEC)["ppo_fx"]


def test_same_inputs_give_the_same_bytes():
    assert written() == written()


def test_one_document_writes_round_after_round_as_a_fresh_one_would():
    """The fix solver writes a variant a round from one parsed document: a write leaves nothing
    behind in it (another variant, a comment, an anchor) that a later write would carry."""
    document = SpecDocument(SPEC, fx.SPEC_PATH, SETS)
    rounds = [WRITES[:1], WRITES, [], WRITES[2:], WRITES]
    for writes in rounds:
        assert document.with_variant("ppo_fx", "ppo_fx_brax", list(writes), HEADER) == written(writes=writes)
    assert document.top_level() == SpecDocument(SPEC, fx.SPEC_PATH, SETS).top_level()


def test_a_variant_without_writes_is_the_base_itself():
    text = written(writes=[])
    after = SpecFile(text, fx.SPEC_PATH, SETS)
    assert after.resolve("ppo_fx_brax").data == SpecFile(SPEC, fx.SPEC_PATH, SETS).resolve("ppo_fx").data


def test_a_list_of_layers_is_written_in_the_style_of_the_one_it_replaces():
    layers = [{"LazyLinear": {"out_features": 64}}, {"SiLU": None}, {"LazyLinear": {"out_features": 64}},
              {"SiLU": None}]
    text = written([Write(("agent", "net", "critic_arc", "modules", "body", "Sequential"), layers, "BD028 x")])
    new = text[len(SPEC):]
    assert "        <<: *value\n" in new  # the arc's graph comes from its anchor
    assert "              - LazyLinear: {out_features: 64}\n              - SiLU:\n" in new
    got = SpecFile(text, fx.SPEC_PATH, SETS).resolve("ppo_fx_brax").data["agent"]["net"]["critic_arc"]
    assert got["modules"]["body"]["Sequential"] == layers
    assert got["graph"] == {"input": "x", "modules": {"body": ["x"]}, "output": "body"}


@pytest.mark.parametrize("name, message", [
    ("ppo_fx_small", "already has a top-level key 'ppo_fx_small'"),
    ("_net", "starting with a letter"),
    ("1bad", "use letters, digits and _"),
    ("with-dash", "use letters, digits and _"),
])
def test_a_name_already_taken_or_malformed_is_refused(name, message):
    with pytest.raises(SpecError, match=message):
        written(name=name)


def test_a_json_spec_is_refused():
    with pytest.raises(SpecError, match="writes YAML spec files; this one is JSON"):
        SpecDocument(fx.JSON_SPEC, fx.JSON_SPEC_PATH, SETS)


def test_a_file_ruamel_cannot_read_back_is_refused_in_one_line():
    # PyYAML keeps the last of two equal keys; ruamel.yaml refuses them: no round trip
    text = SPEC.replace("  meta: {max_session: 1}\n", "  meta: {max_session: 1}\n  meta: {max_session: 2}\n", 1)
    assert SpecFile(text, fx.SPEC_PATH, SETS).resolve("ppo_fx").data["meta"] == {"max_session": 2}
    with pytest.raises(SpecError) as info:
        SpecDocument(text, fx.SPEC_PATH, SETS)
    assert "cannot be round-tripped (ruamel.yaml:" in str(info.value)
    assert "\n" not in str(info.value)


ANCHORED_IN_A_VARIANT = """\
_net: &net
  type: MLPNet
  hid_layers: [64, 64]
unrelated: &other
  agent: {name: SAC}
ppo_a: &base
  agent:
    name: PPO
    algorithm: {gamma: 0.99, lam: 0.95}
    net: *net
  env: {name: x}
ppo_b:
  <<: *base
  meta: {max_frame: 10}
"""


@pytest.mark.parametrize("base, writes", [("ppo_b", []), ("ppo_b", WRITES[:1]), ("ppo_a", WRITES[1:2])])
def test_the_variant_is_written_as_the_whole_file_would_write_it(base, writes):
    """The variant's block comes from a dump of only the entries it refers to (speed): it must be
    the block a dump of the whole file gives, aliases to anchors defined in other variants included."""
    import io

    from brax_diff.fix import specedit

    document = SpecDocument(ANCHORED_IN_A_VARIANT, "spec.yaml")
    text = document.with_variant(base, "ppo_c", list(writes), [])
    root = document._root
    root["ppo_c"] = specedit._override(root[base], specedit._nest(writes)) if writes else specedit._shared(root[base])
    try:
        whole = io.StringIO()
        specedit._yaml().dump(root, whole)
        assert "unrelated" not in specedit._needed_for(root, "ppo_c")  # what the variant does not refer to
    finally:
        del root["ppo_c"]
    block = whole.getvalue()[whole.getvalue().rfind("\nppo_c:") + 1:]
    assert text.endswith(block) and "*base" in block
