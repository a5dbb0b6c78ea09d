"""A tool group calling a tool the request does not offer, shown as the runtime's note of it.

Why: a provider rejects a call to a tool the request does not declare, and a tool the run's
policy does not allow is never declared. Such a group used to be left out whole (``stale``),
and with it what it did and what it means now: a refusal the model should not retry, a deploy
whose id a rollback needs, a file it already changed. Now the group is shown as one user
message: the runtime's line saying the tools are not offered, the record of the calls (the model's
words beside them, the arguments as logged or redacted) as a data block, then each result with
its runtime line (naming the call by its id only), as it would follow the call. Nothing of it is
a call, so nothing needs the tool declared, and the policy still holds: the note says the tool
is not offered.

Pricing: the line and the record are the group head's in such a build (``fragment_facts.BuildCtx``
prices them from these functions, the record framed as a note); the results keep their own.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from contextfold.domain.events import TextBlock
from contextfold.domain.fragments import ContextFragment, ToolCallBlock, Trust
from contextfold.projections.entries import FragmentEntry, Response

__all__ = ["RECORD_TRUST", "not_offered_header", "not_offered_names", "not_offered_record", "reply_as_shown"]


def not_offered_names(names: Collection[str], blocked: Collection[str]) -> tuple[str, ...]:
    """The names of ``names`` the request does not offer, sorted (none: the group is a call)."""
    return tuple(sorted({n for n in names if n in blocked}))


def not_offered_header() -> str:
    """The runtime's line before the record. It names no tool: the names are the model's text (a
    call to a tool outside an allow-list can be named anything, line breaks and a forged
    "[runtime] POLICY UPDATE" included), and runtime authority is for the runtime's words. The
    record, a data block, names them."""
    return ("[runtime] TOOL_NOT_OFFERED: this request does not offer the tools the calls below used. "
            "They are a record of what the agent did earlier, not calls to repeat.")


RECORD_TRUST: Trust = "external"
"""The trust the record's data block shows: it holds the model's words and arguments, which can
quote anything it read, so it is not shown as the runtime's."""


def not_offered_record(said: str, calls: Sequence[tuple[str, str, str]]) -> str:
    """The record of a reply that said ``said`` and made ``calls`` (call id, name, arguments as
    shown), shown as a data block: the model's words and arguments are not the runtime's."""
    lines = [f"The agent wrote: {said}"] if said else []
    lines += [f"call {call_id}: {name} {arguments}" for call_id, name, arguments in calls]
    return "\n".join(lines)


def reply_as_shown(entry: FragmentEntry, redacted: ContextFragment | None
                   ) -> tuple[str, tuple[tuple[str, str, str], ...]]:
    """A model reply's text and calls (call id, name, arguments) as a request shows them: from
    its ``redacted`` view when redaction changed it, else as logged. The layout's calls and the
    note's price are read from it alike."""
    content = entry.content
    if redacted is None and isinstance(content, Response):
        return content.text, content.calls
    blocks = (entry.fragment if redacted is None else redacted).content
    return ("\n".join(b.text for b in blocks if isinstance(b, TextBlock)),
            tuple((b.call_id, b.name, b.arguments) for b in blocks if isinstance(b, ToolCallBlock)))
