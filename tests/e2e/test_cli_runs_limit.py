"""``contextfold runs [PREFIX] --limit N``: the runs started last, as the whole listing ends.

Why: a store in production for a year holds thousands of runs; ``runs`` printed every one of
them (reading every event row of the store), and a user who wanted the newest few piped it to
``tail``. ``--limit N`` prints the last N lines the listing would (with PREFIX: of those runs),
read from the newest rows back (``tests/integration/test_many_runs_listing.py`` counts it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.domain.events import ModelResponse, UserInput
from contextfold.store_api import open_store

RECORDED = datetime(2026, 12, 7, 14, 3, tzinfo=UTC)
"""When the runs' events are recorded (the store's clock, fixed): ``runs`` shows each run's span."""
SPAN = "2026-12-07T14:03:00.000000Z"


def cf(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--store", f"sqlite:///{tmp_path / 'cf.db'}", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def ids(tmp_path: Path) -> list[str]:
    made = [f"{agent}/run-{n}" for n in range(6) for agent in ("triage", "coder")]
    with open_store(f"sqlite:///{tmp_path / 'cf.db'}", clock=lambda: RECORDED) as store:
        for run_id in made:
            store.run(run_id).append(UserInput(f"task of {run_id}"), ModelResponse(text="ok"))
    return made


def test_limit_prints_the_end_of_the_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             ids: list[str]) -> None:
    code, whole, _ = cf(tmp_path, capsys, "runs")
    assert code == 0 and whole.splitlines() == [f"{r}\t2 events\t{SPAN} .. {SPAN}" for r in ids]
    code, out, _ = cf(tmp_path, capsys, "runs", "--limit", "3")
    assert code == 0 and out.splitlines() == whole.splitlines()[-3:]
    code, out, _ = cf(tmp_path, capsys, "runs", "coder/", "--limit", "2", "--json")
    assert code == 0 and json.loads(out) == [{"run_id": r, "events": 2, "first_at": SPAN, "last_at": SPAN}
                                             for r in ids if r.startswith("coder/")][-2:]
    code, out, _ = cf(tmp_path, capsys, "runs", "--limit", "0")
    assert code == 0 and out.startswith("no runs in ")


def test_a_negative_limit_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     ids: list[str]) -> None:
    code, out, err = cf(tmp_path, capsys, "runs", "--limit", "-1")
    assert code == 2 and not out and "limit" in err, err


def test_help_names_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["runs", "--help"])
    assert "--limit N" in capsys.readouterr().out
