"""What selection walks and what it answers: :class:`Unit`, :class:`Selection` and the score.

Apart from :mod:`contextfold.projections.selection` (which re-exports them) because the units are
made by the timeline, tool and fragment code that the walk knows nothing of, and read back by the
exclusions, texts and the build; the walk itself is the other module's. The score's reasoning
(a horizon-free age term) is in that module's docstring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from contextfold.projections.repeat_charges import MediaEntry, Repeat

__all__ = ["AGE_WEIGHT", "COST_WEIGHT", "MIN_TRUNCATED_TOKENS", "REST_STEP", "Selection", "Unit", "score"]

AGE_WEIGHT = 0.4
"""Score points per log position of age (see :mod:`contextfold.projections.selection`)."""
COST_WEIGHT = 2.0
MIN_TRUNCATED_TOKENS = 48
"""Below this many tokens of space, a truncated unit is not worth its marker lines."""
REST_STEP = 1_000
"""The steps of a rest with a share of its own (``Unit.rest_share``): each is walked at its own
virtual finish time, so the rest takes its share of the room the walk reaches, step by step."""


def score(priority: int, position: int, tokens: int) -> float:
    """The documented score plus ``AGE_WEIGHT * horizon``: the same for every build of the run."""
    return priority + AGE_WEIGHT * position - COST_WEIGHT * math.log2(1 + tokens)


@dataclass(slots=True, unsafe_hash=True)
class Unit:
    """What selection keeps or drops as a whole: one fragment, or an atomic tool group.

    ``tokens`` includes framing overhead. ``min_tokens`` is the smallest size
    the unit can be truncated to (== tokens when it cannot be truncated). ``needs``: the
    names of the tools a group's calls use, kept with it (``select_units(tools=...)``).
    ``part``: for a required unit, how many of its tokens are required (the rest is walked
    as an optional unit of its own, ranked as this one, and granted like any other); None:
    all of them. ``if_fits``: a required unit required only when it fits beside the other
    required units (the latest error: see :func:`select_units`). ``rest_share``: the rest of a
    unit required in part competes as a layer of its own with this share of the layers' shares
    together, in ``REST_STEP``-token steps, instead of ranked as its unit in its layer (the
    newest group: see :func:`select_units`). ``media``: the media its fragments send (no note
    standing for one), each a :data:`MediaEntry`: a medium a unit before it pays for is charged
    its repeat line (the module docstring).

    Not ``frozen``, for speed: a frozen dataclass sets each field through ``object.__setattr__``
    (a Unit took ~5 us to make against ~0.8 with plain slot stores), and every first build of a
    turn makes several. Nothing assigns to a Unit once made; equality and hashing are a frozen
    one's (``unsafe_hash``). :class:`Selection`, ``fragment_facts.Facts`` and
    ``timeline_units.ItemFacts`` are made alike for the same reason.
    """

    id: str
    layer: str
    tokens: int
    score: float
    position: int
    required: bool = False
    min_tokens: int | None = None
    needs: tuple[str, ...] = ()
    part: int | None = None
    if_fits: bool = False
    rest_share: float | None = None
    media: tuple[MediaEntry, ...] = ()
    rank: tuple[float, int, str] = field(init=False, repr=False, compare=False)
    """Order within a layer: higher score, then newer, then id (unique: ids are)."""

    def __post_init__(self) -> None:
        self.rank = (-self.score, -self.position, self.id)

    @property
    def shrinkable(self) -> bool:
        return self.min_tokens is not None and self.min_tokens < self.tokens


@dataclass(slots=True, unsafe_hash=True)
class Selection:
    kept: dict[str, int]
    """Unit id -> tokens granted (less than the unit's tokens when it must be truncated)."""
    walked: dict[str, str]
    """The units the walk dropped: id -> ``over_budget`` (did not fit where its turn came) or
    ``low_priority`` (ordered after the stop). See :attr:`dropped` for every dropped unit."""
    used: int
    over_budget: tuple[str, ...] = ()
    """The ids in ``dropped`` as ``over_budget`` (the rest are ``low_priority``)."""
    cut: tuple[str, ...] = ()
    """The ids in ``kept`` granted fewer tokens than they need (to be truncated)."""
    unreached: tuple[Sequence[Unit], ...] = ()
    """Units out of the walk's reach, all ``low_priority``: most of a long run's history. Kept as
    the slices they are, not copied into a dict, since a caller that knows what it kept (or what
    it had) rarely needs them one by one; empty when ``select_units(list_unreached=False)``."""
    needed: frozenset[str] = frozenset()
    """The tool unit ids in ``kept`` kept because a kept unit needs them (``Unit.needs``); a
    tool kept by its own unit before such a unit came is not among them."""
    repeats: Mapping[str, Repeat] = field(default_factory=dict)
    """The kept units charged a repeat line for a medium another kept unit pays for: a unit's
    grant is then up to ``Repeat.saved`` below its tokens without cutting anything."""

    @property
    def dropped(self) -> dict[str, str]:
        """Every optional unit not kept: id -> ``over_budget`` or ``low_priority``."""
        out = dict(self.walked)
        for tail in self.unreached:
            out.update(dict.fromkeys(map(_UNIT_ID, tail), "low_priority"))
        return out


_UNIT_ID = attrgetter("id")
