"""Secrets masked in what the audit commands show a person: ``events``' lines, ``show``'s
content, ``why``'s matches.

Pure. Why: the log keeps raw content (it is the source of truth, and the builder redacts it
before any request), but ``events``, ``show RUN e27`` and ``why`` printed it as logged, so an
auditor pasting their output into an incident ticket pasted the API key a tool result held.
They now mask it with the builder's default rules (:mod:`contextfold.projections.redact`: the
same ``[REDACTED:<rule>]`` a request holds, JSON escapes included), and ``--reveal`` shows it
raw. What is exported to be read back stays faithful: ``events --json`` (re-imported, its
recorded builds replay to their hashes) and an artifact that is not text (an image's bytes).

The default policy, not the run's build config: a display masks what any build would, without
reading a record first; the rules a config switches off (``redaction_disabled``) are still
masked here, which shows less, never more.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from contextfold.domain.events import EVENT_ADAPTER, AnyEvent
from contextfold.projections.redact import RedactionPolicy
from contextfold.projections.redact_escapes import redact_json_escapes

__all__ = ["SHOWN_POLICY", "masked", "masked_event", "masked_value"]

SHOWN_POLICY = RedactionPolicy()
"""Every built-in rule; vendors' documented example keys kept (they are public)."""

_NOT_TEXT = frozenset({"type", "v", "hash", "media_type", "call_id"})
"""An event's keys whose values are its schema's or the store's, never logged text."""


def masked(text: str) -> str:
    """``text`` with each secret replaced by ``[REDACTED:<rule>]``, as a request would hold it
    (a secret spelled with JSON escapes, in a tool's JSON output, too)."""
    return redact_json_escapes(text, SHOWN_POLICY).text


def masked_value(value: Any) -> Any:
    """``value`` (JSON-like: strings, lists, dicts) with every string masked, keys kept."""
    if isinstance(value, str):
        return masked(value)
    if isinstance(value, dict):
        return {key: item if key in _NOT_TEXT else masked_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [masked_value(item) for item in value]
    return value


def masked_event(event: AnyEvent) -> AnyEvent:
    """``event`` with the secrets its text holds masked (the same event when it holds none), for
    a line that shows it; never appended or hashed."""
    dumped = event.model_dump(mode="json")
    shown = masked_value(dumped)
    if shown == dumped:
        return event
    try:
        return EVENT_ADAPTER.validate_python(shown)
    except ValidationError:  # a placeholder a field's rules refuse: the caller masks its line too
        return event
