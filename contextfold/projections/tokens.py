"""Token counting with tiktoken, offline, cached by content hash.

Why a cache keyed by content, per encoding (one counter per encoding): the
builder counts the same fragment text on every build of every turn; tokenizing
it once per process turns a per-build cost into a per-new-content cost. The key
is the 32-byte blake3 digest of the text, or for a short text (tool names,
call arguments: up to ``_SHORT_TEXT`` characters) the text itself, which is
exact and saves hashing it on every count. ``TokenCounter.calls`` counts the
texts tokenized (a long multi-line text, tokenized in chunks of lines, is one) so a
benchmark can check that the number of calls per build equals the number of
distinct new contents (plus, when a build cuts a text by lines, the line blocks it
tokenizes once through ``count_uncached``).

Which encoding counts, never from the network: :mod:`contextfold.projections.offline_encodings`.

Counting uses ``encode_ordinary``: text that contains special-token strings
such as ``<|endoftext|>`` is counted as plain text, never rejected. A text holding a run of
thousands of blanks is counted in pieces, at most a few tokens high, since tiktoken panics on a
long one (:mod:`contextfold.projections.blank_runs`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
from array import array
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate, chain

import blake3
import tiktoken

from contextfold.domain.fork_locks import fork_safe_lock
from contextfold.projections.blank_runs import encoded_length
from contextfold.projections.line_counts import KnownBlocks, LineSplitting, split_lines
from contextfold.projections.memo_budget import memo_share
from contextfold.projections.offline_encodings import DEFAULT_ENCODING, encoding_available, load_encoding

__all__ = [
    "COUNTS_VERSION",
    "CacheStats",
    "CountedText",
    "TokenCounter",
    "content_hash",
    "counted_texts",
    "get_counter",
]


def content_hash(text: str | bytes) -> str:
    """blake3 hex digest of ``text`` (UTF-8 for str)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return blake3.blake3(data).hexdigest()


@dataclass(frozen=True, slots=True)
class CacheStats:
    calls: int
    """Tokenizer invocations (cache misses)."""
    hits: int
    size: int


class TokenCounter:
    """Counts tokens of text for one encoding, tokenizing each distinct content once.

    Thread-safe for reads and writes of the cache (a dict under a lock); two
    threads may both tokenize the same new text once, which only affects
    ``calls``.
    """

    __slots__ = ("__weakref__", "_block_bytes", "_blocks", "_cache", "_encoding", "_lock", "_short",
                 "_short_bytes", "calls", "encoding_name", "hits", "line_splitting")

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        if not encoding_available(encoding):
            encoding = DEFAULT_ENCODING
        self._encoding = load_encoding(encoding)
        self.encoding_name: str = encoding
        self._cache: dict[bytes, int] = {}
        self._short: dict[str, int] = {}
        self._blocks: dict[bytes, KnownBlocks] = {}
        """Where long multi-line texts were cut to be counted (``_count_lines``), by text key."""
        self._block_bytes = 0
        self._short_bytes = 0
        """What ``_blocks`` and ``_short`` hold (estimated bytes): their entries vary in size."""
        self._lock = fork_safe_lock(self._forget_counts)
        self.calls = 0
        self.hits = 0
        self.line_splitting: LineSplitting | None = None
        """How this encoding lets a text of whole lines be counted by line blocks
        (:mod:`~contextfold.projections.line_counts`); None for a pre-tokenizer we have not
        derived a rule for (then truncation counts each candidate whole)."""
        # ``_pat_str`` is private to tiktoken (its own code reads it); a version without it, or
        # with another pattern, lends no rule and truncation counts each candidate whole.
        if getattr(self._encoding, "_pat_str", None) == _CL100K_PATTERN:
            rule = LineSplitting(_splits_before, self.count_uncached, self.known_blocks, word_ends=True)
            self.line_splitting = (dataclasses.replace(rule, alike=_zero_digits)
                                   if _digits_alike(self._encoding) else rule)

    def count(self, text: str) -> int:
        if not text:
            return 0
        short = len(text) <= _SHORT_TEXT
        if short:
            # short texts (tool names, call arguments) are their own key: no hashing per count
            cached = self._short.get(text)
            key = b""
        else:
            key = blake3.blake3(text.encode("utf-8")).digest()  # 32 bytes: half a hex key's memory
            cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
            return cached
        blocks = None
        if len(text) >= _LINE_COUNTED_TEXT and self.line_splitting is not None and "\n" in text:
            n, blocks = self._count_lines(text)
        else:
            n = encoded_length(self._encoding.encode_ordinary, text, self.encoding_name)
        with self._lock:
            if short:
                if len(self._short) >= _SHORT_COUNTS_LIMIT or self._short_bytes >= _SHORT_COUNTS_BYTES:
                    self._short.clear()
                    self._short_bytes = 0
                self._short[text] = n
                self._short_bytes += (len(text) if text.isascii() else 4 * len(text)) + _SHORT_ENTRY_BYTES
            else:
                journal = getattr(_JOURNAL, "rows", None)
                if journal is not None:
                    journal.append((self.encoding_name, key, n, blocks))
                if len(self._cache) >= _COUNTS_LIMIT:
                    self._cache.clear()
                self._cache[key] = n
                if blocks is not None:
                    self._keep_blocks(key, blocks)
            self.calls += 1
        return n

    def _count_lines(self, text: str) -> tuple[int, KnownBlocks]:
        """Tokens of ``text``, counted in chunks of whole lines cut before lines the encoding
        splits before (so the sum is the whole text's count, as ``line_counts`` proves), and
        where it was cut. Why: a long tool output is cut again and again as a run's window
        slides past it, and each first cut tokenized its line blocks once more; with the
        chunks known the truncation counts only the edges of its windows. Chunks of at least
        ``_CHUNK_CHARS`` keep the tokenizer calls few: over the 2,332 long multi-line texts of
        ``../shared/traces`` (18 M characters) this took as long as counting each whole (4.03
        vs 3.99-4.10 s here), with the same counts."""
        lines, trailing = split_lines(text)
        bounds = [0]
        chars = len(lines[0])
        for i in range(1, len(lines)):
            line = lines[i]
            if chars >= _CHUNK_CHARS and _splits_before(line):
                bounds.append(i)
                chars = 0
            chars += len(line) + 1
        bounds.append(len(lines))
        encode, name = self._encoding.encode_ordinary, self.encoding_name
        last = len(bounds) - 2
        end = "\n" if trailing else ""

        def chunk(j: int) -> str:
            return "\n".join(lines[bounds[j]:bounds[j + 1]]) + ("\n" if j < last else end)

        def count_chunks(first: int, stop: int) -> list[int]:
            return [encoded_length(encode, chunk(j), name) for j in range(first, stop)]

        workers = _workers() if len(text) >= _PARALLEL_TEXT else 1
        counts: Iterable[int] | None = None
        if workers > 1:
            # A very long text's chunks in contiguous shares, one per thread (tiktoken releases
            # the GIL while it encodes): a 50 MB output took ~6 s on one core, paid by the first
            # build after it was appended; two cores count it ~1.6x faster. A pool per text:
            # its threads end with it, and a process forked later inherits no pool.
            step = -(-(last + 1) // workers)
            firsts = range(0, last + 1, step)
            try:
                with ThreadPoolExecutor(workers, thread_name_prefix="contextfold-count") as pool:
                    counts = chain.from_iterable(list(pool.map(
                        count_chunks, firsts, [min(first + step, last + 1) for first in firsts])))
            except RuntimeError:  # no thread to be had (a thread limit, interpreter shutdown)
                counts = None
        if counts is None:
            counts = count_chunks(0, last + 1)
        sums = array("q", accumulate(counts, initial=0))
        return sums.pop(), (array("q", bounds[:-1]), sums)

    def preload(self, rows: Iterable[CountedText]) -> int:
        """Take counts made earlier (by another process: ``store.token_counts``) as if this
        counter had made them; returns how many were new to it. Rows of another encoding are
        the caller's error. Why: a 10,000-event run's fold spent ~4 of its ~5 s tokenizing
        texts that an earlier process had counted already, on every resume and CLI command."""
        added = 0
        with self._lock:
            for encoding, key, n, blocks in rows:
                if encoding != self.encoding_name:
                    raise ValueError(f"counts of {encoding!r} offered to the {self.encoding_name!r} counter")
                if key in self._cache:
                    continue
                if len(self._cache) >= _COUNTS_LIMIT:
                    self._cache.clear()
                self._cache[key] = n
                added += 1
                if blocks is not None:
                    self._keep_blocks(key, blocks)
        return added

    def _keep_blocks(self, key: bytes, blocks: KnownBlocks) -> None:
        """Remember where the text of ``key`` was cut into line blocks, the table starting over
        past ``_KNOWN_BLOCKS_BYTES``. Called with ``_lock`` held."""
        if self._block_bytes >= _KNOWN_BLOCKS_BYTES:
            self._blocks.clear()
            self._block_bytes = 0
        self._blocks[key] = blocks
        self._block_bytes += 16 * len(blocks[0]) + _BLOCKS_ENTRY_BYTES

    def known_blocks(self, text: str) -> KnownBlocks | None:
        """Where :meth:`count` cut ``text`` to count it, if it did (``LineSplitting.known``)."""
        if len(text) < _LINE_COUNTED_TEXT:
            return None
        return self._blocks.get(blake3.blake3(text.encode("utf-8")).digest())

    def count_uncached(self, text: str) -> int:
        """Tokens of ``text``, tokenized now and not kept: for texts whose owner keeps the count
        (a truncation's line blocks), which would only grow the cache."""
        n = encoded_length(self._encoding.encode_ordinary, text, self.encoding_name)
        with self._lock:
            self.calls += 1
        return n

    def stats(self) -> CacheStats:
        return CacheStats(calls=self.calls, hits=self.hits, size=len(self._cache) + len(self._short))

    def clear(self) -> None:
        """Drop the cache and reset the counters (benchmarks start from cold)."""
        with self._lock:
            self._forget_counts()
            self.calls = 0
            self.hits = 0

    def _forget_counts(self) -> None:
        """Drop the counts and line blocks kept (under ``_lock``, or in a forked child whose
        parent's thread held it: its table may be half written, :mod:`~contextfold.domain.fork_locks`)."""
        self._cache.clear()
        self._short.clear()
        self._blocks.clear()
        self._block_bytes = self._short_bytes = 0


_CL100K_PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
                   r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
"""cl100k_base's pre-tokenizer as tiktoken ships it; :func:`_splits_before` is derived from it."""


def _workers() -> int:
    """Threads for counting one very long text: the CPUs this process may run on, at most 8."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cpus, 8)


def _splits_before(line: str) -> bool:
    """For cl100k_base: no regex piece spans the newline before ``line``.

    The pieces that can hold a newline are whitespace runs (``\\s*[\\r\\n]``, ``\\s++$``) and a
    punctuation run's trailing ``[\\r\\n]*+``. After ``"\\n"`` they stop at the first character
    that is neither a newline nor (through ``\\s*``) whitespace leading to one; the pattern has
    no look-behind, so ``line``'s own pieces are the same wherever it starts. So the newline
    ends its piece when ``line``'s leading whitespace holds no ``\\r`` or ``\\n`` and something
    other than whitespace follows it. (``str.isspace`` covers the regex's ``\\s`` and more,
    which only makes this stricter.)
    """
    body = line.lstrip()
    if not body:
        return False
    lead = len(line) - len(body)
    return lead == 0 or ("\r" not in line[:lead] and "\n" not in line[:lead])


# Word ends (``LineSplitting.word_ends``), for cl100k_base: a letter or digit is only ever in a
# letter run (``[^\r\n\p{L}\p{N}]?+\p{L}++``, possessive), a contraction (``'s``, ``'ll``...) or a
# digit group (``\p{N}{1,3}+``); none continues past a character that is neither a letter nor a
# digit, so a piece ends after an ASCII letter or digit that such an ASCII character follows.
# The next piece starts there and, the pattern having no look-behind, is the same in the rest
# alone; the last piece of the part before is the same at the end of that part (its match never
# looked further than the character after it). So both parts' pieces are the whole's, and
# their counts add up (tested on random texts against tiktoken).

_ZEROS = bytes.maketrans(b"123456789", b"000000000")


def _zero_digits(text: str) -> bytes:
    """The UTF-8 of ``text`` with every ASCII digit made ``0`` (that text has as many tokens as
    ``text`` when :func:`_digits_alike` holds). Bytes: their ``translate`` is ten times faster
    than a str's, and a key is all it is needed for."""
    return text.encode().translate(_ZEROS)


@functools.cache  # an encoding is loaded once per name (``load_encoding``): checked once per process
def _digits_alike(encoding: tiktoken.Encoding) -> bool:
    """Whether ``_zero_digits`` keeps every count, for an encoding with cl100k_base's pattern.

    Why it can: in that pattern digits form pieces of their own (``\\p{N}{1,3}+``; no other
    alternative takes a digit), every digit is ``\\p{N}`` to every alternative, so the text's
    pieces start and end at the same places with its digits zeroed, and each piece is encoded
    alone. So the counts agree when every string of one to three digits counts as the zeros of
    its length: checked here on the vocabulary (1,110 strings, ~2 ms, once per encoding)."""
    encode = encoding.encode_ordinary
    return all(len(encode(f"{i:0{width}d}")) == len(encode("0" * width))
               for width in (1, 2, 3) for i in range(10 ** width))


_SHORT_TEXT = 256
"""Texts up to this many characters are cached by the text itself, longer ones by blake3."""
_PARALLEL_TEXT = 1 << 20
"""Multi-line texts from this many characters on have their chunks counted by several threads
(``_count_lines``): ~0.1 s of counting or more, against ~0.2 ms to start a pool."""
_SHORT_COUNTS_LIMIT = 250_000
_COUNTS_LIMIT = 500_000
"""Counts kept per counter, of short texts (by the text) and of long ones (by a 32-byte digest),
before that table starts over; and no more than the bytes of their shares of the memo ceiling
(``_SHORT_COUNTS_BYTES``, ``_COUNTS_BYTES``: :mod:`contextfold.projections.memo_budget`, split between the
counters of the encodings in use), which set the bound at the default ceiling. A counter lives
as long as the process and serves every run it builds for, so a table without a bound grew by
every distinct text counted (a 10,000-message run holds ~20,000; a table that starts over costs
a recount)."""
_SHORT_ENTRY_BYTES = 64 + sys.getsizeof("")
"""A short count's cost besides its text's characters (counted as ``bounded_memo.str_bytes`` does,
without its call: ``isascii`` is O(1)): the str's header, its slot in the table and its int."""
_COUNT_ENTRY_BYTES = 200
"""A long text's count: its 33-byte digest object (65 bytes), its int, its slot in the table."""
_BLOCKS_ENTRY_BYTES = 400
"""A long text's line blocks besides their 16 bytes a chunk: its digest, two arrays and a tuple."""
_SHORT_COUNTS_BYTES = 0
_KNOWN_BLOCKS_BYTES = 0
"""Set by ``_bound`` from the memo ceiling."""
_LINE_COUNTED_TEXT = 2048
"""Multi-line texts from this many characters on are counted by chunks of lines (``_count_lines``):
shorter ones are rarely cut, and one call counts them."""
_CHUNK_CHARS = 128
"""Where long texts were cut into line blocks is kept up to ``_KNOWN_BLOCKS_BYTES`` (16 bytes a
chunk start and an entry's cost: a 10,000-message run's long outputs keep ~400,000 starts,
~7 MB) before the table starts over."""

CountedText = tuple[str, bytes, int, "KnownBlocks | None"]
"""One text a counter tokenized: (encoding, blake3 digest of its UTF-8, tokens, where it was cut
into line blocks to be counted or None). What ``counted_texts`` collects and ``preload`` takes."""

COUNTS_VERSION = 2
"""How a kept count's line blocks were cut (``_CHUNK_CHARS``, the split rule) and how a text was
counted: counts kept by a store under another version are not read back. Bump it when either
changes. 2: long runs of blanks counted in pieces (``blank_runs``), where 1 counted them whole."""

_JOURNAL = threading.local()


@contextmanager
def counted_texts() -> Iterator[list[CountedText]]:
    """Collect the long texts this thread tokenizes inside the block (any counter), to be kept
    by the store for the next process (``TokenCounter.preload``). Short texts (keyed by
    themselves) are not collected: they cost little to count again. What a nested block
    collects, the block around it collects too."""
    outer = getattr(_JOURNAL, "rows", None)
    rows: list[CountedText] = []
    _JOURNAL.rows = rows
    try:
        yield rows
    finally:
        _JOURNAL.rows = outer
        if outer is not None:
            outer.extend(rows)


_COUNTERS: dict[str, TokenCounter] = {}
_COUNTERS_LOCK = fork_safe_lock()


def get_counter(encoding: str | None = None) -> TokenCounter:
    """The process-wide counter for ``encoding`` (falls back to cl100k_base when the
    encoding cannot be loaded offline; ``counter.encoding_name`` says which one counts)."""
    name = encoding if encoding and encoding_available(encoding) else DEFAULT_ENCODING
    with _COUNTERS_LOCK:
        counter = _COUNTERS.get(name)
        if counter is None:
            counter = _COUNTERS[name] = TokenCounter(name)
            _bound()  # the counters split the shares
        return counter


def _bound(_changed: int = 0) -> None:
    """Each counter's bounds: the counts' and blocks' shares of the memo ceiling, split between the
    process-wide counters (one per encoding in use); the tables over them start over now."""
    global _SHORT_COUNTS_BYTES, _COUNTS_LIMIT, _KNOWN_BLOCKS_BYTES
    split = max(1, len(_COUNTERS))
    _SHORT_COUNTS_BYTES = memo_share("token_counts_short") // split
    _COUNTS_LIMIT = min(500_000, memo_share("token_counts") // split // _COUNT_ENTRY_BYTES)
    _KNOWN_BLOCKS_BYTES = memo_share("token_blocks") // split
    for counter in list(_COUNTERS.values()):
        with counter._lock:
            if (len(counter._cache) > _COUNTS_LIMIT or counter._short_bytes > _SHORT_COUNTS_BYTES
                    or counter._block_bytes > _KNOWN_BLOCKS_BYTES):
                counter._forget_counts()


memo_share("token_counts", _bound)  # called again whenever the ceiling changes
_bound()
