"""``verify`` names the head of an intact chain: ``audit --turn`` shows it for an export's receiver
to compare, and reads it from the check's own pass (a second pass over the log read every record
after the turn twice, ``test_record_reads_once``)."""

from __future__ import annotations

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput


def test_an_intact_chains_report_names_its_last_events_hash(store_url: str) -> None:
    with contextfold.open_store(store_url) as store:
        run = store.run("head")
        run.append(UserInput("list the files"))
        run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="ls", arguments="{}")]))
        run.append(ToolResult(call_id="c1", content="a.py\nb.py"))
        run.build(provider="openai-chat", window=8_000, reserve=1_000)
        report = run.verify()
        last = list(run.events())[-1]
        assert report.ok and report.events == last.position
        assert report.head == last.hash and len(report.head) == 64
