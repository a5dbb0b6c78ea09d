"""What a counter tokenized can be collected and given to another counter (a later process)
as if it had counted it: same counts, same line blocks, no tokenizing."""

from __future__ import annotations

import pytest

from contextfold.projections.tokens import TokenCounter, counted_texts

LOG = "\n".join(f"{i:05d} error: linking crate_{i} failed, see above" for i in range(400))


def test_counts_collected_in_one_counter_are_taken_by_another_without_tokenizing() -> None:
    first = TokenCounter("cl100k_base")
    with counted_texts() as outer:
        first.count("short")  # keyed by itself: not collected
        with counted_texts() as inner:
            n = first.count(LOG)
        first.count(LOG)  # already counted: nothing new to collect
    assert [(e, t) for e, _, t, _ in inner] == [("cl100k_base", n)]
    assert outer == inner  # a nested block's texts are the outer block's too
    blocks = inner[0][3]
    assert blocks is not None and len(blocks[0]) > 1  # counted in line blocks

    later = TokenCounter("cl100k_base")
    assert later.preload(inner) == 1
    assert later.preload(inner) == 0  # already known
    with counted_texts() as tokenized:
        assert later.count(LOG) == n
    assert tokenized == [] and later.calls == 0
    assert later.known_blocks(LOG) == blocks


def test_counts_of_another_encoding_are_refused() -> None:
    counter = TokenCounter("cl100k_base")
    with pytest.raises(ValueError, match="o200k_base"):
        counter.preload([("o200k_base", b"\0" * 32, 5, None)])
