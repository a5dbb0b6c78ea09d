"""``why RUN QUERY`` without ``--turn``: what every recorded turn did with it, turns with the same
answer as one range.

Why: an incident starts from a call ("the model ran DROP TABLE after reading c1's result: which
requests held that result, whole, cut or masked?"), and ``why`` answered for one turn at a time
(``--turn`` was required): the user ran it once per turn and lined the answers up by hand, or read
every record's manifest JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from tests.cli_runner import cf


def _store(tmp_path: Path) -> str:
    """Run ``r``: a task (1) built as turn 1; calls c0-c3 and their results, each turn built
    (turns 2-5, each record logged: c1's result at 7); a mask compaction that hides c0 and c1,
    and turn 6 built: c1 masked."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        run = store.run("r")
        run.append(UserInput("Fix the failing test"))
        run.build("openai-chat", window=8_000, reserve=1_000)
        for k in range(4):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{k}", name="sh", arguments="{}"),)),
                       ToolResult(call_id=f"c{k}", content=f"RESULT-{k} " + "line\n" * 40))
            run.build("openai-chat", window=8_000, reserve=1_000)
        assert run.compact("mask", keep_recent=2).events
        run.append(ModelResponse(text="done?"), UserInput("go on"))
        run.build("openai-chat", window=8_000, reserve=1_000)
    return url


def test_why_without_a_turn_answers_for_every_recorded_turn(tmp_path: Path) -> None:
    url = _store(tmp_path)
    out = cf("--store", url, "why", "r", "c1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("c1 across the 6 recorded turns of run 'r'"), lines
    assert any(line.startswith("  turns 1-2") and "not logged yet" in line for line in lines), lines
    assert any(line.startswith("  turn 3 ") and "KEPT    e7 (tool_result" in line and "required" in line
               for line in lines), lines  # the newest call's answer: required
    assert any(line.startswith("  turns 4-5") and "KEPT    e7 (tool_result" in line and "selected" in line
               for line in lines), lines
    assert any(line.startswith("  turn 6 ") and "compacted" in line and "stub" in line
               for line in lines), lines


def test_why_without_a_turn_as_json_and_when_nothing_matches(tmp_path: Path) -> None:
    url = _store(tmp_path)
    out = cf("--store", url, "why", "r", "c1", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["query"] == "c1" and data["turns"] == 6
    spans = [(s["from"], s["to"], [m["id"] for m in s["matches"]]) for s in data["spans"]]
    assert spans == [(1, 2, []), (3, 3, ["e7"]), (4, 5, ["e7"]), (6, 6, [])], spans
    assert "not logged yet" in data["spans"][0]["note"] and "stub" in data["spans"][3]["note"]
    nothing = cf("--store", url, "why", "r", "no-such-call", cwd=tmp_path)
    assert nothing.returncode == 1, nothing.stdout
    refused = cf("--store", url, "why", "r", "c1", "--record", "last", cwd=tmp_path)
    assert refused.returncode == 2 and "--turn" in refused.stderr, refused.stderr
