"""Per-fragment costs of one build, cached across builds (:class:`Facts`, :class:`BuildCtx`).
How one view is costed is :mod:`contextfold.projections.view_facts`; which view each build
prices, and the caches, are here.

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
redacted view for the rest of that build (``BuildCtx.late``). Selection prices
the units it reaches by those facts (``BuildCtx.redacted_facts``,
``redacted_units``): placeholders longer than their secrets are paid for. Why long inline
texts too: scanning a 20 KB log for secrets takes ~6 ms, so redacting every
long tool output before selection cost minutes on the first build of a run
with tens of thousands of them, and would have meant reading every text back
from the log.

Costs counted: every fragment pays ``MESSAGE_OVERHEAD`` tokens of message
framing, a data fragment (instruction, evidence, memory, tool result, or any
text not authored by the runtime or the user) also pays its ``<data ...>``
wrapper, a reply with calls or a tool result the call ids its message shows
(``call_id_prices``), and in a Gemini build a tool result the tool's name its
``functionResponse`` repeats (``framing.response_name_tokens``; neutral follows OpenAI's
framing, which has none), and in an Anthropic build a call or a result the markup Claude renders
it in (``call_id_prices.anthropic_block_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from contextfold.domain.errors import ArtifactNotFoundError
from contextfold.domain.event_values import media_type_key
from contextfold.domain.events import ArtifactRef, DocumentBlock, TextBlock
from contextfold.domain.fragments import ContextFragment, ToolResultBlock
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.bounded_memo import STR_BYTES, BoundedMemo, text_bytes
from contextfold.projections.call_id_prices import call_id_tokens, chat_ids_unsent, split_reply_tokens
from contextfold.projections.entries import FragmentEntry, Response
from contextfold.projections.framing import NOTE_LABEL, framing_tokens
from contextfold.projections.media_cost import openai_image_key
from contextfold.projections.media_plan import FragmentMedia
from contextfold.projections.model_family import chat_audio_model, not_a_reasoning_model, run_model_for
from contextfold.projections.not_offered import (
    RECORD_TRUST,
    not_offered_header,
    not_offered_names,
    not_offered_record,
    reply_as_shown,
)
from contextfold.projections.reasoning import NEUTRAL
from contextfold.projections.redact import RedactionPolicy, redact_fragment
from contextfold.projections.redact_calls import redact_reply_fragment
from contextfold.projections.redact_escapes import redact_json_escapes
from contextfold.projections.state import RunState
from contextfold.projections.view_facts import (
    SHRINK_FLOOR,
    Facts,
    Hit,
    entry_has_artifact_text,
    has_artifact_text,
    large_text,
    view_facts,
)

__all__ = ["SHRINK_FLOOR", "BuildCtx", "Facts", "Hit", "call_id_tokens", "split_reply_tokens"]

_REDACTIONS: BoundedMemo[tuple[str, str, str, str, RedactionPolicy], tuple[Hit | None]] = BoundedMemo(
    200_000, share="redactions")
"""Redaction results by fragment identity and content: builds of a growing run repeat them. A
result is ``(None,)`` when the text holds no secret, else the redacted fragment, whose text is
counted against the bound with the key's texts."""
_KEY_BYTES = 4 * STR_BYTES + 400
"""An entry's key and slot: a fragment id, a 64-hex content hash, a source ref (~300 characters
in all: counted as a constant, a build asks for each new fragment)."""

T = TypeVar("T")


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
    # The tables below are the state's memo's, found in ``__post_init__``: no default (a
    # default factory made five dicts per build only to drop them there).
    table: dict[str, Facts] = field(init=False)
    objects: dict[tuple[str, str], tuple[object, Any]] = field(init=False)
    _tables: dict[str, dict[Any, Any]] = field(init=False, repr=False)
    """This config's tables by slot (``objects_for``)."""
    dropped_lines: dict[str, Any] = field(init=False)
    """Manifest lines of dropped units, per unit id (``exclusions``)."""
    redactions: dict[str, tuple[FragmentEntry, Hit | None]] = field(init=False)
    """The policy's result per fragment id, with the entry it was for (``_redaction``)."""
    blocked: frozenset[str] = frozenset()
    """Tools the history calls that the request does not offer (``tool_candidates.ToolInputs.blocked``):
    their groups' replies are priced as notes, so the tables are this set's (it changes only
    when a policy does, or a denied tool is first called)."""
    model: str | None = field(default=None, init=False)
    """The model the request names (``config.model``, else the run's where the provider serves
    it): a model that does not reason is sent none of the run's reasoning (``reasoning``)."""
    pricing: str = field(default="*", init=False)
    """What the facts tables are this config's for: ``*`` while neither media nor reasoning
    makes a fragment's price depend on the build's provider, else the provider and, with
    reasoning, whether the model takes it, with media the model's OpenAI image rule
    (``__post_init__``)."""

    def __post_init__(self) -> None:
        kinds = tuple(self.config.redact_kinds) if self.policy is not None else ()
        # A provider changes a fragment's facts through media prices, reasoning (sent to its own
        # provider only), call ids shown under an alias (``call_id_tokens``), a reply OpenAI
        # Chat sends as several messages (``split_reply_tokens``), the name Gemini repeats in
        # a result (``framing.response_name_tokens``), an OpenAI model's Chat calls, billed
        # without their ids (``call_id_prices.chat_ids_unsent``), and Claude's markup around calls
        # and results (``call_id_prices.anthropic_block_tokens``): the builds for the other providers of a
        # run with none of these share one table (and everything derived from it); else a
        # provider shown no alias still shares it, the others have their own. Sharing beyond that
        # made a handle's manifest depend on the provider it built for before (a fresh process,
        # and ``replay --verify``, counted the aliases).
        provider, state = self.config.provider, self.state
        self.model = self.config.model or run_model_for(provider, state.model)
        aliased = provider in state.aliased_for or (provider == NEUTRAL and bool(state.aliased_for))
        unsent = chat_ids_unsent(provider, self.model) and bool(state.request_call_ids or state.answer_group)
        pricing = (provider if state.media_seen or state.reasoning_seen or state.wide_reply_seen or aliased
                   or (provider == "gemini" and bool(state.answer_group)) or unsent
                   or (provider == "anthropic" and bool(state.request_call_ids or state.answer_group))
                   else "*")
        if unsent:
            pricing += " ids unsent"  # its calls' price: the same provider for another model keeps the ids
        if state.reasoning_seen and not_a_reasoning_model(self.model):
            pricing += " without reasoning"  # what decides the price is the model's kind, not its name
        if state.media_seen and (rule := openai_image_key(provider, self.model)) is not None:
            pricing += f" images {rule}"  # OpenAI prices an image per model: gpt-4o-mini's is 33x gpt-4o's
        if state.media_seen and provider == "openai-chat" and chat_audio_model(self.model):
            pricing += " audio"  # its audio is sent (and priced by its bytes), any other model's a note
        self.pricing = pricing
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

    def base_facts(self, fid: str) -> Facts:
        """The facts every build starts from (a large payload's of its logged view), whether or
        not this build has redacted ``fid`` since (:meth:`facts` then gives the redacted view's)."""
        facts = self.table.get(fid)
        if facts is None:
            facts = self.table[fid] = self._compute(fid)
        return facts

    def redacted_facts(self, fid: str) -> Facts | None:
        """Facts of a large payload's redacted view, when redacting it changes its text: what
        :meth:`redact` makes this build's facts of ``fid``. None for an inline text (its facts
        are of its redacted view already), a payload without a secret, or no policy.

        Asked without recording the redaction (``redacted``, ``late``): selection prices the
        units it walks by it (``redacted_units``), including one it then leaves out. Kept per
        configuration while the redaction result is the same object, as the facts are: the text
        is read back and scanned once (``_redaction``), its facts made once."""
        if self.policy is None or not self.base_facts(fid).has_artifact_text:
            return None
        hit = self._redaction(fid)
        if hit is None:
            return None
        memo = self.objects_for("redacted-facts")
        got = memo.get(fid)
        if got is None or got[0] is not hit:
            got = memo[fid] = (hit, view_facts(self.state, hit[0], hit, self.config.provider, self.count,
                                           has_artifact_text(hit[0]), self.model))
        facts: Facts = got[1]
        return facts

    def _compute(self, fid: str) -> Facts:
        entry = self.state.entries[fid]  # a lazy entry is costed without its text
        large = entry_has_artifact_text(entry) or large_text(entry)
        hit = None
        if not large:  # inline text: redacted before selection
            hit = self._redaction(fid)
        facts = view_facts(self.state, hit[0] if hit else entry, hit, self.config.provider, self.count, large,
                       self.model)
        content = entry.content
        if self.blocked and isinstance(content, Response) and content.calls:
            missing = not_offered_names([n for _, n, _ in content.calls], self.blocked)
            if missing:
                return self._note_facts(facts, missing)
        return facts

    def _note_facts(self, facts: Facts, missing: tuple[str, ...]) -> Facts:
        """``facts`` of a reply shown as the note of calls to tools the request does not offer."""
        view, hit = facts.view, facts.hit
        shown = reply_as_shown(self.state.entries[view.id], None if hit is None else hit[0])
        text = not_offered_record(*shown)
        overhead = self.count(not_offered_header()) + framing_tokens(
            view.kind, RECORD_TRUST, view.source_ref, self.count, texts=(text,), label=NOTE_LABEL)
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
                found = redact_reply_fragment(lambda: entry.fragment, text, [a for _, _, a in content.calls],
                                              self.policy, self.count)
            else:
                result = redact_json_escapes(text, self.policy)  # as written and as its JSON reads
                found = (redact_fragment(entry.fragment, text, self.policy, self.count, result)
                         if result.findings else None)
            calls = content.calls if isinstance(content, Response) else ()
            size = _KEY_BYTES  # the key's id, hash and source ref
            if found is not None:  # the redacted fragment's texts (``text_bytes`` of none: an entry's)
                size += text_bytes(text, *(a for _, _, a in calls))
            got = _REDACTIONS.put(key, (found,), size)
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
                if isinstance(block, ToolResultBlock) and block.artifact:
                    parts.append(self._stored_text(block.artifact))
                else:
                    parts.append(block.text)
            elif (isinstance(block, DocumentBlock) and block.artifact
                  and media_type_key(block.media_type).startswith("text/")):
                parts.append(self._stored_text(block.artifact))
        return "\n".join(parts)

    def _stored_text(self, ref: ArtifactRef) -> str:
        """The text the log stores as ``ref``, read through the ``load_text`` port. A build given
        no port refuses: it read the logged preview (the first 2 KB) as the whole output, and sent
        it uncut with no truncation record, or an empty document, a request that differed from
        the one the same state built with the store's port (``Run.build``)."""
        if self.load_text is None:
            raise ArtifactNotFoundError(ref.hash, "holds a text this build needs, and the build was given "
                                                  "no load_text to read it (Run.build passes the store's)")
        return self.load_text(ref)

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
            self.late[fid] = self.redacted_facts(fid) or view_facts(
                self.state, hit[0], hit, self.config.provider, self.count, has_artifact_text(hit[0]),
                self.model)

    def redacts(self, fid: str) -> bool:
        """Whether :meth:`redact` redacts ``fid`` (or has): asked without recording it."""
        return fid in self.redacted or (self.policy is not None and self._redaction(fid) is not None)

    def full_text(self, fid: str) -> str:
        """The text a build may render: redacted first, so truncation never cuts a secret in half."""
        self.redact(fid)
        if fid in self.redacted:
            return self.redacted[fid][1].text
        return self.raw_text(fid)
