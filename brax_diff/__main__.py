"""``python -m brax_diff``: the ``brax-diff`` command.

``python -m`` puts the current directory first on ``sys.path``, so a ``yaml.py`` or an
``extractors/`` folder sitting there would be imported in place of the real ones. It is
dropped before anything else is imported, unless it is the folder this package lives in
(a checkout run in place, whose ``extractors/`` is the real one).
"""

import os
import sys


def _drop_working_directory() -> None:
    def resolved(entry: str) -> str:
        return os.path.realpath(entry or os.curdir)

    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the directory was deleted: nothing there to shadow; main() says so
        sys.path[:] = [entry for entry in sys.path if entry not in ("", os.curdir)]
        return
    home = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    if cwd != home:
        sys.path[:] = [entry for entry in sys.path if resolved(entry) != cwd]


_drop_working_directory()

from brax_diff.cli import main  # noqa: E402 (after the path is cleaned)

sys.exit(main())
