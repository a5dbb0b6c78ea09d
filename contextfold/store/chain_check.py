"""The run log's chain verification: every stored row re-hashed over its exact bytes, parsed,
its topic and the artifacts it cites checked, one row at a time.

Apart from :mod:`contextfold.store.event_reads` (the reads it builds on) because it is a reader of
its own: it reads rows, not events, so that it can name what is wrong with one (a missing
position, bytes that do not match the chain, a row that does not open, a topic that is not its
event's, an artifact lost) where a read would raise.
"""

from __future__ import annotations

import json

from contextfold.domain.errors import (
    ArtifactNotFoundError,
    CryptoError,
    IntegrityError,
    RunNotFoundError,
    quoted,
)
from contextfold.domain.events import AnyEvent, artifact_refs
from contextfold.domain.log import GENESIS_HASH, chain_hash
from contextfold.store.backends import translate_errors
from contextfold.store.compression import is_compressed
from contextfold.store.crypto import open_envelope
from contextfold.store.deltas import is_delta
from contextfold.store.event_reads import (
    LOST_ARTIFACT_HINT,
    EventReads,
    VerifyReport,
    check_run_id,
    upcast_topic,
)

__all__ = ["ChainCheck"]


def _declared_topic(topic: str, event: AnyEvent, body: bytes) -> str:
    """The topic a stored event was written under: its ``type@version``, as the stored JSON
    declares them when it is an old version (``topic`` one that is upcast on read)."""
    if not upcast_topic(topic):
        return f"{event.type}@{event.v}"
    data = json.loads(body)
    return f"{data.get('type')}@{data.get('v', 1)}"


class ChainCheck(EventReads):
    """The verification of an :class:`~contextfold.store.event_store.EventStore`'s chains."""

    def _cited_artifacts_intact(self, event: object, checked: set[str]) -> str:
        """Why an artifact ``event`` cites cannot be read back as its hash says ("" when each
        can): ``verify`` said "intact" of a run whose replay failed on a damaged or deleted
        artifact. ``checked``: the hashes read already (each is read once per verify)."""
        for ref in artifact_refs(event):
            if ref.hash in checked:
                continue
            checked.add(ref.hash)
            try:
                self.artifact(ref)
            except ArtifactNotFoundError:
                return f"the artifact {ref.hash} it cites is not in the store ({LOST_ARTIFACT_HINT})"
            except (IntegrityError, CryptoError) as exc:  # (damaged ciphertext fails to decrypt)
                return f"the artifact {ref.hash} it cites cannot be read back: {exc} ({LOST_ARTIFACT_HINT})"
        return ""

    def verify(self, run_id: str) -> VerifyReport:
        """Recompute the hash chain over the exact stored bytes; name the first mismatch.

        Each event is parsed and checked as read, one at a time; a context_built record without
        decoding its manifest (``_parse``'s ``slim``): the chain covers the manifest's bytes, and
        all a parse can refuse of it (invalid JSON, not an object) is refused by that read too,
        with the whole decode's message. Why: decoding every manifest made verifying an 800-turn
        run (and ``audit --turn``, which verifies first) take ~37 s; no answer needs them."""
        check_run_id(run_id)
        prev = GENESIS_HASH
        count = 0
        expected_position = 1
        checked: set[str] = set()
        cursor = 0
        while True:
            with translate_errors(f"verify {run_id!r}", self.url, reading=True):
                rows = self.backend.recorder.select_events(run_id, gt=cursor, limit=5000)
            if not rows:
                break
            for row in rows:
                pos = row.originator_version
                if pos != expected_position:
                    return VerifyReport(run_id, count, False, expected_position,
                                        f"position {expected_position} is missing")
                if not isinstance(row.state, bytes):  # a row written as TEXT by hand
                    return VerifyReport(run_id, count, False, pos,
                                        f"the stored event is {type(row.state).__name__}, not bytes")
                try:
                    state = open_envelope(row.state, self.keyring, f"run {run_id!r} position {pos}")
                except IntegrityError as exc:  # encrypted, and its bytes changed
                    return VerifyReport(run_id, count, False, pos, str(exc))
                if is_compressed(state) or is_delta(state):
                    try:
                        state = self._unpack(state, run_id, pos, row.topic)
                    except IntegrityError as exc:
                        return VerifyReport(run_id, count, False, pos, str(exc))
                stored_hash = state[:64].decode("ascii", "replace")
                if chain_hash(run_id, pos, prev, state[64:]) != stored_hash:
                    return VerifyReport(run_id, count, False, pos,
                                        "event content does not match its chain hash")
                try:  # a record parsed as a whole decode would refuse it, its manifest unread
                    event = self._parse(run_id, pos, row.topic, state, slim=True).event
                except IntegrityError as exc:
                    return VerifyReport(run_id, count, False, pos, str(exc))
                declared = _declared_topic(row.topic, event, state[64:])
                if row.topic != declared:  # counts by type (turn numbers) read the topic alone
                    return VerifyReport(run_id, count, False, pos,
                                        f"its topic {quoted(row.topic)} is not its event's ({declared})")
                damaged = self._cited_artifacts_intact(event, checked)
                if damaged:  # the chain holds its hash; a replay needs its bytes
                    return VerifyReport(run_id, count, False, pos, damaged)
                prev = stored_hash
                count += 1
                expected_position += 1
            cursor = rows[-1].originator_version
        if count == 0:
            raise RunNotFoundError(run_id)
        return VerifyReport(run_id, count, True, head=prev)
