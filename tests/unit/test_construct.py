"""``construct`` gives what ``model_construct`` gives, or falls back to it."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.projections.builder import build_context
from contextfold.projections.construct import construct
from contextfold.projections.fold import fold_event, new_state


def _same(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert a == b
    assert list(a.__dict__) == list(b.__dict__)  # field order: repr and iteration follow it
    assert all(map(lambda k: a.__dict__[k] is b.__dict__[k], a.__dict__))
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__ and a.__pydantic_private__ == b.__pydantic_private__
    assert a.model_dump_json() == b.model_dump_json()
    assert a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)
    assert repr(a) == repr(b)
    assert pickle.loads(pickle.dumps(b)) == a and copy.deepcopy(b) == a


def _built_manifest() -> ContextManifest:
    state = new_state("c")
    events: list[AnyEvent] = [PolicySet(text="Be careful."), UserInput("hello"),
              ModelResponse(text="", tool_calls=(ToolCall(call_id="a", name="run"),)),
              ToolResult(call_id="a", content="ok")]
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("c", pos, event, ""))
    return build_context(state, BuildConfig(provider="neutral", window=4_000, reserve=500)).manifest


def test_a_manifest_with_every_field_given() -> None:
    m = _built_manifest()
    values = {k: getattr(m, k) for k in reversed(ContextManifest.model_fields)}  # any key order
    _same(ContextManifest.model_construct(**values), construct(ContextManifest, **values))


def test_a_manifest_without_its_defaulted_fields() -> None:
    m = _built_manifest()
    values = {k: getattr(m, k) for k in ContextManifest.model_fields
              if k not in ("truncations", "redactions", "calibration")}
    _same(ContextManifest.model_construct(**values), construct(ContextManifest, **values))


@pytest.mark.parametrize("values", [
    {},
    {"model": "m", "stable_prefix_messages": 1},
    {"model": None, "system": (InstructionPart(text="s", authority="runtime", fragment_id="p"),),
     "tools": (), "messages": (UserMessage(parts=(InstructionPart(text="hi", authority="user",
                                                                  fragment_id="u"),)),),
     "stable_prefix_messages": 0},
])
def test_a_conversation(values: dict[str, Any]) -> None:
    _same(Conversation.model_construct(**values), construct(Conversation, **values))


def test_an_unknown_name_falls_back_to_model_construct() -> None:
    # model_construct ignores a name the model does not have (extra="forbid" is not checked)
    values: dict[str, Any] = {"model": "m", "nope": 1}
    _same(Conversation.model_construct(**values), construct(Conversation, **values))


class _Aliased(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(alias="Name")


class _Factory(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    items: list[int] = Field(default_factory=list)
    tags: list[str] = []  # a mutable plain default: model_construct hands out a copy


class _Private(BaseModel):
    x: int = 0
    _seen: int = PrivateAttr(default=3)


@pytest.mark.parametrize("cls, values", [
    (_Aliased, {"Name": "a"}),
    (_Factory, {}),
    (_Factory, {"items": [1]}),
    (_Private, {"x": 1}),
])
def test_other_models_fall_back_to_model_construct(cls: type[BaseModel], values: dict[str, Any]) -> None:
    a, b = cls.model_construct(**values), construct(cls, **values)
    assert a == b and a.model_fields_set == b.model_fields_set and a.model_dump() == b.model_dump()
    if isinstance(b, _Factory):
        assert b.items is not construct(_Factory, **values).items or "items" in values  # a fresh default
        assert b.tags is not _Factory.model_fields["tags"].default
    if isinstance(b, _Private):
        assert b._seen == 3
