"""A log, markdown or text cut at a larger grant never shows fewer of the text's characters.

Why: these kinds keep whole lines while any fits, and at a grant that fits none (or only the
short lines around over-long ones) they keep a head and a tail of the text's characters
(``truncate_words``), which fill the grant. The first grant that kept a line kept that line
alone (a few characters), so one more token showed fewer characters. A file's cut was held to
the rule (``truncate_words.words_below_lines``); these kinds now are too. The same check as
``test_file_cut_units``, per kind, over the SWE-agent observations and synthetic texts.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import ContentKind, truncate
from tests.swe_observations import long_observations, shown_chars

COUNTER = get_counter("cl100k_base")
KINDS: tuple[ContentKind, ...] = ("log", "markdown", "text")


def _assert_never_fewer(text: str, kind: ContentKind, grants: list[int], rule: bool = True) -> None:
    last: tuple[int, int] | None = None
    for grant in sorted(grants):
        cut = truncate(text, grant, kind=kind, count=COUNTER.count,
                       line_splitting=COUNTER.line_splitting if rule else None)
        if cut.over_budget:
            continue
        assert cut.tokens <= grant
        now = (grant, shown_chars(text, cut))
        if last is not None:
            assert now[1] >= last[1], (
                f"{kind}: grant {grant} shows {now[1]} characters, grant {last[0]} {last[1]}")
        last = now


@pytest.mark.parametrize("kind", KINDS)
def test_real_observations_show_no_fewer_characters_at_a_larger_grant(kind: ContentKind) -> None:
    texts = long_observations()
    assert len(texts) >= 30
    for text in texts:
        _assert_never_fewer(text, kind, list(range(4, 120)))


_word = st.text(st.sampled_from("abcdefgh ijk,.:()=_0123456789"), min_size=0, max_size=30)
_line = st.one_of(_word, _word.map(lambda w: (w + " lorem ipsum ") * 20), st.just("```python"),
                  st.just("```"))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), lines=st.lists(_line, min_size=2, max_size=40),
       first=st.integers(1, 60), rule=st.booleans())
def test_a_larger_grant_never_shows_fewer_characters(kind: ContentKind, lines: list[str], first: int,
                                                     rule: bool) -> None:
    """Every grant of a stretch from the small ones on (the switch is at one grant), fresh."""
    truncate_module._PROBES.clear()
    _assert_never_fewer("\n".join(lines) + "\n", kind, list(range(first, first + 80)), rule)
