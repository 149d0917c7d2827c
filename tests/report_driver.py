"""`brax-diff report` with test_report_cli's fake extractors, in a process of its own, for the
tests that send real signals or set real resource limits.

    python tests/report_driver.py MODE REPORT-ARGS...

MODE ``staging`` pauses after the first report file is staged, ``commit`` after the first
staged file is renamed into place (SIGINT/SIGTERM are held there); both print ``paused``
and sleep $PAUSE_SECONDS. ``fsize=N`` limits files this process writes to N bytes (EFBIG).
``plain`` runs as is.
"""

import os
import resource
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from brax_diff.safety import io  # noqa: E402
from brax_diff.cli import main  # noqa: E402
from brax_diff.cli import report as report_cli  # noqa: E402
from test_report_cli import FakeBrax, FakeSlm  # noqa: E402


def pause_on_first_staged(fn):
    """``fn`` (whose first argument is a path), pausing once after a call on a staged file."""
    paused = []

    def wrapper(path, *args, **kwargs):
        result = fn(path, *args, **kwargs)
        if not paused and io.STAGING_PREFIX in str(path):
            paused.append(True)
            print("paused", flush=True)
            time.sleep(float(os.environ.get("PAUSE_SECONDS", "30")))
        return result
    return wrapper


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    report_cli.load_extractors = lambda: (FakeBrax, FakeSlm)
    if mode == "staging":
        io._write_file = pause_on_first_staged(io._write_file)
    elif mode == "commit":
        io.os.replace = pause_on_first_staged(os.replace)
    elif mode.startswith("fsize="):
        limit = int(mode.split("=", 1)[1])
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    sys.exit(main(["report", *args]))
