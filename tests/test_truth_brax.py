"""Brax refactors read as what they compute, not as the old shape (issue 10).

Each case is a hand-written commit on top of the fixture Brax (``brax_fixtures``): the
value comes from the arithmetic the code does, or the key is explicitly unknown.
"""

from __future__ import annotations

import pytest

import brax_fixtures as fx
from brax_diff.sources.repository import Repository
from brax_diff.facts.vocabulary import KEYS
from brax_diff.extractors.brax.extractor import BraxExtractor
from gitfixture import make_repo

SPLIT_VF = fx.LOSSES_NEW.replace(
    "  v_loss = jnp.mean(v_loss) * 0.5 * vf_coefficient\n",
    "  v_loss = jnp.mean(v_loss) * vf_coefficient\n  v_loss = v_loss * 0.5\n")
TWICE_EPS = fx.LOSSES_NEW.replace("jnp.clip(rho_s, 1 - clipping_epsilon, 1 + clipping_epsilon)",
                                  "jnp.clip(rho_s, 1 - 2 * clipping_epsilon, 1 + 2 * clipping_epsilon)")
L1 = fx.LOSSES_NEW.replace("  v_loss = v_error * v_error\n", "  v_loss = jnp.abs(v_error)\n")
REASSIGNED = fx.TRAIN_NEW.replace(
    "  normalize = lambda x, y: x\n",
    "  reward_scaling = reward_scaling * 3\n  num_minibatches = num_minibatches * 2\n  normalize = lambda x, y: x\n")
SECOND_TRAIN = fx.TRAIN_NEW + "\n\n" + fx.TRAIN_NEW[fx.TRAIN_NEW.index("def train("):].replace(
    "    num_envs: int = 4,\n", "    num_envs: int = 8,\n")
DEVICE_LENGTH = fx.TRAIN_NEW.replace("length=batch_size * num_minibatches // num_envs)",
                                     "length=batch_size * num_minibatches // jax.device_count())")

# The entropy cost is computed when the step runs (a decay on the carry): not decided statically.
RUNTIME_ENTROPY = fx.TRAIN_CALL_BINDING.replace(
    "    current_entropy_cost = jnp.array(entropy_cost, dtype=jnp.float32)\n",
    "    current_entropy_cost = entropy_cost * (1.0 - state.progress)\n")
# The call hands the loss a mapping made outside the files read: the call is not followed.
UNFOLLOWED_KWARGS = fx.TRAIN_CALL_BINDING.replace(
    "    _, grads = loss_and_pgrad_fn(params, normalizer_params, data,\n"
    "                                 entropy_cost=entropy_cost)\n",
    "    options = acting.loss_options(entropy_cost)\n"
    "    _, grads = loss_and_pgrad_fn(params, normalizer_params, data, **options)\n")

CASES = {"split_vf": {fx.LOSSES: SPLIT_VF}, "twice_eps": {fx.LOSSES: TWICE_EPS}, "l1": {fx.LOSSES: L1},
         "reassigned": {fx.TRAIN: REASSIGNED}, "second_train": {fx.TRAIN: SECOND_TRAIN},
         "device_length": {fx.TRAIN: DEVICE_LENGTH},
         "call_binding": {fx.TRAIN: fx.TRAIN_CALL_BINDING, fx.GRADIENTS: fx.GRADIENTS_TEXT},
         "runtime_entropy": {fx.TRAIN: RUNTIME_ENTROPY, fx.GRADIENTS: fx.GRADIENTS_TEXT},
         "unfollowed_kwargs": {fx.TRAIN: UNFOLLOWED_KWARGS, fx.GRADIENTS: fx.GRADIENTS_TEXT}}


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("truth")
    base = {**fx.BRAX_OLD, **fx.BRAX_NEW}
    commits = [fx.BRAX_OLD, fx.BRAX_NEW] + [{**base, **files} for files in CASES.values()]
    shas = make_repo(root / "brax", commits)
    playground = make_repo(root / "playground", fx.PLAYGROUND_COMMITS)
    return root, dict(zip(["old", "new", *CASES], shas)), playground


def extractor(repos, case: str) -> BraxExtractor:
    root, shas, playground = repos
    return BraxExtractor(Repository(root / "brax", "brax").resolve(shas[case]),
                         Repository(root / "playground", "playground").resolve(playground[0]))


def test_a_coefficient_split_over_two_statements_is_their_product(repos):
    facts = extractor(repos, "split_vf").defaults().facts
    assert facts["value_loss_coef"].value == pytest.approx(0.8 * 0.5)  # not 0.8, the first statement alone
    lines = {p.line for p in facts["value_loss_coef"].provenance if p.path == fx.LOSSES}
    assert lines == {fx.line_of(SPLIT_VF, "v_loss = jnp.mean(v_loss) * vf_coefficient"),
                     fx.line_of(SPLIT_VF, "v_loss = v_loss * 0.5")}
    assert "v_loss = v_loss * 0.5" in facts["value_loss_coef"].note


def test_a_clip_range_of_twice_epsilon_is_read_as_clipped(repos):
    facts = extractor(repos, "twice_eps").defaults().facts
    assert facts["clip_epsilon"].value == pytest.approx(0.4)  # train() default 0.2, doubled in the clip
    assert "not 1 ± clipping_epsilon" in facts["clip_epsilon"].note
    assert facts["clip_epsilon_final"].value == pytest.approx(0.4)
    assert extractor(repos, "new").defaults().facts["clip_epsilon"].value == 0.2


def test_an_absolute_error_is_an_l1_value_loss(repos):
    facts = extractor(repos, "l1").defaults().facts
    assert facts["value_loss"].value == "l1"
    assert facts["value_loss_coef"].value == pytest.approx(0.4)
    assert extractor(repos, "new").defaults().facts["value_loss"].value == "mse"


def test_a_parameter_reassigned_inside_train_acts_with_its_new_value(repos):
    facts = extractor(repos, "reassigned").defaults().facts
    assert facts["reward_scale"].value == 6.0  # 2.0 * 3
    assert facts["minibatches_per_epoch"].value == 8
    assert facts["unrolls_per_update"].value == 16 * 8 // 4  # batch_size * num_minibatches // num_envs
    assert fx.line_of(REASSIGNED, "reward_scaling = reward_scaling * 3") in {
        p.line for p in facts["reward_scale"].provenance if p.path == fx.TRAIN}


def test_the_second_def_train_is_the_one_that_runs(repos):
    assert extractor(repos, "second_train").defaults().facts["num_envs"].value == 8


def test_a_length_computed_at_run_time_is_unknown_with_why(repos):
    x = extractor(repos, "device_length").defaults()
    fact = x.facts["unrolls_per_update"]
    assert fact.value is None and "jax.device_count()" in fact.unknown and "computed at run time" in fact.unknown
    assert any(f.key == "unrolls_per_update" and f.kind == "pattern_not_found" for f in x.findings)
    assert x.facts["transitions_per_update"].is_unknown  # derived from it
    assert set(x.facts) == set(KEYS)


def test_a_config_key_train_does_not_accept_is_not_effective(repos):
    # the older train() has no max_grad_norm: the locomotion config's 1.0 never reaches it
    family = extractor(repos, "old").family("locomotion")
    assert family.value("max_grad_norm") is None
    assert any(f.kind == "unknown_parameter" and "'max_grad_norm'" in f.message and "not an effective value"
               in f.message for f in family.findings)
    assert extractor(repos, "new").family("locomotion").value("max_grad_norm") == 1.0


def train_lines(fact) -> set[int]:
    return {p.line for p in fact.provenance if p.path == fx.TRAIN}


def test_a_value_passed_where_the_loss_is_called_is_the_one_it_receives(repos):
    # the partial lacks entropy_cost: the training step passes train()'s value down through two
    # partials and a keyword, and a wrapper forwards **kwargs to the loss (not its default 1e-4)
    x = extractor(repos, "call_binding")
    facts = x.defaults().facts
    assert facts["entropy_coef"].value == pytest.approx(1e-3)
    assert facts["entropy_coef_final"].value == pytest.approx(1e-3)
    passed = fx.line_of(fx.TRAIN_CALL_BINDING, "entropy_cost=entropy_cost)")  # the keyword minibatch_step passes
    assert "loss_and_pgrad_fn(" in fx.TRAIN_CALL_BINDING.lstrip("\n").splitlines()[passed - 2]
    assert train_lines(facts["entropy_coef"]) == {fx.line_of(fx.TRAIN_CALL_BINDING, "entropy_cost: float = 1e-3"),
                                                   passed}
    assert x.family("dm_control").value("entropy_coef") == pytest.approx(1e-3)
    assert x.env("FingerTurnEasy").value("entropy_coef") == pytest.approx(0.02)  # the config's, passed at the call
    assert facts["value_loss_coef"].value == pytest.approx(0.4)


def test_a_value_computed_when_the_step_runs_is_unknown_not_the_default(repos):
    x = extractor(repos, "runtime_entropy").defaults()
    fact = x.facts["entropy_coef"]
    passed = fx.line_of(RUNTIME_ENTROPY, "entropy_cost=entropy_cost)")
    assert fact.value is None and f"passed by minibatch_step() at {fx.TRAIN}:{passed}" in fact.unknown
    assert "is not decided" in fact.unknown
    assert sorted(f.key for f in x.findings if f.kind == "pattern_not_found" and "minibatch_step()" in f.message) == [
        "entropy_coef", "entropy_coef_final", "entropy_schedule"]


def test_a_call_whose_mapping_is_not_known_leaves_the_value_unknown(repos):
    x = extractor(repos, "unfollowed_kwargs").defaults()
    fact = x.facts["entropy_coef"]
    call = fx.line_of(UNFOLLOWED_KWARGS, "**options)")
    assert fact.value is None
    assert (f"the call in minibatch_step() at {fx.TRAIN}:{call} is not followed (`**options` is not a known dict)"
            in fact.unknown)
    assert any(f.key == "entropy_coef" and "minibatch_step()" in f.message for f in x.findings)
    assert x.facts["discount"].value == 0.99  # bound by the partial: still read
