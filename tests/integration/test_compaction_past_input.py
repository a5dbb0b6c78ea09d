"""Auto-compaction may summarize past the user's latest input when the history after it no longer
fits (``compaction_ladder.ladder``'s last ordinary step, ``plan_compactions(cover_input=True)``).

Why: a summary's cover stopped before the latest user input, so that the input stays raw. In a
run where the user's last word was long ago (a follow-up at turn 3, then dozens of tool calls)
nothing after it could be summarized: masks stubbed the results, the stubs and the calls
outgrew the window, and the build dropped the oldest groups for budget, with the deployment ids
and the failed, unverified deploys they named -- at a 6k window, for 23 of 60 turns (the seed,
5.3: ids and unverified states are not summarised away, and the ladder is there to keep a
request from losing them). Under that pressure the summary now covers the input too, and quotes
it with the user's authority (``fold_summary``), as it does when the input is the run's only one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.compaction_api import build
from contextfold.domain.events import (
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.compaction import Strategy
from tests.json_strings import joined_strings

LOG = "\n".join(f"{i:04d} INFO rollout step ok" for i in range(150))
FOLLOW_UP = "From now on keep at least two replicas up during every deploy."


@pytest.fixture
def cf_store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def _agent_turn(run: Run, t: int) -> list[str]:
    """Turn ``t`` of a deploy agent: every third a failed deploy that left a deployment behind
    (its call id and deployment id returned: what a request must not lose), else a pods check."""
    if t % 3 == 0:
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"d{t}", name="deploy",
                                                      arguments='{"env": "staging"}'),)),
                   ToolResult(call_id=f"d{t}", content=f"Created deployment dep-{t:04d}\n"
                              f"ERROR: health check timed out\n{LOG}", is_error=True, exit_code=1))
        return [f"d{t}", f"dep-{t:04d}"]
    pods = ToolCall(call_id=f"c{t}", name="shell", arguments='{"cmd": "kubectl get pods"}')
    run.append(ModelResponse(text=f"checking {t}", tool_calls=(pods,)),
               ToolResult(call_id=f"c{t}", content=f"pods {t}\n{LOG}", exit_code=0))
    return []


def _lost(ids: list[str], text: str) -> list[str]:
    """The ids ``text`` does not name as whole ids (``d3`` is not named by ``d30``)."""
    return [i for i in ids if not re.search(rf"(?<![\w-]){i}(?![\w-])", text)]


def test_ids_after_an_old_user_input_survive_small_window_auto_compaction(cf_store: Store) -> None:
    run = cf_store.run("after-input")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    deploys: list[str] = []
    for t in range(1, 31):
        if t == 3:
            run.append(UserInput(FOLLOW_UP))
        deploys += _agent_turn(run, t)
        text = joined_strings(build(run, "anthropic", window=6_000, reserve=1_000).request)
        lost = _lost(deploys, text)
        assert not lost, (t, lost)
        assert (t < 3 or FOLLOW_UP in text) and "Never touch prod." in text, t
    summaries = [r.event for r in run.events()
                 if isinstance(r.event, HistoryCompacted) and r.event.strategy == "summary"]
    assert summaries  # what kept them: a summary covering the follow-up and what came after it
    follow_up = next(r.position for r in run.events()
                     if isinstance(r.event, UserInput) and r.event.text == FOLLOW_UP)
    assert any(s.covers_to > follow_up for s in summaries)
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn


def test_ids_after_an_old_input_survive_beside_a_huge_failing_log(cf_store: Store) -> None:
    """A summary that brings what the build dropped back into the request is recorded, though a
    huge failing log (the latest error, truncated whatever happens) keeps the pressure soft
    (``compaction_ladder.relieves``): it was not (the summary took room from the log, so the build
    sent no more tokens), and the build dropped five deploys, their ids and failures with them."""
    huge = "\n".join(f"{i:05d} FAILED tests/test_m{i}.py::test_case - AssertionError" for i in range(20_000))
    run = cf_store.run("huge-log")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    deploys: list[str] = []
    for t in range(1, 52):
        if t == 3:
            run.append(UserInput(FOLLOW_UP))
        if t == 50:  # the failing test run the model is fixing
            run.append(ModelResponse(tool_calls=(ToolCall(call_id="t50", name="pytest", arguments="{}"),)),
                       ToolResult(call_id="t50", content=huge, is_error=True, exit_code=1))
        else:
            deploys += _agent_turn(run, t)
        built = build(run, "anthropic", window=6_000, reserve=1_000)
        text = joined_strings(built.request)
        lost = _lost(deploys, text)
        assert not lost, (t, lost)
        if t == 50:
            assert built.manifest.truncations and "00000 FAILED" in text  # the log, cut down, is sent
    for turn in range(45, run.next_turn()):
        assert run.replay(turn).ok, turn


def test_one_auto_compaction_appends_one_summary(cf_store: Store) -> None:
    """One auto-compaction appends at most one summary (``compaction_ladder.climb``). The ladder's
    summary steps keep fewer groups raw, one after the other (three, then one, then one past the
    user's latest input); each was planned on the state the step before had left, so when two of
    them relieved the pressure the build appended two summaries at once, the second covering the
    first (positions 149 and 150, covering 1-138 and 1-142): a record no build ever showed. A later
    summary step that relieves the pressure now replaces the one planned before it."""
    run = cf_store.run("one-summary")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    deploys: list[str] = []
    per_build: list[list[HistoryCompacted]] = []
    for t in range(1, 41):
        if t == 10:
            run.append(UserInput(FOLLOW_UP))
        deploys += _agent_turn(run, t)
        version = run.version
        text = joined_strings(build(run, "anthropic", window=6_000, reserve=1_000).request)
        per_build.append([r.event for r in run.events()
                          if r.position > version and isinstance(r.event, HistoryCompacted)
                          and r.event.strategy == "summary"])
        assert all(i in text for i in deploys), (t, [i for i in deploys if i not in text])
    assert sum(map(len, per_build)) >= 3  # the run was compacted by summaries, more than once
    assert all(len(appended) <= 1 for appended in per_build), [
        (t, [(s.covers_from, s.covers_to) for s in appended])
        for t, appended in enumerate(per_build, 1) if len(appended) > 1]
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn


def _nested(masks: list[HistoryCompacted]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The pairs of ``masks`` whose covers overlap."""
    covers = [(m.covers_from, m.covers_to) for m in masks]
    return [(a, b) for i, a in enumerate(covers) for b in covers[i + 1:] if a[0] <= b[1] and b[0] <= a[1]]


def test_one_auto_compaction_appends_no_nested_masks(cf_store: Store) -> None:
    """One auto-compaction appends no two masks whose covers nest (``compaction_ladder.climb``).

    Why: the ladder's mask steps keep fewer groups raw, one after the other (``recent_groups``,
    then one). Each step was planned on the state the step before had left, so when both relieved
    the pressure the build appended two masks at once, the second's cover holding the first's (a 6k
    window: covers 1-108 and 1-115), each stubbing results the other did not. A later mask step
    that relieves the pressure now replaces the masks planned before it in the same compaction, as
    a summary step replaces a summary. Two masks of one step, either side of the latest error,
    stay: a cover is contiguous and that error's group stays raw between them
    (``compaction_cuts.mask_covers``)."""
    run = cf_store.run("one-mask")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    per_build: list[list[HistoryCompacted]] = []
    for t in range(1, 41):
        _agent_turn(run, t)  # every third a failed deploy: the latest error's group is never masked
        version = run.version
        text = joined_strings(build(run, "anthropic", window=6_000, reserve=1_000, strategy="mask").request)
        per_build.append([r.event for r in run.events()
                          if r.position > version and isinstance(r.event, HistoryCompacted)])
        assert f"dep-{t - t % 3:04d}" in text or t < 3  # the latest failed deploy's output, raw
    assert sum(map(len, per_build)) >= 10  # the run was masked, build after build
    nested = {t: _nested(masks) for t, masks in enumerate(per_build, 1) if _nested(masks)}
    assert not nested, nested
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn


def _short_id_turn(run: Run, t: int) -> list[str]:
    """:func:`_agent_turn` with deployment ids as many runtimes number them, unpadded: ``dep-3``."""
    if t % 3:
        return _agent_turn(run, t)
    deploy = ToolCall(call_id=f"d{t}", name="deploy", arguments='{"env": "staging"}')
    run.append(ModelResponse(tool_calls=(deploy,)),
               ToolResult(call_id=f"d{t}", content=f"Created deployment dep-{t}\n"
                          f"ERROR: health check timed out\n{LOG}", is_error=True, exit_code=1))
    return [f"d{t}", f"dep-{t}"]


@pytest.mark.parametrize("strategy", ["mask", "summary"])
def test_short_deployment_ids_survive_auto_compaction(cf_store: Store, strategy: Strategy) -> None:
    """A deployment id whose number has one or two digits (``dep-3``, ``dep-42``, as ``PR-7`` or
    ``job-12``) is kept by a mask's stub and a summary as ``dep-0003`` is (``summary_text.kept_facts``):
    the id shape asked for a segment of three or more characters after the first, and at a 6k
    window the deploy agent's request lost ``dep-3`` from turn 6 on, every failed deploy's id
    after it, as its result was masked. Masks alone: 22 turns (at 23 the stubs, with Claude's markup
    around each call and result, ``call_id_prices.anthropic_block_tokens``, outgrow the window and
    the oldest groups are dropped for budget, ``dep-0003`` as well; 27 before that markup was
    priced)."""
    run = cf_store.run(f"short-ids-{strategy}")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    deploys: list[str] = []
    for t in range(1, 23 if strategy == "mask" else 41):
        deploys += _short_id_turn(run, t)
        built = build(run, "anthropic", window=6_000, reserve=1_000, strategy=strategy)
        lost = _lost(deploys, joined_strings(built.request))
        assert not lost, (t, lost)
    assert any(isinstance(r.event, HistoryCompacted) for r in run.events())
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn


def _deploy_among_reads(run: Run, t: int) -> list[str]:
    """Turn ``t`` of a deploy agent that lists pods every turn (three pod ids a listing) and every
    fourth deploys: successfully, its health "not yet verified" (a side effect to keep)."""
    if t % 4:
        pods = " ".join(f"web-{t:03d}{k}f8c-x2k4p" for k in range(3))
        call = ToolCall(call_id=f"c{t}", name="shell", arguments='{"cmd": "kubectl get pods"}')
        run.append(ModelResponse(text=f"checking {t}", tool_calls=(call,)),
                   ToolResult(call_id=f"c{t}", content=f"pods {pods}\n{LOG}", exit_code=0))
        return []
    run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"d{t}", name="deploy", arguments="{}"),)),
               ToolResult(call_id=f"d{t}", content=f"Created deployment dep-{t:04d}\n"
                          f"health check: not yet verified\n{LOG}", exit_code=0))
    return [f"dep-{t:04d}"]


def test_a_side_effect_recorded_without_its_ids_is_folded_as_one_naming_them(sqlite_url: str) -> None:
    """A side effect whose ids its call's line says is recorded without them
    (``summary_bounds.said_once``). Merged into a later summary, it ranked as one naming no ids and
    was folded first, its folded line naming none for it: its deployment id was left on the call's
    folded line only, among the ids of the pods every listing named, and capped away. At a 6k
    window the request lost dep-0028 and dep-0032, the newest deploys, not yet verified, from turn
    53 on, while dep-0004 to dep-0024 stayed. It now has its ids back before it is folded
    (``summary_bounds.with_ids``), and a folded line's cap, when it must leave ids out, leaves
    the oldest out (``summary_bounds._rank``: of a rank, the newest stay whole longer)."""
    with open_store(sqlite_url) as store:
        run = store.run("deploys-among-reads")
        run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
        deploys: list[str] = []
        for t in range(1, 78):
            deploys += _deploy_among_reads(run, t)
            built = build(run, "anthropic", window=6_000, reserve=1_000)
            lost = _lost(deploys, joined_strings(built.request))
            assert lost == deploys[:len(lost)], (t, lost)  # the oldest, if any
