"""Room for the stable prefix's optional units (an instruction) in the selection's walk: the
order they are walked in (:func:`walk_shares`) and the grant one is cut to (:func:`stable_grant`).

Apart from :mod:`~contextfold.projections.selection` (which re-exports :func:`walk_shares`)
because both answer one question, the cache's: the stable prefix is what every provider's prompt
cache and the cache key cover, so it must not change turn to turn as the history grows.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["STABLE_LAYER", "STABLE_STEPS", "VOLATILE_LAYERS", "stable_grant", "walk_shares"]


STABLE_LAYER = "policy"
"""The layer of the stable prefix's optional units (an instruction): what the cache key covers."""
VOLATILE_LAYERS = ("history", "recent", "retrieval")
"""The layers a stable-prefix unit takes room from before it is cut (:func:`walk_shares`)."""


def walk_shares(shares: Mapping[str, float]) -> Mapping[str, float]:
    """The shares the walk's order uses: the stable layer's with the volatile layers' added.

    Why: the stable prefix is what a provider's prompt cache and the cache key cover. At its own
    share (0.10) an instruction came after ~9 times its size of the other layers, so where the
    budget was a few times its size it was the walk's stop, cut to what the history left: cut at
    one turn, whole at the next as the history grew and a group of it went, and the cache key
    flipped each time to save its cut part (an AGENTS.md of ~900 tokens at window 8k on the
    tau-bench runs: cut in 34 of 571 builds, 23 flips). With the volatile layers' shares it comes
    after about its own size of the others (0.9 of it at the defaults): kept whole wherever the
    room beside the required units is ~2.2 times its size, however long the history. A larger
    one is still cut, to what the others leave, as before: walked first, it would take all the
    room from every turn's history. The order still does not depend on the budget, so the walk
    stays monotone. A share of 0 stays 0 (walked last)."""
    own = shares.get(STABLE_LAYER, 0.0)
    if own <= 0:
        return shares
    return {**shares, STABLE_LAYER: own + sum(shares.get(layer, 0.0) for layer in VOLATILE_LAYERS)}


STABLE_STEPS = 8
"""The grants a cut stable-prefix unit may take: multiples of an eighth of its size
(:func:`stable_grant`)."""


def stable_grant(room: int, tokens: int, floor: int) -> int:
    """What a stable-prefix unit (an instruction) the walk stops at is cut to: ``room`` rounded
    down to a multiple of an eighth of its size, and never under ``floor``.

    Why: the room left for it changes every turn as the history grows, and cut to the room its
    text, so the cache key and every provider's cached prefix, changed with it (an AGENTS.md of
    ~900 tokens at window 3k on the tau-bench runs: cut in every build, a new key at 246 of 531
    turns). In eighths it is cut alike until the room crosses an eighth's bound; what it costs is
    at most an eighth of it left unused where the walk stops. Monotone: the grant never falls as
    the room grows, so a larger budget keeps at least as much of it."""
    step = max(1, tokens // STABLE_STEPS)
    return max(floor, room - room % step)
