"""Media in a build: provider prices per fragment, the detail reduction, dedupe and inline bytes.

Why a module of its own: the builder selects fragments by token cost; for a
fragment that carries images or PDFs that cost depends on the provider being
built (:mod:`.media_cost`). This module gives the builder, per fragment:

- ``FragmentMedia.fold_tokens``: what the fold counted for its media (one
  provider-neutral estimate, fixed in the log's projection), to be replaced by
- ``tokens``: the provider's price of the same blocks, and ``reduced_tokens``:
  the price after the provider's cheaper rendition (OpenAI ``detail: low``).
  Selection sees ``text + tokens``; a fragment it must shrink is reduced first
  (``media_detail_low``) and only then truncated or dropped.

After layout, ``media_finish.finalize_media`` turns the provider-neutral conversation into one
that can be sent:

- parts of reduced fragments get ``detail="low"``;
- artifact bytes are loaded through the ``load_bytes`` port and carried as
  base64, and ``data:`` URLs from imported histories are split into media type
  + base64 (Anthropic and Gemini take base64 sources, not data URLs);
- dedupe: the same medium (same artifact hash, else the same URL) is carried
  once, at its first place in the request; every later occurrence becomes a
  runtime note "image sha:… shown above". The budget priced every occurrence,
  so dedupe only ever frees tokens, never overflows.

- limits: a medium the provider refuses as it is (a type it does not take, an image over its
  size limit: ``media_limits``) is priced as the note sent in its place (no media tokens, the
  note as caption text, ``not_attached`` in the manifest) and marked ``MediaPart.unsent``, its
  bytes not loaded. The rules of the whole request (Anthropic's more than 20 images, and each
  provider's count, pages and size of a request: ``media_limits.REQUEST_LIMITS``) are applied
  here, the newest media kept first (``media_finish.request_notes``); the manifest prices those as their notes
  (:func:`priced_as_sent`), the selection having priced them as media.

Media a provider cannot carry inside a tool result is moved by the renderers
(OpenAI Chat: the next user message, with a reference line). The fold's
tool-result media sit inside ``ToolResultBlock.blocks``; :func:`media_blocks`
looks there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import blake3

from contextfold.domain.conversation import (
    MediaPart,
)
from contextfold.domain.event_values import data_url_size, is_data_url, media_type_key
from contextfold.domain.events import DocumentBlock, ImageBlock
from contextfold.domain.fragments import ContextFragment, ToolResultBlock
from contextfold.domain.manifest import MediaCostRecord
from contextfold.projections.fold_content import block_tokens
from contextfold.projections.framing import MESSAGE_OVERHEAD
from contextfold.projections.media_cost import (
    MediaCost,
    media_cost,
    media_family,
    priced_media,
    reduced_block,
)
from contextfold.projections.media_limits import (
    refusal,
    unsent_media_note,
)
from contextfold.projections.model_family import chat_audio_model
from contextfold.projections.redact_urls import shown_url
from contextfold.projections.render.data_blocks import (
    ERROR_MEDIA_NOTE,
    TOOL_MEDIA_NOTE,
    caption_text,
    follows_note,
    returned_media_note,
)
from contextfold.projections.render.runtime_lines import media_follows_line
from contextfold.projections.state import RunState
from contextfold.projections.tool_names import tool_name_alias

__all__ = ["TEXT_BYTES_PER_TOKEN", "FragmentMedia", "inline_size", "media_blocks", "media_key",
           "plan_fragment", "priced_as_sent", "refusal_note", "shown_medium", "shown_per_block"]

TEXT_BYTES_PER_TOKEN = 4
"""A first guess at what a token of the request's text takes of its bytes (about four characters
of English a token): the tokens a build selected times this is the text's room that the first
try of a limit on the whole request's size keeps. The request sent is then measured
(``request_size``): CJK text is ~1.3-3 bytes a token, indented code 50, an escaped control
character 6."""


def media_blocks(frag: ContextFragment) -> tuple[ImageBlock | DocumentBlock, ...]:
    """The priced media of a fragment: its own blocks and those inside a tool result."""
    return priced_media(frag.content)


def _key(block: ImageBlock | DocumentBlock | MediaPart) -> str:
    """What makes two media the same one for dedupe: the artifact's hash, else the URL's."""
    if block.artifact is not None:
        return block.artifact.hash
    return blake3.blake3((block.url or "").encode()).hexdigest()


media_key = _key


def inline_size(block: ImageBlock | DocumentBlock | MediaPart) -> tuple[bool, int | None]:
    """Whether the medium is sent as bytes, and their count when known (an artifact's size, a
    ``data:`` URL's payload): what a provider's size limit is read from, alike when planned
    and when finalized."""
    if block.artifact is not None:
        return True, block.artifact.size
    size = data_url_size(block.url)
    return size is not None, size


def refusal_note(provider: str, block: ImageBlock | DocumentBlock | MediaPart, fragment_id: str,
          width: int | None, height: int | None, model: str | None = None) -> str | None:
    """The note that stands for ``block`` in ``provider``'s request for ``model`` when the provider
    refuses it as it is (``media_limits``), else None. The model decides whether Chat Completions
    takes audio: planned here, the note is priced as it is sent (a PDF page's 3,015 tokens had
    been charged for it)."""
    inline, size = inline_size(block)
    kind = "image" if block.type == "image" or getattr(block, "kind", None) == "image" else "document"
    why = refusal(provider, kind, block.media_type, inline=inline, size=size, width=width, height=height,
                  url=block.url, audio_model=chat_audio_model(model) if provider == "openai-chat" else None)
    if why is None:
        return None
    return unsent_media_note(kind, media_type_key(block.media_type), shown_medium(block, fragment_id), why)


def shown_medium(block: ImageBlock | DocumentBlock | MediaPart, fragment_id: str) -> str:
    """How a note names a medium: its URL, or its fragment and the head of its key when it is sent
    as bytes (as the repeat line names it). Why the key: the fragment alone named 21 notes of one
    input alike ("image (image/png) e2"), and no note told which image it stood for."""
    if block.url is None or is_data_url(block.url):
        return f"{fragment_id} sha:{_key(block)[:12]}…"
    return shown_url(block.url)


@dataclass(frozen=True, slots=True)
class FragmentMedia:
    blocks: tuple[ImageBlock | DocumentBlock, ...]
    fold_tokens: int
    costs: tuple[MediaCost, ...]
    reduced_costs: tuple[MediaCost, ...]
    captions: int = 0
    """The text the provider's renderer writes around these media (``_caption_tokens``)."""
    notes: tuple[str | None, ...] = ()
    """Per medium: the note sent in its place when the provider refuses it (``refusal_note``), else None."""

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.costs) + self.captions

    @property
    def reduced_tokens(self) -> int:
        return sum(c.tokens for c in self.reduced_costs) + self.captions

    @property
    def reducible(self) -> bool:
        return self.reduced_tokens < self.tokens

    def records(self, *, reduced: bool, shown_in: dict[str, str] | None = None,
                unsent: dict[str, str] | None = None, own: str | None = None) -> tuple[MediaCostRecord, ...]:
        """Manifest lines: one per medium, the price used and the rule that set it, and why it was
        not attached when the provider refuses it (planned, or ``unsent`` by ``finalize_media``).
        ``own``: the fragment's id, for a medium it shows itself and repeats (:func:`shown_per_block`)."""
        costs = self.reduced_costs if reduced else self.costs
        notes = self.notes or (None,) * len(self.blocks)
        shown = shown_per_block(self.blocks, shown_in, own)
        out: list[MediaCostRecord] = []
        for block, cost, full, note, first in zip(self.blocks, costs, self.costs, notes, shown, strict=True):
            key = _key(block)
            note = note or (unsent or {}).get(key)
            out.append(MediaCostRecord(
                kind=block.type, media_type=media_type_key(block.media_type),  # as the request names it
                ref=f"sha:{key}" if block.artifact is not None else shown_url(block.url or "")[:80],
                width=getattr(block, "width", None), height=getattr(block, "height", None),
                pages=getattr(block, "pages", None), tokens=cost.tokens, rule=cost.rule,
                reduced_from=full.tokens if cost.tokens < full.tokens else None,
                shown_in=first, **({} if note is None else {"not_attached": note})))
        return tuple(out)


def shown_per_block(blocks: tuple[ImageBlock | DocumentBlock, ...], shown_in: Mapping[str, str] | None,
                    own: str | None) -> tuple[str | None, ...]:
    """Per block, the fragment whose copy the request shows it as (``MediaFinish.shown_in``: media
    key -> that fragment), None where this block is the copy shown. A fragment holding a medium
    twice shows the first and repeats the second (``shown_in`` names the fragment itself, ``own``):
    both were called repeats, so the manifest priced the image it sent as a repeat line."""
    if not shown_in:
        return (None,) * len(blocks)
    seen: set[str] = set()
    out: list[str | None] = []
    for block in blocks:
        key = _key(block)
        first = shown_in.get(key)
        if first is not None and first == own and key not in seen:
            seen.add(key)
            first = None
        out.append(first)
    return tuple(out)


def plan_fragment(state: RunState, frag: ContextFragment, provider: str,
                  model: str | None = None) -> FragmentMedia | None:
    """Provider prices for ``frag``'s media, or None when it carries none. ``model``: the one the
    request is for (OpenAI prices images per model; ``media_cost``)."""
    blocks = media_blocks(frag)
    if not blocks:
        return None
    notes = tuple(refusal_note(provider, b, frag.id, getattr(b, "width", None), getattr(b, "height", None),
                               model) for b in blocks)
    unsent = MediaCost(0, f"{media_family(provider)}-not-attached")  # its note is priced as caption text
    costs = tuple(unsent if n is not None else media_cost(provider, b, model)
                  for b, n in zip(blocks, notes, strict=True))
    reduced = tuple(media_cost(provider, r, model)
                    if n is None and (r := reduced_block(provider, b, model)) is not None
                    else c for b, c, n in zip(blocks, costs, notes, strict=True))
    fold = sum(block_tokens(state, b) for b in blocks)
    return FragmentMedia(blocks, fold, costs, reduced, _caption_tokens(state, frag, provider, blocks, notes),
                         notes if any(n is not None for n in notes) else ())


def priced_as_sent(state: RunState, frag: ContextFragment, provider: str, media: FragmentMedia,
                   unsent: Mapping[str, str]) -> FragmentMedia:
    """``media`` with those the request carries as notes for a rule of the whole request
    (``MediaFinish.unsent``: media key -> note) priced as those notes, as a medium refused on its
    own is (:func:`plan_fragment`): no media tokens, the note as caption text.

    Why: the selection priced them as media (whether a request breaks such a rule is known only
    once it is laid out), and the manifest kept that price: 21 panorama strips for Anthropic, each
    a note of ~40 tokens, were counted at ~1,500 tokens an image, so the manifest's tokens were far
    above the request's. The selection's room is not given back (a note costs less than its
    image), so the request stays within its budget."""
    planned = media.notes or (None,) * len(media.blocks)
    notes = tuple(n if n is not None else unsent.get(_key(b))
                  for b, n in zip(media.blocks, planned, strict=True))
    if notes == media.notes:
        return media
    zero = MediaCost(0, f"{media_family(provider)}-not-attached")
    costs = tuple(zero if n is not None else c for c, n in zip(media.costs, notes, strict=True))
    reduced = tuple(zero if n is not None else c for c, n in zip(media.reduced_costs, notes, strict=True))
    return FragmentMedia(media.blocks, media.fold_tokens, costs, reduced,
                         _caption_tokens(state, frag, provider, media.blocks, notes), notes)


def _caption_tokens(state: RunState, frag: ContextFragment, provider: str,
                    blocks: tuple[ImageBlock | DocumentBlock, ...], notes: tuple[str | None, ...]) -> int:
    """The text ``provider``'s renderer writes around ``frag``'s media, as written: a caption
    naming the source and trust of workspace and external media (every renderer), a tool's
    media named inside its result (OpenAI Chat, Gemini; Anthropic for a failed call's), and the
    runtime line that carries a tool's media after the results (OpenAI Chat's user message;
    Anthropic's for a failed call, since an ``is_error`` result takes text only), and the note
    that stands for a medium the provider refuses (``notes``). ``neutral``
    pays the dearest. They went unpriced: 12 tool results of one image each sent ~1,000 tokens
    more than the budget.
    (A deduped repeat is priced as if shown: dedupe only frees tokens.)"""
    count = state.counter.count
    captioned = frag.trust in ("workspace", "external")
    result = (next((b for b in frag.content if isinstance(b, ToolResultBlock)), None)
              if frag.kind == "tool_result" else None)
    chat = provider in ("openai-chat", "neutral")
    failed = (provider in ("anthropic", "neutral") and result is not None and result.status != "ok")
    total = 0
    for block, note in zip(blocks, notes, strict=True):
        kind = "image" if isinstance(block, ImageBlock) else "document"

        def caption(body: str, kind: str = kind) -> int:
            return count(caption_text(frag.source_ref, frag.trust, kind, body))

        if note is not None:  # the note in its place, captioned whatever the trust
            total += caption(note)
        elif captioned:
            total += caption(follows_note(kind, media_type_key(block.media_type)))
        if result is not None:
            total += max(caption(TOOL_MEDIA_NOTE) if chat else 0,
                         caption(ERROR_MEDIA_NOTE) if failed else 0,
                         caption(returned_media_note(kind, media_type_key(block.media_type)))
                         if provider in ("gemini", "neutral") else 0)
    if result is not None and (chat or failed):  # (a name shown under an alias: the longer of the two)
        name = result.name or ""
        total += (MESSAGE_OVERHEAD if chat else 0) + max(
            count(media_follows_line(result.call_id, shown)) for shown in (name, tool_name_alias(name)))
    return total
