"""A medium repeated in a request: what its repeat costs, and the room that frees.

Why a module of its own: ``finalize_media`` sends a medium once, at its first place in the
request, and every later occurrence as a one-line repeat ("is the same as the one shown above").
Priced as the medium every time, the repeat overstated the request: the manifest charged the
current input's repeat the full image price (765 tokens for OpenAI) for one line of text, and a
tight budget dropped the older input that shows the image (Anthropic, Gemini: the newer one then
carried it), or reduced it to ``detail: low`` (OpenAI), to pay for tokens never sent.

- :func:`unit_media`: what a selection unit's media cost, reduced, and as a repeat line. The
  selection charges a medium a kept unit already pays for as that line (``selection.Unit.media``).
- :func:`reduction_saving`: what reducing a fragment saves of the media it pays for (a repeat
  line is not reduced: the medium it stands for is paid by another unit).
- :func:`repeat_room`: per shown copy, the tokens its kept repeats were priced at beyond their
  repeat lines, when those repeats were paid in full (both required, the selection charging
  neither as a repeat). ``kept_texts`` takes it off the shown copy's deficit and never reduces
  that copy: the request still fits, since every repeat sends less than it was granted.
- :func:`priced_as_repeats`: the manifest prices a repeat as its repeat line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from contextfold.projections.media_cost import MediaCost, media_family
from contextfold.projections.media_plan import FragmentMedia, media_key, shown_per_block
from contextfold.projections.render.runtime_lines import media_repeat_line
from contextfold.projections.state import RunState

__all__ = ["priced_as_repeats", "reduction_saving", "repeat_room", "unit_media"]

_MARGIN = 8
"""Tokens kept back per repeat for the text part that carries its line (its framing), and for the
fragment it names (the selection names the repeat's own: the one that shows it is not known yet)."""


def _repeat_tokens(state: RunState, kind: str, key: str, media_type: str, first: str) -> int:
    return state.counter.count(media_repeat_line(kind, key, media_type, first))


def unit_media(state: RunState, media_of: Callable[[str], FragmentMedia | None], fids: Iterable[str]
               ) -> tuple[tuple[str, int, int, int], ...]:
    """The media the fragments ``fids`` send, each (key, price, price reduced, repeat line and
    margin): ``selection.Unit.media``. A medium the provider refuses (its note) is none."""
    out: list[tuple[str, int, int, int]] = []
    for fid in fids:
        media = media_of(fid)
        if media is None:
            continue
        notes = media.notes or (None,) * len(media.blocks)
        for block, cost, reduced, note in zip(media.blocks, media.costs, media.reduced_costs, notes,
                                              strict=True):
            if note is None:
                key = media_key(block)
                line = _repeat_tokens(state, block.type, key, block.media_type, fid) + _MARGIN
                out.append((key, cost.tokens, reduced.tokens, line))
    return tuple(out)


def reduction_saving(media: FragmentMedia, repeated: frozenset[str]) -> int:
    """What reducing ``media`` saves (its cheaper rendition) of the media it pays for: not of those
    the selection charged as repeat lines (``repeated``: keys), which cost the same reduced or not."""
    if not repeated:
        return media.tokens - media.reduced_tokens
    return sum(c.tokens - r.tokens
               for b, c, r in zip(media.blocks, media.costs, media.reduced_costs, strict=True)
               if media_key(b) not in repeated)


def repeat_room(state: RunState, kept: Iterable[tuple[str, FragmentMedia, bool]],
                repeated: frozenset[str] = frozenset()) -> dict[str, int]:
    """Shown copy's fragment id -> the tokens its later kept repeats free.

    ``kept``: the kept fragments with media (id, priced media, whether it was granted its full
    price), any order; they are taken in log order, as the layout sends them. A medium the
    provider refuses (its note) is no repeat. A repeat whose unit was cut frees nothing here: its
    price may have been reduced already. Nor does one of a medium the selection charged as a
    repeat line anywhere (``repeated``: keys): the selection paid it once already."""
    order = sorted(kept, key=lambda k: (state.entries[k[0]].position, k[0]))
    first: dict[str, str] = {}
    room: dict[str, int] = {}
    for fid, media, full in order:
        notes = media.notes or (None,) * len(media.blocks)
        for block, cost, note in zip(media.blocks, media.costs, notes, strict=True):
            if note is not None:
                continue
            key = media_key(block)
            if key in repeated:
                continue
            shown = first.setdefault(key, fid)
            if shown == fid or not full:
                continue
            line = _repeat_tokens(state, block.type, key, block.media_type, shown) + _MARGIN
            room[shown] = room.get(shown, 0) + max(0, cost.tokens - line)
    return room


def priced_as_repeats(state: RunState, provider: str, media: FragmentMedia,
                      shown_in: Mapping[str, str] | None, own: str | None = None) -> FragmentMedia:
    """``media`` with the occurrences ``finalize_media`` sent as repeat lines (``shown_in``: media
    key -> the fragment that shows it; ``own``: this fragment, which may show one copy and repeat
    another: ``media_plan.shown_per_block``) priced as those lines (rule ``FAMILY-shown-above``)."""
    if not shown_in:
        return media
    family = media_family(provider)
    shown = shown_per_block(media.blocks, shown_in, own)
    repeats = {i: MediaCost(_repeat_tokens(state, b.type, media_key(b), b.media_type, first),
                            f"{family}-shown-above")
               for i, (b, first) in enumerate(zip(media.blocks, shown, strict=True)) if first is not None}
    if not repeats:
        return media
    costs = tuple(repeats.get(i, c) for i, c in enumerate(media.costs))
    reduced = tuple(repeats.get(i, c) for i, c in enumerate(media.reduced_costs))
    return FragmentMedia(media.blocks, media.fold_tokens, costs, reduced, media.captions, media.notes)
