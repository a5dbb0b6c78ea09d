"""The run log: append-only event streams, one per run, with a hash chain and artifacts.

Write path (``append``):

1. the run id and the batch are checked (limits, typed errors), each event's canonical JSON
   parsed back as a read will parse it (:mod:`.event_checks`: an event made with
   ``model_construct`` skipped pydantic's checks);
2. the batch is checked against the write-side pairing rules
   (:class:`~contextfold.domain.log.PairingState`) as of the run's head;
3. payloads above ``artifact_threshold`` move to the artifact table
   (content-addressed by blake3, so the same payload is stored once); the
   event keeps the ref, the size and a preview;
4. each event gets its chain hash; the batch is inserted in ONE transaction
   at positions head+1..head+n (``append_new_runs``: several new runs in one,
   as an import writes a file).

Optimistic concurrency comes from eventsourcing's unique
``(originator_id, originator_version)``: two writers that both think the head
is N both try to write N+1; the database lets exactly one win. The loser gets
:class:`ConcurrencyConflictError` when it passed ``expected_version``, or,
when it asked to append "at the end", catches up, re-checks the pairing rules
against the new head and retries. Artifacts are written before the events
(idempotent inserts), so an event never points at a missing blob; a blob
whose event lost a race is harmless and re-used on retry.

Stored record: ``topic`` = ``"{type}@{v}"``, ``state`` = 64 hex chars of the
chain hash followed by the event's canonical JSON, so a reload parses the JSON
once (in Rust, via pydantic) and ``verify`` re-hashes the exact stored bytes.
A state of 32 KiB or more, a build's record of 1 KiB or more, and a text artifact, are
stored as a zstd frame of those bytes (:mod:`contextfold.store.compression`); a run's later
large states as deltas of its last such frame (:mod:`contextfold.store.deltas`). With a cipher
key, ``state`` and artifact data are AES-GCM envelopes of what would otherwise be stored
(:mod:`contextfold.store.crypto`); run ids and topics stay clear.

Input limits (:class:`StoreLimits`, typed :class:`InputLimitError`, checked
for the whole batch before anything is written): canonical JSON size of one
event after artifact offload (a build's record has a bound of its own), artifact
size, JSON nesting depth, run id charset and length, events per append.
"""

from __future__ import annotations

import functools
import random
import time
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import blake3
from eventsourcing import persistence as es

from contextfold.domain.errors import (
    ConcurrencyConflictError,
    CryptoError,
    EncodingConflictError,
    HandleNotPicklableError,
    InputLimitError,
    InvalidInputError,
    ProtocolError,
    RunExistsError,
    StoreError,
)
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    EvidenceRetrieved,
    FileRead,
    ToolResult,
    canonical_json,
    known_json_depth,
)
from contextfold.domain.log import RecordedEvent, chain_hash
from contextfold.domain.release_versions import EVENT_CLASSES
from contextfold.store.backends import (
    EVENTS_TABLE,
    SQLiteBackend,
    display_url,
    open_backend,
    translate_errors,
)
from contextfold.store.citations import Prepared, check_media_type, checked_citations
from contextfold.store.compression import pack_artifact
from contextfold.store.crypto import ENV_KEY, Keyring, is_encrypted
from contextfold.store.deltas import BASE_CACHE_BYTES, DeltaWriter, KeyframesRead
from contextfold.store.event_checks import as_read
from contextfold.store.event_reads import (
    RunInfo,
    VerifyReport,
    bulk_allocation,
    check_run_id,
)
from contextfold.store.event_times import EventTimes
from contextfold.store.head_check import ExpectedHead, FoldedTails, StaleHeadError, tail_digest
from contextfold.store.limits import StoreLimits, json_depth
from contextfold.store.media import materialize
from contextfold.store.run_heads import HEADS_KEPT, RunHead, RunHeads, first_record_encoding
from contextfold.store.store_url import store_url_from_env, worker_reopen_advice
from contextfold.store.tenants import bind_sqlite_tenant

__all__ = [
    "DEFAULT_ARTIFACT_THRESHOLD",
    "EventStore",
    "RunInfo",
    "StoreLimits",
    "VerifyReport",
    "bulk_allocation",
    "store_url_from_env",
]

DEFAULT_ARTIFACT_THRESHOLD = 64 * 1024
PREVIEW_CHARS = 2048
MAX_BATCH = 10_000
_APPEND_RETRIES = 100




class _ClosedBackend:
    """What a closed store's backend becomes: every use is a ``StoreError`` naming the store,
    where the driver's pool raised its own bare error (``ConnectionPoolClosedError``)."""

    def __init__(self, url: str) -> None:
        self._url = url

    def close(self) -> None:  # closing twice is harmless
        pass

    def __getattr__(self, name: str) -> typing.Any:
        raise StoreError(f"the store {display_url(self._url)} is closed: open it again to use it")


@dataclass
class _Staged:
    """One run's batch, staged for :meth:`EventStore._write`."""

    run_id: str
    head: RunHead
    undo: typing.Any
    stored: list[es.StoredEvent] = field(default_factory=list)
    recorded: list[RecordedEvent] = field(default_factory=list)
    artifacts: list[tuple[str, int, str, bytes]] = field(default_factory=list)
    learned: list[typing.Callable[[], None]] = field(default_factory=list)
    bases: set[ExpectedHead] = field(default_factory=set)
    """The keyframe rows its deltas were made against, checked by the insert (:mod:`.deltas`)."""
    times: Sequence[datetime | None] | None = None
    """Each event's time as its source says (an import): None for an event without one; no list:
    every event is recorded at the append's time (:mod:`.event_times`)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _preview(text: str) -> str:
    return text[:PREVIEW_CHARS]



class EventStore(RunHeads, EventTimes):
    """One store (a SQLite file or a PostgreSQL database/schema) holding many runs."""

    def __init__(self, url: str | None = None, *, create_schema: bool = True,
                 artifact_threshold: int = DEFAULT_ARTIFACT_THRESHOLD,
                 keyring: Keyring | None = None, tenant: str | None = None,
                 limits: StoreLimits | None = None, delta_frames: bool = True,
                 must_exist: bool = False, clock: Callable[[], datetime] | None = None) -> None:
        """``keyring``: encrypt new writes and decrypt envelopes (None: plain store).
        ``tenant``: scope every read and write to one tenant (:mod:`.tenants`).
        ``must_exist``: a store not made yet is a StoreConfigError, nothing created (a mistyped
        path, schema or tenant; :func:`~contextfold.store.backends.open_backend`).
        ``delta_frames``: write a run's large states as deltas of its last keyframe
        (:mod:`.deltas`); off, each is a frame of its own, readable by older versions.
        ``clock``: what an append reads its events' time from (an aware datetime; default: the
        system's clock in UTC). Read once per append, in the store only: a test passes its own, and
        no fold or build ever reads one (:mod:`.event_times`)."""
        self.url = store_url_from_env(url)
        self.tenant = tenant
        self.keyring = keyring
        self.limits = limits or StoreLimits()
        self.backend = open_backend(self.url, tenant=tenant, provision=create_schema, must_exist=must_exist)
        self.clock: Callable[[], datetime] = clock or _utc_now
        self._times_kept: bool | None = None
        self.artifact_threshold = artifact_threshold
        self._init_heads()
        self._deltas = DeltaWriter(cache_bytes=BASE_CACHE_BYTES if delta_frames else 0)
        self._keyframes_read = KeyframesRead()
        self._folded_tails = FoldedTails(HEADS_KEPT)
        self._order_column = "rowid" if isinstance(self.backend, SQLiteBackend) else "notification_id"
        self._plain_checked = False
        if create_schema:
            self.create_schema()
        if isinstance(self.backend, SQLiteBackend):
            try:
                bind_sqlite_tenant(self.backend, tenant, create=create_schema)
            except BaseException:
                self.backend.close()
                raise

    # ------------------------------------------------------------ lifecycle

    def create_schema(self) -> None:
        """Create the tables if missing. Safe to call from many workers at once."""
        self.backend.create_schema()

    def close(self) -> None:
        """Close the connections; the store is not usable after (a clear ``StoreError`` says so)."""
        backend, self.backend = self.backend, _ClosedBackend(self.url)  # type: ignore[assignment]
        backend.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> typing.NoReturn:
        """Refused: its connection pool is this process's (``HandleNotPicklableError``)."""
        raise HandleNotPicklableError("EventStore", worker_reopen_advice(
            self.url, f"open the store in the worker from its URL, EventStore({display_url(self.url)!r})"))

    # ------------------------------------------------------------ write

    def append(self, run_id: str, events: Sequence[AnyEvent], *,
               expected_version: int | None = None) -> list[RecordedEvent]:
        """Append ``events`` to ``run_id`` in one transaction; returns them as recorded.

        ``expected_version``: the version the caller last saw. If another writer
        got there first, raises :class:`ConcurrencyConflictError` and writes
        nothing. Without it, the batch goes at the current end (re-checked).
        """
        check_run_id(run_id)
        if expected_version is not None and (isinstance(expected_version, bool)
                                             or not isinstance(expected_version, int)
                                             or expected_version < 0):
            # "4" or -1 never equals a version: a ConcurrencyConflictError saying another writer
            # moved past it sent the caller into a retry loop that could never succeed
            raise InvalidInputError(
                f"expected_version must be a version (an integer >= 0), got {expected_version!r}")
        if not events:
            return []
        if len(events) > self.limits.max_batch:
            raise InputLimitError(
                f"{len(events)} events in one append; the limit is {self.limits.max_batch}")
        self._refuse_plain_beside_encrypted()
        prepared = checked_citations(self, self._prepare_all(events), self._prepare)
        with self._writing([run_id]):
            return self._append_prepared(run_id, prepared, expected_version)

    def _append_prepared(self, run_id: str, prepared: list[Prepared],
                         expected_version: int | None) -> list[RecordedEvent]:
        fresh = run_id not in self._heads
        for attempt in range(_APPEND_RETRIES):
            head = self._head(run_id)
            if expected_version is not None and expected_version != head.version:
                head = self._catch_up(run_id)
                moved_back = expected_version < head.version and not self._still_ends_at(run_id, head)
                if moved_back:
                    # behind what this store saw because the log moved back under it (a restored
                    # backup; one row read tells): read the run again from its start
                    head = self._read_again(run_id)
                fresh = True
                if expected_version > head.version and not moved_back:  # no writer moves a run
                    raise InvalidInputError(  # back: the caller's version is not one it read here
                        f"expected_version {expected_version} is ahead of run {run_id!r}, which is at "
                        f"version {head.version}: pass the version you read (Run.state().version)")
                if expected_version != head.version:
                    raise ConcurrencyConflictError(run_id, expected_version)
            try:
                return self._try_append(run_id, head, prepared)
            except StaleHeadError as exc:
                # The log does not end where this store saw it, or no longer holds a keyframe
                # the batch's deltas were made against (a restored backup): read the run again,
                # from its start, and go on at its real end.
                self._read_again(run_id)
                fresh = True
                if expected_version is not None:  # read from the log as it was: reload and retry
                    raise ConcurrencyConflictError(run_id, expected_version) from exc
            except (ProtocolError, InvalidInputError, EncodingConflictError):
                # Judged against a cached head: another writer may have issued or
                # answered the call, or appended events that move the batch's positions
                # (a record's turn and folded version are judged by its position).
                # Re-judge once against the stored head, checked first: a log that moved back
                # under the cached one (a restored backup) no longer holds what it judged by.
                if fresh:
                    raise
                self._fresh_head(run_id)
                fresh = True
            except es.IntegrityError as exc:
                if expected_version is not None:
                    self._catch_up(run_id)
                    raise ConcurrencyConflictError(run_id, expected_version) from exc
                # Lost a race for the end of the run: back off with jitter so hot
                # writers spread out, then catch up and go again.
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                self._catch_up(run_id)
                fresh = True
        raise ConcurrencyConflictError(run_id, self._head(run_id).version)

    def _prepare_all(self, events: Sequence[AnyEvent], as_logged: bool = False) -> list[Prepared]:
        for i, e in enumerate(events):
            if not isinstance(e, EVENT_CLASSES):
                raise InvalidInputError(
                    f"event {i}: expected an event object (UserInput, ModelResponse, ToolResult, ...), "
                    f"got {type(e).__name__} (contextfold.domain.events.event_from_json reads JSON)")
        return [self._prepare(i, e, as_logged) for i, e in enumerate(events)]

    def _try_append(self, run_id: str, head: RunHead, prepared: list[Prepared]) -> list[RecordedEvent]:
        self._check_tail(run_id, head)
        staged = self._stage(run_id, head, prepared)
        self._write([staged])
        return staged.recorded

    def _stage(self, run_id: str, head: RunHead, prepared: list[Prepared]) -> _Staged:
        """Pairing applied (undoable), chain hashes and stored rows of a batch; nothing written."""
        self._check_encoding(run_id, head, (p.event for p in prepared))
        pairing = head.pairing
        undo = pairing.apply_batch([(p.event, head.version + i) for i, p in enumerate(prepared, start=1)])
        staged = _Staged(run_id, head, undo)
        if not head.version:  # the log holds none of its rows: none of the writer's keyframes
            self._deltas.forget(run_id)
        prev = head.last_hash
        for offset, (_, blobs, body, event) in enumerate(prepared, start=1):
            position = head.version + offset
            digest = chain_hash(run_id, position, prev, body)
            topic = f"{event.type}@{event.v}"
            packed = self._deltas.pack(run_id, topic, position, digest.encode("ascii") + body)
            state = packed.state if self.keyring is None else self.keyring.encrypt(packed.state)
            if packed.learn is not None:
                staged.learned.append(functools.partial(packed.learn, state))
            if packed.base is not None:
                staged.bases.add(ExpectedHead(run_id, *packed.base))
            staged.stored.append(es.StoredEvent(run_id, position, topic, state))
            staged.recorded.append(RecordedEvent(run_id, position, event, digest))
            staged.artifacts.extend(blobs)
            prev = digest
        return staged

    def _write(self, batches: list[_Staged]) -> None:
        """Insert staged batches' events in ONE transaction, after their artifacts (idempotent
        inserts in a transaction of their own: a blob whose events then failed is unused, never
        missing); then advance their heads."""
        def undo() -> None:
            for b in batches:
                b.head.pairing.undo(b.undo)

        try:
            artifacts = [row for b in batches for row in b.artifacts]
            if artifacts:
                self.backend.put_artifacts(artifacts)
            heads = [*(ExpectedHead(b.run_id, b.head.version, b.head.tail) for b in batches
                       if b.head.version and b.head.tail is not None), *(h for b in batches for h in b.bases)]
            times = self._time_rows([(b.run_id, [e.originator_version for e in b.stored], b.times)
                                     for b in batches])
            self.backend.recorder.insert_events([e for b in batches for e in b.stored], heads=heads,
                                                times=times)
        except (es.IntegrityError, StaleHeadError):
            undo()
            raise  # a concurrent writer took these positions: handled by the caller
        except (es.PersistenceError, es.ConnectionPoolClosedError, es.ConnectionNotFromPoolError) as exc:
            undo()
            with translate_errors(f"append to {batches[0].run_id!r}", self.url):
                raise exc
        except BaseException:
            undo()
            raise
        for b in batches:
            self._keep_head(b.run_id, RunHead(b.head.version + len(b.stored), b.recorded[-1].hash,
                                            b.head.pairing, tail_digest(b.stored[-1].state),
                                            first_record_encoding(b.head.encoding,
                                                                  (r.event for r in b.recorded))))
            for commit in b.learned:  # keyframes and deltas the log now holds
                commit()

    def append_new_runs(self, runs: Sequence[tuple[str, Sequence[AnyEvent]]], *,
                        progress: typing.Callable[[int], None] | None = None,
                        artifacts: Sequence[tuple[bytes, str]] = (), logs: Collection[str] = (),
                        times: Mapping[str, Sequence[datetime | None]] | None = None) -> int:
        """Record several new runs in ONE transaction: all of them or, on any error (a refused
        event, a run that exists, a lost connection, Ctrl-C), none. For an import of a
        multi-run file or of a run longer than one append: written batch by batch, an
        interrupted import left the runs before it (or the first part of a long run) behind.
        Not bounded by ``max_batch``: the caller holds the whole batch in memory already.
        ``artifacts`` (data, media type) are stored before the runs, in a transaction of their
        own: the payloads an export carried for events that cite them by hash (``events --json
        --with-artifacts``); an import that fails after them leaves blobs no event cites
        (content-addressed: re-used by the next try), never an event without its blob.
        ``progress(n)`` is called as each run's ``n`` events are prepared (the long part: JSON,
        hashes, compression), for a progress bar. ``logs``: the runs whose events are a log
        (an events export), recorded as it held them (``media.materialize``'s ``as_logged``).
        ``times``: run id -> the time of each of its events as its source says (an import; None
        for an event its source gives none: none is recorded, none invented); a run not in it
        is recorded at the append's time, as :meth:`append` records.
        Returns the number of events written."""
        runs = list(runs)
        for run_id, _ in runs:
            check_run_id(run_id)
        self._refuse_plain_beside_encrypted()
        carried = [self._artifact_row(blake3.blake3(data).hexdigest(), len(data), media_type, data)
                   for data, media_type in artifacts]  # limits checked before anything is staged
        raw = {row[0]: data for row, (data, _) in zip(carried, artifacts, strict=True)}
        with self._writing([run_id for run_id, _ in runs]):
            staged: list[_Staged] = []
            try:
                for run_id, events in runs:
                    if not events:
                        continue
                    logged = run_id in logs
                    prepared = checked_citations(self, self._prepare_all(events, logged),
                                                 functools.partial(self._prepare, as_logged=logged), raw,
                                                 as_logged=logged)
                    head = self._fresh_head(run_id)
                    if head.version != 0:
                        raise RunExistsError(run_id, head.version)
                    if any(b.run_id == run_id for b in staged):  # named twice in the batch
                        raise ConcurrencyConflictError(run_id, 0)
                    given = None if times is None else times.get(run_id)
                    if given is not None and len(given) != len(events):
                        raise InvalidInputError(f"run {run_id!r}: {len(given)} times for {len(events)} "
                                                "events (one an event, None for an event without one)")
                    staged.append(self._stage(run_id, head, prepared))
                    staged[-1].times = given
                    if progress is not None:
                        progress(len(events))
            except BaseException:
                for b in staged:
                    b.head.pairing.undo(b.undo)
                raise
            if not staged:
                return 0
            staged[0].artifacts.extend(carried)
            try:
                self._write(staged)
            except es.IntegrityError as exc:  # another writer created one of the runs meanwhile
                for b in staged:
                    self._heads.pop(b.run_id, None)
                raise ConcurrencyConflictError(staged[0].run_id, 0) from exc
            return sum(len(b.stored) for b in staged)

    def _prepare(self, index: int, event: AnyEvent, as_logged: bool = False) -> Prepared:
        """Offload, check the limits, encrypt the blobs, parse the JSON back (:mod:`.event_checks`);
        returns the :class:`Prepared` event. Runs for the whole batch before anything is written."""
        try:
            event, blobs = self._offload(index, event, as_logged)
            body = canonical_json(event)
        except UnicodeEncodeError as exc:  # a lone surrogate: text that no UTF-8 can store
            bad = exc.object[exc.start:exc.end]
            raise InvalidInputError(
                f"event {index} ({event.type}) holds text that is not valid Unicode: "
                f"{', '.join(f'U+{ord(c):04X}' for c in bad)} (a lone surrogate, as decoding with "
                "errors='surrogateescape' leaves); decode tool output with errors='replace' or "
                "'backslashreplace'") from exc
        except ValueError as exc:  # pydantic-core's serializer stops near 255 levels, a bare ValueError
            if "depth" not in str(exc):
                raise
            raise InputLimitError(
                f"event {index} ({event.type}) nests JSON deeper than pydantic serialises (~250 "
                f"levels); the limit is {self.limits.max_depth}") from exc
        limits = self.limits
        limits.check_event_bytes(index, event.type, len(body))  # a build's record: its own bound
        known = known_json_depth(event)  # a build's record: bounded by the manifest's schema
        if (known is None or known > limits.max_depth) and (
                body.count(b"[") + body.count(b"{") > limits.max_depth):  # cheap pre-check
            depth = json_depth(body)
            if depth > limits.max_depth:
                raise InputLimitError(
                    f"event {index} ({event.type}) nests JSON {depth} levels deep; "
                    f"the limit is {limits.max_depth}")
        read = as_read(index, event, body)
        return Prepared(event, [self._artifact_row(*row) for row in blobs], body, read)

    def _refuse_plain_beside_encrypted(self) -> None:
        """A store without a key refuses to write where the latest event row is encrypted (one
        row read, once): a worker whose key was missing from its environment wrote secrets in
        plain text into an encrypted store's new runs, and said nothing."""
        if self.keyring is not None or self._plain_checked:
            return
        with translate_errors("read", self.url, reading=True):
            rows = self.backend.query(f"SELECT state FROM {self.backend.table(EVENTS_TABLE)} "
                                      f"ORDER BY {self._order_column} DESC LIMIT 1")
        if rows and is_encrypted(bytes(rows[0][0])):
            raise CryptoError(f"the store {display_url(self.url)!r} is written encrypted and no key is "
                              f"configured: set {ENV_KEY} (nothing was written in plain text)")
        self._plain_checked = bool(rows)  # an empty store is asked again: another may encrypt first

    def _artifact_row(self, digest: str, size: int, media_type: str,
                      raw: bytes) -> tuple[str, int, str, bytes]:
        """Check the artifact limit; compress text, then encrypt the blob when a key is configured."""
        if size > self.limits.max_artifact_bytes:
            raise InputLimitError(
                f"artifact of {size} bytes exceeds the limit of {self.limits.max_artifact_bytes}")
        check_media_type(media_type)
        data = pack_artifact(raw, media_type)
        return (digest, size, media_type, data if self.keyring is None else self.keyring.encrypt(data))

    def _offload(self, index: int, event: AnyEvent, as_logged: bool = False
                 ) -> tuple[AnyEvent, list[tuple[str, int, str, bytes]]]:
        """Move a payload above the threshold into an artifact; keep ref, size and a preview.

        Inline ``data:`` media (images, PDFs, audio, video) become artifacts too, checked and
        measured by :func:`contextfold.store.media.materialize`; a bad medium
        raises here, before anything of the batch is written.
        """
        event, blobs = materialize(event, where=f"event {index} ({event.type})", as_logged=as_logged)
        if isinstance(event, ToolResult | FileRead | EvidenceRetrieved) and event.artifact is None:
            # a tool's text blocks are its text too: moved with it, so the fold shows them whole
            text, blocks = event.text_and_media() if isinstance(event, ToolResult) else (event.content, None)
            raw = text.encode("utf-8")
            if len(raw) > self.artifact_threshold:
                digest = blake3.blake3(raw).hexdigest()
                ref = ArtifactRef(hash=digest, size=len(raw), media_type="text/plain; charset=utf-8")
                update: dict[str, object] = {"content": _preview(text), "artifact": ref}
                if blocks is not None:
                    update["blocks"] = blocks
                slim = event.model_copy(update=update)
                return slim, [*blobs, (digest, len(raw), ref.media_type, raw)]
        return event, blobs

    def put_artifact(self, data: bytes, media_type: str = "application/octet-stream", *,
                     replace: bool = False) -> ArtifactRef:
        """Store a blob (idempotent) and return its ref. ``replace``: overwrite the row held under
        its hash, a repair of stored bytes that no longer match it (``contextfold.cli_restore``);
        ``data`` is hashed here, so only the bytes the hash names can replace a row."""
        self._refuse_plain_beside_encrypted()
        digest = blake3.blake3(data).hexdigest()
        self.backend.put_artifacts([self._artifact_row(digest, len(data), media_type, data)], replace=replace)
        return ArtifactRef(hash=digest, size=len(data), media_type=media_type)
