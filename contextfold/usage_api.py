"""Recording a turn's provider-reported usage (``Run.observe_usage``).

Apart from :mod:`contextfold.api` as compaction is (:mod:`contextfold.compaction_api`): the run's
facade stays a list of entry points, and what one of them checks before it appends lives beside
the other modules that read a turn's records (:func:`contextfold.turn_reads.turn_keys`).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from contextfold.domain.checked import checked_turn
from contextfold.domain.errors import TurnNotFoundError
from contextfold.domain.log import RecordedEvent
from contextfold.projections.calibration import check_observation, checked_usage, uncached_only
from contextfold.turn_reads import turn_keys

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = ["UsageWarning", "observe_usage"]


class UsageWarning(UserWarning):
    """A usage report was recorded but looks like not what the calibration needs. A warning, not
    an error (``contextfold.errors`` holds those, all under ``ContextfoldError``): the report is
    possible, so nothing is refused. Filter it with :mod:`warnings`; the CLI prints it on stderr."""

_CHECK_KEYS = ("provider", "selected_tokens", "window_tokens")


def observe_usage(run: Run, turn: int, input_tokens: int, *, cached_tokens: int, output_tokens: int,
                  model: str | None, force: bool = False) -> RecordedEvent:
    """:meth:`Run.observe_usage`: check ``turn`` and the report against the turn's recorded builds
    (their windows, estimates and providers only, not the rest of their manifests), then append it;
    a report that looks like Anthropic's uncached input tokens alone is recorded with a
    :class:`UsageWarning` (:func:`~contextfold.projections.calibration.uncached_only`)."""
    turn = checked_turn(turn)
    last = run.next_turn()
    if not 1 <= turn <= last:
        raise TurnNotFoundError(run.run_id, turn, last)
    usage = checked_usage(turn, input_tokens, cached_tokens=cached_tokens, output_tokens=output_tokens,
                          model=model)
    records = turn_keys(run, turn, _CHECK_KEYS)
    windows = [w for r in records if isinstance(w := r.manifest.get("window_tokens"), int)]
    estimates = [e for r in records if isinstance(e := r.manifest.get("selected_tokens"), int)]
    check_observation(turn, usage.input_tokens, windows, estimates, force=force)
    recorded = run.append(usage)[0]
    newest = records[-1].manifest if records else None  # the request the report counts (fold)
    if newest is not None and isinstance(est := newest.get("selected_tokens"), int):
        provider = newest.get("provider")
        note = uncached_only(turn, usage, est, provider if isinstance(provider, str) else None)
        if note is not None:
            warnings.warn(note, UsageWarning, stacklevel=3)  # the caller of Run.observe_usage
    return recorded
