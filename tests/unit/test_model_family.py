"""A hand-off does not send one provider another vendor's model (``projections.model_family``).

Built for another provider than the one it recorded, a run's body named its own model: Anthropic
got ``"model": "gpt-4.1"``, OpenAI ``"claude-sonnet-4-5"``. The SDK types take any string, so the
request validated, and the provider refused it."""

from __future__ import annotations

import pytest

from contextfold.api import render_request
from contextfold.domain.events import RunStarted, UserInput
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.model_family import model_family, not_a_reasoning_model, run_model_for
from tests.unit.test_builder import recorded


@pytest.mark.parametrize(("recorded_model", "provider", "sent"), [
    ("gpt-4.1", "anthropic", None),
    ("gpt-4.1", "openai-chat", "gpt-4.1"),
    ("o3-mini", "anthropic", None),
    ("claude-sonnet-4-5", "openai-chat", None),
    ("claude-sonnet-4-5", "openai-responses", None),
    ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
    ("gemini-2.5-pro", "anthropic", None),
    # a gateway's route through an OpenAI-format API, and names of no certain vendor: as recorded
    ("anthropic/claude-3.5-sonnet", "openai-chat", "anthropic/claude-3.5-sonnet"),
    ("llama-3.1-70b-instruct", "anthropic", "llama-3.1-70b-instruct"),
    ("llama-3.1-70b-instruct", "openai-chat", "llama-3.1-70b-instruct"),
])
def test_a_build_names_the_runs_model_only_for_a_provider_that_serves_it(
        recorded_model: str, provider: str, sent: str | None) -> None:
    state = fold(recorded([RunStarted(model=recorded_model), UserInput("hello")]))
    built = build_context(state, BuildConfig(provider=provider, window=8_000, reserve=1_000),
                          render=render_request)
    assert built.request.get("model") == sent
    assert built.manifest.model == sent
    # the caller's model is what the body names, whatever the run recorded
    given = build_context(state, BuildConfig(provider=provider, model="m-given", window=8_000, reserve=1_000),
                          render=render_request)
    assert given.request["model"] == given.manifest.model == "m-given"


def test_families_are_judged_only_where_certain() -> None:
    assert model_family("claude-3-haiku-20240307") == "anthropic"
    assert model_family("anthropic.claude-3-5-sonnet-20240620-v1:0") == "anthropic"  # Bedrock's id
    assert model_family("gpt-4o-mini") == model_family("o1") == model_family("chatgpt-4o-latest") == "openai"
    assert model_family("models/gemini-1.5-flash") == "gemini"
    assert model_family("ollama-o1ish") is model_family("mistral-large") is None
    assert run_model_for("neutral", "gpt-4.1") == "gpt-4.1"
    assert run_model_for("anthropic", None) is None


@pytest.mark.parametrize(("model", "certain"), [
    ("gpt-4.1", True), ("gpt-4.1-mini-2025-04-14", True), ("gpt-4o", True), ("gpt-4o-mini", True),
    ("openai/gpt-4o", True), ("gpt-3.5-turbo", True), ("gpt-4-turbo", True), ("gpt-4", True),
    ("chatgpt-4o-latest", True),
    # reasoning models, and names not known not to reason
    ("gpt-5", False), ("gpt-5-mini", False), ("o3", False), ("o4-mini", False), ("codex-mini-latest", False),
    ("computer-use-preview", False), ("gpt-4.5-preview", False), ("my-finetune", False), (None, False),
])
def test_only_models_certainly_not_reasoning_are_refused_reasoning(model: str | None, certain: bool) -> None:
    assert not_a_reasoning_model(model) is certain
