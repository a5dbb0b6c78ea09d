"""The ``--json`` outputs of the audit's commands: ``audit``, ``audit --turn``, ``why`` (one turn
and across turns), ``diff`` and ``replay --verify``. Each is a frozen model with
``extra="forbid"`` that the CLI validates what it prints into and dumps; ``contextfold schema
NAME`` prints its JSON Schema (:data:`contextfold.cli.SCHEMAS`).

Why: incident tooling reads ``audit --json`` and ``why --json``; as ad-hoc dicts their fields had
no contract, and one could vanish in a release unnoticed. The field names are those the dicts
had. An optional field is left out when it is None (``exclude_if``), as the dicts left it out:
``matched`` appears on a match found by words only, ``request`` with ``--content`` only.
:mod:`contextfold.domain.command_outputs` holds the other commands' outputs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from contextfold.audit.effects import CompactionEffect
from contextfold.audit.models import AuditSummary, Integrity, ProtocolRepair, UnbuiltTurn, Usage
from contextfold.domain.manifest import ContextManifest

__all__ = [
    "AuditOutput",
    "AuditTurnLine",
    "AuditTurnOutput",
    "CompactedEvent",
    "DiffEntered",
    "DiffLeft",
    "DiffOutput",
    "DiffReplaced",
    "DiffRestored",
    "DiffTruncated",
    "DroppedFragment",
    "ExposedTool",
    "HashPair",
    "HiddenTool",
    "KeptFragment",
    "RecordCheck",
    "RecordPicked",
    "ReplayVerifyOutput",
    "SettingChange",
    "TokensChange",
    "UnrecordedCheck",
    "WhyAcrossTurnsOutput",
    "WhyMatch",
    "WhyOutput",
    "WhySpan",
]


class _Output(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _absent(value: object) -> bool:
    return value is None


# ---------------------------------------------------------------- audit


class AuditTurnLine(_Output):
    """One turn of ``audit --json``: its request's size and cache key, and what changed."""

    turn: int
    source: Literal["recorded", "rebuilt"]
    selected: int
    budget: int
    cache_key: str
    prefix_changed: bool | None
    config_changed: bool | None
    repairs: tuple[ProtocolRepair | str, ...]
    """The logged recovery events since the turn before, then the build's own repairs (strings)."""
    usage: Usage | None


class AuditOutput(_Output):
    """``audit RUN --json``: the run's summary. Exit 0, or 3 when the chain is broken."""

    run_id: str
    events: int
    integrity: Integrity
    summary: AuditSummary
    compaction_effects: tuple[CompactionEffect, ...]
    unbuilt: tuple[UnbuiltTurn, ...]
    turns: tuple[AuditTurnLine, ...]


class HashPair(_Output):
    recorded: str
    rebuilt: str


class RecordCheck(_Output):
    """A recorded turn checked: its record's hashes beside the rebuild's."""

    recorded: Literal[True]
    records: int
    record: int
    rebuild_of_record: bool
    """The record checked is a rebuild's (no live build of the turn was recorded)."""
    request_hash: HashPair
    cache_key: HashPair
    config_hash: HashPair


class UnrecordedCheck(_Output):
    """A turn with no ``context_built`` record: nothing was checked (exit 2)."""

    recorded: Literal[False]
    note: str


class AuditTurnOutput(_Output):
    """``audit RUN --turn N --json``: the turn re-derived and checked. ``ok`` only when a record
    was checked and matched: exit 0; 1 a difference; 2 no record to check; 3 the chain broken."""

    turn: int
    integrity: Integrity
    check: RecordCheck | UnrecordedCheck
    problems: tuple[str, ...]
    ok: bool
    manifest: ContextManifest
    request: dict[str, Any] | None = Field(default=None, exclude_if=_absent)
    """The request body (with ``--content`` only)."""


# ---------------------------------------------------------------- why


def _matched() -> Any:
    """``matched``: ``text of event N`` on a match found by the words its logged text holds, not
    by id, tool name or source (absent then); last in each match, as the dicts had it."""
    return Field(default=None, exclude_if=_absent)


class KeptFragment(_Output):
    """A fragment the request holds."""

    id: str
    verdict: Literal["kept"]
    kind: str
    trust: str
    layer: int
    source_ref: str
    tokens: int
    truncated: bool
    reason: str
    matched: str | None = _matched()


class DroppedFragment(_Output):
    """A fragment the build left out, and why."""

    id: str
    verdict: Literal["dropped"]
    kind: str
    source_ref: str
    tokens: int
    reason: str
    replaced_by: str | None
    """What took its place (null when nothing did)."""
    detail: str
    matched: str | None = _matched()


class ExposedTool(_Output):
    """A tool the request declares."""

    id: str
    verdict: Literal["kept"]
    kind: Literal["tool_spec"]
    tokens: int
    reason: str
    matched: str | None = _matched()


class HiddenTool(_Output):
    """A tool the request does not declare, with the exposure decision re-derived from the log."""

    id: str
    verdict: Literal["not exposed"]
    kind: Literal["tool_spec"]
    reason: str
    matched: str | None = _matched()


class CompactedEvent(_Output):
    """An event whose words matched, that a compaction took: what stands in for it."""

    id: str
    verdict: Literal["compacted"]
    kind: str
    reason: str
    matched: str | None = _matched()


WhyMatch = KeptFragment | DroppedFragment | ExposedTool | HiddenTool | CompactedEvent
"""One fragment, tool or event ``why`` found, and its verdict (told apart by their fields)."""


class WhyOutput(_Output):
    """``why RUN --turn N QUERY --json``. Exit 0 when ``matches`` is not empty, else 1."""

    turn: int
    manifest: str
    """Which manifest was read: ``recorded``, or why none was (a rebuild, a preview)."""
    record: int | None
    records: int
    rebuild: bool | None
    query: str
    matches: tuple[WhyMatch, ...]
    note: str
    """Why nothing matched (empty when something did)."""


class WhySpan(_Output):
    """Consecutive recorded turns with the same answer."""

    from_: int = Field(alias="from")
    to: int
    matches: tuple[WhyMatch, ...]
    note: str

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)


class WhyAcrossTurnsOutput(_Output):
    """``why RUN QUERY --json`` (no ``--turn``). Exit 0 when a span matches, else 1."""

    query: str
    turns: int
    unrecorded_turns: int
    spans: tuple[WhySpan, ...]


# ---------------------------------------------------------------- diff


class DiffEntered(_Output):
    id: str
    kind: str
    tokens: int
    reason: str


class DiffLeft(_Output):
    id: str
    kind: str
    tokens: int
    reason: str
    replaced_by: str | None
    detail: str


class DiffTruncated(_Output):
    id: str
    kind: str
    before: int
    after: int
    was_truncated: bool


class DiffRestored(_Output):
    id: str
    kind: str
    before: int
    after: int


class DiffReplaced(_Output):
    id: str
    by: str
    reason: str


class SettingChange(_Output):
    """A build setting that differs between the two turns (or their budgets)."""

    from_: Any = Field(alias="from")
    to: Any

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)


class TokensChange(_Output):
    """The two requests' selected tokens."""

    from_: int = Field(alias="from")
    to: int

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True)


class RecordPicked(_Output):
    record: int
    records: int
    rebuild: bool


class DiffOutput(_Output):
    """``diff RUN A B --json``: what changed between two turns' requests, with reasons."""

    from_turn: int
    to_turn: int
    config_changed: dict[str, SettingChange]
    tokens: TokensChange
    cache_key_changed: bool
    entered: tuple[DiffEntered, ...]
    left: tuple[DiffLeft, ...]
    truncated: tuple[DiffTruncated, ...]
    restored: tuple[DiffRestored, ...]
    replaced: tuple[DiffReplaced, ...]
    tools_entered: tuple[str, ...]
    tools_left: tuple[str, ...]
    tool_reasons: dict[str, str]
    from_record: RecordPicked | None
    """Which record turn A is (null: it had none and was rebuilt from the log)."""
    to_record: RecordPicked | None


# ---------------------------------------------------------------- replay --verify


class ReplayVerifyOutput(_Output):
    """``replay RUN --turn N --verify --json``: the rebuild beside the record. Exit 0 when ``ok``,
    1 on a difference (2 no such record, 3 a damaged log: an error, no JSON)."""

    run_id: str
    turn: int
    ok: bool
    record: int
    records: int
    rebuild_of_record: bool
    request_hash: HashPair
    cache_key: HashPair
    differences: tuple[str, ...]
    builder_note: str | None
    unicode_note: str | None
