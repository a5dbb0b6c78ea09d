"""What an audit holds: a run's turns (each one's manifest, what changed, what was repaired), its
summary and its integrity.

Why a module of its own: :mod:`contextfold.audit.data` collects these from the log (folding,
rebuilding, reading records) and had passed 500 lines; these are the values it returns, which
the report, the charts and the CLI read without the collecting. ``audit.data`` re-exports every
name, so ``from contextfold.audit.data import RunAudit`` keeps working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from contextfold.audit.effects import CompactionEffect
from contextfold.domain.manifest import ContextManifest

__all__ = [
    "AuditSummary",
    "CompactionNote",
    "Integrity",
    "ProtocolRepair",
    "RunAudit",
    "TurnAudit",
    "UnbuiltTurn",
    "Usage",
    "unbuilt_answer",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Integrity(_Frozen):
    ok: bool
    events: int
    first_bad_position: int | None = None
    reason: str = ""
    head: str | None = None
    """The chain hash of the run's last event when the chain is intact (None when it is not, or the
    run is empty): the chain holds the run's id and every event in order, so the same run id
    imported from the same export ends at the same head and an edited one elsewhere. A sender
    hands it over with the export; the receiver's audit shows whether it is the log they got."""


class ProtocolRepair(_Frozen):
    position: int
    kind: Literal["lost", "cancelled"]
    call_id: str
    reason: str


class CompactionNote(_Frozen):
    position: int
    covers_from: int
    covers_to: int
    strategy: str
    summarizer: str


class Usage(_Frozen):
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    model: str | None
    estimated_tokens: int
    """Our count of the request the report counts: the record calibration pairs it with (the
    turn's newest record logged before the report: ``projections.usage_pairs``), which need not
    be the turn's first record the audit shows (a request refused for length, then retried); the
    turn's manifest's for a turn without a record (its rebuild)."""
    record_position: int | None
    """The log position of that record (None: a rebuilt turn's, or a record that counts nothing)."""


class TurnAudit(_Frozen):
    turn: int
    source: Literal["recorded", "rebuilt"]
    """recorded: the turn's first context_built record; rebuilt: derived from the log now."""
    records: int
    manifest: ContextManifest
    prefix_changed: bool | None
    """The cache key differs from that of the latest earlier turn built for the same provider
    (None for a provider's first turn)."""
    prefix_against: int | None
    """That earlier turn (None for a provider's first turn)."""
    config_changed: bool | None
    diff: dict[str, Any] | None
    repairs: tuple[ProtocolRepair, ...]
    """Lost/cancelled recovery events logged since the previous turn's build."""
    compactions: tuple[CompactionNote, ...]
    usage: Usage | None

    @property
    def build_notes(self) -> tuple[str, ...]:
        """The manifest's repairs that are not logged recovery events (e.g. a declared tool)."""
        logged = {f"tool_result_lost:{r.call_id}" if r.kind == "lost" else f"tool_call_cancelled:{r.call_id}"
                  for r in self.repairs}
        return tuple(r for r in self.manifest.repairs if r not in logged)


class AuditSummary(_Frozen):
    turns: int
    recorded_turns: int
    rebuilt_turns: int
    prefix_reused: int
    """Turns whose stable-prefix cache key equals that of the latest earlier turn of their provider."""
    prefix_compared: int
    """Turns that had an earlier turn of their provider to compare with: what ``prefix_reused`` is
    out of. Not ``turns - 1``: a provider's first turn, after a fallback to another, has nothing
    to re-use, and the summary read "1 of 2 turns re-used" for a prefix that never changed."""
    prefix_changed_turns: tuple[int, ...]
    prefix_pairs: tuple[tuple[int, int], ...]
    """The (earlier, later) turns compared, ``prefix_compared`` of them: each later turn with the
    latest earlier turn built for its provider (so not always the turn before it)."""
    config_changed_turns: tuple[int, ...]
    tool_schema_tokens: dict[str, float]
    """latest, max, mean and the share of the selected tokens (latest turn)."""
    tool_schema_answer: str
    retrieval_crowded_turns: tuple[int, ...]
    retrieval_answer: str
    largest_fragments: tuple[dict[str, Any], ...]
    repairs: int
    """The run's protocol repairs: each logged recovery event, and each build-time repair (a tool
    declared because the log never registered it) once, however many turns' builds made it."""
    compactions: int
    usage_turns: int
    latest_correction: float | None


class UnbuiltTurn(_Frozen):
    """A turn without a record that its config cannot build (the runtime's own build of it failed
    too, or never ran): the audit says so and goes on with the other turns."""

    turn: int
    error: str
    """The error's type, e.g. ``RequiredContextExceedsBudgetError``."""
    message: str


def unbuilt_answer(unbuilt: Sequence[UnbuiltTurn]) -> str:
    """The one line the text summary and the report give for ``unbuilt`` (non-empty): how many,
    which (the first 20), and the first one's error."""
    first = unbuilt[0]
    more = f" … (+{len(unbuilt) - 20})" if len(unbuilt) > 20 else ""
    turns = ", ".join(str(u.turn) for u in unbuilt[:20]) + more
    return (f"{len(unbuilt)} turns without a record cannot be built under the config used (turns {turns}); "
            f"turn {first.turn}: {first.error}: {first.message}")


class RunAudit(_Frozen):
    run_id: str
    events: int
    integrity: Integrity
    turns: tuple[TurnAudit, ...]
    summary: AuditSummary
    unbuilt: tuple[UnbuiltTurn, ...] = ()
    """Turns without a record that could not be rebuilt; ``turns`` holds the others."""
    compaction_effects: tuple[CompactionEffect, ...] = ()
    """Each compaction's turns before and after it: tokens, repeated calls, failed results."""
