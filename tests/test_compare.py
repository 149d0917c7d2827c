from brax_diff.compare.pairing import compare, key_order, values_equal
from brax_diff.facts.model import Extraction, Fact, Finding
from brax_diff.facts.vocabulary import KEYS, TOPICS
from report_fixtures import brax_extraction, slm_extraction


def test_numbers_compare_as_values_with_a_tolerance():
    assert values_equal(1e-3, 0.001)
    assert values_equal(0.1 + 0.2, 0.3)
    assert values_equal(2048, 2048.0)
    assert not values_equal(0.995, 0.99)
    assert not values_equal(1e-8, 1e-5)
    assert not values_equal(0.0, 1e-8)


def test_lists_compare_element_wise_and_tuples_become_lists():
    brax = Fact("policy_hidden_layers", (32,) * 4)
    assert brax.value == [32, 32, 32, 32]
    assert values_equal(brax.value, [32, 32, 32, 32.0])
    assert not values_equal(brax.value, [32, 32, 32])
    assert not values_equal([256, 256], [256, 128])


def test_none_bool_and_strings_are_strict():
    assert values_equal(None, None)
    assert not values_equal(None, 0)
    assert not values_equal(True, 1)  # a flag is not a count
    assert values_equal(False, False)
    assert not values_equal("silu", "relu")
    assert not values_equal("1", 1)


def test_pairs_every_key_either_side_has_in_report_order():
    diffs = compare(brax_extraction(), slm_extraction())
    by_key = {d.key: d for d in diffs}
    assert [d.key for d in diffs] == [k for k in key_order() if k in by_key]
    topics = [name for name, _ in TOPICS]
    assert [topics.index(d.topic) for d in diffs] == sorted(topics.index(d.topic) for d in diffs)
    # obs_clip, the evaluation protocol (resets included) and the env boundary (action bounding,
    # matmul precision, final observation, the env's action clip and reward floor): neither side of
    # these fixtures has them
    assert len(diffs) == len(KEYS) - 10

    batch = by_key["transitions_per_update"]
    assert batch.status == "differs" and batch.brax_value == 983040 and batch.slm_value == 61440
    assert batch.reason == "Brax 983040 vs SLM-Lab 61440 (Brax 16x larger)"
    assert by_key["clip_epsilon"].reason == "Brax 0.3 vs SLM-Lab 0.2 (Brax 1.5x larger)"
    assert by_key["learning_rate"].status == "match"  # 1e-3 on Brax, 0.001 in the spec
    assert by_key["learning_rate"].reason is None
    assert by_key["value_hidden_layers"].reason.endswith("(5 vs 3 entries)")
    assert by_key["max_grad_norm"].reason == "Brax null vs SLM-Lab 1.0"


def test_missing_side_says_why():
    slm = slm_extraction()
    diffs = {d.key: d for d in compare(brax_extraction(drop=("clip_epsilon",)), slm)}
    assert diffs["clip_epsilon"].status == "missing_brax"
    assert diffs["clip_epsilon"].brax is None and diffs["clip_epsilon"].slm_value == 0.2
    assert diffs["clip_epsilon"].reason == "no Brax value: the extractor found no setting for it"
    slm = slm_extraction(drop=("truncation",))
    assert {d.key: d for d in compare(brax_extraction(), slm)}["truncation"].status == "missing_slm"

    slm.find(Finding("pattern_not_found", "WARNING", "calc_gaes not found in math_util.py", key="truncation"))
    diffs = {d.key: d for d in compare(brax_extraction(), slm)}
    assert diffs["truncation"].reason == "no SLM-Lab value: calc_gaes not found in math_util.py"


def test_keys_limit_the_comparison_and_empty_sides_compare_to_nothing():
    diffs = compare(brax_extraction(), slm_extraction(), keys=["discount", "clip_epsilon"])
    assert [d.key for d in diffs] == ["clip_epsilon", "discount"]  # topic order: clip epsilon before discount
    empty = Extraction("slm", {}, {})
    assert compare(Extraction("brax", {}, {}), empty) == []
    assert {d.status for d in compare(brax_extraction(), empty)} == {"missing_slm"}
