"""The SLM-Lab variant -> Playground family/environments mapping: the shipped file or the user's.

Its own module, without the extractors' imports (libcst): `report --mapping FILE` reads it
before it knows whether the fact cache answers everything.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from brax_diff.errors import ConfigError
from brax_diff.safety.io import read_text
from brax_diff.safety.limits_yaml import load_yaml

from brax_diff.facts.scope import PLAYGROUND_FAMILIES as FAMILIES  # light: a warm report imports this module


def load_mapping(path: str | None = None) -> dict:
    """The variant -> family/envs mapping: the shipped file, or the user's ``path``."""
    if path:
        text = read_text(path, "mapping file", ConfigError)
        origin = path
    else:
        text = resources.files("brax_diff").joinpath("data/slm_mapping.yaml").read_text(encoding="utf-8")
        origin = "shipped slm_mapping.yaml"
    try:
        data = load_yaml(text, f"mapping file {origin}")
    except yaml.YAMLError as exc:
        raise ConfigError(f"mapping file {origin}: invalid YAML: {str(exc).splitlines()[0]}") from None
    return validate_mapping(data, origin)


def validate_mapping(data: Any, origin: str = "mapping") -> dict:
    if not isinstance(data, dict) or not isinstance(data.get("variants", {}), dict) or not isinstance(
            data.get("family_defaults", {}), dict):
        raise ConfigError(f"{origin}: expected mappings 'variants' and 'family_defaults'")
    for name, entry in data.get("variants", {}).items():
        if not isinstance(entry, dict) or entry.get("family") not in FAMILIES:
            raise ConfigError(f"{origin}: variant {name}: 'family' must be one of {', '.join(FAMILIES)}")
        if not isinstance(entry.get("envs", []), list):
            raise ConfigError(f"{origin}: variant {name}: 'envs' must be a list")
    for family, candidates in data.get("family_defaults", {}).items():
        if family not in FAMILIES or not isinstance(candidates, (list, str)):
            raise ConfigError(f"{origin}: family_defaults.{family}: expected a family and a variant (list)")
    return data
