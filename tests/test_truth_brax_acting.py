"""Brax readers take what the code uses where it acts (issue 26, item 1): the arguments
``optax.adam``, ``clip_by_global_norm`` and ``compute_gae`` receive, the partial that binds the
loss last, the clip that computes the surrogate, the loss as ``total_loss`` combines it - not
the first match of a shape nor a ``train()`` parameter.

Each case is a hand-written commit on top of the fixture Brax (``brax_fixtures``)."""

from __future__ import annotations

import pytest

import brax_fixtures as fx
from brax_diff.extractors.brax.extractor import BraxExtractor
from brax_diff.sources.repository import Repository
from gitfixture import make_repo


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


PARTIAL_OPEN = "  loss_fn = functools.partial(\n      ppo_losses.compute_ppo_loss,\n"
SECOND_PARTIAL = _replace(fx.TRAIN_NEW, "\n  def minibatch_step(",
                          "  loss_fn = functools.partial(loss_fn, discounting=0.5)\n\n  def minibatch_step(")
DEBUG_PARTIAL = _replace(fx.TRAIN_NEW, PARTIAL_OPEN,
                         "  debug_fn = functools.partial(ppo_losses.compute_ppo_loss, discounting=0.1,\n"
                         "                               gae_lambda=0.1)\n" + PARTIAL_OPEN)
DEBUG_ADAM = _replace(fx.TRAIN_NEW, "  optimizer = optax.adam(learning_rate=learning_rate, eps=1e-6)\n",
                      "  debug_optimizer = optax.adam(learning_rate=0.5)\n"
                      "  optimizer = optax.adam(learning_rate=learning_rate, eps=1e-6)\n")
SCALED_ADAM = _replace(fx.TRAIN_NEW, "optax.adam(learning_rate=learning_rate, eps=1e-6)",
                       "optax.adam(learning_rate=learning_rate * 0.1, eps=1e-6)")
SCALED_NORM = _replace(fx.TRAIN_NEW, "optax.clip_by_global_norm(max_grad_norm)",
                       "optax.clip_by_global_norm(max_grad_norm * 2)")
DEBUG_CLIP = _replace(fx.LOSSES_NEW, "  surrogate = jnp.clip(",
                      "  debug_ratio = jnp.clip(rho_s, 1 - 0.5, 1 + 0.5)\n  surrogate = jnp.clip(")
SCALED_GAE = _replace(_replace(fx.LOSSES_NEW, "      lambda_=gae_lambda,\n", "      lambda_=gae_lambda * 0.5,\n"),
                      "      discount=discounting,\n", "      discount=discounting * 0.5,\n")
TOTAL_FACTOR = _replace(fx.LOSSES_NEW, "  return policy_loss + v_loss + entropy_loss\n",
                        "  return policy_loss + 2.0 * v_loss + entropy_loss\n")

CASES = {"second_partial": {fx.TRAIN: SECOND_PARTIAL}, "debug_partial": {fx.TRAIN: DEBUG_PARTIAL},
         "debug_adam": {fx.TRAIN: DEBUG_ADAM}, "scaled_adam": {fx.TRAIN: SCALED_ADAM},
         "scaled_norm": {fx.TRAIN: SCALED_NORM}, "debug_clip": {fx.LOSSES: DEBUG_CLIP},
         "scaled_gae": {fx.LOSSES: SCALED_GAE}, "total_factor": {fx.LOSSES: TOTAL_FACTOR}}


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    root = tmp_path_factory.mktemp("acting")
    base = {**fx.BRAX_OLD, **fx.BRAX_NEW}
    shas = make_repo(root / "brax", [fx.BRAX_OLD, fx.BRAX_NEW] + [{**base, **files} for files in CASES.values()])
    playground = make_repo(root / "playground", fx.PLAYGROUND_COMMITS)
    return root, dict(zip(["old", "new", *CASES], shas)), playground


def facts(repos, case: str) -> dict:
    root, shas, playground = repos
    extractor = BraxExtractor(Repository(root / "brax", "brax").resolve(shas[case]),
                              Repository(root / "playground", "playground").resolve(playground[0]))
    return extractor.defaults().facts


@pytest.mark.parametrize("case, key, expected", [
    ("new", "discount", 0.99), ("new", "gae_lambda", 0.9), ("new", "learning_rate", 1e-3),
    ("new", "max_grad_norm", 0.7), ("new", "clip_epsilon", 0.2), ("new", "value_loss_coef", 0.4),
    ("second_partial", "discount", 0.5),  # the partial that wraps the first one binds last
    ("debug_partial", "discount", 0.99),  # an unused partial before the real one binds nothing
    ("debug_partial", "gae_lambda", 0.9),
    ("debug_adam", "learning_rate", 1e-3),  # the optimizer that runs, not the first adam
    ("scaled_adam", "learning_rate", 1e-4),  # what adam receives, not train()'s parameter
    ("scaled_norm", "max_grad_norm", 1.4),  # what clip_by_global_norm receives
    ("debug_clip", "clip_epsilon", 0.2),  # the clip of the surrogate, not the first jnp.clip
    ("scaled_gae", "gae_lambda", 0.45),  # what compute_gae receives, not the partial's binding
    ("scaled_gae", "discount", 0.495),
    ("total_factor", "value_loss_coef", 0.8),  # total_loss weighs the value loss twice
])
def test_the_value_is_what_the_code_uses_where_it_acts(repos, case, key, expected):
    fact = facts(repos, case)[key]
    assert fact.value == pytest.approx(expected), (fact.value, fact.provenance)
