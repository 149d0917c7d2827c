"""Stdlib ``ast`` trees of upstream files, parsed once per blob per run.

The readers that walk plain syntax (an env's own ``step``, Playground's registries, the
precision settings) are asked once per environment, and every environment of a family reads
the same registry, wrapper and trainer files: a tenth of a cold report went to parsing them
again. The trees are shared, so callers only read them, never change a node.
"""

from __future__ import annotations

import ast

# Trees by blob id (the snapshot's content id, so a work tree's edited file is another key);
# None: the file does not parse. Bounded like the libcst modules (engine.pyast).
_TREES: dict[str, ast.Module | None] = {}
MAX_TREES = 160


def parse_ast(snapshot, path: str) -> ast.Module | None:
    """The file's tree; None when it is missing or not Python (both recorded in ``reads``)."""
    blob = snapshot.blob_id(path)
    if blob is None:
        return None
    if blob in _TREES:
        _TREES[blob] = _TREES.pop(blob)  # the most recently used goes last
        return _TREES[blob]
    try:
        tree = ast.parse(snapshot.read(path))
    except (SyntaxError, ValueError):
        tree = None
    if len(_TREES) >= MAX_TREES:
        _TREES.pop(next(iter(_TREES)))
    _TREES[blob] = tree
    return tree
