"""``checked``: a model from caller values, with the project's typed error on bad input."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contextfold.domain.checked import checked
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import UsageObserved
from contextfold.domain.manifest import BuildConfig, checked_config


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
