"""Event class versions: the current one is written, older ones are upcast on read, and a version
this release does not know is refused (DESIGN.md section 2).

Why: ``v`` was a free integer on every event but ``run_started``, so ``{"type": "user_input",
"v": 99}`` (a newer release's event, or nonsense such as -5) imported, was read under the v1
schema, stored under the topic ``user_input@99`` and verified "ok"; the API took
``UserInput("x", v=42)``."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel, ValidationError

from contextfold.domain.events import (
    EVENT_ADAPTER,
    UPCASTERS,
    AnyEvent,
    RunStarted,
    ToolResult,
    UserInput,
    event_from_json,
)

_CLASSES: tuple[type[BaseModel], ...] = typing.get_args(typing.get_args(AnyEvent)[0])


@pytest.mark.parametrize("v", [0, -5, 2, 42, 99])
def test_an_unknown_version_is_a_validation_error(v: int) -> None:
    with pytest.raises(ValidationError, match=f"version {v} .*not one this contextfold knows"):
        UserInput("x", v=v)
    with pytest.raises(ValidationError, match="not one this contextfold knows"):
        ToolResult(call_id="c", content="x", v=v)
    with pytest.raises(ValidationError, match="not one this contextfold knows"):
        event_from_json({"type": "user_input", "v": v, "content": [{"type": "text", "text": "hi"}]})


def test_run_started_refuses_a_newer_version_and_upcasts_its_older_one() -> None:
    with pytest.raises(ValidationError):
        event_from_json({"type": "run_started", "v": 3})
    old = event_from_json({"type": "run_started", "v": 1, "tokenizer": "o200k_base"})
    assert old == RunStarted(encoding="o200k_base") and old.v == 2


def test_every_class_reads_its_current_version_and_every_upcast_source() -> None:
    """Each class's default version validates (with ``v`` given or left out); each version an
    upcaster lifts is below its class's and reaches it."""
    current = {c.model_fields["type"].default: c.model_fields["v"].default for c in _CLASSES}
    assert current["run_started"] == 2 and current["user_input"] == 1
    for kind, v in current.items():
        fields = {"type": kind, "v": v}
        with pytest.raises(ValidationError) as caught:  # required fields missing, never the version
            EVENT_ADAPTER.validate_python({**fields, "v": v + 1})
        assert "not one this contextfold knows" in str(caught.value) or kind == "run_started"
        try:
            EVENT_ADAPTER.validate_python(fields)
        except ValidationError as exc:
            assert all(err["loc"][-1] != "v" for err in exc.errors()), exc
    for kind, v in UPCASTERS:
        assert v < current[kind]
    assert event_from_json({"type": "user_input", "content": []}).v == 1  # no "v": the first version
