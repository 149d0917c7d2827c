"""Settings: defaults, then one provider per file, then command-line flags.

Later providers win: defaults < ``[tool.brax-diff]`` in pyproject.toml < brax-diff.toml
(top-level keys, or its own ``[tool.brax-diff]`` table) < flags. Keys may be written with
dashes or underscores (``brax-repo`` or ``brax_repo``).

The files are read in the project's root: the first directory from the current one up that
holds brax-diff.toml or a pyproject.toml with ``[tool.brax-diff]``, no higher than the top of
the git work tree (as ruff and git look); with neither, that top (outside a work tree: the
current directory). Relative paths in the files, and the default reports directory, start
at the root; relative paths given as flags start at the current directory.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .safety.io import read_text
from .safety.limits import check_nesting
from .sources.repository import DEFAULT_URLS, is_url


@dataclass(frozen=True)
class Settings:
    brax_repo: str = DEFAULT_URLS["brax"]  # local path or URL of google/brax
    playground_repo: str = DEFAULT_URLS["playground"]  # ... of google-deepmind/mujoco_playground
    # None until load_settings: this SLM-Lab checkout when run inside one, else kengz/SLM-Lab.
    slm_repo: str | None = None
    brax_ref: str = "main"
    playground_ref: str = "main"
    slm_ref: str | None = None  # None until load_settings: HEAD of a local checkout, else master
    rsl_rl_repo: str = DEFAULT_URLS["rsl_rl"]  # ... of leggedrobotics/rsl_rl (rsl-rl-lib), the third side
    rsl_rl_ref: str | None = None  # None: the release Playground's uv.lock pins at its ref (session.pinned_rsl_rl_ref)
    spec: str = "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml"  # SLM-Lab spec file
    rules: str | None = None  # a rules YAML replacing or extending the shipped table
    mapping: str | None = None  # a variant -> family/env mapping file replacing the shipped one
    cache_dir: str | None = None  # where URL clones and caches live
    reports_dir: str = "reports"
    # Not a setting: the directory relative paths in the settings files start at (load_settings).
    root: str = field(default=".", compare=False)

    def merged(self, values: dict[str, Any], origin: str) -> "Settings":
        known = [f.name for f in fields(self) if f.name not in INTERNAL]
        clean: dict[str, Any] = {}
        for raw_key, value in values.items():
            key = raw_key.replace("-", "_")
            if key not in known:
                raise ConfigError(f"{origin}: {unknown_key_message(raw_key, known)}")
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{origin}: setting {raw_key!r} must be a string")
            clean[key] = value
        return replace(self, **clean)

    def label(self, path: str) -> str:
        """``path`` as a report shows it: relative to the root when inside it (the same report
        from any directory of the project, and no local path in it), else as given."""
        absolute = os.path.abspath(os.path.expanduser(path))
        inside = os.path.relpath(absolute, os.path.abspath(self.root))
        return path if inside == os.pardir or inside.startswith(os.pardir + os.sep) else Path(inside).as_posix()


INTERNAL = {"root"}
# Settings that are filesystem paths (a repository also when it is not a URL): relative ones
# in a settings file start at the root. `spec` is a path inside the SLM-Lab repository.
PATH_SETTINGS = ("brax_repo", "playground_repo", "slm_repo", "rsl_rl_repo", "rules", "mapping", "cache_dir",
                 "reports_dir")
# A settings file comes with the checkout brax-diff runs in, and a checkout is not trusted: it
# cannot choose the fact cache (trusted data: a planted one prints a doctored value with genuine
# links), and the files it names for writing or reading stay inside it. A flag lifts both.
NOT_FROM_FILES = ("cache_dir",)
CONFINED = ("reports_dir", "rules", "mapping")


def unknown_key_message(raw_key: str, known: list[str]) -> str:
    """The key as written, the closest known one spelt the same way (dashes or underscores)."""
    dashes = "_" not in raw_key
    spelt = {(k.replace("_", "-") if dashes else k): k for k in known}
    close = difflib.get_close_matches(raw_key, list(spelt), n=1)
    suggest = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown setting {raw_key!r}{suggest} (known: {', '.join(sorted(spelt))})"


def _read_toml(path: Path) -> dict[str, Any]:
    text = read_text(path, "settings file", ConfigError)
    check_nesting(text, str(path), "toml")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit; nesting
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _pyproject_table(directory: Path) -> Any:
    """pyproject.toml's ``[tool.brax-diff]`` table; None when the file or the table is absent."""
    path = directory / "pyproject.toml"
    if not path.is_file():
        return None
    tool = _read_toml(path).get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table, not {type(tool).__name__}")
    return tool.get("brax-diff")


def pyproject_provider(directory: Path) -> dict[str, Any]:
    found = _pyproject_table(directory)
    return {} if found is None else found


def brax_diff_toml_provider(directory: Path) -> dict[str, Any]:
    path = directory / "brax-diff.toml"
    if not path.is_file():
        return {}
    data = _read_toml(path)
    tool = data.get("tool")
    return tool["brax-diff"] if isinstance(tool, dict) and "brax-diff" in tool else data


PROVIDERS = (("pyproject.toml [tool.brax-diff]", pyproject_provider),
             ("brax-diff.toml", brax_diff_toml_provider))


def _where(origin: str, root: Path, directory: Path) -> str:
    """A provider's name in messages; read in a directory above, with the path to it."""
    return origin if root == directory else f"{os.path.relpath(root, directory)}/{origin}"


SLM_DEFAULT_BRANCH = "master"


def work_tree_top(directory: Path) -> Path | None:
    """The top of the git work tree holding ``directory`` (a ``.git`` folder or file); None outside one."""
    for folder in (directory, *directory.parents):
        if (folder / ".git").exists():
            return folder
    return None


def slm_checkout(directory: Path) -> Path | None:
    """The top of the git work tree holding ``directory`` when it is an SLM-Lab checkout
    (``slm_lab/`` at its top), else None."""
    top = work_tree_top(directory)
    return top if top is not None and (top / "slm_lab").is_dir() else None


def project_root(directory: Path) -> Path:
    """Where the settings files are read and their relative paths start (the module docstring)."""
    top = work_tree_top(directory)
    if top is None:
        return directory
    for folder in (directory, *directory.parents):
        if (folder / "brax-diff.toml").is_file() or _pyproject_table(folder) is not None:
            return folder
        if folder == top:
            break
    return top


def _anchored(values: Any, root: Path) -> Any:
    """A settings file's values with relative paths made to start at ``root``."""
    if not isinstance(values, dict):
        return values
    out = dict(values)
    for raw_key, value in values.items():
        if (raw_key.replace("-", "_") in PATH_SETTINGS and isinstance(value, str) and value and not is_url(value)
                and not value.startswith("~") and not Path(value).is_absolute()):
            out[raw_key] = os.path.normpath(root / value)
    return out


def outside_checkout(path: str, root: str | Path) -> str | None:
    """The checkout (the work tree holding ``root``, else ``root``) when ``path``, symbolic links
    resolved, leads outside it; None when it stays inside."""
    checkout = os.path.realpath(work_tree_top(Path(root)) or root)
    where = Path(os.path.realpath(os.path.join(root, os.path.expanduser(path))))
    return None if where == Path(checkout) or Path(checkout) in where.parents else checkout


def _trusted(values: dict[str, Any], root: Path, origin: str, flags: dict[str, Any]) -> None:
    """Refuse what a checkout's settings file may not decide (NOT_FROM_FILES, CONFINED), unless
    the same setting is given as a flag (which wins anyway)."""
    anchored = _anchored(values, root)
    for raw_key, value in values.items():
        key = raw_key.replace("-", "_")
        if value is None or flags.get(key) is not None:
            continue
        if key in NOT_FROM_FILES:
            raise ConfigError(f"{origin}: {raw_key} cannot be set in a settings file: the cache holds facts "
                              "brax-diff trusts, and a checkout could ship a doctored one; set "
                              "BRAX_DIFF_CACHE_DIR (or pass --cache-dir) instead")
        if key in CONFINED and isinstance(value, str):
            # realpath: a symlink inside the checkout that leads out counts as out.
            inside = outside_checkout(anchored[raw_key], root)
            if inside is not None:
                elsewhere = "" if key == "reports_dir" else f"; pass --{key} for one elsewhere"
                raise ConfigError(f"{origin}: {raw_key} {value!r} leads outside the checkout ({inside}): a "
                                  f"settings file only names files inside it{elsewhere}")


def load_settings(directory: Path | None = None, **flags: Any) -> Settings:
    """Settings for a run in ``directory`` (default: cwd); ``flags`` set to None are ignored.

    With no SLM-Lab repository configured, brax-diff run inside an SLM-Lab checkout (anywhere
    in it) reads that checkout (at HEAD); anywhere else it reads kengz/SLM-Lab from GitHub (at
    master)."""
    directory = (directory or Path.cwd()).resolve()
    root = project_root(directory)
    # Run in the root, paths stay as written (relative to it, and to the cwd).
    settings = Settings(root=str(root)) if root == directory else Settings(
        reports_dir=str(root / Settings.reports_dir), root=str(root))
    for origin, provider in PROVIDERS:
        values = provider(root)
        where = _where(origin, root, directory)
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: expected a table of settings")
        settings = settings.merged(values if root == directory else _anchored(values, root), where)
        # Checked after merged: an unknown key or a non-string is named as such first.
        _trusted(values, root, where, flags)
    settings = settings.merged({k: v for k, v in flags.items() if v is not None}, "command line")
    if settings.slm_repo is None:
        checkout = slm_checkout(directory)
        settings = replace(settings, slm_repo="." if checkout == directory else str(checkout or DEFAULT_URLS["slm"]))
    if settings.slm_ref is None:
        settings = replace(settings, slm_ref=SLM_DEFAULT_BRANCH if is_url(settings.slm_repo) else "HEAD")
    spec_parts = str(settings.spec).replace("\\", "/").split("/")
    if str(settings.spec).startswith("/") or ".." in spec_parts or not str(settings.spec).strip():
        # Every command reads the spec from the repository (WORKTREE: its work tree), never beside it.
        raise ConfigError(f"spec {settings.spec!r}: a path inside the SLM-Lab repository, such as "
                          "slm_lab/spec/benchmark_arc/ppo/ppo_playground.yaml")
    return settings
