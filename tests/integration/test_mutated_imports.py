"""Damaged histories: a key dropped, a value of the wrong type, a string cut short, an item
repeated. What an importer accepts must append and build; what it refuses must be refused as
ImportFormatError. Nothing may surface as a KeyError, TypeError or a half-written run.

Why: users import histories their runtimes wrote, and those drift from the formats' documents.
One sample per format is mutated by seed (the same seeds every run). A search of this kind over
the shared traces (4,000 mutations of tau-bench, SWE-agent, OpenHands and the samples below)
raised only typed errors: ImportFormatError at import, RenderError for tool names or schemas a
provider refuses, UnsupportedMediaError for image bytes of no known type.
"""

from __future__ import annotations

import copy
import json
import os
import random
from importlib.resources import files
from typing import Any

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import ContextfoldError, ImportFormatError
from contextfold.importers import detect_format, iter_runs
from tests.unit.test_importers import ANTHROPIC, CHAT, OPENHANDS

RESPONSES = {"model": "gpt-5", "instructions": "Be brief.", "input": [
    {"role": "user", "content": "refund?"},
    {"type": "function_call", "call_id": "call_a", "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_a", "output": "ok a"},
    {"role": "assistant", "content": "Done."}]}
GEMINI = {"systemInstruction": {"parts": [{"text": "Sys."}]}, "contents": [
    {"role": "user", "parts": [{"text": "weather in A"}]},
    {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "A"}}}]},
    {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"result": "sun"}}}]},
    {"role": "model", "parts": [{"text": "Sun."}]}]}
EVENTS = [json.loads(line) for line in
          files("contextfold.samples").joinpath("fix_invoice_rounding.jsonl").read_text().splitlines()]
SAMPLES: list[tuple[str, Any]] = [("openai-chat", {"messages": CHAT}), ("anthropic", ANTHROPIC),
                                  ("openhands", OPENHANDS), ("openai-responses", RESPONSES),
                                  ("gemini", GEMINI), ("events", EVENTS)]
ODD_VALUES: tuple[Any, ...] = (None, 0, -1, 1.5, "", "x", "é", [], {}, True, "{bad", [None], {"": None},
                               10**30)
SEEDS = int(os.environ.get("CONTEXTFOLD_MUTATIONS", "120"))
"""Mutations per format; ``CONTEXTFOLD_MUTATIONS=2000`` searches wider with the same code."""


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        found += _paths(value, (*path, key))
    return found


def _mutated(rng: random.Random, doc: Any) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(rng.choice((1, 1, 2, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key, op = path[-1], rng.random()
        if op < 0.2:
            del parent[key]
        elif op < 0.35 and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif op < 0.55 and isinstance(parent[key], str):
            parent[key] = parent[key][:rng.randrange(len(parent[key]) + 1)]
        else:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))  # never one list in two places
    return doc


def _bytes(fmt: str, doc: Any) -> bytes:
    if fmt == "events" and isinstance(doc, list):
        return "\n".join(json.dumps(line) for line in doc).encode()
    return json.dumps(doc).encode()


@pytest.mark.parametrize(("fmt", "sample"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_damaged_histories_import_and_build_or_are_refused_as_typed_errors(
        sqlite_url: str, fmt: str, sample: Any) -> None:
    accepted = refused = 0
    with open_store(sqlite_url) as store:
        for seed in range(SEEDS):
            data = _bytes(fmt, _mutated(random.Random(seed), sample))
            try:
                runs = list(iter_runs(data, format=detect_format(data, source="damaged"), source="damaged"))
            except ImportFormatError:
                refused += 1
                continue
            accepted += 1
            for suffix, events in runs:
                run = store.run(f"{fmt}-{seed}-{suffix}")
                try:
                    run.append(events)
                except ContextfoldError:  # refused whole (an image of no known type): nothing written
                    assert run.version == 0
                    continue
                for provider in ("neutral", "openai-chat", "anthropic", "gemini", "openai-responses"):
                    try:
                        built = run.build(provider, window=8_000)
                    except ContextfoldError:  # a tool name or schema this provider refuses, say
                        continue
                    assert run.replay(built.manifest.turn).ok
    # the mutations exercise both sides of every importer
    assert accepted > SEEDS // 10 and refused > SEEDS // 10, (accepted, refused)
