"""The manifest's tool lines are kept per tool and price: a turn's neutral build and an OpenAI
Chat build for a measured model price a tool apart (``tool_pricing.tool_bill``: 49 and 28 tokens
here), and they alternate. With one kept line per tool, each build replaced the other's and every
build validated its tools' lines afresh (1.3 ``ManifestTool`` a tau-bench build, first and
second alike). A kept line is reused only while its reason is the same: each build's lines must
be what a fresh state gives.
"""

from __future__ import annotations

from contextfold.domain.events import UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ManifestTool
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event
from contextfold.projections.state import RunState
from tests.unit.test_tool_candidates_memo import EVENTS, NEUTRAL, OPENAI, _folded

QUESTION = "and what is the price and the address of order 9?"


def _lines(state: RunState, config: BuildConfig) -> tuple[ManifestTool, ...]:
    return build_context(state, config).manifest.tools


def _fields(lines: tuple[ManifestTool, ...]) -> list[tuple[str, int, str]]:
    return [(t.name, t.tokens, t.reason) for t in lines]


def test_alternating_builds_reuse_each_prices_lines() -> None:
    kept = _folded()
    neutral = _lines(kept, NEUTRAL)
    openai = _lines(kept, OPENAI)
    assert [t.tokens for t in neutral] != [t.tokens for t in openai]  # priced apart: two lines a tool
    again = _lines(kept, NEUTRAL)
    assert all(a is b for a, b in zip(again, neutral, strict=True))  # not replaced by the OpenAI build's
    assert all(a is b for a, b in zip(_lines(kept, OPENAI), openai, strict=True))
    assert _fields(again) == _fields(_lines(_folded(), NEUTRAL))


def _fold(state: RunState, position: int, text: str) -> None:
    fold_event(state, RecordedEvent(state.run_id, position, UserInput(text), ""))


def test_a_line_whose_reason_changes_is_made_again() -> None:
    """A new input moves the relevance scores the reasons show: the kept lines of the same price
    are not reused, and every build's lines are a fresh state's."""
    kept = _folded()
    before = {config.provider: _fields(_lines(kept, config)) for config in (NEUTRAL, OPENAI)}
    _fold(kept, len(EVENTS) + 1, QUESTION)
    for config in (NEUTRAL, OPENAI, NEUTRAL):
        lines = _fields(_lines(kept, config))
        fresh = _folded()  # the same events, nothing kept from builds
        _fold(fresh, len(EVENTS) + 1, QUESTION)
        assert lines == _fields(_lines(fresh, config))
        assert lines != before[config.provider]  # the reasons moved: the test reaches the invalidation
