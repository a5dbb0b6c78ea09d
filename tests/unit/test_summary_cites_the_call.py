"""A summary's side effects and known failures cite their call's line, not repeat it
(``summary_skeleton._cited``).

Why: a write that failed was written out three times in every summary: in
``tool_calls_and_results`` (its arguments' excerpt, outcome, exit code, ref and ids), in
``side_effects`` (the same excerpt and ids) and in ``known_failures`` (the exit code, is_error and
ref again): two to three times the tokens per write in every request after a compaction. The side
effect and the failure now name the call and the event its line is at, and keep what they alone
say (the unverified state, the key error line) and every id, hash and unverified state (the seed,
5.3), so a side effect whose call's line is folded still names them.
"""

from __future__ import annotations

import json
import re

import pytest

from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.projections.compaction import plan_compaction
from contextfold.projections.fold import fold
from contextfold.projections.summary_bounds import said_once
from contextfold.projections.summary_check import CALL_CITE, summary_lines, validate_summary
from tests.unit.test_fold import Log

ARGS = json.dumps({"env": "staging", "image": "registry.local/app@sha256:" + "ab12" * 16,
                   "release": "rel-7781", "note": "roll out the new build to every staging node"})


def deploys(n: int) -> Log:
    log = Log().add(UserInput("Roll out release 7 to staging."))
    for i in range(n):
        log.add(ModelResponse(tool_calls=(ToolCall(call_id=f"d{i}", name="deploy", arguments=ARGS),)),
                ToolResult(call_id=f"d{i}", content=f"Created deployment dep-{i:04d}\n"
                           "ERROR: health check timed out\n", is_error=True, exit_code=1))
    return log.add(UserInput("status?"))


@pytest.mark.parametrize("room", [None, 1], ids=["whole", "smallest-share"])
def test_a_failed_write_is_written_out_once_and_keeps_its_ids(room: int | None) -> None:
    log = deploys(40)
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1,
                           max_summary_tokens=room)
    assert plan is not None
    s = plan.event.summary
    excerpt = '"env": "staging"'
    assert [e for e in s.side_effects + s.known_failures if excerpt in e] == []  # in its call's line only
    assert sum(excerpt in e for e in s.tool_calls_and_results) >= 1
    lines = {CALL_CITE.findall(e)[0]: e for e in s.tool_calls_and_results if e.startswith("call ")}
    for e in s.side_effects:
        if e[0].isdigit():  # (a folded line: the calls and ids it folds)
            continue
        call = CALL_CITE.findall(e)[0]
        assert re.fullmatch(rf"call {call} \(deploy\) at event \d+(?: \{{arguments ids: [^}}]*\}})?: "
                            r"error: unverified(?: \{ids: [^}]*\})?", e), e
        said = e + lines.get(call, "")  # every id, once: in its call's whole line, else here
        assert all(i in said for i in ("rel-7781", "sha256:" + "ab12" * 16, f"dep-{call[1:].zfill(4)}")), e
        assert call not in lines or "rel-7781" not in e, e
    for e in s.known_failures:
        if not e[0].isdigit():
            assert e.endswith(": exit_code=1: ERROR: health check timed out"), e
    text = "\n".join(summary_lines(s))
    for i in range(40):  # every deploy id, in a line or the one that folds them
        cited = f"call d{i}" in text
        assert cited or f"dep-{i:04d}" not in text
    ev = plan.event
    covered = [r for r in log.records if ev.covers_from <= r.position <= ev.covers_to]
    assert validate_summary(s, covered, s, log.run_id) == s  # the validator reads the new lines


def test_a_side_effect_whose_calls_line_is_folded_keeps_its_ids() -> None:
    """An earlier summary recorded the side effect without its ids (its call's line was whole
    there); merged into one that folds that line, the side effect has them back from it."""
    line = ('call d3 (deploy) {"env": "staging"} {arguments ids: rel-7781} at event 8 -> error '
            "exit_code=1 is_error=true [event://r/9] {ids: dep-0003}")
    short = "call d3 (deploy) at event 8: error: unverified"
    folded = ("40 earlier tool calls and results (read back in events://r/1-90), citing call d3 "
              "and 39 more calls")
    out = said_once({"tool_calls_and_results": (folded,), "side_effects": (short,)}, (line,))
    assert out["side_effects"] == (short + " {ids: rel-7781, dep-0003}",)
    whole = said_once({"tool_calls_and_results": (line,), "side_effects": (short,)}, (line,))
    assert whole["side_effects"] == (short,)
    long = "call d3 (deploy) at event 8 {arguments ids: rel-7781}: error: unverified {ids: dep-0003}"
    assert said_once({"tool_calls_and_results": (line,), "side_effects": (long,)}, (line,)) == whole
