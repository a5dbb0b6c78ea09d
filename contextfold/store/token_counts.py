"""Token counts kept by the store, so the next process does not tokenize a run's texts again.

Why: folding a run tokenizes every text it holds once per process (``projections.tokens``).
For a 10,000-event run that was ~4 of the fold's ~5 s, paid again by every CLI command, every
resumed worker and every hand-off. A count is a pure function of the text and the encoding,
so it is kept by content: a row per (run, encoding, text digest) with the count and, for a long
multi-line text, where it was cut into line blocks to be counted (truncation reads those).

- The rows are a cache, never the truth: the log is. Losing them (or never having them: a store
  made before this table, opened without creating its schema) only costs the tokenizing again.
  A row that does not decode to a plausible count is not read back.
- When to keep and read them is ``contextfold.kept_counts``'s (it joins the store and the
  process's counters; this module only reads and writes rows).
- Written best-effort: a store that cannot take the rows (read-only, full, unreachable, or
  another writer holding it at that moment: the write does not wait) leaves the command's own
  work as it was; the next fold counts again.
- Per run, not global, so one query reads what a run needs; a text shared by runs is kept
  once per run.
- What it reveals: a text's blake3 digest and its token count, as the artifacts table's
  content hashes and sizes already do (also on an encrypted store).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from contextfold.domain.errors import StoreError

if TYPE_CHECKING:
    from contextfold.store.event_store import EventStore

Blocks = tuple[Sequence[int], Sequence[int]]
"""Where a long text was cut into line blocks to be counted: the blocks' first lines and the
tokens before each (``projections.line_counts.KnownBlocks``)."""

KeptCount = tuple[str, bytes, int, "Blocks | None"]
"""(encoding, blake3 digest of the text's UTF-8, tokens, line blocks or None): one row's worth
(``projections.tokens.CountedText``)."""

__all__ = ["TOKEN_COUNTS_TABLE", "Blocks", "KeptCount", "create_table_sql", "keep_counts", "kept_counts"]

TOKEN_COUNTS_TABLE = "contextfold_token_counts"

_BATCH = 500


def create_table_sql(table: str, *, blob: str, integer: str) -> str:
    """The table's ``CREATE TABLE IF NOT EXISTS`` in a dialect (``BLOB``/``INTEGER`` for SQLite,
    ``BYTEA``/``BIGINT`` for PostgreSQL)."""
    return (f"CREATE TABLE IF NOT EXISTS {table} (run_id TEXT NOT NULL, encoding TEXT NOT NULL, "
            f"digest {blob} NOT NULL, tokens {integer} NOT NULL, blocks {blob}, "
            "PRIMARY KEY (run_id, encoding, digest))")


_HAS_TABLE: WeakKeyDictionary[EventStore, bool] = WeakKeyDictionary()


def _has_table(store: EventStore) -> bool:
    """Whether the store has the table (one made by an older contextfold and opened without
    creating its schema has not); asked once per store."""
    known = _HAS_TABLE.get(store)
    if known is None:
        known = _HAS_TABLE[store] = store.backend.tables_present(TOKEN_COUNTS_TABLE)
    return known


def _blocks_bytes(blocks: Blocks | None) -> bytes | None:
    if blocks is None:
        return None
    starts, sums = blocks
    return array("q", starts).tobytes() + array("q", sums).tobytes()


def _blocks_of(raw: bytes, tokens: int) -> Blocks:
    """The line blocks of a kept row; ValueError when they are not cut points a count could have
    made (starting at line 0 and 0 tokens, lines rising, sums not falling nor over the count)."""
    if len(raw) % 16 or not raw:
        raise ValueError("not two equal arrays of int64")
    half = len(raw) // 2
    starts, sums = array("q"), array("q")
    starts.frombytes(raw[:half])
    sums.frombytes(raw[half:])
    if starts[0] != 0 or sums[0] != 0 or sums[-1] > tokens \
            or any(a >= b for a, b in pairwise(starts)) or any(a > b for a, b in pairwise(sums)):
        raise ValueError("not the cut points of a count")
    return starts, sums


def kept_counts(store: EventStore, run_id: str, version: int) -> dict[str, list[KeptCount]]:
    """The counts kept for ``run_id`` by encoding, of the counting scheme ``version`` only
    (``projections.tokens.COUNTS_VERSION``); rows that do not decode to a count are left out."""
    if not _has_table(store):
        return {}
    backend = store.backend
    p = backend.placeholder
    rows = backend.query(f"SELECT encoding, digest, tokens, blocks FROM {backend.table(TOKEN_COUNTS_TABLE)} "
                         f"WHERE run_id = {p}", (run_id,))
    found: dict[str, list[KeptCount]] = {}
    for key, digest, tokens, raw in rows:
        encoding, _, kept_version = str(key).rpartition("/")
        if kept_version != str(version) or not isinstance(tokens, int) or tokens < 0:
            continue
        digest = bytes(digest)
        try:
            blocks = None if raw is None else _blocks_of(bytes(raw), tokens)
        except ValueError:
            continue
        if len(digest) == 32:
            found.setdefault(encoding, []).append((encoding, digest, tokens, blocks))
    return found


def keep_counts(store: EventStore, run_id: str, version: int, counted: Sequence[KeptCount]) -> bool:
    """Keep ``counted`` for ``run_id`` under the counting scheme ``version``; whether rows were
    written. Best-effort: a store error writes nothing and is not raised (the command that
    counted has its result; only the next fold's speed is at stake)."""
    try:
        if not counted or not _has_table(store):
            return False
        _insert(store, run_id, version, counted)
    except StoreError:
        return False
    return True


def _insert(store: EventStore, run_id: str, version: int, counted: Iterable[KeptCount]) -> None:
    backend = store.backend
    p = backend.placeholder
    unique = {(enc, digest): (tokens, blocks) for enc, digest, tokens, blocks in counted}
    rows = [(run_id, f"{enc}/{version}", digest, tokens, _blocks_bytes(blocks))
            for (enc, digest), (tokens, blocks) in unique.items()]
    sql = (f"INSERT INTO {backend.table(TOKEN_COUNTS_TABLE)} (run_id, encoding, digest, tokens, blocks) "
           f"VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING")
    for start in range(0, len(rows), _BATCH):
        backend.execute_many(sql, rows[start:start + _BATCH], wait=False)  # a cache: never waited for
