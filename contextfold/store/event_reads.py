"""The run log's read side: events decoded page by page, artifacts.

Apart from :mod:`contextfold.store.event_store` (the write path, which subclasses this) because
reading has concerns of its own: pages sized by rows and bytes, envelopes opened, compressed
and delta states unpacked (a delta's keyframe remembered for the deltas after it), old event
versions upcast. ``verify``, which recomputes the hash chain over the exact stored bytes, is
:mod:`contextfold.store.chain_check`'s.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import blake3
from pydantic import ValidationError

from contextfold.domain.errors import (
    ArtifactNotFoundError,
    CryptoError,
    InputLimitError,
    IntegrityError,
    RunNotFoundError,
    UpgradeRequiredError,
    quoted,
)
from contextfold.domain.events import (
    EVENT_ADAPTER,
    UPCASTERS,
    AnyEvent,
    ArtifactRef,
    ContextBuilt,
    event_from_json,
)
from contextfold.domain.gc_pause import paused_gc
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.domain.record_head import RECORD_TYPE, record_head
from contextfold.domain.release_versions import newer_release_event, newer_release_parts
from contextfold.domain.version import __version__
from contextfold.store.backends import (
    ARTIFACTS_TABLE,
    EVENTS_TABLE,
    PostgresBackend,
    SQLiteBackend,
    translate_errors,
)
from contextfold.store.compression import is_compressed, unpack_artifact, unpack_state
from contextfold.store.crypto import Keyring, is_encrypted, open_envelope
from contextfold.store.deltas import KeyframesRead, delta_base, is_delta, unpack_delta
from contextfold.store.event_checks import why_not_parsed
from contextfold.store.head_check import FoldedTails, StaleHeadError
from contextfold.store.limits import StoreLimits
from contextfold.store.run_listing import list_runs

__all__ = ["LOST_ARTIFACT_HINT", "RUN_ID_PATTERN", "EventReads", "RunInfo", "VerifyReport", "bulk_allocation",
           "check_run_id", "upcast_topic"]

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}$")
_UPCAST_TOPICS: dict[str, bool] = {}
"""Stored topic (``type@version``) -> whether it needs upcasting: parsed once per topic."""
_PAGE_ROWS = 5000
_FIRST_PAGE_ROWS = 500
_PAGE_BYTES = 8 * 1024 * 1024
"""Read pages: at most this many rows, and about this many bytes of stored rows."""
_MAX_POSITION = 2**63 - 1
"""The last position a run can hold (SQLite INTEGER and PostgreSQL bigint): the drivers refuse
larger numbers, so a read past it (a user's ``show RUN 99999999999999999999``) finds nothing."""



@dataclass(frozen=True)
class RunInfo:
    run_id: str
    events: int


@dataclass(frozen=True)
class VerifyReport:
    run_id: str
    events: int
    ok: bool
    first_bad_position: int | None = None
    reason: str = ""
    head: str | None = None
    """The chain hash of the run's last event when the chain is intact (None otherwise): what an
    export's receiver compares (``audit`` shows it), found by the check's own pass."""


def upcast_topic(topic: str) -> bool:
    """Whether events stored under ``topic`` (``type@version``) are an old version, upcast on read
    (parsed once per topic)."""
    upcast = _UPCAST_TOPICS.get(topic)
    if upcast is None:
        etype, _, version = topic.partition("@")
        upcast = _UPCAST_TOPICS[topic] = (etype, int(version)) in UPCASTERS
    return upcast


def _trimmed(event: AnyEvent, keep: frozenset[str]) -> AnyEvent:
    """``event``, a context_built record's manifest cut to the keys ``keep`` (another, as it is)."""
    if not isinstance(event, ContextBuilt):
        return event
    return event.model_copy(update={"manifest": {k: v for k, v in event.manifest.items() if k in keep}})


def bulk_allocation() -> contextlib.AbstractContextManager[None]:
    """Pause the cyclic GC while materialising many acyclic objects (the process's one pause,
    :func:`contextfold.domain.gc_pause.paused_gc`, so reads and builds on other threads count
    together).

    Reading a 100k-event run allocates ~1M small objects; the generational
    collector re-scans the growing heap and triples the time (1.76 s vs
    0.49 s measured on SQLite). The events hold no reference cycles, so
    nothing is leaked; the collector resumes afterwards.
    """
    return paused_gc()


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise InputLimitError(
            f"invalid run id {quoted(run_id)}: 1-200 characters, letters, digits and ._:@/+=- "
            "(starting with a letter or digit)"
        )
    return run_id




LOST_ARTIFACT_HINT = ("bring it back: export the run where it is held (`contextfold events RUN --json "
                      "--with-artifacts > FILE`) and import FILE here under the same --run: the artifacts "
                      "its log cites and this store lost are written, nothing else")
"""How an artifact a log cites and the store lost is brought back (:mod:`contextfold.cli_restore`).
Why said with the error: a partial restore or a bad copy of a store said which artifact was gone,
and the import of the run's export that would bring it was refused as a run that exists."""

class EventReads:
    """What an :class:`~contextfold.store.event_store.EventStore` reads: set up by its
    ``__init__`` (the attributes below), used through it."""

    url: str
    keyring: Keyring | None
    limits: StoreLimits
    backend: SQLiteBackend | PostgresBackend
    _keyframes_read: KeyframesRead
    _folded_tails: FoldedTails
    _order_column: str

    def _select(self, run_id: str, *, gt: int = 0, lte: int | None = None, gt_hash: str | None = None,
                remember: bool = False, slim: bool = False,
                keep: frozenset[str] = frozenset()) -> Iterator[RecordedEvent]:
        """The events after ``gt`` (up to ``lte``), read in pages of at most ``_PAGE_ROWS`` rows.

        Pages are sized by bytes too (about ``_PAGE_BYTES`` of stored rows): a page of 5,000
        events of 20 KB each held 100 MB of rows at once, more than a folded state of
        100k events holds. ``gt_hash``: see :meth:`iter_events`. ``remember``: once every row is
        read, the last one's digest is remembered (:class:`~.head_check.FoldedTails`) for the
        read that continues from it. ``slim``, ``keep``: see :meth:`_parse`."""
        page = _FIRST_PAGE_ROWS
        cursor = gt if gt_hash is None else gt - 1
        lte = _MAX_POSITION if lte is None else min(lte, _MAX_POSITION)
        last: tuple[RecordedEvent, bytes] | None = None
        while True:
            upper = min(cursor + page, lte)
            if cursor >= lte:
                break
            with translate_errors(f"read {run_id!r}", self.url, reading=True):
                rows = self.backend.recorder.select_events(run_id, gt=cursor, lte=upper)
            nbytes = sum(len(row.state) for row in rows)
            skip = 0
            if gt_hash is not None:  # the first page's first row: the one at gt, not yielded
                if not rows or rows[0].originator_version != gt or not self._still_holds(
                        run_id, gt, gt_hash, rows[0].topic, rows[0].state):
                    raise StaleHeadError(run_id)
                gt_hash, skip = None, 1
            for row in rows[skip:]:
                rec = self._decode(run_id, row.originator_version, row.topic, row.state, slim=slim, keep=keep)
                if remember:
                    last = (rec, row.state)
                yield rec
            if len(rows) < upper - cursor:
                break
            cursor = upper
            page = max(1, min(_PAGE_ROWS, page * _PAGE_BYTES // max(nbytes, 1)))
        if last is not None:
            self._folded_tails.put(run_id, last[0].position, last[0].hash, last[1])

    def _still_holds(self, run_id: str, position: int, chain_hash: str, topic: str, state: bytes) -> bool:
        """Whether the stored row ``state`` at ``position`` holds the event of ``chain_hash``: by
        its digest when a read ended at it (no inflating, no key), else decoded."""
        return self._folded_tails.holds(run_id, position, chain_hash, state) or chain_hash == self._plain(
            run_id, position, topic, state)[:64].decode("ascii", "replace")

    def _plain(self, run_id: str, position: int, topic: str, state: bytes) -> bytes:
        """A stored row's chain hash and canonical JSON: opened, inflated."""
        if not isinstance(state, bytes):  # a row written as TEXT by hand: not one of ours
            raise IntegrityError(f"run {run_id!r} position {position}: the stored event is "
                                 f"{type(state).__name__}, not bytes", position=position)
        if is_encrypted(state):  # checked first: the label below is built only when needed
            state = open_envelope(state, self.keyring, f"run {run_id!r} position {position}")
        if is_compressed(state) or is_delta(state):
            state = self._unpack(state, run_id, position, topic)
        return state

    def _decode(self, run_id: str, position: int, topic: str, state: bytes, *,
                slim: bool = False, keep: frozenset[str] = frozenset()) -> RecordedEvent:
        return self._parse(run_id, position, topic, self._plain(run_id, position, topic, state),
                           slim=slim, keep=keep)

    def _parse(self, run_id: str, position: int, topic: str, state: bytes, *,
               slim: bool = False, keep: frozenset[str] = frozenset()) -> RecordedEvent:
        """The event of a row's plain state (:meth:`_plain`). ``slim``: a context_built record
        is read without its manifest but for the keys in ``keep``
        (:func:`~contextfold.domain.record_head.record_head`: the rest not decoded), for a reader
        of its other fields, or of those keys, only. A record is refused as a whole decode
        refuses it (with that decode's message), and only then: a slim read that fails is
        decoded whole, for its message (or its event, trimmed, should that decode pass)."""
        try:
            digest = state[:64].decode("ascii")  # a damaged row: UnicodeDecodeError, a ValueError
            body = state[64:]
            if upcast_topic(topic):
                event = event_from_json(body)
                if slim and isinstance(event, ContextBuilt):
                    event = _trimmed(event, keep)
            elif slim and topic.partition("@")[0] == RECORD_TYPE:
                try:
                    event = record_head(body, keep)
                except ValidationError:  # refused: as the whole decode refuses it, or read by it
                    event = _trimmed(EVENT_ADAPTER.validate_json(body), keep)
            else:
                event = EVENT_ADAPTER.validate_json(body)
        except (ValidationError, ValueError) as exc:
            raise self._refused(run_id, position, topic, state, exc) from exc
        return RecordedEvent(run_id, position, event, digest)

    def _refused(self, run_id: str, position: int, topic: str, state: bytes,
                 exc: ValueError) -> IntegrityError | UpgradeRequiredError:
        """The error for a row (a plain state) that did not parse (``exc``): an
        :class:`UpgradeRequiredError` when a newer release wrote it (an event type or version, a
        field or a block type, this one does not know: :mod:`~contextfold.domain.release_versions`)
        and its bytes are the ones written, else an :class:`IntegrityError`.

        Why the chain hash is checked here, and only here: a key's name changed after it was
        written (``exit_code`` read as ``exit_codf``, an optional field) looks to a schema exactly
        like a newer release's field, and "upgrade" would send the user to install a release that
        reads the run no better. A read does not check the chain (``verify`` does); a refused row
        is rare, so reading the row before it for its digest costs nothing a read pays."""
        where = f"run {run_id!r} position {position}"
        etype = topic.partition("@")[0]
        newer = newer_release_event(topic, state[64:])
        parts = None
        if newer is None and isinstance(exc, ValidationError):
            parts = newer_release_parts(etype, exc)
        if newer is None and parts is None:
            return IntegrityError(f"{where}: stored event does not parse: {why_not_parsed(exc)}",
                                  position=position)
        if not self._as_written(run_id, position, topic, state):
            return IntegrityError(f"{where}: stored event does not match its chain hash (changed after "
                                  f"it was written) and does not parse: {why_not_parsed(exc)}",
                                  position=position)
        what = (f"event type {newer[0]!r} version {newer[1]} was" if newer is not None
                else f"its {etype} event holds what this release does not know ({parts}):")
        return UpgradeRequiredError(
            f"{where}: {what} written by a newer contextfold than this one ({__version__}): upgrade "
            "contextfold to read this run (nothing was changed)", position=position)

    def _as_written(self, run_id: str, position: int, topic: str, state: bytes) -> bool:
        """Whether the plain state at ``position`` holds the bytes its chain hash covers, chained to
        the digest of the row before it (as ``verify`` checks); False when that row cannot be read
        (the row is then not vouched for)."""
        prev = GENESIS_HASH
        if position > 1:
            try:
                with translate_errors(f"read {run_id!r}", self.url, reading=True):
                    rows = self.backend.recorder.select_events(run_id, gt=position - 2, lte=position - 1)
                if not rows:
                    return False
                prev = self._plain(run_id, position - 1, rows[0].topic, rows[0].state)[:64].decode(
                    "ascii", "replace")
            except (IntegrityError, CryptoError):
                return False
        return chain_hash(run_id, position, prev, state[64:]) == state[:64].decode("ascii", "replace")

    def _unpack(self, state: bytes, run_id: str, position: int, topic: str) -> bytes:
        """A compressed or delta state's bytes, no longer than this store's limit for an event
        of the row's topic allows (a build's record has its own: ``StoreLimits.event_bytes``).

        A keyframe read is remembered (the last few, :class:`~.deltas.KeyframesRead`), so the
        deltas after it in a read of the run do not fetch it again; a delta read alone fetches its
        keyframe's row, and so does one that fails against the keyframe remembered: the log may
        hold another there now (moved back and written again), and only the row tells."""
        where = f"run {run_id!r} position {position}"
        limit, name = self.limits.event_bytes(topic.partition("@")[0])
        limit += 64
        if not is_delta(state):
            plain = unpack_state(state, limit, where, position=position, limit=name)
            self._keyframes_read.put(run_id, position, state, plain)
            return plain
        base = delta_base(state, where, position)
        remembered = self._keyframes_read.get(run_id, base)
        if remembered is None:
            return unpack_delta(state, self._keyframe(run_id, base, where, position), limit, where,
                                position=position, limit=name)
        try:
            return unpack_delta(state, remembered[1], limit, where, position=position, limit=name)
        except IntegrityError:
            frame, frame_topic = self._keyframe_frame(run_id, base, where, position)
            if frame == remembered[0]:  # the same row: the delta itself is damaged
                raise
        return unpack_delta(state, self._unpack(frame, run_id, base, frame_topic), limit, where,
                            position=position, limit=name)

    def _keyframe(self, run_id: str, base: int, where: str, position: int) -> bytes:
        """The state of the keyframe at ``base`` that the delta at ``position`` names."""
        frame, topic = self._keyframe_frame(run_id, base, where, position)
        return self._unpack(frame, run_id, base, topic)

    def _keyframe_frame(self, run_id: str, base: int, where: str, position: int) -> tuple[bytes, str]:
        """The frame the log holds at ``base`` (opened), which the delta at ``position`` names,
        and its row's topic."""
        with translate_errors(f"read {run_id!r}", self.url, reading=True):
            rows = self.backend.recorder.select_events(run_id, gt=base - 1, lte=base)
        state = open_envelope(rows[0].state, self.keyring, f"run {run_id!r} position {base}") if rows else b""
        if not is_compressed(state):
            raise IntegrityError(f"{where}: its keyframe at position {base} is missing or not a "
                                 "compressed frame", position=position)
        return state, rows[0].topic

    def read(self, run_id: str, *, upto: int | None = None, after: int = 0) -> list[RecordedEvent]:
        """The run's events in order; ``upto`` = last position included."""
        check_run_id(run_id)
        with bulk_allocation():
            events = list(self._select(run_id, gt=after, lte=upto))
        if not events and after == 0 and not self.exists(run_id):
            raise RunNotFoundError(run_id)
        return events

    def event_text(self, run_id: str, position: int) -> str:
        """The ``content`` text of the event at ``position`` (a tool result, file read or
        evidence, as stored: the preview when the payload is an artifact).

        What a state folded with a text source reads back to render a long text it did not keep
        (``RunState.event_text``)."""
        check_run_id(run_id)
        found = list(self._select(run_id, gt=position - 1, lte=position))
        if not found:
            raise IntegrityError(f"run {run_id!r} has no event at position {position}", position=position)
        content = getattr(found[0].event, "content", None)
        if not isinstance(content, str):
            raise IntegrityError(f"run {run_id!r} position {position} ({found[0].event.type}) has no text "
                                 "content", position=position)
        return content

    def iter_events(self, run_id: str, *, after: int = 0, after_hash: str | None = None,
                    keep: Iterable[str] | None = None) -> Iterator[RecordedEvent]:
        """The run's events after ``after``, in order. ``keep``: each context_built record with its
        manifest cut to these keys (:meth:`_parse`; None: whole). ``after_hash``: the chain hash
        of the event at ``after`` as the caller read it (a state folded up to it, caught up): the
        first page's query reads that row too, and :class:`~.head_check.StaleHeadError` is raised before any
        event when the log holds another event there, or none (it moved back under the caller: a
        restored backup), where the events after it were folded on top of ones the log lost.
        That row is compared by the digest of its stored bytes when this store's last read of the
        run ended at it (:class:`~.head_check.FoldedTails`), else decoded."""
        check_run_id(run_id)
        return self._select(run_id, gt=after, gt_hash=after_hash if after else None, remember=True,
                            slim=keep is not None, keep=frozenset(keep or ()))

    def version(self, run_id: str) -> int:
        """The run's last position (0 when it has no events)."""
        check_run_id(run_id)
        with translate_errors(f"read {run_id!r}", self.url, reading=True):
            rows = self.backend.recorder.select_events(run_id, desc=True, limit=1)
        return rows[0].originator_version if rows else 0

    def exists(self, run_id: str) -> bool:
        return self.version(run_id) > 0

    def _topics(self, run_id: str, event_type: str) -> list[tuple[str, int]]:
        """The run's topics (``type@version``) of ``event_type`` with their event counts, read
        from the rows without their states; :class:`RunNotFoundError` for a run with no events.
        Grouped and compared here, not with ``LIKE``, whose ``_`` is a wildcard."""
        check_run_id(run_id)
        p = self.backend.placeholder
        rows = self.backend.query(
            f"SELECT topic, COUNT(*) FROM {self.backend.table(EVENTS_TABLE)} "
            f"WHERE originator_id = {p} GROUP BY topic", (run_id,))
        if not rows:
            raise RunNotFoundError(run_id)
        return [(str(topic), int(n)) for topic, n in rows if str(topic).partition("@")[0] == event_type]

    def count_events(self, run_id: str, event_type: str) -> int:
        """How many of the run's events are of ``event_type``, counted without reading a state.

        Why: a turn number is checked against the run's model responses, and folding a
        10,000-event run to count them took ~5 s (nearly all of it tokenizing); the topics are
        one query over the run's rows."""
        return sum(n for _, n in self._topics(run_id, event_type))

    def read_type(self, run_id: str, event_type: str, *, after: int = 0) -> list[RecordedEvent]:
        """The run's events of ``event_type`` in order (those after position ``after``), the
        others neither read nor decoded.

        Why: a turn's context-built records were found by decoding the whole log (~0.6 s for a
        10,000-event run, every tool output parsed) to keep a few dozen events."""
        topics = [t for t, _ in self._topics(run_id, event_type)]
        if not topics or after >= _MAX_POSITION:  # nothing after the last position a run can hold
            return []
        p = self.backend.placeholder
        rows = self.backend.query(
            f"SELECT originator_version, topic, state FROM {self.backend.table(EVENTS_TABLE)} "
            f"WHERE originator_id = {p} AND topic IN ({', '.join([p] * len(topics))}) "
            f"AND originator_version > {p} ORDER BY originator_version", (run_id, *topics, after))
        return [self._decode(run_id, int(v), str(topic), bytes(state)) for v, topic, state in rows]

    def nth_position(self, run_id: str, event_type: str, n: int) -> int | None:
        """The log position of the run's ``n``-th (1-based) event of ``event_type``, read without
        a state (None when it has fewer). Why: a turn's records follow its previous turn's model
        response; reading every record of a run to find one turn's made recording usage each
        turn cost O(the run) (600 turns: 62 s per 100 turns)."""
        topics = [t for t, _ in self._topics(run_id, event_type)]
        if not topics or not 1 <= n <= _MAX_POSITION:  # past it: no run holds that many (the
            return None  # drivers refuse the number: a raw OverflowError from sqlite3)
        p = self.backend.placeholder
        rows = self.backend.query(
            f"SELECT originator_version FROM {self.backend.table(EVENTS_TABLE)} "
            f"WHERE originator_id = {p} AND topic IN ({', '.join([p] * len(topics))}) "
            f"ORDER BY originator_version LIMIT 1 OFFSET {p}", (run_id, *topics, n - 1))
        return int(rows[0][0]) if rows else None

    def runs(self, prefix: str = "", *, limit: int | None = None) -> list[RunInfo]:
        """Every run with its event count, in the order runs were first written. ``prefix``:
        only the runs whose id starts with it (as ``str.startswith``: no wildcard, case counts).
        ``limit``: only the last ``limit`` of them, the runs started last. Both are asked of the
        database, not filtered here (:mod:`.run_listing` says why and how)."""
        return [RunInfo(run_id, events) for run_id, events in
                list_runs(self.backend, self._order_column, RUN_ID_PATTERN, prefix, limit)]

    def read_all(self, *, after: int = 0, limit: int = 1000) -> list[tuple[int, RecordedEvent]]:
        """Events across all runs by notification id: (notification id, event), ids > ``after``.
        A reader that goes on after the last id it was given misses nothing: on PostgreSQL only
        ids that are final are returned (``pg_recorder``'s ``committed_horizon``: inserts no
        longer issue them in commit order); SQLite's writers are one at a time."""
        recorder = self.backend.recorder
        with translate_errors("read notifications", self.url, reading=True):
            horizon = recorder.committed_horizon() if isinstance(self.backend, PostgresBackend) else None
            if horizon is not None and horizon <= after:
                return []
            rows = recorder.select_notifications(after + 1, limit, stop=horizon)
        return [(n.id, self._decode(str(n.originator_id), n.originator_version, n.topic, n.state))
                for n in rows]

    # ------------------------------------------------------------ artifacts

    def artifact(self, ref: str | ArtifactRef) -> bytes:
        digest = ref.hash if isinstance(ref, ArtifactRef) else ref
        p = self.backend.placeholder
        rows = self.backend.query(
            f"SELECT data, size FROM {self.backend.table(ARTIFACTS_TABLE)} WHERE hash = {p}", (digest,))
        if not rows:
            raise ArtifactNotFoundError(digest)
        stored, size = bytes(rows[0][0]), int(rows[0][1])
        if is_encrypted(stored) and len(stored) == size and blake3.blake3(stored).hexdigest() == digest:
            # raw bytes that begin as an envelope does (a tool may print anything), stored in a
            # plain store: an envelope is longer than what it holds, and these are the artifact
            return stored
        data = open_envelope(stored, self.keyring, f"artifact {digest}")
        data = unpack_artifact(data, size, f"artifact {digest}")
        if blake3.blake3(data).hexdigest() != digest:
            raise IntegrityError(f"artifact {digest} does not match its hash")
        return data

    def cited_artifact(self, ref: str | ArtifactRef) -> bytes:
        """:meth:`artifact`, for a ref the run's log cites (a fold, a build, a replay, an audit,
        an export): one the store does not hold is an :class:`IntegrityError` (a partial restore,
        a bad copy; exit 3), as ``verify`` says, not the ArtifactNotFoundError (exit 2) of a hash
        a caller names."""
        try:
            return self.artifact(ref)
        except ArtifactNotFoundError as exc:
            digest = ref.hash if isinstance(ref, ArtifactRef) else ref
            raise IntegrityError(f"the artifact {digest} the log cites is not in the store "
                                 f"(`contextfold verify RUN` names the event; {LOST_ARTIFACT_HINT})") from exc

    def artifact_media_type(self, digest: str) -> str:
        """The media type the artifact ``digest`` was stored under (without loading it): what
        ``show`` names a medium by rather than print its bytes."""
        p = self.backend.placeholder
        rows = self.backend.query(
            f"SELECT media_type FROM {self.backend.table(ARTIFACTS_TABLE)} WHERE hash = {p}", (digest,))
        if not rows:
            raise ArtifactNotFoundError(digest)
        return str(rows[0][0])

    def has_artifact(self, digest: str) -> bool:
        """Whether this store holds the artifact ``digest`` (without loading it)."""
        p = self.backend.placeholder
        return bool(self.backend.query(
            f"SELECT 1 FROM {self.backend.table(ARTIFACTS_TABLE)} WHERE hash = {p}", (digest,)))

    def artifact_count(self) -> int:
        return int(self.backend.query(f"SELECT COUNT(*) FROM {self.backend.table(ARTIFACTS_TABLE)}")[0][0])
