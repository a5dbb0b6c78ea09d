"""``scripts/measure_build_warmth.py`` times every variant on its share of the turns, in one process.

Why a test: the script is how the figure "the first build's cold start" is reproduced (what the
loop's work between two turns costs the next build); it reads the builder, the store and the
benchmark's helpers, any of which can move under it. No timing is asserted: only that each
variant ran on its share of the turns and is reported against ``plain``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TRACES

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "measure_build_warmth.py"


def test_every_variant_is_timed_on_its_share_of_the_turns() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--runs", "3", "--sleep-ms", "1"],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "CONTEXTFOLD_TRACES": str(TRACES)})
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert header.split() == ["variant", "builds", "p50", "ms", "/", "plain"]
    assert [row.split()[0] for row in rows] == ["plain", "decoy", "sleep", "no-record"]
    counts = [int(row.split()[1]) for row in rows]
    assert min(counts) > 0 and max(counts) - min(counts) <= 1, out.stdout  # turn by turn, in turn
    assert rows[0].split()[3] == "1.000"
