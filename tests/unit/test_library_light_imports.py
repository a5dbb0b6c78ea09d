"""A library user pays for the modules the names it uses need, as a command does.

``from contextfold import open_store`` resolved the name through :mod:`contextfold.api`, which
imports the run handle, the builder, the renderers and tiktoken (~0.3 s of CPU), so a process that
opened a store to list its runs, append events or check a chain paid for a build it never made.
Each case runs in a new interpreter (the modules a process loaded cannot be unloaded) and lists
the heavy modules it loaded (``tests/unit/test_cli_light_imports.py`` does the same for commands).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from contextfold.cli import main

BUILDER = ("contextfold.api", "contextfold.projections.builder", "contextfold.projections.render", "tiktoken",
           "anthropic", "openai", "contextfold.importers")
"""What opening a store and reading or appending its events must not load."""

_CHILD = """
import json, sys
exec(sys.argv[1])
heavy = sorted({h for h in json.loads(sys.argv[2]) for m in sys.modules if m == h or m.startswith(h + ".")})
print(json.dumps(heavy))
"""


def _loaded(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _CHILD, code, json.dumps([*BUILDER, "eventsourcing"])],
                         capture_output=True, text=True, check=True)
    heavy: list[str] = json.loads(out.stdout.splitlines()[-1])
    return heavy


def test_open_store_from_the_package_loads_the_store_not_the_builder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    heavy = _loaded(f"""
import contextfold
from contextfold import Store, UserInput, open_store
with open_store({url!r}) as store:
    assert isinstance(store, Store)
    assert [r.run_id for r in store.runs()] == ["demo-fix-invoice"]
    assert store.events.verify("demo-fix-invoice").ok
    store.events.append("another", [UserInput("hello")])
    assert contextfold.Store is Store and contextfold.open_store is open_store
""")
    assert [h for h in heavy if h in BUILDER] == []
    assert heavy == ["eventsourcing"]  # it did open the store


def test_the_names_are_the_same_objects_through_either_module() -> None:
    """The package's ``Store``/``open_store`` are :mod:`contextfold.api`'s (which re-exports them)."""
    import contextfold
    import contextfold.api as api

    assert contextfold.Store is api.Store
    assert contextfold.open_store is api.open_store
    assert contextfold.ReplayReport is api.ReplayReport
    assert contextfold.Run is api.Run


def test_a_run_that_only_records_loads_no_builder(tmp_path: Path) -> None:
    """An agent loop's process that records events (``store.run(id).append(...)``, as the README
    shows) and reads them back builds nothing: ``Store.run`` imported :mod:`contextfold.api`, which
    imported the builder, the folds, the renderers and tiktoken at its top (~0.3 s of CPU)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    heavy = _loaded(f"""
import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
with contextfold.open_store({url!r}) as store:
    run = store.run("run-42")
    run.append(UserInput("Fix the failing test"))
    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="pytest")]))
    run.append(ToolResult(call_id="c1", content="1 failed", is_error=True, exit_code=1))
    assert [r.event.type for r in run.events()] == ["user_input", "model_response", "tool_result"]
    assert run.version == 3 and run.verify().ok and run.next_turn() == 2 and run.records(1) == []
    assert isinstance(run, contextfold.Run)
""")
    assert [h for h in heavy if h != "contextfold.api" and h in BUILDER] == []
    assert "contextfold.api" in heavy  # the run handle, without what only a build or a fold needs


def test_a_run_still_folds_and_builds(tmp_path: Path) -> None:
    """The same handle folds and builds once asked to (its modules imported then)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    heavy = _loaded(f"""
import contextfold
from contextfold import UserInput
with contextfold.open_store({url!r}) as store:
    run = store.run("run-42")
    run.append(UserInput("Fix the failing test"))
    assert run.state().version == 1
    assert run.build("openai-chat", window=4000).request["messages"]
""")
    assert {"contextfold.api", "contextfold.projections.builder", "tiktoken"} <= set(heavy)


def test_observe_usage_loads_no_tokenizer(tmp_path: Path) -> None:
    """A process that records a turn's reported usage (``Run.observe_usage``, after each model
    response) counts no tokens: it loaded tiktoken (~0.1 s of CPU) because
    ``projections.calibration`` imported the fold's state (``projections.state``) to name a type."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    heavy = _loaded(f"""
import contextfold
with contextfold.open_store({url!r}) as store:
    run = store.run("demo-fix-invoice")
    rec = run.observe_usage(6, 3100, cached_tokens=1000)
    assert rec.event.type == "usage_observed" and rec.position == run.version
""")
    assert [h for h in heavy if h in ("tiktoken", "contextfold.projections.builder")] == []
