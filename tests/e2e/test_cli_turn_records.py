"""``diff``, ``why`` and ``manifest`` over what a turn's records hold, through ``cli.main`` on a
real SQLite file (same parser, handlers and exit codes as the installed command)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.cli import main
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput

LOG = "\n".join(f"{i:04d} INFO compiling module_{i}.rs with a long line of build noise" for i in range(400))


def _cf(capsys: pytest.CaptureFixture[str], store: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--store", store, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_diff_shows_a_fragment_whole_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        run = s.run("r1")
        run.append(UserInput("Make the build pass."),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cargo"),)),
                   ToolResult(call_id="c1", content=LOG, exit_code=1))
        run.build(window=3_000, reserve=500)  # turn 2: the log is cut
        run.append(ModelResponse(text="Reading the log."), UserInput("Go on."))
        run.build(window=64_000, reserve=1_000)  # turn 3: the log is whole
    code, out, _ = _cf(capsys, store, "diff", "r1", "2", "3")
    assert code == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("~ e3"))
    assert "whole again" in line and "truncated at turn 2" in line
    code, out, _ = _cf(capsys, store, "diff", "r1", "3", "2")
    line = next(x for x in out.splitlines() if x.strip().startswith("~ e3"))
    assert "truncated" in line and "whole again" not in line and "already" not in line
    code, out, _ = _cf(capsys, store, "diff", "r1", "2", "3", "--json")
    d = json.loads(out)
    assert [x["id"] for x in d["restored"]] == ["e3"] and d["truncated"] == []
    assert d["restored"][0]["before"] < d["restored"][0]["after"]
