"""Every spelling of one Claude model gets the same rules: the assistant-prefill refusal
(``render.protocol.refuses_prefill``), the tool-use system prompt (``tool_prompt``) and the
output cap (``render.output_caps``), all read off one ``model_family.claude_version``.

Why: the three each parsed the id with their own pattern, and they disagreed on the spellings a
run records through a gateway: OpenRouter's ``anthropic/claude-opus-4.6`` (a dot) read as 4.0 to
the prefill rule, so a build for it sent a prefill that Claude 4.6 refuses; Bedrock's cross-region
``us.anthropic.claude-...-v1:0`` had no output cap, so the body asked for more than the model
takes; an upper-case ``Claude-Opus-4-6`` read as no Claude at all to the prefill rule.
"""

from __future__ import annotations

import pytest

from contextfold.projections.model_family import claude_version
from contextfold.projections.render.output_caps import output_cap
from contextfold.projections.render.protocol import refuses_prefill
from contextfold.projections.tool_prompt import tool_prompt_tokens


def _spellings(tier: str, major: int, minor: int | None, date: str) -> list[str]:
    """The ways runs name one new-style model (``claude-{tier}-{major}[-{minor}]``)."""
    base = f"claude-{tier}-{major}" + ("" if minor is None else f"-{minor}")
    dotted = f"claude-{tier}-{major}" + ("" if minor is None else f".{minor}")
    return [f"{base}-{date}", base, f"anthropic/{base}", f"anthropic/{dotted}", dotted,
            f"{base}@{date}",                          # Vertex AI
            f"anthropic.{base}-{date}-v1:0",           # Bedrock
            f"us.anthropic.{base}-{date}-v1:0",        # Bedrock, cross-region inference profiles
            f"global.anthropic.{base}-{date}-v1:0", f"eu.anthropic.{base}-{date}-v1:0",
            base.upper(), f"openrouter/anthropic/{dotted}"]


def _old_spellings(major: int, minor: int | None, tier: str, date: str) -> list[str]:
    """The ways runs name one old-style model (``claude-{major}[-{minor}]-{tier}``)."""
    base = f"claude-{major}" + ("" if minor is None else f"-{minor}") + f"-{tier}"
    dotted = f"claude-{major}" + ("" if minor is None else f".{minor}") + f"-{tier}"
    return [f"{base}-{date}", f"{base}-latest", f"anthropic/{dotted}", f"{base}@{date}",
            f"anthropic.{base}-{date}-v1:0", f"us.anthropic.{base}-{date}-v1:0", base.upper()]


MODELS = [
    # (version, spellings, refuses a prefill, tool-prompt tokens, output cap)
    (("sonnet", 4, 5), _spellings("sonnet", 4, 5, "20250929"), False, 527, 64000),  # measured
    (("opus", 4, 6), _spellings("opus", 4, 6, "20260205"), True, 530, 128000),
    (("opus", 4, 1), _spellings("opus", 4, 1, "20250805"), False, 346, 32000),
    (("opus", 4, 0), _spellings("opus", 4, None, "20250514"), False, 346, 32000),
    (("haiku", 4, 5), _spellings("haiku", 4, 5, "20251001"), False, 346, 64000),
    (("sonnet", 3, 5), _old_spellings(3, 5, "sonnet", "20241022"), False, 530, 8192),
    (("sonnet", 3, 7), _old_spellings(3, 7, "sonnet", "20250219"), False, 346, 64000),
    (("haiku", 3, 0), _old_spellings(3, None, "haiku", "20240307"), False, 340, 4096),
]
ROWS = [(version, name, refused, prompt, cap) for version, names, refused, prompt, cap in MODELS
        for name in names]


@pytest.mark.parametrize(("version", "name", "refused", "prompt", "cap"), ROWS)
def test_every_spelling_of_a_claude_model_gets_that_models_rules(
        version: tuple[str, int, int], name: str, refused: bool, prompt: int, cap: int) -> None:
    assert claude_version(name) == version
    assert refuses_prefill(name) is refused
    assert tool_prompt_tokens("anthropic", name) == prompt
    assert output_cap(name) == cap


@pytest.mark.parametrize("name", ["gpt-4o", "claude-2.1", "claude-instant-1.2", "gemini-2.5-pro",
                                  "my-claude-proxy", "", "claude-sonnet"])
def test_a_name_with_no_claude_version_reads_as_none(name: str) -> None:
    assert claude_version(name) is None
    assert refuses_prefill(name) is False


def test_a_date_is_never_a_minor_version() -> None:
    assert claude_version("claude-opus-4-20250514") == ("opus", 4, 0)
    assert claude_version("claude-sonnet-4-20250514-v1:0") == ("sonnet", 4, 0)
    assert claude_version("claude-opus-5") == ("opus", 5, 0)
