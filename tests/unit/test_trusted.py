"""``domain.trusted``: the builder's unvalidated models are the instances validation makes."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from contextfold.domain import trusted as trusted_module
from contextfold.domain.conversation import DataPart, InstructionPart, UserMessage
from contextfold.domain.manifest import ManifestFragment
from contextfold.domain.trusted import trusted

LINE = dict(id="f1", kind="tool_result", layer=7, source_ref="tool:x", trust="external", tokens=12,
            required=False, truncated=False, selection_reason="selected", content_hash="ab" * 32)


def test_the_same_instance_as_validation_with_defaults_in_field_order() -> None:
    made, valid = trusted(ManifestFragment, **LINE), ManifestFragment(**LINE)
    assert made == valid
    assert list(made.__dict__) == list(valid.__dict__) == list(ManifestFragment.model_fields)
    assert made.model_fields_set == valid.model_fields_set == set(LINE)
    assert made.model_dump_json() == valid.model_dump_json()
    assert hash(made) == hash(valid)  # frozen: usable as a key like a validated one
    with pytest.raises(Exception, match="frozen"):
        made.tokens = 13  # type: ignore[misc]


def test_nested_parts_and_unset_defaults_dump_as_validated() -> None:
    part = trusted(DataPart, text="t", source="s", trust="workspace", fragment_id="f")
    message = trusted(UserMessage, parts=(part,))
    assert message == UserMessage(parts=(DataPart(text="t", source="s", trust="workspace", fragment_id="f"),))
    assert message.model_dump(exclude_unset=True) == {"parts": ({"text": "t", "source": "s",
                                                                  "trust": "workspace", "fragment_id": "f"},)}


def test_checked_mode_catches_a_wrong_type_or_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trusted_module, "CHECKED", True)
    part = trusted(InstructionPart, text="x", authority="user", fragment_id="f")
    with pytest.raises(AssertionError, match="parts"):
        trusted(UserMessage, parts=[part])  # a list where validation makes a tuple
    with pytest.raises(ValueError):
        trusted(InstructionPart, text="x", authority="nobody", fragment_id="f")


def test_models_that_need_more_than_fields_are_refused() -> None:
    class Factory(BaseModel):
        items: list[int] = Field(default_factory=list)

    class Private(BaseModel):
        _cache: int = PrivateAttr(default=0)

    class Extra(BaseModel):
        model_config = ConfigDict(extra="allow")

    for cls in (Factory, Private, Extra):
        with pytest.raises(TypeError, match="model_construct"):
            trusted(cls)
