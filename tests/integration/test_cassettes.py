"""Ground truth from real traffic: rebuild recorded pydantic-ai requests and compare.

``../shared/traces/pydantic-ai-cassettes`` holds VCR recordings of agent runs
against the live OpenAI (chat + responses), Anthropic and Google APIs. Every
recorded request was accepted by its provider, so it is the reference for
"what a correct request N looks like". For every model request N of a
conversation (one that has something before it), we import the conversation
up to N, fold it, build with a generous budget (1M window) for N's provider
and compare our rendered request with the recorded one.

How the conversation up to N is imported (the ``mode`` column):

- ``chain`` (the strong form, used whenever possible): the history of request
  N-1's body, plus request N-1's *recorded response* (the model's reply, parsed
  from the response body), plus the new user/tool items that request N
  appends after the last model item. Nothing of N's echo of the reply is used,
  so the reply's tool calls, ids and arguments in our request come from the
  response alone. Used when N-1 went to the same provider, N's history extends
  N-1's, and the response is a JSON body.
- ``body``: request N's own history (when N-1 went to another provider - a
  cross-provider hand-off - or N-1's response was streamed as SSE).

What must match (:func:`compare`), in order, between the recorded and the
rendered request: every tool call (id, name, parsed arguments) and every tool
result (id), as one sequence; a server-side tool call/result (Anthropic
``server_tool_use`` / ``*_tool_result``) must stay server-side. Text may differ
only by the documented renderings: tool output sits in a
``<data ...>`` block and is neutralised (so the recorded text, neutralised,
must be contained in our result); recorded system, user and assistant texts
must each appear, in order, in the rendered texts of the same authority.
Provider-specific extras of the recorded request are ignored: Anthropic
``thinking`` blocks, OpenAI ``reasoning`` items, Gemini thought parts and
``thoughtSignature`` (the reasoning is imported and sent back verbatim: checked
against these cassettes by ``test_reasoning_traces.py``), ``cache_control``, and
request options (``stream``, ``tool_choice``, ``include``, ``container``...). Tool *declarations* are
compared by ``test_cassette_tools.py`` (the importers register a body's client function tools).

Measured (``.venv/bin/python scripts/check_cassettes.py``): 34 multi-request
cassettes (of 35; one holds a single request), 139 model requests; 48 are the
first request of a conversation (nothing earlier to import), 91 have a
history. **69 of the 91 are reproduced**, over all four providers. Not
reproduced, and why (:data:`CATEGORIES`, counts asserted below):

- 0 (9 before) - Anthropic server-side tools (``server_tool_use`` + ``*_tool_result``
  inside the assistant message: code execution, ``tool_search_tool_bm25``):
  the importer turned them into an ordinary call with a result, so the
  renderer emitted a client ``tool_use`` and moved the result into the next user
  turn. They are now kept verbatim in the turn (``ANTHROPIC_SERVER_BLOCKS``) and
  go back as they came.
- 11 - OpenAI ``tool_search_call``/``tool_search_output`` items (native
  server search, or pydantic-ai's client-executed replay of Anthropic's
  search): rendered as a ``function_call`` + ``function_call_output``.
- 6 - two assistant turns in a row (pydantic-ai injects an ``auto_load_*``
  ``search_tools`` call after the model's own call, then answers both in one
  user turn). The API merges the two assistant turns into one batch;
  contextfold answers each call right after it. Both are valid requests, but
  the order differs, so it is not counted.
- 5 - ``previous_response_id``/``conversation`` continuations: the recorded
  body holds only the new items, the history lives server-side; contextfold
  always renders the full history.

Chain mode is not available for Gemini calls without ids (Gemini returns none;
pydantic-ai assigns ``pyd_ai_*`` ids client-side), for background-mode
Responses (the reply is fetched later by a GET) and for streamed (SSE)
responses: those requests are compared in ``body`` mode.

Bug found and fixed by this test: the Gemini importer kept a lone
``{"error": text}`` function response as compact JSON, so re-rendering nested
JSON inside JSON and the recorded text no longer appeared (6 requests).
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contextfold.domain.events import AnyEvent, canonical_json
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import neutralise, render, validate_sdk_types
from tests.json_strings import strings

__all__ = ["CATEGORIES", "Case", "Outcome", "cases", "classify", "compare", "reproduce", "run_all"]

TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES",
                             Path(__file__).resolve().parents[2].parent / "shared" / "traces"))
CASSETTES = TRACES / "pydantic-ai-cassettes"
HISTORY_KEY = {"openai-chat": "messages", "openai-responses": "input", "anthropic": "messages",
               "gemini": "contents"}
GENEROUS_WINDOW = 1_000_000

pytestmark = [
    pytest.mark.traces,
    pytest.mark.skipif(not CASSETTES.is_dir(), reason=f"cassettes folder {CASSETTES} is absent"),
]


def provider_of(uri: str) -> str | None:
    """The request format of a recorded URI, None for non-model endpoints (files, downloads)."""
    if "/chat/completions" in uri:
        return "openai-chat"
    if uri.split("?")[0].rstrip("/").endswith("/v1/responses"):
        return "openai-responses"
    if "api.anthropic.com/v1/messages" in uri:
        return "anthropic"
    if ":generateContent" in uri:
        return "gemini"
    return None


# ------------------------------------------------------------------ cases


@dataclass(frozen=True)
class Post:
    index: int
    provider: str
    body: dict[str, Any]
    response: Any


@dataclass(frozen=True)
class Case:
    cassette: str
    index: int
    """Position of request N among the cassette's interactions (0-based)."""
    provider: str
    body: dict[str, Any]
    previous: Post | None


def _posts(doc: dict[str, Any]) -> list[Post]:
    out = []
    for n, it in enumerate(doc["interactions"]):
        req = it["request"]
        provider = provider_of(req["uri"])
        if req["method"] == "POST" and provider and isinstance(req.get("parsed_body"), dict):
            out.append(Post(n, provider, req["parsed_body"], it["response"].get("parsed_body")))
    return out


def cases(root: Path = CASSETTES) -> Iterator[Case]:
    """Every model request of every multi-request cassette, in file and request order."""
    yaml = importlib.import_module("yaml")  # pyyaml ships no type stubs
    for path in sorted(root.rglob("*.yaml")):
        posts = _posts(yaml.safe_load(path.read_text(encoding="utf-8")))
        if len(posts) < 2:
            continue
        for k, post in enumerate(posts):
            yield Case(str(path.relative_to(root)), post.index, post.provider, post.body,
                       posts[k - 1] if k else None)


# ------------------------------------------------------------------ normalised view of a body


@dataclass
class View:
    """A body as the things that must match: protocol items and texts by authority."""

    protocol: list[tuple[Any, ...]] = field(default_factory=list)
    """("call"|"server_call", id, name, args) and ("result"|"server_result", id)."""
    result_texts: list[list[str]] = field(default_factory=list)
    """Text chunks of each result, aligned with the result items of ``protocol``."""
    texts: dict[str, list[str]] = field(default_factory=lambda: {"system": [], "user": [],
                                                                 "assistant": []})


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw
    return raw


def _text_parts(content: Any, kinds: tuple[str, ...]) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    out = []
    for part in content or []:
        if isinstance(part, dict) and part.get("type") in kinds and part.get("text"):
            out.append(part["text"])
    return out


def _result(view: View, kind: str, call_id: Any, chunks: list[str]) -> None:
    view.protocol.append((kind, call_id))
    view.result_texts.append([c for c in chunks if c])


def _view_chat(body: dict[str, Any]) -> View:
    v = View()
    for m in body["messages"]:
        role = m["role"]
        if role in ("system", "developer"):
            v.texts["system"] += _text_parts(m.get("content"), ("text",))
        elif role == "user":
            v.texts["user"] += _text_parts(m.get("content"), ("text",))
        elif role == "assistant":
            v.texts["assistant"] += _text_parts(m.get("content"), ("text",))
            for c in m.get("tool_calls") or []:
                v.protocol.append(("call", c["id"], c["function"]["name"],
                                   _args(c["function"]["arguments"])))
        elif role == "tool":
            _result(v, "result", m["tool_call_id"], _text_parts(m.get("content"), ("text",)))
    return v


_RESPONSES_CALLS = {"function_call": "call", "custom_tool_call": "custom_call",
                    "tool_search_call": "tool_search_call"}
_RESPONSES_OUTPUTS = {"function_call_output": "result", "custom_tool_call_output": "custom_result",
                      "tool_search_output": "tool_search_result"}


def _view_responses(body: dict[str, Any]) -> View:
    v = View()
    if body.get("instructions"):
        v.texts["system"].append(body["instructions"])
    items = body["input"] if isinstance(body["input"], list) else [
        {"role": "user", "content": body["input"]}]
    open_search: list[Any] = []
    for it in items:
        kind = it.get("type", "message")
        if kind == "message":
            role = {"developer": "system"}.get(it["role"], it["role"])
            v.texts[role] += _text_parts(it.get("content"), ("input_text", "output_text", "text"))
        elif kind in _RESPONSES_CALLS:
            call_id = it.get("call_id") or it.get("id")
            name = it.get("name", kind.removesuffix("_call"))
            v.protocol.append((_RESPONSES_CALLS[kind], call_id, name,
                               _args(it.get("arguments", it.get("input")))))
            if kind == "tool_search_call":
                open_search.append(call_id)
        elif kind in _RESPONSES_OUTPUTS:
            call_id = it.get("call_id") or (open_search.pop(0) if open_search else None)
            out = it.get("output", it.get("tools"))
            chunks = ([out] if isinstance(out, str) else
                      _text_parts(out, ("input_text", "output_text", "text"))
                      if isinstance(out, list) and kind == "function_call_output"
                      else [canonical_json_text(out)])
            _result(v, _RESPONSES_OUTPUTS[kind], call_id, chunks)
        # reasoning (encrypted provider reasoning) is a provider-specific extra
    return v


def canonical_json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _view_anthropic(body: dict[str, Any]) -> View:
    v = View()
    system = body.get("system")
    v.texts["system"] += _text_parts(system, ("text",))
    for m in body["messages"]:
        role = m["role"]
        content = m["content"]
        if isinstance(content, str):
            v.texts[role].append(content)
            continue
        for b in content:
            t = b["type"]
            if t == "text":
                v.texts[role].append(b["text"])
            elif t == "tool_use":
                v.protocol.append(("call", b["id"], b["name"], b["input"]))
            elif t in ("server_tool_use", "mcp_tool_use"):
                v.protocol.append(("server_call", b["id"], b["name"], b["input"]))
            elif t == "tool_result":
                inner = b.get("content")
                _result(v, "result", b["tool_use_id"], _text_parts(inner, ("text",)))
            elif t.endswith("_tool_result"):
                _result(v, "server_result", b["tool_use_id"], [])
            elif t == "compaction":  # "the API automatically drops all message blocks prior to
                # the compaction block" (build-with-claude/compaction): the model saw its summary
                # (the importer's HistoryCompacted over them) and what follows, not what precedes
                for seen in (v.protocol, v.result_texts, v.texts["user"], v.texts["assistant"]):
                    seen.clear()
            # thinking / redacted_thinking / images / documents: extras or media, not compared
    return v


def _view_gemini(body: dict[str, Any]) -> View:
    v = View()
    for p in (body.get("systemInstruction") or {}).get("parts", []):
        if p.get("text"):
            v.texts["system"].append(p["text"])
    for c in body["contents"]:
        role = "assistant" if c.get("role") == "model" else "user"
        for p in c["parts"]:
            if "functionCall" in p:
                fc = p["functionCall"]
                v.protocol.append(("call", fc.get("id"), fc["name"], fc.get("args", {})))
            elif "functionResponse" in p:
                fr = p["functionResponse"]
                _result(v, "result", fr.get("id"), strings(fr.get("response")))
            elif p.get("text") and not p.get("thought"):
                v.texts[role].append(p["text"])
    return v


def view(provider: str, body: dict[str, Any]) -> View:
    match provider:
        case "openai-chat":
            return _view_chat(body)
        case "openai-responses":
            return _view_responses(body)
        case "anthropic":
            return _view_anthropic(body)
        case "gemini":
            return _view_gemini(body)
    raise ValueError(provider)


def _contained(recorded: list[str], rendered: list[str]) -> str | None:
    """None when each recorded text is inside a rendered text, in order; else the first miss."""
    j = 0
    for text in recorded:
        needle = text.strip()
        while j < len(rendered) and needle not in rendered[j]:
            j += 1
        if j == len(rendered):
            return text
        j += 1
    return None


def compare(provider: str, recorded: dict[str, Any], rendered: dict[str, Any]) -> str | None:
    """None when ``rendered`` reproduces ``recorded``; else the first difference."""
    want, got = view(provider, recorded), view(provider, rendered)
    for i, (a, b) in enumerate(zip(want.protocol, got.protocol, strict=False)):
        if a != b:
            return f"protocol item {i}: recorded {a!r}, rendered {b!r}"
    if len(want.protocol) != len(got.protocol):
        extra = (want.protocol[len(got.protocol):] or got.protocol[len(want.protocol):])[0]
        return (f"{len(want.protocol)} recorded protocol items, {len(got.protocol)} rendered "
                f"(first unmatched {extra!r})")
    for item, chunks, ours in zip((p for p in want.protocol if "result" in p[0]),
                                  want.result_texts, got.result_texts, strict=True):
        joined = "\n".join(ours)
        for chunk in chunks:
            if neutralise(chunk).strip() not in joined:
                return f"result {item[1]!r}: recorded text {chunk[:60]!r} is not in the rendered result"
    for role in ("system", "user", "assistant"):
        missing = _contained(want.texts[role], got.texts[role])
        if missing is not None:
            return f"{role} text {missing[:60]!r} is not rendered"
    return None


# ------------------------------------------------------------------ reproduce one request


@dataclass(frozen=True)
class Outcome:
    case: Case
    mode: str
    """chain | body | n/a."""
    reproduced: bool | None
    """None: not applicable (first request of a conversation)."""
    reason: str


def _reply(provider: str, response: Any) -> list[dict[str, Any]] | None:
    """The model's reply in the provider's history-item shape, from a JSON response body."""
    if not isinstance(response, dict):
        return None
    match provider:
        case "openai-chat":
            msg = dict(response["choices"][0]["message"])
            return [{k: v for k, v in msg.items() if v is not None and k in
                     ("role", "content", "tool_calls", "refusal")}]
        case "openai-responses":
            if response.get("status") != "completed":
                return None  # background mode: the reply was fetched later, by a GET
            return [dict(it) for it in response.get("output") or []]
        case "anthropic":
            return [{"role": "assistant", "content": response["content"]}]
        case "gemini":
            content = response["candidates"][0]["content"]
            if any("functionCall" in p and not p["functionCall"].get("id")
                   for p in content.get("parts", [])):
                return None  # Gemini returns calls without ids: the client assigns them
            return [content]
    return None


def _shape(item: dict[str, Any]) -> tuple[Any, Any]:
    """What an echoed reply item must look like: its item type and role."""
    return item.get("type", "message"), item.get("role")


def _history(case: Case) -> tuple[str, dict[str, Any]]:
    key = HISTORY_KEY[case.provider]
    prev = case.previous
    hist = case.body[key]
    if prev is not None and prev.provider == case.provider and isinstance(hist, list):
        before = prev.body.get(key)
        reply = _reply(case.provider, prev.response)
        if isinstance(before, list) and hist[:len(before)] == before and reply is not None:
            # skip N's echo of the reply; everything after it is new (tool results,
            # user input, and turns the agent itself injected)
            tail = len(before) + len(reply)
            echo = hist[len(before):tail]
            if [_shape(it) for it in echo] == [_shape(it) for it in reply] and tail < len(hist):
                body = dict(prev.body)
                body[key] = [*before, *reply, *hist[tail:]]
                return "chain", body
    return "body", case.body


def _record(run_id: str, events: list[AnyEvent]) -> list[RecordedEvent]:
    out, prev = [], GENESIS_HASH
    for pos, event in enumerate(events, start=1):
        prev = chain_hash(run_id, pos, prev, canonical_json(event))
        out.append(RecordedEvent(run_id, pos, event, prev))
    return out


def rendered_request(case: Case, body: dict[str, Any]) -> dict[str, Any]:
    """Import ``body``, fold, and build request N for the case's provider (validated)."""
    events = parse(json.dumps(body).encode(), format=case.provider,
                   source=f"{case.cassette}#{case.index}")
    state = fold(_record("cassette", events))
    config = BuildConfig(provider=case.provider, window=GENEROUS_WINDOW, reserve=8_000)
    result = build_context(state, config,
                           render=lambda c, p, m: render(c, p, max_tokens=m, validate=True))
    if not validate_sdk_types(case.provider, result.request):
        raise AssertionError(f"SDK types for {case.provider} did not run")
    return result.request


def reproduce(case: Case) -> Outcome:
    body = case.body
    hist = body.get(HISTORY_KEY[case.provider])
    if body.get("previous_response_id") or body.get("conversation"):
        key = "previous_response_id" if body.get("previous_response_id") else "conversation"
        return Outcome(case, "n/a", False, f"continuation: the request names a {key}")
    if not isinstance(hist, list) or len(hist) < 2:
        return Outcome(case, "n/a", None, "first request of a conversation: nothing earlier to import")
    mode, source = _history(case)
    try:
        rendered = rendered_request(case, source)
    except Exception as exc:  # reported in the table, asserted by the tests
        return Outcome(case, mode, False, f"{type(exc).__name__}: {exc}")
    diff = compare(case.provider, body, rendered)
    return Outcome(case, mode, diff is None, diff or "")


def run_all(root: Path = CASSETTES) -> list[Outcome]:
    return [reproduce(c) for c in cases(root)]


# ------------------------------------------------------------------ tests

# Why a request is not reproduced, by the first difference the comparison reports.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("('server_call'", "Anthropic server-side tool (server_tool_use) is imported as a client "
     "call and rendered as a client tool_use"),
    ("('tool_search_call'", "OpenAI tool_search_call/tool_search_output items are imported as "
     "a client call and rendered as a function_call"),
    ("auto_load_", "two assistant turns in a row (a call the client injected): the API merges "
     "them into one batch; contextfold answers each call before the next"),
    ("continuation:", "previous_response_id/conversation continuation: the recorded body holds "
     "only the new items; contextfold renders the full history"),
)


def classify(reason: str) -> str:
    """The documented category of a non-reproduction, or 'unexplained'."""
    return next((label for key, label in CATEGORIES if key in reason), "unexplained")


# The measured state (see the module docstring): a request that starts or stops
# reproducing changes these numbers - update them and the docstring together.
EXPECTED_APPLICABLE = 91
EXPECTED_REPRODUCED = 69
EXPECTED_BY_CATEGORY = {CATEGORIES[1][1]: 11, CATEGORIES[2][1]: 6, CATEGORIES[3][1]: 5}


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    pytest.importorskip("yaml", reason="pyyaml is needed to read the cassettes")
    return run_all()


def test_cassettes_cover_every_provider_and_both_modes(outcomes: list[Outcome]) -> None:
    applicable = [o for o in outcomes if o.reproduced is not None]
    assert {o.case.provider for o in applicable} == set(HISTORY_KEY)
    assert {o.mode for o in applicable if o.reproduced} == {"chain", "body"}
    # the strong form is the rule, not the exception
    assert sum(o.mode == "chain" for o in applicable) > len(applicable) // 2


def test_recorded_requests_are_reproduced(outcomes: list[Outcome]) -> None:
    applicable = [o for o in outcomes if o.reproduced is not None]
    failed = [o for o in applicable if not o.reproduced]
    report = "\n".join(f"{o.case.cassette}#{o.case.index} [{o.mode}]: {o.reason}" for o in failed)
    assert [o for o in failed if classify(o.reason) == "unexplained"] == [], report
    assert len(applicable) == EXPECTED_APPLICABLE
    assert len(applicable) - len(failed) == EXPECTED_REPRODUCED, report
    assert Counter(classify(o.reason) for o in failed) == EXPECTED_BY_CATEGORY, report


def test_comparison_has_teeth(outcomes: list[Outcome]) -> None:
    """Swapping two call ids, or dropping a result's text, is caught."""
    def client_calls(case: Case) -> dict[str, Any] | None:
        rendered = rendered_request(case, _history(case)[1])
        return rendered if '"type": "tool_use"' in json.dumps(rendered) else None

    case, rendered = next((o.case, r) for o in outcomes if o.reproduced and o.mode == "chain"
                          and o.case.provider == "anthropic" and (r := client_calls(o.case)) is not None)
    assert compare(case.provider, case.body, rendered) is None
    broken = json.loads(json.dumps(rendered))
    for msg in broken["messages"]:
        for block in msg["content"] if isinstance(msg["content"], list) else []:
            if block.get("type") == "tool_use":
                block["id"] = "toolu_forged"
    assert "protocol item" in (compare(case.provider, case.body, broken) or "")
    emptied = json.loads(json.dumps(rendered))
    for msg in emptied["messages"]:
        for block in msg["content"] if isinstance(msg["content"], list) else []:
            if block.get("type") == "tool_result":
                block["content"] = [{"type": "text", "text": "ok"}]
    assert "is not in the rendered result" in (compare(case.provider, case.body, emptied) or "")


def test_a_gemini_audio_document_is_named_not_sent_as_a_file_to_openai() -> None:
    """The ``direct-url-audio`` Gemini cassette hands the model an MP3 inline (Gemini takes
    audio). Rebuilt for OpenAI, it was a file part named "9" (an event position) carrying
    ``audio/mpeg``: Chat Completions takes PDF files only and Responses no audio file. Both now
    carry a note naming the document, its media type and ref; Gemini still gets the audio."""
    yaml = pytest.importorskip("yaml")
    path = next(CASSETTES.rglob("*direct-url-audio-google_gemini3*.yaml"))
    posts = _posts(yaml.safe_load(path.read_text(encoding="utf-8")))
    events = parse(json.dumps(posts[-1].body).encode(), format="gemini", source=path.name)
    state = fold(_record("cassette", events))
    for provider in ("openai-chat", "openai-responses", "gemini"):
        result = build_context(state, BuildConfig(provider=provider, window=GENEROUS_WINDOW, reserve=8_000),
                               render=lambda c, p, m: render(c, p, max_tokens=m, validate=True))
        assert validate_sdk_types(provider, result.request)
        last = result.request[HISTORY_KEY[provider]][-1]
        text = json.dumps(last)
        if provider == "gemini":
            assert '"mimeType": "audio/mpeg"' in text
            continue
        assert '"file"' not in text and "input_file" not in text and "data:audio" not in text
        assert "document (audio/mpeg)" in text and "not attached" in text
        assert re.search(r'source=\\"event://cassette/\d+\\"', text)
