"""Google Gemini ``contents`` -> events.

Accepted shapes: a ``generateContent`` body ``{"systemInstruction": ...,
"contents": [...]}`` (``model`` kept), a bare array of contents, or JSONL
with one content per line. Both the REST spelling (``functionCall``,
``inlineData``, ``systemInstruction``) and the Python SDK's snake_case
(``function_call``, ``inline_data``, ``system_instruction``) are read.

Mapping:

- the body's ``tools[].functionDeclarations`` -> one :class:`ToolsRegistered` right after
  :class:`RunStarted`, a ``parameters`` Schema as the JSON Schema it stands for; Google's own
  tools (search, code execution) are not registered (see :mod:`._tools`).
- ``systemInstruction`` -> :class:`PolicySet`.
- ``model`` content -> one :class:`ModelResponse`: text parts (thought parts
  dropped) and ``functionCall`` parts as tool calls. ``executableCode`` /
  ``codeExecutionResult`` are kept as fenced text. Every ``thoughtSignature``
  (on a call, text, thought or bare part) is kept verbatim as the response's
  :class:`GeminiReasoning`, with the call it rode on: Gemini wants it back on
  the same part (Gemini 3 rejects a call of the current turn without it).
- ``user`` (or ``function``/``tool``) content: ``functionResponse`` parts ->
  :class:`ToolResult` (the ``response`` object as compact JSON, except a lone
  ``output`` or ``error`` string, which is the text itself; ``is_error``
  when it holds only an ``error`` key; its ``parts``' images and files as
  blocks); other parts -> :class:`UserInput`
  per run of consecutive non-response parts.

Ids: older payloads carry no ``id`` on function calls. We synthesize
``gemini-<C>-<P>`` (C = index of the content, P = index of the part):
deterministic for the same history and unique within it. A
``functionResponse`` without an id answers the oldest open call with the
same ``name`` -- Gemini answers calls in order.
"""

from __future__ import annotations

from typing import Any

from contextfold.domain.event_values import media_type_key
from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    GeminiReasoning,
    GeminiSignature,
    ModelResponse,
    PolicySet,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserInput,
)
from contextfold.domain.text_breaks import joined_text
from contextfold.importers._common import (
    RunBuilder,
    build,
    get_list,
    get_str,
    media_block,
    require_obj,
    spelled_json,
)
from contextfold.importers._json import Bad, Doc, JsonPath
from contextfold.importers._tools import gemini_tools

__all__ = ["either_key", "model_events", "parse_contents", "parse_doc"]


def either_key(d: dict[str, Any], camel: str) -> tuple[str, Any] | None:
    """Look a key up in REST camelCase or SDK snake_case; returns (key, value)."""
    if camel in d:
        return camel, d[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    if snake in d:
        return snake, d[snake]
    return None


_URL_SAFE = str.maketrans("-_", "+/")


def _standard_base64(data: str) -> str:
    """Gemini's ``inlineData.data`` as standard, padded base64. It is protobuf ``bytes``,
    whose JSON form may be URL-safe and unpadded (the google-genai SDK sends
    ``urlsafe_b64encode``): kept as is, the store refused the run's data: URL."""
    data = data.translate(_URL_SAFE)
    return data if "=" in data else data + "=" * (-len(data) % 4)


def _media(part: dict[str, Any], path: JsonPath) -> ContentBlock | None:
    found = either_key(part, "inlineData")
    if found is not None:
        key, raw = found
        blob = require_obj(raw, (*path, key), f"{key!r} to be an object")
        mt = either_key(blob, "mimeType")
        mime = mt[1] if mt and isinstance(mt[1], str) else "application/octet-stream"
        kind = "image" if media_type_key(mime).startswith("image/") else "document"
        return media_block(kind, (*path, key), data=_standard_base64(get_str(blob, "data", (*path, key))),
                           media_type=mime)
    found = either_key(part, "fileData")
    if found is not None:
        key, raw = found
        fd = require_obj(raw, (*path, key), f"{key!r} to be an object")
        uri = either_key(fd, "fileUri")
        mt = either_key(fd, "mimeType")
        if uri is None or not isinstance(uri[1], str):
            raise Bad((*path, key), "missing field 'fileUri'")
        file_mime: str | None = mt[1] if mt and isinstance(mt[1], str) else None
        kind = "image" if file_mime and media_type_key(file_mime).startswith("image/") else "document"
        return media_block(kind, (*path, key), url=uri[1], media_type=file_mime)
    return None


def _response_media(resp: dict[str, Any], path: JsonPath) -> tuple[ContentBlock, ...]:
    """The images and files of a ``functionResponse``'s ``parts`` (a multimodal tool result):
    they were dropped without a word, the import reporting success."""
    if "parts" not in resp:
        return ()
    blocks = []
    for i, raw in enumerate(get_list(resp, "parts", path)):
        pp = (*path, "parts", i)
        block = _media(require_obj(raw, pp, "a function response part object"), pp)
        if block is None:
            raise Bad(pp, f"unsupported function response part with keys {sorted(raw)}")
        blocks.append(block)
    return tuple(blocks)


def _code_text(part: dict[str, Any]) -> str | None:
    code = either_key(part, "executableCode")
    if code is not None and isinstance(code[1], dict):
        lang = str(code[1].get("language", "")).lower()
        return f"```{lang}\n{code[1].get('code', '')}\n```"
    res = either_key(part, "codeExecutionResult")
    if res is not None and isinstance(res[1], dict):
        return f"```output\n{res[1].get('output', '')}\n```"
    return None


def _model(content: dict[str, Any], ci: int | str, path: JsonPath, run: RunBuilder) -> None:
    texts: list[tuple[int, str]] = []  # each with the number of calls before it
    calls: list[ToolCall] = []
    signatures: list[GeminiSignature] = []
    for pi, raw in enumerate(get_list(content, "parts", path)):
        pp = (*path, "parts", pi)
        part = require_obj(raw, pp, "a part object")
        fc = either_key(part, "functionCall")
        signed = either_key(part, "thoughtSignature")
        if signed is not None:
            key, signature = signed
            if not isinstance(signature, str):
                raise Bad((*pp, key), f"expected {key!r} to be a string")
            signatures.append(build(GeminiSignature, (*pp, key), signature=signature,
                                    call=len(calls) if fc is not None else None))
        if fc is not None:
            key, raw_call = fc
            call = require_obj(raw_call, (*pp, key), f"{key!r} to be an object")
            cid = call.get("id") or f"gemini-{ci}-{pi}"
            args = call.get("args", {})
            calls.append(build(ToolCall, pp, call_id=cid, name=get_str(call, "name", (*pp, key)),
                               arguments=args if isinstance(args, str) else spelled_json(args)))
        elif "text" in part:
            if part.get("thought") is True:
                continue
            texts.append((len(calls), get_str(part, "text", pp)))
        elif (code := _code_text(part)) is not None:
            texts.append((len(calls), code))
        elif signed is not None:
            continue  # a bare signature part: its signature is kept above
        else:
            raise Bad(pp, f"unsupported model part with keys {sorted(part)}")
    extra: dict[str, Any] = (
        {"reasoning": build(GeminiReasoning, path, signatures=tuple(signatures))} if signatures else {})
    text, breaks = joined_text(texts, "", 0)
    if breaks:
        extra["text_breaks"] = breaks
    run.add(build(ModelResponse, path, text=text, tool_calls=tuple(calls), **extra), path)


def model_events(content: dict[str, Any], path: JsonPath, response: str = "0") -> list[AnyEvent]:
    """The events of ONE ``model`` content read on its own (a ``generateContent`` candidate's):
    its :class:`ModelResponse`, as :func:`parse_contents` reads a content of a history, a call
    without an ``id`` named ``gemini-<response>-<P>``. Why ``response``: a history numbers its
    contents, but every live response is content 0 of its own, and two responses' calls were
    both ``gemini-0-1`` (the second's result answered the first's call): the caller names the
    response (its ``responseId``)."""
    run = RunBuilder()
    _model(content, response, path, run)
    return run.events[1:]


def _user(content: dict[str, Any], path: JsonPath, run: RunBuilder) -> None:
    pending: list[ContentBlock] = []
    pending_path = path

    def flush() -> None:
        if pending:
            run.add(build(UserInput, pending_path, content=tuple(pending)), pending_path)
            pending.clear()

    for pi, raw in enumerate(get_list(content, "parts", path)):
        pp = (*path, "parts", pi)
        part = require_obj(raw, pp, "a part object")
        fr = either_key(part, "functionResponse")
        if fr is not None:
            flush()
            key, raw_resp = fr
            resp = require_obj(raw_resp, (*pp, key), f"{key!r} to be an object")
            name = get_str(resp, "name", (*pp, key))
            cid = resp.get("id")
            if cid is None:
                cid = run.oldest_open(name)
                if cid is None:
                    raise Bad(pp, f"functionResponse for {name!r} answers no open functionCall")
            body = resp.get("response", {})
            is_error = isinstance(body, dict) and set(body) == {"error"}
            # {"output": text} / {"error": text} are Google's documented keys (and what
            # the renderer emits): keep the text itself, or a re-render would nest
            # JSON in JSON with every newline escaped.
            single = next(iter(body.values())) if isinstance(body, dict) and len(body) == 1 else None
            text = (single if isinstance(single, str) and set(body) <= {"output", "error"}
                    else spelled_json(body))
            run.add(build(ToolResult, pp, call_id=cid, content=text, is_error=is_error,
                          blocks=_response_media(resp, (*pp, key))), pp)
            continue
        if not pending:
            pending_path = pp
        if "text" in part:
            pending.append(TextBlock(text=get_str(part, "text", pp)))
        elif (block := _media(part, pp)) is not None:
            pending.append(block)
        elif (code := _code_text(part)) is not None:
            pending.append(TextBlock(text=code))
        else:
            raise Bad(pp, f"unsupported user part with keys {sorted(part)}")
    flush()


def _system_text(raw: Any, path: JsonPath) -> str:
    if isinstance(raw, str):
        return raw
    sys_ = require_obj(raw, path, "'systemInstruction' to be an object")
    texts = []
    for pi, part in enumerate(get_list(sys_, "parts", path)):
        texts.append(get_str(require_obj(part, (*path, "parts", pi)), "text", (*path, "parts", pi)))
    return "\n".join(texts)


def parse_contents(contents: list[Any], path: JsonPath, *, system: tuple[str, Any] | None = None,
                   model: str | None = None, tools: list[ToolSpec] | None = None) -> list[AnyEvent]:
    run = RunBuilder(model=model, tools=tools or ())
    if system is not None:
        key, raw = system
        run.add(build(PolicySet, (key,), text=_system_text(raw, (key,))), (key,))
    for ci, raw in enumerate(contents):
        p = (*path, ci)
        content = require_obj(raw, p, "a content object")
        role = content.get("role", "user")
        match role:
            case "model":
                _model(content, ci, p, run)
            case "user" | "function" | "tool":
                _user(content, p, run)
            case _:
                raise Bad((*p, "role"), f"unknown role {role!r} (expected 'user' or 'model')")
    return run.events


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    value = doc.value
    if isinstance(value, dict) and not doc.jsonl and "contents" in value:
        model = value.get("model") if isinstance(value.get("model"), str) else None
        return [("", parse_contents(get_list(value, "contents", ()), ("contents",),
                                    system=either_key(value, "systemInstruction"), model=model,
                                    tools=gemini_tools(value, ())))]
    if isinstance(value, dict) and not doc.jsonl:
        return [("", parse_contents([value], ()))]
    if not isinstance(value, list):
        raise Bad((), "expected an array of contents or an object with 'contents'")
    return [("", parse_contents(value, ()))]
