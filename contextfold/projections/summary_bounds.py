"""How long a deterministic summary may grow: each list's newest entries whole, the older ones
folded into one line that cites their calls and the raw events they are read back from.

Why: a summary is required content in every later request. Unbounded, it grew with the history
it stood for: 4,000 calls over 50 tools made a 44k-token summary (every older success's call
id, one line per failure), so a run that had been built within a 24k budget could no longer be
built at its window, and since the log is append-only nothing could undo it. With these caps its
size follows the number of tools a run uses, not its length. What a folded line no longer
spells out stays in the covered events, whose range it cites (``events://RUN/A-B``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from contextfold.projections.summary_check import CALL_CITE

__all__ = ["EARLIER", "SCALES", "bounded_fields", "earlier_lines", "is_earlier_line", "listed_calls"]

EARLIER = "earlier "
"""How a line of older plain successes of one tool starts (``deterministic_summary``): one per
tool and outcome, so they are not folded again."""
_WHOLE: Mapping[str, int] = {"tool_calls_and_results": 32, "side_effects": 32, "known_failures": 16,
                             "evidence_refs": 32, "decisions": 16, "constraints": 32}
"""How many of each list's newest entries stay whole. Of the constraints only what users said
is capped (``user at event N: ...``): a chat loop's every short message is one, and at 8k the
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


_CALL = r"call [^\s,;:()]+"
_EARLIER_LINE = re.compile(rf"^{EARLIER}(.+?): ({_CALL}(?:, {_CALL})*)(?: \(and (\d+) earlier\))?$")
"""A line of older plain successes exactly as :func:`earlier_lines` writes it: (key, calls, more).
A plug-in summary's own line that merely starts with ``earlier`` is an entry like any other."""
_FOLDED = re.compile(r"^(\d+) earlier (?:known failures|tool calls and results|side effects|evidence refs"
                     r"|decisions|constraints) \(read back in events://[^\s)]+\)")
"""A line that folded older entries, exactly as :func:`bounded_fields` writes it."""


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
    """``fields`` with each capped list's older entries folded into one line first (module
    docstring). ``events_ref``: the covered range, where the folded entries are read back;
    ``scale``: the shares of the caps kept whole (one of :data:`SCALES`)."""
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
        older, newest = kept[:-whole], kept[-whole:]
        cited = list(dict.fromkeys(c for entry in older for c in CALL_CITE.findall(entry)))
        # an entry that folded older ones in an earlier summary stands for as many as it says
        count = sum(int(m.group(1)) if (m := _FOLDED.match(e)) else 1 for e in older)
        line = f"{count} earlier {key.replace('_', ' ')} (read back in {events_ref})"
        if cited:
            named = max(4, int(_CALLS_FOLDED * scale[0]))  # (a small window's summary names fewer)
            line += f", the newest: {', '.join(f'call {c}' for c in cited[-named:])}"
        out[key] = (*earlier, line, *newest)
    return out
