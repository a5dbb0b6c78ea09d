"""The ids a summary keeps from a call's arguments are read from the arguments' values, not from
their JSON text (``summary_text.argument_facts``).

Why: a call's arguments are JSON, where a line break or a tab inside a value is written ``\\n`` or
``\\t``. Read as text, the escape's letter was glued to the id after it: a script written with
``"...\\nbuild-20241107\\n\\tdep-9931 rollback"`` was summarised as naming ``{arguments ids:
nbuild-20241107, tdep-9931}``, ids that never existed, and not the two it wrote. Every write
of a multi-line file (an agent's commonest side effect) named such made-up ids (``nkey_26_100``),
and each later summary carried them on in its folded lines (the seed, 5.3: ids stay verbatim;
a summary states no fact the log does not hold)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.events import HistoryCompacted

SCRIPT = "set -e\n" + "echo step\n" * 30 + "build-20241107\n\tdep-9931 rollback\n"


def test_ids_in_a_calls_arguments_are_kept_as_written_across_summaries(tmp_path: Path) -> None:
    with contextfold.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        run = store.run("script")
        run.append(UserInput("Write the rollback script."))
        args = json.dumps({"path": "rollback.sh", "content": SCRIPT})
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="w1", name="write_file", arguments=args),)),
                   ToolResult(call_id="w1", content="wrote rollback.sh", exit_code=0))
        for i in range(4):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"r{i}", name="read", arguments="{}"),)),
                       ToolResult(call_id=f"r{i}", content="line\n" * 200))
        run.compact("summary", keep_recent=2)
        for i in range(4, 8):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"r{i}", name="read", arguments="{}"),)),
                       ToolResult(call_id=f"r{i}", content="line\n" * 200))
        run.compact("summary", keep_recent=2)  # the second merges the first
        summaries = [r.event for r in run.events() if isinstance(r.event, HistoryCompacted)]
        body = json.dumps(run.build("anthropic", window=60_000, reserve=1_000).request, ensure_ascii=False)
    assert len(summaries) == 2
    for summary in summaries:
        (line,) = [c for c in summary.summary.tool_calls_and_results if "call w1" in c]
        named = re.search(r"\{arguments ids: ([^}]*)\}", line)
        assert named is not None, line
        assert {"build-20241107", "dep-9931"} <= set(named.group(1).split(", ")), line
        text = summary.summary.model_dump_json()
        assert "tdep-9931" not in text and "nbuild-20241107" not in text
    assert "tdep-9931" not in body and "dep-9931" in body
