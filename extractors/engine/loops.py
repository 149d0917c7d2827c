"""Loops: ``for`` over a known sequence (unrolled), otherwise widened to a fixed point; ``while``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from .pyast import child_nodes
from .values import Instance, merge, sym, unknown
from .runtime import Break, Continue, EXACT_PASSES, MAX_ITERATIONS, WIDEN_STEPS
from .reading import slot, written_names

if TYPE_CHECKING:
    from .runtime import Frame
    from .values import V


class Loops:
    """How loops run (a part of :class:`.core.Engine`)."""

    def _for(self, node: cst.For, frame: Frame) -> None:
        iterable = self._eval(node.iter, frame)
        items = self._items(iterable)
        if items is not None and len(items) <= MAX_ITERATIONS:
            if self._for_known(node, frame, items):
                return
            if node.orelse is not None:
                self._block(self._body(node.orelse), frame)
            return
        why = (f"set in the loop over `{self._code(frame, node.iter)}` "
               f"({frame.module.path}:{self._line(frame, node)})")
        element = sym("item", "", (iterable, sym("param", "<each>")))

        def once() -> None:
            self._assign(node.target, element, frame)
            try:
                self._block(self._body(node), frame)
            except (Continue, Break):
                pass

        self._branches([once, lambda: None], frame, why)

    def _for_known(self, node: cst.For, frame: Frame, items: list[V]) -> bool:
        """Run a loop over known items; True when a ``break`` ended it.

        Every pass runs exactly, except in a loop whose passes are long (WIDEN_STEPS, such
        as training epochs: the same code again on the state the last pass left): there the
        passes after EXACT_PASSES are widened (_widened_passes). A short loop costs little
        to follow exactly, and its state (a counter, a list it appends to) stays known. A
        loop with an ``else``, ``break`` or ``continue`` runs exactly too: a condition a
        widened pass cannot decide would send a path that jumps on through the rest of the
        body (how the engine merges such paths), giving values no pass gives."""
        widen = len(items) > EXACT_PASSES + 1 and node.orelse is None and not self._jumps(node)
        for index, item in enumerate(items):
            watched = widen and index == EXACT_PASSES - 1
            if watched:
                before_locals, journal, steps = dict(frame.locals), self._journaled(), self.steps
            self._assign(node.target, item, frame)
            try:
                try:
                    self._block(self._body(node), frame)
                finally:
                    if watched:
                        written = self._unjournaled(journal)
            except Continue:
                pass
            except Break:
                return True
            if watched and self.steps - steps >= WIDEN_STEPS:
                return self._widened_passes(node, frame, items[index + 1:], before_locals, written)
        return False

    def _widened_passes(self, node: cst.For, frame: Frame, rest: list[V], before_locals: dict,
                        written: dict) -> bool:
        """The passes after the exact ones; True when a ``break`` ended the loop.

        Each starts from the state the last pass left with every local, attribute and
        class or module name that some pass changed made an Unknown saying so, and the
        loop's target one of the items left, so that it stands for any later pass. Once a
        pass changes nothing more, every later one would change the same, and the state it
        leaves stands for the loop's end: what stays known is what no pass changes. Without a
        fixpoint it stops after as many passes as items remain, as the exact loop would."""
        why = (f"changes with each pass of the loop over `{self._code(frame, node.iter)}` "
               f"({frame.module.path}:{self._line(frame, node)}); {EXACT_PASSES} of "
               f"{EXACT_PASSES + len(rest)} passes followed exactly")
        widened = unknown(why)
        target = merge(rest, why)
        names: set[str] = set()
        slots: dict[tuple[int, str], Any] = {}  # (id of owner, name) -> instance or namespace
        for _ in rest:
            new = {n for n in set(before_locals) | set(frame.locals)
                   if frame.locals.get(n) is not before_locals.get(n)} - names
            new_slots = {(key, name): owner for key, (owner, before) in written.items()
                         for name in written_names(owner, before)
                         if slot(owner).get(name) is not before.get(name) and (key, name) not in slots}
            if not new and not new_slots:
                return False  # a fixpoint
            names |= new
            slots.update(new_slots)
            for name in names:
                frame.locals[name] = widened
            for (_, name), owner in slots.items():
                if isinstance(owner, Instance):
                    self._write(owner, name, widened)
                else:
                    self._write_name(owner, name, widened)
            before_locals, journal = dict(frame.locals), self._journaled()
            self._assign(node.target, target, frame)
            try:
                try:
                    self._block(self._body(node), frame)
                finally:
                    written = self._unjournaled(journal)
            except Continue:
                pass
            except Break:
                return True
        return False

    def _jumps(self, node: cst.For) -> bool:
        """Whether the loop's own body has a ``break`` or ``continue`` (not a nested loop's)."""
        found = self._loop_jumps.get(id(node))
        if found is None:
            stack, found = list(child_nodes(node.body)), False
            while stack and not found:
                child = stack.pop()
                if type(child) in (cst.Break, cst.Continue):
                    found = True
                elif type(child) not in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda):
                    stack.extend(child_nodes(child))
            self._loop_jumps[id(node)] = found
        return found

    def _journaled(self) -> tuple:
        """Start recording the objects the code that runs next writes (see _unjournaled)."""
        outer = (self.journal, self.journal_floor, self.namespace_journal)
        self.journal, self.journal_floor, self.namespace_journal = {}, len(self.instances), {}
        return outer

    def _unjournaled(self, outer: tuple) -> dict:
        """Stop recording: id -> (object, its attributes before the first write), for the
        objects that existed when recording began; the enclosing fork learns of them too."""
        written, named = self.journal, self.namespace_journal
        self.journal, self.journal_floor, self.namespace_journal = outer
        if self.journal is not None:
            for key, (inst, before) in written.items():
                if inst.serial < self.journal_floor and key not in self.journal:
                    self.journal[key] = (inst, dict(before))
        if self.namespace_journal is not None:
            for key, (names, before) in named.items():
                outer_before = self.namespace_journal.setdefault(key, (names, {}))[1]
                for name, value in before.items():
                    outer_before.setdefault(name, value)
        return {**written, **{key: (names, before) for key, (names, before) in named.items()}}

    def _write_name(self, names: dict, name: str, value: V) -> None:
        if self.namespace_journal is not None:
            _, before = self.namespace_journal.setdefault(id(names), (names, {}))
            before.setdefault(name, names.get(name))
        names[name] = value

    def _while(self, node: cst.While, frame: Frame) -> None:
        for _ in range(MAX_ITERATIONS):
            truth = self._truth(self._eval(node.test, frame))
            if truth is False:
                return
            if truth is None:
                break
            try:
                self._block(self._body(node), frame)
            except Continue:
                continue
            except Break:
                return
        why = f"set in the loop `while {self._code(frame, node.test)}` ({frame.module.path})"

        def once() -> None:
            try:
                self._block(self._body(node), frame)
            except (Continue, Break):
                pass

        self._branches([once, lambda: None], frame, why)
