import sys
from pathlib import Path

# Tests import the checkout they live in, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache folder: no test reads what another (or a user) cached."""
    monkeypatch.setenv("BRAX_DIFF_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
