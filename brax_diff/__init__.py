"""brax-diff: regenerate the Brax PPO vs SLM-Lab PPO comparison from the code itself.

Pipeline, data flowing one way:
    sources (git blobs at a ref) -> extractors (libcst / PyYAML) -> canonical facts
    -> comparison -> rules -> verification -> rendering (Jinja: Markdown, JSON).

The extractors are the package ``brax_diff.extractors``: a wheel installs the repository's
top-level ``extractors/`` folder there (no top-level ``extractors`` package enters
site-packages, where another project of that name exists); in a source checkout the finder
below maps the name to that folder.
"""

import os as _os
import sys as _sys

__version__ = "0.2.0"

_HERE = _os.path.dirname(_os.path.abspath(__file__))
EXTRACTORS_DIR = (_os.path.join(_HERE, "extractors") if _os.path.isdir(_os.path.join(_HERE, "extractors"))
                  else _os.path.join(_os.path.dirname(_HERE), "extractors"))


class _CheckoutExtractors:
    """Finds ``brax_diff.extractors`` in a source checkout's top-level folder (nothing else)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "brax_diff.extractors":
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(name, _os.path.join(EXTRACTORS_DIR, "__init__.py"),
                                                      submodule_search_locations=[EXTRACTORS_DIR])


if EXTRACTORS_DIR != _os.path.join(_HERE, "extractors") and not any(
        isinstance(f, _CheckoutExtractors) or type(f).__name__ == "_CheckoutExtractors" for f in _sys.meta_path):
    # First: an editable install of another checkout maps the name to its folder, and this
    # checkout's brax_diff must run with this checkout's extractors.
    _sys.meta_path.insert(0, _CheckoutExtractors())
