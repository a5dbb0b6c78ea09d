"""A model's JSON dump is written by orjson without a walk where its schema says no float can be
(``domain.float_members``, ``request_json._dump``): the text must be the walked one's, byte for
byte, also where a float hides in a member or a value is not of its field's type."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer, field_validator

from contextfold.domain import trusted
from contextfold.domain.canonical import canonical_dumps
from contextfold.domain.conversation import (
    AssistantMessage,
    DataPart,
    InstructionPart,
    ToolCallPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
)
from contextfold.domain.float_members import float_members
from contextfold.domain.reasoning import AnthropicReasoning, ReasoningItem
from contextfold.projections.request_json import canonical_bytes, model_json_all


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Inner(_Frozen):
    score: float


class _Plain(_Frozen):
    name: str
    count: int | None = None
    kind: Literal["a", "b"] = "a"
    tags: tuple[str, ...] = ()
    table: dict[str, int] = Field(default_factory=dict)


class _Mixed(_Frozen):
    name: str
    inner: _Inner | None = None
    anything: Any = None
    numbers: tuple[int | float, ...] = ()


class _Tree(_Frozen):
    label: str
    children: tuple[_Tree, ...] = ()


class _Serialized(_Frozen):
    name: str

    @field_serializer("name")
    def _name(self, value: str) -> Any:
        return 5e-05 if value == "float" else value


class _After(_Frozen):
    name: str

    @field_validator("name", mode="after")
    @classmethod
    def _name(cls, value: str) -> str:
        return value


class _Computed(_Frozen):
    name: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ratio(self) -> float:
        return 5e-05


class _Aliased(_Frozen):
    name: str = Field(serialization_alias="n")


def test_the_request_messages_hold_no_float_but_a_replys_reasoning() -> None:
    for cls in (UserMessage, ToolResults, ToolResultPart, InstructionPart, DataPart, ToolCallPart):
        assert float_members(cls) == (), cls
    assert float_members(AssistantMessage) == ("reasoning",)


def test_a_schema_names_the_members_that_may_hold_a_float() -> None:
    assert float_members(_Plain) == ()
    assert float_members(_Tree) == ()  # recursive, plain everywhere
    assert float_members(_Mixed) == ("inner", "anything", "numbers")
    assert float_members(_Serialized) == ("name",)  # a serializer may write anything
    assert float_members(_After) == ("name",)  # an after-validator's return is not validated
    assert float_members(_Computed) is None and float_members(_Aliased) is None


def _walked(model: BaseModel) -> bytes:
    return canonical_dumps(model.model_dump(mode="json")).encode()


def _cases() -> list[BaseModel]:
    reasoning = AnthropicReasoning(items=(ReasoningItem(raw={
        "type": "thinking", "thinking": "t", "signature": "s", "weights": [5e-05, 1e16, 0.5, -0.0]}),))
    return [
        AssistantMessage(text="hi", fragment_id="f", reasoning=reasoning),  # a float in a walked member
        AssistantMessage(text="hi", tool_calls=(ToolCallPart(call_id="c", name="n", arguments="{}"),),
                         fragment_id="f"),
        UserMessage(parts=(InstructionPart(text="a\x00\u2028b\\", authority="user", fragment_id="f"),)),
        ToolResults(results=(ToolResultPart(call_id="c", name="n", status="ok", exit_code=1 << 70,
                                            content=(DataPart(text='"é\n', source="s", trust="user",
                                                              fragment_id="f"),), fragment_id="f"),)),
        _Mixed(name="m", inner=_Inner(score=5e-05), anything={"x": float("nan")}, numbers=(1, 1e-7)),
        _Serialized(name="float"),
        _Computed(name="c"),
        _Tree(label="r", children=(_Tree(label="c"),)),
    ]


def test_a_dump_written_without_its_walk_is_the_walked_text() -> None:
    for model in _cases():
        assert canonical_bytes(model_json_all([model])[0]) == _walked(model), model
        assert canonical_bytes(model_json_all([model])) == b"[" + _walked(model) + b"]"


def test_a_lone_surrogate_fails_as_the_walked_text_does() -> None:
    """orjson refuses it; the standard encoder writes it, and its UTF-8 fails, as a walked dump's."""
    message = UserMessage(parts=(InstructionPart(text="a\ud800b", authority="user", fragment_id="f"),))
    with pytest.raises(UnicodeEncodeError):
        _walked(message)
    with pytest.raises(UnicodeEncodeError):
        model_json_all([message])


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic's warning for the wrong-typed value
def test_the_suite_catches_a_message_holding_a_value_its_schema_does_not_allow() -> None:
    """Out of contract (``model_construct`` from a float where a str or an int belongs): its text
    would not be the walked one, and the suite's check (``trusted.CHECKED``) says so."""
    assert trusted.CHECKED
    wrong: Any = 5e-05
    for model in (InstructionPart.model_construct(text=wrong, authority="user", fragment_id="f"),
                  ToolResults.model_construct(results=(ToolResultPart.model_construct(
                      call_id="c", name="n", status="ok", exit_code=wrong, content=(), fragment_id="f"),))):
        with pytest.raises(AssertionError, match="a value its schema does not allow"):
            model_json_all([model])
