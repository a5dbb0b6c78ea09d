"""The audit summary counts the run's compactions and logged repairs over the whole log.

A turn lists the events between the previous turn's record and its own, so a compaction (or a
lost result) logged after the last turn's first record (``compact``, then the turn built again)
belonged to no turn, and the summary said "compactions: 0" above the line that listed it."""

from __future__ import annotations

from pathlib import Path

from contextfold.api import open_store
from contextfold.audit.data import audit_run
from contextfold.domain.events import (
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
)


def test_a_compaction_and_a_repair_after_the_last_turns_record_are_counted(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(PolicySet(text="Be careful."), UserInput("go"))
        for i in range(6):
            run.append(ModelResponse(text=f"step {i}", tool_calls=(ToolCall(call_id=f"c{i}", name="sh",
                                                                            arguments="{}"),)))
            run.append(ToolResult(call_id=f"c{i}", content=f"output {i} " + "z " * 400))
        run.append(UserInput("continue"))
        run.build("anthropic", window=16_000, reserve=2_000)
        run.compact("mask")  # logged after the turn's record
        run.build("anthropic", window=16_000, reserve=2_000)  # the turn built again
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c9", name="sh", arguments="{}"),)))
        run.append(ToolResultLost(call_id="c9", reason="the runner restarted"))  # no record after it
        audit = audit_run(run)
    assert audit.summary.compactions == 1
    assert audit.summary.repairs - len({n for t in audit.turns for n in t.build_notes}) == 1  # c9's
