"""A store's run heads: what an append needs of a run (version, last hash, pairing state).

Apart from :mod:`.event_store` because the heads have their own life: made by an append, or
by a whole read of the run (a fold in a new process), kept for the most recently written runs,
read again from the log when dropped; and each run's writes take turns under its lock.
"""

from __future__ import annotations

import contextlib
import threading
import typing
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from contextfold.domain.errors import EncodingConflictError, ProtocolError
from contextfold.domain.events import AnyEvent, ContextBuilt
from contextfold.domain.log import GENESIS_HASH, PairingState, RecordedEvent
from contextfold.domain.record_head import manifest_encoding
from contextfold.store.backends import translate_errors
from contextfold.store.deltas import DeltaWriter
from contextfold.store.fork_renewal import renew_after_fork
from contextfold.store.head_check import StaleHeadError, tail_digest
from contextfold.store.record_reads import RecordReads

__all__ = ["HEADS_KEPT", "RunHead", "RunHeads", "first_record_encoding"]

_ENCODING_KEYS = frozenset({"encoding"})
"""The key of a record's manifest a head reads (:func:`record_encoding`)."""

HEADS_KEPT = 4096
"""Runs whose head (version, last hash, pairing state) a store object keeps in memory, the most
recently written first. Past it the least recent is dropped and read again from the log at its
run's next append: a server writing millions of runs through one store kept every head (and its
pairing state, which grows with the run's calls) for as long as the store lived."""


@dataclass
class RunHead:
    """What an append needs of a run: its version, last hash and pairing state."""

    version: int = 0
    last_hash: str = GENESIS_HASH
    pairing: PairingState = field(default_factory=PairingState)
    tail: bytes | None = None
    """The digest of the stored bytes of the row at ``version`` (:mod:`.head_check`): known
    when this store wrote it, read before the next append when the head was made by a read."""
    encoding: str | None = None
    """The encoding the run's first ``context_built`` record names ("" when it names none, which
    pins nothing; None before the first record): :meth:`RunHeads._check_encoding`."""


def record_encoding(event: AnyEvent) -> str | None:
    """The encoding a ``context_built`` record names ("" when it names none); None for any other
    event."""
    return (manifest_encoding(event.manifest) or "") if isinstance(event, ContextBuilt) else None


def first_record_encoding(known: str | None, events: typing.Iterable[AnyEvent]) -> str | None:
    """:attr:`RunHead.encoding` after ``events``, given ``known`` before them."""
    if known is not None:
        return known
    return next((name for event in events if (name := record_encoding(event)) is not None), None)


class RunHeads(RecordReads):
    """The heads and write locks of an :class:`~contextfold.store.event_store.EventStore`."""

    _heads: OrderedDict[str, RunHead]
    _run_locks: dict[str, tuple[threading.Lock, list[int]]]
    _run_locks_guard: threading.Lock
    _deltas: DeltaWriter

    def _init_heads(self) -> None:
        self._heads = OrderedDict()
        self._run_locks = {}
        """A write lock per run being written now, with how many writers hold or wait for it:
        dropped when the last one leaves, so the table holds only the runs in flight."""
        self._run_locks_guard = threading.Lock()
        renew_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """In a forked child: new write locks, and the heads of the runs being written at the
        fork dropped (read again from the log at their next append).

        Why: a lock held by a parent's thread at the fork is copied held, and no thread of the
        child releases it: the child's first append to that run (or any append, for the guard)
        waited forever. Such a run's head holds that thread's half-staged batch, which may or may
        not have been committed by the parent (:mod:`.fork_renewal`)."""
        for run_id in self._run_locks:
            self._heads.pop(run_id, None)
        self._run_locks = {}
        self._run_locks_guard = threading.Lock()
        # The caches' own locks (deltas, keyframes read, folded tails) are renewed with the
        # package's other locks (:mod:`contextfold.domain.fork_locks`).

    @contextlib.contextmanager
    def _writing(self, run_ids: Sequence[str]) -> typing.Iterator[None]:
        """Hold the write locks of ``run_ids`` (in sorted order: no deadlock between batches).

        A run's cached head (its version, last hash and pairing state) is updated in place by a
        write: two threads appending to one run through one store judged their batches against
        each other's half-staged pairing (a fresh call id refused as "already has a result",
        or a head moved back by the slower thread). One writer per run per store at a time;
        other runs, and other processes, still append in parallel."""
        ids = sorted(set(run_ids))
        with self._run_locks_guard:
            entries = [self._run_locks.setdefault(r, (threading.Lock(), [0])) for r in ids]
            for _, users in entries:
                users[0] += 1
        try:
            with contextlib.ExitStack() as stack:
                for lock, _ in entries:
                    stack.enter_context(lock)
                yield
        finally:
            with self._run_locks_guard:
                for run_id, entry in zip(ids, entries, strict=True):
                    entry[1][0] -= 1
                    if not entry[1][0] and self._run_locks.get(run_id) is entry:
                        del self._run_locks[run_id]

    def _head(self, run_id: str) -> RunHead:
        head = self._heads.get(run_id)
        return head if head is not None else self._catch_up(run_id)

    def _catch_up(self, run_id: str) -> RunHead:
        head = self._heads.get(run_id) or RunHead()
        pairing = head.pairing
        version, last_hash, encoding = head.version, head.last_hash, head.encoding
        try:
            # each record with its manifest's encoding alone: the pairing reads no record, and a
            # record's manifest is most of a long run's log (an 800-turn run's first append in a
            # process, a usage observation: 29 s, nearly all of it decoding manifests)
            for rec in self._select(run_id, gt=version, slim=True, keep=_ENCODING_KEYS):
                pairing.apply(rec.event, rec.position)
                version, last_hash = rec.position, rec.hash
                if encoding is None:
                    encoding = record_encoding(rec.event)
        except BaseException:
            self._heads.pop(run_id, None)  # half-applied: rebuild from scratch next time
            raise
        new = RunHead(version, last_hash, pairing, head.tail if version == head.version else None, encoding)
        self._keep_head(run_id, new)
        return new

    def _read_again(self, run_id: str) -> RunHead:
        """The run's head read from its start, for a log that moved back under this store (a
        restored backup): what it remembers of the run from some position on is not the log's
        now, its keyframes included (:meth:`.deltas.DeltaWriter.forget`)."""
        self._heads.pop(run_id, None)
        self._deltas.forget(run_id)
        self._keyframes_read.forget(run_id)
        return self._catch_up(run_id)

    def _fresh_head(self, run_id: str) -> RunHead:
        """The run's head as the log holds it now, where a cached one is checked first (one row
        read): a caught-up head only adds the rows after the cached version, so a run the log lost
        whole or in part (a restored backup) kept its old version, and ``append_new_runs`` called
        a run the log no longer holds taken (RunExistsError) until the process restarted."""
        head = self._heads.get(run_id)
        if head is not None and not self._still_ends_at(run_id, head):
            return self._read_again(run_id)
        return self._catch_up(run_id)

    def _check_encoding(self, run_id: str, head: RunHead, events: typing.Iterable[AnyEvent]) -> None:
        """:class:`EncodingConflictError` for a record naming another encoding than the run's first
        record (as of ``head``). Why in the store: a ``Run`` handle made before the run's first
        record counts with its own pick, and follows the record's once it folds it; a first record
        another worker wrote after the handle's catch-up and before its own record landed left a
        run recorded with two encodings, and no check outside the insert's position could see
        it. The batch's own records are not held to it: an import carries a history as it was."""
        if not head.encoding:
            return
        for event in events:
            offered = record_encoding(event)
            if offered and offered != head.encoding:
                raise EncodingConflictError(run_id, head.version, head.encoding, offered)

    def _still_ends_at(self, run_id: str, head: RunHead) -> bool:
        """Whether the row at ``head.version`` is still the one ``head`` was made from (one row
        read): False when the log moved back under this store (a restored backup)."""
        return head.version == 0 or self._heads_row(run_id, head) is not None

    def _check_tail(self, run_id: str, head: RunHead) -> None:
        """Learn ``head.tail`` (the digest of the row at its version) for a head made by a read,
        checking the row is the one the head was made from: :class:`StaleHeadError` when the log
        no longer holds it (a restored backup, :mod:`.head_check`)."""
        if head.tail is not None or head.version == 0:
            return
        row = self._heads_row(run_id, head)
        if row is None:
            raise StaleHeadError(run_id)
        head.tail = tail_digest(row.state)

    def _heads_row(self, run_id: str, head: RunHead) -> typing.Any:
        """The stored row at ``head.version`` if it is the one ``head`` was made from (by the
        digest of its bytes when the head knows it, else by its chain hash), else None."""
        with translate_errors(f"read {run_id!r}", self.url, reading=True):
            rows = self.backend.recorder.select_events(run_id, gt=head.version - 1, lte=head.version)
        row = rows[0] if rows else None
        if row is None:
            return None
        same = (tail_digest(row.state) == head.tail if head.tail is not None  # (a record: its hash read,
                else self._decode(run_id, head.version, row.topic, row.state,  # not its manifest)
                                  slim=True).hash == head.last_hash)
        return row if same else None

    def iter_events(self, run_id: str, *, after: int = 0, after_hash: str | None = None,
                    keep: typing.Iterable[str] | None = None) -> typing.Iterator[RecordedEvent]:
        """:meth:`.event_reads.EventReads.iter_events`. A read of the whole run while this store
        holds no head for it (a new process folding the run) also makes the head an append
        needs: the first append after a fold read the whole log again to learn which calls are
        open (~0.5 s of a CLI build on a 10,000-event run). Not from records read without their
        ``encoding`` (``keep``), which the head holds."""
        keep = None if keep is None else frozenset(keep)
        events = super().iter_events(run_id, after=after, after_hash=after_hash, keep=keep)
        if after != 0 or run_id in self._heads or (keep is not None and "encoding" not in keep):
            return events
        return self._heading(run_id, events)

    def _heading(self, run_id: str, events: typing.Iterator[RecordedEvent]) -> typing.Iterator[RecordedEvent]:
        """``events``, and once they are all read, the run's head made from them, kept unless a
        write made one meanwhile. A log that breaks the pairing rules makes none (an append
        then reads the log and says why)."""
        pairing, version, last_hash, ok = PairingState(), 0, GENESIS_HASH, True
        encoding: str | None = None
        for rec in events:
            if ok:
                try:
                    pairing.apply(rec.event, rec.position)
                    version, last_hash = rec.position, rec.hash
                    if encoding is None:
                        encoding = record_encoding(rec.event)
                except ProtocolError:
                    ok = False
            yield rec
        if ok and version:
            with self._writing([run_id]):
                if run_id not in self._heads:
                    self._keep_head(run_id, RunHead(version, last_hash, pairing, encoding=encoding))

    def _keep_head(self, run_id: str, head: RunHead) -> None:
        """Remember ``head`` as the most recently written, dropping the least recent past
        :data:`HEADS_KEPT`. Safe while another thread writes the dropped run: it holds that
        run's head itself and stores it again when its write lands."""
        heads = self._heads
        heads.pop(run_id, None)  # then set: at the end (each step atomic, as other threads drop)
        heads[run_id] = head
        while len(heads) > HEADS_KEPT:
            try:
                heads.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break
