"""What a message's call ids and split cost: the prices ``fragment_facts`` adds to a fragment's
framing for them (:func:`call_id_tokens`, :func:`split_reply_tokens`).

Apart from ``fragment_facts`` (which re-exports them) because they read the timeline's call slots
and the Chat renderer's limit, not the fragment's text: that module stays about what a fragment's
own view costs.
"""

from __future__ import annotations

from collections.abc import Callable

from contextfold.domain.fragments import ToolCallBlock
from contextfold.projections.entries import Response, ToolAnswer
from contextfold.projections.fold_content import answer_frame_of
from contextfold.projections.framing import MESSAGE_OVERHEAD
from contextfold.projections.model_family import model_family
from contextfold.projections.reasoning import NEUTRAL
from contextfold.projections.render.tool_checks import MAX_CHAT_TOOL_CALLS
from contextfold.projections.state import RunState
from contextfold.projections.timeline_items import CallSlot, ToolGroup

__all__ = ["ANTHROPIC_TOOL_RESULT_FRAMING", "ANTHROPIC_TOOL_USE_FRAMING", "CHAT_CALL_FRAMING",
           "anthropic_block_tokens", "call_id_tokens", "chat_ids_unsent", "split_reply_tokens"]

CHAT_CALL_FRAMING = 12
"""What a tool call costs an OpenAI model's Chat Completions request besides its name and its
arguments, in place of its ids (:func:`chat_ids_unsent`). Measured on pydantic-ai's recorded
requests (``tests/integration/test_estimates.py``): ``usage.prompt_tokens`` less the OpenAI
cookbook's count of the request without ids is 6-8 tokens a call for gpt-4o and 3-11 for
gpt-5.4-mini; 12 is above every one of them."""

ANTHROPIC_TOOL_USE_FRAMING = 8
"""What a ``tool_use`` block costs a Claude request beyond its name, its arguments and its id
(the message's ``MESSAGE_OVERHEAD`` aside); :data:`ANTHROPIC_TOOL_RESULT_FRAMING` likewise for a
``tool_result`` block beyond its text and its ``tool_use_id``. Why: Claude renders calls and
results into its prompt inside markup of its own that tiktoken's count of their JSON does not see.
Measured on pydantic-ai's recorded requests (``tests/integration/test_estimates.py``,
``test_anthropic_bills_a_call_and_its_result_within_what_the_build_charges``): where one request
of a conversation adds exactly one call and its result to the one before it, the provider's count
grew by 11-19 tokens more than our estimate without this charge (nine such steps, Claude Sonnet
4.5 and 4.6, median 14). Only the pair is measured (no recorded request holds a call without its
result, a parallel batch, a result of several content items, or an error result without a first
call of a deferred tool beside it): the pair's 16 is split evenly, and a batch of n calls pays n
pairs."""

ANTHROPIC_TOOL_RESULT_FRAMING = 8
"""See :data:`ANTHROPIC_TOOL_USE_FRAMING`."""


def chat_ids_unsent(provider: str, model: str | None) -> bool:
    """Whether a request for ``provider`` and ``model`` is billed without its call ids: OpenAI's
    Chat Completions serving an OpenAI model (``model_family``). Why: the ids are the API's
    bookkeeping, not text the model reads. Measured on every recorded Chat request of pydantic-ai's
    cassettes with calls (gpt-4o, gpt-5.4-mini): the cookbook's count without the ids is within
    11 tokens a call of the provider's, with them 25-30 tokens a call above it, so each call was
    priced ~20 tokens above what it cost (cl100k_base: an OpenAI id is ~15 tokens, sent twice).
    Anything else keeps the ids priced: another vendor's model behind an OpenAI-compatible API
    may render them into its prompt (a chat template that shows the ids), and for Responses,
    Anthropic and Gemini the usage does not tell (their gap has other causes too)."""
    return provider == "openai-chat" and model is not None and model_family(model) == "openai"


def call_id_tokens(state: RunState, fid: str, provider: str, count: Callable[[str], int],
                   model: str | None = None) -> int:
    """The tokens of the call ids the message of fragment ``fid`` shows: each call's id on a reply
    that makes calls (``tool_use.id``, ``tool_calls[].id``, ``call_id``, ``functionCall.id``), the
    answered call's on a result or its mask stub (``tool_use_id``, ``tool_call_id``, ``call_id``,
    ``functionResponse.id``), as ``provider`` is shown it (its alias where it is one of the
    slot's ``alias_for``; the longer of the two for the neutral conversation, which carries both).

    Why: an id is sent twice per call and no price held it; ``MESSAGE_OVERHEAD`` (4 tokens) is the
    role's framing. OpenAI's ids (``call_`` and 24 random characters) are ~17 tokens, Anthropic's
    (``toolu_01...``) ~15: 60 calls sent ~2,000 tokens more than their manifest counted. Read from
    the timeline's slots (the aliases are decided there, when the call is folded); a fragment
    with no call id (or one the timeline does not know) adds nothing.

    A request billed without its ids (:func:`chat_ids_unsent`: ``model`` is the one the request
    names) pays :data:`CHAT_CALL_FRAMING` a call made instead, and nothing on a result."""
    entry = state.entries[fid]
    content = entry.content
    calls = _calls_made(content)
    if chat_ids_unsent(provider, model):
        return CHAT_CALL_FRAMING * len(calls)
    if calls:
        group = state.items.get(entry.position)
        if not isinstance(group, ToolGroup) or group.fragment_id != fid:
            return sum(map(count, calls))
        slots: tuple[CallSlot, ...] = group.calls
    else:
        frame = answer_frame_of(content)
        if frame is None:
            return 0
        group = state.items.get(state.answer_group.get(entry.position, -1))
        # the group's index, not a scan of its calls: per answer, that cost a wide reply n * n
        slot = group.slot(frame.call_id) if isinstance(group, ToolGroup) else None
        if slot is None:
            return count(frame.call_id)
        slots = (slot,)
    total = 0
    for slot in slots:
        if slot.alias is None or (provider != NEUTRAL and provider not in slot.alias_for):
            total += count(slot.call_id)
        elif provider == NEUTRAL:
            total += max(count(slot.call_id), count(slot.alias))
        else:
            total += count(slot.alias)
    return total


def anthropic_block_tokens(state: RunState, fid: str, provider: str) -> int:
    """What the ``tool_use`` blocks of fragment ``fid`` (a reply that makes calls) or its
    ``tool_result`` block (a result, or the stub that stands for one) cost an ``anthropic`` build
    beyond their texts and ids (:data:`ANTHROPIC_TOOL_USE_FRAMING`); 0 for any other fragment or
    provider (``neutral`` follows OpenAI's framing, as for the tool-use system prompt)."""
    if provider != "anthropic":
        return 0
    content = state.entries[fid].content
    calls = len(_calls_made(content))
    if calls:
        return ANTHROPIC_TOOL_USE_FRAMING * calls
    return 0 if answer_frame_of(content) is None else ANTHROPIC_TOOL_RESULT_FRAMING


def _calls_made(content: object) -> list[str]:
    """The ids of the calls a reply's content makes (none for any other content)."""
    if isinstance(content, Response):
        return [c for c, _, _ in content.calls]
    if isinstance(content, ToolAnswer) or not isinstance(content, tuple):
        return []
    return [b.call_id for b in content if isinstance(b, ToolCallBlock)]


def split_reply_tokens(state: RunState, fid: str, provider: str) -> int:
    """The framing of the further assistant messages an OpenAI Chat request sends the reply of
    fragment ``fid`` as when it makes more calls than one message takes (``MAX_CHAT_TOOL_CALLS``:
    ``render.openai_chat`` splits it), ``MESSAGE_OVERHEAD`` each; ``neutral`` pays it too (the
    dearest provider's framing). 0 for any other fragment or provider.

    Why: the split is what makes such a reply sendable to Chat Completions at all, and each
    part is a message of its own; the manifest counts what is sent."""
    if not state.wide_reply_seen or provider not in ("openai-chat", NEUTRAL):
        return 0
    calls = len(_calls_made(state.entries[fid].content))
    return MESSAGE_OVERHEAD * max(0, -(-calls // MAX_CHAT_TOOL_CALLS) - 1)
