"""What one run's read, build, check and audit cost does not grow with the other runs of its store.

Why: a runtime records every run of many agents into one store for a year. A read of one run
that touched other runs' rows (a listing, a scan of the events table, a global count) would cost
more with every run recorded, unseen in a test store of a few runs. Counted as SQLite's
virtual-machine steps (deterministic), in a store of 40 runs and one of 800 holding the same
run: the one-run calls take the same steps in both, up to a B-tree level more.
``scripts/measure_big_store.py`` measures the same up to 10,000 runs, with the query plans.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.audit.data import audit_run
from contextfold.store_api import Store, open_store
from tests.integration.test_many_runs_listing import _fill, _steps

RUN = "agent-00/run-00000"
"""The first run of both stores (built once, so it holds a record)."""

CALLS: dict[str, Callable[[Store], Any]] = {
    "state": lambda s: s.run(RUN).state(),
    "preview": lambda s: s.run(RUN).preview("openai-chat"),
    "verify": lambda s: s.run(RUN).verify(),
    "read": lambda s: s.events.read(RUN),
    "records": lambda s: s.run(RUN).records(3),
    "replay": lambda s: s.run(RUN).replay(3),
    "audit": lambda s: audit_run(s.run(RUN)),
    "next_turn": lambda s: s.run(RUN).next_turn(),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    made = {}
    for size in (40, 800):
        path = tmp_path_factory.mktemp("among") / "runs.db"
        with open_store(f"sqlite:///{path}") as store:
            _fill(store.events, size)
            store.run(RUN).build("openai-chat")  # its next turn's request, recorded
        made[size] = path
    return made


def _cost(path: Path, name: str) -> int:
    with _steps() as counted, open_store(f"sqlite:///{path}", must_exist=True) as store:
        store.events.version(RUN)  # the pool's connection made outside the count
        counted[0] = 0
        CALLS[name](store)
        return counted[0]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_one_run_costs_the_same_among_twenty_times_more_runs(stores: dict[int, Path], name: str) -> None:
    small, large = _cost(stores[40], name), _cost(stores[800], name)
    assert small > 0
    assert large <= small * 1.2 + 50, (name, small, large)
