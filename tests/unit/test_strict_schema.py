"""The strict, eager SDK schema (``render/strict_schema.py``) against the check it replaced.

The replaced check validated with the SDK's TypedDict as it is, drained every lazy
``Iterable`` and then walked the output beside the body for a key the type had dropped. It is
kept here, short, as the oracle: on rendered bodies and on every single mutation of them (a key
added or removed anywhere, any value replaced by one of a set of JSON values and tags), the
strict validator must give the same verdict. The differences allowed are the ones the module
documents: an empty JSON object where the type wants an array (a lazy ``Iterable`` iterated it
as no items; the API would refuse it), and a message block's ``cache_control`` that is not the
SDK's ``CacheControlEphemeralParam`` (the walk took any value there; the API refuses one
without its ``type``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import pytest
from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from pydantic_core import SchemaValidator
from typing_extensions import TypedDict

from contextfold.domain.conversation import Conversation, InstructionPart, MediaPart, UserMessage
from contextfold.domain.errors import RenderError
from contextfold.projections.render import render, validate_sdk_types
from contextfold.projections.render.strict_schema import strict_core_schema
from contextfold.projections.render.validate import _strict_validator, _typed_dict_adapter
from tests.unit.test_render import (
    IMAGE,
    PARALLEL,
    PDF,
    PNG,
    RECOVERY,
    URL_IMAGE,
    assistant,
    call,
    conv,
    result,
    results,
    user,
)

TYPED_DICT_PROVIDERS = ("openai-chat", "openai-responses", "anthropic")

SHOT = MediaPart(kind="image", media_type="image/png", data_base64=PNG, source="browser://shot",
                 trust="external", fragment_id="shot")
CONVERSATIONS: dict[str, Conversation] = {
    "parallel": PARALLEL,
    "recovery": RECOVERY,
    "media": conv(UserMessage(parts=(InstructionPart(text="look", authority="user", fragment_id="u"),
                                     IMAGE, URL_IMAGE, PDF))),
    "tool media": conv(user("screenshot"), assistant("", call("c1", "run", "{}")),
                       results(result("c1", "run", "took it", "ok", None, SHOT))),
}
VALUES: tuple[Any, ...] = (None, 1, 1.5, True, "x", [], {}, ["x"], {"x": 1}, {"type": "text", "text": "t"},
                           "text", "user", "assistant", "tool", "function", "image", "image_url",
                           "tool_use", "tool_result", "message", "function_call", "function_call_output",
                           "input_text", "ephemeral")
"""What a mutation puts in place of a value: JSON of every kind, and tags the unions tell
their members apart by (so a block is also tried as another kind of block)."""


class _Dropped(Exception):
    pass


def _drain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_drain(v) for v in value]
    if type(value).__name__ == "ValidatorIterator":
        return [_drain(item) for item in value]
    return value


def _dropped_key(body: Any, validated: Any) -> None:
    if isinstance(body, dict) and isinstance(validated, dict):
        for key, value in body.items():
            if key not in validated:
                raise _Dropped(key)
            _dropped_key(value, validated[key])
    elif isinstance(body, list) and isinstance(validated, list):
        for a, b in zip(body, validated, strict=False):
            _dropped_key(a, b)


def lenient_verdict(provider: str, body: dict[str, Any]) -> bool:
    """The replaced check: the TypedDict as it is, drained, then compared with the body."""
    try:
        _dropped_key(body, _drain(_typed_dict_adapter(provider).validate_python(body)))
    except (ValidationError, _Dropped):
        return False
    return True


def strict_verdict(provider: str, body: dict[str, Any]) -> bool:
    try:
        _strict_validator(provider).validate_python(body)
    except ValidationError:
        return False
    return True


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nodes(item, (*path, i))


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def mutations(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(what, the mutated body) for every single mutation of ``body``."""
    for path, node in _nodes(body):
        if isinstance(node, dict):
            added = copy.deepcopy(body)
            _at(added, path)["zz_unknown"] = 1
            yield f"add a key at {path}", added
            for key in node:
                removed = copy.deepcopy(body)
                del _at(removed, path)[key]
                yield f"remove {(*path, key)}", removed
        if path:
            for value in VALUES:
                replaced = copy.deepcopy(body)
                _at(replaced, path[:-1])[path[-1]] = copy.deepcopy(value)
                yield f"set {path} to {value!r}", replaced


@pytest.mark.parametrize("provider", TYPED_DICT_PROVIDERS)
@pytest.mark.parametrize("name", CONVERSATIONS)
def test_the_strict_schema_gives_the_replaced_checks_verdict(provider: str, name: str) -> None:
    body = json.loads(json.dumps(render(CONVERSATIONS[name], provider, max_tokens=100, validate=False)))
    body.setdefault("model", "m")
    assert strict_verdict(provider, body) and lenient_verdict(provider, body)
    rejected = 0
    for what, mutated in mutations(body):
        strict, lenient = strict_verdict(provider, mutated), lenient_verdict(provider, mutated)
        rejected += not strict
        if strict != lenient:  # only an empty object where an array may stand, refused now,
            # and a message block's cache_control that is not {"type": "ephemeral"}: the walk let
            # one through whatever it held (even a string), the strict schema checks it as the
            # SDK's CacheControlEphemeralParam, whose type is Required, as the API requires
            assert lenient and not strict and (what.endswith("to {}") or (
                provider == "anthropic" and what.startswith(("remove ('messages'", "set ('messages'"))
                and "'cache_control'" in what)), what
    assert rejected > 100  # the mutations do reach the validator


@pytest.mark.parametrize("provider", TYPED_DICT_PROVIDERS)
def test_an_unknown_tag_or_a_block_of_another_kind_is_refused(provider: str) -> None:
    body = render(PARALLEL, provider, max_tokens=100)
    history = body["messages"] if provider != "openai-responses" else body["input"]
    item = history[1]
    tag = "role" if provider == "openai-chat" else "type" if provider == "openai-responses" else "role"
    item[tag] = "narrator"
    with pytest.raises(RenderError, match="SDK request type") as info:
        validate_sdk_types(provider, body)
    assert info.value.index == 1


def test_an_error_names_the_bodys_path_without_union_tags() -> None:
    body = render(PARALLEL, "anthropic", max_tokens=100)
    body["messages"][2]["content"][0]["is_eror"] = True  # a tool_result block
    with pytest.raises(RenderError) as info:
        validate_sdk_types("anthropic", body)
    assert "at messages.2.content.0.is_eror: unknown key 'is_eror'" in str(info.value)
    body = render(PARALLEL, "openai-chat", max_tokens=100)
    body["messages"][2]["tool_calls"][0]["function"]["arguments"] = {"a": 1}
    with pytest.raises(RenderError) as info:
        validate_sdk_types("openai-chat", body)
    assert "at messages.2.tool_calls.0.function.arguments: Input should be a valid string" in str(info.value)


@pytest.mark.parametrize("item", [{"id": "item_1"}, {"type": None, "id": "item_1"},
                                  {"type": "item_reference", "id": "item_1"},
                                  {"role": "user", "content": "hi"}])
def test_items_without_a_tag_or_with_a_null_one_reach_the_members_that_take_them(item: dict[str, Any]
                                                                                  ) -> None:
    """Responses input items: an item reference's ``type`` is optional and nullable, and an easy
    input message has none, so the union's "no tag" choice is itself a union of several members:
    each must still be tried."""
    body = json.loads(json.dumps(render(PARALLEL, "openai-responses", max_tokens=100)))
    body["model"] = "m"
    body["input"].append(item)
    assert strict_verdict("openai-responses", body) and lenient_verdict("openai-responses", body)


class _Closed(TypedDict):
    type: Literal["closed"]
    a: int


@with_config(ConfigDict(extra="allow"))
class _Open(TypedDict):
    type: Literal["open"]
    a: int


class _Untagged(TypedDict, total=False):
    type: Literal["untagged"] | None
    b: str


class _Body(TypedDict):
    one: _Closed | _Open
    many: Iterable[_Closed | _Open | _Untagged]


def test_the_edits_on_a_schema_of_our_own() -> None:
    """What each edit does, on TypedDicts whose choices the SDKs' types do not isolate: unknown
    keys are refused where the TypedDict would drop them and kept where it allows them; items of
    an Iterable are checked at once; a union goes to the choices its tag names (a missing or null
    tag to the one whose literal is optional and nullable)."""
    validator = SchemaValidator(strict_core_schema(TypeAdapter(_Body).core_schema))

    def ok(body: dict[str, Any]) -> bool:
        try:
            validator.validate_python(body)
        except ValidationError:
            return False
        return True

    closed, open_, untagged = {"type": "closed", "a": 1}, {"type": "open", "a": 1}, {"b": "x"}
    assert ok({"one": closed, "many": [closed, open_, untagged, {**untagged, "type": None}]})
    assert ok({"one": {**open_, "extra": 1}, "many": []})  # allowed by the TypedDict
    assert not ok({"one": {**closed, "extra": 1}, "many": []})
    assert not ok({"one": closed, "many": [{"type": "closed", "a": "not an int"}]})  # eager
    assert not ok({"one": closed, "many": [{"type": "other", "a": 1}]})
    assert not ok({"one": {"a": 1}, "many": []})  # no tag, and every choice of 'one' needs one
