"""A cut of a stale rest names the file's lines: its note and its markers are not the file's."""

from __future__ import annotations

import re

import pytest

from contextfold.domain.events import AnyEvent, FileRead, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.file_lines import FileLines
from contextfold.projections.fold import fold
from contextfold.projections.stale_reads import NewerRead, cut_read, rest_lines, text_lines
from contextfold.projections.state import RunState
from contextfold.projections.truncate import truncate
from tests.counters import cl100k
from tests.json_strings import strings

BIG = "".join(f"    x_{n} = compute_value({n})  # file line {n}\n" for n in range(1, 1001))
MARKER = re.compile(r"… \[(\d+) lines? omitted: lines ([\d–, ]+)\] …")


def _file_lines(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"# file line (\d+)", text)]


def _omitted(marker: re.Match[str]) -> list[tuple[int, int]]:
    runs = []
    for part in marker.group(2).split(", "):
        a, _, b = part.partition("–")
        runs.append((int(a), int(b or a)))
    return runs


@pytest.mark.parametrize("start", [1, 5])
@pytest.mark.parametrize("cuts", [((10, 12),), ((1, 3), (7, 9)), ((8, None),), ((2, 2), (4, 4), (11, 14))])
def test_rest_lines_name_the_file_line_of_every_line_of_a_stale_rest(
        start: int, cuts: tuple[tuple[int, int | None], ...]) -> None:
    """The note and each marker line name no file line; every other line is the origin's line of
    that number (a cut before the first kept line, between kept lines and after the last)."""
    origin = "".join(f"origin line {n}\n" for n in range(start, start + 12))
    newer = tuple(NewerRead(lo + start - 1, None if hi is None else hi + start - 1, "r2", "e9", 9)
                  for lo, hi in cuts)
    text, spans = cut_read(origin, start, newer, "a.py", "r1", 2) or ("", ())
    numbers = rest_lines(start, spans)
    lines = text_lines(text)
    for i, line in enumerate(lines):
        named = numbers.numbered(i, i + 1)
        if named:
            assert named == [(named[0][0], named[0][0])] and line == f"origin line {named[0][0]}"
        else:
            assert line.startswith(("[stale: a.py", "[line", "[lines")), line
    assert numbers.numbered(0, len(lines)) == list(spans)


def test_a_cut_stale_rest_names_the_files_lines_in_its_marker_and_kept_ranges() -> None:
    """The marker said "[773 lines omitted: lines 143–857]" after showing file line 143: the rest's
    text lines (its note and a marker line among them) were counted as file lines."""
    text, spans = cut_read(BIG, 1, (NewerRead(10, 12, "r2", "e3", 3),), "src/big.py", "r1", 2) or ("", ())
    cut = truncate(text, 3000, kind="file", count=cl100k, numbers=rest_lines(1, spans))
    assert cut.truncated and cut.tokens <= 3000
    [marker] = MARKER.finditer(cut.text)
    before, after = _file_lines(cut.text[:marker.start()]), _file_lines(cut.text[marker.end():])
    assert _omitted(marker) == [(before[-1] + 1, after[0] - 1)]
    assert int(marker.group(1)) == cut.omitted == after[0] - before[-1] - 1
    assert [(r.start, r.end) for r in cut.kept] == [(1, 9), (13, before[-1]), (after[0], 1000)]
    assert before == [*range(1, 10), *range(13, before[-1] + 1)] and after == list(range(after[0], 1001))


def test_a_marker_over_a_newer_reads_lines_names_the_rests_lines_on_each_side() -> None:
    """Lines 400-420 were read again: the rest has none of them, so a cut over them omits the lines
    on each side, named as two runs, and counts only those."""
    text, spans = cut_read(BIG, 1, (NewerRead(400, 420, "r2", "e3", 3),), "src/big.py", "r1", 2) or ("", ())
    cut = truncate(text, 3000, kind="file", count=cl100k, numbers=rest_lines(1, spans))
    [marker] = MARKER.finditer(cut.text)
    before, after = _file_lines(cut.text[:marker.start()]), _file_lines(cut.text[marker.end():])
    assert _omitted(marker) == [(before[-1] + 1, 399), (421, after[0] - 1)]
    assert int(marker.group(1)) == cut.omitted == after[0] - before[-1] - 1 - 21
    assert [(r.start, r.end) for r in cut.kept] == [(1, before[-1]), (after[0], 1000)]
    assert "left out: read again" not in cut.text and "[stale: src/big.py" in cut.text
    whole = truncate(text, 100_000, kind="file", count=cl100k, numbers=rest_lines(1, spans))
    assert not whole.truncated and [(r.start, r.end) for r in whole.kept] == [(1, 399), (421, 1000)]


def test_file_lines_of_an_excerpt_and_of_a_text_with_lines_of_its_own() -> None:
    excerpt = FileLines.from_line(1000, 5)
    assert excerpt.numbered(0, 5) == [(1000, 1004)] and excerpt.numbered(2, 4) == [(1002, 1003)]
    rest = FileLines(((1, 1, 9), (11, 13, 3)))  # a note, lines 1-9, a marker, lines 13-15
    assert rest.numbered(0, 1) == [] and rest.numbered(9, 12) == [(9, 9), (13, 13)]
    assert rest.numbered(10, 11) == [] and rest.numbered(0, 14) == [(1, 9), (13, 15)]


def _big_file_reread() -> RunState:
    """BIG read whole at r1, then its lines 10-12 at r2: the whole read's other lines a stale rest."""
    events: tuple[AnyEvent, ...] = (
        UserInput("Refactor compute_value calls"),
        FileRead(path="src/big.py", revision="r1", content=BIG),
        FileRead(path="src/big.py", revision="r2", start_line=10, end_line=12,
                 content="    x_10 = 0\n    x_11 = 0\n    x_12 = 0\n"))
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def test_a_built_request_and_its_manifest_name_the_files_lines_of_a_cut_stale_rest() -> None:
    """Through the fold and the builder: the rest's source ref names the whole read (no ``#L``), the
    cut is by the rest's own line map, and the manifest's truncation names file lines."""
    state = _big_file_reread()
    built = build_context(state, BuildConfig(provider="anthropic", window=6000, reserve=1000))
    [text] = [s for s in strings(built.request) if "[stale:" in s]
    [marker] = MARKER.finditer(text)
    before, after = _file_lines(text[:marker.start()]), _file_lines(text[marker.end():])
    assert _omitted(marker) == [(before[-1] + 1, after[0] - 1)]
    [record] = [t for t in built.manifest.truncations if t.id == "e3.c1"]
    assert record.kept == f"lines 1-9, 13-{before[-1]}, {after[0]}-1000"


def test_a_stale_rest_cut_to_a_small_grant_keeps_its_note_or_none_of_its_lines() -> None:
    """Cut as one file text, the note was the head window's first line: a grant that kept a line
    or two (48-70 tokens: budgets of 162-204 here) kept them from the tail, and the request showed
    "x_1000 = compute_value(1000)" of revision r1 with nothing saying it was stale. Every budget
    now shows the rest's lines after its whole note, or none of them (a bare marker)."""
    state = _big_file_reread()
    note = ("[stale: src/big.py as read at revision r1 (event 2). Read again since: lines 10-12 at revision "
            "r2 (event 3). Those lines are left out here; the rest may be out of date.]\n")
    cuts = set()
    for budget in range(150, 320):
        built = build_context(state, BuildConfig(provider="anthropic", window=1000 + budget, reserve=1000))
        texts = strings(built.request)
        assert not [s for s in texts if "compute_value(" in s and not s.startswith(note)], budget
        noted = [s for s in texts if s.startswith(note)]
        for record in (t for t in built.manifest.truncations if t.id == "e3.c1"):
            assert (record.kept == "marker only") == (not noted), budget
            cuts.add(record.strategy)
    assert cuts == {"marker_only", "words", "lines"}  # none of its lines; the note and words; lines
