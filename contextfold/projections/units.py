"""Per-fragment costs and the selection units of one build.

Why a module of its own, and why the facts are cached on the state: a build
of a long run looks at every visible fragment (thousands), and most of what it
needs per fragment never changes once the fragment is folded: its redacted
view, its media prices for a provider, its text tokens, its framing overhead
(a tokenizer call on a ``<data ...>`` wrapper), whether it can be shrunk and
to what. :class:`Facts` holds them; one table per (encoding, provider,
redaction policy) lives in ``RunState.memo``, so a fragment is costed once per
configuration for the life of the state, not once (or several times) per
build. A fragment's content never changes after the fold (fragment ids are
log positions), so the cache cannot go stale; what does change per build
(freshness, the required set, layers) is computed per build.

Large payloads are the exception: artifact-backed ones, and tool result texts
longer than ``LAZY_TEXT_CHARS`` (which a state with a text source does not
even hold: ``projections.entries``). They are redacted only when their text is
needed (kept or truncated), so their cached facts describe the unredacted view,
costed from the stored token count without reading the text (a lazy entry is
costed from its ``head``), and a build that redacts one uses facts of the
redacted view for the rest of that build (``BuildCtx.late``). Why long inline
texts too: scanning a 20 KB log for secrets takes ~6 ms, so redacting every
long tool output before selection cost minutes on the first build of a run
with tens of thousands of them, and would have meant reading every text back
from the log.

Costs counted: every fragment pays ``MESSAGE_OVERHEAD`` tokens of message
framing, a data fragment (instruction, evidence, memory, tool result, or any
text not authored by the runtime or the user) also pays its ``<data ...>``
wrapper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contextfold.domain.events import ArtifactRef, DocumentBlock, TextBlock
from contextfold.domain.fragments import TRUST_RANK, ContextFragment, ToolCallBlock, ToolResultBlock
from contextfold.domain.manifest import BuildConfig, ExcludedFragment
from contextfold.projections.bounded_memo import BoundedMemo
from contextfold.projections.entries import (
    LAZY_TEXT_CHARS,
    FragmentEntry,
    LazyText,
    Response,
    ToolAnswer,
    artifact_text_in,
)
from contextfold.projections.fact_sources import copy_of, file_sources
from contextfold.projections.fold_content import answer_frame_of
from contextfold.projections.framing import (
    MESSAGE_OVERHEAD,
    NOTE_LABEL,
    AnswerFrame,
    framing_tokens,
    is_data,
    truncated_extra_tokens,
)
from contextfold.projections.media_plan import FragmentMedia, plan_fragment
from contextfold.projections.not_offered import not_offered_header, not_offered_names, not_offered_record
from contextfold.projections.redact import Redacted, RedactionPolicy, redact, redact_fragment
from contextfold.projections.redact_calls import redact_reply_fragment
from contextfold.projections.selection import Unit, score
from contextfold.projections.state import MessageItem, RunState, TimelineItem, TimelineMark
from contextfold.projections.timeline_units import TimelineUnits, timeline_units

__all__ = ["MESSAGE_OVERHEAD", "SHRINK_FLOOR", "BuildCtx", "Facts", "Units", "make_units"]

SHRINK_FLOOR = 48
"""Smallest text a truncated fragment keeps (tokens)."""
_STATE_LAYER = {"policy": "policy", "instruction": "policy", "goal": "goal", "success_contract": "goal",
                "plan": "plan", "evidence": "retrieval", "memory": "retrieval"}
_STATE_LAYER_NO = {"policy": 1, "goal": 3, "plan": 4}
"""A state layer's number (retrieval and memory: 6)."""

Hit = tuple[ContextFragment, Redacted]
_REDACTIONS: BoundedMemo[tuple[str, str, str, str, RedactionPolicy], tuple[Hit | None]] = BoundedMemo(
    200_000, 32 * 1024 * 1024)
"""Redaction results by fragment identity and content: builds of a growing run repeat them. A
result is ``(None,)`` when the text holds no secret, else the redacted fragment, whose text is
counted against the bound."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Facts:
    """What a build needs to know about one fragment view, computed once (module docstring)."""

    view: ContextFragment | FragmentEntry
    """The view costs are based on: the redacted fragment when it holds secrets (inline text),
    else the folded entry (its ``ContextFragment`` made only when :attr:`frag` is asked for:
    making it, blocks validated, was a model reply's dearest fact in the agent loop)."""
    hit: Hit | None
    """The redaction applied to build the view, if any."""
    media: FragmentMedia | None
    has_artifact_text: bool
    text_tokens: int
    overhead: int
    text_shrinkable: bool
    truncated_extra: int = 0
    """What the view's data block adds when it is shown cut or reduced (``truncated="true"``)."""
    not_offered: tuple[str, ...] = ()
    """For a reply whose calls use tools the request does not offer, their names: the view is
    priced as the note it is shown as (``projections.not_offered``)."""

    @property
    def frag(self) -> ContextFragment:
        """The view as a fragment (for a lazy entry its head: costed without its text)."""
        view = self.view
        return view if isinstance(view, ContextFragment) else view.head

    @property
    def cost(self) -> int:
        return self.text_tokens + (0 if self.media is None else self.media.tokens) + self.overhead

    @property
    def shrinkable(self) -> bool:
        """Text can be truncated, or media has a cheaper rendition (reduced before truncating)."""
        return self.text_shrinkable or (self.media is not None and self.media.reducible)

    @property
    def min_cost(self) -> int:
        text = SHRINK_FLOOR if self.text_shrinkable else self.text_tokens
        return (self.overhead + self.truncated_extra + text
                + (self.media.reduced_tokens if self.media is not None else 0))


def _has_artifact_text(frag: ContextFragment) -> bool:
    return artifact_text_in(frag.content)


def _entry_artifact_text(entry: FragmentEntry) -> bool:
    """:func:`_has_artifact_text` of the entry's fragment, without making it."""
    content = entry.content
    if isinstance(content, ToolAnswer):
        return content.artifact is not None
    if isinstance(content, Response):
        return False
    return artifact_text_in(content)  # the blocks themselves


def _result_status(view: ContextFragment | FragmentEntry) -> str | None:
    """The status of the view's tool result block, if it has one."""
    answer = view.answer() if isinstance(view, FragmentEntry) else None
    if answer is not None:
        return answer.status
    frag = view if isinstance(view, ContextFragment) else view.head
    block = next((b for b in frag.content if isinstance(b, ToolResultBlock)), None)
    return None if block is None else block.status


def answer_frame(view: ContextFragment | FragmentEntry) -> AnswerFrame | None:
    """What the runtime line of the view's tool result says (``framing``), if it has one."""
    answer = view.answer() if isinstance(view, FragmentEntry) else None
    if answer is not None:
        return answer_frame_of(answer)
    return answer_frame_of((view if isinstance(view, ContextFragment) else view.head).content)


def _large_text(entry: FragmentEntry) -> bool:
    """A tool result text held lazily, or long enough to be (see the module docstring)."""
    content = entry.content
    return isinstance(content, ToolAnswer) and (
        isinstance(content.text, LazyText) or len(content.text) > LAZY_TEXT_CHARS)


def _facts(state: RunState, view: ContextFragment | FragmentEntry, hit: Hit | None, provider: str,
           count: Callable[[str], int], large: bool) -> Facts:
    media = None  # no media folded yet: nothing to price
    if state.media_seen:
        media = plan_fragment(state, view if isinstance(view, ContextFragment) else view.head, provider)
    text_tokens = view.token_count - (media.fold_tokens if media is not None else 0)
    folded = state.entries[view.id].framing  # a view keeps its fragment's kind, trust and source
    overhead = folded if folded is not None else framing_tokens(view.kind, view.trust, view.source_ref, count,
                                                                answer_frame(view))
    status = _result_status(view) if view.kind == "tool_result" else None
    if view.kind in ("evidence", "memory", "instruction", "user_input"):
        shrink = text_tokens > SHRINK_FLOOR
    elif view.kind == "tool_result":
        shrink = status in ("ok", "error") and text_tokens > SHRINK_FLOOR
    else:
        shrink = False
    if shrink and folded is not None and is_data(view.kind, view.trust):
        # What neutralising the whole text adds ([data] markers) is framing the fold priced with
        # the text; a cut text is fitted by its neutralised count, which holds the markers of
        # what it keeps. As fixed overhead they were charged twice: a transcript-like result cut
        # to 217 tokens was charged 1,420, and at 1.3k a spurious required-over-budget error.
        neutral = folded - framing_tokens(view.kind, view.trust, view.source_ref, count, answer_frame(view))
        overhead, text_tokens = overhead - neutral, text_tokens + neutral
    extra = truncated_extra_tokens(view.kind, view.trust, count, status)
    return Facts(view, hit, media, large, text_tokens, overhead, shrink, extra)


@dataclass
class BuildCtx:
    """One build's view of the state: fragment facts (cached across builds) and redactions."""

    state: RunState
    config: BuildConfig
    load_text: Callable[[ArtifactRef], str] | None
    required: frozenset[str]
    count: Callable[[str], int]
    policy: RedactionPolicy | None = None
    floor: frozenset[str] = frozenset()
    """The required fragments required down to their diagnosis only
    (``RunState.latest_error_ids``)."""
    redacted: dict[str, Hit] = field(default_factory=dict)
    """Fragments with secrets seen by this build: the redacted view (token count adjusted)
    and the result."""
    late: dict[str, Facts] = field(default_factory=dict)
    """Facts of artifact-backed fragments this build redacted when it needed their text."""
    table: dict[str, Facts] = field(default_factory=dict)
    objects: dict[tuple[str, str], tuple[object, Any]] = field(default_factory=dict)
    _tables: dict[str, dict[Any, Any]] = field(default_factory=dict, init=False, repr=False)
    """This config's tables by slot (``objects_for``)."""
    dropped_lines: dict[str, Any] = field(default_factory=dict)
    """Manifest lines of dropped units, per unit id (``exclusions``)."""
    redactions: dict[str, tuple[FragmentEntry, Hit | None]] = field(default_factory=dict)
    """The policy's result per fragment id, with the entry it was for (``_redaction``)."""
    blocked: frozenset[str] = frozenset()
    """Tools the history calls that the request does not offer (``RunState.blocked_tool_names``):
    their groups' replies are priced as notes, so the tables are this set's (it changes only
    when a policy does, or a denied tool is first called)."""

    def __post_init__(self) -> None:
        kinds = tuple(self.config.redact_kinds) if self.policy is not None else ()
        # A provider changes a fragment's facts only through media prices: until the run has
        # media, builds for every provider share one table (and everything derived from it).
        pricing = self.config.provider if self.state.media_seen else "*"
        key = (self.state.counter.encoding_name, pricing, self.policy, kinds, self.blocked)
        # Every per-config table in one memo entry, found by slot name: a key holding the
        # policy hashes it in Python, and a build asks for ~8 tables.
        self._tables = self._memo(("tables", *key))
        self.table = self.objects_for("facts")
        # Output objects depend on the fragment view, not on the provider: one table per
        # encoding, so the builds of one turn for several providers share them.
        self.objects = self._memo(("objects", self.state.counter.encoding_name))
        self.dropped_lines = self.objects_for("dropped")
        self.redactions = self.objects_for("redactions")

    def _memo(self, key: tuple[object, ...]) -> dict[Any, Any]:
        table = self.state.memo.get(key)
        if not isinstance(table, dict):
            table = self.state.memo[key] = {}
        return table

    def objects_for(self, slot: str) -> dict[Any, Any]:
        """A per-config table that lives as long as the state (see ``cached``)."""
        table = self._tables.get(slot)
        if table is None:
            table = self._tables[slot] = {}
        return table

    def cached(self, slot: str, fid: str, key: object) -> Any:
        """The object kept for ``(slot, fid)`` by an earlier build under the same ``key``
        (every input that built it), else None. For immutable output objects (manifest
        lines, fragment views) that a long run would otherwise rebuild unchanged every turn."""
        hit = self.objects.get((slot, fid))
        return hit[1] if hit is not None and hit[0] == key else None

    def keep(self, slot: str, fid: str, key: object, obj: T) -> T:
        self.objects[(slot, fid)] = (key, obj)
        return obj

    def facts(self, fid: str) -> Facts:
        hit = self.late.get(fid)
        if hit is not None:
            return hit
        facts = self.table.get(fid)
        if facts is None:
            facts = self.table[fid] = self._compute(fid)
        return facts

    def _compute(self, fid: str) -> Facts:
        entry = self.state.entries[fid]  # a lazy entry is costed without its text
        large = _entry_artifact_text(entry) or _large_text(entry)
        hit = None
        if not large:  # inline text: redacted before selection
            hit = self._redaction(fid)
        facts = _facts(self.state, hit[0] if hit else entry, hit, self.config.provider, self.count, large)
        content = entry.content
        if self.blocked and isinstance(content, Response) and content.calls:
            missing = not_offered_names([n for _, n, _ in content.calls], self.blocked)
            if missing:
                return self._note_facts(facts, content, missing)
        return facts

    def _note_facts(self, facts: Facts, content: Response, missing: tuple[str, ...]) -> Facts:
        """``facts`` of a reply shown as the note of calls to tools the request does not offer."""
        view, hit = facts.view, facts.hit
        if hit is None:
            said, calls = content.text, content.calls
        else:  # redacted: the note shows what the redacted view holds
            said = hit[1].text
            calls = tuple((b.call_id, b.name, b.arguments) for b in hit[0].content
                          if isinstance(b, ToolCallBlock))
        text = not_offered_record(said, calls)
        overhead = self.count(not_offered_header(missing)) + framing_tokens(
            view.kind, view.trust, view.source_ref, self.count, texts=(text,), label=NOTE_LABEL)
        return Facts(view, hit, None, False, self.count(text), overhead, False, not_offered=missing)

    def _redaction(self, fid: str) -> Hit | None:
        """The policy applied to ``fid``, memoised across builds and states by content."""
        entry = self.state.entries[fid]
        if self.policy is None or entry.kind not in self.config.redact_kinds:
            return None
        # First this table's answer for this very entry: a long run's build asks again for
        # each of the ~60 artifact-backed results it keeps, and the content key below hashes
        # the policy (a dataclass: a Python-level __hash__) twice per lookup.
        mine = self.redactions.get(fid)
        if mine is not None and mine[0] is entry:
            return mine[1]
        key = (entry.id, entry.content_hash, entry.source_ref, entry.trust, self.policy)
        got = _REDACTIONS.get(key)
        if got is None:
            text = self.raw_text(fid)  # the fragment is made only when the text holds a secret
            content = entry.content
            if isinstance(content, Response) and content.calls:  # its calls' arguments too
                found = redact_reply_fragment(entry.fragment, text, self.policy, self.count)
            else:
                result = redact(text, self.policy)
                found = (redact_fragment(entry.fragment, text, self.policy, self.count, result)
                         if result.findings else None)
            calls = content.calls if isinstance(content, Response) else ()
            size = len(text) + sum(len(a) for _, _, a in calls)
            got = _REDACTIONS.put(key, (found,), size if found is not None else 0)
        hit = got[0]
        self.redactions[fid] = (entry, hit)
        return hit

    def frag(self, fid: str) -> ContextFragment:
        return self.facts(fid).frag

    def shown(self, frag: ContextFragment) -> ContextFragment:
        """The fragment a request shows for ``frag`` (a facts view): a lazy entry's head is
        swapped for the full fragment, its text read back from the log."""
        entry = self.state.entries[frag.id]
        return entry.fragment if entry.lazy and frag is entry.head else frag

    def seen_frag(self, fid: str) -> ContextFragment:
        """The fragment as this build has seen it: redacted if it redacted it, else as logged."""
        hit = self.redacted.get(fid)
        return hit[0] if hit is not None else self.state.entries[fid].fragment

    def media(self, fid: str) -> FragmentMedia | None:
        """The fragment's images/PDFs priced for the provider being built (``media_plan``)."""
        return self.facts(fid).media

    def text_tokens(self, fid: str) -> int:
        return self.facts(fid).text_tokens

    def content_tokens(self, fid: str, *, reduced: bool = False) -> int:
        f = self.facts(fid)
        m = f.media
        return f.text_tokens + (0 if m is None else m.reduced_tokens if reduced else m.tokens)

    def overhead(self, fid: str) -> int:
        return self.facts(fid).overhead

    def cost(self, fid: str) -> int:
        return self.facts(fid).cost

    def truncated_extra(self, fid: str) -> int:
        """What marking ``fid``'s data block as truncated adds to its framing (``framing``)."""
        return self.facts(fid).truncated_extra

    def text_shrinkable(self, fid: str) -> bool:
        return self.facts(fid).text_shrinkable

    def has_artifact_text(self, fid: str) -> bool:
        return self.facts(fid).has_artifact_text

    def raw_text(self, fid: str) -> str:
        """The logged text of ``fid`` (artifact-backed payloads loaded through the port)."""
        entry = self.state.entries[fid]
        plain = entry.plain_text()
        if plain is not None:
            return plain
        parts: list[str] = []
        for block in entry.fragment.content:
            if isinstance(block, TextBlock | ToolResultBlock):
                if isinstance(block, ToolResultBlock) and block.artifact and self.load_text:
                    parts.append(self.load_text(block.artifact))
                else:
                    parts.append(block.text)
            elif isinstance(block, DocumentBlock) and block.artifact and block.media_type.startswith("text/"):
                parts.append(self.load_text(block.artifact) if self.load_text else "")
        return "\n".join(parts)

    def note(self, fid: str) -> Facts:
        """Facts of a fragment this build considers; records its redaction, if any."""
        facts = self.facts(fid)
        if facts.hit is not None:
            self.redacted[fid] = facts.hit
        return facts

    def redact(self, fid: str) -> None:
        """Redact an artifact-backed ``fid`` now that its text is needed (inline ones already are)."""
        if self.policy is None or fid in self.redacted:
            return
        hit = self._redaction(fid)
        if hit is not None:
            self.redacted[fid] = hit
            self.late[fid] = _facts(self.state, hit[0], hit, self.config.provider, self.count,
                                    _has_artifact_text(hit[0]))

    def redacts(self, fid: str) -> bool:
        """Whether :meth:`redact` redacts ``fid`` (or has): asked without recording it."""
        return fid in self.redacted or (self.policy is not None and self._redaction(fid) is not None)

    def full_text(self, fid: str) -> str:
        """The text a build may render: redacted first, so truncation never cuts a secret in half."""
        self.redact(fid)
        if fid in self.redacted:
            return self.redacted[fid][1].text
        return self.raw_text(fid)


@dataclass
class Units:
    """The candidates of one build: units, their fragments, layers, and early exclusions."""

    units: list[Unit] = field(default_factory=list)
    """State fragments' units and the timeline's required ones (its optional ones are in
    ``presorted``)."""
    presorted: dict[str, list[Unit]] = field(default_factory=dict)
    """The timeline's optional units by layer, sorted by rank (``select_units(presorted=)``)."""
    unit_of: dict[str, Unit] = field(default_factory=dict)
    """Every unit by id."""
    state_ids: list[str] = field(default_factory=list)
    """Units of state fragments (policy ... memory): derived every build."""
    timeline: TimelineUnits = field(default_factory=TimelineUnits)
    """The timeline's memoised units (what changed since when: ``touched_since``)."""
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_no: dict[str, int] = field(default_factory=dict)
    excluded: list[ExcludedFragment] = field(default_factory=list)


def _state_units(ctx: BuildCtx, state_ids: list[str]
                 ) -> tuple[list[Unit], dict[str, tuple[str, ...]], dict[str, int], list[ExcludedFragment]]:
    """The state fragments' units, member tables and ``duplicate`` lines (``make_units``)."""
    entries = ctx.state.entries
    units: list[Unit] = []
    members: dict[str, tuple[str, ...]] = {}
    layer_no: dict[str, int] = {}
    excluded: list[ExcludedFragment] = []
    left_out: set[str] = set()
    # A newer retrieval of the same source is its newer version: it supersedes the older ones,
    # whatever their trust (a stale cached copy declared workspace hid a fresh external fetch).
    # (A memory is one by its memory_id, superseded in the fold: its source_ref may name the
    # store that holds many; file reads supersede by path and range in the fold.)
    newest: dict[str, str] = {}
    for fid in state_ids:
        f = ctx.frag(fid)
        if f.kind == "evidence" and not f.source_ref.startswith("file://"):
            old = newest.get(f.source_ref)
            if old is None or entries[fid].position > entries[old].position:
                newest[f.source_ref] = fid
    for fid in state_ids:
        f = ctx.frag(fid)
        if (f.kind == "evidence" and (newer := newest.get(f.source_ref, fid)) != fid
                and fid not in ctx.required):
            excluded.append(ExcludedFragment(
                id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count, reason="superseded",
                replaced_by=newer, detail="a newer retrieval of the same source"))
            left_out.add(fid)
    # copies of one content or semantic key (a whole-file read is keyed by its path): the more
    # authoritative, then an instruction (the cached stable prefix: reading AGENTS.md moved its
    # instruction to the retrieval layer and changed the cache key), then the newer
    ranked = sorted((fid for fid in state_ids if fid not in left_out),
                    key=lambda fid: (-TRUST_RANK[ctx.frag(fid).trust], entries[fid].kind != "instruction",
                                     -entries[fid].position, fid))
    # The same text from two files is two facts: a copy by content only from the same file
    # (``fact_sources``), or from no file (a mirror's page, a memory).
    files = file_sources(ctx.state, ranked, ctx.frag)
    kept_texts: dict[str, list[str]] = {}
    seen_semantic: dict[str, str] = {}
    for fid in ranked:
        f = ctx.frag(fid)
        semantic = ctx.state.semantic_keys.get(fid)  # the same fact under two sources: one copy
        winner = copy_of(fid, kept_texts.get(f.content_hash, ()), files)
        if winner is None and semantic is not None:
            winner = seen_semantic.get(semantic)
        if winner is not None and fid not in ctx.required:
            excluded.append(ExcludedFragment(
                id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count, reason="duplicate",
                replaced_by=winner))
            left_out.add(fid)
            continue
        kept_texts.setdefault(f.content_hash, []).append(fid)
        if semantic is not None:
            seen_semantic.setdefault(semantic, fid)
    for fid in state_ids:
        if fid in left_out:
            continue
        facts = ctx.facts(fid)
        f = facts.frag
        pos = entries[fid].position
        tokens = facts.cost
        layer = _STATE_LAYER.get(f.kind, "retrieval")
        units.append(Unit(fid, layer, tokens, score(f.priority, pos, tokens), pos,
                          fid in ctx.required, facts.min_cost if facts.shrinkable else None))
        members[fid] = (fid,)
        layer_no[fid] = _STATE_LAYER_NO.get(layer, 6)
    return units, members, layer_no, excluded


def make_units(ctx: BuildCtx, timeline: Sequence[TimelineItem], mark: TimelineMark,
               current_input: str | None) -> Units:
    """State fragments (deduped) and timeline units (a tool group is one atomic unit).

    Dedupe: optional state fragments that share a content hash or a semantic key
    (evidence ``source_ref``, or the ``semantic_key`` it was retrieved under) keep one
    copy: the more authoritative, then the newer.
    A group with a call still open is excluded as ``stale``; one that uses a tool the
    request does not offer (``ctx.blocked``) is a unit shown as a note (``not_offered``).
    """
    state = ctx.state
    entries = state.entries
    state_ids = [fid for fid in state.active if entries[fid].kind != "tool_spec"]
    facts = list(map(ctx.note, state_ids))
    # The state fragments (policy, goal, plan, instructions, evidence) rarely change between
    # builds: their units are the same while the fragments' facts and entries are the same
    # objects and the same ones are required (a short run's build ranked and scored them anew
    # every time, ~4% of it).
    key = (state_ids, facts, list(map(entries.__getitem__, state_ids)),
           [fid in ctx.required for fid in state_ids])
    memo = ctx.objects_for("state-units")
    hit = memo.get("last")
    if hit is None or hit[0] != key:
        hit = memo["last"] = (key, *_state_units(ctx, state_ids))
    _, kept_units, members, layer_no, duplicates = hit
    units = list(kept_units)  # the timeline's required units are added below
    excluded = list(duplicates)

    tu = timeline_units(ctx, timeline, mark, current_input)
    ctx.redacted.update(tu.hits)
    # The timeline's tables hold ~10,000 entries on a long run, with holes from rows
    # replaced: copying them to add the few state units cost ~1 ms a table per build. The
    # state units are written into them instead (this build's replace the last one's).
    tu.overlay(units, members, layer_no)
    state_units = [u.id for u in units]
    units.extend(tu.required_units.values())
    excluded.extend(tu.stale_lines())
    # Made here, whole: a default Units() would make a TimelineUnits (~15 empty tables) only
    # to drop it.
    return Units(units=units, presorted=tu.sorted_layers, unit_of=tu.unit_of, state_ids=state_units,
                 timeline=tu, members=tu.members, layer_no=tu.layer_no, excluded=excluded)


def current_input_of(timeline: Sequence[TimelineItem]) -> str | None:
    """The user input this request answers: the newest item, past trailing notes."""
    current: str | None = None
    for item in reversed(timeline):
        if isinstance(item, MessageItem) and item.role == "user":
            current = item.fragment_id
        if not (isinstance(item, MessageItem) and item.role == "note"):
            break
    return current


__all__ += ["current_input_of"]
