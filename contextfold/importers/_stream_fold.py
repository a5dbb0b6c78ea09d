"""What every provider's stream fold is (:mod:`.provider_stream`): the events of one streamed
response, folded as they arrive into the final response :func:`.provider_reply.read_response`
reads, and the judgement of what arrived whole.

Why a fold of its own and not the SDKs' accumulators: they are not all there (google-genai has
none), they import the SDK (a dict from an SSE line must do), and OpenAI's re-dumps its whole
snapshot on every chunk (a cost that grows with the response: ``scripts/measure_stream_fold.py``).
Text and arguments arrive in pieces: they are kept as lists of pieces and joined once.
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.importers._json import Bad, JsonPath

__all__ = ["Fold", "Pieces", "merged", "parses", "require_index"]


class Fold:
    """One provider's stream, folded as it arrives.

    ``add`` folds one event (plain JSON values, :func:`.provider_reply._plain`'s); ``body(False)``
    is the final response as read_response takes it, read only when ``missing()`` is empty and
    ``ended()``; ``body(True)`` the response of the parts that came whole (a call whose arguments
    finished, a signed thinking block, a done reasoning item; all text received), its stop reason
    withheld, for the partial reply of :class:`~contextfold.domain.errors.StreamIncompleteError`."""

    provider = ""
    limits: frozenset[str] = frozenset()
    """The stop reasons that say the provider cut the response at its output limit."""

    def __init__(self) -> None:
        self.failure: str | None = None
        """The provider's own error event (a stream that failed), in its words."""

    def add(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def ended(self) -> bool:
        """The provider said the response ended (its stop reason, its last event)."""
        raise NotImplementedError

    def stop(self) -> str | None:
        """The provider's stop reason as read_response names it, None while it has given none."""
        raise NotImplementedError

    def missing(self) -> list[str]:
        """What did not arrive whole, one phrase each; empty when the response is whole."""
        raise NotImplementedError

    def body(self, whole: bool) -> dict[str, Any]:
        raise NotImplementedError


class Pieces:
    """A string that arrives in pieces (text, arguments, partial JSON), joined once when read:
    a ``+=`` per delta copies the whole string so far each time."""

    __slots__ = ("_parts",)

    def __init__(self, first: str = "") -> None:
        self._parts = [first] if first else []

    def add(self, piece: Any, path: JsonPath) -> None:
        if not isinstance(piece, str):
            raise Bad(path, f"expected a string, got {type(piece).__name__}")
        if piece:
            self._parts.append(piece)

    def __bool__(self) -> bool:
        return bool(self._parts)

    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""


def parses(arguments: Any) -> bool:
    """``arguments`` are whole JSON: a closed object cannot be the start of a longer one, so a
    call whose streamed arguments parse finished writing them (read_response's own test of a call
    cut at the output limit). None written yet (``""``) is not whole: the caller says when the
    call's end says it is."""
    if not isinstance(arguments, str):
        return False
    try:
        json.loads(arguments)
    except ValueError:
        return False
    return True


def merged(old: Any, new: Any) -> Any:
    """A field of a delta the fold does not know, merged as the SDKs' ``accumulate_delta`` does:
    strings joined, lists extended, objects merged, anything else replaced."""
    if isinstance(old, str) and isinstance(new, str):
        return old + new
    if isinstance(old, list) and isinstance(new, list):
        return old + new
    if isinstance(old, dict) and isinstance(new, dict):
        out = dict(old)
        for key, value in new.items():
            out[key] = merged(out[key], value) if key in out else value
        return out
    return new


def require_index(holder: dict[str, Any], key: str, path: JsonPath) -> int:
    value = holder.get(key, 0 if key == "index" else None)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Bad((*path, key), f"expected {key!r} to be an index, got {value!r}")
    return value
