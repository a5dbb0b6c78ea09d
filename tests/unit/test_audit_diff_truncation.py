"""``diff`` reports a cut in both directions: a fragment cut at turn A and whole (or cut to another
size) at turn B is a change in what the model saw.

The diff listed a fragment under ``truncated`` only when turn B cut it: a tool log cut at turn A
and sent whole at turn B (a larger window) left the diff silent, though the model saw thousands
of tokens more of it.
"""

from __future__ import annotations

from pathlib import Path

from contextfold.api import Run, open_store
from contextfold.audit.data import audit_run
from contextfold.audit.diff import diff_manifests
from contextfold.audit.report import render_report
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import ContextManifest

LOG = "\n".join(f"{i:04d} INFO compiling module_{i}.rs with a long line of build noise" for i in range(400))


def _record(run: Run) -> None:
    run.append(UserInput("Make the build pass."),
               ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cargo"),)),
               ToolResult(call_id="c1", content=LOG, exit_code=1))


def _tokens(m: ContextManifest, fid: str) -> tuple[int, bool]:
    f = next(f for f in m.fragments if f.id == fid)
    return f.tokens, f.truncated


def test_a_fragment_cut_before_and_whole_after_is_restored(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r1")
        _record(run)
        small = run.build(window=3_000, reserve=500, record=False).manifest
        medium = run.build(window=5_000, reserve=500, record=False).manifest
        whole = run.build(window=64_000, reserve=1_000, record=False).manifest
    (cut, cut_flag), (less_cut, less_flag), (full, full_flag) = (
        _tokens(small, "e3"), _tokens(medium, "e3"), _tokens(whole, "e3"))
    assert cut_flag and less_flag and not full_flag and cut < less_cut < full

    grown = diff_manifests(small, whole)
    assert grown["restored"] == [{"id": "e3", "kind": "tool_result", "before": cut, "after": full}]
    assert grown["truncated"] == []

    shrunk = diff_manifests(whole, small)  # the other direction: newly cut, as before
    assert shrunk["truncated"] == [{"id": "e3", "kind": "tool_result", "before": full, "after": cut,
                                    "was_truncated": False}]
    assert shrunk["restored"] == []

    less = diff_manifests(small, medium)  # cut at both turns, to another size
    assert less["truncated"] == [{"id": "e3", "kind": "tool_result", "before": cut, "after": less_cut,
                                  "was_truncated": True}]
    assert less["restored"] == []
    assert diff_manifests(small, small)["truncated"] == diff_manifests(small, small)["restored"] == []


def test_the_audit_report_shows_a_restored_fragment(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r1")
        _record(run)
        run.build(window=3_000, reserve=500)  # turn 2, recorded with e3 cut
        run.append(ModelResponse(text="Reading the log."), UserInput("Go on."))
        run.build(window=64_000, reserve=1_000)  # turn 3, recorded with e3 whole
        audit = audit_run(run, rebuild_missing=False)
    turn3 = next(t for t in audit.turns if t.turn == 3)
    assert turn3.diff is not None and [x["id"] for x in turn3.diff["restored"]] == ["e3"]
    html = render_report(audit)
    start = html.index('<details class="turn" id="turn-3"')
    opening, section = html[start:html.index(">", start)], html[start:]
    assert 'data-changes="true"' in opening  # the turn is flagged as changed
    assert 'data-change="restored" data-count="1"' in section and "whole again" in section
