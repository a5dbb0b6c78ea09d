"""RunState: what the fold of one run's log knows, and the views the builder reads.

Why a mutable accumulator: folding one appended event must cost O(that event),
so :func:`contextfold.projections.fold.fold_event` updates dicts in place
instead of rebuilding every fragment. Everything *stored* in the state is
immutable (fragment entries, timeline items, typed events), so
:meth:`RunState.snapshot` is a shallow copy of the containers, taken only when
a caller wants to keep a point-in-time view (replay, tests); the one container
of containers, a path's current reads (``files``, updated in place so that a
read costs O(the reads it touches)), is copied one level deeper.

Views are computed on demand, never stored:

- ``freshness`` = ``0.5 ** ((horizon - position) / FRESHNESS_HALF_LIFE)``,
  rounded to 6 digits, where ``horizon`` is the position of the last event
  that produced a fragment. Bookkeeping events (ContextBuilt, UsageObserved,
  a RunStarted, a note-less resume) do not move it, so recording what a build
  contained does not change what a replay of that build sees. Never the clock.
- ``required``: current policies, the current goal and success contract, the
  current plan, the latest visible user input, every visible user input
  flagged ``required=True``, the most recent visible protocol group
  (the assistant call fragment and all its answers; past
  ``timeline_units.NEWEST_WHOLE_TOKENS`` only down to its head and tail, the rest
  competing with a share of its own), the latest visible
  compaction summary (it stands in for everything it hides: constraints,
  failures and ids the model must not lose), and the group of the latest
  error (:meth:`RunState.latest_error_ids`: required only down to its
  diagnosis, the rest competing like any optional unit).

Fragment ids are deterministic: ``e{position}`` for the fragment an event
produces, ``e{position}.c{i}`` (1-based) for the i-th extra fragment of one
event (tool specs, a goal's success contract, a mask's stubs). Every fragment ever produced
stays retrievable by id and by position, also after supersession or
compaction (``fragment``, ``fragments_at``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import blake3

from contextfold.domain.canonical import canonical_utf8
from contextfold.domain.errors import HandleNotPicklableError
from contextfold.domain.events import (
    ArtifactRef,
    GoalSet,
    PlanUpdated,
    PolicySet,
    ToolSpec,
    UsageObserved,
)
from contextfold.domain.fragments import ContextFragment, FragmentKind
from contextfold.domain.log import PairingState
from contextfold.projections.entries import FragmentEntry
from contextfold.projections.offline_encodings import DEFAULT_ENCODING
from contextfold.projections.path_reads import PathReads
from contextfold.projections.stale_reads import StaleRead
from contextfold.projections.timeline_items import (
    CallSlot,
    CallStatus,
    MessageItem,
    SummaryItem,
    SummarySource,
    TimelineIndex,
    TimelineItem,
    TimelineMark,
    ToolGroup,
)
from contextfold.projections.tokens import TokenCounter, get_counter
from contextfold.projections.tool_exposure import permitted

__all__ = [
    "DEFAULT_PRIORITY",
    "FRESHNESS_HALF_LIFE",
    "ArtifactTokens",
    "CallSlot",
    "CallStatus",
    "FragmentEntry",
    "MessageItem",
    "RunState",
    "SummaryItem",
    "SummarySource",
    "TimelineItem",
    "TimelineMark",
    "ToolGroup",
    "ToolPolicy",
    "freshness_at",
]

ArtifactTokens = Callable[[ArtifactRef, TokenCounter], int]
"""The store's port for the tokens of an artifact's full text, counted with the counter it is given:
the counter of the state being folded. Why the counter is passed: a port that picked its own (the
live state's, else cl100k_base) counted a replay's artifacts with another encoding than its
recorded build had, and a replay from a new process differed from the record."""

FRESHNESS_HALF_LIFE = 64
"""Log positions after which a fragment's freshness halves."""

DEFAULT_PRIORITY: dict[FragmentKind, int] = {
    "policy": 100,
    "goal": 95,
    "success_contract": 95,
    "instruction": 90,
    "plan": 85,
    "user_input": 80,
    "tool_result": 60,
    "history": 50,
    "evidence": 40,
    "memory": 35,
    "tool_spec": 30,
}
"""Default priority by kind: rules and intent first, then the live exchange,
then reference material; tool specs compete under their own reserve."""

SUMMARY_PRIORITY = 75
"""A compaction summary stands in for many turns: above ordinary history."""
NOTE_PRIORITY = 20
"""Late-result and hand-off notes: useful, first to go."""

@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Tool permissions of the current policies: allowed = intersection, denied/pinned = union."""

    allowed: frozenset[str] | None
    denied: frozenset[str]
    pinned: frozenset[str]



_FRESHNESS: tuple[float, ...] = tuple(round(math.pow(0.5, d / FRESHNESS_HALF_LIFE), 6) for d in range(4096))
"""Freshness by distance, precomputed: views look up many per build (same formula)."""


def freshness_at(horizon: int, position: int) -> float:
    """The freshness of a fragment from log ``position`` when the log's horizon is ``horizon``
    (rounded to 6 places). Reported on fragments; selection ranks by position itself
    (``selection.score``), so a rank never moves as the log grows."""
    distance = max(0, horizon - position)
    if distance < len(_FRESHNESS):
        return _FRESHNESS[distance]
    return round(math.pow(0.5, distance / FRESHNESS_HALF_LIFE), 6)


@dataclass(slots=True, eq=False)
class RunState:
    """The fold of one run's events up to ``version``. See the module docstring."""

    run_id: str
    encoding: str = DEFAULT_ENCODING
    artifact_tokens: ArtifactTokens | None = None
    """Token count of an artifact's full content; None = size-based estimate."""
    event_text: Callable[[int], str] | None = None
    """Port to the log: the ``content`` text of the event at a position. When set, the fold
    keeps long tool result texts as refs and they are read back when rendered
    (:mod:`contextfold.projections.entries`); None = keep every text."""
    model: str | None = None
    agent: str | None = None
    version: int = 0
    turn: int = 0
    """Number of ModelResponse events folded."""
    horizon: int = 0
    """Position of the last event that produced a fragment (freshness reference)."""
    last_progress: int = 0
    """Position of the last ModelResponse or UserInput (when the run 'moved on')."""
    counter: TokenCounter = field(default_factory=get_counter)
    encoding_fixed: bool = False
    """The encoding is the run's recorded one (``new_state(recorded_encoding=...)``): a
    ``RunStarted`` hint does not change it."""
    pairing: PairingState = field(default_factory=PairingState)
    entries: dict[str, FragmentEntry] = field(default_factory=dict)
    active: dict[str, None] = field(default_factory=dict)
    """Ordered set of current non-timeline fragment ids (policy ... memory)."""
    superseded_by: dict[str, str] = field(default_factory=dict)
    policies: dict[str, tuple[str, PolicySet]] = field(default_factory=dict)
    instructions: dict[str, str] = field(default_factory=dict)
    goal: GoalSet | None = None
    goal_ids: tuple[str, ...] = ()
    plan: PlanUpdated | None = None
    plan_id: str | None = None
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    tool_ids: dict[str, str] = field(default_factory=dict)
    dropped_tools: dict[str, int] = field(default_factory=dict)
    """Tool name -> position of the ``ToolsRegistered(replace=True)`` that dropped it, until one
    registers it again: the runtime can no longer run it, so no build exposes it."""
    files: dict[str, PathReads] = field(default_factory=dict)
    """path -> its current reads, iterated as (fragment id, revision, start_line, end_line) in the
    order they were filed; a stale rest (``stale_reads``) with its origin's revision and lines,
    in the place of the read it stands for. Indexed by their lines for the fold
    (:mod:`~contextfold.projections.path_reads`), which updates them in place: ``snapshot``
    copies them."""
    stale_reads: dict[str, StaleRead] = field(default_factory=dict)
    """Stale rest of an older read a newer partial read cut (:mod:`~contextfold.projections.stale_reads`)
    -> how it was cut."""
    memories: dict[str, str] = field(default_factory=dict)
    semantic_keys: dict[str, str] = field(default_factory=dict)
    """Evidence fragment id -> the ``semantic_key`` it was retrieved under (builder dedupe)."""
    source_kinds: dict[str, str] = field(default_factory=dict)
    """Retrieved evidence (``EvidenceRetrieved``, and a stale rest of it) -> its ``source_kind``:
    a file read and a retrieved chunk of a file are both evidence, and only the chunk is a copy of
    a read that shows its lines (``chunk_copies``)."""
    items: dict[int, TimelineItem] = field(default_factory=dict)
    """Every timeline item ever, keyed by its start position."""
    hidden: dict[int, int] = field(default_factory=dict)
    """Item start position -> position of the compaction that covers it."""
    summaries: dict[int, SummarySource] = field(default_factory=dict)
    """Position of each visible summary -> what its text is rendered from, again whenever the
    goal, a policy or the plan it is rendered against changes (``fold_compaction``)."""
    masked: dict[int, int] = field(default_factory=dict)
    """Answer position of a masked tool result -> position of the ``mask`` compaction."""
    open_groups: dict[str, int] = field(default_factory=dict)
    """Open call id -> position of its group."""
    recovered_groups: dict[str, int] = field(default_factory=dict)
    """Call id closed by lost/cancelled -> its group (to place a late result)."""
    answer_group: dict[int, int] = field(default_factory=dict)
    """Answer position -> group position (compaction cover checks)."""
    request_call_ids: set[str] = field(default_factory=set)
    """Every id a request of this run may show for a call, logged or alias (``call_ids``)."""
    builds: dict[int, int] = field(default_factory=dict)
    """Turn -> position of its latest ContextBuilt event."""
    usage: dict[int, UsageObserved] = field(default_factory=dict)
    """Turn -> its newest usage report."""
    usage_builds: dict[int, int] = field(default_factory=dict)
    """Turn -> position of the build record its usage report counts: the turn's newest record
    logged before the report (the rule and why: :mod:`~contextfold.projections.usage_pairs`). A
    report with no record before it is absent here (it pairs with the turn's latest record)."""
    media_seen: bool = False
    """Some fragment carried an image or a document block. Until then every provider prices a
    fragment alike, so builds for several providers share their per-fragment tables."""
    reasoning_seen: bool = False
    """Some model response carried provider reasoning: from then on a fragment's price depends on
    the provider built for (its reasoning is sent to its own provider only), as with media."""
    reasoning_refused: dict[str, str] = field(default_factory=dict)
    """Fragment id of a model response -> the manifest's word on the pieces of its reasoning the
    fold left out, as its provider never takes them back (``reasoning.refused_note``): a log
    written before the append refused them still builds."""
    wide_reply_seen: bool = False
    """Some model response made more calls than an OpenAI Chat message takes
    (``MAX_CHAT_TOOL_CALLS``): that provider sends it as several messages, whose framing the
    other providers do not pay (``fragment_facts.split_reply_tokens``), as with media."""
    aliased_for: frozenset[str] = frozenset()
    """The providers some call of the run is shown to under an alias (``call_ids``). A provider
    outside it (and ``neutral`` while it is empty) is shown every logged id: its builds price call
    ids alike, so they may share the per-fragment tables (``fragment_facts.BuildCtx``)."""
    unparsed_arguments_seen: bool = False
    """Some tool call's arguments were not a JSON object (``arguments_object``): until then a
    build need not look for them to report them (``tool_arguments_not_an_object`` repairs)."""
    memo: dict[object, object] = field(default_factory=dict, repr=False)
    """Derived facts the builder may reuse across builds (per-fragment costs, the timeline
    index). Not part of the projection: ``snapshot`` starts a fresh one, ``canonical``
    ignores it. Every entry is keyed so that a change of the state it derives from misses.
    Builds write to it, so like folding, building one state is for one thread at a time
    (give another thread a ``snapshot``)."""

    def __post_init__(self) -> None:
        # The counter and the recorded encoding always agree: an encoding that
        # cannot be loaded offline falls back, and the state records the fallback.
        if self.counter.encoding_name != self.encoding:
            self.counter = get_counter(self.encoding)
        self.encoding = self.counter.encoding_name

    # ------------------------------------------------------------ copies

    def snapshot(self) -> RunState:
        """A point-in-time copy: O(state), taken on demand. Stored values are immutable."""
        return RunState(
            run_id=self.run_id, encoding=self.encoding, artifact_tokens=self.artifact_tokens,
            event_text=self.event_text,
            model=self.model, agent=self.agent, version=self.version, turn=self.turn,
            horizon=self.horizon, last_progress=self.last_progress, counter=self.counter,
            encoding_fixed=self.encoding_fixed, pairing=self.pairing.copy(), entries=dict(self.entries),
            active=dict(self.active),
            superseded_by=dict(self.superseded_by), policies=dict(self.policies),
            instructions=dict(self.instructions), goal=self.goal, goal_ids=self.goal_ids,
            plan=self.plan, plan_id=self.plan_id, tools=dict(self.tools),
            tool_ids=dict(self.tool_ids), dropped_tools=dict(self.dropped_tools),
            files={path: reads.copy() for path, reads in self.files.items()},
            stale_reads=dict(self.stale_reads),
            memories=dict(self.memories),
            semantic_keys=dict(self.semantic_keys), source_kinds=dict(self.source_kinds),
            items=dict(self.items), hidden=dict(self.hidden), summaries=dict(self.summaries),
            masked=dict(self.masked),
            open_groups=dict(self.open_groups),
            recovered_groups=dict(self.recovered_groups), answer_group=dict(self.answer_group),
            request_call_ids=set(self.request_call_ids), builds=dict(self.builds),
            usage=dict(self.usage), usage_builds=dict(self.usage_builds),
            media_seen=self.media_seen, reasoning_seen=self.reasoning_seen,
            reasoning_refused=dict(self.reasoning_refused),
            unparsed_arguments_seen=self.unparsed_arguments_seen, wide_reply_seen=self.wide_reply_seen,
            aliased_for=self.aliased_for,
        )

    def __reduce__(self) -> NoReturn:
        """Refused: its ports read the log through this process's store (``HandleNotPicklableError``)."""
        raise HandleNotPicklableError("RunState", f"fold the run in the worker, open_store(url).run("
                                      f"{self.run_id!r}).state(), or send what pickles (a BuildResult, "
                                      "the events)")

    # ------------------------------------------------------------ views

    def freshness(self, position: int) -> float:
        return freshness_at(self.horizon, position)

    def _index(self) -> TimelineIndex:
        """The timeline index, brought up to date in O(new items) (see :class:`TimelineIndex`)."""
        index = self.memo.get("timeline")
        # Nothing appended or hidden since it caught up (``TimelineIndex.extend``'s first
        # answer, without the call): a build asks ~6 times, and the fold's step once.
        if (isinstance(index, TimelineIndex) and index.n_items == len(self.items)
                and index.n_hidden == len(self.hidden)):
            return index
        if not isinstance(index, TimelineIndex) or not index.extend(self):
            index = TimelineIndex.of(self)
            self.memo["timeline"] = index
        return index

    def timeline(self) -> tuple[TimelineItem, ...]:
        """Visible conversation items in layout order (summaries at the start of their cover)."""
        return self._index().items(self)

    def timeline_changes(self, old: tuple[TimelineItem, ...],
                         new: tuple[TimelineItem, ...]) -> list[int] | None:
        """Indices below ``len(old)`` at which ``new`` (a later :meth:`timeline`) holds another
        item than ``old`` (an earlier one), if known without comparing them; else None."""
        return self._index().changes(old, new)

    def live_timeline(self) -> tuple[Sequence[TimelineItem], TimelineMark]:
        """:meth:`timeline` without its copy: the index's own list, which later fold steps patch
        in place (read it now, do not keep it), and a mark to ask :meth:`timeline_changes_since`
        what they replaced. The builder reads this: see :class:`TimelineIndex` for why."""
        index = self._index()
        return index.live(self), TimelineMark(index, index.serial)

    def timeline_changes_since(self, mark: TimelineMark) -> list[int] | None:
        """Indices (ascending) of the items replaced in place since ``mark`` was taken (appended
        ones excluded), if known without comparing; else None."""
        index = self._index()
        return index.changes_since(mark.serial) if mark.source is index else None

    def used_tool_names(self) -> frozenset[str]:
        """Names of the tools called by the visible timeline's groups."""
        return frozenset(self._index().tool_names)

    def groups(self) -> tuple[ToolGroup, ...]:
        return tuple(it for it in self.timeline() if isinstance(it, ToolGroup))

    def open_calls(self) -> dict[str, int]:
        """Calls still waiting for an answer: call id -> position of the issuing response."""
        return dict(self.pairing.open)

    def required_ids(self) -> frozenset[str]:
        return self.required_and_floor()[0]

    def required_and_floor(self) -> tuple[frozenset[str], frozenset[str]]:
        """(:meth:`required_ids`, :meth:`latest_error_ids`) from one look at the memo: the
        builder needs both, and asking for each brought the timeline index up to date and
        compared the memo's key twice."""
        index = self._index()
        key = (index.key(self), len(self.active))
        hit = self.memo.get("required")
        if isinstance(hit, tuple) and hit[0] == key:
            return hit[1], hit[2]
        req: set[str] = {fid for fid in self.active if self.entries[fid].required}
        req.update(self.items[p].fragment_ids[0] for p in index.required_users)
        for pos in (index.last_user, index.last_summary):
            if pos is not None:
                req.add(self.items[pos].fragment_ids[0])
        if index.last_group is not None:
            req.update(self.items[index.last_group].fragment_ids)
        error = self._latest_error(index)
        floor = frozenset(self.items[error].fragment_ids) if error is not None else frozenset()
        out = frozenset(req | floor)
        self.memo["required"] = (key, out, floor)
        return out, floor

    def latest_error_ids(self) -> frozenset[str]:
        """The fragments of the latest error's group, required down to its diagnosis only.

        The seed (section 4): the latest error must not be dropped because its text is long,
        yet a 3,000-line failing ``make`` followed by a few reads ranked after them (the score
        charges its size) and was left out while a read was cut to fit. So the group of the
        newest error answer whose tool has answered nothing newer (a later success of the
        same tool resolves it) is required, but only at its diagnosis size
        (``selection.Unit.part``): the rest of it competes like any optional unit. Empty when
        there is none, when it is the newest group (required whole already) or when a
        compaction hides it (the summary keeps its failure). A group calling a tool the run's
        policy keeps out is shown only as a note (``not_offered``): its failure is not one the
        model can retry, so not its latest. The builder requires it only where it fits beside
        the other required fragments (``selection.Unit.if_fits``)."""
        return self.required_and_floor()[1]

    def _latest_error(self, index: TimelineIndex) -> int | None:
        """Position of the latest error's group (:meth:`latest_error_ids`), if any.

        Each tool's newest answer is kept in the memo and patched by the answers appended
        since (O(new answers) per step); ``answer_group`` only grows."""
        hit = self.memo.get("tool-outcomes")
        seen, outcomes = hit if isinstance(hit, tuple) else (0, {})
        answers = self.answer_group
        if len(answers) > seen:
            new = list(itertools.islice(reversed(answers.items()), len(answers) - seen))
            for apos, gpos in reversed(new):
                group = self.items[gpos]
                assert isinstance(group, ToolGroup)
                slot = group.answered_at(apos)  # O(1): not a scan of its group per answer
                assert slot is not None
                if slot.status in ("ok", "error"):  # a lost or cancelled call says nothing new
                    outcomes[slot.name] = (apos, gpos, slot.status == "error")
            self.memo["tool-outcomes"] = (len(answers), outcomes)
        failed = sorted(((apos, gpos) for apos, gpos, error in outcomes.values() if error), reverse=True)
        policy = self.tool_policy() if failed else None
        for _, gpos in failed:  # the newest first
            group = self.items[gpos]
            assert isinstance(group, ToolGroup) and policy is not None
            if not all(permitted(c.name, policy.allowed, policy.denied) for c in group.calls):
                continue  # a call of a tool the policy keeps out: never shown (stale), not the model's
            return None if gpos in self.hidden or gpos == index.last_group else gpos
        return None

    def _view(self, fid: str, required: frozenset[str]) -> ContextFragment:
        entry = self.entries[fid]
        return entry.fragment.model_copy(update={
            "freshness": self.freshness(entry.position),
            "required": fid in required,
        })

    def current_ids(self) -> tuple[str, ...]:
        """Ids of the current fragments: state fragments, then the visible timeline's."""
        ids = list(self.active)
        for item in self.timeline():
            ids.extend(item.fragment_ids)
        return tuple(ids)

    def fragments(self) -> tuple[ContextFragment, ...]:
        """The current fragments with freshness and required as of this version."""
        required = self.required_ids()
        return tuple(self._view(fid, required) for fid in self.current_ids())

    def fragment(self, fid: str) -> ContextFragment:
        """Any fragment ever folded (also superseded or compacted), by id. KeyError if none."""
        return self._view(fid, self.required_ids())

    def fragments_at(self, position: int) -> tuple[ContextFragment, ...]:
        """The raw fragments the event at ``position`` produced (read-back after compaction)."""
        required = self.required_ids()
        return tuple(self._view(fid, required) for fid in self.ids_at(position))

    def ids_at(self, position: int) -> tuple[str, ...]:
        """Ids of the fragments the event at ``position`` produced, in the order it produced them.

        Derived from the id scheme (``e{p}``, then ``e{p}.c1``, ``e{p}.c2``... without gaps)
        instead of kept per position: an index per event cost ~130 bytes a position."""
        ids = [f"e{position}"] if f"e{position}" in self.entries else []
        sub = 1
        while (fid := f"e{position}.c{sub}") in self.entries:
            ids.append(fid)
            sub += 1
        return tuple(ids)

    def tool_policy(self) -> ToolPolicy:
        allowed: frozenset[str] | None = None
        denied: set[str] = set()
        pinned: set[str] = set()
        for _, policy in self.policies.values():
            if policy.allowed_tools is not None:
                names = frozenset(policy.allowed_tools)
                allowed = names if allowed is None else allowed & names
            denied.update(policy.denied_tools)
            pinned.update(policy.pinned_tools)
        return ToolPolicy(allowed, frozenset(denied), frozenset(pinned))

    # ------------------------------------------------------------ identity

    def canonical(self) -> bytes:
        """Canonical JSON of what the builder reads: fragments, timeline, supersession."""
        timeline: list[dict[str, object]] = []
        for item in self.timeline():
            if isinstance(item, ToolGroup):
                timeline.append({"group": item.group_id, "fragment": item.fragment_id,
                                 "calls": [[c.call_id, c.name, c.status, c.answer_id]
                                           + ([c.alias, list(c.alias_for)] if c.alias else [])
                                           for c in item.calls]})
            elif isinstance(item, SummaryItem):
                timeline.append({"summary": item.fragment_id, "covered": list(item.covered)})
            else:
                timeline.append({item.role: item.fragment_id})
        return canonical_utf8({
            "run_id": self.run_id, "encoding": self.counter.encoding_name,
            "version": self.version, "turn": self.turn, "horizon": self.horizon,
            "fragments": [f.model_dump(mode="json") for f in self.fragments()],
            "timeline": timeline,
            "superseded_by": self.superseded_by,
            **({"semantic_keys": self.semantic_keys} if self.semantic_keys else {}),
            **({"source_kinds": self.source_kinds} if self.source_kinds else {}),
            **({"stale_reads": {fid: [s.of, s.origin, [list(r) for r in s.newer]]
                                for fid, s in self.stale_reads.items()}} if self.stale_reads else {}),
            **({"reasoning_refused": self.reasoning_refused} if self.reasoning_refused else {}),
            "open_calls": self.pairing.open,
        })

    def fingerprint(self) -> str:
        """blake3 of :meth:`canonical`: equal fingerprints = byte-identical projections."""
        return blake3.blake3(self.canonical()).hexdigest()
