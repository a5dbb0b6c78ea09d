"""A long tool output holding short secrets is priced as it is shown: redacted.

A payload held apart from the fold (an artifact, or a result text longer than
``entries.LAZY_TEXT_CHARS``) was priced from its logged text and redacted only when shown. Its
``[REDACTED:...]`` placeholders cost more tokens than the short secrets they replace, so the
redacted text no longer fitted the grant its unit was selected with and was cut back to the
logged size at every window: a 400-line ``.env`` dump lost a quarter of its lines at 200,000.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextfold.api import Run, open_store
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.projections.builder import BuildResult
from tests.unit.test_rendered_within_count import _chat_tokens

LINES = 400
DUMP = "\n".join(f"SERVICE_{i}_PASSWORD=pw{i}x{chr(97 + i % 26)}" for i in range(LINES))
"""Each line a short secret: its placeholder (``[REDACTED:secret_assignment]``) costs more."""
_SHOWN_LINE = re.compile(r"SERVICE_(\d+)_PASSWORD=\[REDACTED:secret_assignment\]")


@pytest.fixture(params=["artifact", "inline"])
def run(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Run]:
    """The dump as the answer of the run's one call: stored as an artifact, or inline (longer
    than ``LAZY_TEXT_CHARS``, so held lazily): both are priced before they are redacted."""
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        if request.param == "artifact":
            store.events.artifact_threshold = 1024
        r = store.run("env")
        r.append(UserInput("show me the service config"),
                 ModelResponse(tool_calls=[ToolCall(call_id="c1", name="cat", arguments='{"path": ".env"}')]),
                 ToolResult(call_id="c1", content=DUMP),
                 UserInput("which services have a password set?"))
        backed = any(getattr(b, "artifact", None) for b in r.state().fragment("e3").content)
        assert backed == (request.param == "artifact")
        yield r


def _shown_lines(built: BuildResult) -> list[int]:
    """The dump's lines the request shows, each checked to be whole (a cut ends at a line)."""
    body = json.dumps(built.request, ensure_ascii=False)
    text = json.loads(body)  # the strings as sent
    shown: list[int] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            for line in value.split("\n"):
                if "SERVICE_" in line:
                    m = _SHOWN_LINE.fullmatch(line)
                    assert m is not None, f"a line of the dump is not shown whole: {line!r}"
                    shown.append(int(m.group(1)))
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(text)
    assert not any(f"pw{i}x" in body for i in range(LINES)), "a secret reached the request"
    assert len(shown) == len(set(shown))
    return shown


def test_the_dump_is_shown_whole_and_redacted_where_the_window_holds_it(run: Run) -> None:
    logged = run.state().fragment("e3").token_count
    for provider in ("anthropic", "openai-chat", "neutral"):
        built = run.preview(provider=provider, window=200_000)
        assert sorted(_shown_lines(built)) == list(range(LINES)), provider
        line = next(f for f in built.manifest.fragments if f.id == "e3")
        assert not line.truncated and "e3" not in {t.id for t in built.manifest.truncations}
        # the manifest counts what was sent: the placeholders, more than the logged secrets
        assert line.tokens > logged
        assert built.manifest.selected_tokens <= built.manifest.budget_tokens
        assert {r.fragment_id for r in built.manifest.redactions} == {"e3"}
        assert len(built.manifest.redactions) == LINES


def test_a_small_window_cuts_the_dump_at_a_line_and_never_over_budget(run: Run) -> None:
    whole = run.preview(provider="openai-chat", window=200_000).manifest.selected_tokens
    kept_before = -1
    cut_seen = 0
    for window in range(2_000, whole + 1_200, 450):
        built = run.preview(provider="openai-chat", window=window, reserve=500)
        budget = built.manifest.budget_tokens
        assert built.manifest.selected_tokens <= budget, window
        assert _chat_tokens(built.request) <= budget, window  # an independent count of the request
        shown = _shown_lines(built)
        assert len(shown) >= kept_before, f"window {window} shows fewer lines than a smaller one"
        kept_before = len(shown)
        if 0 < len(shown) < LINES:
            cut_seen += 1
            assert "e3" in {t.id for t in built.manifest.truncations}
    assert cut_seen >= 3
    assert kept_before == LINES  # past the whole size: every line
