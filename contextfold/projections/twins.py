"""A retrieved or recalled text that the request's conversation already holds word for word is
sent once.

Why: the seed (5.2) says the same fact may sit in a user input, a summary, memory and retrieval
at once, and is to be sent once. Dedupe ran among the state fragments (evidence, memory) only,
before selection, so a memory identical to a user input, or a ``FileRead`` identical to the
``read_file`` result it was read by (the demo's e10 and e11), went out twice. A conversation
fragment is not deduped before selection: a result is half of a call/result pair and cannot
leave its group, and whether it is kept is what selection decides. So this runs after it: a
kept evidence or memory fragment (not required) whose text is the text of a kept conversation
fragment (a user input, a tool result, a note, a reply) is left out as ``duplicate``, replaced
by that fragment. Nothing is lost, its text is in the request; and a larger budget still keeps
a superset when such a fragment counts as kept through its twin (the builder's monotonicity
test counts it so).

Texts are compared as the log holds them (``FragmentEntry.plain_text``). A text that lives in
an artifact is not loaded for this. A tool result's text over
:data:`~contextfold.projections.entries.LAZY_TEXT_CHARS` is held lazily by a live run and inline
by a replay's fold: it is not loaded either, but compared by its content hash (taken at fold
time from the text), against the hash the result would have with the copy's text, for copies of
its token count. Either fold finds the same twins; a long file read by ``read_file`` and logged as
a ``FileRead`` too went out twice when only texts up to that size were compared. A twin must be
shown whole (not in a cut unit: a cut copy does not hold the text) and be at least as trusted as
the copy it replaces (DESIGN 7: the more authoritative copy is kept; a conversation copy cannot
leave its place, so both stay).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from contextfold.domain.fragments import TRUST_RANK
from contextfold.domain.manifest import ExcludedFragment
from contextfold.projections.entries import LAZY_TEXT_CHARS, FragmentEntry, ToolAnswer
from contextfold.projections.fold_content import content_digest
from contextfold.projections.state import RunState

__all__ = ["timeline_twins", "twin_lines"]

_STANDS_IN = ("evidence", "memory")
_HOLDS = ("user_input", "tool_result", "history")


def timeline_twins(state: RunState, kept_state: Iterable[str], kept_timeline: Iterable[str],
                   required: frozenset[str]) -> dict[str, str]:
    """Kept state fragment id -> the oldest kept conversation fragment with its very text."""
    entries = state.entries
    wanted: dict[str, str] = {}
    by_tokens: dict[int, list[str]] = {}  # the texts a long (unloaded) result is compared with
    for fid in kept_state:
        entry = entries[fid]
        if entry.kind in _STANDS_IN and fid not in required:
            text = entry.plain_text()
            if text is not None and text.strip() and wanted.setdefault(text, fid) == fid:
                by_tokens.setdefault(entry.token_count, []).append(text)
    if not wanted:
        return {}
    twins: dict[str, str] = {}
    for fid in sorted(kept_timeline, key=lambda f: entries[f].position):
        entry = entries[fid]
        if entry.kind not in _HOLDS:
            continue
        answer = entry.answer()
        if answer is not None and (not isinstance(answer.text, str) or len(answer.text) > LAZY_TEXT_CHARS):
            stands_in = _long_twin(entry, answer, wanted, by_tokens.get(entry.token_count, ()), twins)
        else:
            text = entry.plain_text()
            stands_in = None if text is None else wanted.get(text)
        if (stands_in is not None and stands_in not in twins
                and TRUST_RANK[entry.trust] >= TRUST_RANK[entries[stands_in].trust]):
            twins[stands_in] = fid
    return twins


def _long_twin(entry: FragmentEntry, answer: ToolAnswer, wanted: Mapping[str, str], texts: Iterable[str],
               twins: Mapping[str, str]) -> str | None:
    """The copy whose text a long tool result holds, found by hash (the module docstring): the
    result's content hash is the one it has with that text, nothing loaded."""
    if answer.artifact is not None:
        return None  # its text is a preview of the artifact: not what a copy holds
    for text in texts:
        fid = wanted[text]
        if fid not in twins and content_digest(answer._replace(text=text)) == entry.content_hash:
            return fid
    return None


def twin_lines(state: RunState, twins: Mapping[str, str]) -> list[ExcludedFragment]:
    """The manifest's ``duplicate`` lines of the fragments :func:`timeline_twins` found."""
    lines = []
    for fid, twin in sorted(twins.items()):
        entry = state.entries[fid]
        lines.append(ExcludedFragment(
            id=fid, kind=entry.kind, source_ref=entry.source_ref, tokens=entry.token_count,
            reason="duplicate", replaced_by=twin,
            detail=f"the same text as {state.entries[twin].kind} {twin}, kept in the conversation"))
    return lines
