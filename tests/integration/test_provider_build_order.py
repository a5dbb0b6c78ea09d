"""An OpenAI model's Chat build and the neutral build of one state price its call ids apart
(``call_id_prices.chat_ids_unsent``) and share the process's memos (redactions, cut texts, renders).

Sharing must not make a build's result depend on what was built before it: each provider's
request and manifest are the same built first, second, or alone in a fresh interpreter (no
process-wide memo warm). The run has what the shared tables hold (a secret redacted, a long
result cut to its grant) at a budget where the two providers keep different histories.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import blake3

from contextfold.domain.events import AnyEvent, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from contextfold.projections.state import RunState

REPO = Path(__file__).resolve().parents[2]
PROVIDERS = ("neutral", "openai-chat")
WINDOW = 4_000  # the budget (3,500) keeps part of the history, and cuts the newest result (a log)
RESERVE = 500


def _events() -> list[AnyEvent]:
    events: list[AnyEvent] = [RunStarted(model="gpt-4o", encoding="cl100k_base"), UserInput("fix the build")]
    for i in range(14):
        cid = f"call_Xy7Qm2Lk9PzR4tVb8N{i:03d}"  # OpenAI's ids: ~15 tokens each
        if i == 12:
            content = f"deploy key AKIAIOSFODNN7EXAMPL{i % 10} set\n" + "config ok\n" * 5
        elif i == 13:
            content = "".join(f"step {n}: compiling module_{n}.c ... warning: unused variable\n"
                              for n in range(300))
        else:
            content = f"build {i} done: " + "ok " * 30
        call = ToolCall(call_id=cid, name="run_build", arguments=f'{{"n": {i}}}')
        events += [ModelResponse(tool_calls=[call]),
                   ToolResult(call_id=cid, content=content, exit_code=1 if i == 13 else 0)]
    events.append(UserInput("status?"))
    return events


def _state() -> RunState:
    return fold([RecordedEvent("r", i + 1, e, "h") for i, e in enumerate(_events())])


def _config(provider: str) -> BuildConfig:
    return BuildConfig(provider=provider, window=WINDOW, reserve=RESERVE)


def _build(state: RunState, provider: str) -> BuildResult:
    return build_context(state, _config(provider), render=lambda c, p, m: render(c, p, max_tokens=m))


def _result(built: BuildResult) -> tuple[str, str]:
    """The request's hash and the blake3 of the manifest as the log records it."""
    manifest = json.dumps(built.manifest.model_dump(mode="json"), sort_keys=True).encode()
    return built.manifest.request_hash, blake3.blake3(manifest).hexdigest()


def alone(provider: str) -> tuple[str, str]:
    """``provider``'s build of a fresh state, the only build of its process (run by the test)."""
    return _result(_build(_state(), provider))


def _fresh(provider: str) -> tuple[str, str]:
    code = ("import json, sys\nfrom tests.integration.test_provider_build_order import alone\n"
            "print(json.dumps(alone(sys.argv[1])))")
    out = subprocess.run([sys.executable, "-c", code, provider], cwd=REPO, capture_output=True, text=True,
                         check=True)
    request, manifest = json.loads(out.stdout)
    return request, manifest


def test_the_run_prices_the_two_providers_apart_and_cuts_and_redacts() -> None:
    """What the other tests rely on: the providers keep different histories at this budget, and
    each build redacts the key and cuts a result."""
    state = _state()
    built = {p: _build(state, p) for p in PROVIDERS}
    kept = {p: [f.id for f in b.manifest.fragments] for p, b in built.items()}
    assert kept["neutral"] != kept["openai-chat"]
    assert len(kept["neutral"]) < len(kept["openai-chat"])  # the ids are unpriced in Chat
    for b in built.values():
        assert b.manifest.redactions and b.manifest.truncations


def test_each_providers_build_is_the_same_whichever_is_built_first_and_alone_in_a_fresh_process() -> None:
    first = {p: _result(_build(_state(), p)) for p in PROVIDERS}  # each first on its own state
    for order in (PROVIDERS, PROVIDERS[::-1]):
        state = _state()
        second = {p: _result(_build(state, p)) for p in order}
        assert second == first, order
        again = {p: _result(_build(state, p)) for p in order}  # and again, every table warm
        assert again == first, order
    assert {p: _fresh(p) for p in PROVIDERS} == first
