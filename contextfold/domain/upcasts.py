"""Upcasting: a stored event of an older class version lifted to the current one, on the JSON.

:data:`UPCASTERS` maps ``(type, version)`` to a function that lifts the stored dict one version
up; :func:`upcast` applies them until none matches, which is the class version (eventsourcing's
upcasting idea, done on the JSON so the models stay plain). Apart from
:mod:`contextfold.domain.events` so the versions a release reads are listed in one place: the
event classes refuse any version but their own (a newer release's, or nonsense), so a version
that is neither current nor lifted here is a validation error, never read under another schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["UPCASTERS", "upcast"]


def _run_started_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    out["encoding"] = out.pop("tokenizer", None)
    out["v"] = 2
    return out


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("run_started", 1): _run_started_v1_to_v2,
}


def upcast(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a stored event's JSON object) lifted to its class's current version."""
    # a type or version that is an object or array is no key (validation then says what is wrong)
    while (isinstance(kind := data.get("type", ""), str) and isinstance(v := data.get("v", 1), int)
           and (step := UPCASTERS.get((kind, v))) is not None):
        data = step(data)
    return data
