"""A request asks a model for no more output than its API takes (``render.output_caps``).

A build asks for its reserve as the reply's limit. claude-3-haiku takes at most 4,096 and gpt-4o
16,384, and their APIs refuse more ("max_tokens: 8000 > 4096, which is the maximum allowed number
of output tokens for claude-3-haiku-20240307"); no SDK type says so, so the request validated and
failed every turn at the CLI's default reserve."""

from __future__ import annotations

import pytest

from contextfold.api import render_request
from contextfold.domain.events import UserInput
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render.output_caps import output_cap
from tests.unit.test_builder import recorded

_LIMIT_KEY = {"anthropic": "max_tokens", "openai-chat": "max_completion_tokens",
              "openai-responses": "max_output_tokens"}


@pytest.mark.parametrize(("provider", "model", "reserve", "sent"), [
    ("anthropic", "claude-3-haiku-20240307", 8_000, 4_096),
    ("anthropic", "claude-3-5-sonnet-20241022", 8_000, 8_000),
    ("anthropic", "claude-3-5-sonnet-20241022", 12_000, 8_192),
    ("openai-chat", "gpt-4o", 20_000, 16_384),
    ("openai-responses", "gpt-4o-2024-05-13", 8_000, 4_096),
    ("openai-chat", "gpt-4o", 8_000, 8_000),
    ("anthropic", "claude-sonnet-4-5", 20_000, 20_000),  # under its cap: the reserve
    ("anthropic", "claude-sonnet-4-5", 100_000, 64_000),  # a window's large reserve: refused above 64k
    ("openai-responses", "o3", 110_000, 100_000),
    ("openai-chat", "my-finetune", 20_000, 20_000),
])
def test_the_output_limit_is_the_reserve_up_to_the_models_cap(provider: str, model: str, reserve: int,
                                                             sent: int) -> None:
    state = fold(recorded([UserInput("hello")]))
    built = build_context(state, BuildConfig(provider=provider, model=model, window=128_000, reserve=reserve),
                          render=render_request)
    assert built.request[_LIMIT_KEY[provider]] == sent
    assert built.manifest.reserved_output_tokens == reserve  # the budget still keeps the whole reserve


def test_caps_are_matched_on_the_forms_a_model_name_takes() -> None:
    assert output_cap("anthropic.claude-3-haiku-20240307-v1:0") == 4_096  # Bedrock
    assert output_cap("claude-3-5-sonnet-v2@20241022") == output_cap("claude-3-5-sonnet@20240620") == 8_192
    assert output_cap("openai/gpt-4o-mini") == 16_384  # a gateway's route
    assert output_cap("gpt-4-turbo-2024-04-09") == output_cap("gpt-3.5-turbo") == 4_096
    assert output_cap("gpt-4.1-mini") == 32_768
    assert output_cap("claude-sonnet-4-5-20250929") == output_cap("claude-haiku-4-5") == 64_000
    assert output_cap("anthropic.claude-sonnet-4-20250514-v1:0") == 64_000
    assert output_cap("claude-3-7-sonnet-latest") == 64_000
    assert output_cap("claude-opus-4-1") == 32_000 and output_cap("claude-opus-4-6") == 128_000
    assert output_cap("o3") == output_cap("o4-mini-2025-04-16") == 100_000 and output_cap("o1-mini") == 65_536
    assert output_cap("gpt-5-mini-2025-08-07") == 128_000
    assert output_cap("gpt-5-chat-latest") is output_cap("gpt-5.9") is output_cap(None) is None  # not named
