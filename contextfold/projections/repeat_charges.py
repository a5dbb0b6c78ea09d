"""What the selection charges a unit for a medium another unit pays for: its repeat line.

Why a module of its own: the request carries a medium once, at its first place, and every other
copy as a one-line repeat (``media_plan.finalize_media``); the selection walks its units in an
order that does not depend on the budget, and charges each medium in full to the first kept unit
that sends it and a repeat line to the others (``selection.select_units``). Which copy the request
shows need not be the one that paid, but together the kept units pay for every medium once and a
line for every other copy, as the request carries them. Pure: the walk's own arithmetic, on the
plain values a unit carries (``selection.Unit.media``), made by ``media_repeats.unit_media``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

if TYPE_CHECKING:  # types only (selection imports this module)
    from contextfold.projections.selection import Unit

__all__ = ["MediaEntry", "Repeat", "pay", "repeat_saving", "repeat_slack"]

MediaEntry: TypeAlias = tuple[str, int, int, int]
"""One medium a unit sends: (its key, its price, its price reduced, the tokens of its repeat line)."""


class Repeat(NamedTuple):
    """What a kept unit's repeated media saved: the tokens, and the media (keys) charged as lines."""

    saved: int
    keys: frozenset[str]


def pay(paid: dict[str, int], media: Iterable[MediaEntry]) -> None:
    """Note ``media`` as paid for (key -> the dearest price paid: a dearer copy raises it)."""
    for key, full, _, _ in media:
        if full > paid.get(key, 0):
            paid[key] = full


def repeat_saving(media: Iterable[MediaEntry], paid: Mapping[str, int]) -> tuple[int, int, Repeat | None]:
    """(tokens saved, tokens the smallest size saves, what was saved) when each medium of ``media``
    that ``paid`` holds is charged its repeat line, and what this copy costs beyond the price paid
    (a copy the request may show dearer: another detail). Nothing saved: (0, 0, None).

    The smallest size saves less: a repeat is never reduced (``kept_texts``), so where a unit's
    smallest size counted the medium reduced it now counts the line (possibly more)."""
    saved = smallest_saved = 0
    keys: set[str] = set()
    for key, full, reduced, line in media:
        have = paid.get(key)
        if have is None:
            continue
        cost = line + max(0, full - have)
        if cost < full:
            saved += full - cost
            smallest_saved += reduced - cost
            keys.add(key)
    if not saved:
        return 0, 0, None
    return saved, smallest_saved, Repeat(saved, frozenset(keys))


def repeat_slack(heads: Mapping[str, Sequence[Unit]], paid: Container[str]) -> dict[str, int] | None:
    """Per layer, the most the units of its ``heads`` may save as repeats: a medium is charged as
    a line only where another unit pays for it, one of ``paid`` (the required units') or of
    another unit the walk may keep first, which is in a head. None when no unit in them sends
    media (nothing to save).

    Why: the walk's reach (``selection._reach``) assumed units cost their tokens; a repeat costs
    less, and the walk went past a layer's reach (units were left unordered). A medium sent by
    one unit alone saves nothing, so a run of distinct screenshots widens nothing."""
    with_media = [(layer, u) for layer, head in heads.items() for u in head if u.media]
    if not with_media:
        return None
    holders = Counter(key for _, u in with_media for key in {m[0] for m in u.media})
    out = dict.fromkeys(heads, 0)
    for layer, u in with_media:
        out[layer] += sum(max(0, full - line) for key, full, _, line in u.media
                          if key in paid or holders[key] > 1)
    return out
