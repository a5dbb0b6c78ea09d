"""What a provider adds once to a request that declares tools, beyond the declarations.

Why: Anthropic's Messages API puts a system prompt of its own before a request that declares
tools ("When you use ``tools``, we also automatically include a special system prompt for the
model which enables tool use"), of a fixed size per model and ``tool_choice``, billed as input
tokens. Nothing priced it: 122 of 240 Anthropic builds of tau-bench runs at windows of 2.5k-8k
tokens sent more than their budget once it was counted.

Source: Anthropic's "Tool use" documentation, section "Pricing" (docs.anthropic.com/en/docs/
agents-and-tools/tool-use/overview, formerly /en/docs/tool-use-pricing-and-tokens), the table
"Tool use system prompt token count", which assumes at least one tool is declared:

=============================================  ==============  ===============
model                                          auto, none      any, tool
=============================================  ==============  ===============
Claude Opus 4.5, 4.1, 4; Sonnet 4.5, 4, 3.7;   346             313
Haiku 4.5
Claude Haiku 3.5                               264             340
Claude Opus 3                                  530             281
Claude Sonnet 3                                159             235
Claude Haiku 3                                 264             340
=============================================  ==============  ===============

Where recorded usage shows a model billed more than its cell, the measured figure is charged
(:data:`MEASURED_TOOL_PROMPT`: Claude Sonnet 4.5, 527): under-reserving is the costly side.

The request names no ``tool_choice`` (the API's default is ``auto``), but a caller may add one
before sending it: a model pays the dearer of its two cells. A model the table does not list
(a newer one, Claude 3.5 Sonnet, which the current table leaves out, a name the build does not
know, or none) pays :data:`DEAREST`, the dearest cell: over-reserving costs a few hundred
tokens of history, under-reserving is a request larger than its manifest says.

The other providers: OpenAI renders declared functions into the model's prompt with 12 tokens
of closing framing once per request (the OpenAI cookbook's ``num_tokens_for_tools``,
``func_end``), which the builder sets aside for every provider alike, unless each tool that may
be declared holds it in its own price (``tool_pricing.closing_tokens``,
``tool_exposure.request_closing_tokens``); Google publishes no fixed prompt for Gemini's
function declarations. So ``anthropic`` builds pay this prompt, and OpenAI Chat builds for a
gpt-5 model the preamble those models were measured adding (:data:`CHAT_GPT5_PREAMBLE`);
``neutral`` follows OpenAI's framing and does not. (An OpenAI Chat build for a model whose tools
are priced at their rendering, ``tool_pricing.tool_bill``, prices its tools apart from a neutral
build of the same turn, so the two select apart: ``builder._select`` reuses a selection only for
equal units.)
"""

from __future__ import annotations

import functools
import re

from contextfold.projections.model_family import claude_version

__all__ = ["ANTHROPIC_TOOL_PROMPT", "CHAT_GPT5_PREAMBLE", "DEAREST", "MEASURED_TOOL_PROMPT",
           "tool_prompt_name", "tool_prompt_tokens"]

ANTHROPIC_TOOL_PROMPT: dict[tuple[str, int, int], tuple[int, int]] = {
    ("opus", 4, 5): (346, 313), ("opus", 4, 1): (346, 313), ("opus", 4, 0): (346, 313),
    ("sonnet", 4, 5): (346, 313), ("sonnet", 4, 0): (346, 313), ("sonnet", 3, 7): (346, 313),
    ("haiku", 4, 5): (346, 313),
    ("haiku", 3, 5): (264, 340),
    ("opus", 3, 0): (530, 281),
    ("sonnet", 3, 0): (159, 235),
    ("haiku", 3, 0): (264, 340),
}
"""(tier, major, minor) -> (tokens with ``tool_choice`` auto or none, with any or tool)."""

DEAREST = max(max(cells) for cells in ANTHROPIC_TOOL_PROMPT.values())
"""What a model the table does not list pays (Claude Opus 3's 530)."""

MEASURED_TOOL_PROMPT: dict[tuple[str, int, int], int] = {("sonnet", 4, 5): 527}
"""(tier, major, minor) -> what a model's requests were billed above the table's cell, measured.
Claude Sonnet 4.5: on the seven requests of pydantic-ai's cassettes that declare tools, no server
tool and no call yet (``tests/integration/test_estimates.py``), the provider's count of our
request (``usage.input_tokens`` of the recorded one, plus what ours adds) less everything else
the build priced (texts, declarations, framing) is 493-527 tokens, not the table's 346: each such
request was billed 100-180 tokens over its manifest. Priced at the largest, 527 (at 520, read off
the recorded requests alone, four of ours were 5-7 tokens under). The other Claude 4 models the
table lists at 346 are not in the recordings, so they keep the table. Sonnet 4.6, which it does
not list, is priced at :data:`DEAREST`: its one such request measured 505, its two with calls
523-528 by the same sum, so one request does not tell its prompt and the dearest cell, never under
on any of them, stays."""


CHAT_GPT5_PREAMBLE = 79
"""What a gpt-5 model adds once to a Chat Completions request that declares tools, beyond the
OpenAI cookbook's count (its messages and ``num_tokens_for_tools``). Measured on pydantic-ai's
recorded gpt-5.4-mini Chat requests (``tests/integration/test_estimates.py``): ``usage.
prompt_tokens`` is 79 above the cookbook's count on each of the four with no call, 84-102 on the
four with calls (their calls' framing, ``call_id_prices.CHAT_CALL_FRAMING``), where gpt-4o's are
0-7 above it: a preamble of the model's own, not its tools' text (the same 78-81 above it with
2, 3 or 4 tools; their price is the cookbook's count, ``tool_pricing.tool_bill``). Chat only:
gpt-5.4's Responses requests are ~12 above the same count. Requests that declare no tool were not
recorded, so none is charged."""

_GPT5 = re.compile(r"(?:^|/)gpt-5(?![0-9])", re.IGNORECASE)
"""OpenAI's gpt-5 models (``gpt-5``, ``gpt-5-mini``, ``gpt-5.4-mini``, a gateway's ``openai/gpt-5``)."""


@functools.lru_cache(maxsize=64)  # a run names a model or two, asked at every build
def _gpt5(model: str | None) -> bool:
    return model is not None and _GPT5.search(model) is not None


@functools.lru_cache(maxsize=64)  # a run names a model or two, asked at every build
def _anthropic(model: str | None) -> int:
    version = claude_version(model)  # one reader for every spelling (``model_family``)
    cells = None if version is None else ANTHROPIC_TOOL_PROMPT.get(version)
    if version is None or cells is None:
        return DEAREST
    return max(*cells, MEASURED_TOOL_PROMPT.get(version, 0))


def tool_prompt_tokens(provider: str, model: str | None) -> int:
    """The tokens ``provider`` adds once to a request for ``model`` that declares a tool (module
    docstring): Anthropic's tool-use system prompt, a gpt-5 model's preamble in Chat Completions,
    0 for every other provider and model."""
    if provider == "anthropic":
        return _anthropic(model)
    return CHAT_GPT5_PREAMBLE if provider == "openai-chat" and _gpt5(model) else 0


def tool_prompt_name(provider: str) -> str:
    """What :func:`tool_prompt_tokens` sets aside for ``provider``, in words (an error's note)."""
    return "Anthropic's tool-use system prompt" if provider == "anthropic" else "the model's preamble"
