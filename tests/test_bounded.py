"""Issue 26, item 3: the documented limits (brax_diff/safety/limits.py) hold inside the data-flow
engine and in the fix-template sandbox. Each case runs in a child process under a memory cap
(1.5 GB) and a time limit, since a hang or an exhausted machine is the failure these prevent;
a tripped limit must be an Unknown naming the limit (engine) or one TemplateLimit (sandbox)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEMORY_CAP = 1_500_000_000
SECONDS = 60  # all cases of one child together; each takes well under a second when bounded

ENGINE_CASES = {
    # name: (function source, what the Unknown's reason says)
    "squaring_loop": ("def f():\n    x = 3\n    for i in range(40):\n        x = x * x\n    return x\n",
                      "more than 100 digits"),
    "squaring_a_parameter": ("def f(x=3):\n    for i in range(40):\n        x = x * x\n    return x\n",
                             "more than 100 digits"),
    "huge_shift": ("def f():\n    return 1 << 10**9\n", "a shift to more than 100 digits"),
    "shift_loop": ("def f():\n    x = 1\n    for i in range(30):\n        x = x << 100\n    return x\n",
                   "a shift to more than 100 digits"),
    "string_doubling": ("def f():\n    x = 'ab'\n    for i in range(60):\n        x = x + x\n    return x\n",
                        "a concatenation longer than 100000"),
    "list_doubling": ("def f():\n    x = [1]\n    for i in range(60):\n        x = x + x\n    return x\n",
                      "a concatenation longer than 100000"),
    "format_width": ("def f():\n    return '{:>999999999}'.format(1)\n", "a format width or precision over"),
    "format_width_from_argument": ("def f():\n    return '{:{}}'.format(1, 10**9)\n", "taken from an argument"),
    "percent_width": ("def f():\n    return '%0999999999d' % 1\n", "a format width or precision over"),
    "fstring_width": ("def f():\n    return f'{1:>999999999}'\n", "a format width or precision over"),
    "replace_growth": ("def f():\n    s = 'a' * 10000\n    return s.replace('a', s)\n", "longer than 100000"),
    "join_growth": ("def f():\n    s = 'a' * 10000\n    return s.join([s] * 10000)\n", "longer than 100000"),
    "literal_of_5000_digits": ("def f():\n    return " + "9" * 5000 + "\n", "an integer of 5000 digits"),
}


def _child(code: str) -> dict:
    """Run ``code`` in a child Python under the memory cap; it prints one JSON object."""
    prelude = textwrap.dedent(f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=SECONDS, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_engine_stops_every_unbounded_computation_at_a_limit_with_an_unknown():
    results = _child(f"""
        from brax_diff.extractors.engine import flow
        from memsnapshot import engine_call
        out = {{}}
        for name, (source, _) in {ENGINE_CASES!r}.items():
            value = engine_call(source)
            out[name] = flow.why_not_constant(value) if isinstance(value.data, flow.Unknown) else repr(value)[:200]
        print(json.dumps(out))
    """)
    for name, (_, reason) in ENGINE_CASES.items():
        answer = results[name]
        assert reason in answer, (name, answer)


def test_fstring_format_specs_and_conversions_are_applied_not_dropped():
    # The engine gave '1' for f"{1:>5}" (the spec was dropped): a wrong value, not an unknown.
    from memsnapshot import engine_call

    assert engine_call("def f():\n    x = 'a'\n    return f'{x!r}-{3.14159:.2f}-{7:>3}'\n").data == "'a'-3.14-  7"


def test_products_and_sums_of_shared_symbolic_values_are_taken_apart_in_bounded_time():
    # `x = x * x` 40 times in a loss is a chain of 40 shared nodes: the linear-form walk visited
    # 2**40 of them. Past MAX_WALK parts the coefficient is unknown, with why.

    from brax_diff.extractors.engine import flow, semantics
    from memsnapshot import engine_call

    product = engine_call("def f(x):\n    for i in range(40):\n        x = x * x\n    return x\n", "f",
                          flow.sym("param", "x"))
    parts = flow.linear(product)
    assert parts.coefficient is None and parts.why == f"a product of more than {flow.MAX_WALK} parts (limit)"
    assert {p.line for p in semantics.product_lines(product)} == {3}
    total = engine_call("def f(x):\n    for i in range(40):\n        x = x + x\n    return x\n", "f",
                        flow.sym("param", "x"))
    assert [flow.why_not_constant(t) for t in flow.terms(total)] == [f"a sum of more than {flow.MAX_WALK} terms (limit)"]


TEMPLATE_CASES = {
    "{{ ('a'*99999) | join('b'*99999) }}": "join would give more than 10000 characters (limit)",
    "{{ ('b'*99999).join('a'*99999) }}": "str.join would give more than 10000 characters (limit)",
    "{{ [1, 2] | tojson(indent=10**9) }}": "tojson(indent=...) over 16 (limit)",
    "{{ ([[0]*99999]*100000) | sum(start=[]) | length }}": "sum would give more than 10000 characters (limit)",
    "{{ ('9'*4000) | int }}": "int: an integer of 4000 digits; the limit is 100",
    # Issue 35: 10^10 values behind 100,000 references; json.dumps wrote them out before the
    # output check.
    "{{ ([[0]*99999]*100000) | tojson }}": "tojson would give more than 10000 characters (limit)",
    "{{ ([[[0]*99]*99]*99) | tojson(indent=16) }}": "tojson would give more than 10000 characters (limit)",
}


def test_template_filters_and_methods_that_outgrow_their_input_are_refused_before_they_run():
    results = _child(f"""
        from brax_diff.safety.sandbox import TemplateLimit, check_template, render_bounded, sandbox
        env = sandbox(finalize=lambda x: x)
        out = {{}}
        for source in {list(TEMPLATE_CASES)!r}:
            try:
                check_template(env, source)
                out[source] = "rendered " + render_bounded(env, source, {{}})[:100]
            except TemplateLimit as exc:
                out[source] = str(exc)
        print(json.dumps(out))
    """)
    assert results == TEMPLATE_CASES


@pytest.mark.parametrize("source, rendered", [
    ("{{ [1, 2, 3] | join(',') }}", "1,2,3"),
    ("{{ ','.join(['a', 'b']) }}", "a,b"),
    ("{{ [1, 2] | sum }}", "3"),
    ("{{ {'a': 1} | tojson(indent=2) }}", '{\n  "a": 1\n}'),
    ("{{ '42' | int + 1 }}", "43"),
    ("{{ [{'a': 'x'}, {'a': 'y'}] | join(',', attribute='a') }}", "x,y"),
])
def test_bounded_filters_still_give_what_jinja_gives(source, rendered):
    from brax_diff.safety.sandbox import check_template, render_bounded, sandbox

    env = sandbox(finalize=lambda x: x)
    check_template(env, source)
    assert render_bounded(env, source, {}) == rendered
