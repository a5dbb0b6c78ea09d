"""The selection promises hold for long outputs priced as they are shown, redacted.

A payload held apart from the fold (an artifact, or a result text past ``LAZY_TEXT_CHARS``) is
redacted only when a build needs it; its placeholders may cost more than its secrets. Over
random secret densities: the request an independent count measures stays within the budget, no
secret is sent, every line shown is whole, and a larger window never shows fewer lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import blake3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ArtifactRef, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.render.data_blocks import neutralise
from contextfold.projections.state import RunState
from contextfold.projections.tokens import TokenCounter
from tests.unit.test_fold import Log
from tests.unit.test_rendered_within_count import _chat_tokens

_LINE = re.compile(r"S(\d+)_(\d+)_(?:PASSWORD=\[REDACTED:secret_assignment\]|PORT=\d+)")


def _dump(k: int, lines: int, secret: Callable[[int], bool]) -> str:
    return "\n".join(f"S{k}_{i}_PASSWORD=pw{i}x" if secret(i) else f"S{k}_{i}_PORT={1000 + i}"
                     for i in range(lines))


def _run(dumps: list[str], artifact: bool) -> tuple[RunState, Callable[[ArtifactRef], str]]:
    """One call per dump, answered by it (stored as an artifact, or inline), then a question."""
    texts: dict[str, str] = {}
    events: list[AnyEvent] = [UserInput("audit the services' config")]
    for k, text in enumerate(dumps):
        events.append(ModelResponse(tool_calls=[ToolCall(call_id=f"c{k}", name="cat",
                                                         arguments=f'{{"path": "svc{k}.env"}}')]))
        if artifact:
            ref = ArtifactRef(hash=blake3.blake3(text.encode()).hexdigest(), size=len(text.encode()))
            texts[ref.hash] = text
            events.append(ToolResult(call_id=f"c{k}", content=text[:200], artifact=ref))
        else:
            events.append(ToolResult(call_id=f"c{k}", content=text))
    events.append(UserInput("which services have a password set?"))

    def tokens(ref: ArtifactRef, counter: TokenCounter) -> int:  # as the store counts one
        return counter.count(neutralise(texts[ref.hash]))

    state = fold(Log().add(*events).records, artifact_tokens=tokens if artifact else None)
    return state, lambda ref: texts[ref.hash]


def _shown(built: BuildResult) -> set[tuple[int, int]]:
    """The dumps' lines the request shows, each checked to be whole and to hold no secret."""
    shown: set[tuple[int, int]] = set()
    for message in built.request["messages"]:
        content = message.get("content")
        if not isinstance(content, str):
            continue
        assert not re.search(r"=pw\d+x", content), "a secret reached the request"
        for line in content.split("\n"):
            if re.match(r"S\d+_\d+_", line):
                m = _LINE.fullmatch(line)
                assert m is not None, f"a line not shown whole: {line!r}"
                shown.add((int(m.group(1)), int(m.group(2))))
    return shown


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(densities=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3),
       lines=st.integers(30, 260), artifact=st.booleans(), seed=st.integers(0, 2**16),
       windows=st.lists(st.integers(1_500, 16_000), min_size=2, max_size=4, unique=True))
def test_counted_request_within_budget_and_more_window_never_shows_fewer_lines(
        densities: list[float], lines: int, artifact: bool, seed: int, windows: list[int]) -> None:
    def secret(k: int, density: float) -> Callable[[int], bool]:  # a fixed scatter per dump
        return lambda i: ((i * 7919 + seed + k) % 1000) / 1000 < density

    dumps = [_dump(k, lines, secret(k, d)) for k, d in enumerate(densities)]
    state, load_text = _run(dumps, artifact)
    before: set[tuple[int, int]] = set()
    for window in sorted(windows):
        built = build_context(state, BuildConfig(provider="openai-chat", window=window, reserve=500),
                              load_text=load_text, render=render_request)
        budget = built.manifest.budget_tokens
        assert built.manifest.selected_tokens <= budget, window
        assert _chat_tokens(built.request) <= budget, window
        shown = _shown(built)
        assert len(shown) >= len(before), f"window {window} shows fewer lines than a smaller one"
        before = shown
    whole = build_context(state, BuildConfig(provider="openai-chat", window=400_000, reserve=500),
                          load_text=load_text, render=render_request)
    assert len(_shown(whole)) == lines * len(dumps)  # every line of every dump where all fits
    # deterministic: after builds at other windows (their memos), the same as a fresh state's
    config = BuildConfig(provider="openai-chat", window=windows[0], reserve=500)
    again = build_context(state, config, load_text=load_text, render=render_request)
    fresh = build_context(_run(dumps, artifact)[0], config, load_text=load_text, render=render_request)
    assert again.manifest.model_dump_json() == fresh.manifest.model_dump_json()
    assert again.request == fresh.request


def test_an_over_budget_line_says_the_redacted_price_its_unit_was_left_out_at() -> None:
    """A dump the walk reached and left out is priced by its redacted text (its unit's ``needs N
    tokens``), and its line said its logged tokens (1,999 beside a need of 2,846): ``why`` told a
    price the selection never used. The line says the tokens of the text it would be shown as,
    those a window that keeps it whole lists it at, and its unit's need holds its members'."""
    for artifact in (True, False):
        state, load_text = _run([_dump(k, 200, lambda i: True) for k in range(3)], artifact)
        whole = build_context(state, BuildConfig(provider="openai-chat", window=100_000, reserve=500),
                              load_text=load_text, render=render_request)
        shown = {f.id: f.tokens for f in whole.manifest.fragments}
        built = build_context(state, BuildConfig(provider="openai-chat", window=3_500, reserve=500),
                              load_text=load_text, render=render_request)
        over = [e for e in built.manifest.excluded_items if e.reason == "over_budget"]
        dumps = [e for e in over if shown[e.id] > 1_000]
        assert dumps, over  # a dump the walk stopped at
        for line in dumps:
            need = int(re.fullmatch(r"unit \S+ needs (\d+) tokens.*", line.detail or "")[1])  # type: ignore[index]
            members = [e.tokens for e in over if e.detail == line.detail]
            assert line.tokens == shown[line.id], (artifact, line)
            assert sum(members) <= need, (artifact, members, need)
