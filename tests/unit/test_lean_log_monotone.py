"""A failing log cut to a larger grant never shows fewer of its characters, and keeps every line
a smaller grant kept while both keep lines.

Why: the lean log took the richest header that left room for one line, so one more token could
take a richer header and keep fewer lines, or fewer characters of an excerpt; an excerpt (when
no line fits) filled its room and the first room that kept a line kept it alone; and an excerpt
was dropped where the log's lines were shorter than the room. Every one of the 39 SWE-agent
observations of more than 30 lines lost characters so between grants of 10 and 600 (152 drops:
a richer header 85 times, a first line after an excerpt 67). The header is now chosen by the
grant and the log's part gets a room that never shrinks (``log_headers.header_plan``); an
excerpt is held to what the next room that keeps more lines keeps (``diagnose._capped``).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.diagnose import lean_log
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import Truncation
from tests.swe_observations import long_observations

COUNTER = get_counter("cl100k_base")


def _shown(log: str, cut: Truncation) -> tuple[int, set[int] | None]:
    """The characters of ``log`` the cut shows (a line a line break more), and its lines (None
    for an excerpt's characters)."""
    if cut.unit == "char":
        return len(log) - cut.omitted_chars, None
    lines = log.split("\n")
    kept = {i for r in cut.kept for i in range(r.start, r.end + 1)}
    return sum(len(lines[i - 1]) + 1 for i in kept), kept


def _assert_grows(log: str, exit_code: int | None, grants: range, rule: bool = True) -> None:
    last: tuple[int, int, set[int] | None] | None = None
    for grant in grants:
        cut = lean_log(log, exit_code, grant, COUNTER.count, artifact_ref="artifact:abc",
                       line_splitting=COUNTER.line_splitting if rule else None)
        if cut.over_budget:
            continue
        assert cut.tokens <= grant and COUNTER.count(cut.text) == cut.tokens
        chars, lines = _shown(log, cut)
        if last is not None:
            assert chars >= last[1], f"grant {grant} shows {chars} characters, grant {last[0]} {last[1]}"
            if lines is not None and last[2] is not None:
                assert last[2] <= lines, f"grant {grant} dropped lines {sorted(last[2] - lines)[:8]}"
        last = (grant, chars, lines)


def test_real_observations_show_no_less_at_a_larger_grant() -> None:
    texts = long_observations()
    assert len(texts) >= 30
    for text in texts:
        _assert_grows(text, 1, range(10, 400))


_word = st.text(st.sampled_from("abcdefgh ijk,.:()=_0123456789"), min_size=0, max_size=30)
_line = st.one_of(_word, _word.map(lambda w: (w + " lorem ipsum ") * 25),
                  st.sampled_from(["Traceback (most recent call last):", '  File "x.py", line 3, in f',
                                   "ValueError: bad value", "error: cannot build", "FAILED tests/t.py::t"]))


@settings(max_examples=40, deadline=None)
@given(lines=st.lists(_line, min_size=2, max_size=40), first=st.integers(5, 200),
       exit_code=st.sampled_from([None, 0, 1, 2]), rule=st.booleans())
def test_a_larger_grant_never_shows_less(lines: list[str], first: int, exit_code: int | None,
                                         rule: bool) -> None:
    """Every grant of a stretch (the switches are at single grants), fresh."""
    truncate_module._PROBES.clear()
    _assert_grows("\n".join(lines) + "\n", exit_code, range(first, first + 60), rule)
