"""A run's context-built records read in one pass: each turn's first manifest validated, the
excluded lines it shares with the record before it held once.

Why: a record's manifest lists every fragment its build left out, so on a long run without
compaction each record repeats nearly all of the one before it and grows with the run. The
audit read the run whole (every record's manifest decoded as JSON), then validated each turn's
first manifest, every line its own object, and held both: on a 1,666-turn run (5,000 events)
``audit_run`` took 76 s and 6.0 GB, growing as the square of the run; now 9 s and 317 MB
(``scripts/measure_audit.py``). Here:

- a line whose JSON equals the previous record's line of the same id is that line's object,
  so the pydantic validation runs on what changed (a few lines per turn), not on every line;
- :func:`read_records` is given the events as a stream and keeps each context-built event
  *slimmed* (its manifest emptied, as the audit reads nothing more of it than the manifest
  read here): memory holds one record's JSON at a time and one reference per line per turn.

Pure: events in, manifests out; the caller reads the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from contextfold.audit.effects import Build
from contextfold.domain.errors import IntegrityError
from contextfold.domain.events import ContextBuilt
from contextfold.domain.excluded_lines import ExcludedLines
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import ContextManifest, ExcludedFragment
from contextfold.projections.calibration import Estimate, record_estimate

__all__ = ["ManifestReader", "RecordedManifests", "read_records"]


class ManifestReader:
    """Validates manifests in the order their records were logged, reusing the excluded-line
    objects of the one before: a line is reused only when its JSON is equal to that line's, so
    the result equals ``ContextManifest.model_validate(raw)`` (invalid input raises the same
    ``ValidationError``, from the lines it did not reuse)."""

    __slots__ = ("_previous",)

    def __init__(self) -> None:
        self._previous: dict[str, tuple[Any, ExcludedFragment]] = {}

    def read(self, raw: Mapping[str, Any]) -> ContextManifest:
        items = raw.get("excluded_items")
        if not isinstance(items, list) or not items:
            self._previous = {}
            return ContextManifest.model_validate(raw)
        previous = self._previous
        lines: list[ExcludedFragment | None] = []
        fresh_at: list[int] = []
        fresh: list[Any] = []
        for item in items:
            key = item.get("id") if isinstance(item, dict) else None
            hit = previous.get(key) if type(key) is str else None
            if hit is not None and hit[0] == item:
                lines.append(hit[1])
            else:
                fresh_at.append(len(lines))
                fresh.append(item)
                lines.append(None)
        manifest = ContextManifest.model_validate({**raw, "excluded_items": fresh})
        for at, line in zip(fresh_at, manifest.excluded_items, strict=True):
            lines[at] = line
        held = tuple(line for line in lines if line is not None)
        self._previous = {item["id"]: (item, line) for item, line in zip(items, held, strict=True)}
        return manifest.model_copy(update={"excluded_items": ExcludedLines.of(held)})


@dataclass
class RecordedManifests:
    """What a run's context-built records say, per turn and per record."""

    first: dict[int, ContextManifest] = field(default_factory=dict)
    """Each turn's first record's manifest (what the runtime actually built and sent)."""
    counts: dict[int, int] = field(default_factory=dict)
    """Records per turn (a rebuild adds one)."""
    estimates: dict[int, Estimate | None] = field(default_factory=dict)
    """Per record's position: its manifest's selected tokens, model and provider (what calibration
    reads: ``calibration.record_estimate``)."""
    builds: list[Build] = field(default_factory=list)
    """Every record's turn, log version and tokens, in log order: a turn built again after a
    compaction is a request of its own on the compaction's other side (``audit.effects``)."""

    def add(self, rec: RecordedEvent, reader: ManifestReader) -> None:
        event = rec.event
        assert isinstance(event, ContextBuilt)
        self.counts[event.turn] = self.counts.get(event.turn, 0) + 1
        estimate = self.estimates[rec.position] = record_estimate(event)
        if event.turn not in self.first:
            first = self.first[event.turn] = _manifest(rec, event, reader)
            self.builds.append(Build(event.turn, first.log_version, first.selected_tokens))
        elif estimate is not None:  # (a record made by hand may say no tokens: no request to weigh)
            self.builds.append(Build(event.turn, event.log_version, estimate[0]))


def _manifest(rec: RecordedEvent, event: ContextBuilt, reader: ManifestReader) -> ContextManifest:
    """The record's manifest, or an IntegrityError naming its run, turn and position, as
    ``manifest --turn``, ``why`` and ``replay`` say of it: a record appended by hand (or imported
    from an events file) may hold no valid manifest, and the audit died with pydantic's traceback
    and exit 1, the code of "a check found a difference"."""
    try:
        return reader.read(event.manifest)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(map(str, first["loc"])) or "the manifest"
        raise IntegrityError(
            f"run {rec.run_id!r} turn {event.turn}: its context_built record at position {rec.position} "
            f"holds no valid manifest ({exc.error_count()} error(s), the first at {where}: {first['msg']})",
            position=rec.position) from exc


def read_records(events: Iterable[RecordedEvent], *, slim: bool = False
                 ) -> tuple[list[RecordedEvent], RecordedManifests]:
    """The events as a list, and what their context-built records say. With ``slim``, each
    context-built event in the list has an empty manifest (read here, not kept): for a caller
    that reads the records only through :class:`RecordedManifests`."""
    out: list[RecordedEvent] = []
    recorded = RecordedManifests()
    reader = ManifestReader()
    for rec in events:
        if isinstance(rec.event, ContextBuilt):
            recorded.add(rec, reader)
            if slim:
                rec = RecordedEvent(rec.run_id, rec.position, rec.event.model_copy(update={"manifest": {}}),
                                    rec.hash)
        out.append(rec)
    return out, recorded
