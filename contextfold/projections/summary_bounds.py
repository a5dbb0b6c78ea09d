"""How long a deterministic summary may grow: each list's newest entries whole, the older ones
folded into one line that cites their calls and the raw events they are read back from.

Why: a summary is required content in every later request. Unbounded, it grew with the history
it stood for: 4,000 calls over 50 tools made a 44k-token summary (every older success's call
id, one line per failure), so a run that had been built within a 24k budget could no longer be
built at its window, and since the log is append-only nothing could undo it. With these caps its
size follows the number of tools a run uses, not its length. What a folded line no longer
spells out stays in the covered events, whose range it cites (``events://RUN/A-B``).

Which entries fold first is a rule, not recency alone (:func:`_rank`): a chat loop's user says
"ok, carry on" every turn, and folding the oldest of what users said kept 32 of those and folded
the constraints of turns 1 and 20 (the seed, section 10: the constraints of turns 1, 20 and 50
still hold after compaction); of 40 deploys the first, failed one's deployment id was folded out
of the side effects (the seed, 5.3: deployment ids and unverified states are not summarised
away). So chatter folds before what the user asked for and the first thing the user said (the
task) never folds; plain successes fold before entries naming ids, and those before failed, lost
or unverified ones; and a folded line keeps the ids of what it folds, verbatim, and says where
the user's folded messages are read back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from contextfold.projections.summary_check import CALL_CITE, CALL_ID
from contextfold.projections.summary_text import CONSTRAINT_LINE

__all__ = ["EARLIER", "SCALES", "STATEMENTS_WHOLE", "bounded_fields", "earlier_lines", "is_earlier_line",
           "listed_calls", "newest_of", "said_once", "with_ids"]

EARLIER = "earlier "
"""How a line of older plain successes of one tool starts (``deterministic_summary``): one per
tool and outcome, so they are not folded again."""
STATEMENTS_WHOLE = 6
"""The assistant's statements a summary lists as inferences (the newest; a line counts the rest:
:func:`newest_of`)."""
_WHOLE: Mapping[str, int] = {"tool_calls_and_results": 32, "side_effects": 32, "known_failures": 16,
                             "evidence_refs": 32, "decisions": 16, "constraints": 32,
                             "inferences": STATEMENTS_WHOLE}
"""How many of each list's entries stay whole (the highest ranked, :func:`_rank`; the newest of
a rank first). The inferences fold at a share as the other lists do (a summary made for a
small window listed six statements whole beside folded constraints). Of the constraints only
what users said is capped (``user at event N: ...``): a chat loop's every short message is one, and at 8k the
summary outgrew what auto-compaction could make fit, so the newest turns were dropped instead.
Policies and inputs marked required always stay whole."""
_USER_SAID = re.compile(r"^user at event (\d+): ")
_CALLS_LISTED = 8
"""Call ids on a line of older plain successes of one tool (the newest)."""
_CALLS_FOLDED = 48
"""Call ids on the line that folds a list's older entries (the newest)."""


def _said_at(entry: str) -> int:
    """The event a ``user at event N:`` line names; 0 for a folded line (the oldest)."""
    said = _USER_SAID.match(entry)
    return int(said.group(1)) if said else 0


_CALL = rf"call {CALL_ID}"
_EARLIER_LINE = re.compile(rf"^{EARLIER}(.+?): ({_CALL}(?:, {_CALL})*)(?: \(and (\d+) earlier\))?$")
"""A line of older plain successes exactly as :func:`earlier_lines` writes it: (key, calls, more).
A plug-in summary's own line that merely starts with ``earlier`` is an entry like any other."""
_FOLDED = re.compile(r"^(\d+) earlier (?:known failures|tool calls and results|side effects|evidence refs"
                     r"|decisions|constraints|inferences) \(read back in events://[^\s)]+\)")
"""A line that folded older entries, exactly as :func:`bounded_fields` (or :func:`newest_of`)
writes it."""


def is_earlier_line(entry: str) -> bool:
    """Whether ``entry`` is a line of older plain successes (:func:`earlier_lines`' format)."""
    return entry.startswith(EARLIER) and _EARLIER_LINE.match(entry) is not None


def listed_calls(ids: Sequence[str], limit: int = _CALLS_LISTED, more: int = 0) -> str:
    """``call a, call b`` for the newest ``limit`` of ``ids``, saying how many older ones (those
    cut off, and ``more`` already unnamed) are left unnamed."""
    shown = ", ".join(f"call {i}" for i in ids[-limit:])
    unnamed = more + max(0, len(ids) - limit)
    return f"{shown} (and {unnamed} earlier)" if unnamed else shown


def earlier_lines(carried: Iterable[str], new: Mapping[str, Sequence[str]]) -> list[str]:
    """The lines of older plain successes, one per tool and outcome: those an earlier summary
    carried (``carried``, merged into this one) joined with this summary's (``new``: key -> call
    ids, oldest first) under the same key. Each compaction added its own line per tool, and a run
    compacted forty times carried forty lines per tool."""
    merged: dict[str, tuple[list[str], int]] = {}
    for line in carried:
        parsed = _EARLIER_LINE.match(line)
        if parsed is None:  # not one of ours: the caller keeps it as it is (is_earlier_line)
            continue
        key, calls, more = parsed.groups()
        ids, unnamed = merged.setdefault(key, ([], 0))
        ids.extend(CALL_CITE.findall(calls))
        merged[key] = (ids, unnamed + (int(more) if more else 0))
    for key, ids_new in new.items():
        ids, unnamed = merged.setdefault(key, ([], 0))
        ids.extend(ids_new)
    return [f"{EARLIER}{key}: {listed_calls(list(dict.fromkeys(ids)), more=unnamed)}"
            for key, (ids, unnamed) in merged.items()]


def newest_of(key: str, entries: Sequence[str], keep: int, events_ref: str) -> list[str]:
    """The newest ``keep`` of ``entries`` (a list of ``key``), after one line saying how many older
    ones are left out and where they are read back (``events_ref``, the covered range), as a
    folded line of :func:`bounded_fields` says it. A line an earlier summary wrote so (merged into
    this one) counts for the entries it stood for, and is replaced.

    Why: the built-in summary keeps the assistant's newest statements alone as inferences, and
    left the older ones out without a word: a model reading it had no way to know it had said
    anything before, nor where to read it."""
    folded = [m for e in entries if (m := _FOLDED.match(e)) is not None]
    rest = [e for e in entries if _FOLDED.match(e) is None]
    kept = rest[-keep:] if keep > 0 else []
    dropped = sum(int(m.group(1)) for m in folded) + len(rest) - len(kept)
    line = f"{dropped} earlier {key.replace('_', ' ')} (read back in {events_ref})"
    return [line, *kept] if dropped else kept


SCALES: tuple[tuple[float, float], ...] = (
    (1.0, 1.0), (0.5, 1.0), (0.25, 1.0), (0.125, 1.0), (0.0625, 1.0),
    (0.0625, 0.5), (0.0625, 0.25), (0.0625, 0.125))
"""The shares of the caps a summary is tried at, largest first, until it fits the tokens a
compaction gives it (``compaction.plan_summary``): (the share of every list but the
constraints, the share of the constraints). At a share, a list keeps that share of its newest
entries whole (at least one). What users said is folded last, once every other list is at its
smallest: at a 700-token room "Reply in French from now on." was folded while most of the
summary was tool lines."""


def bounded_fields(fields: Mapping[str, tuple[str, ...]], events_ref: str,
                   scale: tuple[float, float] = (1.0, 1.0)) -> dict[str, tuple[str, ...]]:
    """``fields`` with each capped list's least telling entries folded into one line first
    (:func:`_rank`; module docstring). ``events_ref``: the covered range, where the folded entries
    are read back; ``scale``: the shares of the caps kept whole (one of :data:`SCALES`)."""
    out = dict(fields)
    for key, cap in _WHOLE.items():
        whole = max(1, int(cap * scale[key == "constraints"]))
        entries = fields.get(key, ())
        per_tool = key == "tool_calls_and_results"  # its per-tool lines of older successes stay
        if key == "constraints":  # policies and required inputs stay as they are
            said = [bool(_USER_SAID.match(e) or _FOLDED.match(e)) for e in entries]
            earlier = [e for e, user in zip(entries, said, strict=True) if not user]
            # oldest first, by the event each names (a merged summary's lines come after the raw
            # input its cover left out, which is newer): a folded line first, it is the oldest
            kept = sorted((e for e, user in zip(entries, said, strict=True) if user), key=_said_at)
        else:
            earlier = [e for e in entries if is_earlier_line(e)] if per_tool else []
            kept = [e for e in entries if not is_earlier_line(e)] if per_tool else list(entries)
        if len(kept) <= whole:
            continue
        ranks = [_rank(key, e) for e in kept]
        if key == "constraints":  # the first thing the user said (the task) is always kept
            first = next((i for i, e in enumerate(kept) if not _FOLDED.match(e)), None)
            if first is not None:
                ranks[first] = _PINNED
        # the ``whole`` entries of the highest rank stay, the newest of a rank first
        stay = set(sorted(range(len(kept)), key=lambda i: (ranks[i], i), reverse=True)[:whole])
        older = [i for i in range(len(kept)) if i not in stay]
        newest = [e for i, e in enumerate(kept) if i in stay]
        out[key] = (*earlier, _folded_line(key, [(kept[i], ranks[i]) for i in older], events_ref, scale),
                    *newest)
    return out


_PINNED = 9
"""The rank of the first thing the user said: above every other (:func:`_rank`)."""
_FACT_IDS = re.compile(r"\{(?:arguments )?ids: ([^;}]+)")
"""The ids a line keeps verbatim (``summary_text.kept_facts``: ``{ids: dep-9931}``)."""
_UNSURE = re.compile(r"TOOL_RESULT_LOST|TOOL_CALL_CANCELLED|\bunverified\b|outcome unknown")
_OPEN_OR_FAILED = re.compile(r" -> (?:error|open|TOOL_RESULT_LOST|TOOL_CALL_CANCELLED)\b")
"""A call line (``call c1 (deploy) {args} at event 4 -> error exit_code=1 ...``) whose call did
not report success."""
_USER_MEDIA = re.compile(r", attached to the user's message at event \d+\)$")
"""An evidence line citing a medium a user's message carried (``summary_text.media_lines``)."""
_ACK_WORDS = 8
"""A user message of more words than this (or more than four times as many characters: CJK
writes no spaces) is not chatter, whatever its words."""
_CHATTER = re.compile(
    r"^\W*(?:ok(?:ay)?|k|yes|yeah|yep|sure|thanks?|thank you|thx|ty|great|good|cool|nice|perfect|"
    r"fine|alright|all right|got it|understood|lgtm|continue|carry on|go on|go ahead|proceed|"
    r"hi|hello|hey|status|好的?|嗯|继续|谢谢|はい|ありがとう|네|감사)(?:\W|$)"
    r"|\?\s*$", re.IGNORECASE)
"""Chatter: a message that opens with an acknowledgement, a greeting or "go on", or asks a
question (``?`` at its end)."""


def _rank(key: str, entry: str) -> int:
    """How late ``entry`` is folded: a higher rank stays whole longer (a documented, deterministic
    rule, so the same log gives the same summary).

    What users said: 3 a constraint (:data:`~contextfold.projections.summary_text.CONSTRAINT_LINE`)
    or a message of more than :data:`_ACK_WORDS` words; 1 short chatter (:data:`_CHATTER`); 2 any
    other short message ("Reply in French from now on.", "Target Python 3.8."). The first thing the
    user said is never folded (:func:`bounded_fields`). Evidence refs: 2 a medium a user's message
    carried, 1 the rest. Other lists: 3 an entry whose call failed,
    was lost or cancelled or is unverified, 2 one that names ids, 1 the rest. A line that folded
    older entries in an earlier summary: 0, it is folded again first."""
    if _FOLDED.match(entry):
        return 0
    if key == "constraints":
        said = _USER_SAID.sub("", entry, count=1)
        if CONSTRAINT_LINE.search(said) or len(said.split()) > _ACK_WORDS or len(said) > 4 * _ACK_WORDS:
            return 3
        return 1 if _CHATTER.search(said) else 2
    if key == "evidence_refs":  # the media a user gave (the task's screenshot) before a result's
        return 2 if _USER_MEDIA.search(entry) else 1
    if key in ("side_effects", "known_failures", "tool_calls_and_results"):
        if _UNSURE.search(entry) or _OPEN_OR_FAILED.search(entry):
            return 3
        return 2 if _FACT_IDS.search(entry) else 1
    return 1


_NAMED_EVENTS = re.compile(r"the user's at events ([\d, ]+)")
_EVENTS_UNLISTED = 4
"""At most this many names on a folded line (the smallest share): the events the user's folded
messages were said at are not listed, only that each is readable in the covered range."""


def _first_named(names: Sequence[Sequence[str]], ranks: Sequence[int], limit: int) -> list[str]:
    """Of the ``names`` each entry holds (oldest first), the ``limit`` a folded line lists: those of
    the highest-ranked entries, the newest of a rank first, shown oldest first. Of an entry that
    folded older ones in an earlier summary (rank 0, its names oldest first), its newest names are
    taken first too: taken from its start, a line folded again at each compaction kept naming its
    oldest few calls for good and dropped every newer one it stood for."""
    order = sorted(range(len(names)), key=lambda i: (ranks[i], i), reverse=True)
    picked: dict[str, int] = {}
    for i in order:
        for n in (reversed(names[i]) if ranks[i] == 0 else names[i]):
            if len(picked) < limit and n not in picked:
                picked[n] = i
    return sorted(picked, key=lambda n: (picked[n], names[picked[n]].index(n)))


def _folded_line(key: str, older: Sequence[tuple[str, int]], events_ref: str,
                 scale: tuple[float, float]) -> str:
    """The one line ``older`` (entries and their :func:`_rank`, oldest first) are folded into: how
    many it stands for, where they are read back, and what of them a later step may need verbatim
    (the calls they cite and the ids they name, those of the least foldable entries first, then
    the newest, and how many it leaves unnamed; of what users said, the events each message is
    read back at). The names are capped, so the line stays bounded too."""
    named = max(4, int(_CALLS_FOLDED * scale[0]))  # (a small window's summary names fewer)
    # an entry that folded older ones in an earlier summary stands for as many as it says
    count = sum(int(m.group(1)) if (m := _FOLDED.match(e)) else 1 for e, _ in older)
    line = f"{count} earlier {key.replace('_', ' ')} (read back in {events_ref})"
    calls = [CALL_CITE.findall(e) for e, _ in older]
    cited = _first_named(calls, [r for _, r in older], named)
    if cited:  # (no "the newest": they are picked by rank first, and it named the oldest, failed, calls)
        unnamed = len({c for found in calls for c in found}) - len(cited)
        line += f", citing {', '.join(f'call {c}' for c in cited)}" + (
            f" and {unnamed} more calls" if unnamed else "")
    ids = _first_named([[i.strip() for found in _FACT_IDS.findall(e) for i in found.split(",") if i.strip()]
                        for e, _ in older], [r for _, r in older], named)
    if ids:  # verbatim (the seed, 5.3: deployment ids are not summarised away)
        total = len({i.strip() for e, _ in older for f in _FACT_IDS.findall(e) for i in f.split(",")} - {""})
        line += f", naming {{ids: {', '.join(ids)}}}" + (
            f" and {total - len(ids)} more ids" if total > len(ids) else "")
    if key == "constraints":
        at = sorted({int(p) for e, _ in older for m in [_USER_SAID.match(e) or _NAMED_EVENTS.search(e)] if m
                     for p in re.findall(r"\d+", m.group(1))})
        # (``show RUN event://RUN/N`` prints one, ``why`` says what stands in for it); at the
        # smallest share the events are not listed: the line must fit a 4k window's summary
        if at and named > _EVENTS_UNLISTED:
            line += (f": the user's at events {', '.join(map(str, at[-named:]))}"
                     + (f" (and {len(at) - named} earlier)" if len(at) > named else "")
                     + ", each readable whole there")
        elif at:
            line += ", each readable whole there"
    return line


_CALL_LINE = re.compile(rf"^call ({CALL_ID}) \(")
"""A whole entry of ``tool_calls_and_results`` (a folded line opens with its count, a line of
older successes with ``earlier``): the call it is about."""
_SIDE_EFFECT = re.compile(rf"^(call ({CALL_ID}) \([^)]*\) at event \d+)((?: \{{arguments [^{{}}]*\}})?): "
                          r"((?:reported success by the tool|(?:error|lost|cancelled|open): unverified))"
                          r"((?: \{[^{}]*\})?)$")
"""A side effect as the skeleton writes it (``summary_skeleton._cited``): its call, the ids its
arguments hold, the verdict, the ids and state its result gave."""


def said_once(fields: Mapping[str, tuple[str, ...]], calls: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``fields`` (bounded) with each side effect's ids left out where its call's whole line in
    ``tool_calls_and_results`` says them all: the side effect then names the call, the event its
    line is at and the verdict (its unverified state is its own). ``calls``: the lines of
    ``tool_calls_and_results`` before folding.

    Why after folding: a call's line may be folded (its ids capped on the folded line) while its
    side effect stays whole; the side effect keeps its ids then, and one an earlier summary
    recorded without them (its call's line was whole there) has them back from that line. A
    write's ids were written out twice in every request after a compaction (a digest in its
    arguments: some 45 tokens a time)."""
    whole = _lines_by_call(fields.get("tool_calls_and_results", ()))
    before = _lines_by_call(calls)
    out = dict(fields)
    out["side_effects"] = tuple(_said_once(entry, whole, before) for entry in fields.get("side_effects", ()))
    return out


def with_ids(fields: Mapping[str, tuple[str, ...]], calls: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``fields`` (before folding) with each side effect's ids back from its call's line in
    ``calls`` (the lines of ``tool_calls_and_results`` before folding), where an earlier summary
    recorded it without them (:func:`said_once`: its call's line said them there).

    Why before folding: such a side effect was ranked as one naming no ids and folded first, and
    its folded line named no ids for it: they were left only on the call's folded line, whose
    names a run's reads fill (a deploy agent listing pods each turn: of 20 successful deploys,
    their "not yet verified" deployments among them, 8 ids were gone from the request at a 6k
    window). :func:`said_once` leaves them out again where the call's line stays whole."""
    before = _lines_by_call(calls)
    out = dict(fields)
    out["side_effects"] = tuple(_with_ids(entry, before) for entry in fields.get("side_effects", ()))
    return out


def _with_ids(entry: str, before: Mapping[str, str]) -> str:
    m = _SIDE_EFFECT.match(entry)
    if m is None:
        return entry
    head, call, args, verdict, facts = m.groups()
    ids = dict.fromkeys(i.strip() for found in _FACT_IDS.findall(before.get(call, ""))
                        for i in found.split(","))
    missing = [i for i in ids if i and not _all_in(f"{{ids: {i}}}", entry)]
    if not missing:
        return entry
    have, said = _parts(facts)
    body = "; ".join([f"ids: {', '.join([*have, *missing])}", *([f"says: {said}"] if said else [])])
    return f"{head}{args}: {verdict} {{{body}}}"


def _lines_by_call(lines: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in lines:
        if (m := _CALL_LINE.match(entry)) is not None:
            out.setdefault(m.group(1), entry)
    return out


def _said_once(entry: str, whole: Mapping[str, str], before: Mapping[str, str]) -> str:
    m = _SIDE_EFFECT.match(entry)
    if m is None:
        return entry
    head, call, args, verdict, facts = m.groups()
    line = whole.get(call)
    if line is None:  # its line folded: every id its line held, here
        ids = dict.fromkeys(i.strip() for found in _FACT_IDS.findall(before.get(call, ""))
                            for i in found.split(","))
        missing = [i for i in ids if i and not _all_in(f"{{ids: {i}}}", entry)]
        return entry + (f" {{ids: {', '.join(missing)}}}" if missing else "")
    return f"{head}{_unsaid(args, line)}: {verdict}{_unsaid(facts, line)}"


def _unsaid(braces: str, line: str) -> str:
    """`` {ids: a, b; says: ...}`` less the ids when ``line`` says them all and what is said: what
    it says of a state stays (a deploy's "health check: not yet verified" beside its verdict)."""
    if not braces or not _all_in(braces, line):
        return braces
    lead = " {arguments " if braces.startswith(" {arguments ") else " {"
    said = _parts(braces)[1]
    return f"{lead}says: {said}}}" if said else ""


def _parts(braces: str) -> tuple[list[str], str]:
    """The ids and the stated text of `` {ids: a, b; says: ...}`` (``summary_text.kept_facts``:
    the ids first, then what it says, which may hold ``;`` itself)."""
    body = braces.strip()[1:-1].removeprefix("arguments ") if braces.strip() else ""
    ids, said = [], ""
    if body.startswith("ids: "):
        listed, _, rest = body[5:].partition("; says: ")
        ids, said = [i.strip() for i in listed.split(",") if i.strip()], rest
    elif body.startswith("says: "):
        said = body[6:]
    return ids, said


def _all_in(braces: str, line: str) -> bool:
    """Whether ``line`` holds each id and the stated text of ``braces`` (`` {ids: a, b; says: ...}``)."""
    ids, said = _parts(braces)
    return all(re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", line) for v in [*ids, said] if v)
