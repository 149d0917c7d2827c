"""The package layout shows the pipeline: no import cycle, no private name used across modules,
and a stage imports only the stages before it (imports under ``if TYPE_CHECKING:`` are types,
not dependencies)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The pipeline, first to last: a module may import its own stage and the ones above it.
STAGES = ["brax_diff.errors", "brax_diff.safety", "brax_diff.facts", "brax_diff.sources", "brax_diff.config",
          "brax_diff.session", "brax_diff.extractors", "brax_diff.extract", "brax_diff.history", "brax_diff.compare",
          "brax_diff.fix", "brax_diff.report", "brax_diff.verify", "brax_diff.cli"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "extractors":
        parts = ["brax_diff", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """module -> the package modules it imports; (importer, module, name) for private names."""
    paths = [p for folder in ("brax_diff", "extractors") for p in (ROOT / folder).rglob("*.py")
             if "__pycache__" not in p.parts]
    modules = {_module_name(p): p for p in paths}
    edges: dict[str, set[str]] = {}
    private = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        types_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                      and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                      for n in ast.walk(node)}
        deps = set()
        for node in ast.walk(tree):
            if id(node) in types_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else node.module or ""
                for alias in node.names:
                    if f"{target}.{alias.name}" in modules:
                        deps.add(f"{target}.{alias.name}")
                    elif target in modules:
                        deps.add(target)
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            private.append((name, target, alias.name))
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names if alias.name in modules)
        deps.discard(name)
        edges[name] = deps
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _stage(module: str) -> int | None:
    matches = [i for i, stage in enumerate(STAGES) if module == stage or module.startswith(stage + ".")]
    return matches[-1] if matches else None


def test_no_import_cycle():
    assert _cycles(_graph()[0]) == []


def test_no_private_name_is_imported_from_another_module():
    assert _graph()[1] == []


def test_a_stage_imports_only_the_stages_before_it():
    edges, _ = _graph()
    backward = sorted((m, d) for m, deps in edges.items() for d in deps
                      if _stage(m) is not None and _stage(d) is not None and _stage(d) > _stage(m))
    assert backward == []


def test_every_module_belongs_to_a_stage():
    edges, _ = _graph()
    assert sorted(m for m in edges if _stage(m) is None and m not in ("brax_diff", "brax_diff.__main__")) == []


def test_the_checks_catch_what_they_look_for():
    """The cycle finder and the stage order on a made-up graph (so a passing run means something)."""
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert _stage("brax_diff.cli.report") > _stage("brax_diff.report.render") > _stage("brax_diff.facts.model")
