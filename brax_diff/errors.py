"""Errors that reach the user as one line and a non-zero exit code."""

from __future__ import annotations


class BraxDiffError(Exception):
    """A problem with the user's input or with an upstream repository.

    The message is one line that names what was wrong (repo, ref, path, key). The CLI
    prints it as ``error: <message>`` and exits with ``exit_code``; no traceback.
    """

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class SourceError(BraxDiffError):
    """A repository, ref or file that cannot be read."""


class SpecError(BraxDiffError):
    """An SLM-Lab spec that cannot be resolved (bad YAML, missing variant, ...)."""


class ConfigError(BraxDiffError):
    """A bad brax-diff configuration value (config file, rules file, mapping file)."""


class FixError(BraxDiffError):
    """Bad input to `brax-diff fix`: one line, exit 2, nothing written."""
