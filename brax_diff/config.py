"""Settings: defaults, then one provider per file, then command-line flags.

Later providers win: defaults < ``[tool.brax-diff]`` in ./pyproject.toml <
./brax-diff.toml (top-level keys, or its own ``[tool.brax-diff]`` table) < flags.
Keys may be written with dashes or underscores (``brax-repo`` or ``brax_repo``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .io import read_text
from .limits import check_nesting
from .sources import DEFAULT_URLS, is_url


@dataclass(frozen=True)
class Settings:
    brax_repo: str = DEFAULT_URLS["brax"]  # local path or URL of google/brax
    playground_repo: str = DEFAULT_URLS["playground"]  # ... of google-deepmind/mujoco_playground
    # None until load_settings: this SLM-Lab checkout when run inside one, else kengz/SLM-Lab.
    slm_repo: str | None = None
    brax_ref: str = "main"
    playground_ref: str = "main"
    slm_ref: str | None = None  # None until load_settings: HEAD of a local checkout, else master
    spec: str = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"  # SLM-Lab spec file
    rules: str | None = None  # a rules YAML replacing or extending the shipped table
    mapping: str | None = None  # a variant -> family/env mapping file replacing the shipped one
    cache_dir: str | None = None  # where URL clones and caches live
    reports_dir: str = "reports"

    def merged(self, values: dict[str, Any], origin: str) -> "Settings":
        known = {f.name: f for f in fields(self)}
        clean: dict[str, Any] = {}
        for raw_key, value in values.items():
            key = raw_key.replace("-", "_")
            if key not in known:
                raise ConfigError(f"{origin}: unknown setting {raw_key!r} "
                                  f"(known: {', '.join(sorted(known))})")
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{origin}: setting {raw_key!r} must be a string")
            clean[key] = value
        return replace(self, **clean)


def _read_toml(path: Path) -> dict[str, Any]:
    text = read_text(path, "settings file", ConfigError)
    check_nesting(text, str(path), "toml")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit; nesting
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _table(data: Any, keys: tuple[str, ...], origin: str) -> Any:
    """``data[keys[0]][keys[1]]...``; {} when a key is absent; a ConfigError when a level is not a table."""
    for depth, key in enumerate(keys):
        if not isinstance(data, dict):
            raise ConfigError(f"{origin}: [{'.'.join(keys[:depth])}] must be a table, not {type(data).__name__}")
        data = data.get(key, {})
    return data


def pyproject_provider(directory: Path) -> dict[str, Any]:
    path = directory / "pyproject.toml"
    if not path.is_file():
        return {}
    return _table(_read_toml(path), ("tool", "brax-diff"), str(path))


def brax_diff_toml_provider(directory: Path) -> dict[str, Any]:
    path = directory / "brax-diff.toml"
    if not path.is_file():
        return {}
    data = _read_toml(path)
    tool = data.get("tool")
    return tool["brax-diff"] if isinstance(tool, dict) and "brax-diff" in tool else data


PROVIDERS = (("pyproject.toml [tool.brax-diff]", pyproject_provider),
             ("brax-diff.toml", brax_diff_toml_provider))


SLM_DEFAULT_BRANCH = "master"


def slm_checkout(directory: Path) -> Path | None:
    """The top of the git work tree holding ``directory`` when it is an SLM-Lab checkout
    (``slm_lab/`` at its top), else None."""
    for folder in (directory, *directory.parents):
        if (folder / ".git").exists():
            return folder if (folder / "slm_lab").is_dir() else None
    return None


def load_settings(directory: Path | None = None, **flags: Any) -> Settings:
    """Settings for a run in ``directory`` (default: cwd); ``flags`` set to None are ignored.

    With no SLM-Lab repository configured, brax-diff run inside an SLM-Lab checkout reads that
    checkout (at HEAD); anywhere else it reads kengz/SLM-Lab from GitHub (at master)."""
    directory = (directory or Path.cwd()).resolve()
    settings = Settings()
    for origin, provider in PROVIDERS:
        values = provider(directory)
        if not isinstance(values, dict):
            raise ConfigError(f"{origin}: expected a table of settings")
        settings = settings.merged(values, origin)
    settings = settings.merged({k: v for k, v in flags.items() if v is not None}, "command line")
    if settings.slm_repo is None:
        checkout = slm_checkout(directory)
        settings = replace(settings, slm_repo="." if checkout == directory else str(checkout or DEFAULT_URLS["slm"]))
    if settings.slm_ref is None:
        settings = replace(settings, slm_ref=SLM_DEFAULT_BRANCH if is_url(settings.slm_repo) else "HEAD")
    return settings
