"""ONE streamed provider response, chunk by chunk as it arrives, -> the :class:`ProviderReply`
:func:`.provider_reply.read_response` reads from the same response returned whole.

Why: production agents stream, and :func:`read_response` takes a final object only. The SDKs'
stream helpers assemble one, but not for every way of streaming: google-genai has no accumulator
at all (``generate_content_stream`` yields chunks), the raw ``stream=True`` iterators, an httpx
SSE loop or a framework hand over chunks, and an OpenAI Responses stream that ends
``response.incomplete`` makes ``get_final_response()`` raise. And a helper's snapshot of a stream
that broke off reads as a whole response: an Anthropic call's input parsed leniently from a
prefix, a Chat call's arguments half written (``tests/unit/test_read_stream.py``).

Pure: chunks (SDK objects, their dicts, or the JSON text of an SSE ``data:`` line) in, a reply
out; no SDK is imported, no I/O. Each provider's fold is in its own module
(:mod:`._stream_openai`, :mod:`._stream_anthropic`, :mod:`._stream_gemini`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from contextfold.domain.errors import ImportFormatError, InvalidInputError, StreamIncompleteError
from contextfold.domain.events import ModelResponse
from contextfold.importers._json import Bad, JsonPath
from contextfold.importers._stream_anthropic import HELPER_EVENTS, AnthropicFold
from contextfold.importers._stream_fold import Fold
from contextfold.importers._stream_gemini import GeminiFold
from contextfold.importers._stream_openai import ChatFold, ResponsesFold
from contextfold.importers.provider_reply import PROVIDERS, ProviderReply, _plain, read_response

__all__ = ["StreamReader", "read_stream"]

_FOLDS: dict[str, Callable[[], Fold]] = {
    "openai-chat": ChatFold,
    "openai-responses": ResponsesFold,
    "anthropic": AnthropicFold,
    "gemini": GeminiFold,
}
_SDKS = {"openai-chat": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "google"}


class StreamReader:
    """Reads ONE streamed response as it arrives: :meth:`add` each chunk (while forwarding it to a
    UI), then :meth:`reply` -- the :class:`ProviderReply` that :func:`read_response` reads from
    the same response returned whole: the same events, usage and stop reason.

    ``provider``: ``"openai-chat"``, ``"openai-responses"``, ``"anthropic"`` or ``"gemini"``.
    A chunk is what the stream yields, as the SDK yields it or as its dict: openai
    ``ChatCompletionChunk`` (``chat.completions.create(stream=True)``) or a ``chat.completions.
    stream()`` event, a Responses ``ResponseStreamEvent`` (``responses.create(stream=True)`` or
    ``responses.stream()``), an anthropic ``RawMessageStreamEvent`` (``messages.create(
    stream=True)``) or a ``messages.stream()`` event, a google-genai ``GenerateContentResponse``
    of ``models.generate_content_stream`` -- or the JSON text of one SSE ``data:`` line
    (``"[DONE]"`` is taken and ignored). The helpers' own events that repeat a raw one (a text
    delta with its snapshot) are skipped, so every event a helper yields may be fed.

    >>> import contextfold
    >>> reader = contextfold.StreamReader("anthropic")
    >>> for event in [
    ...     {"type": "message_start", "message": {
    ...      "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    ...      "content": [], "usage": {"input_tokens": 900, "output_tokens": 1}}},
    ...     {"type": "content_block_start", "index": 0,
    ...      "content_block": {"type": "tool_use", "id": "toolu_1", "name": "pytest", "input": {}}},
    ...     {"type": "content_block_delta", "index": 0,
    ...      "delta": {"type": "input_json_delta", "partial_json": '{"k": "sl'}},
    ...     {"type": "content_block_delta", "index": 0,
    ...      "delta": {"type": "input_json_delta", "partial_json": 'ow"}'}},
    ...     {"type": "content_block_stop", "index": 0},
    ...     {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
    ...     {"type": "message_stop"}]:
    ...     reader.add(event)           # an anthropic SDK event, or its dict
    >>> reply = reader.reply()
    >>> [(call.call_id, call.arguments) for call in reply.calls], reply.stop_reason
    ([('toolu_1', '{"k":"slow"}')], 'tool_use')

    A stream that did not finish whole is refused: :meth:`reply` raises
    :class:`~contextfold.domain.errors.StreamIncompleteError` (an :class:`ImportFormatError`) when
    the stream stopped before the provider's end (a dropped connection, a cancel: stop feeding
    and ask; an error event; ``response.failed``; Gemini's ``CONTINUATION`` pause), or when the
    provider stopped it at its output limit while writing a call. Never a call whose arguments
    did not finish: ``err.partial`` is a reply of what came whole -- the text received, the calls
    whose arguments closed, signed thinking blocks, done reasoning items -- for a runtime that
    keeps it (``run.append(err.partial.events)``, then answer ``err.partial.calls``) rather than
    retry; ``err.missing`` says what did not arrive. A stream ended at the limit in its text
    reads whole (``stop_reason`` says so). Chat Completions' usage comes in a chunk after the
    finish reason when ``stream_options.include_usage`` asks for it (every chunk then says
    ``"usage": null``): a stream cut between them is refused too, its ``err.partial`` the whole
    reply without usage (``[DONE]`` fed, the server's own end, reads whole without it).
    """

    def __init__(self, provider: str) -> None:
        fold = _FOLDS.get(provider)
        if fold is None:
            raise InvalidInputError(f"unknown provider {provider!r}; one of {', '.join(PROVIDERS)}")
        self.provider = provider
        self._fold = fold()
        self._chunks = 0

    def add(self, chunk: object) -> None:
        """Fold one chunk in. A chunk that is not ``provider``'s stream's (another SDK's, a whole
        response, a malformed one) is :class:`ImportFormatError` naming it by its position."""
        where = f"{self.provider} stream chunk {self._chunks}"
        self._chunks += 1
        event = _event(self.provider, chunk, where)
        if event is None:
            if isinstance(self._fold, ChatFold) and _said_done(chunk):
                self._fold.done_said = True
            return
        try:
            self._fold.add(event)
        except Bad as e:
            raise ImportFormatError(_located(where, e.path), e.reason) from None

    @property
    def done(self) -> bool:
        """The provider said the response ended (its stop reason, its last event)."""
        return self._fold.ended()

    def reply(self) -> ProviderReply:
        """The reply of the response streamed (see the class). May be asked at any time: a stream
        not done is :class:`StreamIncompleteError`, and feeding on after it is allowed."""
        fold = self._fold
        missing = fold.missing()
        if fold.failure is not None:
            missing.insert(0, f"the stream failed with the provider's error ({fold.failure})")
        if not fold.ended() or fold.failure is not None:
            raise self._incomplete(f"{self.provider} stream", missing)
        try:
            reply = read_response(self.provider, fold.body(whole=False))
        except ImportFormatError as e:
            if fold.stop() not in fold.limits:
                raise
            raise self._incomplete(e.location, missing or [e.reason], reason=e.reason) from None
        if missing:  # ended, yet a call did not finish: a stream no provider sends, refused the same
            raise self._incomplete(f"{self.provider} stream", missing)
        return reply

    def _incomplete(
        self, location: str, missing: list[str], reason: str | None = None
    ) -> StreamIncompleteError:
        partial = self._partial()
        text = partial.events[0].text if partial and isinstance(partial.events[0], ModelResponse) else ""
        return StreamIncompleteError(
            location,
            reason
            or (
                f"the response did not arrive whole (missing: {'; '.join(missing)}): err.partial holds "
                "what came whole, to keep; or retry"
            ),
            partial=partial,
            text=text,
            missing=missing,
        )

    def _partial(self) -> ProviderReply | None:
        """What came whole, read as the response holding only it: its stop reason withheld (the
        body says ``end_turn`` / ``stop`` only to be read; the reply names the provider's own, or
        None), its usage as far as the provider reported it."""
        try:
            reply = read_response(self.provider, self._fold.body(whole=True))
        except (ImportFormatError, Bad):
            return None
        kept = [
            e
            for e in reply.events
            if not isinstance(e, ModelResponse) or e.text or e.tool_calls or e.reasoning is not None
        ]
        if not kept:
            return None
        return reply.model_copy(update={"events": tuple(kept), "stop_reason": self._fold.stop()})


def read_stream(provider: str, chunks: Iterable[object]) -> ProviderReply:
    """:class:`StreamReader` over all of ``chunks``: the reply of the response they stream, or
    :class:`StreamIncompleteError` when it did not finish whole (see :class:`StreamReader`).
    For an async stream, or to forward chunks as they come, use :class:`StreamReader` itself."""
    reader = StreamReader(provider)
    for chunk in chunks:
        reader.add(chunk)
    return reader.reply()


def _event(provider: str, chunk: object, where: str) -> dict[str, Any] | None:
    """``chunk`` as plain JSON values (``_plain``: nulls dropped, bytes as standard base64), None
    for one to skip: ``[DONE]``, a helper's event that repeats a raw one."""
    if isinstance(chunk, str | bytes):
        text = chunk.decode("utf-8", "strict") if isinstance(chunk, bytes) else chunk
        if text.strip() == "[DONE]":
            return None
        try:
            chunk = json.loads(text)
        except ValueError as e:
            raise ImportFormatError(where, f"not JSON: {e}") from None
    if isinstance(chunk, BaseModel):
        root = type(chunk).__module__.split(".")[0]
        if root != _SDKS[provider]:
            raise ImportFormatError(
                where,
                f"expected a {provider} stream chunk, got "
                f"{type(chunk).__module__}.{type(chunk).__qualname__}",
            )
        kind = getattr(chunk, "type", None)
        if provider == "openai-chat" and kind is not None:  # chat.completions.stream()'s events
            if kind != "chunk":
                return None
            chunk = getattr(chunk, "chunk", None)
        elif provider == "anthropic" and kind in HELPER_EVENTS:
            return None
        elif kind == "content_block_delta" and provider == "anthropic":
            delta = getattr(chunk, "delta", None)
            field = _DELTA_FIELDS.get(str(getattr(delta, "type", "")))
            if field is not None:  # nearly every event: read as it is (a dump was most of its cost)
                return {
                    "type": kind,
                    "index": getattr(chunk, "index", None),
                    "delta": {"type": getattr(delta, "type", None), field: getattr(delta, field, None)},
                }
        if not isinstance(chunk, BaseModel):
            raise ImportFormatError(where, "a 'chunk' event without its chunk")
        # a helper's snapshot (the text so far) is left out: dumped with every delta, a stream
        # would cost the square of its length; a helper's parsed subclasses in a union field make
        # pydantic warn of nothing lost
        if not _exact(provider, chunk):
            dumped = chunk.model_dump(exclude_none=True, exclude={"snapshot"}, warnings=False)
            asked = "usage" in chunk.model_fields_set and getattr(chunk, "usage", 0) is None
            if provider == "openai-chat" and asked:
                dumped["usage"] = None  # the API said "usage": null (include_usage): see ChatFold
            return dumped
        chunk = chunk.model_dump(mode="python", exclude={"snapshot"}, warnings=False)
    if not isinstance(chunk, Mapping):
        raise ImportFormatError(
            where, f"expected a {provider} stream chunk or its dict, got {type(chunk).__name__}"
        )
    try:
        event = _plain(chunk)
    except RecursionError:
        raise ImportFormatError(where, "nested too deeply") from None
    if provider == "openai-chat" and "type" in event:
        if event["type"] != "chunk" or not isinstance(event.get("chunk"), dict):
            return None
        event = event["chunk"]
        chunk = chunk.get("chunk")
    if provider == "openai-chat" and isinstance(chunk, Mapping) and chunk.get("usage", 0) is None:
        return {**event, "usage": None}  # include_usage was asked: its chunk is to come (ChatFold)
    if provider == "anthropic" and event.get("type") in HELPER_EVENTS:
        return None
    return dict(event)


def _said_done(chunk: object) -> bool:
    if isinstance(chunk, bytes):
        chunk = chunk.decode("utf-8", "replace")
    return isinstance(chunk, str) and chunk.strip() == "[DONE]"


_DELTA_FIELDS = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
}
"""Anthropic's deltas of one string field: the field."""


def _exact(provider: str, chunk: BaseModel) -> bool:
    """The chunk may hold JSON the model wrote (a Gemini call's ``args``, a Responses item done,
    a block started), whose nulls are its own: dumped whole and read as read_response reads a
    response (:func:`_plain`). The rest -- the deltas, nearly every chunk -- are dumped without
    their nulls by pydantic itself: ``_plain`` walking each in Python was 2/3 of a chunk's cost."""
    if provider == "anthropic":
        return getattr(chunk, "type", None) != "content_block_delta"
    if provider == "openai-responses":
        return not str(getattr(chunk, "type", "")).endswith(".delta")
    if provider == "gemini":
        return any(
            getattr(part, "function_call", None) is not None
            for candidate in getattr(chunk, "candidates", None) or ()
            for part in (getattr(getattr(candidate, "content", None), "parts", None) or ())
        )
    return False  # a Chat chunk's arguments are text


def _located(where: str, path: JsonPath) -> str:
    spelled = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return f"{where} at {spelled}" if spelled else where
