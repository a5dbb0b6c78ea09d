"""Folded fragment entries: recipes hash like their blocks, long texts live in the log only."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import IntegrityError
from contextfold.domain.events import ArtifactRef, ModelResponse, TextBlock, ToolCall, ToolResult, UserInput
from contextfold.domain.fragments import ToolResultBlock
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.entries import (
    LAZY_TEXT_CHARS,
    Content,
    FragmentEntry,
    Response,
    ToolAnswer,
    blocks_hash,
)
from contextfold.projections.fold import fold, new_state
from contextfold.projections.fold_content import content_digest
from contextfold.projections.framing import MESSAGE_OVERHEAD
from contextfold.projections.state import RunState
from tests.unit.test_fold import Log

TEXT = st.text(st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(call_id=TEXT.filter(bool), name=st.none() | TEXT, status=st.sampled_from(("ok", "error", "lost")),
       text=TEXT, media=st.none() | TEXT, size=st.integers(0, 10**12),
       exit_code=st.none() | st.integers(-(2**40), 2**40))
def test_tool_answer_hashes_exactly_like_its_blocks(call_id: str, name: str | None, status: str, text: str,
                                                    media: str | None, size: int,
                                                    exit_code: int | None) -> None:
    art = None if media is None else ArtifactRef(hash="ab" * 32, size=size, media_type=media)
    answer = ToolAnswer(call_id, name, status, text, art, (), exit_code)  # type: ignore[arg-type]
    assert content_digest(answer) == blocks_hash(answer.to_blocks())


@settings(max_examples=300, deadline=None)
@given(text=TEXT, calls=st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=4))
def test_response_hashes_exactly_like_its_blocks(text: str, calls: list[tuple[str, str, str]]) -> None:
    response = Response(text, tuple(calls))
    assert content_digest(response) == blocks_hash(response.to_blocks())


def _long(i: int) -> str:
    return "".join(f"line {k} of output {i}: GET /api/orders/{k} 200\n" for k in range(60))


def _log() -> Log:
    log = Log("lazy").add(UserInput("check the orders service"))
    for i in range(6):
        log.add(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="sh", arguments=f'{{"n": {i}}}'),)),
                ToolResult(call_id=f"c{i}", content=_long(i) if i % 2 == 0 else f"short {i}",
                           exit_code=0))
    return log.add(UserInput("summarise"))


def _lazy_state(log: Log, reads: list[int] | None = None) -> RunState:
    by_pos = {r.position: r.event for r in log.records}

    def event_text(position: int) -> str:
        if reads is not None:
            reads.append(position)
        event = by_pos[position]
        assert isinstance(event, ToolResult)
        return event.content

    return fold(log.records, new_state(log.run_id, event_text=event_text))


def test_long_texts_are_held_as_refs_and_read_back_identical() -> None:
    log = _log()
    eager, lazy = fold(log.records), _lazy_state(log)
    long_ids = [fid for fid, e in eager.entries.items() if e.kind == "tool_result"
                and len(next(b for b in e.fragment.content if isinstance(b, ToolResultBlock)).text)
                > LAZY_TEXT_CHARS]
    assert len(long_ids) == 3
    assert all(lazy.entries[fid].lazy for fid in long_ids)
    assert not any(e.lazy for fid, e in lazy.entries.items() if fid not in long_ids)
    for fid in eager.entries:
        assert lazy.entries[fid].fragment == eager.entries[fid].fragment
    assert lazy.fingerprint() == eager.fingerprint()


def test_a_lazy_text_is_read_only_for_the_fragments_a_build_renders() -> None:
    log = _log()
    reads: list[int] = []
    lazy = _lazy_state(log, reads)
    cfg = BuildConfig(window=2_200, reserve=1_000)
    eager_result = build_context(fold(log.records), cfg)
    assert reads == []  # folding reads nothing back
    result = build_context(lazy, cfg)
    assert result.request == eager_result.request
    assert result.manifest == eager_result.manifest
    assert result.fragments == eager_result.fragments
    rendered = {lazy.entries[f.id].position for f in result.fragments if lazy.entries[f.id].lazy}
    assert rendered and set(reads) == rendered  # only the rendered long texts were read
    kept = {f.id for f in result.fragments}
    dropped_long = [fid for fid, e in lazy.entries.items() if e.lazy and fid not in kept]
    assert dropped_long  # the tight window left some long output out, and it was never read
    assert all(lazy.entries[fid].position not in reads for fid in dropped_long)
    text = str(result.request)
    assert _long(4).splitlines()[-1] in text  # the newest long output, rendered in full


def test_a_log_that_gives_back_other_text_is_an_integrity_error() -> None:
    log = _log()
    state = fold(log.records, new_state(log.run_id, event_text=lambda position: "tampered"))
    fid = next(fid for fid, e in state.entries.items() if e.lazy)
    assert state.entries[fid].head.token_count == state.entries[fid].token_count  # costing needs no text
    with pytest.raises(IntegrityError, match="content hash"):
        _ = state.entries[fid].fragment


@pytest.mark.parametrize("redact", [True, False])
def test_long_texts_kept_whole_are_read_back_when_laid_out(redact: bool) -> None:
    """A long output kept whole is shown as logged: its text is read back when its item is laid
    out, and later builds that keep it reuse that layout without reading it again."""
    log = _log()
    reads: list[int] = []
    lazy = _lazy_state(log, reads)
    cfg = BuildConfig(window=64_000, reserve=1_000, redact=redact)
    first = build_context(lazy, cfg)
    assert first.request == build_context(fold(log.records), cfg).request
    for i in (0, 2, 4):
        assert _long(i).splitlines()[-1] in first.body
    reads.clear()
    again = build_context(lazy, cfg)
    assert again.body == first.body
    assert reads == []  # nothing new to lay out: no text read back


def test_framing_counted_at_fold_is_what_a_build_would_count() -> None:
    """The fold counts each fragment's framing (its ``<data ...>`` wrapper for data) with the
    counter that counted its content; an entry made from a fragment has none, and a build
    counts it then. Both give the same request and manifest."""
    log = _log()
    folded = fold(log.records)
    counted = folded.snapshot()
    counted.entries = {fid: FragmentEntry(e.fragment, e.position) for fid, e in folded.entries.items()}
    assert all(e.framing is not None for e in folded.entries.values())
    assert all(e.framing is None for e in counted.entries.values())
    data = [e for e in folded.entries.values() if e.kind == "tool_result"]
    assert data and all(e.framing is not None and e.framing > MESSAGE_OVERHEAD for e in data)
    for window in (1_500, 64_000):
        cfg = BuildConfig(window=window, reserve=1_000)
        a, b = build_context(folded, cfg), build_context(counted, cfg)
        assert a.body_bytes == b.body_bytes and a.manifest == b.manifest


@settings(max_examples=200, deadline=None)
@given(text=TEXT, calls=st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=3), answer=TEXT,
       status=st.sampled_from(("ok", "error", "lost", "cancelled")), extra=st.lists(TEXT, max_size=3))
def test_plain_text_is_the_text_of_the_entrys_blocks(text: str, calls: list[tuple[str, str, str]],
                                                     answer: str, status: str, extra: list[str]) -> None:
    """A build reads an entry's text without making its fragment: the same text the fragment's
    blocks join to, for a reply, an inline tool result and a user's blocks; none (ask the
    fragment) when a text lives in an artifact."""
    contents: list[Content] = [
        Response(text, tuple(calls)),
        ToolAnswer("c1", "run", status, answer, None, (), None),  # type: ignore[arg-type]
        tuple(TextBlock(text=t) for t in [text, *extra]),
    ]
    for content in contents:
        entry = FragmentEntry.folded("e1", "history", "event://r/1", "runtime", 50, False, 1, "h", content, 1)
        blocks = entry.fragment.content
        assert entry.plain_text() == "\n".join(
            b.text for b in blocks if isinstance(b, TextBlock | ToolResultBlock))
    art = ArtifactRef(hash="ab" * 32, size=10, media_type="text/plain")
    stored = FragmentEntry.folded("e2", "tool_result", "call://r/c1@1", "external", 50, False, 1, "h",
                                  ToolAnswer("c1", "run", "ok", "preview", art, (), 0), 2)
    assert stored.plain_text() is None
