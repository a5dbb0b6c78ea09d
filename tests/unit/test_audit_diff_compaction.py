"""``diff`` across a compaction: what the compaction took out is reported as replaced by its stand-in.

A masked tool result or a summarized stretch of history leaves the projection (the later
manifest has no exclusion record for it: it is no longer a candidate); the diff said "no
longer in the projection" with no replacement, so a reader could not tell a compaction
from a loss.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.api import Run, open_store
from contextfold.audit.diff import diff_manifests, logged_as
from contextfold.domain.events import ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import ContextManifest

NOISE = "\n".join(f"{i:04d} INFO compiling module_{i}.rs" for i in range(80))


def _record(run: Run) -> None:
    run.append(PolicySet(text="Never force-push."), UserInput("Make the build pass."))
    for t in range(1, 6):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="cargo"),)),
                   ToolResult(call_id=f"c{t}", content=NOISE, exit_code=0))


@pytest.mark.parametrize("strategy", ["mask", "summary"])
def test_compacted_fragments_are_replaced_by_their_stand_in(tmp_path: Path, strategy: str) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r1")
        _record(run)
        before = run.build(window=64_000, reserve=1_000).manifest
        run.compact(strategy, keep_recent=1)  # type: ignore[arg-type]
        run.append(ModelResponse(text="Built."), UserInput("Now run the tests."))
        after = run.build(window=64_000, reserve=1_000).manifest
    d = diff_manifests(before, after)
    stand_in_ids = {f.id for f in after.fragments} - {f.id for f in before.fragments}
    compacted = [x for x in d["left"] if x["reason"] == "compacted"]
    assert compacted, d["left"]
    assert all(x["reason"] == "compacted" for x in d["left"]), d["left"]  # nothing left unexplained
    for x in compacted:
        assert x["replaced_by"] in stand_in_ids
        assert x["detail"].startswith("masked:" if strategy == "mask" else "summarized:")
    assert {r["id"] for r in d["replaced"]} == {x["id"] for x in compacted}
    assert {r["by"] for r in d["replaced"]} <= stand_in_ids


def _mask_then_summary(run: Run) -> tuple[ContextManifest, ContextManifest]:
    """Four reads, the oldest masked, built; then a summary covering the masked result (not the mask)."""
    run.append(PolicySet(text="Be careful."), UserInput("Look at the files."))
    for i in range(4):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="read_file"),)),
                   ToolResult(call_id=f"c{i}", content=f"f{i}.py\n" + "x = 1\n" * 200))
    run.append(ModelResponse(text="Read them all."), UserInput("Now summarise."))
    run.compact("mask")
    masked = run.build(window=64_000, reserve=1_000).manifest
    run.append(ModelResponse(text="ok"), UserInput("continue"))
    for i in range(4, 6):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="read_file"),)),
                   ToolResult(call_id=f"c{i}", content="y"))
    run.compact("summary")
    return masked, run.build(window=64_000, reserve=1_000).manifest


def test_a_stub_a_later_summary_folded_in_is_replaced_by_that_summary(tmp_path: Path) -> None:
    """A mask stub is logged at the mask's position (``e13.c1``) and stands for an earlier result
    (``event://r1/4``): when a summary covering that result (but not the mask's position) took
    it, the diff said "no longer in the projection"."""
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        masked, summarized = _mask_then_summary(store.run("r1"))
    stubs = [f for f in masked.fragments if "." in f.id and f.source_ref.startswith("event://")]
    summary = next(f for f in summarized.fragments if f.source_ref.startswith("events://"))
    assert stubs and summary.id not in {f.id for f in masked.fragments}
    left = {x["id"]: x for x in diff_manifests(masked, summarized)["left"]}
    for stub in stubs:
        assert left[stub.id]["reason"] == "compacted", left[stub.id]
        assert left[stub.id]["replaced_by"] == summary.id


def test_fragments_are_listed_in_log_order(tmp_path: Path) -> None:
    """Ids name log positions: ``e3`` comes before ``e10`` (as text it sorted after)."""
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r1")
        run.append(UserInput("start"))
        first = run.build(window=64_000, reserve=1_000).manifest
        _record(run)
        later = run.build(window=64_000, reserve=1_000).manifest
    entered = [x["id"] for x in diff_manifests(first, later)["entered"]]
    positions = [int(fid[1:].split(".")[0]) for fid in entered if fid.startswith("e")]
    assert len(positions) >= 10 and positions == sorted(positions)


def test_only_a_stub_is_read_as_the_earlier_event_its_source_names() -> None:
    """A source a user set (evidence sourced ``event://x/50`` logged at 5, or an event's own
    fragment) is no stub: it stays at its own position."""
    assert logged_as("e13.c1", "event://r1/4") == "e4"
    assert logged_as("e5", "event://x/50") == "e5"
    assert logged_as("e5.c1", "event://x/50") == "e5.c1"  # a later position: not what a stub cites
    assert logged_as("e13.c1", "events://r1/1-8") == "e13.c1"
    assert logged_as("e13.c1", "docs/a.md") == "e13.c1"


def _lost_then_summarized(run: Run) -> tuple[ContextManifest, ContextManifest, int]:
    """A call the run moved past unanswered (its TOOL_RESULT_LOST recorded by the first build, at
    the end of the log), then a summary covering its group but not the marker; the manifests of
    the builds before and after the summary, and the marker's position."""
    run.append(PolicySet(text="P"), UserInput("deploy"),
               ModelResponse(tool_calls=(ToolCall(call_id="c1", name="deploy"),)), UserInput("is it done?"))
    for t in range(6):
        run.append(ModelResponse(text=f"s{t}", tool_calls=(ToolCall(call_id=f"k{t}", name="bash"),)),
                   ToolResult(call_id=f"k{t}", content=NOISE))
    run.append(UserInput("go on"))
    before = run.build("anthropic", window=100_000).manifest
    lost = next(r.position for r in run.events() if r.event.type == "tool_result_lost")
    (event,) = run.compact("summary").events
    assert event.covers_from <= 3 <= event.covers_to < lost  # c1's group, not its marker
    return before, run.build("anthropic", window=100_000).manifest, lost


def test_a_lost_answer_a_summary_folded_in_with_its_call_is_replaced_by_that_summary(tmp_path: Path) -> None:
    """A summary takes a group whose recovery answer was logged after its cover (``wholly_inside``;
    it cites the answer). The diff listed the call as compacted but its TOOL_RESULT_LOST as "no
    longer in the projection" with no replacement: the account was wrong for exactly the call
    whose outcome is unknown."""
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        before, after, lost = _lost_then_summarized(store.run("r1"))
    summary = next(f for f in after.fragments if f.source_ref.startswith("events://"))
    left = {x["id"]: x for x in diff_manifests(before, after)["left"]}
    assert left["e3"]["reason"] == "compacted" and left["e3"]["replaced_by"] == summary.id
    marker = left[f"e{lost}"]
    assert marker["reason"] == "compacted" and marker["replaced_by"] == summary.id, marker
    assert marker["detail"].startswith(f"summarized: {summary.id} covers events 1-"), marker
    assert all(x["reason"] == "compacted" for x in left.values()), left
