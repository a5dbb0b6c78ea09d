"""What one fragment view costs in a build (:class:`Facts`) and how that is worked out
(:func:`view_facts`): its media prices, text tokens, framing overhead, and whether (and to what)
it can be shrunk.

Why a module of its own: :mod:`contextfold.projections.fragment_facts` keeps these facts per
fragment across builds and decides which view (redacted or not) each build prices; it had
passed 500 lines. Here is the costing of one view, which depends only on the state, the view
and the build's provider, model and counter. ``fragment_facts`` re-exports :class:`Facts`,
:data:`Hit` and :data:`SHRINK_FLOOR`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contextfold.domain.fragments import ContextFragment, ToolResultBlock
from contextfold.projections.call_id_prices import anthropic_block_tokens, call_id_tokens, split_reply_tokens
from contextfold.projections.entries import (
    LAZY_TEXT_CHARS,
    FragmentEntry,
    LazyText,
    Response,
    ToolAnswer,
    artifact_text_in,
    reasoning_of,
)
from contextfold.projections.fold_content import answer_frame_of, shown_as_media_alone
from contextfold.projections.framing import (
    AnswerFrame,
    framing_tokens,
    is_data,
    response_name_tokens,
    truncated_extra_tokens,
)
from contextfold.projections.media_plan import FragmentMedia, plan_fragment
from contextfold.projections.reasoning import unsent_tokens
from contextfold.projections.redact import Redacted
from contextfold.projections.state import RunState

__all__ = ["SHRINK_FLOOR", "Facts", "Hit", "answer_frame", "entry_has_artifact_text", "has_artifact_text",
           "large_text", "view_facts"]

SHRINK_FLOOR = 48
"""Smallest text a truncated fragment keeps (tokens)."""

Hit = tuple[ContextFragment, Redacted]
"""A redaction of a fragment: the redacted fragment and what was redacted."""


@dataclass(slots=True, unsafe_hash=True)
class Facts:
    """What a build needs to know about one fragment view, computed once (``fragment_facts``' docstring).
    Never changed once made; not ``frozen`` for speed (``selection_units.Unit`` says why)."""

    view: ContextFragment | FragmentEntry
    """The view costs are based on: the redacted fragment when it holds secrets (inline text),
    else the folded entry (its ``ContextFragment`` made only when :attr:`frag` is asked for:
    making it, blocks validated, was a model reply's dearest fact in the agent loop)."""
    hit: Hit | None
    """The redaction applied to build the view, if any."""
    media: FragmentMedia | None
    has_artifact_text: bool
    text_tokens: int
    overhead: int
    text_shrinkable: bool
    truncated_extra: int = 0
    """What the view's data block adds when it is shown cut or reduced (``truncated="true"``)."""
    not_offered: tuple[str, ...] = ()
    """For a reply whose calls use tools the request does not offer, their names: the view is
    priced as the note it is shown as (``projections.not_offered``)."""

    @property
    def frag(self) -> ContextFragment:
        """The view as a fragment (for a lazy entry its head: costed without its text)."""
        view = self.view
        return view if isinstance(view, ContextFragment) else view.head

    @property
    def cost(self) -> int:
        return self.text_tokens + (0 if self.media is None else self.media.tokens) + self.overhead

    @property
    def shrinkable(self) -> bool:
        """Text can be truncated, or media has a cheaper rendition (reduced before truncating)."""
        return self.text_shrinkable or (self.media is not None and self.media.reducible)

    @property
    def min_cost(self) -> int:
        text = SHRINK_FLOOR if self.text_shrinkable else self.text_tokens
        return (self.overhead + self.truncated_extra + text
                + (self.media.reduced_tokens if self.media is not None else 0))


def has_artifact_text(frag: ContextFragment) -> bool:
    return artifact_text_in(frag.content)


def entry_has_artifact_text(entry: FragmentEntry) -> bool:
    """:func:`has_artifact_text` of the entry's fragment, without making it."""
    content = entry.content
    if isinstance(content, ToolAnswer):
        return content.artifact is not None
    if isinstance(content, Response):
        return False
    return artifact_text_in(content)  # the blocks themselves


def _result_status(view: ContextFragment | FragmentEntry) -> str | None:
    """The status of the view's tool result block, if it has one."""
    answer = view.answer() if isinstance(view, FragmentEntry) else None
    if answer is not None:
        return answer.status
    frag = view if isinstance(view, ContextFragment) else view.head
    block = next((b for b in frag.content if isinstance(b, ToolResultBlock)), None)
    return None if block is None else block.status


def answer_frame(view: ContextFragment | FragmentEntry) -> AnswerFrame | None:
    """What the runtime line of the view's tool result says (``framing``), if it has one."""
    answer = view.answer() if isinstance(view, FragmentEntry) else None
    if answer is not None:
        return answer_frame_of(answer)
    return answer_frame_of((view if isinstance(view, ContextFragment) else view.head).content)


def large_text(entry: FragmentEntry) -> bool:
    """A tool result text held lazily, or long enough to be (see the module docstring)."""
    content = entry.content
    return isinstance(content, ToolAnswer) and (
        isinstance(content.text, LazyText) or len(content.text) > LAZY_TEXT_CHARS)


def view_facts(state: RunState, view: ContextFragment | FragmentEntry, hit: Hit | None, provider: str,
           count: Callable[[str], int], large: bool, model: str | None) -> Facts:
    media = None  # no media folded yet: nothing to price
    if state.media_seen:
        frag = view if isinstance(view, ContextFragment) else view.head
        media = plan_fragment(state, frag, provider, model)
    text_tokens = view.token_count - (media.fold_tokens if media is not None else 0)
    # shown as its media alone: no data block, so neither its (blank) text nor a wrapper is sent
    alone = media is not None and shown_as_media_alone(view.kind, view.content)
    if alone:
        text_tokens = 0
    if state.reasoning_seen:  # priced in the fold: left out again where it is not sent
        reasoning = reasoning_of(view)
        if reasoning is not None:
            text_tokens -= unsent_tokens(reasoning, provider, model, count)
    folded = state.entries[view.id].framing  # a view keeps its fragment's kind, trust and source
    overhead = folded if folded is not None else framing_tokens(view.kind, view.trust, view.source_ref, count,
                                                                answer_frame(view), block=not alone)
    overhead += (call_id_tokens(state, view.id, provider, count, model)
                 + split_reply_tokens(state, view.id, provider)
                 + anthropic_block_tokens(state, view.id, provider))
    if provider == "gemini" and view.kind == "tool_result":
        overhead += response_name_tokens(answer_frame(view), count)
    status = _result_status(view) if view.kind == "tool_result" else None
    if view.kind in ("evidence", "memory", "instruction", "user_input"):
        shrink = text_tokens > SHRINK_FLOOR
    elif view.kind == "tool_result":
        shrink = status in ("ok", "error") and text_tokens > SHRINK_FLOOR
    else:
        shrink = False
    if shrink and folded is not None and is_data(view.kind, view.trust):
        # What neutralising the whole text adds ([data] markers) is framing the fold priced with
        # the text; a cut text is fitted by its neutralised count, which holds the markers of
        # what it keeps. As fixed overhead they were charged twice: a transcript-like result cut
        # to 217 tokens was charged 1,420, and at 1.3k a spurious required-over-budget error.
        neutral = folded - framing_tokens(view.kind, view.trust, view.source_ref, count, answer_frame(view))
        overhead, text_tokens = overhead - neutral, text_tokens + neutral
    extra = 0 if alone else truncated_extra_tokens(view.kind, view.trust, count, status)
    return Facts(view, hit, media, large, text_tokens, overhead, shrink, extra)
