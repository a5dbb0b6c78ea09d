"""eventsourcing's PostgreSQL application recorder, as the store inserts with it.

Two changes: a large batch is inserted without psycopg's pipeline mode, and a retried insert
recognises its own batch when the connection was lost after the COMMIT (see
:func:`recorder_class`).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Sequence
from typing import Any

from eventsourcing import persistence as es

__all__ = ["INSERT_ATTEMPTS", "PIPELINE_MAX_BYTES", "recorder_class"]


PIPELINE_MAX_BYTES = 1024 * 1024
"""Batches with more stored bytes than this are inserted without psycopg's pipeline mode."""
INSERT_ATTEMPTS = 10
"""Attempts of an insert whose connection failed (eventsourcing's own count)."""


@functools.cache
def recorder_class() -> type[Any]:
    """eventsourcing's PostgresApplicationRecorder, with large batches inserted without the pipeline.

    Why: psycopg's pipeline mode (which eventsourcing uses for every insert) hangs for good when
    one query's message is large: seen here with psycopg 3.3.9 and libpq 18, an insert of 8 MB
    of rows never returned, the server waiting on the client (``ClientRead``) and the client on
    the server; 6 MB went through (psycopg issue #685 describes the same hang). A run's batch of
    5,000 events of tool output is that large. Above :data:`PIPELINE_MAX_BYTES` the same
    statements (table lock, notify, insert) run in a plain transaction: a few more round trips
    on a batch whose transfer takes far longer anyway. Made once per process, on the first
    PostgreSQL store (eventsourcing's postgres module imports psycopg).
    """
    from eventsourcing.postgres import PostgresApplicationRecorder

    insert_once = PostgresApplicationRecorder.insert_events.__wrapped__  # without its retry

    class Recorder(PostgresApplicationRecorder):
        def insert_events(self, stored_events: Sequence[es.StoredEvent], **kwargs: Any) -> Any:
            """Insert in one transaction, retrying a lost connection, as eventsourcing does, but
            knowing that a lost connection may have lost only the COMMIT's acknowledgement: when
            the retry finds its positions taken, by rows equal to its own (run, position, topic,
            state: chain hash and body), the first attempt was committed. eventsourcing's retry
            raised IntegrityError there, and an append "at the end" took it for a lost race and
            wrote its batch a second time."""
            large = sum(len(e.state) for e in stored_events) > PIPELINE_MAX_BYTES
            attempts = 0
            while True:
                try:
                    if large:
                        return self._insert_without_pipeline(stored_events, **kwargs)
                    return insert_once(self, stored_events, **kwargs)
                except (es.InterfaceError, es.OperationalError):
                    attempts += 1
                    if attempts >= INSERT_ATTEMPTS:
                        raise
                    time.sleep(0.2 * random.uniform(0.9, 1.1))
                except es.IntegrityError:
                    if attempts and self._already_stored(stored_events):
                        return None
                    raise

        def _already_stored(self, stored_events: Sequence[es.StoredEvent]) -> bool:
            """Whether the log holds exactly ``stored_events`` at their positions."""
            by_run: dict[Any, list[es.StoredEvent]] = {}
            for e in stored_events:
                by_run.setdefault(e.originator_id, []).append(e)
            for run_id, mine in by_run.items():
                lo, hi = min(e.originator_version for e in mine), max(e.originator_version for e in mine)
                rows = self.select_events(run_id, gt=lo - 1, lte=hi)
                if ([(r.originator_version, r.topic, bytes(r.state)) for r in rows]
                        != [(e.originator_version, e.topic, bytes(e.state)) for e in mine]):
                    return False
            return True

        def _insert_without_pipeline(self, stored_events: Sequence[es.StoredEvent], **kwargs: Any) -> Any:
            with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
                self._insert_stored_events(curs, stored_events, **kwargs)
                return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)

    return Recorder
