"""Per-turn audit data of one run: what each request contained, what changed, what was repaired.

The source of truth is the log. A turn's manifest is its first
``context_built`` record (what the runtime actually built and sent); a turn
without a record is rebuilt from the log, the same way ``Run.build(turn=N,
record=False)`` does, but in ONE incremental pass over the events (state
before the N-th model response), so a 1,000-turn imported run costs one fold
plus one build per turn, not one fold per turn.

:func:`collect` is pure (events, the integrity report and a ``rebuild`` port
in; data out). :func:`audit_run` wires it to a :class:`~contextfold.api.Run`. The values it
returns (:class:`RunAudit` and what it holds) are declared in :mod:`contextfold.audit.models`
and re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from contextfold.audit.diff import diff_manifests
from contextfold.audit.effects import Build, compaction_effects
from contextfold.audit.models import (
    AuditSummary,
    CompactionNote,
    Integrity,
    ProtocolRepair,
    RunAudit,
    TurnAudit,
    UnbuiltTurn,
    Usage,
    unbuilt_answer,
)
from contextfold.audit.records import RecordedManifests, read_records
from contextfold.domain.errors import (
    BudgetError,
    EncodingUnavailableError,
    InvalidInputError,
    RenderError,
)
from contextfold.domain.events import (
    ContextBuilt,
    HistoryCompacted,
    ModelResponse,
    ToolCallCancelled,
    ToolResultLost,
    UsageObserved,
)
from contextfold.domain.excluded_lines import ExcludedLines
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import (
    BuildConfig,
    ContextManifest,
    ExcludedFragment,
    checked_config,
    default_reserve,
    recorded_config,
)
from contextfold.projections.finish_build import REPLY_PRIMING
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.progress import Progress, reported
from contextfold.projections.state import ArtifactTokens, RunState
from contextfold.projections.usage_pairs import UsagePairs

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = [
    "HISTORY_KINDS",
    "AuditSummary",
    "CompactionNote",
    "ConfigChoice",
    "Integrity",
    "ProtocolRepair",
    "RebuildPort",
    "RunAudit",
    "TurnAudit",
    "UnbuiltTurn",
    "Usage",
    "audit_run",
    "collect",
    "config_for_turn",
    "unbuilt_answer",
]

HISTORY_KINDS = frozenset({"history", "tool_result", "user_input"})
"""Fragment kinds that make up the conversation history (for the crowding question)."""
_BUDGET_REASONS = frozenset({"over_budget", "low_priority"})

RebuildPort = Callable[[RunState, BuildConfig], ContextManifest]
"""Build a manifest from a folded state (the state before the turn's model response)."""


# ---------------------------------------------------------------- collect


ConfigChoice: TypeAlias = BuildConfig | Mapping[str, Any] | None
"""How a caller picks the config of turns without a record: a whole :class:`BuildConfig`, or
only the fields it sets (``{"window": 20_000}``) over the nearest record's config, or nothing."""


def _config_for(turn: int, recorded: Mapping[int, BuildConfig], given: ConfigChoice) -> BuildConfig:
    """Rebuild config: the caller's, else the nearest earlier record's, else the first record's, else
    the default (a run usually keeps one config; its records say which); fields the caller gives
    alone replace just those of that config (``--window`` keeps the recorded provider)."""
    if isinstance(given, BuildConfig):
        return given
    if not recorded:  # the default, for the window given (its reserve is the window's default)
        return checked_config(**given) if given else BuildConfig()
    earlier = [t for t in recorded if t < turn]
    base = recorded[max(earlier)] if earlier else recorded[min(recorded)]
    if not given:
        return base
    if "window" in given and "reserve" not in given and given["window"] - base.reserve <= REPLY_PRIMING:
        # Said here, not as the builder's "window W minus reserve R leaves no budget": the
        # reserve was not given, so the message must say where it came from.
        raise InvalidInputError(
            f"--window {given['window']} leaves no budget with the nearest record's reserve "
            f"{base.reserve}: pass --reserve too (the default for that window is "
            f"{default_reserve(given['window'])})")
    return checked_config(**{**base.model_dump(), **given})


def config_for_turn(events: Iterable[RecordedEvent], turn: int,
                    given: ConfigChoice = None) -> BuildConfig:
    """The config to rebuild a turn that has no record with (see ``_config_for``). Only each
    record's config is read: a long run's manifests are ~10,000 lines each, and validating its
    100 records whole took 3.6 of the 11 s that ``audit --turn`` spent on a 10,000-event run.
    ``events``: the log, or its records alone, each with a manifest holding its ``config``
    at least (``EventStore.record_heads``: the rest of a manifest is not needed)."""
    recorded: dict[int, BuildConfig] = {}
    for rec in events:
        if isinstance(rec.event, ContextBuilt) and rec.event.turn not in recorded:
            recorded[rec.event.turn] = recorded_config(rec.event.manifest, rec.run_id, rec.event.turn)
    return _config_for(turn, recorded, given)


def collect(events: Sequence[RecordedEvent], *, run_id: str, integrity: Integrity,
            rebuild: RebuildPort | None, config: ConfigChoice = None,
            artifact_tokens: ArtifactTokens | None = None,
            progress: Progress | None = None,
            recorded_manifests: RecordedManifests | None = None) -> RunAudit:
    """Fold ``events`` once; one :class:`TurnAudit` per turn (1..responses, plus a recorded next turn).

    Without ``rebuild``, turns that have no record are left out; a turn the rebuild cannot build
    (its required content over the budget, a request the provider refuses) is listed in
    ``unbuilt`` with the error, and the others are audited. ``progress(n)`` is told of the
    events folded while turns without a record are rebuilt (minutes on a long imported run).
    ``recorded_manifests``: what ``events``' records say, when the caller read them already
    (:func:`~contextfold.audit.records.read_records`, whose slimmed events it then passes).
    """
    if recorded_manifests is None:
        events, recorded_manifests = read_records(events)
    recorded = recorded_manifests.first
    record_counts = recorded_manifests.counts
    reports: dict[int, UsageObserved] = {}
    pairs = UsagePairs()
    responses = 0
    for rec in events:
        ev = rec.event
        if isinstance(ev, UsageObserved):
            reports[ev.turn] = ev
            pairs.reported(ev.turn)
        elif isinstance(ev, ContextBuilt):
            pairs.built(ev.turn, rec.position)
        elif isinstance(ev, ModelResponse):
            responses += 1

    def usage(turn: int, manifest: ContextManifest) -> Usage | None:
        """The turn's newest report beside the request it counts, as calibration pairs them."""
        report = reports.get(turn)
        if report is None:
            return None
        position = pairs.record_of(turn)
        estimate = recorded_manifests.estimates.get(position) if position is not None else None
        return Usage(input_tokens=report.input_tokens, cached_tokens=report.cached_tokens,
                     output_tokens=report.output_tokens, model=report.model,
                     estimated_tokens=manifest.selected_tokens if estimate is None else estimate[0],
                     record_position=None if estimate is None else position)

    manifests: dict[int, tuple[ContextManifest, Literal["recorded", "rebuilt"]]] = {
        t: (m, "recorded") for t, m in recorded.items()}
    unbuilt: list[UnbuiltTurn] = []
    # (not ``len(recorded) < responses``: the recorded next turn made a run with one answered turn
    # unrecorded look complete, and that turn was left out of the audit unsaid)
    if rebuild is not None and any(t not in recorded for t in range(1, responses + 1)):
        configs = {t: m.config for t, m in recorded.items()}
        try:  # counted as the run's recorded builds were (projections.recorded_encoding)
            state = new_state(run_id, artifact_tokens=artifact_tokens,
                              recorded_encoding=recorded[min(recorded)].encoding if recorded else None)
        except EncodingUnavailableError as exc:  # the recorded turns are still audited
            events_of_turns: Sequence[RecordedEvent] = ()
            unbuilt.extend(UnbuiltTurn(turn=t, error=type(exc).__name__, message=str(exc))
                           for t in range(1, responses + 1) if t not in recorded)
        else:
            events_of_turns = events
        turn = 1
        for rec in reported(events_of_turns, progress):
            if isinstance(rec.event, ModelResponse):
                if turn not in recorded:
                    try:
                        manifests[turn] = (rebuild(state, _config_for(turn, configs, config)), "rebuilt")
                    except (BudgetError, RenderError) as exc:  # this turn's content, not the log
                        # One turn whose required content outgrew the budget (its live build failed
                        # too) made the whole audit fail: no summary, no report, for any turn.
                        unbuilt.append(UnbuiltTurn(turn=turn, error=type(exc).__name__, message=str(exc)))
                turn += 1
            fold_event(state, rec)

    turns: list[TurnAudit] = []
    previous: ContextManifest | None = None
    cache_keys: dict[str, tuple[int, str]] = {}  # per provider: its latest turn and that turn's cache key
    for turn in sorted(t for t in manifests if t <= responses + 1):
        manifest, source = manifests[turn]
        low = previous.log_version if previous is not None else 0
        between = events[low:manifest.log_version]  # positions are 1..n, contiguous
        # against the latest turn built for the same provider: a provider caches its own prefix
        # (a run built alternately for two showed "prefix changed" every turn; the key names the
        # provider that renders it)
        last = cache_keys.get(manifest.provider)
        cache_keys[manifest.provider] = (turn, manifest.cache_key)
        turns.append(TurnAudit(
            turn=turn, source=source, records=record_counts.get(turn, 0), manifest=manifest,
            prefix_changed=None if last is None else last[1] != manifest.cache_key,
            prefix_against=None if last is None else last[0],
            config_changed=None if previous is None else previous.config_hash != manifest.config_hash,
            diff=None if previous is None else diff_manifests(previous, manifest),
            repairs=tuple(_repairs(between)), compactions=tuple(_compactions(between)),
            usage=usage(turn, manifest)))
        previous = manifest
    # every request built for an audited turn: each record (a turn built again after a compaction
    # is the request it changed), and the audit's rebuild of a turn without one
    audited = {t.turn for t in turns}
    builds = [b for b in recorded_manifests.builds if b.turn in audited] + [
        Build(t.turn, t.manifest.log_version, t.manifest.selected_tokens)
        for t in turns if t.source == "rebuilt"]
    return RunAudit(run_id=run_id, events=len(events), integrity=integrity, turns=tuple(turns),
                    summary=summarize(turns, events), unbuilt=tuple(unbuilt),
                    compaction_effects=compaction_effects(events, builds))


def _repairs(events: Sequence[RecordedEvent]) -> list[ProtocolRepair]:
    out: list[ProtocolRepair] = []
    for rec in events:
        ev = rec.event
        if isinstance(ev, ToolResultLost):
            out.append(ProtocolRepair(position=rec.position, kind="lost", call_id=ev.call_id,
                                      reason=ev.reason))
        elif isinstance(ev, ToolCallCancelled):
            out.append(ProtocolRepair(position=rec.position, kind="cancelled", call_id=ev.call_id,
                                      reason=ev.reason))
    return out


def _compactions(events: Sequence[RecordedEvent]) -> list[CompactionNote]:
    return [CompactionNote(position=r.position, covers_from=r.event.covers_from, covers_to=r.event.covers_to,
                           strategy=r.event.strategy, summarizer=r.event.summarizer)
            for r in events if isinstance(r.event, HistoryCompacted)]


# ---------------------------------------------------------------- summary


def history_dropped_tokens(m: ContextManifest) -> int:
    """Tokens of history fragments this build left out for lack of budget."""
    return _history_dropped(m, {})


def _history_dropped(m: ContextManifest, memo: dict[int, tuple[tuple[ExcludedFragment, ...], int]]) -> int:
    """:func:`history_dropped_tokens`, summed per chunk of the excluded lines and remembered in
    ``memo`` by chunk: the manifests of consecutive rebuilt turns share most of their chunks
    (``ExcludedLines``), and a long run's ~10,000 lines were summed again for every turn."""
    lines = m.excluded_items
    total = 0
    for chunk in lines.chunks if isinstance(lines, ExcludedLines) else (tuple(lines),):
        hit = memo.get(id(chunk))
        if hit is None or hit[0] is not chunk:  # (the chunk is held, so its id is not reused)
            hit = memo[id(chunk)] = (chunk, sum(e.tokens for e in chunk
                                                if e.reason in _BUDGET_REASONS and e.kind in HISTORY_KINDS))
        total += hit[1]
    return total


def _over_share(m: ContextManifest) -> bool:
    """Retrieval+memory took more than its own reserve share of the budget."""
    return m.layer_tokens.get("retrieval", 0) > m.config.layer_shares.get("retrieval", 0.0) * m.budget_tokens


def retrieval_crowded(m: ContextManifest) -> bool:
    """Retrieval+memory took more than its own reserve share while history was dropped for budget.

    Below its share, retrieval only used what was reserved for it; above it,
    it competed for (and won) room that history needed.
    """
    return history_dropped_tokens(m) > 0 and _over_share(m)


def summarize(turns: Sequence[TurnAudit], events: Sequence[RecordedEvent] | None = None) -> AuditSummary:
    """The run's answers over ``turns``; its repairs and compactions counted over the whole log
    (``events``), when given.

    Why the whole log: a turn lists the events between the previous turn's record and its own,
    so a compaction (or a lost result) logged after the last turn's first record, as ``compact``
    then a second build of the turn logs it, belonged to no turn: the summary said
    "compactions: 0" above the very line that listed it."""
    manifests = [t.manifest for t in turns]
    tool_tokens = [m.tool_tokens for m in manifests]
    latest = manifests[-1] if manifests else None
    tool_stats: dict[str, float] = {
        "latest": float(latest.tool_tokens) if latest else 0.0,
        "max": float(max(tool_tokens, default=0)),
        "mean": round(sum(tool_tokens) / len(tool_tokens), 1) if tool_tokens else 0.0,
        "share_latest": round(latest.tool_tokens / max(1, latest.selected_tokens), 4) if latest else 0.0,
    }
    if latest is None:
        tool_answer = "no turns to audit"
    else:
        tool_answer = (f"tool schemas took {latest.tool_tokens} tokens at turn {latest.turn} "
                       f"({100 * tool_stats['share_latest']:.1f}% of {latest.selected_tokens} selected, "
                       f"{len(latest.tools)} tools exposed); max {int(tool_stats['max'])}, "
                       f"mean {tool_stats['mean']} over {len(manifests)} turns")
    memo: dict[int, tuple[tuple[ExcludedFragment, ...], int]] = {}
    dropped = [_history_dropped(t.manifest, memo) for t in turns]
    crowded = tuple(t.turn for t, d in zip(turns, dropped, strict=True)
                    if d > 0 and _over_share(t.manifest))
    competed = [t for t, d in zip(turns, dropped, strict=True) if d > 0]
    if crowded:
        first = next(t.manifest for t in turns if t.turn == crowded[0])
        retrieval_answer = (
            f"yes, at {len(crowded)} of {len(turns)} turns retrieval+memory took more than its reserve "
            f"share while history was dropped for budget (first: turn {first.turn}, retrieval "
            f"{first.layer_tokens.get('retrieval', 0)} tokens, history dropped "
            f"{history_dropped_tokens(first)} tokens)")
    elif competed:
        retrieval_answer = (f"no: history was dropped for budget at {len(competed)} turns, but retrieval "
                            f"stayed within its own reserve share each time")
    else:
        retrieval_answer = "no: no history was dropped for budget"
    best: dict[str, dict[str, Any]] = {}
    for t in turns:
        for f in t.manifest.fragments:
            if f.id not in best or f.tokens > best[f.id]["tokens"]:
                best[f.id] = {"id": f.id, "kind": f.kind, "source_ref": f.source_ref, "tokens": f.tokens,
                              "turn": t.turn, "truncated": f.truncated}
    largest = tuple(sorted(best.values(), key=lambda d: (-d["tokens"], d["id"]))[:12])
    calibrations = [m.calibration for m in manifests if m.calibration is not None]
    return AuditSummary(
        turns=len(turns), recorded_turns=sum(1 for t in turns if t.source == "recorded"),
        rebuilt_turns=sum(1 for t in turns if t.source == "rebuilt"),
        prefix_reused=sum(1 for t in turns if t.prefix_changed is False),
        prefix_compared=sum(1 for t in turns if t.prefix_changed is not None),
        prefix_changed_turns=tuple(t.turn for t in turns if t.prefix_changed),
        prefix_pairs=tuple((t.prefix_against, t.turn) for t in turns if t.prefix_against is not None),
        config_changed_turns=tuple(t.turn for t in turns if t.config_changed),
        tool_schema_tokens=tool_stats, tool_schema_answer=tool_answer,
        retrieval_crowded_turns=crowded, retrieval_answer=retrieval_answer, largest_fragments=largest,
        repairs=(sum(len(t.repairs) for t in turns) if events is None else len(_repairs(events)))
        + len({note for t in turns for note in t.build_notes}),
        compactions=(sum(len(t.compactions) for t in turns) if events is None
                     else len(_compactions(events))),
        usage_turns=sum(1 for t in turns if t.usage is not None),
        latest_correction=calibrations[-1].correction if calibrations else None)


# ---------------------------------------------------------------- wiring


def audit_run(run: Run, *, config: ConfigChoice = None, rebuild_missing: bool = True,
              progress: Progress | None = None) -> RunAudit:
    """Collect the audit of ``run`` from its store: verify the chain, read the events once, fold once.

    ``progress(n)``: told of the events folded (see :func:`collect`)."""
    from contextfold.api import render_request
    from contextfold.kept_counts import counts_kept
    from contextfold.projections.builder import build_context
    from contextfold.projections.calibration import calibrate_state
    from contextfold.store.event_reads import bulk_allocation

    report = run.verify()
    # One pass over the stored events, each record's manifest read as it comes and not kept
    # (``audit.records``): a long run without compaction held every record twice, O(n^2).
    with bulk_allocation():  # (as ``Run.events()`` reads: the events hold no cycles)
        events, recorded = read_records(run.store.events.iter_events(run.run_id), slim=True)
    integrity = Integrity(ok=report.ok, events=report.events, first_bad_position=report.first_bad_position,
                          reason=report.reason, head=report.head)
    estimate_at = recorded.estimates.get

    def rebuild(state: RunState, cfg: BuildConfig) -> ContextManifest:
        return build_context(state, cfg, load_text=run.store.cited_text, render=render_request,
                             calibration=calibrate_state(state, cfg, estimate_at)).manifest

    with counts_kept(run.store.events, run.run_id):  # the counts an earlier fold kept, if any
        return collect(events, run_id=run.run_id, integrity=integrity,
                       rebuild=rebuild if rebuild_missing else None, config=config,
                       artifact_tokens=run._artifact_tokens(), progress=progress,
                       recorded_manifests=recorded)
