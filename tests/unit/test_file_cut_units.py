"""A file cut at a larger grant never shows fewer of its characters, and once it keeps lines it
keeps lines: the words cut of the grants too small for any line grows only to what the first
grant that keeps a line keeps.

Why: a file keeps whole lines while any fits, and a grant that fits none keeps a head and a
tail of its characters (``truncate_words``), which fill the grant. The first grant that kept a
line kept that line alone (the file's last, a few characters), so one more token showed fewer
characters: 25 of the 39 observations of more than 30 lines in the SWE-agent trajectories
dropped so, 114 characters at 33 tokens to 90 at 34, 15 to 3.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate
from tests.swe_observations import long_observations, shown_chars

COUNTER = get_counter("cl100k_base")


def _assert_continuous(text: str, grants: list[int], rule: bool = True) -> None:
    last: tuple[int, int, str] | None = None
    for grant in sorted(grants):
        cut = truncate(text, grant, kind="file", count=COUNTER.count,
                       line_splitting=COUNTER.line_splitting if rule else None)
        assert cut.over_budget or cut.tokens <= grant
        if cut.over_budget:
            continue
        now = (grant, shown_chars(text, cut), cut.unit)
        if last is not None:
            assert now[1] >= last[1], f"grant {grant} shows {now[1]} characters, grant {last[0]} {last[1]}"
            assert not (last[2] == "line" and now[2] == "char"), f"grant {grant} went back to words"
        last = now


def test_real_observations_show_no_fewer_characters_at_a_larger_grant() -> None:
    texts = long_observations()
    assert len(texts) >= 30
    for text in texts:
        _assert_continuous(text, list(range(4, 120)))


_word = st.text(st.sampled_from("abcdefgh ijk,.:()=_0123456789"), min_size=0, max_size=30)
_line = st.one_of(_word, _word.map(lambda w: (w + " lorem ipsum ") * 20))


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(_line, min_size=2, max_size=40), first=st.integers(1, 60), rule=st.booleans())
def test_a_larger_grant_never_shows_fewer_characters_nor_goes_back_to_words(lines: list[str], first: int,
                                                                            rule: bool) -> None:
    """Every grant of a stretch from the small ones on (the switch is at one grant), fresh."""
    truncate_module._PROBES.clear()
    _assert_continuous("\n".join(lines) + "\n", list(range(first, first + 80)), rule)
