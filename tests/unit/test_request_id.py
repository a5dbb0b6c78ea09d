"""The manifest's ``request_id`` is ``req_`` and the first 16 hex of
``canonical_hash([run_id, turn, log_version, config_hash])``. The builder writes that list with
orjson straight away (``finish_build._request_id``): the same bytes for strs and ints, and the
canonical path where orjson refuses (a lone surrogate, an int past 64 bits).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contextfold.domain.events import UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.finish_build import _request_id
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.request_json import canonical_hash


def _defined(run_id: str, turn: int, version: int, config_hash: str) -> str:
    return "req_" + canonical_hash([run_id, turn, version, config_hash])[:16]


def _outcome(make: Callable[[], str]) -> object:
    """The id made, or the type of the error making it raised (a lone surrogate has no UTF-8)."""
    try:
        return make()
    except ValueError as exc:
        return type(exc)


@pytest.mark.parametrize("run_id", ["run-1", "運行-1", "tab\there \"quoted\" \\ back", "lone \ud800 half",
                                    "emoji \U0001f600", "\x00\x1f\u2028"])
@pytest.mark.parametrize("version", [0, 57, 2**63 - 1, 2**64, 2**70])
def test_request_id_is_the_canonical_hash_of_its_list(run_id: str, version: int) -> None:
    args = (run_id, 3, version, "ab" * 32)
    assert _outcome(lambda: _request_id(*args)) == _outcome(lambda: _defined(*args))


@pytest.mark.parametrize("provider", ["neutral", "openai-chat", "anthropic"])
def test_a_builds_request_id_is_the_defined_one(provider: str) -> None:
    state = new_state("運行-7")
    for pos, text in enumerate(("hello", "and again"), start=1):
        fold_event(state, RecordedEvent(state.run_id, pos, UserInput(text), ""))
    m = build_context(state, BuildConfig(provider=provider, window=8_000, reserve=1_000)).manifest
    assert m.request_id == _defined(m.run_id, m.turn, m.log_version, m.config_hash)
