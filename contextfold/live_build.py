"""A live build of a run: the recovery events the protocol needs, the build, and its record,
appended in one transaction once the build succeeds (:func:`build_live`).

Apart from :mod:`contextfold.api` (``Run._build_live`` calls it) because it is the one place a
build writes to the log: what it appends and when, against the version the build folded.
``render_request`` is looked up on :mod:`contextfold.api` at each build, so the seam a caller
or test replaces there (``contextfold.api.render_request``) is the one a live build uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from contextfold import api
from contextfold.domain.events import AnyEvent, ToolCallCancelled, ToolResultLost
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event
from contextfold.projections.repair import recovery_events
from contextfold.projections.state import RunState

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = ["build_live"]


def build_live(run: Run, state: RunState, planned: Sequence[AnyEvent], cfg: BuildConfig, *,
               record: bool = True, write: bool = True,
               before_record: Callable[[BuildResult], None] | None = None) -> BuildResult:
    """The live build of ``state``: the run's state now with ``planned`` (events not yet in
    the log, e.g. a compaction's) folded in. ``planned``, the recovery events and the record
    are appended in one transaction once the build succeeds: a build that fails (a budget
    error, a refused request) leaves the log unchanged. Without ``write``, nothing is."""
    recovery = recovery_events(state, in_flight=cfg.in_flight)
    version = state.version - len(planned)
    if recovery:
        # folded into a copy and appended once the build succeeds: a build that fails (a
        # budget error) must not leave cancellations of calls still in flight in the log
        state, base = state.snapshot(), state.version
        for offset, event in enumerate(recovery, start=1):
            fold_event(state, RecordedEvent(run.run_id, base + offset, event, ""))
    # the recovery events an auto-compaction planned first (folded with its steps) are this
    # build's repairs too: the manifest left them out when they came through ``planned``
    repairs = [f"{e.type}:{e.call_id}" for e in (*planned, *recovery)
               if isinstance(e, ToolResultLost | ToolCallCancelled)]
    result = build_context(state, cfg, load_text=run.store.cited_text, render=api.render_request,
                           repairs=repairs, calibration=run._calibration(state, cfg),
                           load_bytes=run.store.events.cited_artifact)
    if not write:
        return result
    if before_record is not None:
        before_record(result)
    if planned or recovery:
        run.append(planned, recovery, [result.record(rebuild=False)] if record else [],
                   expected_version=version)
    elif record:
        run.append(result.record(rebuild=False))
    return result
