"""Long tool outputs from the SWE-agent trajectories, and what of them a cut shows.

Shared by the tests that a larger grant never shows less of a text (``test_file_cut_units``,
``test_line_kinds_cut_units``, ``test_lean_log_monotone``): real observations are where those
cuts broke.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.projections.truncate import Truncation
from tests.conftest import TRACES

__all__ = ["SWE", "long_observations", "shown_chars"]

SWE = TRACES / "swe-agent-demos"


def long_observations() -> list[str]:
    """The distinct observations of more than 30 lines in the SWE-agent trajectories; the test
    skips, saying why, where the traces are absent (the quick start's clone has none)."""
    paths = sorted(SWE.rglob("*.traj"))
    if not paths:
        pytest.skip(f"SWE-agent traces not present at {SWE} (set CONTEXTFOLD_TRACES)")
    out: dict[str, None] = {}
    for path in paths:
        steps: list[dict[str, Any]] = json.loads(path.read_text()).get("trajectory", [])
        out.update(dict.fromkeys(o for step in steps
                                 if (o := step.get("observation") or "").count("\n") > 30))
    return list(out)


def shown_chars(text: str, cut: Truncation) -> int:
    """The characters of ``text`` that ``cut`` shows (a line a line break more)."""
    if cut.unit == "char":
        return len(text) - cut.omitted_chars
    lines = text.split("\n")
    return sum(len(lines[i - 1]) + 1 for r in cut.kept for i in range(r.start, r.end + 1))
