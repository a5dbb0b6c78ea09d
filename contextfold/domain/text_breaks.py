"""Where a model response's text stood among its calls: the provider's own order, kept.

Why: a response is ``text``, then ``tool_calls``, then ``reasoning``, and an Anthropic turn
[text, tool_use, text] (or an OpenAI Responses output [message, function_call, message], Gemini
parts [text, functionCall, text], Anthropic [text, server_tool_use, web_search_tool_result, text])
went back with both texts first: the model was shown having said, before its call (or its
search), what it wrote after it. ``ModelResponse.text_breaks`` says where each piece of the text
stood, counted in the response's other parts (:func:`turn_parts`); a renderer whose wire format has
an order (Anthropic content blocks, Responses items, Gemini parts) sends each piece there. The
text itself stays the one ``text`` (joined as before): what is counted, searched, redacted and
summarised does not change. Left out of the JSON when empty: a response whose text stood before
its calls (all of them until now) keeps its bytes and hash.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from contextfold.domain.checked import Integer

if TYPE_CHECKING:
    from contextfold.domain.events import ModelResponse

__all__ = ["TextBreak", "TurnPart", "breaks_without_items", "item_breaks", "joined_text", "last_text_after",
           "text_break_error", "text_pieces", "turn_parts"]


class TextBreak(BaseModel):
    """One piece of a response's text: ``text[at:]`` up to the next break (less that break's
    ``joiner``), which stood after the first ``after`` of the response's other parts
    (:func:`turn_parts`: its calls and its Anthropic / OpenAI Responses reasoning items, in the
    response's order). ``joiner``: the characters before ``at`` that joined this piece to the one
    before when the importer made one text of them (Anthropic's text blocks are joined by a
    newline), sent with neither piece. The first break is at 0."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    at: Integer = Field(ge=0)
    after: Integer = Field(ge=0)
    joiner: Literal["", "\n"] = Field(default="", exclude_if=lambda value: not value)


TurnPart: TypeAlias = tuple[Literal["item", "call"], int]
"""A response's non-text part: its ``n``-th reasoning item, or its ``n``-th call."""


def turn_parts(calls: int, item_slots: Sequence[int]) -> list[TurnPart]:
    """A response's calls and reasoning items in the response's order: the items before call
    ``k`` (``item_slots[i]`` is item ``i``'s ``before_call``) right before it, in their order, and
    those after the last call at the end."""
    parts: list[TurnPart] = []
    items = iter(enumerate(item_slots))
    pending = next(items, None)
    for k in range(calls + 1):
        while pending is not None and min(pending[1], calls) <= k:
            parts.append(("item", pending[0]))
            pending = next(items, None)
        if k < calls:
            parts.append(("call", k))
    return parts


def text_pieces(text: str, breaks: Sequence[TextBreak]) -> list[tuple[int, str]]:
    """``text`` cut at ``breaks``: each piece with the number of parts before it."""
    out: list[tuple[int, str]] = []
    for n, cut in enumerate(breaks):
        end = len(text) if n + 1 == len(breaks) else breaks[n + 1].at - len(breaks[n + 1].joiner)
        out.append((cut.after, text[cut.at:end]))
    return out


def text_break_error(text: str, breaks: Sequence[TextBreak], parts: int) -> str | None:
    """Why ``breaks`` do not cut ``text`` of a response with ``parts`` other parts, or None."""
    if not breaks:
        return None
    if breaks[0].at != 0 or breaks[0].joiner:
        return "the first text break must be at 0, with no joiner"
    for before, cut in pairwise(breaks):
        if not before.at < cut.at - len(cut.joiner) or not before.after < cut.after:
            return "text breaks must cut the text into pieces in order, each after more parts"
        if text[cut.at - len(cut.joiner):cut.at] != cut.joiner:
            return f"text break at {cut.at} names a joiner the text does not hold there"
    if breaks[-1].at >= len(text) or breaks[-1].after > parts:
        return (f"a text break stands after {breaks[-1].after} parts of a response of {parts}, "
                f"or at {breaks[-1].at} of a text of {len(text)} characters")
    return None


def breaks_without_items(breaks: Sequence[TextBreak], calls: int, item_slots: Sequence[int],
                         gone: set[int]) -> tuple[TextBreak, ...]:
    """``breaks`` of a response whose reasoning items numbered ``gone`` are left out (pieces its
    provider never takes back): each piece after as many of the parts left. Two pieces with no
    part left between them become one (the joiner kept in its text)."""
    if not breaks or not gone:
        return tuple(breaks)
    parts = turn_parts(calls, item_slots)
    out: list[TextBreak] = []
    for cut in breaks:
        after = cut.after - sum(1 for kind, n in parts[:cut.after] if kind == "item" and n in gone)
        if out and out[-1].after == after:
            continue
        out.append(cut.model_copy(update={"after": after}))
    return tuple(out)


def item_breaks(response: ModelResponse, gone: set[int]) -> tuple[TextBreak, ...]:
    """:func:`breaks_without_items` of a ``ModelResponse`` whose reasoning items ``gone`` are left
    out (read before they are: ``response.reasoning`` is the logged one)."""
    reasoning = response.reasoning
    slots = [item.before_call for item in getattr(reasoning, "items", ())]
    return breaks_without_items(response.text_breaks, len(response.tool_calls), slots, gone)


def joined_text(pieces: Sequence[tuple[int, str]], joiner: Literal["", "\n"], before_calls: int
                ) -> tuple[str, tuple[TextBreak, ...]]:
    """A response's text blocks (each with the number of other parts before it) as its one text,
    joined by ``joiner`` as the importers always joined them, and the breaks that say where they
    stood: none when the text stood in one piece after the ``before_calls`` parts that precede the
    first call (where a renderer puts a text without breaks), so such a response is logged as it
    was before breaks existed. An empty piece adds only its joiner, to the piece before it."""
    text = joiner.join(piece for _, piece in pieces)
    breaks: list[TextBreak] = []
    start = 0
    for n, (after, piece) in enumerate(pieces):
        at = start + (len(joiner) if n else 0)
        start = at + len(piece)
        if not piece or (breaks and breaks[-1].after == after):
            continue
        breaks.append(TextBreak(at=at, after=after, joiner=joiner) if breaks
                      else TextBreak(at=0, after=after))
    if len(breaks) < 2 and all(b.after == before_calls for b in breaks):
        return text, ()
    return text, tuple(breaks)


def last_text_after(response: ModelResponse) -> int:
    """The number of the response's other parts before its last piece of text (0 when its text
    stood before its calls): what a reasoning item after the last call may lead to
    (``reasoning.reasoning_refusals``)."""
    return response.text_breaks[-1].after if response.text_breaks else 0
