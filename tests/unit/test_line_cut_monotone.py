"""A larger grant keeps every line a smaller one kept: the line cut's windows grow along one chain.

Why: the windows stopped before a line over the grant, the other window taking the rest, and where
they stopped depended on the grant: a line over one grant fits a larger one, so the larger grant
cut along other windows and kept fewer lines. A 103-line file read (SWE-agent's ``rock`` demo)
kept its last three lines at 35 tokens and its first and last line at 36 (its first line, 22
tokens, no longer over the grant); 17 of the 39 distinct observations of more than 30 lines in
the SWE-agent trajectories broke the promise at some grant as a file, 11 as a log. The windows
now grow along a chain that is the same at every grant (``line_windows.WindowChain``): a long
line waits until the windows hold as many characters as it has.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.line_windows import WindowChain
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import Truncation, truncate
from tests.conftest import TRACES

COUNTER = get_counter("cl100k_base")
SWE = TRACES / "swe-agent-demos" / "trajectories" / "demonstrations" / "ctf"


def _observations(*names: str) -> list[str]:
    """The observations of more than 30 lines in these SWE-agent demonstrations."""
    out: list[str] = []
    for name in names:
        paths = sorted(SWE.rglob(name))
        if not paths:  # as every trace test: the quick start's clone has no ../shared/traces
            pytest.skip(f"SWE-agent traces not present at {SWE} (set CONTEXTFOLD_TRACES)")
        steps: list[dict[str, Any]] = json.loads(paths[0].read_text())["trajectory"]
        out += [o for step in steps if (o := step.get("observation") or "").count("\n") > 30]
    return out


def _lines(cut: Truncation) -> set[int] | None:
    """The lines ``cut`` kept; None for a cut that kept characters (a words cut)."""
    if cut.unit != "line":
        return None
    return {i for r in cut.kept for i in range(r.start, r.end + 1)}


def _assert_grows(cuts: list[tuple[int, Truncation]]) -> None:
    kept: tuple[int, set[int]] | None = None
    for grant, cut in cuts:
        assert cut.over_budget or cut.tokens <= grant
        lines = _lines(cut)
        if lines is None:
            continue
        if kept is not None:
            assert kept[1] <= lines, (f"grant {grant} dropped lines {sorted(kept[1] - lines)[:8]} "
                                      f"that grant {kept[0]} kept")
        kept = (grant, lines)


@pytest.mark.parametrize("kind", ["file", "log"])
def test_real_observations_keep_at_each_grant_the_lines_of_the_grants_below(kind: str) -> None:
    texts = _observations("rock.traj", "networking_1.traj")
    assert len(texts) >= 4
    for text in texts:
        _assert_grows([(g, truncate(text, g, kind=kind, count=COUNTER.count,  # type: ignore[arg-type]
                                    line_splitting=COUNTER.line_splitting)) for g in range(10, 90)])


_words = st.text(st.sampled_from("abcdefgh ijk ,.:()=_0123456789"), min_size=0, max_size=40)
_line = st.one_of(_words, _words.map(lambda w: (w + " lorem ipsum dolor ") * 12),
                  _words.map(lambda w: (w + " sit amet, consectetur ") * 60))


@settings(max_examples=60)
@given(lines=st.lists(_line, min_size=2, max_size=60), grants=st.lists(st.integers(8, 700), min_size=2,
                                                                         max_size=5, unique=True),
       kind=st.sampled_from(["file", "log", "markdown"]), in_a_row=st.booleans())
def test_a_larger_grant_never_drops_a_line_a_smaller_one_kept(lines: list[str], grants: list[int], kind: str,
                                                               in_a_row: bool) -> None:
    """Lines of a few characters, a few hundred and a few thousand (over most grants), in any
    order; cut fresh or one after another (the probe memo shared), by lines counted whole or by
    line blocks."""
    text = "\n".join(lines) + "\n"
    cuts: list[tuple[int, Truncation]] = []
    for grant in sorted(grants):
        if not in_a_row:
            truncate_module._PROBES.clear()
        cuts.append((grant, truncate(text, grant, kind=kind, count=COUNTER.count,  # type: ignore[arg-type]
                                     line_splitting=COUNTER.line_splitting if in_a_row else None)))
    _assert_grows(cuts)


def test_the_chain_is_the_share_until_a_long_line_and_grows_by_one_line_a_step() -> None:
    short = [f"line {i}" for i in range(50)]
    for lines in (short, ["x" * 5_000, *short], [*short, "y" * 5_000], [*short[:20], "z" * 400, *short[20:]]):
        chain = WindowChain(lines, lambda k: k // 3)
        last = (0, 0)
        for k in range(len(lines) + 1):
            head, tail = chain.split(k)
            assert head + tail == k and head - last[0] in (0, 1) and tail - last[1] in (0, 1)
            if lines is short:
                assert head == k // 3
            last = (head, tail)
    first_long = WindowChain(["x" * 5_000, *short], lambda k: k // 2)
    assert first_long.split(50) == (0, 50) and first_long.split(51) == (1, 50)  # it waits to the end
    wide = [f"line {i:03d} " + "w" * 12 for i in range(80)]  # 21 characters a line, newline too
    lines = [*wide[:20], "z" * 1000, *wide[20:]]
    mid_long = WindowChain(lines, lambda k: k // 2)

    def kept_chars(k: int) -> int:
        head, tail = mid_long.split(k)
        return sum(len(line) + 1 for line in lines[:head] + lines[len(lines) - tail:])

    heads = [mid_long.split(k)[0] for k in range(len(lines) + 1)]
    waited = heads.index(21)  # the long line, taken once the windows hold as many characters
    assert heads[waited - 1] == 20 and kept_chars(waited - 2) < 1_000 <= kept_chars(waited - 1)
