"""What SLM-Lab's own history already tried: a spec key's values in a variant, commit by commit.

A recommended spec edit (set ``agent.algorithm.time_horizon: 480``) may be one SLM-Lab's
maintainers applied and then changed back. :class:`SpecHistory` reads the spec file at every
commit of a ref's ancestry that touched it (oldest first; git blobs, the spec loader only, no
extraction), resolves the variant at each, and :meth:`SpecHistory.tried` answers whether the
value was set and later changed, naming both commits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import BraxDiffError

_ABSENT = object()  # the variant or the key does not exist at a commit


@dataclass
class SpecHistory:
    """The spec file ``spec`` in ``repository`` over the ancestry of commit ``sha``."""

    repository: Any
    sha: str
    spec: str
    sets: dict[str, str] | None = None
    _commits: list[tuple[str, str]] | None = field(default=None, init=False, repr=False)
    _files: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _variants: dict[tuple[str, str], Any] = field(default_factory=dict, init=False, repr=False)

    def commits(self) -> list[tuple[str, str]]:
        """(sha, ISO date) of every commit that changed the spec file, oldest first."""
        if self._commits is None:
            done = self.repository.git_command("log", "--topo-order", "--reverse", "--format=%H %cI", self.sha,
                                               "--", self.spec)
            if done.returncode != 0:
                raise BraxDiffError(f"history of {self.spec}: git log failed ({done.stderr.strip()[:200]})")
            self._commits = [tuple(line.split(" ", 1)) for line in done.stdout.splitlines() if line.strip()]
        return self._commits

    def _resolved(self, commit: str, variant: str) -> Any:
        from brax_diff.extractors.slm.spec import read_spec_file

        if (commit, variant) not in self._variants:
            resolved = _ABSENT
            try:
                if commit not in self._files:
                    self._files[commit] = read_spec_file(self.repository.resolve(commit).read(self.spec), self.spec,
                                                         self.sets)
                spec_file = self._files[commit]
                if variant in spec_file.variants():
                    resolved = spec_file.resolve(variant)
            except BraxDiffError:
                resolved = _ABSENT  # a spec the loader refuses at that commit says nothing about the key
            self._variants[(commit, variant)] = resolved
        return self._variants[(commit, variant)]

    def values(self, variant: str, dotted: str) -> list[tuple[str, str, Any]]:
        """(commit, date, value) each time the variant's ``dotted`` value changed (a key or variant
        that does not exist there: absent, and not listed)."""
        out: list[tuple[str, str, Any]] = []
        last: Any = _ABSENT
        for commit, date in self.commits():
            resolved = self._resolved(commit, variant)
            value = _ABSENT if resolved is _ABSENT else resolved.get(dotted, _ABSENT)
            if _same(value, last):
                continue
            last = value
            out.append((commit, date, value))
        return out

    def tried(self, variant: str, dotted: str, value: Any) -> dict | None:
        """The last time the variant had ``dotted: value`` and a later commit changed it, or None
        (also when the ref's last version has it again)."""
        changes = self.values(variant, dotted)
        if changes and _same(changes[-1][2], value):
            return None  # the spec has it now: nothing was changed back
        found = None
        for index, (commit, date, seen) in enumerate(changes):
            if _same(seen, value) and index + 1 < len(changes):
                after_commit, after_date, after = changes[index + 1]
                found = {"spec": dotted, "value": value, "set_at": commit, "set_date": date,
                         "changed_at": after_commit, "changed_date": after_date,
                         "changed_to": None if after is _ABSENT else after, "removed": after is _ABSENT}
        return found


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
