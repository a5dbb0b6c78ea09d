"""Fragment content for the fold: blocks, hashes, token counts, source refs.

Why separate: the fold's dispatch rules decide *what* becomes a fragment;
this module decides how its content is encoded and measured, one place for
the conventions every rule shares:

- ``content_hash`` = blake3 of the canonical JSON (sorted keys) of the blocks;
- token counts go through the shared, content-hash-cached
  :class:`~contextfold.projections.tokens.TokenCounter`. Artifact-backed
  content (the event keeps only a preview) is counted by
  ``state.artifact_tokens`` when given, else estimated as ``ceil(size / 4)``
  (about 4 bytes per token for English and code); a stored medium (audio, video, an image, a
  PDF) is never read as text, its bytes are no text a request shows. Images: OpenAI's tile
  formula when the size is known, else 765 (a 1024x1024 high-detail image);
  ``detail="low"`` is 85. Documents that are media: 1500 per page (one when the count is
  unknown); audio and video by their length at Gemini's rates, never below one page;
- a tool result text longer than ``LAZY_TEXT_CHARS`` is not kept when the state
  has a text source (``state.event_text``): the entry holds its log position
  and the text is read back when rendered (:mod:`contextfold.projections.entries`);
- an artifact-backed text payload is carried as a ``DocumentBlock`` holding
  the ref (the full content is loaded when rendered), not the preview.

The plan's text (``plan_text``, ``current_steps``) lives in
:mod:`contextfold.projections.plan_view`, re-exported here for the callers that imported it
from this module.
"""

from __future__ import annotations

import json
import math
import posixpath
import unicodedata
from collections.abc import Callable
from typing import assert_never

import blake3

from contextfold.domain.canonical import canonical_dumps
from contextfold.domain.conversation import UNPARSED_ARGUMENTS_KEY, arguments_object
from contextfold.domain.event_values import is_medium, media_artifact_block
from contextfold.domain.events import (
    ArtifactRef,
    ContentBlock,
    DocumentBlock,
    FileRead,
    ImageBlock,
    TextBlock,
    ToolResult,
)
from contextfold.domain.fragments import (
    FragmentKind,
    MessageBlock,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
    Trust,
)
from contextfold.domain.log import RecordedEvent
from contextfold.projections.entries import (
    LAZY_TEXT_CHARS,
    Content,
    FragmentEntry,
    LazyText,
    Response,
    ToolAnswer,
    blocks_hash,
    plain_text_of,
)
from contextfold.projections.framing import AnswerFrame, framing_tokens, is_data, media_alone
from contextfold.projections.media_cost import gemini_timed_cost, priced_media
from contextfold.projections.plan_view import current_steps, plan_text
from contextfold.projections.reasoning import reasoning_tokens
from contextfold.projections.redact import redact
from contextfold.projections.state import DEFAULT_PRIORITY, RunState
from contextfold.projections.tool_names import shown_names

__all__ = [
    "BYTES_PER_TOKEN",
    "DOCUMENT_PAGE_TOKENS",
    "IMAGE_TOKENS_DEFAULT",
    "IMAGE_TOKENS_LOW",
    "add_fragment",
    "add_stale_rest",
    "answer_frame_of",
    "arguments_tokens",
    "block_tokens",
    "blocks_hash",
    "call_ref",
    "content_digest",
    "content_tokens",
    "current_steps",
    "file_key",
    "file_ref",
    "payload",
    "plan_text",
    "range_within",
    "shown_as_media_alone",
    "supersede",
]

BYTES_PER_TOKEN = 4
IMAGE_TOKENS_DEFAULT = 765
IMAGE_TOKENS_LOW = 85
DOCUMENT_PAGE_TOKENS = 1500


def _artifact_tokens(state: RunState, ref: ArtifactRef) -> int:
    if state.artifact_tokens is not None:
        return state.artifact_tokens(ref, state.counter)  # as this fold counts (state.ArtifactTokens)
    return math.ceil(ref.size / BYTES_PER_TOKEN)


def _priced_by_media_rules(block: DocumentBlock) -> bool:
    """Whether ``block`` is a medium (``event_values.is_medium``), not a text payload.

    Why: the fold counted every artifact-backed document without a page count by reading its bytes
    as text. A stored 20 MB video was 15.6 million tokens of noise, and folding it took 18.6 s
    (``tests/integration/test_stored_media_fold_estimate.py``)."""
    return is_medium(block.media_type)


def _document_tokens(block: DocumentBlock) -> int:
    """The fold's estimate of a document medium, read off the block, never its bytes: 1500 a page
    (one when the count is unknown, as ``media_cost.document_cost`` prices it); audio and video
    by their length at Gemini's rates, the only provider that prices them by length (or the
    documented bound when the length is not logged: ``media_cost.gemini_timed_cost``), never
    below that one page.

    The builder replaces this estimate with each provider's price (``media_plan.plan_fragment``
    subtracts it and adds ``media_cost``), so it is a report's figure (excluded lines, a
    compaction's savings), not a budget's bound."""
    pages = DOCUMENT_PAGE_TOKENS * (block.pages or 1)
    timed = gemini_timed_cost(block)
    return pages if timed is None else max(pages, timed.tokens)


def _image_tokens(block: ImageBlock) -> int:
    if block.detail == "low":
        return IMAGE_TOKENS_LOW
    if not block.width or not block.height:
        return IMAGE_TOKENS_DEFAULT
    w, h = float(block.width), float(block.height)
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return IMAGE_TOKENS_LOW + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _call_name_tokens(name: str, count: Callable[[str], int]) -> int:
    """A call's name as a request may show it: under its alias where a provider refuses it
    (``multi_tool_use.parallel``), the longer of the two (the result's header is priced so too)."""
    return max(map(count, shown_names(name)))


def arguments_tokens(arguments: str, count: Callable[[str], int]) -> int:
    """A call's arguments as a request may show them: text that is not a JSON object is sent to
    Anthropic and Gemini wrapped as ``{"unparsed_arguments": text}``, escaped (``parse_arguments``).
    Both went unpriced: 40 such calls sent ~200-240 tokens more than the manifest counted."""
    if not arguments.strip() or arguments_object(arguments) is not None:
        return count(arguments)
    return count(json.dumps({UNPARSED_ARGUMENTS_KEY: arguments}, ensure_ascii=False))


def block_tokens(state: RunState, block: MessageBlock) -> int:
    count = state.counter.count
    match block:
        case TextBlock():
            return count(block.text)
        case ToolCallBlock():
            return _call_name_tokens(block.name, count) + arguments_tokens(block.arguments, count)
        case ToolResultBlock():
            body = (_artifact_tokens(state, block.artifact) if block.artifact is not None
                    else count(block.text))
            return body + sum(block_tokens(state, b) for b in block.blocks)
        case ImageBlock():
            return _image_tokens(block)
        case DocumentBlock():
            if block.artifact is not None and block.pages is None and not _priced_by_media_rules(block):
                return _artifact_tokens(state, block.artifact)  # a text payload: what is shown
            return _document_tokens(block)
        case ReasoningBlock():
            return reasoning_tokens(block.reasoning, count)
        case _:
            assert_never(block)


def payload(content: str, artifact: ArtifactRef | None, title: str,
             blocks: tuple[ContentBlock, ...] = ()) -> tuple[MessageBlock, ...]:
    """Text payload blocks: the inline text, or (artifact-backed) a document ref
    standing for the full content (the event's text is only a preview); an image artifact is an
    image block (``event_values.media_artifact_block``).

    Why the image: a screenshot a FileRead or an EvidenceRetrieved cited as its artifact was a
    document block, estimated as a 1,500-token page, priced as each provider's PDF page and sent
    by Anthropic as a note, where the same image in a user message is priced and sent as an image.
    Read here, when the event is folded, it holds for logs written before as for new ones (the
    event is logged as it was). Other artifacts keep their titled document block, as before."""
    head: tuple[MessageBlock, ...]
    medium = None if artifact is None else media_artifact_block(artifact)
    if isinstance(medium, ImageBlock):
        head = (medium,)
    elif artifact is not None:
        head = (DocumentBlock(artifact=artifact, media_type=artifact.media_type, title=title),)
    elif content:
        head = (TextBlock(text=content),)
    else:
        head = ()
    return head + tuple(blocks)


def content_tokens(state: RunState, content: Content) -> int:
    """Token count of an entry's content (recipes counted from their plain values)."""
    if isinstance(content, ToolAnswer):
        if isinstance(content.text, LazyText):
            raise TypeError("a lazy text is counted when folded, from the text itself")
        body = (_artifact_tokens(state, content.artifact) if content.artifact is not None
                else state.counter.count(content.text))
        return body + sum(block_tokens(state, b) for b in content.blocks)
    if isinstance(content, Response):
        count = state.counter.count
        return (count(content.text) + sum(_call_name_tokens(n, count) + arguments_tokens(a, count)
                                          for _, n, a in content.calls)
                + (0 if content.reasoning is None else reasoning_tokens(content.reasoning, count)))
    return sum(block_tokens(state, b) for b in content)


def content_digest(content: Content) -> str:
    """``blocks_hash`` of the content's blocks, without building them for a recipe."""
    if isinstance(content, ToolAnswer | Response):
        raw = content.canonical()
        if raw is not None:
            return blake3.blake3(raw).hexdigest()
        if isinstance(content, Response) and content.breaks:  # the text's order is content too
            breaks = canonical_dumps([b.model_dump(mode="json") for b in content.breaks])
            return blake3.blake3(f"{blocks_hash(content.to_blocks())}|{breaks}".encode()).hexdigest()
        return blocks_hash(content.to_blocks())
    return blocks_hash(content)


def _has_media(content: Content) -> bool:
    """Whether ``content`` holds media a provider prices: what ``media_plan.media_blocks``
    finds in the fragment, read off the content before the fragment is built."""
    if isinstance(content, Response):
        return False
    return bool(priced_media(content.blocks if isinstance(content, ToolAnswer) else content))


def _shown_texts(content: Content) -> list[str]:
    """The texts a data block shows of ``content`` (neutralised): a text held in an artifact is
    not read here."""
    if isinstance(content, Response):
        return []
    blocks: tuple[MessageBlock, ...]
    if isinstance(content, ToolAnswer):
        head = [content.text] if isinstance(content.text, str) and content.artifact is None else []
        blocks = content.blocks
    else:
        head, blocks = [], content
    out = head
    for block in blocks:
        if isinstance(block, TextBlock):
            out.append(block.text)
        elif isinstance(block, ToolResultBlock):
            if block.artifact is None:
                out.append(block.text)
            out += _shown_texts(block.blocks)
    return out


def shown_as_media_alone(kind: str, content: Content) -> bool:
    """Whether the layout shows a fragment of ``kind`` holding ``content`` as its media alone, no
    data block (:func:`~contextfold.projections.framing.media_alone`): a tool's answer (not a lost
    or cancelled one: a runtime note) or retrieved evidence or memory, whose text is blank beside
    media the layout lays out (a URL or an artifact). A text held in an artifact or in the log
    only is not blank. Its framing prices no ``<data>`` wrapper then: priced, the budget paid ~30
    tokens per screenshot for a wrapper no provider was sent."""
    if kind not in ("tool_result", "evidence", "memory") or isinstance(content, Response):
        return False
    blocks = content.blocks if isinstance(content, ToolAnswer) else content
    if not any(b.url or b.artifact for b in priced_media(blocks)):  # most: no media
        return False
    frame = answer_frame_of(content)
    text = plain_text_of(content)
    return (text is not None and not (frame is not None and frame.status in ("lost", "cancelled"))
            and media_alone(text, True))


def answer_frame_of(content: Content) -> AnswerFrame | None:
    """The frame of a tool answer: a folded result, or blocks holding a result block (a mask stub,
    a fragment built from blocks). A stub is rendered with the same runtime status line as the
    result it stands for (``TOOL_ERROR: call c0 (pytest) failed with exit code 1.``), and its
    frame went unpriced: 27 stubs sent ~540 tokens more than the manifest counted."""
    if isinstance(content, ToolAnswer):
        return AnswerFrame(content.call_id, content.name, content.status, content.exit_code)
    if isinstance(content, Response):
        return None
    block = next((b for b in content if isinstance(b, ToolResultBlock)), None)
    return None if block is None else AnswerFrame(block.call_id, block.name, block.status, block.exit_code)


def _shown_source(source_ref: str) -> str:
    """A source ref as requests and manifests show it: a credential in it replaced, as in content
    (``https://x-access-token:ghp_...@github.com/...`` named a retrieved page in every request's
    data tag and in the manifest). By the default rules, at the fold: a ref is an identifier, the
    same in every build. The refs this package makes (call, event) hold ids, not credentials."""
    if source_ref.startswith(("call://", "event://", "events://")):
        return source_ref
    return redact(source_ref).text


def add_fragment(state: RunState, rec: RecordedEvent, kind: FragmentKind, trust: Trust,
         content: Content, *, sub: int = 0, source_ref: str | None = None,
         required: bool = False, priority: int | None = None, data_label: str | None = None) -> str:
    """Fold one fragment. ``data_label``: the label of the data block the layout shows runtime
    text in (a summary, a note), so its framing is counted as written."""
    position = rec.position
    fid = f"e{position}" if sub == 0 else f"e{position}.c{sub}"
    source = _shown_source(source_ref) if source_ref else f"event://{state.run_id}/{position}"
    _fold_entry(state, rec, fid, kind, trust, content, source, position, required, priority, data_label)
    return fid


def add_stale_rest(state: RunState, rec: RecordedEvent, sub: int, origin: FragmentEntry, text: str) -> str:
    """Fold the stale rest of the read ``origin`` (:mod:`~contextfold.projections.stale_reads`) as
    the ``sub``-th extra fragment of ``rec``, the newer read: ``origin``'s kind, trust, source and
    priority, at ``origin``'s position (it ranks and is laid out as the read it is cut from)."""
    fid = f"e{rec.position}.c{sub}"
    _fold_entry(state, rec, fid, origin.kind, origin.trust, (TextBlock(text=text),), origin.source_ref,
                origin.position, False, origin.priority, None)
    return fid


def _fold_entry(state: RunState, rec: RecordedEvent, fid: str, kind: FragmentKind, trust: Trust,
                content: Content, source: str, position: int, required: bool, priority: int | None,
                data_label: str | None) -> None:
    tokens, digest = content_tokens(state, content), content_digest(content)
    shown_as_data = data_label is not None or is_data(kind, trust)
    framing = framing_tokens(kind, trust, source, state.counter.count,  # the counter's tables warm now
                             answer_frame_of(content), _shown_texts(content) if shown_as_data else (),
                             data_label, not shown_as_media_alone(kind, content))
    if (state.event_text is not None and isinstance(content, ToolAnswer)
            and isinstance(content.text, str) and len(content.text) > LAZY_TEXT_CHARS
            and isinstance(rec.event, ToolResult) and rec.event.content is content.text):
        # counted and hashed from the text above; from now on only the log holds it
        content = content._replace(text=LazyText(position, state.event_text))
    if not state.media_seen and _has_media(content):
        state.media_seen = True
    state.entries[fid] = FragmentEntry.folded(
        fid, kind, source, trust, DEFAULT_PRIORITY[kind] if priority is None else priority, required,
        tokens, digest, content, position, framing)
    state.horizon = max(state.horizon, position)  # a stale rest keeps its origin's older position


def supersede(state: RunState, old: str | None, new: str) -> None:
    if old is not None and old != new:
        state.active.pop(old, None)
        state.superseded_by[old] = new


def call_ref(state: RunState, call_id: str, call_position: int) -> str:
    return f"call://{state.run_id}/{call_id}@{call_position}"


def file_ref(event: FileRead) -> str:
    ref = f"file://{event.path}"
    if event.revision:
        ref += f"@{event.revision}"
    if event.start_line is not None or event.end_line is not None:
        ref += f"#L{event.start_line or 1}"
        if event.end_line is not None:
            ref += f"-L{event.end_line}"
    return ref


def range_within(inner: tuple[int | None, int | None], outer: tuple[int | None, int | None]) -> bool:
    """``inner`` lies inside ``outer`` (line ranges, None = from the start / to the end)."""
    lo_i, hi_i = inner[0] or 1, inner[1] if inner[1] is not None else math.inf
    lo_o, hi_o = outer[0] or 1, outer[1] if outer[1] is not None else math.inf
    return lo_o <= lo_i and hi_i <= hi_o


def file_key(path: str) -> str:
    """A read path as a supersession key: ``./a/../b.py`` and ``b.py`` name one file, and so do
    a path's NFD and NFC spellings (macOS' file system and ``git ls-files`` give ``café`` as
    ``cafe`` plus a combining accent, a model types the composed letter: both revisions of the
    file were sent side by side). Lexical only (no file system: the fold is pure)."""
    return posixpath.normpath(path if path.isascii() else unicodedata.normalize("NFC", path))

