"""A summary says how many of the assistant's statements it no longer lists, and a folded line
re-folded by a later compaction keeps naming its newest calls.

Why: the built-in summary keeps the assistant's six newest statements as inferences and left the
older ones out without a word, where every other list that folds says "N earlier ... (read back
in events://RUN/A-B)": a model reading "inferences: the assistant stated at event 40 ..." had no
way to know it had said anything before, nor where to read it. And a line that folded older
calls names them oldest first; merged into the next summary it is folded again (rank 0, last),
and it gave the names it had room for from its start: over compactions its oldest few calls
stayed named and every newer one it stood for was dropped.
"""

from __future__ import annotations

from contextfold.domain.events import HistoryCompacted, ModelResponse, UserInput
from contextfold.projections.compaction import plan_compaction
from contextfold.projections.fold import fold
from contextfold.projections.fold_summary import render_summary
from contextfold.projections.summary_bounds import bounded_fields
from contextfold.projections.summary_check import CALL_CITE
from tests.unit.test_fold import Log


def _talk(log: Log, start: int, count: int) -> Log:
    for n in range(start, start + count):
        log.add(UserInput(f"go on with part {n}"), ModelResponse(text=f"part {n} is done"))
    return log.add(UserInput("what is left?"))


def _summary(log: Log) -> HistoryCompacted:
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1)
    assert plan is not None
    return plan.event


def test_a_summary_says_how_many_older_statements_it_does_not_list_and_where_they_are() -> None:
    log = _talk(Log("r"), 1, 10)
    first = _summary(log)
    said = first.summary.inferences
    assert said[0] == f"4 earlier inferences (read back in events://r/1-{first.covers_to})", said
    assert [s.split(": ", 1)[1] for s in said[1:]] == [f"part {n} is done" for n in range(5, 11)]
    text = render_summary(first)
    assert (f"inferences (not recorded facts):\n- 4 earlier inferences (read back in events://r/1-"
            f"{first.covers_to})\n- the assistant stated at event 10") in text
    # merged into the next compaction: its count carried on, the newest six listed
    log.add(first)
    _talk(log, 11, 3)
    second = _summary(log)
    again = second.summary.inferences
    assert again[0] == f"7 earlier inferences (read back in events://r/1-{second.covers_to})", again
    assert [s.split(": ", 1)[1] for s in again[1:]] == [f"part {n} is done" for n in range(8, 14)]


def test_a_summary_made_small_to_fit_lists_fewer_statements_and_counts_the_rest() -> None:
    """Made for a small window, a summary folds the inferences at its share as it does its other
    lists: it listed six statements whole beside its folded constraints."""
    log = _talk(Log("r"), 1, 30)
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1, max_summary_tokens=300)
    assert plan is not None
    said = plan.event.summary.inferences
    count = int(said[0].split(" ", 1)[0])
    assert said[0] == f"{count} earlier inferences (read back in events://r/1-{plan.event.covers_to})"
    assert 1 <= len(said) - 1 < 6 and count + len(said) - 1 == 30, said
    assert said[-1].endswith("part 30 is done")


def test_six_statements_or_fewer_need_no_such_line() -> None:
    said = _summary(_talk(Log("r"), 1, 6)).summary.inferences
    assert len(said) == 6 and not any("earlier inferences" in s for s in said)


def test_a_folded_line_folded_again_keeps_its_newest_calls_named() -> None:
    old = ("48 earlier tool calls and results (read back in events://r/1-100), citing "
           + ", ".join(f"call c{i}" for i in range(48)))
    new = tuple(f"call n{i} (sh) {{}} at event {200 + i} -> ok is_error=false" for i in range(40))
    out = bounded_fields({"tool_calls_and_results": (old, *new)}, "events://r/1-300")
    folded = out["tool_calls_and_results"][0]
    assert folded.startswith("56 earlier tool calls and results (read back in events://r/1-300)")
    named = CALL_CITE.findall(folded)
    # the eight new calls it folds, and of the old line's 48 the newest 40 (its order kept)
    assert named == [f"c{i}" for i in range(8, 48)] + [f"n{i}" for i in range(8)], folded
    assert folded.endswith(" and 8 more calls"), folded
