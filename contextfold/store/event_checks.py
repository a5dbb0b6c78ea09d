"""An event as a read of its stored JSON gives it: the check an append makes before it writes.

Why: ``model_copy(update=...)`` and ``model_construct`` (the usual ways to "edit" a frozen event)
skip pydantic's checks, so an event that breaks them (two calls of one id in one response)
reached the log, and from then on every read of the run failed ("stored event does not parse"):
the log is append-only, so the run could never be built, replayed or audited again. Parsing the
canonical JSON back with the reader's own adapter is the check a read makes, so what it passes
every read takes; it costs about what the dump did (pydantic-core, in Rust: a few microseconds an
event), a small part of an append. Pure: bytes in, an event or a typed error out.
"""

from __future__ import annotations

from pydantic import ValidationError

from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import EVENT_ADAPTER, AnyEvent, is_vouched_record
from contextfold.store.driver_errors import one_line

__all__ = ["as_read", "why_not_parsed"]


def why_not_parsed(exc: ValueError) -> str:
    """Why an event did not parse (stored, or about to be stored), on one line and without its
    text: pydantic's report spans lines and quotes the input (a slice of a tool output, perhaps
    a secret)."""
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(map(str, first["loc"])) or "the event"
        return f"{exc.error_count()} error(s), the first at {where}: {first['msg']}"
    return one_line(exc)


def as_read(index: int, event: AnyEvent, body: bytes) -> AnyEvent:
    """The event a read of ``body`` (``event``'s canonical JSON, the ``index``-th of a batch)
    gives, or an :class:`InvalidInputError` naming the event when a read could not parse it.

    The parsed event is the one recorded, so the writer's head and the caller hold what a reload
    holds (a tuple where a constructed event held a list). A record made by
    ``ContextBuilt.with_manifest_json`` was validated when made and is kept as it is
    (``is_vouched_record``): a long run's manifest is megabytes, and parsing it again cost more
    than its append."""
    if is_vouched_record(event):
        return event
    try:
        return EVENT_ADAPTER.validate_json(body)
    except ValidationError as exc:
        raise InvalidInputError(
            f"event {index} ({event.type}) does not validate: {why_not_parsed(exc)} (an event made "
            "with model_construct or changed with model_copy(update=...) is not checked; make it "
            "with its class, or with model_validate); nothing was written") from exc
