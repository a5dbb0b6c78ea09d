"""A plug-in summary is checked before it is recorded: complete, and citing only what exists.

Apart from the compaction planner because it is the trust boundary for summaries a model (or any
plug-in) wrote: every ref and call id it cites must be in the covered events, the skeleton's
constraints stay verbatim, known failures and side effects are not dropped, ids the covered
results name stay, an outcome the log leaves lost or unverified is not stated as known, a failed
call is not stated as a success, every evidence ref (of any scheme, a recalled memory's too) is one
the covered events hold, and a decision, goal, constraint, pending step or next action the log
does not hold as written cites what backs it or says it is an inference. A failed check raises
:class:`CompactionError` (:class:`SummaryRejectedError`, naming the field and the ref, for a ref or
a claim the log does not back) and nothing is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import chain

from pydantic import ValidationError

from contextfold.domain.errors import CompactionError, SummaryRejectedError
from contextfold.domain.events import (
    CompactionSummary,
    EvidenceRetrieved,
    FileRead,
    HistoryCompacted,
    MemoryRecalled,
    ModelResponse,
    RuntimeNote,
    ToolResult,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.projections.render.runtime_lines import call_ref, ref_text
from contextfold.projections.summary_text import file_ref, media_refs

__all__ = ["CALL_CITE", "CALL_ID", "SUMMARY_REF", "summary_lines", "summary_refs", "validate_summary"]

SUMMARY_REF = re.compile(r"(?:events?|call|file)://[^\s,;)\]]+|artifact:[0-9a-f]{64}")
CALL_ID = r"[^\s,;()]*[^\s,;:().!?'\"`\]}]"
"""A call id as a summary cites it (``call ID``): up to a space, ``,``, ``;`` or a parenthesis,
less the sentence punctuation that ends it (``call c1.``, ``call c1: failed``, ``[call c1]``).

Why not up to a ``:``: Kimi's ids hold one (``functions.read_file:0``), and every line the skeleton
wrote about such a call cited ``functions.read_file``, an id no call has, so a summarizer that
kept the skeleton's lines was rejected; and the calls ``functions.bash:0`` and ``:1`` were one
id, so a summary that kept the failure of one passed for keeping both. An id's own characters
(OpenAI's ``call_...``, Anthropic's ``toolu_...``, ``.``, ``-``, ``/``, ``@``, a stand-in's hex) are
all taken; only an id ending in sentence punctuation is cited without it."""
CALL_CITE = re.compile(rf"\bcall ({CALL_ID})")


def _calls(entry: str) -> list[str]:
    """The calls ``entry`` cites, each by its ``call_ref``: the skeleton names a call whose id is not
    a plain token by its stand-in, and a summarizer may cite it by its raw id
    (``tools/deploy@prod``): both are the one call when a failure or a side effect is looked for."""
    return [call_ref(c) for c in CALL_CITE.findall(entry)]


def summary_refs(events: Sequence[RecordedEvent], run_id: str) -> tuple[frozenset[str], frozenset[str]]:
    """(refs, call ids) that exist in ``events``: what a summary may cite."""
    refs: set[str] = set()
    ids: set[str] = set()
    if events:
        refs.add(f"events://{run_id}/{events[0].position}-{events[-1].position}")
    for rec in events:
        ev = rec.event
        refs.add(f"event://{run_id}/{rec.position}")
        match ev:
            case ModelResponse():
                for c in ev.tool_calls:  # (the skeleton names a call by its call_ref)
                    ids.update((c.call_id, call_ref(c.call_id)))
                    refs.add(f"call://{run_id}/{c.call_id}@{rec.position}")
            case ToolResult() | FileRead() | EvidenceRetrieved() if ev.artifact is not None:
                refs.add(f"artifact:{ev.artifact.hash}")
            case _:
                pass
        if isinstance(ev, UserInput | ToolResult):  # the media it carried (an image's artifact)
            blocks = ev.content if isinstance(ev, UserInput) else ev.blocks
            refs.update(ref for ref, _ in media_refs(blocks, f"event://{run_id}/{rec.position}"))
        # each as logged and as the skeleton quotes it (``ref_text``: a stand-in for a value no
        # summary line may hold as it is)
        if isinstance(ev, FileRead):
            refs.update((f"file://{ev.path}" + (f"@{ev.revision}" if ev.revision else ""),
                         file_ref(ev.path, ev.revision)))
        elif isinstance(ev, EvidenceRetrieved | RuntimeNote):  # (a note's: the skeleton names it)
            refs.update((ev.source_ref, ref_text(ev.source_ref)))
        elif isinstance(ev, MemoryRecalled):  # as the skeleton lists it, and its id and source
            shown = ref_text(ev.memory_id), ref_text(ev.source_ref)
            for memory_id, source in ((ev.memory_id, ev.source_ref), shown):
                refs.update((f"memory {memory_id}: {source}", f"memory {memory_id}", source))
        elif isinstance(ev, HistoryCompacted):
            refs.update(SUMMARY_REF.findall(" ".join(summary_lines(ev.summary))))
            for entry in ev.summary.evidence_refs:  # what an earlier summary held (a web page's URL)
                refs.update((entry, *_URI.findall(entry)))
                if (memory := _MEMORY.match(entry)) is not None:
                    refs.add(f"memory {memory.group(1)}")
    return frozenset(refs), frozenset(ids)


_URI = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s,;)\]]+|\bartifact:[0-9a-f]{64}", re.IGNORECASE)
"""A ref of any scheme an evidence entry names (``https://...``, ``mem://...``, ``file://...``)."""
_MEMORY = re.compile(r"^memory (\S+?):? ")
"""An evidence entry naming a recalled memory as the skeleton writes it (``memory m-1: mem://x``)."""


def summary_lines(s: CompactionSummary) -> list[str]:
    """Every line of a summary: its goal and next action, then each list's entries."""
    out = [s.goal, s.next_action]
    for key in ("success_contract", "completed_steps", "pending_steps", "decisions", "constraints",
                "tool_calls_and_results", "evidence_refs", "side_effects", "known_failures",
                "inferences"):
        out.extend(getattr(s, key))
    return out


def validate_summary(candidate: object, events: Sequence[RecordedEvent], skeleton: CompactionSummary,
                     run_id: str, *, unfolded_constraints: Sequence[str] = (),
                     answers: Sequence[RecordedEvent] = ()) -> CompactionSummary:
    """Accept a plug-in summary only if it is complete and cites nothing that does not exist.

    ``unfolded_constraints``: the skeleton's constraints before it folded some into a line of its
    own to fit a window; a summary that keeps each folded one verbatim need not keep that line.
    ``answers``: runtime recovery answers logged after the cover that close calls inside it (a
    summary may cite them: ``compaction.recovery_answers``).
    Raises :class:`CompactionError` naming the first problem; nothing is recorded then.
    """
    if candidate is None:
        raise CompactionError("the summarizer returned nothing; a failed summary is never recorded")
    try:
        summary = (candidate if isinstance(candidate, CompactionSummary)
                   else CompactionSummary.model_validate(candidate))
    except ValidationError as exc:
        raise CompactionError(f"the summarizer returned malformed fields: {exc}") from exc
    lines = summary_lines(summary)
    if not any(v.strip() for v in lines):
        raise CompactionError("the summarizer returned an empty summary")
    for text in lines:  # an LLM reply cut mid-emoji: no UTF-8 request or record can carry it
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise CompactionError(f"the summarizer returned text that is not valid Unicode (a lone "
                                  f"surrogate): {text[:80]!r}") from None
    refs, ids = summary_refs(events, run_id)
    refs |= {f"event://{run_id}/{rec.position}" for rec in answers}
    for field, text in _fielded(summary):
        for found in SUMMARY_REF.finditer(text):
            ref = found.group(0)
            # a ref ending a sentence ("... file://src/pricing.py@r2."): the ref is the one held
            bare = ref.rstrip(".:!?'\"")
            if not (_held(ref, refs) or _held(bare, refs) or _written_whole(text, found.start(), ref, refs)):
                raise SummaryRejectedError(f"summary {field} cites {ref!r}, which the covered events do "
                                           f"not hold", field=field, ref=ref)
    _check_evidence(summary, skeleton, refs)
    for key in ("tool_calls_and_results", "side_effects", "known_failures"):
        for entry in getattr(summary, key):
            cited = CALL_CITE.findall(entry)
            if not cited:
                raise CompactionError(f"{key} entry cites no call (`call <id>`): {entry!r}")
            unknown = [c for c in cited if c not in ids]
            if unknown:
                raise CompactionError(f"{key} entry cites unknown call ids {unknown}: {entry!r}")
    missing = [c for c in skeleton.constraints if c not in summary.constraints]
    folded = [c for c in unfolded_constraints if c not in skeleton.constraints]
    if missing and folded and all(c in summary.constraints for c in folded):
        missing = [c for c in missing if c in unfolded_constraints]  # not the line folding them
    if missing:
        raise CompactionError(f"summary drops constraints (they must stay verbatim): {missing[:3]}")
    if skeleton.goal and not summary.goal.strip():
        raise CompactionError("summary has no goal")
    if skeleton.next_action and not summary.next_action.strip():
        raise CompactionError("summary has no next_action")
    for key, what in (("known_failures", "known failures"), ("side_effects", "side effects")):
        before = {c for entry in getattr(skeleton, key) for c in _calls(entry)}
        kept = {c for entry in getattr(summary, key) for c in _calls(entry)}
        if before - kept:
            raise CompactionError(f"summary drops {what} of calls {sorted(before - kept)}")
    _check_facts(summary, skeleton, lines, unfolded_constraints)
    return summary


def _fielded(s: CompactionSummary) -> list[tuple[str, str]]:
    """:func:`summary_lines` with the field each line is in."""
    out = [("goal", s.goal), ("next_action", s.next_action)]
    for key in ("success_contract", "completed_steps", "pending_steps", "decisions", "constraints",
                "tool_calls_and_results", "evidence_refs", "side_effects", "known_failures",
                "inferences"):
        out.extend((key, e) for e in getattr(s, key))
    return out


def _held(ref: str, refs: frozenset[str]) -> bool:
    """Whether ``ref`` is one the run holds (a file's section too: ``file://a.md#intro``)."""
    return ref in refs or (ref.startswith("file://") and any(ref.startswith(r + "#") for r in refs))


def _written_whole(text: str, at: int, ref: str, refs: frozenset[str]) -> bool:
    """Whether the ref found at ``at`` in ``text`` (``ref``, not one the run holds) is the start of
    one the run holds, written whole there.

    Why: a ref is found up to a ``,;)]`` (the prose around it: ``(see file://a.py)``), and a path
    may hold one (Next.js' ``app/[slug]/page.tsx``, ``data/a,b.csv``): the skeleton's own line
    ``file://app/[slug]/page.tsx@b52d0f1`` was read as citing ``file://app/[slug``, and a
    summarizer that kept the skeleton's lines was rejected."""
    return any(r.startswith(ref) and text.startswith(r, at) for r in refs)


def _check_evidence(summary: CompactionSummary, skeleton: CompactionSummary, refs: frozenset[str]) -> None:
    """Every evidence ref a plug-in summary lists is one the covered events hold (DESIGN 7: "every
    evidence ref exists"): a ref of any scheme it names is held, a memory it names was recalled,
    and an entry naming no ref names one the run holds. Only ``event://``, ``file://``,
    ``call://`` and ``artifact:`` refs were looked up, and a status page no event held
    (``https://status.example.com/v2-is-live``) and a memory never recalled were recorded as the
    run's evidence."""
    for entry in summary.evidence_refs:
        if entry in skeleton.evidence_refs or entry in refs:
            continue
        found = [(u.start(), u.group(0).rstrip(".")) for u in _URI.finditer(entry)]
        named = [ref for _, ref in found]
        for at, ref in found:
            if not _held(ref, refs) and not _written_whole(entry, at, ref, refs):
                raise SummaryRejectedError(f"summary evidence_refs entry {entry!r} cites {ref!r}, which "
                                           f"the covered events do not hold", field="evidence_refs", ref=ref)
        memory = _MEMORY.match(entry)
        if memory is not None and f"memory {memory.group(1)}" not in refs:
            raise SummaryRejectedError(f"summary evidence_refs entry {entry!r} names memory "
                                       f"{memory.group(1)!r}, which no covered event recalled",
                                       field="evidence_refs", ref=memory.group(1))
        if not named and memory is None and not any(w.strip(",;:()[]") in refs for w in entry.split()):
            raise SummaryRejectedError(f"summary evidence_refs entry {entry!r} names no ref the covered "
                                       f"events hold", field="evidence_refs", ref=entry)


_FACT_IDS = re.compile(r"\{(?:arguments )?ids: ([^;}]+)")
"""The identifiers the skeleton keeps verbatim from a result or arguments (``{ids: dep-9931}``)."""
_UNSURE = re.compile(r"TOOL_RESULT_LOST|TOOL_CALL_CANCELLED|\b(?:lost|cancel\w*|unverified|"
                     r"not (?:yet )?verified|unknown|unconfirmed|not confirmed)\b", re.IGNORECASE)
"""How an entry says a call's outcome is not known or not verified."""
_OUTCOME = re.compile(r" at event \d+ -> (.*)$")
"""Where a skeleton's call line states the outcome (``call c1 (deploy) {args} at event 4 -> ...``)."""


def _outcome(entry: str) -> str:
    """What a skeleton call line says of the call's outcome, refs left out: its arguments and an
    ``event://`` ref may hold any word ("grep 'unknown option'", a run named ``lost-baggage``)."""
    found = _OUTCOME.search(entry)
    return "" if found is None else SUMMARY_REF.sub("", found.group(1))


_FAILED = re.compile(r"\b(?:errors?|erred|erroring|fail(?:ed|s|ure|ures|ing)?|unsuccessful|is_error=true|"
                     r"exit[_ ]code[= ][1-9]\d*|(?:did not|didn't|never|not) succeed\w*|not successful)\b",
                     re.IGNORECASE)
"""How an entry says a call failed ("failover" is not a failure)."""
_NO_FAILURE = re.compile(r"\b(?:no|without|zero|0)\s+(?:\w+\s+)?(?:errors?|failures?)\b|\bnot? fail\w*\b|"
                         r"\bnever fail\w*\b|\bdid not fail\b|\b(?:errors?|failures?)[- ]free\b|"
                         r"\b(?:errors?|failures?)\s*(?:count\s*)?[:=]?\s*(?:none|0|no)\b|"
                         r"\b(?:nothing|none(?:\s+of\s+(?:the\s+)?\w+(?:\s+\w+)?)?)\s+(?:\w+\s+)?fail\w*|"
                         r"\b(?:errors?|failures?)\s+(?:\w+\s+)?(?:resolved|fixed|cleared|recovered)\b",
                         re.IGNORECASE)
"""A denial of a failure ("succeeded with no errors", "error-free", "errors: none", "nothing
failed", "errors resolved"): it does not say the call failed."""
_SUCCESS_DENIED = re.compile(
    r"\b(?:not|never|no|without|n't|failed to|unable to)\b(?:\s+\w+){0,2}?\s+(?:succeed\w*|success\w*)\b|"
    r"\bsuccess(?:ful)?\s*[:=]\s*(?:false|no|0|none)\b|\bsuccess\s+is\s+pending\b", re.IGNORECASE)
"""A success denied ("did not complete successfully", "without success", "success: false")."""
_SUCCEEDED = re.compile(r"\b(?:succeed(?:ed|s)?|success(?:ful(?:ly)?)?)\b", re.IGNORECASE)
"""A claim of success, once the denied ones are left out: an entry about a failed call that makes
one is a rewrite of the failure, whatever failure word it also holds ("succeeded, the failover was
not needed")."""
_FAILED_AT = re.compile(rf"^call ({CALL_ID}) \([^)]*\) failed at event \d+:")
"""A skeleton's known failure of a failed result (``call d1 (deploy) failed at event 4: ...``)."""
_ERROR_SIDE_EFFECT = re.compile(r": (?:error|lost|cancelled|open): unverified(?: \{.*\})?$")
"""A skeleton's side effect whose call did not report success (its verdict ends the entry)."""


def _failed_calls(skeleton: CompactionSummary) -> set[str]:
    """The calls the skeleton records as failed or not reported done: a call line whose outcome is
    an error, a known failure of a failed result, a side effect marked ``unverified``. A plug-in
    summary wrote a failed deploy (exit 1, "error: unverified") as "succeeded, verified healthy":
    only a lost or cancelled call's outcome was checked."""
    out = {c for entry in skeleton.tool_calls_and_results if _outcome(entry).startswith("error")
           for c in _calls(entry)}
    out.update(m.group(1) for entry in skeleton.known_failures if (m := _FAILED_AT.match(entry)))
    out.update(c for entry in skeleton.side_effects if _ERROR_SIDE_EFFECT.search(entry)
               for c in _calls(entry)[:1])
    return out


_CITES = re.compile(r"\bevents? \d+|\b(?:events?|call|file)://|\bartifact:|\bcall \S")
_VERIFIED = re.compile(r"\b(?<!not )(?<!never )verified\b|\bconfirmed\b", re.IGNORECASE)
"""A claim that an outcome was checked ("deploy verified"): of a lost or unverified call, a
statement of its outcome as known."""


def _check_facts(summary: CompactionSummary, skeleton: CompactionSummary, lines: Sequence[str],
                 unfolded_constraints: Sequence[str] = ()) -> None:
    """What a summary may not state otherwise than the log does (the seed, 5.3: ids are not
    summarised away, an unverified state stays unverified, an inference is labelled one): a
    plug-in summary dropped a deploy's id, wrote a lost deploy as "succeeded, verified" and
    stated an uncited decision, and was recorded."""
    text = "\n".join(lines)
    ids = dict.fromkeys(i.strip() for entry in summary_lines(skeleton) for found in _FACT_IDS.findall(entry)
                        for i in found.split(","))
    missing = [i for i in ids if i and i not in text]
    if missing:
        raise CompactionError(f"summary drops ids the covered events name (they must stay verbatim): "
                              f"{missing[:5]}")
    unsure = {c for entry in skeleton.tool_calls_and_results if _UNSURE.search(_outcome(entry))  # per call
              for c in _calls(entry)}
    failed = _failed_calls(skeleton)
    own = set(summary_lines(skeleton))  # the skeleton's own lines (a folded line cites any call)
    stated = chain(summary.tool_calls_and_results, summary.side_effects, summary.known_failures,
                   summary.completed_steps)  # where an outcome is stated (a decision may name a call)
    for entry in stated:
        if entry in own:
            continue
        cited = _calls(entry)
        said = SUMMARY_REF.sub("", entry)
        calls = unsure.intersection(cited)
        if calls and not _UNSURE.search(said):
            raise CompactionError(f"summary states the outcome of calls {sorted(calls)} as known, which "
                                  f"the log leaves lost, cancelled or unverified: {entry!r}")
        calls = failed.intersection(cited)
        if calls and (_SUCCEEDED.search(_SUCCESS_DENIED.sub("", said)) or not (
                _UNSURE.search(said) or _FAILED.search(_NO_FAILURE.sub("", said)))):
            raise CompactionError(f"summary states calls {sorted(calls)} as succeeded, which the log "
                                  f"records as failed: {entry!r}")
    # a decision or the next action may name a failed call ("retry call d1"), but not call it a
    # success: "the test run (call c2) succeeded, so deploy next" was recorded as a decision; nor
    # call a lost or unverified one verified ("v2 is live: call d1 verified")
    claims = [*(("decisions", d) for d in summary.decisions), ("next_action", summary.next_action)]
    for field, entry in claims:
        calls = failed.intersection(_calls(entry))
        said = _SUCCESS_DENIED.sub("", SUMMARY_REF.sub("", entry))
        if entry not in own and calls and _SUCCEEDED.search(said):
            raise SummaryRejectedError(f"summary {field} states calls {sorted(calls)} as succeeded, which "
                                       f"the log records as failed: {entry!r}", field=field)
        calls = unsure.intersection(_calls(entry))
        if entry not in own and calls and (_SUCCEEDED.search(said) or _VERIFIED.search(said)) and not (
                _UNSURE.search(said)):
            raise SummaryRejectedError(f"summary {field} states the outcome of calls {sorted(calls)} as "
                                       f"known, which the log leaves lost, cancelled or unverified: "
                                       f"{entry!r}", field=field)
    for entry in summary.side_effects:
        calls = (failed | unsure).intersection(_calls(entry))
        if entry not in own and calls and not _UNSURE.search(SUMMARY_REF.sub("", entry)):
            raise CompactionError(f"summary drops the unverified state of the side effects of calls "
                                  f"{sorted(calls)} (it must stay verbatim): {entry!r}")
    for key in ("decisions", "completed_steps"):
        for entry in getattr(summary, key):
            if entry not in getattr(skeleton, key) and not _CITES.search(entry):
                raise SummaryRejectedError(f"{key} entry cites no event, call or ref; a claim the log does "
                                           f"not back belongs under inferences: {entry!r}", field=key)
    # the next action too (the seed, 5.3: an inference is labelled one): "v2 is live in production
    # (deploy verified); close the ticket" was recorded while the deploy's result was lost
    said = summary.next_action
    if said != skeleton.next_action and not (
            _CITES.search(said) or _INFERRED.search(SUMMARY_REF.sub("", said))):
        raise SummaryRejectedError(f"next_action {said!r} cites no event, call or ref and is not labelled "
                                   f"an inference; cite what backs it or label it inferred",
                                   field="next_action")
    _check_stated(summary, skeleton, unfolded_constraints)


_INFERRED = re.compile(r"\b(?:inferred|inference|assumed|assumption|not verified|unverified)\b",
                       re.IGNORECASE)
"""How an entry says it is the summarizer's inference, not what the log states."""


def _check_stated(summary: CompactionSummary, skeleton: CompactionSummary,
                  unfolded_constraints: Sequence[str]) -> None:
    """A goal, a constraint, a success criterion or a pending step the skeleton does not hold must
    cite what backs it or say it is an inference (the seed, 5.3), as a decision must: a plug-in
    summary added "the user approved deploying to production at any time" to the constraints and
    "deploy to production (approved)" to the pending steps, and both were sent as the log's."""
    own = {"constraints": {*skeleton.constraints, *unfolded_constraints},
           "success_contract": set(skeleton.success_contract), "pending_steps": set(skeleton.pending_steps)}
    added = [(key, e) for key, kept in own.items() for e in getattr(summary, key) if e not in kept]
    if summary.goal.strip() and summary.goal != skeleton.goal:
        added.append(("goal", summary.goal))
    for key, entry in added:
        if not (_CITES.search(entry) or _INFERRED.search(SUMMARY_REF.sub("", entry))):
            raise CompactionError(f"{key} {entry!r} is not in the log as written and cites no event, call or "
                                  f"ref; cite what backs it or label it an inference")
