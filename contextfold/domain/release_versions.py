"""Which stored events a newer contextfold wrote: a type, or a version of a type, this release
does not know.

Why apart from the event classes: a read that cannot parse a row must tell two things apart
that look alike to a schema, a damaged row (an :class:`~contextfold.domain.errors.IntegrityError`)
and a row that a later release wrote on purpose (upgrade to read it; nothing is wrong with the
log). Only the second asks for an upgrade, so the test is strict: the row's topic names a type
this release does not have, or a version above the one it writes, and its JSON says the same
type and version (:func:`newer_release_event`); or every part of the row this release refuses is
one a later release may add without a new event version (:func:`newer_release_parts`): an
optional field is added so (``DocumentBlock.duration_ms``, ``ToolSpec.strict``: left out of the
JSON when None), a block type, a value of an open vocabulary (:data:`OPEN_LITERALS`), a
reasoning's provider tag and the kind of a reasoning item (``raw["type"]``: a provider adds kinds
of block, a release learns to send them back; a kind this release knows, under another provider,
is no new value and stays damage).
Anything else that fails to parse is damage, as before: a known field of the wrong type or
missing (a renamed key is an unknown one and a missing one), JSON that does not parse, a tag, a
key or a value that no release could have written.

Which values a later release may add without a new event version: a class version marks a change
an old row must be upcast through (DESIGN.md, section 2); a value added to a field changes no
old row, so it needs none, and the rows that carry it are a newer release's. That holds for the
fields whose values describe (what a piece of evidence is, an image's detail, a plan step's
status, how a compaction cut the history: a later release may add a mode, a status, a kind).
Not for the closed sets the design fixes, where a new value would be a new contract, not an
addition: trust (the fragment contract's four levels, "exactly", and the authority order dedupe
ranks), a tool output's ``origin`` (workspace or external only: content never declares itself
runtime or user, so an ``origin`` outside those is damage whatever its hash says), a hand-off's
``mode`` (the event is hand-off or resume; another kind of hand-over would be a new event type),
the event and block tags (new ones are new types, named as such) and ``v`` (a new version is in
the row's topic, :func:`newer_release_event`).

A schema alone cannot tell an optional key whose name a bad disk or a hand edit changed
(``exit_code`` read as ``exit_codf``) from a newer release's field: the store draws that line
with the row's chain hash (``EventReads._parse``), which such a change breaks.
"""

from __future__ import annotations

import functools
import json
import re
from typing import get_args

from pydantic import BaseModel, TypeAdapter, ValidationError

from contextfold.domain.event_values import ImageBlock, PlanStep
from contextfold.domain.events import AnyEvent, EvidenceRetrieved, HistoryCompacted
from contextfold.domain.reasoning import ITEM_KIND_ERROR, KNOWN_ITEM_KINDS

__all__ = ["CURRENT_VERSIONS", "EVENT_CLASSES", "OPEN_LITERALS", "newer_release_event",
           "newer_release_parts"]

EVENT_CLASSES: tuple[type[BaseModel], ...] = get_args(get_args(AnyEvent)[0])
"""The members of the event union: what an append accepts, and the types this release reads."""

CURRENT_VERSIONS: dict[str, int] = {
    member.model_fields["type"].default: member.model_fields["v"].default for member in EVENT_CLASSES
}
"""Event type -> the class version this release writes (older ones it upcasts on read)."""

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
"""A field name a release could add: the log's keys are all snake_case ASCII (they are Python
field names), so a key outside it (a flipped bit, a hand edit) is damage whatever its hash says."""
_VALUE = re.compile(r"^[a-z][a-z0-9]*(?:[_-][a-z0-9]+){0,15}$")
"""A tag or an open field's value a release could add: lowercase ASCII words joined by ``_`` or
``-``. Wider than :data:`_NAME` because values are not Python names and the log already holds
hyphenated ones (the reasoning tag ``openai-responses``): a newer provider's tag is as likely to be
``xai-responses`` as ``xai_responses``. Capitals, spaces, a leading digit or a dangling joiner no
release writes, so they stay damage."""
OPEN_LITERALS: tuple[tuple[type[BaseModel], str], ...] = (
    (EvidenceRetrieved, "source_kind"), (HistoryCompacted, "strategy"), (ImageBlock, "detail"),
    (PlanStep, "status"))
"""The fields of stored events whose set of values a later release may extend without a new
event version (the module's docstring: why these and not trust, ``origin`` or a hand-off's
``mode``): a row with a value of one of them this release does not know asks for an upgrade."""
_NAMED = 3
"""How many unknown parts a message names (the rest counted)."""


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


def newer_release_parts(etype: str, exc: ValidationError) -> str | None:
    """What a stored event of the known type ``etype`` holds that this release does not know, on
    one line (``field content.0.document.frame_rate``, ``type 'video' at content.0``,
    ``status 'cancelled' at steps.0.status``), when that is all ``exc`` (its validation)
    refused: each error is an unknown field (``extra="forbid"``), an unknown discriminator tag,
    or an unknown value of an :data:`OPEN_LITERALS` field, named as a release names things.
    None when any error is of another kind (a known field missing or of the wrong type, JSON
    that does not parse): damage. Pure: the caller still checks that the row's bytes are the
    ones written (its chain hash)."""
    parts: list[str] = []
    for error in exc.errors(include_url=False):
        loc, ctx = error["loc"], error.get("ctx", {})
        if loc[:1] == (etype,):  # the event union's own tag: the message names the type
            loc = loc[1:]
        if error["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str) and _NAME.match(loc[-1]):
            parts.append(f"field {'.'.join(map(str, loc))}")
        elif (error["type"] == "literal_error" and loc and (loc[-1], ctx.get("expected")) in _open_values()
              and isinstance(value := error.get("input"), str) and _VALUE.match(value)):
            parts.append(f"{loc[-1]} {value!r} at {'.'.join(map(str, loc))}")
        elif error["type"] == "union_tag_invalid" and _VALUE.match(tag := str(ctx.get("tag"))):
            discriminator = str(ctx.get("discriminator", "")).strip("'")
            parts.append(f"{discriminator} {tag!r} at {'.'.join(map(str, loc)) or 'the event'}")
        elif (error["type"] == ITEM_KIND_ERROR and isinstance(kind := ctx.get("kind"), str)
              and _VALUE.match(kind) and kind not in KNOWN_ITEM_KINDS):
            parts.append(f"type {kind!r} at {'.'.join(map(str, loc))}.{ctx.get('item')}.raw")
        else:
            return None
    if not parts:
        return None
    more = f" and {len(parts) - _NAMED} more" if len(parts) > _NAMED else ""
    return ", ".join(parts[:_NAMED]) + more


@functools.cache
def _open_values() -> frozenset[tuple[str, object]]:
    """``(field name, the values it takes as pydantic words them in an error)`` for each of
    :data:`OPEN_LITERALS`: a refused value is of an open field when its error names both (the
    values too, so a closed field of the same name elsewhere is not taken for it). Made by
    validating a value no field takes, so the wording is pydantic's own whatever its version."""
    out: set[tuple[str, object]] = set()
    for model, name in OPEN_LITERALS:
        try:
            TypeAdapter[object](model.model_fields[name].annotation or object).validate_python(object())
        except ValidationError as exc:
            out.add((name, exc.errors(include_url=False)[0].get("ctx", {}).get("expected")))
    return frozenset(out)
