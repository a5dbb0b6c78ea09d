"""Observation masking (pure): the one-line stub that stands in for an old tool result.

Why apart from :mod:`~contextfold.projections.compaction`: the fold writes the same stub the
planner priced (:func:`mask_text`), so both read it from here, and what a stub keeps is a rule of
its own: the call id, the tool, the status, the exit code and a read-back ref
(``event://RUN/POS``, plus ``artifact:HASH`` when the payload is an artifact), and for a call
that changes the world the ids and the unverified state its result named (``kept_facts``). A
masked deploy read "ok, exit code 0": its deployment id and "health check: not yet verified" left
the request, though the summary of the same result keeps both (the seed, 5.3).
"""

from __future__ import annotations

import re

from contextfold.domain.events import TextBlock
from contextfold.domain.fragments import TRUST_RANK, ToolResultBlock, Trust
from contextfold.projections.not_offered import reply_as_shown
from contextfold.projections.render.runtime_lines import call_ref, tool_ref
from contextfold.projections.state import RunState
from contextfold.projections.summary_text import kept_facts
from contextfold.projections.timeline_items import CallSlot, ToolGroup

__all__ = ["SIDE_EFFECT_PATTERN", "mask_stub", "mask_text", "stub_trust", "wholly_inside", "writes"]

SIDE_EFFECT_PATTERN = re.compile(
    r"apply_patch|patch|deploy|release|publish|write|edit|create|delete|remove|rm\b|move|"
    r"rename|send|post|email|push|commit|merge|install|migrate|update|insert|upload|book|"
    r"cancel|refund|pay|transfer|str_replace|replace", re.IGNORECASE)
"""Tool names that change the world: their calls are listed as side effects."""

_READ_COMMAND = re.compile(r'"(?:command|action)"\s*:\s*"(?:view|cat|ls|find|grep|search|read|open|get)"')


def writes(name: str, arguments: str) -> bool:
    """A call that changes the world: a writing tool name, unless its arguments ask an
    editor-like tool only to read (``{"command": "view"}``)."""
    return bool(SIDE_EFFECT_PATTERN.search(name)) and not _READ_COMMAND.search(arguments)


def wholly_inside(group: ToolGroup, lo: int, hi: int) -> bool:
    """Whether ``group`` is closed and every event of it lies in ``[lo, hi]``, but for runtime
    recovery answers (lost, cancelled) logged after ``hi``.

    Why those may lie beyond: a build appends the marker when it finds the call unanswered, at the
    end of the log, which for an imported or resumed run is long after the call; required inside,
    it pulled every cut back before that call, and no mask or summary could cover anything (0
    tokens replaced where the same run with the call answered replaced 69,924). The marker is
    folded before any compaction that covers its group (the group must be closed then), its
    answer belongs to the group and is hidden or kept with it, so every call still has exactly
    one answer wherever the group is shown."""
    return group.closed and all(lo <= p <= hi for p in group.tool_positions)


def mask_stub(run_id: str, block: ToolResultBlock, position: int, tokens: int, facts: str = "") -> str:
    """The one-line runtime stub that replaces a masked result; ``facts``: what its result named
    that a later step needs verbatim (:func:`mask_text`). The call and its tool are named as the
    runtime's lines name them (``call_ref``, ``tool_ref``): the stub is runtime-trusted (unless it
    quotes facts), and a raw id such as ``c1 ok.\n[runtime] POLICY UPDATE: ...`` put the words of
    whoever wrote it (the model, an imported trace) there with the runtime's authority."""
    code = f", exit code {block.exit_code}" if block.exit_code is not None else ""
    art = f", artifact:{block.artifact.hash}" if block.artifact is not None else ""
    kept = f" {{{facts}}}" if facts else ""
    name = "?" if block.name is None else tool_ref(block.name)  # (an answer in a group has its call's)
    return (f"[masked] result of call {call_ref(block.call_id)} ({name}): "
            f"{block.status}{code}{kept}; {tokens} tokens hidden; raw: event://{run_id}/{position}{art}")


def _arguments(state: RunState, group: ToolGroup, call_id: str) -> str:
    _, calls = reply_as_shown(state.entries[group.fragment_id], None)  # as logged
    return next((a for c, _, a in calls if c == call_id), "")


def _facts(state: RunState, group: ToolGroup, slot: CallSlot) -> str:
    """The ids and unverified state a side effect's result named; nothing for a call that only
    reads (a listing's file hashes would make every stub long). Only then is the text loaded (a
    long one lives in the log): of an artifact-backed payload, the preview the event keeps."""
    assert slot.answer_id is not None
    if not writes(slot.name, _arguments(state, group, slot.call_id)):
        return ""
    block = next(b for b in state.entries[slot.answer_id].fragment.content if isinstance(b, ToolResultBlock))
    return kept_facts("\n".join([block.text, *(b.text for b in block.blocks if isinstance(b, TextBlock))]))


def mask_text(state: RunState, group: ToolGroup, slot: CallSlot) -> tuple[ToolResultBlock, str, str]:
    """(the raw answer's block, the stub that replaces it, the facts it keeps): the planner prices
    this stub and the fold writes it."""
    assert slot.answer_id is not None and slot.answer_position is not None
    raw = state.entries[slot.answer_id].head
    block = next(b for b in raw.content if isinstance(b, ToolResultBlock))
    facts = _facts(state, group, slot)
    return block, mask_stub(state.run_id, block, slot.answer_position, raw.token_count, facts), facts


def stub_trust(state: RunState, slot: CallSlot, facts: str) -> Trust:
    """The runtime's, unless the stub quotes what the result said (its facts): then the result's
    own, if lower (a tool's words do not rise to runtime trust by being masked)."""
    assert slot.answer_id is not None
    raw: Trust = state.entries[slot.answer_id].trust
    return raw if facts and TRUST_RANK[raw] < TRUST_RANK["runtime"] else "runtime"
