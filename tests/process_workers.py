"""What the tests of worker processes run in a ``spawn`` or ``forkserver`` child.

Its own module, importing only the standard library at the top: a child unpickles these functions
by importing this module, so it must not import pytest (a second per child) nor contextfold before
:func:`start_worker` has set the child's environment (what a process's environment holds when
the package loads is what it reads)."""

from __future__ import annotations

import multiprocessing as mp
import os
from typing import Any

__all__ = ["ERROR_FIELDS", "append_and_build", "child_facts", "echo", "fail_on_store", "made_error",
           "one_of_every_event", "raise_error", "return_handle", "start_worker"]

ERROR_FIELDS: dict[str, dict[str, Any]] = {
    "ImportFormatError": {"location": "trace.jsonl:3", "reason": "not JSON"},
    "StreamIncompleteError": {"location": "anthropic stream", "reason": "no message_stop",
                              "partial": None, "text": "Checking", "missing": ["the stream's end"]},
    "ProtocolError": {"message": "m", "call_id": "c1"},
    "UnknownToolCallError": {"message": "no open call 'c1'", "call_id": "c1"},
    "DuplicateToolResultError": {"message": "'c1' has a result", "call_id": "c1"},
    "DuplicateToolCallError": {"message": "'c1' is open", "call_id": "c1", "issued_at": 4},
    "PendingToolCallsError": {"call_ids": ["c1", "c2"]},
    "ConcurrencyConflictError": {"run_id": "r", "expected_version": 3},
    "RunExistsError": {"run_id": "r", "events": 2, "source": "a.json", "hint": "use --as"},
    "EncodingConflictError": {"run_id": "r", "version": 3, "encoding": "cl100k_base",
                              "offered": "o200k_base"},
    "RunNotFoundError": {"run_id": "r"},
    "ArtifactNotFoundError": {"ref": "ab12", "reason": "was dropped"},
    "TurnNotFoundError": {"run_id": "r", "turn": 5, "last_turn": 2},
    "TimeNotInRunError": {"run_id": "r", "message": "its events carry no times"},
    "RecordNotFoundError": {"run_id": "r", "turn": 2, "record": "last", "count": 0,
                            "store": "sqlite:///runs.db"},
    "IntegrityError": {"message": "hash mismatch", "position": 3},
    "UpgradeRequiredError": {"message": "a newer event", "position": 3},
    "TenantMismatchError": {"url": "sqlite:///t.db", "expected": "acme", "found": "other"},
    "EncodingUnavailableError": {"encoding": "o200k_base", "message": "not cached"},
    "TokenizerError": {"encoding": "cl100k_base", "chars": 10, "message": "panic"},
    "RequiredContextExceedsBudgetError": {"budget": 10, "required": [("policy:1", 20)], "note": "n"},
    "SummaryRejectedError": {"message": "not in the log", "field": "evidence_refs", "ref": "file://x"},
    "RenderError": {"provider": "openai", "message": "bad role", "index": 2, "detail": {"role": "x"}},
    "HandleNotPicklableError": {"handle": "Store", "fix": "open it by URL"},
}
"""Arguments for each error of ``contextfold.domain.errors`` whose ``__init__`` takes fields;
the others take a message."""


def start_worker(environ: dict[str, str]) -> None:
    """A pool's initializer: the child's environment, then the package loaded (as a worker that
    imports contextfold at its top would)."""
    os.environ.update(environ)
    import contextfold.api  # noqa: F401  (loaded now, not in the first task)


def made_error(name: str) -> Exception:
    """The error ``name`` of ``contextfold.domain.errors``, with a note added on the way up."""
    import contextfold.domain.errors as errors

    cls = getattr(errors, name)
    err: Exception = cls(**ERROR_FIELDS[name]) if name in ERROR_FIELDS else cls(f"{name}: a message")
    err.add_note("a note added in the worker")
    return err


def raise_error(name: str) -> None:
    raise made_error(name)


def echo(value: Any) -> Any:
    """``value`` as the worker received it: pickled to the child and back."""
    return value


def return_handle(url: str, run_id: str, which: str) -> Any:
    """A worker returning what it must not: a run handle, or its folded state (the store is
    closed when the handle is collected, once its pickling failed)."""
    import contextfold

    run = contextfold.open_store(url).run(run_id)
    return run if which == "Run" else run.state()


def fail_on_store(url: str, run_id: str, what: str) -> None:
    """A real failing operation on the store at ``url``: its error is the worker's."""
    import contextfold
    from contextfold import ToolResult, UserInput

    with contextfold.open_store(url) as store:
        run = store.run(run_id)
        if what == "stale":
            run.append(UserInput("late"), expected_version=1)
        elif what == "unknown call":
            run.append(ToolResult(call_id="never-issued", content="x"))
        elif what == "no record":
            run.replay(run.next_turn())
        elif what == "no run":
            store.run(run_id + "-missing").replay(1)
        elif what == "over budget":
            run.append(UserInput("a required input " * 400))
            run.build("openai-chat", window=300, reserve=100)
        raise AssertionError(f"{what}: nothing was raised")


def append_and_build(url: str, run_id: str, worker: str, rounds: int) -> dict[str, Any]:
    """An agent loop in a worker: per round an input appended at the version it read (a stale read
    retried: ``ConcurrencyConflictError``), a build recorded (``retries``), the model's reply.
    Returns the conflicts met, each build's turn and request hash, and the last result."""
    import contextfold
    from contextfold import ConcurrencyConflictError, ModelResponse, UserInput

    conflicts, builds, built = 0, [], None
    with contextfold.open_store(url) as store:
        run = store.run(run_id)
        for k in range(rounds):
            while True:
                try:
                    run.append(UserInput(f"{worker}-{k}"), expected_version=run.version)
                    break
                except ConcurrencyConflictError:
                    conflicts += 1
            built = run.build("openai-chat", window=16_000, reserve=2_000, retries=100)
            builds.append((built.manifest.turn, built.manifest.request_hash))
            run.append(ModelResponse(text=f"reply to {worker}-{k}"))
        result = {"conflicts": conflicts, "builds": builds, "last": built}
    return result


def child_facts(url: str, run_id: str) -> dict[str, Any]:
    """What the package set up as it loaded in this child, and a fork from it: the memo ceiling
    (``$CONTEXTFOLD_MEMO_MB``), the encoding a build counts with, and an append from a forked
    grandchild (the package's ``os.register_at_fork`` hooks, registered in this child)."""
    import contextfold
    from contextfold import UserInput

    with contextfold.open_store(url) as store:
        run = store.run(run_id)
        run.append(UserInput("from the spawned worker"))
        encoding = run.build("anthropic", window=16_000, reserve=2_000).manifest.encoding
        child = mp.get_context("fork").Process(target=_append_in_grandchild, args=(run,))
        child.start()
        child.join(60)
        exitcode = child.exitcode
        if exitcode is None:
            child.kill()
            child.join()
    return {"memo_ceiling": contextfold.memo_ceiling(), "encoding": encoding,
            "grandchild_exitcode": exitcode}


def _append_in_grandchild(run: Any) -> None:
    """In a child forked from a worker: the handle it inherited appends (no pickling: fork)."""
    from contextfold import UserInput

    run.append(UserInput("from a fork of the worker"))


def one_of_every_event() -> list[Any]:
    """An event of each type an append takes, with the values a pickle could lose: blocks, an
    artifact ref, a compaction summary, provider reasoning, a manifest, fields left at defaults
    that their JSON leaves out (``exclude_if``)."""
    import contextfold as cf

    ref = cf.ArtifactRef(hash="ab" * 32, size=2048, media_type="image/png")
    steps = [cf.PlanStep(id="s1", title="run tests", status="done"),
             cf.PlanStep(id="s2", title="fix", depends_on=["s1"])]
    image = cf.ImageBlock(artifact=ref, media_type="image/png", width=10, height=10)
    document = cf.DocumentBlock(url="https://example.com/a.pdf", pages=2, title="log")
    summary = cf.CompactionSummary(goal="fix", decisions=["use tabs"], inferences=["x"])
    return [
        cf.RunStarted(agent="coder", model="gpt-4o", encoding="cl100k_base"),
        cf.PolicySet(text="Never push to main.", allowed_tools=["pytest"], pinned_tools=["pytest"]),
        cf.InstructionSet(text="Use tabs.", source_ref="file://AGENTS.md", origin="workspace"),
        cf.GoalSet(goal="Fix the failing test", success_contract=["pytest passes"]),
        cf.PlanUpdated(steps=steps, budget="10 turns"),
        cf.ToolsRegistered(tools=[cf.ToolSpec(name="pytest", description="run", tags=["t"], strict=True)]),
        cf.UserInput(content=[cf.TextBlock(text="Fix it"), image], required=True),
        cf.ModelResponse.model_validate({
            "text": "Running the tests.", "model": "claude-sonnet-4-5",
            "tool_calls": [{"call_id": "c1", "name": "pytest", "arguments": "{\"k\": \"x\"}"}],
            "reasoning": {"provider": "anthropic", "items": [
                {"raw": {"type": "thinking", "thinking": "run them", "signature": "c2ln"}}]}}),
        cf.ModelResponse(tool_calls=[cf.ToolCall(call_id="c2", name="pytest")]),
        cf.ToolResult(call_id="c1", content="1 failed", is_error=True, exit_code=1, blocks=[document]),
        cf.ToolCallCancelled(call_id="c2", reason="superseded"),
        cf.ToolResultLost(call_id="c3", reason="worker died", call_position=8),
        cf.FileRead(path="src/x.py", content="x = 1\n", revision="abc", start_line=1, end_line=1),
        cf.EvidenceRetrieved(content="docs", source_ref="https://example.com", source_kind="web",
                             semantic_key="docs/x"),
        cf.MemoryRecalled(memory_id="m1", content="prefers tabs", source_ref="memory://m1"),
        cf.HistoryCompacted(summary=summary, covers_from=2, covers_to=9),
        cf.ContextBuilt(turn=2, provider="anthropic", request_hash="a" * 64, prefix_hash="b" * 64,
                        config_hash="c" * 64, manifest={"turn": 2, "fragments": []}, log_version=9,
                        builder="contextfold test"),
        cf.HandOff(mode="resume", from_agent="a", to_agent="b", note="take over"),
        cf.RuntimeNote(text="disk almost full", is_error=True),
        cf.UsageObserved(turn=2, input_tokens=1000, cached_tokens=800, output_tokens=50, model="gpt-4o"),
    ]
