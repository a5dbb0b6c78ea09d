"""The ``contextfold`` command over a SQLite store it may not grow: the exit code says what to do."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from tests.cli_runner import cf_process as cf


def _file_size_limit_300k() -> None:  # pragma: no cover - runs in the child
    # the limit raises SIGXFSZ at the write that crosses it (its default action kills the
    # process): ignored, as Python ignores it, so the write fails with EFBIG instead
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, resource.RLIM_INFINITY))


def test_an_import_past_the_file_size_limit_exits_5_not_4(tmp_path: Path) -> None:
    """Under a file-size limit (``ulimit -f``) or a used-up disk quota SQLite says "disk I/O error":
    the import exited 4, StoreUnavailableError ("retry later"), and a retry failed the same way.
    Now 5, StoreFullError (the storage refuses the write), one line saying which limit."""
    assert cf("demo", cwd=tmp_path).returncode == 0  # the default store, contextfold.db
    history = [{"role": "user", "content": os.urandom(5_000).hex()} for _ in range(100)]
    (tmp_path / "h.json").write_text(json.dumps(history))
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTFOLD_STORE"}
    out = subprocess.run([sys.executable, "-m", "contextfold", "import", "h.json", "--run", "big"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
                         preexec_fn=_file_size_limit_300k)
    assert out.returncode == 5, out.stderr
    assert out.stderr.startswith("contextfold: StoreFullError: ") and "RLIMIT_FSIZE" in out.stderr, out.stderr
    assert str(tmp_path / "contextfold.db") in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "big" not in cf("runs", cwd=tmp_path).stdout  # nothing half-written
