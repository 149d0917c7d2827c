"""Finished runs on disk, one JSON file per run, named by the hash of what defines it.

The hash covers trainer, settings, environment, seed, budget, scoring protocol, the
platform (CPU model, accelerator, package versions: bit-identical only on the same CPU and
builds) and the brax-diff version (:meth:`RunSpec.run_id`), so an interrupted ``verify`` picks up where it stopped and a
changed setting never reuses a stale result. Files are written atomically: a run is either
recorded whole or not at all. A failed run is recorded too (status "failed" and its error).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import __version__
from ..facts.model import dumps
from ..safety.io import write_atomic
from .plan import RunSpec

OK, FAILED = "ok", "failed"


@dataclass
class RunResult:
    """What one run produced: its evaluation curve and score, or the error it died of.

    ``score`` is the evaluation at the run's last checkpoint (``env_steps``); ``score_kind``
    says what was measured (:attr:`Scoring.kind`): runs compare only when it is equal.
    """

    spec: RunSpec
    status: str
    steps: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    score: float | None = None
    env_steps: int = 0
    seconds: float = 0.0
    error: str | None = None
    device: str = "cpu"
    score_kind: str = ""
    cpu_seconds: float = 0.0  # CPU time of the process during the run: its cost whatever else ran

    @property
    def steps_per_second(self) -> float:
        return self.env_steps / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec.to_json(), "status": self.status, "steps": self.steps, "scores": self.scores,
                "score": self.score, "env_steps": self.env_steps, "seconds": round(self.seconds, 3),
                "error": self.error, "device": self.device, "score_kind": self.score_kind,
                "cpu_seconds": round(self.cpu_seconds, 3)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunResult":
        return cls(RunSpec.from_json(data["spec"]), data["status"], list(data.get("steps", [])),
                   list(data.get("scores", [])), data.get("score"), int(data.get("env_steps", 0)),
                   float(data.get("seconds", 0.0)), data.get("error"), data.get("device", "cpu"),
                   str(data.get("score_kind", "")), float(data.get("cpu_seconds", 0.0)))


class RunCache:
    """``platform``: the machine's (platform.describe() unless given); a run recorded on
    another CPU, accelerator or package build is another run."""

    def __init__(self, directory: str | Path, version: str = __version__, platform: dict[str, Any] | None = None):
        from .platform import describe

        self.directory, self.version = Path(directory), version
        self.platform = describe() if platform is None else platform

    def path(self, spec: RunSpec) -> Path:
        return self.directory / "runs" / f"{spec.run_id(self.version, self.platform)}.json"

    def load(self, spec: RunSpec) -> RunResult | None:
        """The recorded result of this exact run, or None (never recorded, or unreadable).

        Arms with the same settings are one run (the arm's name is not part of its identity):
        the result comes back under the asking spec, so an all_fixes that moves nothing still
        counts as all_fixes."""
        path = self.path(spec)
        try:
            result = RunResult.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return replace(result, spec=spec)

    def store(self, result: RunResult) -> Path:
        data = result.to_json()
        data["identity"] = result.spec.identity(self.version, self.platform)
        return write_atomic(self.path(result.spec), dumps(data))
