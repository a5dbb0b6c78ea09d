"""A line longer than the grant stops its window, and the other window takes the rest of it.

One such line (a `set -x` echo first in a log, a source map last in a bundle) made every cut
whose head or tail share reached it fail: the search settled on a line or two and most of the
grant went unused (146 of 8,000 tokens for a failing build log)."""

from __future__ import annotations

import pytest

from contextfold.projections.code_fences import fence_states
from contextfold.projections.diagnose import lean_log
from contextfold.projections.line_windows import WindowChain, held_off
from contextfold.projections.truncate import truncate
from tests.counters import cl100k

GIANT = "+ gcc " + " ".join(f"-Iinclude/dir{i}" for i in range(3000))
STEPS = [f"step {i}: compiled src/module_{i}.c" for i in range(1000)]
BUDGET = 1500


def test_a_failing_log_whose_first_line_is_over_the_grant_fills_it_from_the_tail() -> None:
    log = "\n".join([GIANT, *STEPS, "src/x.c:3:5: error: expected ';'", "make: *** [all] Error 1"]) + "\n"
    cut = lean_log(log, 2, BUDGET, cl100k)
    assert cut.tokens <= BUDGET and cut.tokens > 0.9 * BUDGET
    assert "exit code: 2" in cut.text and cut.text.count("error: expected ';'") == 2  # header, tail
    (tail,) = cut.kept
    assert tail.end == len(STEPS) + 3 and tail.start < len(STEPS) - 50


@pytest.mark.parametrize("kind", ["log", "file", "markdown"])
def test_a_line_over_the_grant_at_either_end_leaves_the_grant_to_the_other_lines(kind: str) -> None:
    n = len(STEPS)
    for lines, whole in (([GIANT, *STEPS], range(2, n + 2)), ([*STEPS, GIANT], range(1, n + 1))):
        cut = truncate("\n".join(lines), BUDGET, kind=kind, count=cl100k)  # type: ignore[arg-type]
        assert cut.tokens <= BUDGET and cut.tokens > 0.9 * BUDGET, (kind, cut.kept)
        assert all(r.start in whole and r.end in whole for r in cut.kept)
        assert GIANT[:20] not in cut.text


def test_over_long_edges_are_told_and_the_usual_text_costs_no_count() -> None:
    """``held_off``: whether the lines a cut left out start and end with lines over the grant
    (then the words cut is tried); a text of short lines is told without counting a line."""
    lines = ["short", GIANT, "short", "short", GIANT, "short"]
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return cl100k(text)

    assert held_off(lines, 1, 5, BUDGET, count, lambda: 10)
    assert not held_off(lines, 1, 4, BUDGET, count, lambda: 10)  # ends with a short line
    assert not held_off(lines, 2, 2, BUDGET, count, lambda: 10)  # nothing left out
    calls.clear()
    assert not held_off(STEPS, 10, 990, BUDGET, count, lambda: 10)
    assert calls == []
    assert WindowChain(STEPS, lambda k: k // 3).split(300) == (100, 200)  # no long line: the share


@pytest.mark.parametrize("kind", ["text", "markdown"])
def test_short_lines_around_a_fenced_line_over_the_grant_give_way_to_words(kind: str) -> None:
    """Whole lines kept "Fix this:" and the fence's opener around a marker (28 of 2,500 tokens);
    the words cut keeps more, closes the fence before its marker and re-opens it after."""
    text = "Fix this:\n```python\n" + "total = total + 1; " * 3000 + "\n```\nThanks."
    cut = truncate(text, 300, kind=kind, count=cl100k)  # type: ignore[arg-type]
    out = cut.text.split("\n")
    marker = next(i for i, line in enumerate(out) if "characters omitted" in line)
    assert cut.strategy == "words" and cut.tokens > 250 and fence_states(out)[-1] is None
    assert out[marker - 1] == "```" and out[marker + 1] == "```python" and out[-2:] == ["```", "Thanks."]
