"""Loops over known items in the data-flow engine: a loop of long passes is widened after a
few exact passes (extractors/engine/flow.py, Engine._for_known).

Widening trades precision for time and must never trade correctness: whatever it leaves
known after the loop is what an exact run leaves, and what it cannot know is Unknown."""

from __future__ import annotations

import hashlib
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from brax_diff.facts.model import Provenance
from brax_diff.extractors.engine import flow
from brax_diff.extractors.engine import loops as engine_loops
from brax_diff.extractors.engine.flow import Engine, Loader, const, plain

PROGRAM = '''
import torch

CALLS = 0


class Box:
    count = 0

    def __init__(self, lr):
        self.lr = lr
        self.epoch = 0


def heavy(x):
    for k in range(150):
        x = x + k
    return x


def bump():
    global CALLS
    CALLS = CALLS + 1


def epochs(n, lr):
    box = Box(lr)
    total = 0.0
    seen = []
    for _ in range(n):
        w = heavy(0)
        loss = torch.mean(w) * box.lr
        torch.clamp(loss, 1 - lr, 1 + lr)
        total += 1
        box.epoch += 1
        Box.count += 1
        bump()
        seen = seen + [w]
    return total, lr, loss, w, box, seen


def counted(n):
    c = 0
    for _ in range(n):
        c += 1
    return c


def indexed(n):
    acc = 0
    last = -1
    for i in range(n):
        acc = acc + i
        last = i
        heavy(0)
    return acc, last


def indexed_short(n):
    acc = 0
    for i in range(n):
        acc = acc + i
    return acc


def with_else(n):
    c = 0
    for _ in range(n):
        heavy(0)
        c += 1
    else:
        c += 100
    return c


def with_break(n):
    c = 0
    for _ in range(n):
        heavy(0)
        c += 1
        if c > 10:
            break
    return c


def late_flag(n):
    total = 0
    flag = False
    for _ in range(n):
        heavy(0)
        total = total + 1
        if total > 5:
            flag = True
    return flag
'''


class MemorySnapshot:
    """Files held in memory, answering what the engine's Loader asks of a Snapshot."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: dict = {}

    def blob_id(self, path: str) -> str | None:
        text = self.files.get(path)
        return None if text is None else hashlib.sha1(text.encode()).hexdigest()

    def exists(self, path: str) -> bool:
        return path in self.files

    def listdir(self, path: str) -> list[str]:
        prefix = path.strip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.files if p.startswith(prefix)})

    def read(self, path: str) -> str:
        return self.files[path]

    def where(self, path: str, line: int) -> Provenance:
        return Provenance("memory", "0" * 40, path, line)


def engine_for(source: str) -> tuple[Engine, flow.Module]:
    snapshot = MemorySnapshot({"pkg/__init__.py": "", "pkg/prog.py": source})
    engine = Engine(Loader(snapshot, ("pkg",)), watch={"clamp"})
    return engine, engine.module("pkg.prog")


def run(source: str, name: str, *args):
    engine, module = engine_for(source)
    return engine, module, engine.call(engine.lookup(module, name), *map(const, args))


def test_a_long_loop_over_an_unread_target_keeps_what_no_pass_changes():
    engine, module, result = run(PROGRAM, "epochs", 16, 0.2)
    total, lr, loss, w, box, seen = result.data
    # Changed by every pass: unknown, saying why and how far it was followed.
    assert isinstance(total.data, flow.Unknown)
    assert "changes with each pass of the loop over `range(n)`" in total.data.reason
    assert "3 of 16 passes followed exactly" in total.data.reason
    assert isinstance(box.data.attrs["epoch"].data, flow.Unknown)
    assert isinstance(engine.lookup(module, "CALLS").data, flow.Unknown)  # a module global
    assert isinstance(engine.lookup(module, "Box").data.namespace["count"].data, flow.Unknown)
    assert isinstance(seen.data, flow.Unknown)  # a list that grows each pass
    # What no pass changes, or every pass recomputes alike, stays exact.
    assert plain(lr) == 0.2 and plain(box.data.attrs["lr"]) == 0.2
    assert plain(w) == sum(range(150))
    assert flow.describe(loss) == f"(torch.mean({sum(range(150))}) * 0.2)"
    # Four passes ran (three exact, one widened that changed nothing new), not sixteen,
    # and every clamp the run recorded has the bounds each pass gives.
    clamps = [c for c in engine.calls if c.name == "clamp"]
    assert len(clamps) == 4
    assert {(plain(c.args[1]), plain(c.args[2])) for c in clamps} == {(0.8, 1.2)}


def test_without_widening_the_same_loop_is_followed_pass_by_pass():
    with mock.patch.object(engine_loops, "EXACT_PASSES", 10**6):
        engine, module, result = run(PROGRAM, "epochs", 16, 0.2)
    total, _, _, _, box, seen = result.data
    assert plain(total) == 16.0 and plain(box.data.attrs["epoch"]) == 16 and len(seen.data) == 16
    assert plain(engine.lookup(module, "CALLS")) == 16
    assert len([c for c in engine.calls if c.name == "clamp"]) == 16


def test_short_passes_loops_of_few_items_and_loops_that_jump_stay_exact():
    assert plain(run(PROGRAM, "counted", 200)[2]) == 200  # passes far below WIDEN_STEPS
    assert plain(run(PROGRAM, "indexed_short", 20)[2]) == sum(range(20))
    assert plain(run(PROGRAM, "epochs", 4, 0.2)[2].data[0]) == 4.0  # EXACT_PASSES + 1 items
    assert plain(run(PROGRAM, "with_else", 16)[2]) == 116  # for ... else
    assert plain(run(PROGRAM, "with_break", 16)[2]) == 11  # a break (a continue alike)


def test_a_widened_pass_sees_the_target_as_one_of_the_items_left():
    acc, last = run(PROGRAM, "indexed", 8)[2].data
    assert isinstance(acc.data, flow.Unknown)
    assert isinstance(last.data, flow.Phi) and sorted(plain(o) for o in last.data.options) == [3, 4, 5, 6, 7]
    _, last = run(PROGRAM, "indexed", 20)[2].data  # more items left than a Phi holds
    assert isinstance(last.data, flow.Unknown)


def test_a_change_that_starts_after_the_exact_passes_is_not_taken_for_constant():
    # `flag` does not change in the first three passes (total <= 5); it does later.
    _, _, flag = run(PROGRAM, "late_flag", 16)
    assert not flow.is_const(flag)
    if isinstance(flag.data, flow.Phi):
        assert any(flow.is_const(o) and plain(o) is True for o in flag.data.options)


# -- every widened result agrees with the exact one ----------------------------------------

VARIABLES = ("a", "b", "c")
statements = st.one_of(
    st.tuples(st.sampled_from(VARIABLES), st.integers(-3, 3)).map(lambda t: f"{t[0]} = {t[0]} + {t[1]}"),
    st.tuples(st.sampled_from(VARIABLES), st.sampled_from(VARIABLES)).map(lambda t: f"{t[0]} = {t[1]}"),
    st.tuples(st.sampled_from(VARIABLES), st.integers(-3, 3)).map(lambda t: f"{t[0]} = {t[1]}"),
    st.tuples(st.sampled_from(VARIABLES), st.integers(-2, 8), st.sampled_from(VARIABLES),
              st.integers(-3, 3)).map(lambda t: f"if {t[0]} > {t[1]}:\n            {t[2]} = {t[2]} + {t[3]}"),
    st.sampled_from(VARIABLES).map(lambda v: f"box.v = box.v + {v}"),
    st.sampled_from(VARIABLES).map(lambda v: f"Box.count = Box.count + {v}"),
    st.sampled_from(VARIABLES).map(lambda v: f"bump({v})"),
    st.sampled_from(VARIABLES).map(lambda v: f"if {v} > 4:\n            break"),
    st.sampled_from(VARIABLES).map(lambda v: f"if {v} > 4:\n            continue"),
    st.sampled_from(VARIABLES).map(lambda v: f"{v} = {v} + i"),
    st.tuples(st.integers(0, 12), st.sampled_from(VARIABLES)).map(lambda t: f"if i == {t[0]}:\n            {t[1]} = 0"),
)

FUZZED = '''
G = 0


class Box:
    count = 0

    def __init__(self):
        self.v = 0


def bump(x):
    global G
    G = G + x


def looped(n):
    a, b, c = 1, 2, 3
    box = Box()
    for i in range(n):
{body}
    return a, b, c, box.v, Box.count, G
'''


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Found by this test: a break the exact passes decide, undecided in a widened one.
@example(body=["a = a + i", "if a > 4:\n            break", "a = b"], passes=5, exact_passes=1)
@given(st.lists(statements, min_size=1, max_size=6), st.integers(5, 14), st.integers(1, 3))
def test_widening_never_gives_a_value_the_exact_run_does_not(body, passes, exact_passes):
    source = FUZZED.format(body="\n".join(f"        {s}" for s in body))
    with mock.patch.object(engine_loops, "EXACT_PASSES", 10**6):
        exact = run(source, "looped", passes)[2]
    with mock.patch.object(engine_loops, "EXACT_PASSES", exact_passes), mock.patch.object(engine_loops, "WIDEN_STEPS", 0):
        widened = run(source, "looped", passes)[2]
    assert flow.is_const(exact), source
    for name, want, got in zip(("a", "b", "c", "box.v", "Box.count", "G"), plain(exact), widened.data):
        if flow.is_const(got):
            assert plain(got) == want, (name, source)
        elif isinstance(got.data, flow.Phi) and all(flow.is_const(o) for o in got.data.options):
            assert want in [plain(o) for o in got.data.options], (name, source)
