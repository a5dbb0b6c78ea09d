"""The trust boundary, rendered: data blocks and runtime labels shared by every provider.

Only runtime and user content may carry instruction authority (DESIGN.md
section 8). Everything else - repository files, web pages, e-mails, retrieved
chunks, memory, tool output - is wrapped in a delimited block that names its
source and trust::

    <data source="src/app.py" trust="workspace" kind="file">
    ...text...
    </data>

Delimiters only help if the text inside cannot forge them, so the inner text is
*neutralised* before it is wrapped. The rules (applied in this order):

1. **Block tags.** Any ``<data`` or ``</data`` (case-insensitive, whitespace
   allowed after ``<`` and ``/``) has its angle brackets replaced by ``‹``
   and ``›`` (the ``>`` that closes the same tag on the same line, too), so
   it can no longer open or close a block. The same is done for role tags:
   ``<system>``, ``</assistant>``, ``<user>``, ``<developer>``, ``<human>``,
   ``<instructions>``, ``<tool>``, ``<function>`` and chat-template tokens
   ``<|...|>`` (``<|im_start|>``, ``<|eot_id|>``...) and Gemma's
   ``<start_of_turn>`` / ``<end_of_turn>``. Detection runs on a
   *skeleton* of the text in which every character a reader does not see is dropped
   (Unicode's Default_Ignorable_Code_Point: zero-width characters, bidi marks and
   controls, variation selectors, tag characters, Hangul fillers; the C0 and C1 control
   characters other than tab and line breaks: NUL, ESC, DEL...; and the blanks that are not
   spaces: U+2800 braille blank, U+1D159), every character is NFKC
   folded (fullwidth ``＜ ／ ＞``, small-form ``﹤ ﹥``, fullwidth and
   mathematical letters) and look-alikes are mapped to ASCII (angle
   brackets ``‹ › 〈 〉 ⟨ ⟩ ᐸ ᐳ``, slashes ``⁄ ∕ ⧸``, Cyrillic and Greek letters
   that imitate ``d a t s y e m``). A match in the skeleton is neutralised
   at the matching *original* characters, so the rest of the text (code with
   ``<`` comparisons, generics, emoji with ZWJ) is left byte-for-byte intact.
2. **Role headers.** A line (ended by any line break ``str.splitlines`` knows:
   ``\\n``, a lone ``\\r``, U+2028, NEL...) whose skeleton starts (after indentation, quote
   ``>`` and emphasis ``* _ -`` markers) with a role word and a colon
   (``system:``, ``assistant:``, ``user:``, ``developer:``, ``human:``,
   ``ai:``, ``tool:``, ``function:``, ``instruction(s):``, ``model:``), a
   markdown heading of a role word (``### System``, ``# Instructions``), a
   bracketed marker (``[INST]``, ``[/INST]``, ``[SYSTEM]``, ``[runtime]``,
   ``<<SYS>>``), a role tag or template token as in rule 1, or that holds
   role JSON (``"role": "system"``) is prefixed with a visible ``[data] ``
   marker, so it reads as quoted data, never as a new turn or as a label the
   runtime writes (``[runtime]`` is what *we* prefix runtime notices with).

Why prefix rather than delete: the text stays auditable and the model still
sees what the source said - it just cannot mistake it for authority.

Runtime recovery answers (``lost``/``cancelled`` results) and error headers
are runtime-authored lines starting with ``[runtime]`` and sit *outside* any
data block, because the runtime wrote them (:mod:`.runtime_lines`).
"""

from __future__ import annotations

import re
from typing import assert_never

from contextfold.domain.conversation import DataPart, MediaPart, ToolResultPart
from contextfold.projections.bounded_memo import BoundedMemo, text_bytes
from contextfold.projections.lazy_regex import LazyPattern
from contextfold.projections.render.runtime_lines import runtime_header
from contextfold.projections.unicode_pins import pinned_nfkc

__all__ = [
    "DATA_CLOSE",
    "DATA_MARKER",
    "ERROR_MEDIA_NOTE",
    "LINE_BREAKS",
    "TOOL_MEDIA_NOTE",
    "caption_text",
    "data_frame",
    "escape_attr",
    "follows_note",
    "media_caption",
    "neutralise",
    "render_data",
    "returned_media_note",
    "skeleton",
    "tool_result_text",
]

DATA_CLOSE = "</data>"
DATA_MARKER = "[data] "

_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
"""Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.1): what a reader, and
a model's view of the text, skips. ``</\u200edata>`` is ``</data>`` to a reader."""
_CONTROL_RANGES = ((0x00, 0x08), (0x0E, 0x1B), (0x7F, 0x84), (0x86, 0x9F))
"""The C0 and C1 controls (and DEL) that are neither whitespace nor a line break: a model reads
``<\\x00/data>`` or ``\\x1b[runtime] ...`` as the tag or line without them, and ``\\s`` does not
match them (tab, the line breaks of :data:`LINE_BREAKS` and U+001F are kept: the rules read
them as the whitespace or breaks they are)."""
_BLANK_RANGES = ((0x2800, 0x2800), (0x1D159, 0x1D159))
"""Blanks that are neither spaces nor Default_Ignorable (braille pattern blank, musical symbol null
notehead): drawn as nothing, so ``<\\u2800/data>`` reads as ``</data>``. (The Hangul fillers
U+115F, U+1160, U+3164 and U+FFA0 are Default_Ignorable, above.)"""
_IGNORABLE = frozenset(chr(c) for lo, hi in (*_IGNORABLE_RANGES, *_CONTROL_RANGES, *_BLANK_RANGES)
                       for c in range(lo, hi + 1))

# Look-alikes NFKC leaves alone. Letters cover 'data', 'system' and the role words.
_HOMOGLYPHS: dict[str, str] = {
    # angle brackets and slashes
    "‹": "<", "›": ">", "\u2329": "<", "\u232a": ">", "\u3008": "<", "\u3009": ">",
    "⟨": "<", "⟩": ">", "\u276c": "<", "\u276d": ">", "\u29fc": "<", "\u29fd": ">",
    "ᐸ": "<", "ᐳ": ">", "❮": "<", "❯": ">", "˂": "<", "˃": ">", "⁄": "/", "∕": "/",
    "⧸": "/", "╱": "/",
    # Cyrillic
    "а": "a", "А": "a", "ԁ": "d", "т": "t", "Т": "t", "е": "e", "Е": "e", "ѕ": "s",
    "Ѕ": "s", "у": "y", "У": "y", "м": "m", "М": "m", "о": "o", "О": "o", "р": "p",
    "Р": "p", "с": "c", "С": "c", "х": "x", "Х": "x", "і": "i", "І": "i", "ј": "j",
    "Ј": "j", "к": "k", "К": "k", "н": "h", "Н": "h", "в": "b", "В": "b", "ո": "n",
    "ԝ": "w", "ɡ": "g", "ӏ": "l",
    # Latin: the dotless i (the one letter besides ASCII that matches an ASCII letter of the
    # rules ignoring case and can stay in a skeleton: the rules need no IGNORECASE)
    "ı": "i",
    # Greek
    "α": "a", "Α": "a", "τ": "t", "Τ": "t", "ε": "e", "Ε": "e", "υ": "y", "Υ": "y",
    "Μ": "m", "ο": "o", "Ο": "o", "ρ": "p", "Ρ": "p", "ν": "v", "ι": "i", "Ι": "i",
    "κ": "k", "Κ": "k", "Η": "h", "Ν": "n", "Β": "b", "Χ": "x", "Ζ": "z", "δ": "d",
}

_ROLE_WORDS = (
    "system|assistant|user|developer|human|ai|tool|function|instructions?|model|sys"
)
_TAG_WORDS = ("data|system|assistant|user|developer|human|instructions?|tool|function"
              "|start_of_turn|end_of_turn")

# Rule 1, on the skeleton: an opening bracket that starts a data/role tag or a template token.
_TAG_RE = re.compile(rf"<\s*/?\s*(?:{_TAG_WORDS})|<\s*\|", re.IGNORECASE)

# Rule 2, on a line's skeleton: a line matching any rule is marked (the tests' per-line
# reference runs each rule as ``^`` + prefix + body, ignoring case, on each line).
_PREFIX_BODY = r"[\s>*_\-`]*"
_HEADER_BODIES = (
    rf"(?:{_ROLE_WORDS})\s*[*_`]*\s*:",
    rf"#+\s*[*_`]*\s*(?:{_ROLE_WORDS}|prompt)\b",
    r"(?:\[\s*/?\s*(?:inst|sys|system|runtime|data|assistant|user|developer)\s*\]|<<\s*/?\s*sys\s*>>)",
    rf"<\s*/?\s*(?:{_TAG_WORDS})",
    r"<\s*\|",
)
"""What may follow a line's prefix (indentation, quote and emphasis markers) on a role line."""
_ROLE_JSON = r"[\"']role[\"']\s*:\s*[\"']"
"""Role JSON: anywhere on a line."""


def _fold_char(ch: str) -> str:
    if ch in _IGNORABLE:
        return ""
    mapped = _HOMOGLYPHS.get(ch)
    if mapped is not None:
        return mapped
    if ch.isascii():
        return ch.lower()
    folded = pinned_nfkc(ch)  # the same fold on every Python (unicode_pins)
    folded = "".join(_HOMOGLYPHS.get(c, c) for c in folded)
    return folded.lower()


class _FoldTable(dict[int, str]):
    """``str.translate`` table of :func:`_fold_char`, filled on first sight of each character.

    Why: the per-character Python loop cost ~0.3 ms per tool result in a build (a
    neutralised ``‹`` alone makes a line non-ASCII); ``translate`` does the same
    fold in C and calls back only for characters it has not seen yet.
    """

    def __missing__(self, code: int) -> str:
        folded = self[code] = _fold_char(chr(code))
        return folded


_FOLD = _FoldTable({c: _fold_char(chr(c)) for c in range(128)})

# Rule 2 over a whole skeleton at once, in two passes: one for the rules anchored at a line
# start, one for role JSON. Line numbers agree between text and skeleton: no character folds
# to or from "\n" (checked over every code point by the tests).
_SPACE_NOT_NL = (r"\t\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a"
                 r"\u2028\u2029\u202f\u205f\u3000")
"""What ``\\s`` matches in a str pattern, less "\\n" (a class body; the tests check it)."""


def _within_line(pattern: str) -> str:
    """``pattern`` with its whitespace unable to cross a line break."""
    return pattern.replace(r"[\s>*_\-`]", rf"[{_SPACE_NOT_NL}>*_\-`]").replace(r"\s", f"[{_SPACE_NOT_NL}]")


_HEADER_FIRST = r"(?=[saudhtfim#\[<])"
"""The characters a header body can start with in a skeleton: the role words' first letters,
``#``, ``[`` and ``<`` (the tests check every body against it)."""

_LINE_STARTS_RE = re.compile(
    "\n" + _within_line(_PREFIX_BODY) + "+" + _HEADER_FIRST
    + "(?:" + "|".join(map(_within_line, _HEADER_BODIES)) + ")")
"""The anchored rules as one pattern that starts with a literal "\\n", run over "\\n" + skeleton.

Why: with ``^`` and MULTILINE the regex engine tries every character of the text (four times,
one per rule: ~75 ns a character, 1.3 ms for a 17 KB tool output rendered afresh); a pattern
with a literal first character is tried only where that character is. No alternative can
match a line break after its first character, so each line is tried once and the matches are
exactly the per-line matches.

The prefix is possessive (``*+``) and a lookahead on the next character comes before the rules:
no rule can start with a prefix character, so giving one back can never make a rule match, and
without them each indented line (code) was tried against every rule once per character of its
indentation (136 us for a 9 KB source file, 20 us now).

Without IGNORECASE, unlike the per-line rules, and the same: a skeleton holds no upper-case
ASCII letter and no other character that matches a letter of the rules ignoring case (the
tests check every code point), and IGNORECASE cost this pass more than half its time."""
_ROLE_JSON_RE = LazyPattern(_within_line(_ROLE_JSON))
_ROLE_WORD = "role"
"""Role JSON holds this, as is, in a skeleton (see ``_LINE_STARTS_RE``): a skeleton without it
has no role JSON to look for."""


_PLAIN_ASCII_BYTES = bytes(c for c in range(128) if _FOLD[c] == chr(c).lower())
"""The ASCII bytes a skeleton keeps (as their lower case): all but the controls it drops."""


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is ASCII without a control the skeleton drops: it folds to its lower-case
    self, index for index. (Deleting the other bytes in C: ~0.6 ns a character, where a regex
    search for the controls cost ~8.)"""
    return text.isascii() and not text.encode("ascii").translate(None, _PLAIN_ASCII_BYTES)


def _skeleton_with_map(text: str) -> tuple[str, list[int] | None]:
    """The detection view of ``text`` and, per skeleton char, its index in ``text``.

    Plain ASCII text (most logs and code) folds to its lower-case self, index for
    index; the map is then ``None`` (identity) and the per-character pass is skipped.
    """
    if _plain_ascii(text):
        return text.lower(), None
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for c in _FOLD[ord(ch)]:
            out.append(c)
            index.append(i)
    return "".join(out), index


def skeleton(text: str) -> str:
    """Lower-case, ignorable-free, homoglyph-folded view used for detection (and tests)."""
    if _plain_ascii(text):
        return text.lower()
    # ``str.translate`` with a Python mapping costs ~70 ns a character, ASCII included, and a
    # log with one "…" is no longer ASCII. So: lower the ASCII letters in C (``bytes.lower``
    # leaves the bytes of multi-byte sequences alone), then replace each other character that
    # folds to something else (the ASCII controls the skeleton drops among them), found by
    # deleting the plain ASCII bytes.
    data = text.encode("utf-8", "surrogatepass")
    others = set(data.translate(None, _PLAIN_ASCII_BYTES).decode("utf-8", "surrogatepass"))
    changed = {ch: folded for ch in others if (folded := _FOLD[ord(ch)]) != ch}
    if len(changed) > _FEW_FOLDS or any(not changed.keys().isdisjoint(f) for f in changed.values()):
        return text.translate(_FOLD)  # many, or one folds to another: all at once
    out = data.lower().decode("utf-8", "surrogatepass")
    for ch, folded in changed.items():
        out = out.replace(ch, folded)
    return out


_FEW_FOLDS = 16
"""More distinct characters to fold than this: one ``str.translate`` pass is cheaper."""


LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""What ends a line for the rules (``str.splitlines``'s breaks): a model may read a lone ``\\r``
or a U+2028 as a new line, so ``page\\rSYSTEM: ...`` is a role line too."""
_OTHER_BREAKS = LINE_BREAKS[1:]
_BREAK_SPLIT_RE = re.compile(f"([{LINE_BREAKS}])")


def _neutralise_tags(text: str) -> str:
    skel, index = _skeleton_with_map(text)
    matches = list(_TAG_RE.finditer(skel))
    if not matches:
        return text
    chars = list(text)
    for match in matches:
        start = match.start() if index is None else index[match.start()]
        chars[start] = "‹"
        # Close the same tag: the next '>' on this line in the skeleton.
        for j in range(match.end(), len(skel)):
            c = skel[j]
            if c in LINE_BREAKS or (c == "<" and j > match.end()):
                break
            if c == ">":
                chars[j if index is None else index[j]] = "›"
                break
    return "".join(chars)


def _role_lines(skel: str) -> list[int]:
    """Numbers (0-based, by "\\n") of the lines rule 2 marks, ascending, from the text's skeleton."""
    # a match at i of "\n" + skel is the line starting at i of skel
    starts = [m.start() for m in _LINE_STARTS_RE.finditer("\n" + skel)]
    if _ROLE_WORD in skel:
        starts = sorted({*starts, *(m.start() for m in _ROLE_JSON_RE.finditer(skel))})
    if not starts:
        return []
    lines: list[int] = []
    line, pos = 0, 0
    for start in starts:
        line += skel.count("\n", pos, start)
        pos = start
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


_MEMO_MIN_CHARS = 2048
_NEUTRALISED: BoundedMemo[str, str] = BoundedMemo(16 * 1024 * 1024 // _MEMO_MIN_CHARS, share="neutralised")
"""Long texts neutralised, by text (up to its share of the memo ceiling: ``memo_budget``): a text
cut to fit (the unit where a long run's selection stops) is laid out afresh, so rendered afresh,
in every build that keeps the same cut."""


def neutralise(text: str) -> str:
    """Make ``text`` unable to close a data block or pose as a role (rules in the module doc)."""
    if len(text) < _MEMO_MIN_CHARS:
        return _neutralise(text)
    hit = _NEUTRALISED.get(text)
    if hit is None:
        neutral = _neutralise(text)  # the text itself when nothing changed: held once
        size = text_bytes(text) if neutral is text else text_bytes(text, neutral)
        hit = _NEUTRALISED.put(text, neutral, size)
    return hit


def _neutralise(text: str) -> str:
    skel = skeleton(text)
    if _TAG_RE.search(skel) is not None:  # rare: the tags are neutralised through the index map
        text = _neutralise_tags(text)
        skel = skeleton(text)
    others = [c for c in _OTHER_BREAKS if c in skel]
    for c in others:  # the rules see every line break as "\n" (none folds to or from one)
        skel = skel.replace(c, "\n")
    marked = _role_lines(skel)
    if not marked:
        return text
    if not others:
        lines = text.split("\n")
        for i in marked:
            lines[i] = DATA_MARKER + lines[i]
        return "\n".join(lines)
    parts = _BREAK_SPLIT_RE.split(text)  # lines at even indices, the breaks between them
    for i in marked:
        parts[2 * i] = DATA_MARKER + parts[2 * i]
    return "".join(parts)


_ATTR_ESCAPES: dict[int, str] = {
    ord("&"): "&amp;", ord('"'): "&quot;", ord("<"): "&lt;", ord(">"): "&gt;",
    **{ord(c): f"&#{ord(c)};" for c in LINE_BREAKS},
}


def escape_attr(value: str) -> str:
    """Escape an attribute value: XML entities, and every line break as a character reference so
    the value stays on the tag line. Every break (:data:`LINE_BREAKS`, not only ``\\r`` and
    ``\\n``): a source ref holding U+2028, NEL or a vertical tab put a line of its own into the
    opening tag, outside the block's text and so outside rule 2 - an unmarked ``SYSTEM: ...``."""
    return value.translate(_ATTR_ESCAPES)


def _open_tag(source: str, trust: str, kind: str, truncated: bool) -> str:
    attrs = f'source="{escape_attr(source)}" trust="{escape_attr(trust)}" kind="{escape_attr(kind)}"'
    if truncated:
        attrs += ' truncated="true"'
    return f"<data {attrs}>"


def data_frame(source: str, trust: str, label: str, truncated: bool = False) -> str:
    """What :func:`render_data` writes around an empty text: a data block's framing, as the fold
    and the builder count it (``projections.framing``)."""
    return f"{_open_tag(source, trust, label, truncated)}\n\n{DATA_CLOSE}"


def render_data(part: DataPart) -> str:
    """One data block: the source, trust and kind on the tag, neutralised text inside."""
    return (
        f"{_open_tag(part.source, part.trust, part.label or 'text', part.truncated)}\n"
        f"{neutralise(part.text)}\n{DATA_CLOSE}"
    )


def media_caption(part: MediaPart, note: str = "") -> str:
    """A data block naming a media part's source and trust (it sits next to the media).

    Images and documents can carry text too; the caption makes their origin and
    trust visible to the model the same way as for text data.
    """
    return caption_text(part.source or part.fragment_id, part.trust, part.kind,
                        note or follows_note(part.kind, part.media_type))


def follows_note(kind: str, media_type: str) -> str:
    """The caption body of a medium shown next to its caption."""
    return f"{kind} ({media_type}) follows"


TOOL_MEDIA_NOTE = "media returned by this call is attached in the next user message"
"""The caption body of a tool's media in an OpenAI Chat tool message (the media follows in a
user message: a tool message takes text only)."""


ERROR_MEDIA_NOTE = "media returned by this call is attached after the tool results"
"""The caption body of a failed tool's media in an Anthropic ``tool_result`` (an ``is_error``
result takes text only: the media follow the batch's results)."""


def returned_media_note(kind: str, media_type: str) -> str:
    """The caption body of a tool's media in a Gemini function response."""
    return f"{kind} ({media_type}) returned by this call follows"


def caption_text(source: str, trust: str, kind: str, body: str) -> str:
    """:func:`media_caption` from plain values: what the builder prices a caption by
    (``media_plan``), so a caption is counted as it is written."""
    return f"{_open_tag(source, trust, kind, False)}\n{neutralise(body)}\n{DATA_CLOSE}"


def tool_result_text(result: ToolResultPart, *, media_note: str = "") -> str:
    """A result as one string, for providers whose tool results are text only.

    The runtime header (if any) comes first, then each data part as a data block.
    Media parts are replaced by ``media_note`` captions; the caller decides where
    the media itself goes.
    """
    pieces: list[str] = []
    header = runtime_header(result)
    if header is not None:
        pieces.append(header)
    for part in result.content:
        match part:
            case DataPart():
                pieces.append(render_data(part))
            case MediaPart():
                pieces.append(media_caption(part, media_note))
            case _:
                assert_never(part)
    if not pieces:
        pieces.append("[runtime] the tool returned no output.")
    return "\n".join(pieces)
