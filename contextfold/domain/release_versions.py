"""Which stored events a newer contextfold wrote: a type, or a version of a type, this release
does not know.

Why apart from the event classes: a read that cannot parse a row must tell two things apart
that look alike to a schema, a damaged row (an :class:`~contextfold.domain.errors.IntegrityError`)
and a row that a later release wrote on purpose (upgrade to read it; nothing is wrong with the
log). Only the second asks for an upgrade, so the test is strict: the row's topic names a type
this release does not have, or a version above the one it writes, and its JSON says the same
type and version. Anything else that fails to parse is damage, as before.
"""

from __future__ import annotations

import json
from typing import get_args

from pydantic import BaseModel

from contextfold.domain.events import AnyEvent

__all__ = ["CURRENT_VERSIONS", "EVENT_CLASSES", "newer_release_event"]

EVENT_CLASSES: tuple[type[BaseModel], ...] = get_args(get_args(AnyEvent)[0])
"""The members of the event union: what an append accepts, and the types this release reads."""

CURRENT_VERSIONS: dict[str, int] = {
    member.model_fields["type"].default: member.model_fields["v"].default for member in EVENT_CLASSES
}
"""Event type -> the class version this release writes (older ones it upcasts on read)."""


def newer_release_event(topic: str, body: bytes) -> tuple[str, int] | None:
    """``(type, version)`` when the stored row (``topic``: ``type@version``; ``body``: its JSON)
    holds an event of a newer release, else ``None`` (known, or not a release's event at all)."""
    etype, _, version_text = topic.partition("@")
    if not version_text.isdigit() or int(version_text) < 1:
        return None
    version = int(version_text)
    known = CURRENT_VERSIONS.get(etype)
    if known is not None and version <= known:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") != etype or data.get("v", 1) != version:
        return None
    return etype, version
