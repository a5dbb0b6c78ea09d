"""Provider reasoning (thinking blocks, reasoning items, thought signatures): who gets it, and its price.

What is sent. A model response's reasoning (``events.Reasoning``) is sent back, verbatim, to the
provider that made it, with the assistant turn it belongs to, for every such turn the request
shows; to any other provider it is not sent (a signature or an encrypted payload is readable
only by its maker: Anthropic, OpenAI and Google each refuse another's). A build for ``neutral``
(the provider-neutral conversation) carries it on the assistant message, priced.

Why every shown turn, not only the current tool-use loop (which is all Anthropic requires, and
all Gemini validates): production agents run long tool loops under prompt caching, and

- a turn's bytes then never change as the run goes on: dropping a turn's reasoning once a new user
  message arrives would rewrite every earlier assistant turn of the request, and a provider's
  prompt cache misses from the first changed byte on (the whole history is paid again, once per
  user message);
- a fragment's price never changes either: the builder costs a fragment once per configuration
  for the life of the state (``units``), and the selection promises (a larger budget never drops
  what a smaller one kept) hold because prices do not move with the log's horizon;
- OpenAI asks for the reasoning items of earlier turns to be passed back (the API discards those
  it does not need), and the newer Claude models keep earlier thinking in context.

What it costs: each turn's reasoning is priced into its history fragment (:func:`reasoning_tokens`),
so under a tight budget an old turn with long reasoning leaves the request (whole, with its calls
and results: the group is atomic) before newer ones, and what is sent never exceeds the budget.
Anthropic's older models strip earlier thinking from the context window: there the price is an
over-estimate, never an under-estimate. Reasoning is never cut, redacted or summarised: a cut or
edited block is refused by the provider, so a turn is kept with all of its reasoning or not at all.
(Not redacting it leaks nothing: it goes back only to the provider that wrote it. A manifest's
excluded lines give a fragment's folded count, its reasoning included, as they do for media.)

Hand-off: a build for another provider prices the turn without its reasoning and says so in the
fragment's manifest line (:func:`reasoning_note`), so an auditor sees what the model could not
be shown. So does a build for the same provider naming a model that is certainly not a
reasoning model (a gpt-5 run falling back to gpt-4.1: OpenAI refuses every request that carries
reasoning items for it, ``model_family.not_a_reasoning_model``); an unknown or absent model
still gets them.

Hosted tools: the items of the tools a provider runs itself (OpenAI Responses' ``web_search_call``,
``code_interpreter_call``, ``mcp_call``...; Anthropic's ``server_tool_use`` and its
``*_tool_result``) are kept among the response's reasoning pieces (``domain.reasoning``:
``HOSTED_RESPONSES_ITEMS``, ``ANTHROPIC_SERVER_BLOCKS``) and follow these rules: sent verbatim to
their provider, priced where sent, left out for another (the manifest line names each kind: no
fake call, no result), with one difference: an OpenAI model that does not reason is still sent
its hosted items (not its reasoning items: :func:`sent_part`), and priced for them.

Refused pieces: a piece no version of its provider's API takes back (a Responses item after the
response's last call, a ``thinking`` block without its signature) is refused at append, and one
the request type in use does not take (a key the SDK does not know) is logged as the provider
returned it; a log may hold either, and sent, it failed the request's check in every build of the
run. The fold leaves it out of every request, unpriced (``domain.reasoning.sendable_reasoning``),
and the fragment's manifest line says so (:func:`refused_note`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import assert_never

from contextfold.domain.canonical import canonical_dumps
from contextfold.domain.events import (
    AnthropicReasoning,
    GeminiReasoning,
    OpenAIResponsesReasoning,
    Reasoning,
    ReasoningItem,
)
from contextfold.domain.reasoning import HOSTED_RESPONSES_ITEMS, ReasoningRefusal
from contextfold.projections.generated_images import responses_item_tokens
from contextfold.projections.model_family import not_a_reasoning_model

__all__ = ["GEMINI_SIGNATURE_SHARE", "NEUTRAL", "left_out_note", "reasoning_note", "reasoning_sent",
           "reasoning_tokens", "refused_note", "sent_part", "unsent_tokens", "with_refused"]

NEUTRAL = "neutral"
"""The build ``provider`` of the provider-neutral conversation: it carries every reasoning."""

GEMINI_SIGNATURE_SHARE = 3
"""A Gemini ``thoughtSignature`` is priced at its token count over this (rounded up): a third.
Measured on pydantic-ai's recorded gemini-3-flash-preview requests (``tests/integration/
test_estimates.py``): ``promptTokenCount`` less the rest of our estimate is at most 27% of the
signatures' cl100k_base count on each of the 23 requests that send one (base64 tokenizes at
~1.4 characters a token under tiktoken), and less still where the rest is over-estimated.
By Gemini's own counts, a signature is billed the thoughts it came with (its response's
``thoughtsTokenCount``, 16-29% of its tiktoken count on the 27 recorded responses) while its
turn runs: each request of a tool loop is billed the one before it, that one's reply and
thoughts, and the results added. At a third no recorded request is under its count (the
closest ~0.4% over); at a quarter one is 5% under. Once a new user message starts the next turn
(a content of its own, as ``render.gemini`` sends it), gemini-3-flash-preview bills earlier
turns' signatures nothing. They keep the same third: a fragment's price does not move when a
later message arrives (module docstring), and from Gemini 3.5 Flash on earlier turns' reasoning
is reported kept in the prompt (billed as in its turn). ``tests/integration/test_estimates.py``
checks each figure."""


def reasoning_sent(reasoning: Reasoning, provider: str, model: str | None = None) -> bool:
    """Whether a build for ``provider`` and the request's ``model`` sends ``reasoning`` whole: to
    its own provider (and in the neutral conversation) only, unless ``model`` is certainly not a
    reasoning model (module docstring; then its hosted tools' items alone go: :func:`sent_part`)."""
    if provider == NEUTRAL:
        return True
    return provider == reasoning.provider and not not_a_reasoning_model(model)


def sent_part(reasoning: Reasoning, provider: str, model: str | None = None) -> Reasoning | None:
    """What a build for ``provider`` and ``model`` sends of ``reasoning``: all of it
    (:func:`reasoning_sent`), nothing (another provider's), or, to its own provider for a model
    that does not reason, the items of its hosted tools without the reasoning items
    (``HOSTED_RESPONSES_ITEMS``). Why: gpt-4.1 and gpt-4o run web search and code interpreter,
    and OpenAI refuses reasoning items for them, not the tools' items; left out with the reasoning,
    the code the model ran and what it printed were gone from its next request."""
    if reasoning_sent(reasoning, provider, model):
        return reasoning
    if provider != reasoning.provider or not isinstance(reasoning, OpenAIResponsesReasoning):
        return None
    hosted = tuple(item for item in reasoning.items if item.raw.get("type") in HOSTED_RESPONSES_ITEMS)
    return reasoning.model_copy(update={"items": hosted}) if hosted else None


def unsent_tokens(reasoning: Reasoning, provider: str, model: str | None,
                  count: Callable[[str], int]) -> int:
    """The tokens of ``reasoning`` a build for ``provider`` and ``model`` does not send (priced in
    the fold, taken out again where they are not sent)."""
    sent = sent_part(reasoning, provider, model)
    if sent is reasoning:
        return 0
    return reasoning_tokens(reasoning, count) - (0 if sent is None else reasoning_tokens(sent, count))


def reasoning_tokens(reasoning: Reasoning, count: Callable[[str], int]) -> int:
    """What a response's reasoning costs where it is sent: the canonical JSON of each Anthropic
    block or OpenAI item as a whole (its signed or encrypted payload, its text and summary and,
    as a margin, its keys), or a third of each Gemini signature's (:data:`GEMINI_SIGNATURE_SHARE`:
    what Gemini bills of it, measured). Why the whole JSON: what a provider really counts of an
    opaque payload is not documented, and the budget must hold whatever it is; a tokenizer's
    count of the text sent, keys included, is at or above the text shown. But an OpenAI
    ``image_generation_call``'s image, which the model is shown as an image: priced as one
    (:func:`~.generated_images.responses_item_tokens`), not as its base64 text."""
    match reasoning:
        case AnthropicReasoning():
            return sum(count(canonical_dumps(item.raw)) for item in reasoning.items)
        case OpenAIResponsesReasoning():
            return sum(responses_item_tokens(item.raw, count) for item in reasoning.items)
        case GeminiReasoning():
            return sum(-(-count(s.signature) // GEMINI_SIGNATURE_SHARE) for s in reasoning.signatures)
        case _:
            assert_never(reasoning)


def _pieces(reasoning: Reasoning) -> str:
    """What ``reasoning`` holds, in words: its thinking blocks or reasoning items, and the server
    (hosted) tools' blocks or items by their kind (``1 web_search_call item``)."""
    match reasoning:
        case AnthropicReasoning():
            return _kinds(reasoning.items, frozenset({"thinking", "redacted_thinking"}), "thinking", "block")
        case OpenAIResponsesReasoning():
            return _kinds(reasoning.items, frozenset({"reasoning"}), "reasoning", "item")
        case GeminiReasoning():
            n = len(reasoning.signatures)
            return f"{n} thought signature{'s' if n != 1 else ''}"
        case _:
            assert_never(reasoning)


def _kinds(items: Sequence[ReasoningItem], own: frozenset[str], said: str, noun: str) -> str:
    kinds = Counter(said if item.raw.get("type") in own else str(item.raw.get("type")) for item in items)
    return ", ".join(f"{n} {kind} {noun}{'s' if n != 1 else ''}" for kind, n in kinds.items())


def reasoning_note(reasoning: Reasoning, provider: str, tokens: int, model: str | None = None,
                   count: Callable[[str], int] | None = None) -> str:
    """The manifest's word on a fragment's reasoning: sent (and its tokens, counted in the line's),
    or left out because another provider made it or the request's ``model`` does not reason (then
    its hosted tools' items are sent, and said so: ``count`` prices them)."""
    if reasoning_sent(reasoning, provider, model):
        return f"{reasoning.provider} reasoning sent verbatim: {_pieces(reasoning)}, {tokens} tokens"
    if provider == reasoning.provider:
        sent = sent_part(reasoning, provider, model)
        kept = ""
        if sent is not None and isinstance(reasoning, OpenAIResponsesReasoning):
            gone = reasoning.model_copy(update={"items": tuple(
                i for i in reasoning.items if i.raw.get("type") not in HOSTED_RESPONSES_ITEMS)})
            sent_tokens = reasoning_tokens(sent, count) if count is not None else 0
            kept = f"; sent verbatim: {_pieces(sent)}, {sent_tokens} tokens"
            reasoning, tokens = gone, tokens - sent_tokens
        return (f"{reasoning.provider} reasoning not sent: {_pieces(reasoning)} ({tokens} tokens): "
                "the request's model is not a reasoning model, and the provider refuses reasoning for it"
                + kept)
    return (f"{reasoning.provider} reasoning not sent: {_pieces(reasoning)} ({tokens} tokens) "
            f"that only {reasoning.provider} can read")


def left_out_note(reasoning: Reasoning, tokens: int, why: str) -> str:
    """The manifest's word on reasoning its own provider's body leaves out, and why (Anthropic's
    merge of two replies into one message: ``render.anthropic.unsent_thinking``). Still counted in
    the line's tokens: the manifest counts more than is sent, never less."""
    return f"{reasoning.provider} reasoning not sent: {_pieces(reasoning)} ({tokens} tokens): {why}"


def refused_note(reasoning: Reasoning, refused: Sequence[ReasoningRefusal]) -> str:
    """The manifest's word on the pieces of a response's reasoning its provider refuses back
    (``domain.reasoning.reasoning_refusals``), which the fold leaves out of every request: a log
    may hold them from before the append refused them, and sent, they made every build for the
    provider fail the request's check. Neither sent nor priced."""
    return f"{reasoning.provider} reasoning left out of every request: {'; '.join(r.why for r in refused)}"


def with_refused(note: str | None, refused: str | None) -> str | None:
    """A line's reasoning note with the word on its refused pieces (:func:`refused_note`) after it."""
    if refused is None:
        return note
    return refused if note is None else f"{note}; {refused}"
