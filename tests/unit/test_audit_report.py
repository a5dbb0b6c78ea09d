"""The audit data and the HTML report: per-turn facts from the log, numbers in the DOM, linear size."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Run, open_store
from contextfold.audit import report
from contextfold.audit.charts import axis_label
from contextfold.audit.data import audit_run, config_for_turn, history_dropped_tokens, retrieval_crowded
from contextfold.audit.report import MAX_EXCLUDED, render_report
from contextfold.cli import main
from contextfold.cli_audit import audit_turn
from contextfold.domain.errors import IntegrityError, InvalidInputError, RequiredContextExceedsBudgetError
from contextfold.domain.events import (
    EvidenceRetrieved,
    GoalSet,
    ModelResponse,
    PolicySet,
    RunStarted,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.store.record_reads import RecordReads

SMALL = BuildConfig(window=4_000, reserve=500)


def make_synthetic_run(run: Run, turns: int, *, record: bool = True, usage_ratio: float | None = None,
                       config: BuildConfig = SMALL, record_from: int = 1) -> None:
    """``turns`` tool-using turns: retrieval every 7th, a lost result every 25th, policy change at 40.

    With ``record`` every turn is built (and its ContextBuilt recorded) before the model responds, as an
    agent loop would (from turn ``record_from`` on: earlier turns have no record and are rebuilt by the
    audit); with ``usage_ratio`` the provider reports that multiple of the estimate.
    """
    run.append(RunStarted(agent="synthetic", model="gpt-4o", encoding="cl100k_base"),
               PolicySet(text="Be careful. Never delete files."),
               ToolsRegistered(tools=tuple(ToolSpec(name=f"tool_{k}", description=f"does thing {k} </data>")
                                           for k in range(6))),
               GoalSet(goal="Finish the synthetic task", success_contract=("tests pass",)),
               UserInput("please start; <script>alert(1)</script>"))
    for i in range(1, turns + 1):
        if record and i >= record_from:
            m = run.build(config=config).manifest
            if usage_ratio is not None:
                run.observe_usage(m.turn, math.ceil(m.selected_tokens * usage_ratio), cached_tokens=5)
        if i == 40:
            run.append(PolicySet(text="Be careful. Never delete files. Ask before deploying."))
        run.append(ModelResponse(text=f"step {i}",
                                 tool_calls=(ToolCall(call_id=f"c{i}", name=f"tool_{i % 6}"),)))
        if i % 25 != 0:  # every 25th call never gets its result: the next build logs it as lost
            run.append(ToolResult(call_id=f"c{i}", content=f"output {i}: " + " ".join(
                f"line{i}_{k}" for k in range(40)), exit_code=0))
        if i % 7 == 0:
            run.append(EvidenceRetrieved(content=f"doc {i} " + "lorem ipsum " * 60,
                                         source_ref=f"https://docs.example/{i}"))
        run.append(UserInput(f"next {i}"))


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return open_store(f"sqlite:///{tmp_path / 'a.db'}").run("syn")


class _Dom(HTMLParser):
    """Collects start tags with attributes (enough to read the report's data-* numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in want.items())]


def _dom(html: str) -> _Dom:
    d = _Dom()
    d.feed(html)
    return d


def test_recorded_run_audit_facts(run: Run) -> None:
    make_synthetic_run(run, 30, usage_ratio=1.12)
    audit = audit_run(run)
    assert audit.integrity.ok and audit.events == run.version
    assert [t.turn for t in audit.turns] == list(range(1, 31))
    assert all(t.source == "recorded" for t in audit.turns)
    assert audit.turns[0].prefix_changed is None and audit.turns[0].diff is None
    # lost results were logged by the builds of turns 26 (call c25): a protocol repair in that turn
    t26 = audit.turns[25]
    assert [(r.kind, r.call_id) for r in t26.repairs] == [("lost", "c25")]
    assert "tool_result_lost:c25" in t26.manifest.repairs
    assert audit.summary.usage_turns == 30
    assert audit.turns[-1].manifest.calibration is not None
    assert 1.11 <= audit.summary.latest_correction <= 1.13  # type: ignore[operator]
    # every turn's diff is the diff against the previous manifest
    t5 = audit.turns[4]
    assert t5.diff is not None and t5.diff["from_turn"] == 4
    assert {e["id"] for e in t5.diff["entered"]} == (
        {f.id for f in t5.manifest.fragments} - {f.id for f in audit.turns[3].manifest.fragments})
    reused = sum(1 for a, b in zip(audit.turns, audit.turns[1:], strict=False)
                 if a.manifest.cache_key == b.manifest.cache_key)
    assert audit.summary.prefix_reused == reused
    assert audit.summary.tool_schema_tokens["latest"] == audit.turns[-1].manifest.tool_tokens
    assert str(audit.turns[-1].manifest.tool_tokens) in audit.summary.tool_schema_answer


def test_unrecorded_turns_are_rebuilt_like_run_build(run: Run) -> None:
    make_synthetic_run(run, 12, record=False)
    audit = audit_run(run, config=SMALL)
    assert [t.source for t in audit.turns] == ["rebuilt"] * 12
    for turn in (1, 6, 12):
        assert audit.turns[turn - 1].manifest == run.build(turn=turn, record=False, config=SMALL).manifest


def test_retrieval_crowding_answer() -> None:
    from contextfold.audit.data import summarize

    # a tiny budget with a lot of evidence: history is dropped while retrieval takes room
    store = open_store("sqlite:///:memory:")
    r = store.run("crowd")
    r.append(RunStarted(model="gpt-4o", encoding="cl100k_base"), UserInput("go"))
    for i in range(1, 15):
        r.append(ModelResponse(text=f"thinking about step {i} " * 10))
        r.append(EvidenceRetrieved(content=f"evidence {i} " + "alpha beta " * 80, source_ref=f"doc://{i}"))
        r.append(UserInput(f"more {i} " * 10))
    cfg = BuildConfig(window=2_000, reserve=200, layer_shares={
        "policy": 0.05, "tools": 0.05, "goal": 0.05, "plan": 0.05, "recent": 0.1, "retrieval": 0.1,
        "history": 0.1, "input": 0.05})
    audit = audit_run(r, config=cfg)
    turns = audit.turns
    for t in turns:
        m = t.manifest
        share = m.config.layer_shares["retrieval"] * m.budget_tokens
        assert retrieval_crowded(m) == (history_dropped_tokens(m) > 0 and m.layer_tokens["retrieval"] > share)
    summary = summarize(turns)
    if summary.retrieval_crowded_turns:
        assert summary.retrieval_answer.startswith("yes")
    else:
        assert summary.retrieval_answer.startswith("no")


def test_report_carries_the_numbers(run: Run) -> None:
    make_synthetic_run(run, 30, usage_ratio=1.12)
    audit = audit_run(run)
    html = render_report(audit)
    dom = _dom(html)
    sections = dom.find("details", **{"class": "turn"})
    assert [int(s["data-turn"]) for s in sections] == list(range(1, 31))
    for s, t in zip(sections, audit.turns, strict=True):
        assert int(s["data-selected"]) == t.manifest.selected_tokens
        assert int(s["data-budget"]) == t.manifest.budget_tokens
    # stacked bars: every non-empty layer of every turn, with its tokens
    segs = [a for a in dom.find("span") if "seg" in a.get("class", "")]
    layer_segs = [a for a in segs if a["class"].startswith("seg layer-")]
    expected = sum(1 for t in audit.turns for v in t.manifest.layer_tokens.values() if v > 0)
    assert len(layer_segs) == expected
    last = audit.turns[-1].manifest
    assert [int(a["data-tokens"]) for a in layer_segs[-sum(1 for v in last.layer_tokens.values() if v):]] == [
        v for v in last.layer_tokens.values() if v > 0]
    assert dom.find("svg", id="layers-chart")[0]["data-turns"] == "30"
    assert len([a for a in dom.find("path") if a.get("class") == "layer"]) == 8
    assert dom.find("svg", id="usage-chart")[0]["data-points"] == "30"
    prefix = dom.find("svg", id="prefix-chart")[0]
    assert int(prefix["data-reused"]) == audit.summary.prefix_reused
    assert dom.find("p", id="integrity")[0]["data-ok"] == "true"
    # hostile content never becomes markup; nothing is loaded from the network
    assert "<script>alert(1)</script>" not in html
    assert html.count("<script>") == 1
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_report_shows_integrity_failure() -> None:
    from contextfold.audit.data import Integrity, RunAudit, summarize

    audit = RunAudit(run_id="x", events=3, integrity=Integrity(ok=False, events=2, first_bad_position=3,
                                                               reason="event content does not match"),
                     turns=(), summary=summarize([]))
    html = render_report(audit)
    assert 'data-ok="false"' in html and "BROKEN at position 3" in html


def test_report_size_is_linear_in_turns(tmp_path: Path) -> None:
    sizes = {}
    sections: dict[int, list[int]] = {}
    for n in (50, 100):
        r = open_store(f"sqlite:///{tmp_path / f's{n}.db'}").run("s")
        make_synthetic_run(r, n, record=False)
        html = render_report(audit_run(r, config=SMALL))
        sizes[n] = len(html.encode())
        starts = [m.start() for m in re.finditer(r'<details class="turn"', html)]
        sections[n] = [b - a for a, b in itertools.pairwise(starts)]
    # the run's history (and its dropped fragments) keeps growing, but a turn's section does not:
    # the late sections of the long run are no bigger than the late sections of the short one
    assert max(sections[100][-10:]) < 1.25 * max(sections[50][-10:]), (sections[50][-3:], sections[100][-3:])
    # so each extra turn costs at most about one bounded section (plus its chart points)
    assert (sizes[100] - sizes[50]) / 50 < 1.3 * max(sections[50][-10:]), sizes


def test_excluded_lists_are_capped(tmp_path: Path) -> None:
    r = open_store(f"sqlite:///{tmp_path / 'c.db'}").run("c")
    make_synthetic_run(r, 80, record=False)
    audit = audit_run(r, config=SMALL)
    last = audit.turns[-1].manifest
    by_reason: dict[str, int] = {}
    for e in last.excluded_items:
        by_reason[e.reason] = by_reason.get(e.reason, 0) + 1
    biggest = max(by_reason, key=lambda k: by_reason[k])
    assert by_reason[biggest] > MAX_EXCLUDED  # the run is long enough to need the cap
    html = render_report(audit)
    section = html[html.index('id="turn-80"'):]
    block = section[section.index(f'data-reason="{biggest}"'):]
    block = block[:block.index("</details>")]
    assert block.count("<tr data-id=") == MAX_EXCLUDED
    assert f"{by_reason[biggest] - MAX_EXCLUDED} more" in block
    # the rows shown are the largest, and the summary says so (the CLI lists the newest first)
    assert ", largest first)</summary>" in block
    shown = [int(t) for t in re.findall(r'<td class="num">(\d+)</td>', block)]
    assert shown == sorted(shown, reverse=True)
    assert shown[-1] >= max(sorted((e.tokens for e in last.excluded_items if e.reason == biggest),
                                   reverse=True)[MAX_EXCLUDED:], default=0)


def test_only_the_newest_turns_carry_their_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3,683-turn run's report was 90 MB with every turn in full; older turns keep their headline,
    budget bar and change counts, and name the command that shows them in full."""
    monkeypatch.setattr(report, "DETAILED_TURNS", 10)
    r = open_store(f"sqlite:///{tmp_path / 'o.db'}").run("o")
    make_synthetic_run(r, 30, record=False)
    audit = audit_run(r, config=SMALL)
    html = render_report(audit)
    turn = r'<details class="turn" id="turn-(\d+)".*?</summary>.*?(?=<details class="turn"|</section>)'
    sections = {int(m.group(1)): m.group(0) for m in re.finditer(turn, html, re.S)}
    turns = [t.turn for t in audit.turns]
    assert sorted(sections) == turns and len(turns) > 20
    older, newest = turns[:-10], turns[-10:]
    for t in older:
        assert 'class="selected"' not in sections[t] and 'class="bar"' in sections[t]
        assert f"contextfold audit o --turn {t}</code> shows this one in full" in sections[t]
    for t in newest:
        assert 'class="selected"' in sections[t] and "shows this one in full" not in sections[t]
    assert f"changes since turn {older[-2]}: " in sections[older[-1]]
    assert (f'id="older-note">The newest 10 of {len(turns)} turns show their tables; the {len(older)} older '
            "ones") in html
    assert max(len(sections[t]) for t in older) < min(len(sections[t]) for t in newest) / 2
    monkeypatch.setattr(report, "DETAILED_TURNS", 40)  # a run within the budget: every turn in full
    whole = render_report(audit)
    assert 'id="older-note"' not in whole and "shows this one in full" not in whole


@pytest.mark.parametrize(("tokens", "label"), [(0, "0"), (9_999, "9999"), (10_000, "10k"), (137_996, "138k"),
                                               (1_250_000, "1.2M")])
def test_a_chart_axis_label_fits_the_margin(tokens: int, label: str) -> None:
    """137996 ran past the chart's left edge and read as 37996 (the 10,000-message run's report)."""
    assert axis_label(tokens) == label
    assert len(axis_label(tokens)) <= 5


def test_a_repair_every_build_makes_again_counts_once_for_the_run(tmp_path: Path) -> None:
    """A run whose log never registered its tool: every turn's build declares it (a repair each
    time). The run-level count said 18,373 for a 3,683-turn run declaring 5 tools."""
    r = open_store(f"sqlite:///{tmp_path / 'd.db'}").run("d")
    r.append(UserInput("Go."))
    for i in range(6):
        r.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="grep"),)),
                 ToolResult(call_id=f"c{i}", content="found"))
    audit = audit_run(r, config=SMALL)
    assert [t.build_notes for t in audit.turns] == [()] + [("declared_unregistered_tool:grep",)] * 5
    assert audit.summary.repairs == 1


def test_an_unrecorded_answered_turn_is_rebuilt_when_the_next_turn_is_recorded(run: Run) -> None:
    """The audit rebuilt unrecorded turns only while the records were fewer than the responses: a
    recorded next turn made up for a missing answered one, which was left out of the audit unsaid."""
    run.append(UserInput("first"), ModelResponse(text="done"), UserInput("second"))  # turn 1: no build
    run.build(config=SMALL)  # turn 2, the next request, recorded
    audit = audit_run(run)
    assert [(t.turn, t.source) for t in audit.turns] == [(1, "rebuilt"), (2, "recorded")]


def test_a_turn_its_config_cannot_build_is_listed_and_the_rest_audited(run: Run) -> None:
    """A turn whose required content outgrew the budget (the runtime's own build of it failed) made
    the whole audit fail with that turn's RequiredContextExceedsBudgetError: no summary and no
    report for any turn. Found auditing a shared OpenHands trace compacted at an 8k window."""
    small = BuildConfig(window=2_000, reserve=500)
    run.append(PolicySet(text="Be brief."), UserInput("hi"))
    run.build(config=small)
    run.append(ModelResponse(text="hello"), PolicySet(text="rule " * 3_000), UserInput("next"))
    with pytest.raises(RequiredContextExceedsBudgetError):  # turn 2: nothing recorded
        run.build(config=small)
    run.append(ModelResponse(text="ok"), PolicySet(text="Be brief again."), UserInput("third"))
    run.build(config=small)
    audit = audit_run(run)
    assert [t.turn for t in audit.turns] == [1, 3]
    [unbuilt] = audit.unbuilt
    assert unbuilt.turn == 2 and unbuilt.error == "RequiredContextExceedsBudgetError"
    assert "required fragments need" in unbuilt.message
    html = render_report(audit)
    assert _dom(html).find("span", id="unbuilt", data_count="1")
    assert "(turns 2); turn 2: RequiredContextExceedsBudgetError: REQUIRED_CONTEXT_EXCEEDS_BUDGET" in html
    from contextfold.cli_audit import _summary_text  # what `contextfold audit RUN` prints

    text = _summary_text(audit)
    assert ("not rebuilt: 1 turns without a record cannot be built under the config used (turns 2); "
            "turn 2: RequiredContextExceedsBudgetError: REQUIRED_CONTEXT_EXCEEDS_BUDGET") in text


def test_a_turn_without_a_record_takes_the_nearest_records_config_reading_only_that(
        run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """``audit --turn N`` and ``why --turn N`` of a turn without a record rebuild it with the
    nearest earlier record's config. Only the configs are read: a long run's 100 records were each
    validated whole (~10,000 manifest lines), 3.6 of the 11 s an audit of one turn took."""
    make_synthetic_run(run, 8, record_from=4)  # turns 1-3 have no record; 4-8 have one each
    run.build(config=BuildConfig(window=9_000, reserve=600))  # the next turn's, with another config
    events = run.events()

    def whole(*args: object, **kwargs: object) -> None:
        raise AssertionError("a record's whole manifest was validated for its config")

    monkeypatch.setattr(ContextManifest, "model_validate", whole)
    assert config_for_turn(events, 2) == SMALL  # no earlier record: the first one's
    assert config_for_turn(events, 10) == BuildConfig(window=9_000, reserve=600)  # the nearest earlier (9)
    assert config_for_turn(events, 2, {"window": 5_000}).window == 5_000
    # a record that holds no valid config is one no builder made: said so, typed, as a rebuild says it
    broken = events[-1].event.model_copy(update={"manifest": {"config": {"window": "wide"}}})
    with pytest.raises(IntegrityError, match="turn 9: its first context_built record holds no valid build"):
        config_for_turn([dataclasses.replace(events[-1], event=broken)], 10)


def test_audit_of_one_turn_reads_no_whole_log_and_rebuilds_it_as_a_build_would(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``audit --turn N`` read the whole log three times (its own read, then the rebuild's records
    and events: ~1.1 s each on a 10,000-event run). A recorded turn: its records, and the rebuild
    folds the log up to its build (``EventStore.fold_events``, the records' manifests unread); a
    turn without a record: its records (none), read with the later records' settings, then the
    earlier records' (``EventStore.record_heads``) and the log up to the turn (``fold_events``):
    never the whole log with every manifest (which an 800-turn run's held at 2.1 GB). The rebuilt
    request is the one ``run.build(turn=N)`` makes."""
    store_url = f"sqlite:///{tmp_path / 'a.db'}"
    run = open_store(store_url).run("syn")
    make_synthetic_run(run, 8, record_from=4)  # turns 1-3 have no record; 4-8 have one each
    expected = {2: run.build(turn=2, record=False, config=SMALL), 6: run.build(turn=6, record=False)}
    reads: list[str] = []
    events, records, turn_read = Run.events, RecordReads.turn_records, RecordReads.turn_read

    def counted_events(self: Run, **kw: Any) -> list[RecordedEvent]:
        reads.append("events")
        return events(self, **kw)

    def counted_records(self: RecordReads, *args: Any, **kw: Any) -> Any:
        reads.append("records")  # a turn's records (Run.records)
        return records(self, *args, **kw)

    def counted_turn_read(self: RecordReads, *args: Any, **kw: Any) -> Any:
        reads.append("records")  # a turn's records, with the later ones' configs (rebuild_api.read_turn)
        return turn_read(self, *args, **kw)

    monkeypatch.setattr(Run, "events", counted_events)
    monkeypatch.setattr(RecordReads, "turn_records", counted_records)
    monkeypatch.setattr(RecordReads, "turn_read", counted_turn_read)
    for turn, built in expected.items():
        reads.clear()
        verdict, result = audit_turn(run, turn)
        assert reads == ["records"], (turn, reads)
        assert verdict["ok"] == verdict["check"]["recorded"] == (turn >= 4)  # ok: checked, and it matched
        assert result.body_bytes == built.body_bytes and result.manifest == built.manifest
    with pytest.raises(InvalidInputError, match="would be ignored"):  # settings a record would ignore
        audit_turn(run, 6, {"window": 20_000})
    reads.clear()  # why --turn N of a turn without a record: the same reads
    assert main(["--store", store_url, "why", "syn", "--turn", "2", "e5"]) == 0
    assert reads == ["records"], reads
    assert f"request {expected[2].manifest.request_hash[:16]}" in capsys.readouterr().out
