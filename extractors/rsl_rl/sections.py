"""Whether rsl_rl at a ref can build what Playground's ``train_rsl_rl.py`` hands it.

rsl_rl's runner builds its networks from named sections of the training config: ``policy`` in
the 3.x releases (``train_cfg["policy"]`` in ``OnPolicyRunner.__init__``), ``actor`` and
``critic`` from 4.0 on (``cfg["actor"]`` in ``PPO.construct_algorithm``). A section it reads
with a plain subscript that the script does not pass stops the run with a KeyError before the
first step: the side's values describe no run, which is a ``cannot_train`` ERROR (as on the
SLM-Lab side), not a silent table of effective values.

The sections passed are the top-level keys of ``rsl_rl_config``'s ConfigDict, with what
``main`` sets on it (``train_cfg.K = ...``) and then does to ``train_cfg.to_dict()`` before the
``OnPolicyRunner(...)`` call: ``d["K"] = ...`` adds, ``d.pop("K")`` and ``del d["K"]`` remove,
under ``if`` tests made of ``"K" in d`` / ``not in`` / ``and`` / ``or`` / ``not``, decided on
the keys so far. Any other test around a change to those keys leaves the check undecided (no
finding is made from a guess).
"""

from __future__ import annotations

import libcst as cst

from brax_diff.facts.model import Finding, Provenance

from ..engine.pyast import dotted_name
from .code import File, Missing
from .library import Library
from .script import SCRIPT, TrainScript

SECTIONS = ("policy", "actor", "critic")  # the model sections the runners of 3.x and 4.0+ read


class _Undecided(Exception):
    pass


def required_sections(library: Library) -> dict[str, Provenance]:
    """Each model section the runner's construction reads with a plain subscript, with its line:
    ``OnPolicyRunner.__init__``, the ``self.*`` methods it calls, and ``construct_algorithm``."""
    runner, ppo = library.runner, library.ppo
    init = runner.method("OnPolicyRunner", "__init__")
    if init is None:
        return {}
    places: list[tuple[File, cst.CSTNode]] = [(runner, init)]
    for call in runner.nodes(init, lambda n: isinstance(n, cst.Call)):
        name = dotted_name(call.func) or ""
        if name.startswith("self.") and name.count(".") == 1:
            method = runner.method("OnPolicyRunner", name.split(".", 1)[1])
            if method is not None:
                places.append((runner, method))
        elif name.endswith(".construct_algorithm"):
            method = ppo.method("PPO", "construct_algorithm")
            if method is not None:
                places.append((ppo, method))
    found: dict[str, Provenance] = {}
    for file, root in places:
        for node in _reads(root):
            key = _string_key(node)
            if key in SECTIONS and key not in found:
                found[key] = file.at(node)
    return found


def _reads(root: cst.CSTNode) -> list[cst.Subscript]:
    """Subscripts loaded under ``root``: not assignment or ``del`` targets, and not under an
    ``if`` whose test names the same key (a guarded read)."""
    out: list[cst.Subscript] = []

    def visit(node: cst.CSTNode, guards: frozenset[str]) -> None:
        if isinstance(node, cst.If):
            tested = guards | {s.evaluated_value for s in _strings(node.test)}
            visit(node.test, guards)
            visit(node.body, tested)
            if node.orelse is not None:
                visit(node.orelse, tested)
            return
        if isinstance(node, (cst.AssignTarget, cst.Del)):
            return
        if isinstance(node, cst.Subscript) and _string_key(node) not in guards:
            out.append(node)
        for child in node.children:
            visit(child, guards)

    visit(root, frozenset())
    return out


def _strings(node: cst.CSTNode) -> list[cst.SimpleString]:
    found = [node] if isinstance(node, cst.SimpleString) else []
    for child in node.children:
        found += _strings(child)
    return found


def _string_key(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        value = node.slice[0].slice.value
        if isinstance(value, cst.SimpleString) and isinstance(value.evaluated_value, str):
            return value.evaluated_value
    return None


def passed_sections(script: TrainScript, config_keys: set[str]) -> tuple[set[str], Provenance] | Missing:
    """The top-level keys of the dict ``main`` hands ``OnPolicyRunner`` (with the call's line)."""
    file, main = script.file, script.main
    if main is None:
        return file.missing("no main()", "main")
    call = next(file.nodes(main, lambda n: isinstance(n, cst.Call)
                           and (dotted_name(n.func) or "").endswith("OnPolicyRunner")), None)
    argument = call.args[1].value if call is not None and len(call.args) >= 2 else None
    if _to_dict(argument):  # OnPolicyRunner(env, train_cfg.to_dict(), ...)
        handed, made = "", argument
    elif isinstance(argument, cst.Name):  # d = train_cfg.to_dict(); ...; OnPolicyRunner(env, d, ...)
        handed = argument.value
        made = next((small.value for node in _walk(main) if isinstance(node, cst.SimpleStatementLine)
                     for small in node.body if isinstance(small, cst.Assign)
                     and _name(small.targets[0].target) == handed and _to_dict(small.value)), None)
        if made is None:
            return file.missing(f"no `{handed} = <config>.to_dict()` before the OnPolicyRunner call", "main")
    else:
        return file.missing("no `OnPolicyRunner(env, <config>.to_dict() or a dict made from it, ...)` call", "main")
    config = dotted_name(made.func).rsplit(".", 1)[0]
    keys = set(config_keys)
    last = _statement_of(main, call)
    try:
        for statement in main.body.body:
            if statement is last:
                return keys, file.at(call)
            _apply(statement, handed, config, keys)
    except _Undecided as why:
        missing = file.missing(f"what `{handed}` holds at the OnPolicyRunner call is undecided: {why.args[0]}", "main")
        return Missing(missing.why, (file.at(why.args[1]),))
    return file.missing("the OnPolicyRunner call is not a statement of main's body", "main")


def _to_dict(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith(".to_dict")


def _statement_of(main: cst.FunctionDef, call: cst.Call) -> cst.CSTNode | None:
    for statement in main.body.body:
        if any(node is call for node in _walk(statement)):
            return statement
    return None


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _apply(statement: cst.CSTNode, handed: str, config: str, keys: set[str]) -> None:
    """Update ``keys`` with what one statement of ``main`` does to the ConfigDict ``config``
    (``config.K = ...``) or to the dict ``handed`` made from it."""
    if isinstance(statement, cst.If):
        if not any(_touches(n, handed, config) for n in _walk(statement)):
            return
        branch = statement.body if _decide(statement.test, handed, keys) else statement.orelse
        if isinstance(branch, cst.Else):
            branch = branch.body
        if isinstance(branch, cst.If):  # elif
            _apply(branch, handed, config, keys)
            return
        for inner in branch.body if branch is not None else ():
            _apply(inner, handed, config, keys)
        return
    if not isinstance(statement, cst.SimpleStatementLine):
        if any(_touches(n, handed, config) for n in _walk(statement)):
            raise _Undecided(f"a {type(statement).__name__} statement changes the sections", statement)
        return
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                node = target.target
                if isinstance(node, cst.Subscript) and _name(node.value) == handed and _string_key(node):
                    keys.add(_string_key(node))
                elif isinstance(node, cst.Attribute) and _name(node.value) == config:
                    keys.add(node.attr.value)
        elif isinstance(small, cst.Del):
            for target in _walk(small.target):
                if isinstance(target, cst.Subscript) and _name(target.value) == handed and _string_key(target):
                    keys.discard(_string_key(target))
        for node in _walk(small):
            if isinstance(node, cst.Call) and dotted_name(node.func) == f"{handed}.pop" and node.args:
                key = node.args[0].value
                if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
                    keys.discard(key.evaluated_value)


def _touches(node: cst.CSTNode, handed: str, config: str) -> bool:
    """Whether ``node`` may change a model section: a subscript or ``pop`` of the dict, or a
    section set on the ConfigDict."""
    return ((isinstance(node, cst.Subscript) and _name(node.value) == handed)
            or (isinstance(node, cst.Call) and dotted_name(node.func) == f"{handed}.pop")
            or (isinstance(node, cst.Attribute) and _name(node.value) == config and node.attr.value in SECTIONS))


def _name(node: cst.CSTNode) -> str | None:
    return node.value if isinstance(node, cst.Name) else None


def _decide(test: cst.CSTNode, handed: str, keys: set[str]) -> bool:
    if isinstance(test, cst.BooleanOperation):
        left = _decide(test.left, handed, keys)
        if isinstance(test.operator, cst.And):
            return left and _decide(test.right, handed, keys)
        return left or _decide(test.right, handed, keys)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return not _decide(test.expression, handed, keys)
    if (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.SimpleString)
            and _name(test.comparisons[0].comparator) == handed):
        present = test.left.evaluated_value in keys
        if isinstance(test.comparisons[0].operator, cst.In):
            return present
        if isinstance(test.comparisons[0].operator, cst.NotIn):
            return not present
    raise _Undecided(f"the test `{cst.Module([]).code_for_node(test)}` reads more than the dict's keys", test)


def model_sections(library: Library, script: TrainScript, config_keys: set[str]) -> list[Finding]:
    """A ``cannot_train`` ERROR for each model section the runner reads that the script does not
    pass; a WARNING when what it passes is undecided (no check made)."""
    required = required_sections(library)
    if not required:
        return []
    passed = passed_sections(script, config_keys)
    if isinstance(passed, Missing):
        return [Finding("pattern_not_found", "WARNING", f"model sections not checked: {passed.why}", passed.lines)]
    keys, call = passed
    given = sorted(keys & set(SECTIONS)) or ["none"]
    return [Finding("cannot_train", "ERROR",
                    f"rsl_rl reads train_cfg[{section!r}] to build its networks, and {SCRIPT} passes no "
                    f"{section!r} section (model sections it passes: {', '.join(given)}): OnPolicyRunner stops "
                    "with a KeyError before the first step", (where, call))
            for section, where in sorted(required.items()) if section not in keys]
