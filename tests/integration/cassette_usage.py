"""Our token estimate of recorded requests against what their providers counted.

Why: the builder selects under ``window - reserve`` by its own estimate (tiktoken plus framing
prices), and a provider bills by its tokenizer. An estimate above the provider's count makes
every budget smaller than it need be; one below it lets a request overflow. pydantic-ai's
cassettes (``../shared/traces/pydantic-ai-cassettes``) hold real requests with the provider's
``usage`` in their responses: the ground truth to measure the estimate against. Shared by
``scripts/measure_estimates.py`` (the table) and ``test_estimates.py`` (the bounds).

Each request with a usage report is imported whole (its own body: the history it sent), folded
and built for its provider and model at a 1M window with every tool allowed, as
``test_cassettes`` does. Two ratios per request:

- ``raw``: the provider's count / our estimate. It compares two different requests: ours adds
  what the recorded one does not hold (each tool result in a ``<data>`` block, a declaration for
  a tool the history calls but the body never declared), so it is below 1 even for an exact
  estimate;
- ``adjusted``: (the provider's count + what ours adds) / our estimate, what ours adds being the
  tokens of our request's texts and tool declarations less the recorded request's, counted with
  the build's encoding (:func:`sent_tokens`): the provider's count of the request we would send,
  as near as can be known offline. Ids, opaque reasoning (Gemini's ``thoughtSignature``, OpenAI's
  ``encrypted_content``) and media are sent as recorded, so they are left out of the difference.

Left out (:func:`server_side`): requests whose usage counts work done on the provider's side
(Anthropic's server tools and compaction, OpenAI's tool search and stored conversations): their
count is of requests the body does not show.
"""

from __future__ import annotations

import importlib
import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from contextfold.domain.events import AnyEvent, ArtifactRef
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.importers import parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from contextfold.projections.tokens import get_counter
from contextfold.store.media import materialize
from tests.integration.test_cassettes import CASSETTES, GENEROUS_WINDOW, _record, provider_of

__all__ = ["Measured", "as_stored", "cookbook_tokens", "measure_all", "ratios", "recorded_requests",
           "sent_tokens", "server_side", "unloaded_tools", "usage_of"]

_IDS = frozenset({"id", "call_id", "tool_call_id", "tool_use_id"})
_OPAQUE = frozenset({"thoughtSignature", "signature", "encrypted_content", "data", "url", "file_data",
                     "image_url"})
_NOT_TEXT = frozenset({"model", "role", "type", "mimeType", "media_type", "detail", "status", "stream",
                       "cache_control", "tool_choice", "max_tokens", "max_completion_tokens",
                       "max_output_tokens", "maxOutputTokens"})


def usage_of(provider: str, response: Any) -> int | None:
    """The whole prompt's input tokens a response body reports (cached ones included), or None."""
    if not isinstance(response, dict):
        return None
    usage = response.get("usageMetadata" if provider == "gemini" else "usage")
    if not isinstance(usage, dict):
        return None
    if provider == "openai-chat":
        return usage.get("prompt_tokens")
    if provider == "openai-responses":
        return usage.get("input_tokens")
    if provider == "anthropic":
        return (usage.get("input_tokens") or 0) + (usage.get("cache_read_input_tokens") or 0) + (
            usage.get("cache_creation_input_tokens") or 0)
    return usage.get("promptTokenCount")


def server_side(provider: str, body: dict[str, Any], response: dict[str, Any]) -> str | None:
    """Why the provider's count is of more than ``body`` shows, or None."""
    if body.get("previous_response_id") or body.get("conversation"):
        return "the history is stored on the provider's side"
    if body.get("context_management"):
        return "the provider compacts the history"
    tools = body.get("tools") or []
    if provider == "anthropic":
        if any(isinstance(t, dict) and t.get("type") not in (None, "custom") for t in tools):
            return "Anthropic server tools"
        if (response.get("usage") or {}).get("server_tool_use"):
            return "Anthropic server tools"
    if provider == "openai-responses" and any(
            isinstance(t, dict) and t.get("type") not in (None, "function") for t in tools):
        return "OpenAI hosted tools"
    return None


def _texts(node: Any, key: str | None, out: list[str], tools: list[Any]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "tools" and isinstance(v, list):
                tools.extend(v)
            elif k not in _IDS and k not in _OPAQUE and k not in _NOT_TEXT:
                _texts(v, k, out, tools)
    elif isinstance(node, list):
        for v in node:
            _texts(v, key, out, tools)
    elif isinstance(node, str) and node:
        out.append(node)


_OPENAI = frozenset({"openai-chat", "openai-responses"})


def _stripped(value: Any) -> str:
    text = value if isinstance(value, str) else ""
    return text[:-1] if text.endswith(".") else text


def cookbook_tokens(tools: list[Any], count: Any) -> int:
    """The OpenAI cookbook's ``num_tokens_for_tools`` (gpt-4o's ``func_init`` 7) of a body's
    function declarations (Chat's ``{"function": ...}`` or Responses' flat ones): what OpenAI
    bills for them (``tool_pricing``: measured on these recordings), written out apart from the
    builder's pricing so the measurement does not grade the builder by its own formula."""
    total = 0
    for tool in tools:
        f = tool.get("function", tool) if isinstance(tool, dict) else {}
        if not isinstance(f, dict) or "name" not in f:
            continue
        total += 7 + count(f"{f['name']}:{_stripped(f.get('description'))}")
        props = (f.get("parameters") or {}).get("properties") or {}
        if props:
            total += 3
            for key, prop in props.items():
                prop = prop if isinstance(prop, dict) else {}
                total += 3 + count(f"{key}:{prop.get('type', '')}:{_stripped(prop.get('description'))}")
                if isinstance(prop.get("enum"), list):
                    total += -3 + sum(3 + count(str(v)) for v in prop["enum"])
    return total + 12 if total else 0


def unloaded_tools(body: dict[str, Any]) -> list[Any]:
    """The tools an Anthropic request body declares with ``defer_loading`` and that no
    ``tool_reference`` block of its messages names: Claude is not shown them (Anthropic's tool
    search documentation: a deferred tool is loaded when a reference to it is returned), so the
    provider's count holds none of them. Why: counted as JSON in the recorded body and in ours
    (which declares every tool in full), each was a declaration our request sends that the
    "added" tokens left out: Sonnet 4.5's request with one such tool and no call read 0.89 (0.96
    with the tool left out), and Sonnet 4.6's with two read its tool prompt at 426 tokens where its
    requests with calls read 503-514 (505 with them left out). A deferred tool the history calls
    without a reference is not loaded either: the step that adds its first call grew the count 18
    and 32 tokens more than a call of a loaded tool, far under its declaration (46-61 tokens)."""
    referenced: set[str] = set()
    _references(body.get("messages"), referenced)
    return [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("defer_loading")
            and t.get("name") not in referenced]


def _references(node: Any, out: set[str]) -> None:
    if isinstance(node, dict):
        if node.get("type") == "tool_reference" and isinstance(node.get("tool_name"), str):
            out.add(node["tool_name"])
        for v in node.values():
            _references(v, out)
    elif isinstance(node, list):
        for v in node:
            _references(v, out)


def sent_tokens(body: dict[str, Any], encoding: str, provider: str | None = None) -> int:
    """The tokens of a request body's texts and tool declarations (compact JSON; for OpenAI's
    APIs, :func:`cookbook_tokens`, what OpenAI bills), ids, opaque reasoning, media and request
    options aside: what differs between our request and the recorded one (module docstring).

    A declaration is one wherever the body holds it: the top-level ``tools`` or an item's (a
    Responses ``additional_tools`` item declares the tools a deferred capability loads; our
    request declares them at the top). Why: counted as bare texts in the recorded body and as
    JSON in ours, each such tool was ~30 tokens "added" that the recorded request also sent,
    and its requests read 8-15% under where they were 1-6% under.

    An Anthropic declaration with ``defer_loading`` that no ``tool_reference`` loads is left out
    (:func:`unloaded_tools`): Claude is not shown it, and ours declares it in full.

    Why the cookbook's count for OpenAI: a declaration our request adds (a tool the history calls
    that the recorded body did not declare) is billed by OpenAI as its rendering, 20-35 tokens
    under its JSON: counted as JSON, each such tool was "added" at more than the provider bills,
    and its request read that much further under."""
    count = get_counter(encoding).count
    texts: list[str] = []
    tools: list[Any] = []
    _texts(body, None, texts, tools)
    if provider == "anthropic":
        unloaded = unloaded_tools(body)
        tools = [t for t in tools if t not in unloaded]
    if provider in _OPENAI:
        tool_tokens = cookbook_tokens(tools, count)
    else:
        tool_tokens = count(json.dumps(tools, separators=(",", ":"), ensure_ascii=False)) if tools else 0
    return sum(map(count, texts)) + tool_tokens


@dataclass(frozen=True)
class Measured:
    cassette: str
    index: int
    provider: str
    model: str
    observed: int
    estimate: int
    added: int
    """Our request's ``sent_tokens`` less the recorded one's."""
    manifest: ContextManifest
    excluded: str | None
    body: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The recorded request body."""
    ours: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """Our request body for the same history."""

    @property
    def raw(self) -> float:
        return self.observed / self.estimate

    @property
    def adjusted(self) -> float:
        return (self.observed + self.added) / self.estimate


def recorded_requests(root: Path = CASSETTES) -> Iterator[tuple[str, int, str, dict[str, Any], Any, str]]:
    yaml = importlib.import_module("yaml")  # pyyaml ships no type stubs
    for path in sorted(root.rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for n, it in enumerate(doc["interactions"]):
            req = it["request"]
            provider = provider_of(req["uri"])
            if req["method"] == "POST" and provider and isinstance(req.get("parsed_body"), dict):
                yield (str(path.relative_to(root)), n, provider, req["parsed_body"],
                       it["response"].get("parsed_body"), req["uri"])


def _blob(blobs: dict[str, bytes], ref: ArtifactRef) -> bytes:
    return blobs[ref.hash]


def as_stored(events: list[AnyEvent]) -> tuple[list[AnyEvent], dict[str, bytes]]:
    """``events`` as a store appends them (``store.media.materialize``): inline media moved into
    artifacts, audio and video with the playing time their bytes tell (``media_duration``), which
    Gemini bills them by. Why: folded as parsed, a recorded request's 2.5-second MP3 was priced at
    the longest its 50,889 bytes can play (1,629 tokens at 8 kbps) where Gemini billed 80; a user who
    imports the request into a store gets the duration. (The blobs, by hash, for ``load_bytes``.)"""
    blobs: dict[str, bytes] = {}
    out = []
    for event in events:
        stored, written = materialize(event)
        blobs.update((digest, data) for digest, _, _, data in written)
        out.append(stored)
    return out, blobs


def measure_all(root: Path = CASSETTES) -> list[Measured]:
    """Every recorded request with a usage report that imports (a continuation's body holds
    calls answered in a history it does not carry: not importable, and left out anyway)."""
    out = []
    for cassette, n, provider, body, response, uri in recorded_requests(root):
        observed = usage_of(provider, response)
        if not observed:
            continue
        model = body.get("model") or uri.split("models/")[-1].split(":")[0]
        try:
            events = parse(json.dumps(body).encode(), format=provider, source=f"{cassette}#{n}")
        except Exception:  # a continuation: see the docstring
            continue
        stored, blobs = as_stored(events)
        state = fold(_record("cassette", stored))
        config = BuildConfig(provider=provider, model=model, window=GENEROUS_WINDOW, reserve=8_000,
                             max_tools=1_000)
        result = build_context(state, config, render=lambda c, p, m: render(c, p, max_tokens=m),
                               load_bytes=partial(_blob, blobs))
        manifest = result.manifest
        ours = result.request
        added = (sent_tokens(ours, manifest.encoding, provider)
                 - sent_tokens(body, manifest.encoding, provider))
        out.append(Measured(cassette, n, provider, model, observed, manifest.selected_tokens, added,
                            manifest, server_side(provider, body, response), body, ours))
    return out


def ratios(values: list[float]) -> tuple[float, float, float]:
    """(median, p10, p90) of ``values`` (``statistics.quantiles``, inclusive)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return statistics.median(values), deciles[0], deciles[-1]
