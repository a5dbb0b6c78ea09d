"""FragmentEntry: a folded fragment as the state keeps it, materialised on demand.

Why not one ``ContextFragment`` per event: a pydantic model with its block
models cost ~1.9 KB and ~8 objects per event (every instance carries a
``__dict__`` and a ``__pydantic_fields_set__`` set), ~190 MB for a 100k-event
run, and validating them was about a third of the fold's time. An entry keeps,
in slots, what a build reads for every fragment (kind, trust, priority,
required, token count, content hash, source ref, position) and the content as
the plain values it is made of (:class:`ToolAnswer`, :class:`Response`) or, for
the rarer events, as the blocks themselves. ``entry.fragment`` builds the
``ContextFragment`` the first time it is asked for (a build asks for the
fragments it costs) and keeps it: the same fragment, field for field, that
the fold used to build eagerly.

The content hash of a recipe is the blake3 of the canonical JSON of its
blocks, written directly from the plain values (:meth:`ToolAnswer.canonical`)
rather than through ``model_dump`` + ``json.dumps``; the bytes are the same
(tested against :func:`contextfold.projections.fold_content.blocks_hash`).

Long texts are loaded when rendered. With a text source (``RunState.event_text``,
a port to the store, wired by the API), a tool result whose text is longer than
:data:`LAZY_TEXT_CHARS` keeps only a :class:`LazyText` (its log position): the
text is read back from the event when the full fragment is asked for, and
checked against the content hash taken at fold time (``IntegrityError`` if the
log does not give back the bytes the fold saw). Such an entry is not cached
whole, so a state never holds every byte its log carried; ``entry.head`` is the
same fragment with the text left out, for everything that only costs, ranks or
places a fragment (builds cost from the stored token count and hash).

Entries are immutable by convention: the fold creates them, nothing assigns
to their slots afterwards except the one-time fragment cache, which is
idempotent (two threads materialising at once build equal fragments).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple, Protocol

import blake3

from contextfold.domain.canonical import canonical_utf8, quote, quote_utf8
from contextfold.domain.errors import IntegrityError
from contextfold.domain.event_values import media_type_key
from contextfold.domain.events import (
    ArtifactRef,
    ContentBlock,
    DocumentBlock,
    Reasoning,
    TextBlock,
    TextBreak,
)
from contextfold.domain.fragments import (
    ContextFragment,
    FragmentKind,
    MessageBlock,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
    Trust,
)

__all__ = ["LAZY_TEXT_CHARS", "AnswerStatus", "Content", "FragmentEntry", "FragmentFields", "LazyText",
           "Response", "ToolAnswer", "artifact_text_in", "blocks_hash", "plain_text_of", "reasoning_of"]

LAZY_TEXT_CHARS = 1024
"""A tool result text longer than this is a large payload: held as a ref when the state has a
text source, and (whether held or not) redacted when a build first needs its text, like an
artifact-backed payload (``projections.fragment_facts``)."""

def plain_text_of(content: Content) -> str | None:
    """:meth:`FragmentEntry.plain_text` of an entry holding ``content`` (or of a fragment's blocks)."""
    if isinstance(content, Response):
        return content.text
    if isinstance(content, ToolAnswer):
        return content.text if content.artifact is None and isinstance(content.text, str) else None
    if artifact_text_in(content):  # blocks already: their texts, unless one lives in an artifact
        return None
    return "\n".join(b.text for b in content if isinstance(b, TextBlock | ToolResultBlock))


def blocks_hash(blocks: tuple[MessageBlock, ...]) -> str:
    """``content_hash``: blake3 of the canonical JSON (sorted keys) of the blocks."""
    dumped = [b.model_dump(mode="json") for b in blocks]
    return blake3.blake3(canonical_utf8(dumped)).hexdigest()


def artifact_text_in(blocks: tuple[MessageBlock, ...]) -> bool:
    """Whether a text among ``blocks`` lives in an artifact (a tool result's, or a text document's):
    it is loaded, not read from the block, when rendered."""
    return any((isinstance(b, ToolResultBlock) and b.artifact is not None)
               or (isinstance(b, DocumentBlock) and b.artifact is not None
                   and media_type_key(b.media_type).startswith("text/"))
               for b in blocks)


def _opt_str(value: str | None) -> str:
    return "null" if value is None else str(quote(value))


class LazyText(NamedTuple):
    """The ``content`` text of the event at ``position``, read through ``load`` when needed."""

    position: int
    load: Callable[[int], str]

    def placeholder(self) -> str:
        return f"[text of log position {self.position}, loaded when rendered]"


AnswerStatus = Literal["ok", "error", "lost", "cancelled"]


class ToolAnswer(NamedTuple):
    """The content of a tool_result fragment: one ``ToolResultBlock``, as plain values."""

    call_id: str
    name: str | None
    status: AnswerStatus
    text: str | LazyText
    artifact: ArtifactRef | None
    blocks: tuple[ContentBlock, ...]
    exit_code: int | None

    def to_blocks(self, *, head: bool = False) -> tuple[MessageBlock, ...]:
        """The blocks; ``head``: a lazy text left out (a placeholder, never rendered)."""
        text = self.text
        if isinstance(text, LazyText):
            text = text.placeholder() if head else text.load(text.position)
        return (ToolResultBlock(call_id=self.call_id, name=self.name, status=self.status,
                                text=text, artifact=self.artifact, blocks=self.blocks,
                                exit_code=self.exit_code),)

    def canonical(self) -> bytes | None:
        """Canonical JSON of :meth:`to_blocks`; None when nested blocks need the generic path
        (and for a lazy text, which is hashed when folded, from the text itself)."""
        if self.blocks or isinstance(self.text, LazyText):
            return None
        a = self.artifact
        art = ("null" if a is None else
               f'{{"hash":{quote(a.hash)},"media_type":{quote(a.media_type)},"size":{int(a.size)}}}')
        code = "null" if self.exit_code is None else str(int(self.exit_code))
        return b"".join((
            (f'[{{"artifact":{art},"blocks":[],"call_id":{quote(self.call_id)},"exit_code":{code},'
             f'"name":{_opt_str(self.name)},"status":{quote(self.status)},"text":').encode(),
            quote_utf8(self.text), b',"type":"tool_result"}]'))


class Response(NamedTuple):
    """The content of a model response's history fragment: its text, then its calls
    as ``(call_id, name, arguments)``, then its provider reasoning if it has any (a
    ``ReasoningBlock`` last: a response without one has the blocks, and so the content hash,
    it had before reasoning was kept)."""

    text: str
    calls: tuple[tuple[str, str, str], ...]
    reasoning: Reasoning | None = None
    breaks: tuple[TextBreak, ...] = ()
    """Where the text's pieces stood (``ModelResponse.text_breaks``): not a block (the fragment's
    text is the one text), but part of the content's digest (:meth:`canonical`)."""

    def to_blocks(self) -> tuple[MessageBlock, ...]:
        head: tuple[MessageBlock, ...] = (TextBlock(text=self.text),) if self.text else ()
        tail: tuple[MessageBlock, ...] = (() if self.reasoning is None
                                          else (ReasoningBlock(reasoning=self.reasoning),))
        return head + tuple(ToolCallBlock(call_id=c, name=n, arguments=a) for c, n, a in self.calls) + tail

    def canonical(self) -> bytes | None:
        """The canonical JSON of :meth:`to_blocks`, written directly; None with reasoning (the
        generic path dumps it)."""
        if self.reasoning is not None or self.breaks:
            return None
        parts = [b'{"text":' + quote_utf8(self.text) + b',"type":"text"}'] if self.text else []
        parts.extend(b'{"arguments":' + quote_utf8(a) + f',"call_id":{quote(c)},"name":{quote(n)},'
                     f'"type":"tool_call"}}'.encode() for c, n, a in self.calls)
        return b"[" + b",".join(parts) + b"]"


Content = tuple[MessageBlock, ...] | ToolAnswer | Response
"""What an entry holds: the blocks themselves, or a recipe of plain values."""


def reasoning_of(view: ContextFragment | FragmentEntry) -> Reasoning | None:
    """The provider reasoning a fragment (or its folded entry) carries, if any: a model response's
    (``Response.reasoning``, or the ``ReasoningBlock`` of a fragment built from blocks)."""
    content = view.content
    if isinstance(content, Response):
        return content.reasoning
    if isinstance(content, ToolAnswer):
        return None
    return next((b.reasoning for b in content if isinstance(b, ReasoningBlock)), None)


class FragmentFields(Protocol):
    """What a fragment and its folded entry both answer: a build reads these from the entry, and
    makes the ``ContextFragment`` (its blocks validated) only where it needs the blocks."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> FragmentKind: ...
    @property
    def source_ref(self) -> str: ...
    @property
    def trust(self) -> Trust: ...
    @property
    def priority(self) -> int: ...
    @property
    def token_count(self) -> int: ...
    @property
    def content_hash(self) -> str: ...


class FragmentEntry:
    """A fragment as folded, plus the log position its freshness derives from.

    ``fragment`` carries ``freshness=1.0`` and the fragment's own ``required``
    flag; the state's views replace both with the values as of the current log.
    """

    __slots__ = ("_fragment", "content", "content_hash", "framing", "id", "kind", "position", "priority",
                 "required", "source_ref", "token_count", "trust")

    id: str
    kind: FragmentKind
    source_ref: str
    trust: Trust
    priority: int
    required: bool
    token_count: int
    content_hash: str
    content: Content
    position: int
    framing: int | None
    """Tokens of the fragment's framing (``projections.framing``), counted when folded; None
    when the entry was made from a fragment (a build counts it then)."""
    _fragment: ContextFragment | None

    def __init__(self, fragment: ContextFragment, position: int) -> None:
        self.id, self.kind, self.source_ref = fragment.id, fragment.kind, fragment.source_ref
        self.trust, self.priority, self.required = fragment.trust, fragment.priority, fragment.required
        self.token_count, self.content_hash = fragment.token_count, fragment.content_hash
        self.content, self.position, self._fragment = fragment.content, position, fragment
        self.framing = None

    @classmethod
    def folded(cls, fid: str, kind: FragmentKind, source_ref: str, trust: Trust, priority: int,
               required: bool, token_count: int, content_hash: str, content: Content,
               position: int, framing: int | None = None) -> FragmentEntry:
        """An entry whose ContextFragment is built when first asked for."""
        self = cls.__new__(cls)
        self.id, self.kind, self.source_ref = fid, kind, source_ref
        self.trust, self.priority, self.required = trust, priority, required
        self.token_count, self.content_hash = token_count, content_hash
        self.content, self.position, self._fragment = content, position, None
        self.framing = framing
        return self

    def moved(self, position: int) -> FragmentEntry:
        """The same fragment, its freshness taken from another log position."""
        return FragmentEntry.folded(self.id, self.kind, self.source_ref, self.trust, self.priority,
                                    self.required, self.token_count, self.content_hash, self.content,
                                    position, self.framing)

    @property
    def lazy(self) -> bool:
        """Whether the text lives in the log only (loaded when the full fragment is asked for)."""
        content = self.content
        return isinstance(content, ToolAnswer) and isinstance(content.text, LazyText)

    def blocks(self, *, head: bool = False) -> tuple[MessageBlock, ...]:
        content = self.content
        if isinstance(content, ToolAnswer):
            return content.to_blocks(head=head)
        if isinstance(content, Response):
            return content.to_blocks()
        return content

    def _build(self, content: tuple[MessageBlock, ...]) -> ContextFragment:
        return ContextFragment(
            id=self.id, kind=self.kind, source_ref=self.source_ref, trust=self.trust,
            priority=self.priority, required=self.required, freshness=1.0,
            token_count=self.token_count, content_hash=self.content_hash, content=content)

    @property
    def fragment(self) -> ContextFragment:
        """The full fragment: built once and kept, or for a lazy entry loaded (and verified)
        every time, so the state never keeps the text."""
        frag = self._fragment
        if frag is not None and not self.lazy:
            return frag
        content = self.blocks()
        if not self.lazy:
            frag = self._fragment = self._build(content)
            return frag
        if blocks_hash(content) != self.content_hash:
            raise IntegrityError(f"fragment {self.id}: the text read back from log position "
                                 f"{self.position} does not match the content hash it was folded with",
                                 position=self.position)
        return self._build(content)

    @property
    def head(self) -> ContextFragment:
        """The fragment as far as a build costs it: for a lazy entry, without its text (built
        once and kept); otherwise the full fragment."""
        if not self.lazy:
            return self.fragment
        frag = self._fragment
        if frag is None:
            frag = self._fragment = self._build(self.blocks(head=True))
        return frag

    def plain_text(self) -> str | None:
        """The text a build renders for this entry, joined as its blocks' texts would be, when that
        needs no block built and nothing loaded (a model reply's text, an inline tool result's);
        None otherwise (then ask the fragment)."""
        return plain_text_of(self.content)

    def answer(self) -> ToolAnswer | None:
        """The tool result this entry holds as plain values, if it is one."""
        content = self.content
        return content if isinstance(content, ToolAnswer) else None

    def __repr__(self) -> str:
        return (f"FragmentEntry(id={self.id!r}, kind={self.kind!r}, position={self.position}, "
                f"tokens={self.token_count})")
