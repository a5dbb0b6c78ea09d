"""``contextfold show RUN e27``: a manifest's fragment id leads to the logged event behind it.

Why: ``manifest``, ``audit --turn`` and ``why`` name each fragment by its id (``e27``, a mask's
stub ``e32.c4``, a goal's contract ``e3.c1``), and ``show`` refused every one of them ("unknown
ref 'e27'"): to read what the model was shown, a user had to know that ``e27`` is the event at
position 27 and spell it ``event://RUN/27``, and that a stub's raw content is the event its
source names, read off the manifest's JSON.
"""

from __future__ import annotations

from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import GoalSet, ModelResponse, ToolCall, ToolResult, UserInput
from tests.cli_runner import cf


def _store(tmp_path: Path) -> tuple[str, int]:
    """Run ``r``: a goal with a contract (1), a task (2), four calls and results (3-10), then a mask
    compaction (its position returned) that leaves stubs for the older results."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        run = store.run("r")
        run.append(GoalSet(goal="Ship the fix", success_contract=("all tests pass",)),
                   UserInput("Fix the failing test"))
        for k in range(4):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{k}", name="sh", arguments="{}"),)),
                       ToolResult(call_id=f"c{k}", content=f"RESULT-{k} " + "line\n" * 40))
        report = run.compact("mask", keep_recent=1)
        assert report.events, report
        run.build("openai-chat", window=8_000, reserve=1_000)
        return url, run.version - 1


def test_a_fragment_id_shows_its_event(tmp_path: Path) -> None:
    url, _ = _store(tmp_path)
    by_ref = cf("--store", url, "show", "r", "event://r/4", cwd=tmp_path)
    by_id = cf("--store", url, "show", "r", "e4", cwd=tmp_path)
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout == by_ref.stdout and "RESULT-0" in by_id.stdout


def test_a_stub_shows_the_raw_event_it_stands_for(tmp_path: Path) -> None:
    url, compaction = _store(tmp_path)
    manifest = cf("--store", url, "manifest", "r", "--turn", "5", cwd=tmp_path)
    stub = f"e{compaction}.c1"
    assert stub in manifest.stdout, manifest.stdout  # the id a user reads in the table
    shown = cf("--store", url, "show", "r", stub, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == cf("--store", url, "show", "r", "4", cwd=tmp_path).stdout  # c0's result


def test_a_part_of_an_event_shows_the_event(tmp_path: Path) -> None:
    url, _ = _store(tmp_path)
    shown = cf("--store", url, "show", "r", "e1.c1", cwd=tmp_path)  # the goal's contract
    assert shown.returncode == 0, shown.stderr
    assert "all tests pass" in shown.stdout


def test_a_fragment_id_without_its_run_or_past_the_log_is_refused(tmp_path: Path) -> None:
    url, _ = _store(tmp_path)
    alone = cf("--store", url, "show", "e4", cwd=tmp_path)
    assert alone.returncode == 2 and "show RUN e4" in alone.stderr, alone.stderr
    past = cf("--store", url, "show", "r", "e999", cwd=tmp_path)
    assert past.returncode == 2, past.stderr
