"""``checked``: a model from caller values, with the project's typed error on bad input."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from contextfold.domain.checked import checked
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import CompactionSummary, FileRead, HistoryCompacted, ToolResult, UsageObserved
from contextfold.domain.manifest import (
    BUILD_PROVIDERS,
    BuildConfig,
    checked_config,
    config_of,
    recorded_config,
)


def test_valid_values_make_the_model() -> None:
    assert checked_config(window=4000, reserve=500) == BuildConfig(window=4000, reserve=500)
    usage = checked(UsageObserved, "usage", turn=2, input_tokens=10, model="gpt-4o")
    assert (usage.turn, usage.input_tokens, usage.model) == (2, 10, "gpt-4o")


def test_every_bad_field_is_named_and_the_cause_kept() -> None:
    with pytest.raises(InvalidInputError) as info:
        checked_config(window=0, reserve=-1, nope=1)
    message = str(info.value)
    assert message.startswith("invalid build config: ")
    for field in ("window: Input should be greater than 0",
                  "reserve: Input should be greater than or equal to 0",
                  "nope: Extra inputs are not permitted"):
        assert field in message
    assert isinstance(info.value.__cause__, ValidationError)


def test_a_layer_share_is_finite_and_not_negative() -> None:
    """A NaN share was accepted, recorded as bare NaN (not JSON) and exported as null, and the
    record no longer replayed once imported."""
    for share in (float("nan"), float("inf"), -0.1):
        with pytest.raises(InvalidInputError, match=r"layer_shares\.history"):
            checked_config(layer_shares={"history": share})
    assert checked_config(layer_shares={"history": 0.0}).layer_shares == {"history": 0.0}


def test_a_layer_share_names_a_layer_a_build_reserves_for() -> None:
    """A misspelt layer ('retreival') was taken and ignored; the layer meant kept its default."""
    for name in ("retreival", "examples"):
        with pytest.raises(InvalidInputError, match=f"no layer named '{name}': the layers with a share are "
                           "policy, tools, goal, plan, recent, retrieval, history, input"):
            checked_config(layer_shares={name: 0.1})
    assert checked_config(layer_shares={"retrieval": 0.3}).layer_shares == {"retrieval": 0.3}
    with pytest.raises(InvalidInputError, match="no layer named 'retreival'"):
        config_of(BuildConfig(layer_shares={"retreival": 0.1}))
    # a record an older builder wrote with such a share reads back: it replays and audits
    manifest = {"config": BuildConfig(layer_shares={"retreival": 0.1}).model_dump(mode="json")}
    assert recorded_config(manifest, "r1", 2).layer_shares == {"retreival": 0.1}


def test_a_config_without_a_reserve_keeps_a_quarter_of_a_small_window() -> None:
    """A small model's window (8k) left the request no budget at the fixed 8,000 reserve."""
    assert [BuildConfig(window=w).reserve for w in (300, 8_000, 16_000, 31_999, 32_000, 128_000)] == [
        75, 2_000, 4_000, 7_999, 8_000, 8_000]
    assert BuildConfig().reserve == 8_000
    assert checked_config(window=8_000, reserve=None).reserve == 2_000  # None: not given
    assert checked_config(window=8_000, reserve=8_000).reserve == 8_000  # given: kept as given
    # what a record stores names its reserve: read back, it is the one the build used
    assert BuildConfig.model_validate(BuildConfig(window=16_000, reserve=9_000).model_dump()).reserve == 9_000
    with pytest.raises(InvalidInputError) as info:
        checked_config(window=0)
    assert "window: Input should be greater than 0" in str(info.value) and "reserve" not in str(info.value)


def test_a_provider_no_build_renders_is_named_with_the_ones_it_does() -> None:
    """A mistyped provider made the whole build, then failed at its render with a RenderError
    whose list of providers left out ``neutral``."""
    for provider in ("openai", "OpenAI-Chat", "", None, 5):
        with pytest.raises(InvalidInputError) as info:
            checked_config(provider=provider)
        assert str(info.value) == (f"invalid build config: provider: expected one of neutral, openai-chat, "
                                   f"openai-responses, anthropic, gemini, got {provider!r}")
    with pytest.raises(InvalidInputError, match=r"got 'x{100}'… \(5000 characters\)$"):
        checked_config(provider="x" * 5000)
    assert [checked_config(provider=p).provider for p in BUILD_PROVIDERS] == list(BUILD_PROVIDERS)
    # the same check for a config given whole (it built everything, then a RenderError said so)
    with pytest.raises(InvalidInputError, match="provider: expected one of neutral, "):
        config_of(BuildConfig(provider="openai"))
    assert config_of(BuildConfig(provider="gemini")).provider == "gemini"


def test_an_event_or_a_setting_takes_no_bool_for_an_integer() -> None:
    """pydantic's lax mode takes True for 1: ``ToolResult(exit_code=True)`` logged exit code 1 and
    ``UsageObserved(turn=True, ...)`` a usage of turn 1. The rest of lax mode stays."""
    bools: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (ToolResult, {"call_id": "c1", "exit_code": True}),
        (FileRead, {"path": "a.py", "start_line": False}),
        (UsageObserved, {"turn": True, "input_tokens": 5}),
        (UsageObserved, {"turn": 1, "input_tokens": False}),
        (HistoryCompacted, {"summary": CompactionSummary(), "covers_from": True, "covers_to": 2}),
        (BuildConfig, {"max_tools": True}),
    ]
    for cls, fields in bools:
        with pytest.raises(ValidationError, match="Input should be a valid integer, not a boolean"):
            cls(**fields)
    assert ToolResult(call_id="c1", exit_code="3").exit_code == 3
    assert ToolResult(call_id="c1", exit_code=2.0).exit_code == 2
    bool_window = r"^invalid build config: window: Input should be a valid integer, not a boolean$"
    with pytest.raises(InvalidInputError, match=bool_window):
        checked_config(window=True)
