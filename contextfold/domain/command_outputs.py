"""The ``--json`` outputs of the commands that read or append to a run's log without building it:
``runs``, ``verify``, ``usage``, ``build``, ``compact``. Each is a frozen model with
``extra="forbid"`` that the CLI validates what it prints into and dumps.

Why models: scripts read these outputs (CI gates on ``verify --json``, dashboards read ``runs
--json``), and as ad-hoc dicts a field could vanish in a release unnoticed. A model is the
contract: ``contextfold schema NAME`` prints its JSON Schema, a test runs each command on a
recorded run and validates its output against that schema, and the shape of each schema is
pinned (``tests/e2e/test_json_outputs.py``), so a change of shape is a deliberate act.

An optional field is left out of the output when it is None (``exclude_if``), as the dicts did:
a key that appears only with a flag (``--content``'s ``request``) stays absent without it.
The audit's outputs (``audit``, ``audit --turn``, ``why``, ``diff``, ``replay --verify``) are in
:mod:`contextfold.audit.outputs`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from contextfold.domain.events import HistoryCompacted
from contextfold.domain.manifest import ContextManifest

__all__ = ["BuildOutput", "CompactOutput", "RunLine", "UsageOutput", "VerifyOutput"]


class _Output(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunLine(_Output):
    """One run of ``runs --json`` (the output is a list of them, oldest first)."""

    run_id: str
    events: int
    first_at: str | None
    """The earliest of its events' times (ISO 8601, UTC, ``Z``); None when none has a time
    (recorded before times were kept, or imported from a format without them)."""
    last_at: str | None
    """The latest of its events' times, as ``first_at``."""


class VerifyOutput(_Output):
    """``verify RUN --json``: the chain recomputed. Exit 0 when ``ok``, 3 when not."""

    run_id: str
    ok: bool
    events: int
    first_bad_position: int | None
    """The first position whose stored event does not match its hash (None when ``ok``)."""
    reason: str
    head: str | None
    """The chain hash of the run's last event when the chain is intact (None when it is not, or
    the run is empty): the value a sender hands over with an export."""


class UsageOutput(_Output):
    """``usage RUN --turn N ... --json``: the ``usage_observed`` event recorded."""

    run_id: str
    turn: int
    position: int
    """The log position the report was recorded at."""
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    model: str | None
    estimated_tokens: int | None
    """The turn's newest record's estimate (None: the turn has no record, so the report will not
    calibrate later builds)."""
    ratio: float | None
    """``input_tokens / estimated_tokens`` (None without a record)."""
    warnings: tuple[str, ...]
    """What the report will not do (calibrate), as the text output's WARNING lines say."""


class BuildOutput(_Output):
    """``build RUN --json``: the request body (the provider's shape: its SDK types are its schema)
    and the manifest of the build."""

    request: dict[str, Any]
    manifest: ContextManifest


class CompactOutput(_Output):
    """``compact RUN --json``: the ``history_compacted`` events appended (or, ``dry_run``, that
    would be) and the tokens they replace."""

    dry_run: bool
    positions: tuple[int, ...]
    """Where each event was appended (empty on a dry run)."""
    replaced_tokens: int
    stand_in_tokens: int
    recovery: tuple[str, ...]
    """Recovery events appended for calls the compaction covers: ``kind:call_id``."""
    events: tuple[HistoryCompacted, ...]
