"""Ground truth for tool declarations: every recorded request's client function tools come back.

Why: the importers read the history only, so a request body's ``tools`` were lost on import: a
rebuilt request declared the tools the history called with an empty schema and none of the
others. ``test_cassettes.py`` compares protocol items and texts, not declarations; this test
imports each recorded request's own body (every request that holds its whole history: 134 of
the 139, the other 5 continue server-side state), builds it for its provider with every tool
declared (``max_tools`` above any cassette's count, so exposure leaves none out), and requires
each client function tool the recorded request declared to be declared with the same parameters
schema (keys sorted: the renderers send a canonical schema). 111 of those requests declare tools.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from tests.integration.test_cassettes import CASSETTES, GENEROUS_WINDOW, Case, _record, cases

pytestmark = [
    pytest.mark.traces,
    pytest.mark.skipif(not CASSETTES.is_dir(), reason=f"cassettes folder {CASSETTES} is absent"),
]

EXPECTED_REQUESTS = 134
EXPECTED_WITH_TOOLS = 111


def declared(provider: str, body: dict[str, Any]) -> dict[str, str]:
    """Name -> canonical JSON of the parameters of each client function tool ``body`` declares."""
    found: dict[str, Any] = {}
    for tool in body.get("tools") or []:
        if provider == "openai-chat" and tool.get("type") == "function":
            found[tool["function"]["name"]] = tool["function"].get("parameters")
        elif provider == "openai-responses" and tool.get("type") == "function":
            found[tool["name"]] = tool.get("parameters")
        elif provider == "anthropic" and tool.get("type", "custom") == "custom":
            found[tool["name"]] = tool.get("input_schema")
        elif provider == "gemini":
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
                keys = ("parametersJsonSchema", "parameters_json_schema", "parameters")
                found[decl["name"]] = next((decl[k] for k in keys if k in decl), None)
    return {name: json.dumps(schema, sort_keys=True) for name, schema in found.items()}


def rebuilt(case: Case) -> dict[str, Any]:
    """Request N rebuilt from its own body, every registered tool declared."""
    events = parse(json.dumps(case.body).encode(), format=case.provider,
                   source=f"{case.cassette}#{case.index}")
    config = BuildConfig(provider=case.provider, window=GENEROUS_WINDOW, reserve=8_000, max_tools=200)
    return build_context(fold(_record("cassette", events)), config,
                         render=lambda c, p, m: render(c, p, max_tokens=m, validate=True)).request


def test_recorded_tool_declarations_survive_import() -> None:
    pytest.importorskip("yaml", reason="pyyaml is needed to read the cassettes")
    counts: Counter[str] = Counter()
    lost: list[str] = []
    for case in cases():
        if case.body.get("previous_response_id") or case.body.get("conversation"):
            continue  # the body holds only the new items: its history lives server-side
        counts["requests"] += 1
        want = declared(case.provider, case.body)
        counts["with tools"] += bool(want)
        got = declared(case.provider, rebuilt(case))
        lost += [f"{case.cassette}#{case.index} {name}: "
                 f"{'not declared' if name not in got else f'{got[name][:80]} != {schema[:80]}'}"
                 for name, schema in want.items() if got.get(name) != schema]
    assert lost == [], "\n".join(lost[:20])
    assert counts == {"requests": EXPECTED_REQUESTS, "with tools": EXPECTED_WITH_TOOLS}
