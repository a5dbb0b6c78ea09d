"""A long-lived ``Run`` handle that builds for one provider, then another (a fallback, a hand-off,
a runtime building for two providers per turn), records the manifest a fresh process records.

Why: the per-fragment tables are shared by the builds of the providers that price a fragment
alike (``fragment_facts.BuildCtx``). Call ids some provider is shown under an alias (Kimi's
``functions.search:1``, gpt-4o's ids reused across turns, ids longer than OpenAI Chat takes) are
priced per provider, and a table shared across them gave the later provider's manifest the
earlier one's counts: a body byte-identical to a fresh process's, a ``selected_tokens`` 4 too low
(236 with 60 reused ids), and ``replay --verify`` reporting a mismatch on a healthy run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import BuildConfig, ContextManifest

PROVIDERS = ("gemini", "anthropic", "neutral", "openai-chat", "openai-responses")
IDS = ("call_0", "functions.search:1", "call_0", "x" * 48, "toolu_30", "call_0", "functions.read:2", "c1")
"""Per turn, the id of its call: a reused one, a Kimi one (an alias for Anthropic), one too long
for OpenAI Chat, plain ones (before any alias the providers share one table)."""


def _config(provider: str) -> BuildConfig:
    return BuildConfig(provider=provider, window=6_000, reserve=1_000)


def _comparable(manifest: ContextManifest) -> dict[str, Any]:
    """All but what names the build itself: the preview reads the log after the build's record."""
    return manifest.model_dump(mode="json", exclude={"request_id", "log_version"})


def test_every_manifest_of_a_handle_alternating_providers_is_a_fresh_handles(tmp_path: Path) -> None:
    with contextfold.open_store(f"sqlite:///{tmp_path}/r.db") as store:
        run = store.run("r")
        run.append(UserInput("search the docs"))
        for turn, cid in enumerate((*IDS, *IDS)):
            run.append(ModelResponse(text=f"step {turn}", tool_calls=(
                ToolCall(call_id=cid, name="search", arguments=f'{{"q": "{turn}"}}'),)))
            run.append(ToolResult(call_id=cid, content=f"hit {turn}\n" * 40, is_error=turn % 3 == 0))
            # two builds a turn, the pair rotating: each provider follows every other one
            for provider in (PROVIDERS[turn % 5], PROVIDERS[(turn * 2 + 1) % 5]):
                live = run.build(config=_config(provider))
                fresh = store.run("r").preview(config=_config(provider))
                assert live.body_bytes == fresh.body_bytes, (turn, provider)
                assert _comparable(live.manifest) == _comparable(fresh.manifest), (turn, provider)
                report = store.run("r").replay(live.manifest.turn)
                assert report.ok, (turn, provider, report.differences)
