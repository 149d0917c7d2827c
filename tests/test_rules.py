import json
import re
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from brax_diff.compare.pairing import Difference, compare
from brax_diff.errors import ConfigError
from brax_diff.facts.model import Fact
from brax_diff.compare.rules import (RISK_LEVELS, SEVERITIES, Context, classify, compile_predicate, load_rules,
                             recommended_order)
from brax_diff.facts.vocabulary import KEYS, TOPIC_TITLES
from report_fixtures import brax_extraction, slm_extraction


def classified(brax=None, slm=None, rules_file=None, fold=False, **kw):
    table = load_rules(rules_file)
    diffs = compare(brax or brax_extraction(), slm or slm_extraction())
    return {c.key: c for c in classify(diffs, table, fold=fold)}


def write_rules(tmp_path, text):
    path = tmp_path / "rules.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# -- the shipped table ----------------------------------------------------------------


def test_every_canonical_key_belongs_to_exactly_one_rule():
    table = load_rules()
    owners = Counter(key for rule in table.rules for key in rule.keys)
    assert set(owners) == set(KEYS)
    assert set(owners.values()) == {1}


def test_shipped_rules_are_complete():
    table = load_rules()
    codes = [r.code for r in table.rules]
    assert codes == sorted(codes) and len(set(codes)) == len(codes) == 53
    assert {r.topic for r in table.rules} == set(TOPIC_TITLES)  # every topic has a rule
    assert set(table.references) == {"andrychowicz2021", "huang2022", "engstrom2020", "pardo2018", "braylan2015",
                                     "pinto2018", "zakka2025", "kingma2015", "haarnoja2018", "espeholt2018",
                                     "schulman2016", "henderson2018", "chou2017", "fujita2018", "isaaclab2019",
                                     "playground86", "playground305"}
    for rule in table.rules:
        assert rule.rationale and rule.fix.text and rule.risk.level in RISK_LEVELS and rule.references
        assert all(case.then in SEVERITIES for case in rule.cases)


def test_shipped_rules_read_by_libyaml_equal_the_bounded_loader():
    from brax_diff.compare import rules

    fast = rules._shipped_rules(rules.SHIPPED_RULES.stat().st_mtime_ns)
    assert fast == rules._read_yaml(rules.SHIPPED_RULES)  # data and each rule's line
    assert len(fast[1]) == 53 and min(fast[1].values()) > 1


def test_every_shipped_fix_template_passes_the_sandbox_check():
    # Loading trusts the shipped templates (rules._shipped_template_sources); this is the check.
    from brax_diff.compare import rules
    from brax_diff.safety.sandbox import check_template

    sources = rules._shipped_template_sources()
    templates = [s for s in sources if "{" in s]
    assert len(templates) >= 20  # 21 of them hold Jinja syntax
    for source in sorted(sources):
        check_template(rules._TEMPLATES, source)


def test_a_user_file_template_is_still_checked_when_loaded(tmp_path):
    path = write_rules(tmp_path, """
        rules:
          - code: BD033
            fix: {spec: gamma, text: "{% for x in y %}{{ x }}{% endfor %}"}
    """)
    with pytest.raises(ConfigError, match="not allowed"):
        load_rules(path)


# -- classification with values like the real ones ------------------------------------


def test_dm_control_values_classify_like_the_code_says():
    c = classified()
    assert c["transitions_per_update"].severity == "CRITICAL"
    assert c["transitions_per_update"].rule == "BD001"
    assert c["transitions_per_update"].because == "one value is at least 4x the other"
    assert c["unrolls_per_update"].severity == "CRITICAL"
    assert c["max_grad_norm"].severity == "IMPORTANT"  # Brax does not clip, SLM-Lab clips at 1.0
    assert c["lr_final_factor"].severity == "IMPORTANT"  # 1.0 vs 0.033
    assert c["value_hidden_layers"].severity == "IMPORTANT"  # 5 layers vs 3
    assert c["policy_hidden_layers"].severity == "MINOR"
    assert c["kernel_init"].severity == "MINOR"
    assert c["minibatch_transitions"].severity == "MINOR"  # follows from the batch while batches differ


def test_classify_without_fixes_keeps_every_severity_and_leaves_fixes_out():
    brax, slm = brax_extraction(), slm_extraction()
    full = classify(compare(brax, slm), load_rules())
    bare = classify(compare(brax, slm), load_rules(), fixes=False)
    assert [(c.key, c.severity, c.because, c.rule) for c in bare] == [(c.key, c.severity, c.because, c.rule)
                                                                       for c in full]
    assert sum(c.fix is not None for c in full) >= 10 and all(c.fix is None for c in bare)


def test_matches_get_no_severity_and_no_fix():
    c = classified()
    for key in ("discount", "entropy_coef", "learning_rate", "num_envs", "reward_scale"):
        assert c[key].status == "match"
        assert c[key].severity is None and c[key].fix is None
    assert c["discount"].rule == "BD033"  # the rule is still named


def test_clip_epsilon_is_important_only_with_a_larger_brax_batch():
    assert classified()["clip_epsilon"].severity == "IMPORTANT"
    equal_batch = classified(slm=slm_extraction({"transitions_per_update": 983040}))
    assert equal_batch["clip_epsilon"].severity == "MINOR"
    assert equal_batch["transitions_per_update"].severity is None
    # Brax's batch larger but SLM-Lab's clip larger: no combination, 1.5x is below 2x
    assert classified(slm=slm_extraction({"clip_epsilon": 0.45}))["clip_epsilon"].severity == "MINOR"
    assert classified(slm=slm_extraction({"clip_epsilon": 0.1}))["clip_epsilon"].severity == "IMPORTANT"


def test_discount_severity_follows_the_effective_horizon():
    assert classified(slm=slm_extraction({"discount": 0.97}))["discount"].severity == "CRITICAL"
    assert classified(slm=slm_extraction({"discount": 0.994}))["discount"].severity == "IMPORTANT"


def test_the_reason_a_case_held_is_a_sentence_about_the_values_not_the_predicate():
    c = classified()
    assert c["max_grad_norm"].because == "Brax's value is none"  # any_of: the part that held
    assert c["std_max"].because == "the values differ"  # a cap above the action range's half-width: MINOR
    capped = classified(slm=slm_extraction({"std_max": 0.5}))["std_max"]
    assert (capped.severity, capped.because) == ("IMPORTANT", "Brax's value is none and SLM-Lab's value 0.5 is "
                                                              "below 1.0")
    missing = classified(slm=slm_extraction(drop=("truncation",)))["truncation"]
    assert missing.because == "SLM-Lab has no value"  # differs, one side missing
    assert c["lr_schedule"].because == "the values differ"  # key_in only picks the key
    assert c["value_hidden_layers"].because == "the lists differ in length"
    assert c["clip_epsilon"].because == ("Brax's value is larger and for `transitions_per_update`, "
                                         "Brax's value is larger")
    assert classified(slm=slm_extraction({"discount": 0.97}))["discount"].because == (
        "one side's effective horizon, 1 / (1 - value), is at least 2x the other's")
    for because in (x.because for x in c.values() if x.because):
        assert not re.search(r"[()]|\bnull\b|\bnot\b|is_|_of\b", because), because
    # The report's rule line reads as a sentence.
    from brax_diff.report.render import build_report, render_markdown

    model = build_report(brax_extraction(), slm_extraction(), load_rules(),
                         scope={"family": "dm_control", "env": None, "variant": "v", "spec": "s.yaml"})
    markdown = render_markdown(model)
    assert "- `max_grad_norm`: IMPORTANT because Brax's value is none. Fix:" in markdown
    assert "because (" not in markdown and "is null" not in markdown


def test_a_user_rule_says_why_in_words_too(tmp_path):
    path = write_rules(tmp_path, """
        rules:
          - code: BD023
            severity:
              - when: {all_of: [{slm_in: [1.0, 2.0]}, {not: {brax_is: 0.5}}, {not: brax_larger}]}
                then: CRITICAL
    """)
    assert classified(rules_file=path)["max_grad_norm"].because == (
        "SLM-Lab's value is 1.0 and Brax's value is none and Brax's value is not larger")


def test_fix_names_the_spec_key_and_a_value_templated_from_brax():
    c = classified()
    batch = c["transitions_per_update"].fix
    assert (batch.spec, batch.value) == ("agent.algorithm.time_horizon", 480)  # 983040 / 2048 envs
    assert batch.summary == "set `agent.algorithm.time_horizon: 480`"
    assert "983040 transitions" in batch.text
    clip = c["clip_epsilon"].fix
    assert (clip.spec, clip.value) == ("agent.algorithm.clip_eps_spec.start_val", 0.3)  # from the fact's note
    grad = c["max_grad_norm"].fix
    assert (grad.spec, grad.value, grad.has_value) == ("agent.net.clip_grad_val", None, True)
    assert grad.summary == "set `agent.net.clip_grad_val: null`"
    assert c["adam_eps"].fix.value == 1e-8
    assert c["action_distribution"].fix.value == "NormalTanh"
    assert c["std_max"].fix.spec is None and c["std_max"].fix.summary == "code change"


def test_fix_spec_comes_from_the_slm_note_before_the_rule_default():
    slm = slm_extraction()
    fact = slm.facts["clip_epsilon"]
    slm.add(Fact("clip_epsilon", 0.2, fact.provenance, note="spec: agent.algorithm.clip_eps_spec.start_val_x"))
    assert classified(slm=slm)["clip_epsilon"].fix.spec == "agent.algorithm.clip_eps_spec.start_val_x"
    slm.add(Fact("clip_epsilon", 0.2, fact.provenance, note=None))
    assert classified(slm=slm)["clip_epsilon"].fix.spec == "agent.algorithm.clip_eps_spec.start_val"


def test_a_fix_value_that_cannot_be_filled_is_left_out():
    c = classified(slm=slm_extraction(drop=("num_envs",)))
    fix = c["transitions_per_update"].fix
    assert fix.spec == "agent.algorithm.time_horizon"
    assert fix.has_value is False and fix.value is None
    assert fix.summary == "change `agent.algorithm.time_horizon`"


def test_recommended_order_is_severity_then_low_risk_first():
    order = [c.key for c in recommended_order(classified().values())]
    assert order[:2] == ["unrolls_per_update", "transitions_per_update"]
    assert order.index("max_grad_norm") < order.index("value_hidden_layers") < order.index("action_distribution")
    assert "discount" not in order


# -- the predicate language ------------------------------------------------------------


def ctx(brax, slm, key="clip_epsilon", others=()):
    def diff(k, b, s):
        status = "match" if b == s else "differs"
        return Difference(k, KEYS[k].topic, status, Fact(k, b), Fact(k, s), None)
    main = diff(key, brax, slm)
    by_key = {key: main, **{k: diff(k, b, s) for k, b, s in others}}
    return Context(main, by_key)


def test_predicates_decide_on_values():
    assert compile_predicate({"ratio_at_least": 4}, "t")(ctx(983040, 61440))
    assert not compile_predicate({"ratio_at_least": 4}, "t")(ctx(0.3, 0.2))
    assert compile_predicate({"brax_is": None}, "t")(ctx(None, 1.0))
    assert compile_predicate({"slm_in": ["normal", "other"]}, "t")(ctx("tanh_normal", "normal"))
    assert compile_predicate({"not": "equal"}, "t")(ctx(1, 2))
    assert compile_predicate({"any_of": ["equal", {"abs_diff_at_least": 0.1}]}, "t")(ctx(0.3, 0.2))
    assert compile_predicate("length_differs", "t")(ctx([256] * 5, [256] * 3))
    assert compile_predicate({"complement_ratio_at_least": 5}, "t")(ctx(0.995, 0.97))
    assert compile_predicate({"key_in": ["clip_epsilon"]}, "t")(ctx(1, 2))
    other = compile_predicate({"other": {"transitions_per_update": "brax_larger"}}, "t")
    assert other(ctx(0.3, 0.2, others=[("transitions_per_update", 983040, 61440)]))
    assert not other(ctx(0.3, 0.2, others=[("transitions_per_update", 61440, 983040)]))
    assert not other(ctx(0.3, 0.2))  # the other key was not compared
    assert compile_predicate({"brax_larger": True, "ratio_at_least": 1.5}, "t")(ctx(0.3, 0.2))


def test_a_side_below_its_own_value_of_another_key():
    below = compile_predicate({"brax_below_key": "episode_length"}, "t")
    key = "env_steps_between_resets"
    assert below(ctx(480, 0, key, others=[("episode_length", 1000, 1000)]))
    assert not below(ctx(1000, 0, key, others=[("episode_length", 1000, 1000)]))
    assert not below(ctx(480, 0, key))  # no episode length compared: nothing to be below
    assert not below(ctx(0, 480, key, others=[("episode_length", 1000, 1000)]))  # 0: never reset
    assert not below(ctx(480, 0, key, others=[("episode_length", None, 1000)]))
    assert compile_predicate({"slm_below_key": "episode_length"}, "t")(ctx(0, 300, key,
                                                                          others=[("episode_length", 1000, 500)]))
    assert below.explain(ctx(480, 0, key, others=[("episode_length", 1000, 1000)])) == (
        "Brax's value 480 is below its `episode_length` of 1000")


def test_resets_inside_the_episode_are_important_and_resets_past_it_minor():
    table = load_rules()
    key = "env_steps_between_resets"

    def severity(brax, slm, episode):
        c = ctx(brax, slm, key, others=[("episode_length", episode, episode)])
        return table.rule_for(key).severity(c)

    assert severity(480, 0, 1000) == ("IMPORTANT", "Brax's value 480 is below its `episode_length` of 1000")
    assert severity(31_360, 0, 150)[0] == "MINOR"  # each env runs whole episodes between resets
    assert severity(0, 480, 1000)[0] == "IMPORTANT"  # the other way round: SLM-Lab's resets cut episodes
    assert severity(480, 480, 1000)[0] is None
    assert table.rule_for(key).code == "BD049"


@pytest.mark.parametrize("raw, message", [
    ("wat", "unknown predicate 'wat'"),
    ("ratio_at_least", "needs an argument"),
    ({"ratio_at_least": -1}, "needs a positive number"),
    ({"brax_in": []}, "needs a non-empty list"),
    ({"other": {"no_such_key": "equal"}}, "unknown canonical key 'no_such_key'"),
    ({"brax_below_key": "no_such_key"}, "unknown canonical key 'no_such_key'"),
    ({"equal": 3}, "takes no argument"),
    (42, "a predicate is a name or a one-entry mapping"),
])
def test_malformed_predicates_are_config_errors(raw, message):
    with pytest.raises(ConfigError, match=message):
        compile_predicate(raw, "here")


# -- user overrides -----------------------------------------------------------------------


def test_user_rules_replace_add_and_disable(tmp_path):
    path = write_rules(tmp_path, """
        rules:
          - code: BD032
            severity:
              - when: differs
                then: CRITICAL
          - code: BD027
            disabled: true
          - code: BD013
            keys: [obs_norm_method, obs_clip]
          - code: XY001
            name: std-epsilon
            topic: observations
            keys: [obs_norm_std_eps]
            severity:
              - when: {brax_is: 0.0}
                then: IMPORTANT
            rationale: A zero epsilon divides by a zero std.
            fix: {default_spec: env.normalize_obs_eps, value: "{{ brax }}", text: Match it.}
            risk: {level: low, text: None.}
            references: [huang2022]
    """)
    table = load_rules(path)
    assert table.get("BD027") is None
    assert table.get("BD032").name == "clip-epsilon"  # fields not named are kept
    c = classified(rules_file=path)
    assert c["clip_epsilon"].severity == "CRITICAL"
    assert c["kernel_init"].rule is None and c["kernel_init"].severity == "MINOR"
    assert c["kernel_init"].because == "no rule covers this key"
    assert c["obs_norm_std_eps"].rule == "XY001" and c["obs_norm_std_eps"].severity == "IMPORTANT"
    assert c["obs_norm_std_eps"].fix.summary == "set `env.normalize_obs_eps: 0.0`"


@pytest.mark.parametrize("text, message", [
    ("rules: [", "invalid YAML at line"),
    ("rules: {a: 1}", "`rules` must be a list"),
    ("rules:\n  - code: BD001\n    severity: [{when: differs, then: FATAL}]\n", "severity 'FATAL' is not one of"),
    ("rules:\n  - code: BD001\n    keys: [nope]\n", "unknown canonical key 'nope'"),
    ("rules:\n  - code: BD001\n    colour: red\n", "unknown field(s) colour"),
    ("rules:\n  - code: BD001\n    keys: [clip_epsilon]\n", "belongs to topic 'clip_epsilon', not 'batch'"),
    ("rules:\n  - code: BD001\n    keys: [num_envs]\n", "'num_envs' is covered by both BD001 and BD003"),
    ("rules:\n  - code: BD999\n    disabled: true\n", "cannot disable an unknown rule"),
    ("rules:\n  - code: bad\n", "must look like BD001"),
    ("rules:\n  - code: BD001\n    references: [nobody2000]\n", "unknown reference 'nobody2000'"),
    ("rules:\n  - code: BD001\n    risk: {level: extreme, text: x}\n", "`risk` must be"),
    ("rules:\n  - code: BD001\n    fix: {text: '{{ brax '}\n", "bad template"),
])
def test_invalid_rule_files_are_one_line_config_errors(tmp_path, text, message):
    path = write_rules(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_missing_rules_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_rules(tmp_path / "nope.yaml")


def test_fix_templates_run_in_the_sandbox(tmp_path):
    path = write_rules(tmp_path, """
        rules:
          - code: BD032
            fix:
              default_spec: agent.algorithm.clip_eps_spec.start_val
              value: "{{ brax.__class__.__mro__[1].__subclasses__() }}"
              text: nothing
    """)
    fix = classified(rules_file=path)["clip_epsilon"].fix
    assert fix.has_value is False and fix.value is None


# -- the template sandbox's limits (issue 12) ------------------------------------------------------

def fix_rules(tmp_path, value: str, text: str = "nothing") -> Path:
    # BD032 (clip_epsilon) differs in the fixtures: its fix is rendered.
    return write_rules(tmp_path, f"""
        rules:
          - code: BD032
            fix:
              default_spec: agent.algorithm.clip_eps_spec.start_val
              value: {json.dumps(value)}
              text: {json.dumps(text)}
    """)


@pytest.mark.parametrize("value, message", [
    ("{{ 'x' * 10**7 }}", "a repeated sequence longer than 100000 items (limit)"),  # 'x' * 10**10 took 24 GB
    ("{{ 9 ** (9 ** 9) }}", "9 ** 387420489 has more than 100 digits (limit)"),
    ("{{ '%0999999999d' % 1 }}", "%-formatting of a string is not evaluated"),
    ("{{ 'x' * 60000 }}", "renders more than 10000 characters (limit)"),
    ("{{ 'ab' | replace('', 'x' * 9999) }}", "replace would give more than 10000 characters (limit)"),
])
def test_a_fix_template_past_a_limit_is_one_error_naming_the_rule_and_line(tmp_path, value, message):
    from brax_diff.safety.sandbox import TemplateLimit

    path = fix_rules(tmp_path, value)
    with pytest.raises(TemplateLimit) as caught:
        classified(rules_file=path)
    assert str(caught.value) == f"rules file {path} (line 3): rule BD032: fix.value: {message}"


def test_limits_in_the_text_template_name_the_text(tmp_path):
    from brax_diff.safety.sandbox import TemplateLimit

    with pytest.raises(TemplateLimit, match=r"\(line 3\): rule BD032: fix.text: a repeated sequence longer"):
        classified(rules_file=fix_rules(tmp_path, "{{ brax }}", "{{ 'ab' * 10**8 }}"))


@pytest.mark.parametrize("value, message", [
    ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",  # ran for hours
     "{% for %} is not allowed (expressions and {% if %} only)"),
    ("{% macro f() %}{{ f() ~ f() }}{% endmacro %}{{ f() }}", "{% macro %} is not allowed"),
    ("{% set x = 'ab' %}{{ x }}", "{% assign %} is not allowed"),
    ("{{ 'x' | center(10**9) }}", "No filter named 'center'"),
    ("{{ 'x' | indent(10**9) }}", "No filter named 'indent'"),
    ("{{ " + "(" * 1000 + "1" + ")" * 1000 + " }}", "nesting deeper than 64 levels (limit)"),
    ("{{ brax }}" * 500, "longer than 4000 characters (limit)"),
])
def test_templates_that_could_run_unbounded_are_refused_when_the_rules_load(tmp_path, value, message):
    with pytest.raises(ConfigError, match=r"rule BD032: fix.value: bad template .*" + re.escape(message)):
        load_rules(fix_rules(tmp_path, value))


@pytest.mark.parametrize("value", [
    "{{ lipsum(10**6) }}",  # no globals
    "{{ brax.__class__ }}",
    "{{ 'abc'.ljust(10**9) }}",  # only size-preserving methods
    "{{ 'abc'.replace('', 'x') }}",
])
def test_unsafe_calls_leave_the_value_out(tmp_path, value):
    fix = classified(rules_file=fix_rules(tmp_path, value))["clip_epsilon"].fix
    assert fix.has_value is False and fix.value is None


def test_the_shipped_templates_still_render_in_the_bounded_sandbox():
    fixes = {key: c.fix for key, c in classified().items() if c.fix is not None}
    assert fixes["clip_epsilon"].value == 0.3
    assert fixes["unrolls_per_update"].value == 480  # transitions_per_update.brax // num_envs.slm
    assert fixes["action_distribution"].value == "NormalTanh"  # a dict literal's .get()
    assert fixes["max_grad_norm"].text.endswith("(not at all).")


# -- a fix's alternatives (brax-diff fix --alternative) -----------------------------------


def test_batch_rule_offers_more_envs_as_an_alternative_to_a_longer_horizon():
    from brax_diff.compare.rules import render_alternative

    table = load_rules()
    fix = table.get("BD001").fix
    assert fix.name == "longer-horizon"
    assert [a.name for a in fix.alternatives] == ["more-envs"]
    c = classified()
    # the rule's own fix: Brax's 983,040 transitions at SLM-Lab's 2048 envs
    assert (c["transitions_per_update"].fix.spec, c["transitions_per_update"].fix.value) == \
        ("agent.algorithm.time_horizon", 480)
    diffs = compare(brax_extraction(), slm_extraction())
    by_key = {d.key: d for d in diffs}
    pairs = render_alternative(fix, fix.alternatives[0], Context(by_key["transitions_per_update"], by_key))
    assert pairs == [("env.num_envs", 32768), ("agent.algorithm.time_horizon", 30)]
    # a side's value missing: the alternative has no values, as render_fix leaves a value out
    diffs = compare(brax_extraction(drop=("unroll_length",)), slm_extraction())
    by_key = {d.key: d for d in diffs}
    assert render_alternative(fix, fix.alternatives[0], Context(by_key["transitions_per_update"], by_key)) is None


def test_alternatives_are_in_the_rules_json_and_markdown():
    table = load_rules()
    rule = next(r for r in table.to_json()["rules"] if r["code"] == "BD001")
    assert rule["fix"]["name"] == "longer-horizon"
    assert rule["fix"]["alternatives"][0]["set"] == {
        "env.num_envs": "{{ values.transitions_per_update.brax // values.unroll_length.brax }}",
        "agent.algorithm.time_horizon": "{{ values.unroll_length.brax }}"}
    other = next(r for r in table.to_json()["rules"] if r["code"] == "BD015")
    assert "name" not in other["fix"] and "alternatives" not in other["fix"]  # the others' JSON is unchanged
    docs = (Path(__file__).resolve().parent.parent / "docs" / "rules.md").read_text(encoding="utf-8")
    assert "Alternative `more-envs` (`brax-diff fix --alternative more-envs`" in docs


@pytest.mark.parametrize("fix, message", [
    ("{text: x, alternatives: [{name: a, set: {env.num_envs: '1'}, text: y}]}", "needs a `name` of its own"),
    ("{name: one, text: x, alternatives: []}", "must be a non-empty list"),
    ("{name: one, text: x, alternatives: [{name: one, set: {env.num_envs: '1'}, text: y}]}",
     "unique within the rule"),
    ("{name: one, text: x, alternatives: [{name: Two, set: {env.num_envs: '1'}, text: y}]}",
     "must be a lower-case name"),
    ("{name: one, text: x, alternatives: [{name: two, set: {env.num_envs: 1}, text: y}]}",
     "`set` must map spec keys to value templates"),
    ("{name: one, text: x, alternatives: [{name: two, set: {env.num_envs: '1'}}]}", "an alternative is {name, set, text}"),
    ("{name: one, text: x, alternatives: [{name: two, set: {env.num_envs: '{{ brax '}, text: y}]}", "bad template"),
    ("{name: One, text: x}", "fix.name must be a lower-case name"),
])
def test_malformed_alternatives_are_one_line_config_errors(tmp_path, fix, message):
    path = write_rules(tmp_path, f"rules:\n  - code: BD003\n    fix: {fix}\n")
    with pytest.raises(ConfigError) as info:
        load_rules(path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


# -- one difference, one row (issue 22 item 2) ----------------------------------------------------
def test_a_constant_clip_range_is_one_row_with_its_final_value_listed_in_it():
    rows = classified(fold=True)  # clip range 0.3 vs 0.2, constant on both sides
    assert "clip_epsilon_final" not in rows
    assert rows["entropy_coef_final"].status == "match"  # a match is no difference: nothing to fold
    assert [d.key for d in rows["clip_epsilon"].folded] == ["clip_epsilon_final"]
    assert (rows["clip_epsilon"].severity, rows["clip_epsilon"].rule) == ("IMPORTANT", "BD032")
    row = rows["clip_epsilon"].to_json()
    assert row["folded"][0]["key"] == "clip_epsilon_final" and (row["folded"][0]["brax"],
                                                               row["folded"][0]["slm"]) == (0.3, 0.2)
    assert "folded" not in rows["discount"].to_json()  # a key with nothing folded keeps its shape
    assert "clip_epsilon_final" in classified()  # unfolded (fix): every key classified


def test_a_real_schedule_difference_keeps_its_own_row():
    slm = slm_extraction({"clip_epsilon_schedule": "linear_decay", "clip_epsilon_final": 0.0})
    rows = classified(slm=slm, fold=True)
    assert rows["clip_epsilon_final"].status == "differs" and rows["clip_epsilon_final"].severity is not None
    assert rows["clip_epsilon_schedule"].status == "differs"
    assert rows["clip_epsilon"].folded == ()


def test_a_reward_scale_of_one_applies_nowhere_so_its_site_is_the_scales_difference():
    brax = brax_extraction({"reward_scale": 1.0, "reward_scale_site": "none"})  # Brax scales nothing
    rows = classified(brax=brax, fold=True)  # SLM-Lab: 10 in the env
    assert "reward_scale_site" not in rows
    assert [d.key for d in rows["reward_scale"].folded] == ["reward_scale_site"]
    assert rows["reward_scale"].status == "differs"
    # both scale by 10, one in the loss and one in the env: where it applies is its own difference
    both = classified(fold=True)
    assert both["reward_scale"].status == "match" and both["reward_scale_site"].status == "differs"
    assert both["reward_scale"].folded == ()


def test_the_environment_matrix_counts_a_folded_key_once():
    from brax_diff.compare.rules import folded_keys
    diffs = compare(brax_extraction(), slm_extraction())
    assert folded_keys(diffs) == {"clip_epsilon_final": "clip_epsilon"}
