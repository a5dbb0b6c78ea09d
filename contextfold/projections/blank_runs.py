"""Token counts of texts that hold a very long run of blanks, which tiktoken cannot encode whole.

Why: tiktoken's pre-tokenizer (cl100k_base's and o200k_base's ``\\s+(?!\\S)``) backtracks
through a run of whitespace that holds no line break and is followed by a non-blank, one
regex stack entry per character; from about half a million characters on it overflows and
tiktoken *panics* (``pyo3_runtime.PanicException``, a ``BaseException``: openai/tiktoken#15). A
tool output with a space-padded fixed-width export or a page with a huge blank stretch made
every build, preview, state and compaction of its run die the same way, for good (the log is
append-only). And long before that, a run is one piece that tiktoken's BPE merges in more than
linear time (200,000 spaces: 0.35 s, 1,000,000: 2.6 s).

How: every maximal run of at least :data:`LONG_RUN` blanks (:data:`BLANKS`: whitespace other than
``\\r`` and ``\\n``, as the regex crate's ``\\s`` reads it) is counted apart from the text around it,
in pieces of :data:`LONG_RUN` characters; the run's last character stays with the text after it.
The count is then the sum of the parts' counts plus one token per cut (:func:`cuts`).

Why that is an upper bound: the text before a run ends where tiktoken ends a piece (no piece that
starts at a non-blank takes a blank after it, and a line break's piece stops at the last break
before the run when no break follows it), and the text from the run's last character on starts
where it starts one (the run's other characters are ``\\s+(?!\\S)``'s piece when a non-blank
follows; the pattern has no look-behind). Where a break or the text's end follows the run, the
run is part of one larger whitespace piece, and the parts split it. Splitting a piece changes its
BPE count by a token or two either way, so a cut earns one token of slack: checked against
tiktoken's whole count (where it does not panic) on runs of each blank character alone, every
13th length from 4,096 to 12,600, between four kinds of neighbours (no cut needed the slack), and
on 1,500 random mixes of blanks, breaks and neighbours (none needed more than one token of its
two or more; ``tests/unit/test_blank_runs.py``). The budget promise ("never over budget") holds
with a count that is at most a few tokens high.

Why the counts add up as whole texts' counts do: a run never holds a line break, and its cuts are
placed from its own start, so a text cut at a line start or a word end (``LineSplitting``) counts
as the sum of its two parts, as without runs.

The common text has no long run, and finding that costs a few microseconds a megabyte: a run of
at least :data:`LONG_RUN` characters covers a whole stretch of ``LONG_RUN // 2`` characters from a
multiple of ``LONG_RUN // 2`` on, so only the characters at those multiples are looked at, and
a run is read only from a blank found there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sized

from contextfold.domain.errors import TokenizerError

__all__ = ["BLANKS", "LONG_RUN", "cuts", "encoded_length", "long_blank_runs"]

BLANKS = ("\t\x0b\x0c \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
          + "\u2028\u2029\u202f\u205f\u3000")
"""Unicode White_Space (the regex crate's ``\\s``) but ``\\r`` and ``\\n``: what a run that makes
tiktoken's pre-tokenizer backtrack is made of (a break ends its backtracking)."""
_BLANK_SET = frozenset(BLANKS)
_BLANKS_FROM = re.compile("[" + re.escape(BLANKS) + "]*+")

LONG_RUN = 4096
"""Runs of blanks from this many characters on are counted apart, in pieces of this many: far
below where tiktoken panics (~500,000), and short enough that BPE takes linear time (4,096
spaces: 0.6 ms)."""
_STRIDE = LONG_RUN // 2


def long_blank_runs(text: str) -> list[tuple[int, int]]:
    """The maximal runs of :data:`BLANKS` of at least :data:`LONG_RUN` characters in ``text``,
    as (start, end), in order."""
    runs: list[tuple[int, int]] = []
    if len(text) < LONG_RUN:
        return runs
    end = 0
    for k, char in enumerate(text[::_STRIDE]):
        at = k * _STRIDE
        if at < end or char not in _BLANK_SET:
            continue
        found = _BLANKS_FROM.match(text, at)
        stop = at if found is None else found.end()
        if stop - at < _STRIDE:  # a long run would cover the stretch from here
            continue
        start = at  # the run started after the last multiple of the stride looked at
        while start > end and text[start - 1] in _BLANK_SET:
            start -= 1
        if stop - start >= LONG_RUN:
            runs.append((start, stop))
        end = stop
    return runs


def cuts(start: int, end: int) -> int:
    """Where the run ``text[start:end]`` is cut to be counted: at its start, between its pieces
    and before its last character; one token of slack each."""
    return 1 + -(-(end - 1 - start) // LONG_RUN)


def encoded_length(encode: Callable[[str], Sized], text: str, encoding: str) -> int:
    """Tokens of ``text`` by ``encode`` (an encoding's ``encode_ordinary``): exact, unless the text
    holds a long run of blanks, then at most a few tokens more (see the module doc).

    A panic of tiktoken is raised as :class:`~contextfold.domain.errors.TokenizerError`: it is a
    ``BaseException``, which the callers' ``except Exception`` (the CLI's error report, a server's
    request handler) would let through."""
    runs = long_blank_runs(text)
    try:
        if not runs:
            return len(encode(text))
        total = last = 0
        for start, end in runs:
            total += len(encode(text[last:start])) + cuts(start, end)
            for at in range(start, end - 1, LONG_RUN):
                piece = text[at:min(at + LONG_RUN, end - 1)]
                n = _PIECES.get((encoding, piece))
                if n is None:
                    n = len(encode(piece))
                    if len(_PIECES) >= _PIECES_KEPT:
                        _PIECES.clear()
                    _PIECES[encoding, piece] = n
                total += n
            last = end - 1
        return total + len(encode(text[last:]))
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        raise TokenizerError(encoding, len(text), str(exc)) from exc


_PIECES: dict[tuple[str, str], int] = {}
"""Counts of the pieces runs were cut into, by encoding and piece. Why: BPE takes ~0.75 us a
blank of a long piece, and a run of one character is the same piece over and over, in the text
and in each candidate a truncation counts (a preview cutting a million spaces to a small grant
counted 2,100 pieces, 7 s; with each counted once, 0.4 s). A plain dict: its reads and writes are
atomic, and a forked child's copy holds only true counts."""
_PIECES_KEPT = 256
"""Pieces whose counts are kept (a million characters at most) before the table starts over."""
