"""ONE provider response, as its official SDK returns it, -> the events a runtime appends.

Why: a runtime that calls a provider had to translate the reply into events itself, and that is
where production agents lose what the next request needs back (Anthropic thinking signatures,
OpenAI Responses reasoning items and call ids, Gemini thought signatures, parallel calls, refusals,
server-side tool uses). The importers already read these shapes out of recorded histories and the
renderers write them back, so a response is read here by the importer's own reading of one
message (:func:`.openai_chat.assistant_response`, :func:`.anthropic.assistant_events`,
:func:`.openai_responses.output_events`, :func:`.gemini.model_events`): a live response and the
same turn imported from a history are the same events.

Pure: a dict (or an SDK object, dumped) in, events out; no SDK is imported (an SDK object is told
by the names of its classes), no store is touched.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from contextfold.domain.errors import ImportFormatError, InvalidInputError
from contextfold.domain.events import (
    AnyEvent,
    GeminiReasoning,
    ModelResponse,
    ToolCall,
    ToolResult,
    canonical_json,
)
from contextfold.domain.reasoning import HOSTED_RESPONSES_ITEMS, reasoning_refusals
from contextfold.domain.text_breaks import last_text_after
from contextfold.importers import anthropic, gemini, openai_chat, openai_responses
from contextfold.importers._common import get_list, get_obj, opt_str, require_obj
from contextfold.importers._json import Bad, JsonPath

__all__ = ["PROVIDERS", "ProviderReply", "ReplyUsage", "read_response"]

ProviderName: TypeAlias = Literal["openai-chat", "openai-responses", "anthropic", "gemini"]
PROVIDERS: tuple[ProviderName, ...] = ("openai-chat", "openai-responses", "anthropic", "gemini")

_SDK_CLASSES: dict[str, frozenset[tuple[str, str]]] = {
    "openai-chat": frozenset({("openai.types.chat.chat_completion", "ChatCompletion")}),
    "openai-responses": frozenset({("openai.types.responses.response", "Response")}),
    "anthropic": frozenset({("anthropic.types.message", "Message"),
                            ("anthropic.types.beta.beta_message", "BetaMessage")}),
    "gemini": frozenset({("google.genai.types", "GenerateContentResponse")}),
}
"""provider -> the (module, class) of the SDK response objects it reads; a subclass (the stream
helpers' ``ParsedChatCompletion``, ``ParsedMessage``, ``ParsedResponse``) is one too."""

_STREAM_HINT = {
    "openai-chat": "client.chat.completions.stream(...).get_final_completion(), or the chunks to "
                   "contextfold.read_stream",
    "openai-responses": "client.responses.stream(...).get_final_response(), or the events to "
                        "contextfold.read_stream",
    "anthropic": "client.messages.stream(...).get_final_message(), or the events to contextfold.read_stream",
    "gemini": "one generateContent response; a stream's chunks to contextfold.read_stream",
}

_FREE = frozenset({"input", "args", "arguments", "action"})
"""Keys whose value is the model's own JSON (a call's arguments): copied as it is, its nulls
included. Elsewhere a null is a field the response does not set, as the SDKs' ``exclude_none``."""


class ReplyUsage(TypedDict):
    """What the provider counted for the request the response answers, as
    :meth:`~contextfold.api.Run.observe_usage` takes it: ``run.observe_usage(turn, **usage)``.
    ``input_tokens`` is the whole prompt, cached tokens included (Anthropic's ``input_tokens +
    cache_read_input_tokens + cache_creation_input_tokens``), ``output_tokens`` what the response
    was billed (Gemini's candidates and thoughts), ``model`` the model the provider names."""

    input_tokens: int
    cached_tokens: int
    output_tokens: int
    model: str | None


class ProviderReply(BaseModel):
    """A provider response read into the log's terms (:func:`read_response`): the ``events`` to
    append, the ``usage`` to report, and the ``stop_reason`` the provider gave."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    events: tuple[AnyEvent, ...]
    """The response's :class:`ModelResponse` (its ``model`` the one that answered), and, where
    the provider ran a tool search itself (OpenAI's ``tool_search_call``) or an MCP call
    (Anthropic's beta ``mcp_tool_use``), their results, in the order the response holds them:
    append them all, ``run.append(reply.events)``. The items of hosted tools (OpenAI's web and
    file search, code interpreter, image generation, remote MCP; Anthropic's server tools) are
    no call: they are kept verbatim in the response's ``reasoning``."""
    usage: ReplyUsage | None
    """For ``run.observe_usage(built.manifest.turn, **reply.usage)``; None when the response
    carries no usage."""
    stop_reason: str | None
    """The provider's own word, verbatim: Chat Completions' ``finish_reason``, Anthropic's
    ``stop_reason``, Responses' ``incomplete_details.reason`` (else its ``status``), Gemini's
    ``finishReason``."""

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The calls the runtime is to run and answer, a :class:`ToolResult` each: every call of
        the responses in ``events`` but those the provider ran itself (their results are in
        ``events`` already, and a second one is refused)."""
        answered = {e.call_id for e in self.events if isinstance(e, ToolResult)}
        return tuple(c for e in self.events if isinstance(e, ModelResponse)
                     for c in e.tool_calls if c.call_id not in answered)


def read_response(provider: str, response: object) -> ProviderReply:
    """Read ONE provider response into the events to append, its usage and its stop reason.

    ``provider``: ``"openai-chat"``, ``"openai-responses"``, ``"anthropic"`` or ``"gemini"``.
    ``response``: the official SDK's response object -- openai ``ChatCompletion`` or
    ``Response``, anthropic ``Message`` (or beta ``BetaMessage``), google-genai
    ``GenerateContentResponse`` -- or its plain dict (``model_dump()``, or the REST JSON).
    Streaming: pass the object the SDK's stream helper assembles
    (``client.chat.completions.stream(...).get_final_completion()``,
    ``client.responses.stream(...).get_final_response()``,
    ``client.messages.stream(...).get_final_message()``), or read its chunks with
    :func:`~contextfold.importers.provider_stream.read_stream`; a chunk or event is refused, and so
    is a response without its stop reason (a snapshot of a stream that broke off).

    What the response needs back in the next request is kept verbatim: Anthropic ``thinking`` /
    ``redacted_thinking`` blocks with their signatures (and which calls they stood between),
    OpenAI Responses ``reasoning`` items (``encrypted_content``) before the calls they led to, each
    call's ``call_id`` (not its item id), Gemini ``thoughtSignature`` values on the parts they rode
    on, every call of a parallel batch, and the items of the tools the provider runs itself
    (OpenAI Responses' ``web_search_call``, ``code_interpreter_call``, ``mcp_call``...;
    Anthropic's ``server_tool_use`` and its ``web_search_tool_result``...), verbatim among the
    response's reasoning items: they go back to that provider only, are no call for the runtime
    and need no result (a ``pause_turn`` reply's unrun server call included: sent back as it is,
    the API runs it). A refusal is the response's text, and so is a spoken Chat reply's
    transcript. A call the provider ran itself (OpenAI's tool search, Anthropic's beta MCP
    connector) is answered by its result in ``events`` (its JSON, keys sorted, so the SDK object
    and the REST JSON read the same); ``reply.calls`` are the others, for the runtime to run. A
    Gemini call without an ``id`` (before Gemini 3) is ``gemini-<responseId>-<part>``, unique per
    response (:func:`_gemini_events`); a Chat legacy ``function_call`` is ``fc-<the completion's
    id>``. A response is read as the importer reads the same turn in a history (``contextfold
    import``), so its text is the text blocks joined, and where a block stood after a call (or a
    server tool's block) is its ``text_breaks``: it goes back there (Anthropic, Responses,
    Gemini; Chat has one content, before the calls).

    Refused, with :class:`ImportFormatError` naming the response and where in it (nothing to
    append): a response that is not ``provider``'s (another SDK's object, a request body, a
    stream chunk: never guessed), a malformed one, one of several choices or candidates (one
    response is one turn: ask for one), one not finished (a background Responses ``queued`` /
    ``in_progress``; ``failed``), a Gemini answer with no content (a blocked prompt), reasoning
    its provider never takes back (a thinking block without its signature). And a response the
    provider stopped at its output limit (``finish_reason="length"``, ``stop_reason=
    "max_tokens"``, ``incomplete_details.reason="max_output_tokens"``,
    ``finishReason="MAX_TOKENS"``) while writing a tool call: a call whose JSON arguments do not
    parse, or (Anthropic, Gemini, a custom tool's free text: arguments that cannot show the cut)
    the call that ends the response. Such a call cannot be run, and recorded it would be answered
    and sent back as if the model had written it whole; retry with a larger limit (Anthropic's
    own advice), or append ``ModelResponse(text=...)`` of the text yourself. A response cut in
    its text is read (``stop_reason`` says so). A bad ``provider`` is :class:`InvalidInputError`.

    Usage: ``reply.usage`` is what the provider counted, for
    ``run.observe_usage(built.manifest.turn, **reply.usage)`` (not recorded here: the turn is the
    build's, which only the caller knows).

    >>> import contextfold
    >>> message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    ...            "content": [{"type": "thinking", "thinking": "Run it.", "signature": "c2ln"},
    ...                        {"type": "text", "text": "Running the tests."},
    ...                        {"type": "tool_use", "id": "toolu_1", "name": "pytest",
    ...                         "input": {"k": "slow"}}],
    ...            "stop_reason": "tool_use",
    ...            "usage": {"input_tokens": 900, "cache_read_input_tokens": 2000, "output_tokens": 40}}
    >>> reply = contextfold.read_response("anthropic", message)  # or anthropic's Message itself
    >>> response = reply.events[0]
    >>> response.text, response.reasoning.items[0].raw["signature"]
    ('Running the tests.', 'c2ln')
    >>> [(call.call_id, call.name, call.arguments) for call in reply.calls]  # to run and answer
    [('toolu_1', 'pytest', '{"k":"slow"}')]
    >>> reply.usage
    {'input_tokens': 2900, 'cached_tokens': 2000, 'output_tokens': 40, 'model': 'claude-sonnet-4-5'}
    >>> reply.stop_reason
    'tool_use'

    Then ``run.append(reply.events)``, answer ``reply.calls`` (``ToolResult(call_id="toolu_1",
    ...)``) and build the next request: the thinking block goes back before its call, unchanged.
    """
    reader = _READERS.get(provider)
    if reader is None:
        raise InvalidInputError(f"unknown provider {provider!r}; one of {', '.join(PROVIDERS)}")
    where = f"{provider} response"
    body = _plain_body(provider, response, where)
    try:
        events, stop_reason, usage = reader(body)
        for event in events:
            _check_reasoning(event)
    except Bad as e:
        raise ImportFormatError(_location(where, e.path), e.reason) from None
    except RecursionError:
        raise ImportFormatError(where, "nested too deeply") from None
    return ProviderReply(events=tuple(events), usage=usage, stop_reason=stop_reason)


# ---------------------------------------------------------------- the response as plain JSON


def _plain_body(provider: str, response: object, where: str) -> dict[str, Any]:
    """``response`` as the plain JSON values the importers read: an SDK object of ``provider``'s
    dumped, a dict as it is, both without their nulls (:data:`_FREE` aside), bytes as standard
    base64 (Gemini's ``thoughtSignature``, as its REST API spells it) and enums as their values."""
    if isinstance(response, Mapping):
        value: Any = response
    elif isinstance(response, BaseModel):
        classes = {(c.__module__, c.__qualname__) for c in type(response).__mro__}
        if not classes & _SDK_CLASSES[provider]:
            cls = type(response)
            same_sdk = any(cls.__module__.split(".")[0] == module.split(".")[0]
                           for module, _ in _SDK_CLASSES[provider])
            raise ImportFormatError(where, (
                f"expected {_expected(provider)} or its dict, got {cls.__module__}.{cls.__qualname__}"
                + (f" (a stream: pass {_STREAM_HINT[provider]})" if same_sdk else "")))
        # warnings off: a parse helper's object (``chat.completions.parse``' ParsedChatCompletion)
        # holds its ``parsed`` model in a field its generic class types as None, and pydantic
        # warned on every read of nothing lost (the model's JSON is the content, read from there)
        value = response.model_dump(mode="python", warnings=False)
    else:
        raise ImportFormatError(where, f"expected {_expected(provider)} or its dict, "
                                       f"got {type(response).__name__}")
    try:
        return dict(_plain(value))
    except RecursionError:
        raise ImportFormatError(where, "nested too deeply") from None


def _expected(provider: str) -> str:
    return " or ".join(sorted(f"{module.split('.')[0]} {name}"
                              for module, name in _SDK_CLASSES[provider]))


def _plain(value: Any) -> Any:
    """``value`` as plain JSON values (see :func:`_plain_body`), the keys of each object sorted.
    Why sorted: an SDK object dumps its fields in the order its class declares them, not the
    order of the JSON it was read from, and a server tool's result is kept as its JSON text
    (Anthropic's web search results, OpenAI's tool search output): the REST JSON and the SDK
    object of one response read to different results. A call's arguments (:data:`_FREE`) keep
    the model's order; a hosted tool's item (a ``web_search_call``'s ``action``) is the SDK's
    own, its unset fields dropped as anywhere else."""
    if isinstance(value, Mapping):
        kind = value.get("type")
        free = frozenset() if isinstance(kind, str) and kind in HOSTED_RESPONSES_ITEMS else _FREE
        return {str(k): value[k] if k in free else _plain(value[k])
                for k in sorted(value, key=str) if value[k] is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    return value


def _location(where: str, path: JsonPath) -> str:
    spelled = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return f"{where} at {spelled}" if spelled else where


def _check_reasoning(event: AnyEvent) -> None:
    """Reasoning no version of its provider's API takes back (a thinking block without its
    signature): the append would refuse it; said here, where the response is named."""
    if isinstance(event, ModelResponse) and event.reasoning is not None:
        refused = [r for r in reasoning_refusals(event.reasoning, len(event.tool_calls),
                                                         text_after=last_text_after(event)) if r.always]
        if refused:
            raise Bad((), f"its reasoning is refused: {refused[0].why}")


def _tagged(body: dict[str, Any], key: str, expected: str, provider: str) -> None:
    """``body[key]`` is ``expected``: the tag that tells the provider's response from anything
    else (a request body, a stream chunk, another provider's response)."""
    got = body.get(key)
    if got != expected:
        raise Bad((key,) if key in body else (), (
            f"not a {provider} response: {key!r} is {got!r}, expected {expected!r}"
            + (f" (a stream: pass {_STREAM_HINT[provider]})" if isinstance(got, str) and (
                "chunk" in got or "event" in got) else "")))


def _count(usage: dict[str, Any], key: str, path: JsonPath) -> int:
    value = usage.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Bad((*path, key), f"expected {key!r} to be a count of tokens, got {value!r}")
    return value


def _with_model(events: list[AnyEvent], model: str | None) -> list[AnyEvent]:
    """The responses of ``events`` naming the ``model`` that answered (an import reads a
    history's responses without one: the run names its model)."""
    if model is None:
        return events
    return [e.model_copy(update={"model": model}) if isinstance(e, ModelResponse) else e
            for e in events]


def _cut(path: JsonPath, stop: str, what: str) -> Bad:
    return Bad(path, f"the response stopped at its output limit ({stop}) while writing {what}: its "
                     "arguments may be cut, and a call cannot be recorded so; retry with a larger "
                     "limit, or append the response's text as a ModelResponse yourself")


def _unfinished(path: JsonPath) -> Bad:
    """A response without its stop reason: a stream's chunk or snapshot (a whole response always
    has one), whose last call may be half written -- the SDK's lenient parse even closes it."""
    return Bad(path, "the response is not finished (no stop reason): a stream's chunk or snapshot; "
                     "read the stream's chunks with contextfold.read_stream")


def _parses(arguments: Any) -> bool:
    if not isinstance(arguments, str):
        return True  # parsed already: a cut cannot be seen in it (see the callers)
    try:
        json.loads(arguments)
    except ValueError:
        return False
    return True


Read: TypeAlias = tuple[list[AnyEvent], str | None, ReplyUsage | None]


# ---------------------------------------------------------------- one reader per provider


def _chat(body: dict[str, Any]) -> Read:
    _tagged(body, "object", "chat.completion", "openai-chat")
    choices = get_list(body, "choices", ())
    if len(choices) != 1:
        raise Bad(("choices",), f"{len(choices)} choices: one response is one turn (ask for n=1)")
    path: JsonPath = ("choices", 0)
    choice = require_obj(choices[0], path, "a choice object")
    msg = get_obj(choice, "message", path)
    if msg.get("role") != "assistant":
        raise Bad((*path, "message", "role"), f"expected role 'assistant', got {msg.get('role')!r}")
    stop = opt_str(choice, "finish_reason", path)
    if stop is None:
        raise _unfinished((*path, "finish_reason"))
    if stop == "length":
        listed = msg.get("tool_calls")
        raw_calls: list[Any] = listed if isinstance(listed, list) else []
        for j, tc in enumerate(raw_calls):
            if not isinstance(tc, dict):
                continue
            fn = tc.get("function")
            free = tc.get("type") == "custom"
            if (free and j == len(raw_calls) - 1) or (
                    not free and isinstance(fn, dict) and not _parses(fn.get("arguments", "{}"))):
                raise _cut((*path, "message", "tool_calls", j), "finish_reason 'length'",
                           f"call {tc.get('id')!r}")
    completion = body.get("id")  # a legacy function_call is named after it: unique per response
    response = openai_chat.assistant_response(msg, (*path, "message"),
                                              completion if isinstance(completion, str) and completion else 0)
    model = opt_str(body, "model", ())
    usage = _openai_usage(body, "prompt_tokens", "completion_tokens", model)
    return _with_model([response], model), stop, usage


def _openai_usage(body: dict[str, Any], inputs: str, outputs: str, model: str | None) -> ReplyUsage | None:
    """OpenAI's ``usage``: Chat Completions' ``prompt_tokens`` and ``completion_tokens``,
    Responses' ``input_tokens`` and ``output_tokens``, each with the cached ones in its
    ``<inputs>_details``."""
    raw = body.get("usage")
    if not isinstance(raw, dict):
        return None
    details = raw.get(f"{inputs}_details")
    cached = (_count(details, "cached_tokens", ("usage", f"{inputs}_details"))
              if isinstance(details, dict) else 0)
    return ReplyUsage(input_tokens=_count(raw, inputs, ("usage",)), cached_tokens=cached,
                      output_tokens=_count(raw, outputs, ("usage",)), model=model)


_UNFINISHED = ("queued", "in_progress")
_CALL_ITEMS = ("function_call", "custom_tool_call")


def _responses(body: dict[str, Any]) -> Read:
    _tagged(body, "object", "response", "openai-responses")
    status = opt_str(body, "status", ())
    if status in _UNFINISHED:
        raise Bad(("status",), f"the response is not finished (status {status!r}): retrieve it once "
                               "it is completed (background mode), or pass a stream's final response")
    if status in ("failed", "cancelled"):
        error = body.get("error")
        said = f": {error.get('message')}" if isinstance(error, dict) and error.get("message") else ""
        raise Bad(("status",), f"the response {status}{said}")
    output = get_list(body, "output", ())
    details = body.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, dict) else None
    if status == "incomplete" and reason == "max_output_tokens":
        calls = [i for i, item in enumerate(output)
                 if isinstance(item, dict) and item.get("type") in _CALL_ITEMS]
        for i in calls:
            item = output[i]
            free = item.get("type") == "custom_tool_call"
            if item.get("status") == "incomplete" or (free and i == calls[-1] == len(output) - 1) or (
                    not free and not _parses(item.get("arguments", "{}"))):
                raise _cut(("output", i), "incomplete_details.reason 'max_output_tokens'",
                           f"call {item.get('call_id')!r}")
    events = openai_responses.output_events(output, ("output",))
    model = opt_str(body, "model", ())
    usage = _openai_usage(body, "input_tokens", "output_tokens", model)
    return _with_model(events, model), reason if isinstance(reason, str) else status, usage


_ANTHROPIC_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")
_ANTHROPIC_LIMITS = ("max_tokens", "model_context_window_exceeded")


def _anthropic(body: dict[str, Any]) -> Read:
    _tagged(body, "type", "message", "anthropic")
    if body.get("role") != "assistant":
        raise Bad(("role",), f"expected role 'assistant', got {body.get('role')!r}")
    content = get_list(body, "content", ())
    stop = opt_str(body, "stop_reason", ())
    if stop is None:
        raise _unfinished(("stop_reason",))
    if stop in _ANTHROPIC_LIMITS and content and isinstance(content[-1], dict) and (
            content[-1].get("type") in _ANTHROPIC_CALLS):
        raise _cut(("content", len(content) - 1), f"stop_reason {stop!r}",
                   f"call {content[-1].get('id')!r}, the response's last block")
    events = anthropic.assistant_events({"role": "assistant", "content": content}, ())
    model = opt_str(body, "model", ())
    usage = None
    if isinstance(raw := body.get("usage"), dict):
        cached = _count(raw, "cache_read_input_tokens", ("usage",))
        whole = (_count(raw, "input_tokens", ("usage",)) + cached
                 + _count(raw, "cache_creation_input_tokens", ("usage",)))
        usage = ReplyUsage(input_tokens=whole, cached_tokens=cached,
                           output_tokens=_count(raw, "output_tokens", ("usage",)), model=model)
    return _with_model(events, model), stop, usage


def _gemini(body: dict[str, Any]) -> Read:
    found = gemini.either_key(body, "candidates")
    if found is None:
        feedback = gemini.either_key(body, "promptFeedback")
        blocked = gemini.either_key(feedback[1], "blockReason") if feedback and isinstance(
            feedback[1], dict) else None
        if blocked is not None:
            raise Bad((feedback[0],) if feedback else (),
                      f"the prompt was blocked ({blocked[1]}): the response holds no candidate")
        raise Bad((), "not a gemini response: missing field 'candidates'")
    key, candidates = found
    if not isinstance(candidates, list) or len(candidates) != 1:
        count = len(candidates) if isinstance(candidates, list) else "no list of"
        raise Bad((key,), f"{count} candidates: one response is one turn (ask for candidateCount=1)")
    path: JsonPath = (key, 0)
    candidate = require_obj(candidates[0], path, "a candidate object")
    finish = gemini.either_key(candidate, "finishReason")
    stop = finish[1] if finish and isinstance(finish[1], str) else None
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not parts:
        raise Bad(path, f"the candidate holds no content (finishReason {stop!r}): nothing to record")
    if stop is None:
        raise _unfinished((*path, "finishReason"))
    content = require_obj(content, (*path, "content"))
    if content.get("role", "model") != "model":
        raise Bad((*path, "content", "role"), f"expected role 'model', got {content.get('role')!r}")
    last = parts[-1] if isinstance(parts, list) else None
    if stop == "MAX_TOKENS" and isinstance(last, dict) and gemini.either_key(last, "functionCall"):
        raise _cut((*path, "content", "parts", len(parts) - 1), "finishReason 'MAX_TOKENS'",
                   "a function call, the response's last part")
    events = _gemini_events(body, content, (*path, "content"))
    version = gemini.either_key(body, "modelVersion")
    model = version[1] if version and isinstance(version[1], str) else None
    usage = None
    meta = gemini.either_key(body, "usageMetadata")
    if meta is not None and isinstance(meta[1], dict):
        up: JsonPath = (meta[0],)
        counts = {name: _count(meta[1], found[0], up) if (found := gemini.either_key(meta[1], name)) else 0
                  for name in ("promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount",
                               "thoughtsTokenCount")}
        usage = ReplyUsage(input_tokens=counts["promptTokenCount"],
                           cached_tokens=counts["cachedContentTokenCount"],
                           output_tokens=counts["candidatesTokenCount"] + counts["thoughtsTokenCount"],
                           model=model)
    return _with_model(events, model), stop, usage


def _gemini_events(body: dict[str, Any], content: dict[str, Any], path: JsonPath) -> list[AnyEvent]:
    """The content's events, its calls without an ``id`` named after the response:
    ``gemini-<responseId>-<part>``. Why: read alone, every response is content 0, and every
    response's first call was ``gemini-0-0``: the second response's call took the first one's id
    (refused as a reused id, or answered as the first). The ``responseId`` the API returns is
    unique per response and the same on every read of it (the REST JSON, the SDK object, its
    stream); a response without one (a hand-made dict) is named by a digest of what it says
    (``gemini-r<16 hex>-<part>``): the same on a re-read, another for another response."""
    found = gemini.either_key(body, "responseId")
    named = found[1] if found and isinstance(found[1], str) and found[1] else None
    events = [_standard_signatures(e) for e in gemini.model_events(content, path, named or "0")]
    if named is None and any(isinstance(e, ModelResponse) and e.tool_calls for e in events):
        digest = hashlib.sha256(b"".join(canonical_json(e) for e in events)).hexdigest()[:16]
        events = [_standard_signatures(e)
                  for e in gemini.model_events(content, path, f"r{digest}")]
    return events


def _standard_signatures(event: AnyEvent) -> AnyEvent:
    """``event`` with its Gemini signatures in standard base64, as the REST API returns them.
    Why: the signature is bytes (google-genai's ``Part.thought_signature``), and the SDK's JSON
    dump spells it URL-safe (``-``, ``_``): the same bytes read from the REST JSON and from
    ``model_dump(mode="json")`` made two different logs. Re-spelling loses nothing."""
    if not isinstance(event, ModelResponse) or not isinstance(event.reasoning, GeminiReasoning):
        return event
    signatures = tuple(s.model_copy(update={"signature": _standard(s.signature)})
                       for s in event.reasoning.signatures)
    return event.model_copy(update={"reasoning": event.reasoning.model_copy(
        update={"signatures": signatures})})


def _standard(signature: str) -> str:
    if "-" not in signature and "_" not in signature:
        return signature
    try:
        raw = base64.b64decode(signature.translate(_URL_SAFE), validate=True)
    except ValueError:
        return signature  # not base64: the reasoning check refuses it
    return base64.b64encode(raw).decode("ascii")


_URL_SAFE = str.maketrans("-_", "+/")


_READERS: dict[str, Callable[[dict[str, Any]], Read]] = {
    "openai-chat": _chat,
    "openai-responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}
