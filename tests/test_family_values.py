"""A family's values as its environments train with them (:mod:`brax_diff.facts.family`): the
family config's value only where some environment trains with it, never a base value none uses."""

from __future__ import annotations

from brax_diff.facts.family import as_trained
from brax_diff.facts.model import Extraction, Fact, Provenance

AT = Provenance("https://github.com/google-deepmind/mujoco_playground", "a" * 40, "config.py", 3)
ENV_AT = Provenance("https://github.com/google-deepmind/mujoco_playground", "a" * 40, "config.py", 9)


def extraction(scope: dict, **values) -> Extraction:
    out = Extraction("brax", {}, scope)
    for key, value in values.items():
        out.add(Fact(key, None, (), unknown=f"{key}: cannot read") if value is Ellipsis
                else Fact(key, value, (ENV_AT if scope.get("env") else AT,), "read"))
    return out


def test_a_base_value_no_environment_trains_with_is_never_the_familys():
    family = extraction({"family": "manipulation"}, discount=0.9, learning_rate=1e-4, num_envs=1, entropy_coef=0.01,
                        max_grad_norm=1.0)
    envs = {"A": extraction({"env": "A"}, discount=0.97, learning_rate=1e-4, num_envs=2048, entropy_coef=0.01,
                            max_grad_norm=...),
            "B": extraction({"env": "B"}, discount=0.97, learning_rate=3e-4, num_envs=1024, entropy_coef=0.01,
                            max_grad_norm=1.0),
            "C": extraction({"env": "C"}, discount=0.97, learning_rate=3e-4, num_envs=4096, entropy_coef=0.01,
                            max_grad_norm=1.0)}
    out = as_trained(family, envs)
    # All three train with 0.97: the family is 0.97, with the environment's line.
    assert (out.facts["discount"].value, out.facts["discount"].provenance) == (0.97, (ENV_AT,))
    assert "every environment of the family trains with it" in out.facts["discount"].note
    # One of three trains with the base's learning rate: kept, and how many say so.
    assert out.facts["learning_rate"].value == 1e-4
    assert out.facts["learning_rate"].note == "read; 1 of 3 environments train with it (A)"
    # None trains with num_envs 1, and they differ: unknown, naming each.
    assert out.facts["num_envs"].is_unknown
    assert out.facts["num_envs"].unknown == ("num_envs: no environment of the family trains with the family config's "
                                             "value; they train with 1024 in B; 2048 in A; 4096 in C: set per "
                                             "environment (the matrix; fix --env)")
    # All agree with the base: untouched. One unknown does not hide that the others use the base.
    assert out.facts["entropy_coef"] is family.facts["entropy_coef"]
    assert out.facts["max_grad_norm"].value == 1.0 and "2 of 3 environments" in out.facts["max_grad_norm"].note
    assert family.facts["num_envs"].value == 1  # the family's own extraction is not changed
