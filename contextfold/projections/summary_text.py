"""The text of a summary's lines (pure): what one event's words become in a summary.

Why apart from :mod:`~contextfold.projections.compaction`: these decide what of a message, a
failure or a call's arguments a later turn still reads once the raw event is covered, each by
its own rule (a constraint line in the words users write it, a failure by its exception, an
argument cut at a value boundary, ids verbatim), and each is tested on its own
(``tests/unit/test_summary_lines.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from contextfold.domain.canonical import strict_json
from contextfold.domain.event_values import is_data_url
from contextfold.domain.events import ContentBlock, DocumentBlock, ImageBlock
from contextfold.projections.diagnose import diagnose_log
from contextfold.projections.graphemes import head_chars
from contextfold.projections.redact_urls import shown_url
from contextfold.projections.render.runtime_lines import media_type_ref, ref_text

__all__ = ["CONSTRAINT_LINE", "GOAL_CHARS", "STATEMENT_CHARS", "USER_CHARS", "args_excerpt",
           "argument_facts", "attached", "cap", "file_ref", "identifiers", "kept_facts", "key_line",
           "media_lines", "media_refs", "names_plan_step", "plan_lines", "quoted_goal", "raw_at",
           "short_identifiers",
           "user_statement"]

CONSTRAINT_LINE = re.compile(
    r"\b(must|never|always|do not|don't|dont|only|forbidden|not allowed|should not|shouldn't|"
    r"required|make sure|ensure|avoid|keep|prefer|refrain|prohibited|cannot|can't|no longer|"
    r"instead of|without|stick to|compatible|nunca|siempre|jamais|toujours|niemals|immer)\b"
    # CJK writes no spaces, so no word boundaries: must / must not / do not / cannot / forbidden /
    # only / be sure to / avoid / never (imperative) / keep / ensure / compatible / strictly
    # forbidden / not permitted (zh); must / forbidden / do not (-naide, after any verb) / must
    # not (-te wa ikenai, -te wa naranai) (ja); must / forbidden / do not (-ji ma, -ji mal, after
    # any verb) / never / is not allowed (ko)
    r"|必须|不得|不要|不能|不可|禁止|只能|只允许|务必|避免|切勿|请勿|保持|确保|兼容|严禁|不准|不许"
    r"|必ず|禁止|ないで|ないこと|てはいけ|てはなら|ではいけ|ではなら|べからず"
    r"|반드시|금지|지 ?마|지 ?말|절대|안 ?됩니다|안 ?돼", re.IGNORECASE)
"""A sentence of a long user message that states a constraint (:func:`user_statement`): in the
languages agents are most often told things in, as an instruction is worded there."""
_ID_SHAPES = (
    r"\bsha256:[0-9a-f]{8,64}\b",  # an image digest
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",  # a UUID
    r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b",  # a commit or file hash
    r"\b[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*[-_](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,}\b",  # dep-9931
)
"""What a result or an argument names that a later step may need verbatim (the seed: call ids,
file hashes, deployment ids must not be summarised away): :func:`identifiers` finds the matches
of these as one alternation, the first that matches at a place winning."""
_ID_SCAN = re.compile("|".join(_ID_SHAPES[:3]) + r"|(?P<joined>\b[A-Za-z])")
"""The first three shapes, and where the last one (a joined id) may start."""
_JOINED_RUN = re.compile(r"[A-Za-z0-9]*+(?:[-_][A-Za-z0-9]++)*+")
_JOINED_TAIL = re.compile(r"[-_](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,}(?![A-Za-z0-9])")
"""A segment an id's run must hold: three or more letters or digits, one a digit, whole."""
_SHORT_ID = re.compile(r"(?<![\w./-])(?!(?i:utf)-)(?:[A-Za-z]{3,}|[A-Z]{2})-\d{1,2}(?![\w-]|\.\w)")
"""A word, a hyphen and a number of one or two digits, on its own (:func:`short_identifiers`)."""
_UNVERIFIED = re.compile(r"^.*\b(?:not (?:yet )?verified|unverified|unconfirmed|not confirmed)\b.*$",
                         re.IGNORECASE | re.MULTILINE)
_IDENTIFIERS_KEPT = 6
STATEMENT_CHARS = 200
"""An assistant statement (and a goal's decision line) is capped to this."""
USER_CHARS = 800
"""A user message up to this long is kept whole in a summary; of a longer one, this much."""
GOAL_CHARS = 4000
"""A summary's goal taken from a message keeps this much of it (the task, as a rule: kept whole)."""
_USER_HEAD = 400
"""Of a longer user message, its opening sentences up to this long (what it asks, as a rule)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")


def cap(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters; a longer one ends in ``…`` after a whole
    grapheme cluster (a summary quotes untrusted text: no orphan accent or half an emoji)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else head_chars(flat, limit - 1) + "…"


_ARG_STRING_CHARS = 24
"""The shortest a string argument is cut to in a summary's call line."""


def args_excerpt(arguments: str, limit: int) -> str:
    """A call's arguments in about ``limit`` characters, cut at value boundaries: an object's keys
    with its scalars, the longest strings shortened first (a file's new content before its path)
    to whole graphemes, so an escape such as ``\\u4e2d`` is never cut in two; nested values shown
    as ``[…]``/``{…}``, and keys past the limit counted. Not a JSON object (or not JSON): the
    text capped as a line."""
    flat = " ".join(arguments.split())
    if len(flat) <= limit:
        return flat
    try:
        value = strict_json(arguments)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        return cap(arguments, limit)
    # Only the keys that can be shown at all are looked at (each at its shortest): an object of
    # 4,000 members took 2 s, every shortening step adding up every member again.
    keys: list[str] = []
    values: list[object] = []
    first = next(iter(value), "")
    least = 0
    for k, v in value.items():
        key = _json_text(cap(k, _ARG_STRING_CHARS)) + ": "
        short = _ARG_STRING_CHARS + 2 if isinstance(v, str) and len(v) > _ARG_STRING_CHARS else (
            3 if isinstance(v, list | dict) else len(_json_text(v)))
        least += len(key) + short + 2
        if keys and least - 2 > limit:
            break
        keys.append(key)
        values.append(v)
    hidden = len(value) - len(keys)
    room = limit - (len(f", …{hidden} more keys") if hidden else 0)  # the count is shown too
    shown = [("[…]" if isinstance(v, list) else "{…}") if isinstance(v, list | dict) else _json_text(v)
             for v in values]
    chars = {i: len(v) for i, v in enumerate(values) if isinstance(v, str) and len(v) > _ARG_STRING_CHARS}
    while chars and (over := sum(len(k) + len(v) + 2 for k, v in zip(keys, shown, strict=True)) - room) > 0:
        longest = max(chars, key=lambda i: len(shown[i]))
        text = values[longest]
        assert isinstance(text, str)
        # by the JSON it is shown as: an escape (\" \n \u0000) takes 2-6 characters of the line
        target = max(_ARG_STRING_CHARS + 2, len(shown[longest]) - over)
        keep = min(chars[longest], target) - 1
        while keep > 1 and len(_json_text(head_chars(text, keep) + "…")) > target:
            keep = max(1, keep - max(1, (len(_json_text(head_chars(text, keep) + "…")) - target) // 2))
        if keep >= chars[longest]:  # at its floor
            del chars[longest]
            continue
        shown[longest] = _json_text(head_chars(text, keep) + "…")
        chars[longest] = keep if len(shown[longest]) > _ARG_STRING_CHARS + 2 else 0
        if not chars[longest]:
            del chars[longest]
    kept = 0
    while kept < len(keys) and 2 + sum(len(k) + len(v) + 2 for k, v in
                                       zip(keys[:kept + 1], shown, strict=False)) - 2 <= room:
        kept += 1
    if kept == 0:  # not even the first member fits: its key (cut as text, then shown), no value
        more = f", …{len(value) - 1} more keys" if len(value) > 1 else ""
        chars_left = min(len(first), _ARG_STRING_CHARS)
        key = _json_text(cap(first, chars_left))
        while chars_left > 1 and len(key) + len(more) + 5 > limit:
            chars_left = max(1, chars_left - max(1, (len(key) + len(more) + 5 - limit) // 2))
            key = _json_text(cap(first, chars_left))
        return "{" + key + ": …" + more + "}"
    more = f", …{len(value) - kept} more keys" if kept < len(value) else ""
    return "{" + ", ".join(k + v for k, v in zip(keys[:kept], shown, strict=False)) + more + "}"


_JSON_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}
"""The line breaks ``json.dumps(ensure_ascii=False)`` leaves as they are (it escapes the C0 ones),
as the JSON escapes that stand for them."""


def _json_text(value: object) -> str:
    """``value`` as JSON, its text readable (not ``\\u`` escaped) unless it holds a lone
    surrogate, which UTF-8 cannot carry; on one line: a NEL or U+2028 in an argument's value ends
    a line for a reader and for the data block's rules, and an argument ``x\\u2028[runtime]
    POLICY UPDATE: ...`` cut to fit put a line of its own into the summary."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value)
    return text.translate(_JSON_BREAKS)


def key_line(text: str, exit_code: int | None = None) -> str:
    """The first key error :func:`diagnose_log` finds in ``text`` (the lean log's header names the
    same one), else the last non-empty line (where a failing command says why). A traceback is
    quoted by its exception line; a bare one-word header such as ``ERROR:`` (how OpenHands' file
    editor opens its errors) with the line after it, which says what the error was.

    Why not the first line holding "error": that was ``Compiling thiserror v1.0.50`` for a failed
    cargo build, a PASSED test named ``test_error_…``, ``0 errors, 0 warnings``."""
    first = diagnose_log(text, exit_code).first_error
    if first is None:
        return cap(next((ln for ln in reversed(text.splitlines()) if ln.strip()), ""), 200)
    block = [ln.strip() for ln in first.text.split("\n")]
    if "Traceback (most recent call last):" in block and first.end_line > first.line:
        # the header names no error: the exception line that ends the block does ("KeyError:
        # 'user_id'"), after any verdict line above it ("FAIL: test_b (t.T)")
        at = block.index("Traceback (most recent call last):")
        head = [ln for ln in block[:at] if ln and not _RULE.fullmatch(ln)]
        return cap(" ".join([*head, f"{block[-1]} (Traceback, line {first.line + at})"]), 200)
    hit = " ".join(ln for ln in block if ln and not _RULE.fullmatch(ln))
    if hit.endswith(":") and " " not in hit:
        after = [ln.strip() for ln in text.split("\n")[first.end_line:] if ln.strip()]
        hit = f"{hit} {after[0]}" if after else hit
    return cap(hit, 200)


_RULE = re.compile(r"[-=_~*#]{3,}")
"""A line that only separates (unittest's ``-----`` rule, pytest's ``=====`` banner)."""


def identifiers(text: str) -> list[str]:
    """``re.compile("|".join(_ID_SHAPES)).findall(text)``, in linear time.

    Why not findall: the joined-id shape (``dep-9931``, ``build_2024_11``) is tried at every word
    start, and each segment after a ``-`` is one; from each, its segments were read to the end
    of the run and given back one by one looking for a last segment with a digit. A hyphenated
    word list or a slug list (``how-to-cook-rice-…``, no digit) cost 2.8 s of CPU at 24 KB in
    a summary, 17.6 s at 40 KB.

    The same matches, in one pass: the other shapes, and where a joined id may start, are found
    by one regex. A joined id is a run of segments joined by ``-`` or ``_`` holding, after its
    first, a segment of three or more letters or digits, one a digit; a start later in the same
    run has the same run's end, so each run is read once, and the id from a start is the text up
    to the run's end, if such a segment lies after it.

    Why to the run's end, not that segment's: ``rel-2024-11`` and ``build_2024_11`` are one id
    each; cut after their last such segment they were ``rel-2024`` (an id that never existed,
    quoted in summaries as if it had: the seed, 5.3) and nothing at all (``_2024`` is followed by
    a word character). A run followed by a letter outside ASCII (``dep-9931é``) ends its id at its
    last such segment."""
    found: list[str] = []
    run_start = run_end = tail_start = tail_end = -1  # the joined run last read, its last tail
    at = 0
    while (m := _ID_SCAN.search(text, at)) is not None:
        start = m.start()
        if m.lastgroup != "joined":
            found.append(m.group())
            at = m.end()
            continue
        if not run_start <= start < run_end:
            run = _JOINED_RUN.match(text, start)
            assert run is not None  # (possessive stars: it matches, if only the letter)
            run_start, run_end, tail_start, tail_end = start, run.end(), -1, -1
            # endpos one past the run: a tail's \b reads the character after it, and no tail
            # lies beyond the run
            for tail in _JOINED_TAIL.finditer(text, start, run_end + 1):
                tail_start, tail_end = tail.span()
            if tail_start >= 0 and (run_end == len(text) or not text[run_end].isalnum()):
                tail_end = run_end  # the id is the whole run: rel-2024-11, build_2024_11
        if tail_start > start:
            found.append(text[start:tail_end])
            at = tail_end
        else:
            at = start + 1
    return found


def short_identifiers(text: str) -> list[str]:
    """The ids of ``text`` numbered with one or two digits, which :func:`identifiers` does not
    find: a word of three or more letters (or two capitals), a hyphen and the number, on its own
    (``dep-3``, ``job-12``, ``PR-42``; not part of a path, a file's name or a longer run).

    Why: the shape of :func:`identifiers` asks for a segment of three or more characters with a
    digit, which keeps versions out (``python-3``); it kept a runtime's unpadded ids out too (a
    deploy's ``dep-3``, a ticket's ``PR-42``), and a mask's stub or a summary of their results
    dropped them. Why this narrow: a wider shape found a pytest log's ``test_mod_1`` (underscores:
    a code name, as ``param_1``), a page's CSS classes (``mb-4``, ``p-1``: one or two small
    letters) and ``utf-8`` everywhere; in a 4k window six of those per stub outgrew the budget.
    What is left (``clang-14``) only fills the slots longer ids leave (:func:`kept_facts`)."""
    return [m.group() for m in _SHORT_ID.finditer(text)]


def kept_facts(text: str, shown: str = "") -> str:
    """The identifiers in ``text`` that ``shown`` does not already hold, and a line saying a
    state is unverified, verbatim: a successful deploy's result ("dep-9931 ... health check: not
    yet verified") was summarised as "ok", and the id and the unverified state were gone. Of
    :func:`short_identifiers`, those that fit in the slots the others leave, each not shown
    whole (``dep-4`` is not said by ``dep-42``)."""
    ids = list(dict.fromkeys(m for m in identifiers(text) if m not in shown))[:_IDENTIFIERS_KEPT]
    if len(ids) < _IDENTIFIERS_KEPT:
        short = (m for m in short_identifiers(text)
                 if not re.search(rf"(?<![\w-]){re.escape(m)}(?![\w-])", shown))
        ids = list(dict.fromkeys([*ids, *short]))[:_IDENTIFIERS_KEPT]
    state = _UNVERIFIED.search(text)
    parts = ([f"ids: {', '.join(ids)}"] if ids else []) + (
        [f"says: {cap(state.group(0).strip(), STATEMENT_CHARS)}"] if state else [])
    return "; ".join(parts)


def argument_facts(arguments: str, shown: str = "") -> str:
    """:func:`kept_facts` of a call's arguments, read from the values they hold (the strings, the
    keys and the scalars, one a line), not from their JSON text; arguments that are no JSON: as
    they are written.

    Why: in JSON a line break or a tab inside a value is ``\\n`` or ``\\t``, and read as text the
    escape's letter was glued to the id after it: a script writing ``\\tdep-9931`` was said to
    name ``tdep-9931``, an id that never existed, and not ``dep-9931``."""
    try:
        value = strict_json(arguments)
    except (ValueError, RecursionError):
        return kept_facts(arguments, shown)
    return kept_facts("\n".join(_json_leaves(value)), shown)


def _json_leaves(value: object) -> list[str]:
    """The keys and scalar values of a decoded JSON value as text, in document order (a stack,
    not recursion: arguments may nest as deep as the decoder allows)."""
    out: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in reversed(list(item.items())):
                stack.append(v)
                stack.append(str(k))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif item is not None and not isinstance(item, bool):
            out.append(str(item))
    return out


def file_ref(path: str, revision: str | None) -> str:
    """``file://PATH@REVISION``, as a summary cites a file read: the path and the revision each as
    :func:`~contextfold.projections.render.runtime_lines.ref_text` shows it (a tool's arguments
    name them, and ``a.py\\n[runtime] POLICY UPDATE`` is a path a summary line must not hold)."""
    return f"file://{ref_text(path)}" + (f"@{ref_text(revision)}" if revision else "")


def raw_at(event_ref: str, *values: str | None) -> str:
    """`` [EVENT_REF]`` when :func:`~contextfold.projections.render.runtime_lines.ref_text` stands
    in for any of ``values`` (where the raw value is read back), else nothing: a plain ref is
    cited as it was, so a summary of plain refs reads as it did."""
    return f" [{event_ref}]" if any(v is not None and ref_text(v) != v for v in values) else ""


def media_refs(blocks: Iterable[ContentBlock], event_ref: str) -> list[tuple[str, str]]:
    """(ref, media type) of each image or document among ``blocks``, logged in the event
    ``event_ref`` names: its ``artifact:HASH``, else its URL as shown (credentials redacted; as
    ``ref_text`` shows it), else (an inline ``data:`` URL) the event itself, which holds it. The
    type as ``media_type_ref`` shows it: both come with the medium, and a type
    ``image/png\\n[runtime] POLICY UPDATE: ...`` put a line of its own into the summary.

    Why a summary cites them: it stands in for the events it covers, and their media are not shown
    again. A covered task's screenshot vanished from every later request while the goal still
    read "fix the bug shown in this screenshot", and nothing said which image it was, or where it
    is read back (the seed: a lossy summary keeps the original artifact and event refs)."""
    out = []
    for b in blocks:
        if isinstance(b, ImageBlock | DocumentBlock):
            ref = (f"artifact:{b.artifact.hash}" if b.artifact is not None else
                   ref_text(shown_url(b.url)) if b.url and not is_data_url(b.url) else event_ref)
            out.append((ref, media_type_ref(b.media_type)))
    return out


def media_lines(blocks: Iterable[ContentBlock], run_id: str, position: int, where: str) -> list[str]:
    """The evidence lines for the media among ``blocks`` of the event logged at ``position``
    (:func:`media_refs`), ``where`` saying what carried them ("attached to the user's message")."""
    return [f"{ref} ({media_type}, {where} at event {position})"
            for ref, media_type in media_refs(blocks, f"event://{run_id}/{position}")]


def attached(blocks: Iterable[ContentBlock], run_id: str, position: int) -> str:
    """What a goal taken from the message logged at ``position`` adds for the media it carried:
    `` [attached: REF TYPE, ...]``, or nothing."""
    refs = media_refs(blocks, f"event://{run_id}/{position}")
    return f" [attached: {', '.join(f'{r} {t}' for r, t in refs)}]" if refs else ""


def quoted_goal(lead: str, text: str, source: str) -> str:
    """A summary's goal taken from a message (no goal was set): ``lead`` (where it was said, and
    that it is an inference or a hand-off's task), then the message whole up to
    :data:`GOAL_CHARS`, else its head citing ``source`` for the full text."""
    return f"{lead} " + (text if len(text) <= GOAL_CHARS else
                         head_chars(text, GOAL_CHARS) + f"… (full text: {source})")


def user_statement(text: str, source: str) -> str:
    """What a summary quotes of a user message: the whole of it up to :data:`USER_CHARS`, else its
    opening sentences and then the sentences that state a constraint (:data:`CONSTRAINT_LINE`), in
    order, ``…`` where some were left out, at most :data:`USER_CHARS` together, citing ``source``
    for the full text. A message over 200 characters kept only its lines with a keyword: "Leave the
    public signature of login() unchanged. Target Python 3.8." (one line, no must/never/only) was
    gone after compaction, though the seed wants a turn's constraints to hold after it."""
    flat = " ".join(text.split())
    if len(flat) <= USER_CHARS:
        return flat
    units = [u for ln in text.splitlines() for u in _SENTENCE_END.split(" ".join(ln.split())) if u]
    parts: list[str] = []
    used, in_head, skipped = 0, True, False
    for unit in units:
        if in_head and used + len(unit) <= _USER_HEAD:
            parts.append(unit)
        elif not parts:  # a first sentence longer than the head: its head (cap marks the cut)
            parts.append(cap(unit, _USER_HEAD))
            in_head = False
        elif CONSTRAINT_LINE.search(unit) and used + len(unit) + 2 <= USER_CHARS:
            parts += ["…", unit] if skipped else [unit]
            in_head = False
        else:
            in_head, skipped = False, True
            continue
        used += len(parts[-1]) + 2
        skipped = False
    return f"{' '.join(parts)} (full text: {source})"


def plan_lines(steps: Sequence[tuple[str, str, str]], completed: Sequence[str], pending: Sequence[str]
               ) -> tuple[list[str], list[str]]:
    """(completed, pending) step lines: those carried from earlier summaries (``completed``,
    ``pending``), less every line of a step the current plan holds, then the current plan's
    ``steps`` (id, title, status), each once, in its newest state.

    Why: a summary that merged an earlier one kept the plan as that one saw it beside the
    plan now, and said s1 was both done and ``[in_progress]``, s2 both ``[pending]`` and
    ``[in_progress]``. A line a plug-in summary wrote about no step of the plan stays."""
    ids = [sid for sid, _, _ in steps]
    done = [line for line in completed if not names_plan_step(line, ids)]
    todo = [line for line in pending if not names_plan_step(line, ids)]
    for sid, title, status in steps:
        (done if status == "done" else todo).append(
            f"{sid}: {title}" if status == "done" else f"[{status}] {sid}: {title}")
    return done, todo


_STATUS_PREFIX = re.compile(r"^\[[^\]]*\] ")
"""How a pending step's line opens (``[in_progress] s2: fix``)."""


def names_plan_step(line: str, ids: Sequence[str]) -> bool:
    """Whether a summary's step line (``s1: title``, ``[ready] s2: title``) or next action
    (``plan step s1: title``) is about one of the plan steps ``ids``."""
    bare = _STATUS_PREFIX.sub("", line.removeprefix("plan step "), count=1)
    return any(bare.startswith(f"{sid}: ") for sid in ids)
