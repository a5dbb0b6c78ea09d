"""Stale rests: what stays of an older file read when a newer revision re-reads part of the file."""

from __future__ import annotations

import pytest

from contextfold.domain.events import AnyEvent, ArtifactRef, FileRead, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.stale_reads import NewerRead, cut_read, rest_of, spans_within
from contextfold.projections.state import RunState

R1 = "".join(f"r1 line {n}\n" for n in range(1, 41))


def _lines(rev: str, lo: int, hi: int) -> str:
    return "".join(f"{rev} line {n}\n" for n in range(lo, hi + 1))


def _fold(*events: AnyEvent) -> RunState:
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def _build(state: RunState) -> BuildResult:
    return build_context(state, BuildConfig(provider="neutral", window=50_000, reserve=1_000))


def _text(state: RunState, fid: str) -> str:
    text = state.entries[fid].plain_text()
    assert text is not None
    return text


def test_cut_read_leaves_out_the_newer_lines_and_marks_the_rest_stale() -> None:
    newer = (NewerRead(3, 4, "r2", "e5", 5), NewerRead(5, None, "r3", "e7", 7))
    text, spans = cut_read("a\nb\nc\nd\ne\nf", 1, newer, "x.py", "r1", 2) or ("", ())
    assert text == ("[stale: x.py as read at revision r1 (event 2). Read again since: lines 3-4 at "
                    "revision r2 (event 5); lines 5-end at revision r3 (event 7). Those lines are left "
                    "out here; the rest may be out of date.]\na\nb\n[lines 3-6 left out: read again at "
                    "revision r2, revision r3]")  # no newline added to a text that had none
    assert spans == ((1, 2),)
    assert cut_read("a\n\n  \nd\n", 10, (NewerRead(10, 10, None, "e3", 3), NewerRead(13, 13, None, "e3", 3)),
                    "x.py", "r1", 2) is None  # blank lines only: nothing worth keeping
    assert spans_within(((1, 2), (8, 9)), (None, 9)) and not spans_within(((1, 2), (8, 9)), (2, None))


THREE_REVISIONS = (
    UserInput("go"),
    FileRead(path="a.py", content=R1, revision="r1"),                                              # 2
    FileRead(path="a.py", content=_lines("r2", 10, 20), revision="r2", start_line=10, end_line=20),  # 3
    FileRead(path="./a.py", content=_lines("r3", 15, 30), revision="r3", start_line=15, end_line=30),  # 4
)


def test_a_rest_cut_again_is_cut_from_the_logged_text_with_every_newer_read() -> None:
    state = _fold(*THREE_REVISIONS)
    assert state.superseded_by == {"e2": "e3", "e3.c1": "e4", "e3": "e4"}
    assert list(state.active) == ["e4.c1", "e4.c2", "e4"]  # older first: the newest read below
    rest = _text(state, "e4.c1")
    assert rest.startswith("[stale: a.py as read at revision r1 (event 2). Read again since: lines 10-20 at "
                           "revision r2 (event 3); lines 15-30 at revision r3 (event 4).")
    assert "r1 line 9\n[lines 10-30 left out: read again at revision r2, revision r3]\nr1 line 31\n" in rest
    assert "r1 line 10" not in rest and "r1 line 30" not in rest
    assert state.stale_reads["e4.c1"].of == "e3.c1" and state.stale_reads["e4.c1"].origin == "e2"
    assert state.stale_reads["e4.c1"].spans == ((1, 9), (31, 40))
    r2 = _text(state, "e4.c2")  # the r2 read's lines r3 did not read again
    assert "r2 line 14\n[lines 15-20 left out: read again at revision r3]\n" in r2
    assert state.entries["e4.c1"].position == 2 and state.entries["e4.c2"].position == 3
    assert rest_of(state.stale_reads, state.active) == {"e2": "e4.c1", "e3.c1": "e4.c1", "e3": "e4.c2"}
    built = _build(state)
    [line] = [e for e in built.manifest.excluded_items if e.id == "e2"]
    assert (line.replaced_by, line.detail) == (
        "e4", "its lines no newer read covers are kept, marked stale, as e4.c1")
    reasons = {f.id: f.selection_reason for f in built.manifest.fragments}
    assert reasons["e4.c1"].endswith("; stale rest of e2 (a.py at revision r1): its lines no newer read "
                                     "covers, marked stale (lines 10-20 superseded by e3 at revision r2, "
                                     "lines 15-30 superseded by e4 at revision r3)")
    assert "stale" not in reasons["e4"]
    assert state.fingerprint() == _fold(*THREE_REVISIONS).fingerprint()  # a replay: the same state
    assert _build(_fold(*THREE_REVISIONS)).manifest == built.manifest


def test_a_whole_read_at_any_revision_supersedes_the_stale_rests_whole() -> None:
    for revision in ("r1", "r2", "r3"):
        state = _fold(
            UserInput("go"),
            FileRead(path="a.py", content=R1, revision="r1"),
            FileRead(path="a.py", content=_lines("r2", 10, 20), revision="r2", start_line=10, end_line=20),
            FileRead(path="a.py", content=_lines(revision, 1, 40), revision=revision),
        )
        assert list(state.active) == ["e4"], revision
        assert state.superseded_by == {"e2": "e3", "e3.c1": "e4", "e3": "e4"}


def test_a_same_revision_read_of_the_lines_a_rest_keeps_supersedes_it() -> None:
    """The rest of r1 (read whole) keeps lines 1-9 and 21-40: a read of lines 1-40 at r1 holds
    every line it shows, though not the whole file its origin read."""
    state = _fold(
        UserInput("go"),
        FileRead(path="a.py", content=R1, revision="r1"),
        FileRead(path="a.py", content=_lines("r2", 10, 20), revision="r2", start_line=10, end_line=20),
        FileRead(path="a.py", content=R1, revision="r1", start_line=1, end_line=40),
    )
    assert list(state.active) == ["e4"]
    assert state.superseded_by == {"e2": "e3", "e3.c1": "e4", "e3": "e4"}


def test_an_older_read_held_in_an_artifact_is_superseded_whole() -> None:
    """The fold does not load an artifact: it cannot cut one, and keeps nothing of it (as before)."""
    ref = ArtifactRef(hash="ab" * 32, size=4000, media_type="text/plain")
    state = _fold(
        UserInput("go"),
        FileRead(path="a.py", content="preview", revision="r1", artifact=ref),
        FileRead(path="a.py", content=_lines("r2", 10, 20), revision="r2", start_line=10, end_line=20),
    )
    assert list(state.active) == ["e3"] and not state.stale_reads


def test_a_stale_rest_none_of_whose_lines_a_newer_read_covers_stays_as_it_is() -> None:
    """Cut again at every read, each rest cost a pass over its text per read."""
    state = _fold(
        UserInput("go"),
        FileRead(path="a.py", content=R1, revision="r1"),
        FileRead(path="a.py", content=_lines("r2", 10, 20), revision="r2", start_line=10, end_line=20),
        FileRead(path="a.py", content=_lines("r3", 12, 14), revision="r3", start_line=12, end_line=14),
    )
    assert list(state.active) == ["e3.c1", "e4.c1", "e4"]
    assert state.superseded_by == {"e2": "e3", "e3": "e4"}
    assert state.stale_reads["e4.c1"].spans == ((10, 11), (15, 20))


CONFIG = "import os\nTIMEOUT = 30\nRETRIES = 3\n"


@pytest.mark.parametrize("revision", [None, "HEAD"])
def test_a_same_revision_re_read_of_a_changed_line_supersedes_the_older_read_and_keeps_its_rest_stale(
        revision: str | None) -> None:
    """Most runtimes log no revision: "read config.py whole, set line 2, read line 2" sent both
    TIMEOUT = 30 and TIMEOUT = 5 as the file's current text, nothing marked stale, nothing
    superseded. The lines both reads show differ: the newer read is a newer version of the file."""
    events = (UserInput("Set TIMEOUT to 5"),
              FileRead(path="app/config.py", content=CONFIG, revision=revision),
              FileRead(path="app/config.py", content="TIMEOUT = 5\n", revision=revision,
                       start_line=2, end_line=2))
    state = _fold(*events)
    assert state.superseded_by == {"e2": "e3"}
    assert list(state.active) == ["e3.c1", "e3"]
    at = f"revision {revision}" if revision else "no revision"
    assert _text(state, "e3.c1") == (
        f"[stale: app/config.py as read at {at} (event 2). Read again since: line 2 at {at} (event 3). "
        f"Those lines are left out here; the rest may be out of date.]\nimport os\n"
        f"[line 2 left out: read again at {at}]\nRETRIES = 3\n")
    built = _build(state)
    shown = built.body
    assert "TIMEOUT = 30" not in shown and "TIMEOUT = 5" in shown and "RETRIES = 3" in shown
    [line] = [e for e in built.manifest.excluded_items if e.id == "e2"]
    assert (line.reason, line.replaced_by, line.detail) == (
        "superseded", "e3", "its lines no newer read covers are kept, marked stale, as e3.c1")
    assert state.fingerprint() == _fold(*events).fingerprint()


@pytest.mark.parametrize("revision", [None, "r1"])
def test_same_revision_reads_whose_shared_lines_agree_stay_side_by_side(revision: str | None) -> None:
    """Only a line both reads show and that reads otherwise says the file changed: a part of a
    whole read, or a read overlapping another with the same lines there, hides nothing."""
    whole = _lines("v1", 1, 40)
    state = _fold(UserInput("go"),
                  FileRead(path="a.py", content=whole, revision=revision),                        # 2
                  FileRead(path="a.py", content=_lines("v1", 10, 20), revision=revision,
                           start_line=10, end_line=20),                                           # 3 a part
                  FileRead(path="a.py", content=_lines("v1", 15, 45), revision=revision,
                           start_line=15))                       # 4 overlaps both; lines 41-45 only it shows
    assert not state.superseded_by and list(state.active) == ["e2", "e3", "e4"]
    # line 18 differs now, and the lines 16-18 the newer read covers are left out of each rest
    changed = _lines("v1", 16, 17) + "v2 line 18\n"
    state = _fold(UserInput("go"),
                  FileRead(path="a.py", content=whole, revision=revision),
                  FileRead(path="a.py", content=_lines("v1", 10, 20), revision=revision,
                           start_line=10, end_line=20),
                  FileRead(path="a.py", content=_lines("v1", 15, 30), revision=revision,
                           start_line=15, end_line=30),
                  FileRead(path="a.py", content=changed, revision=revision, start_line=16, end_line=18))  # 5
    assert state.superseded_by == {"e2": "e5", "e3": "e5", "e4": "e5"}
    assert {state.stale_reads[f].of: state.stale_reads[f].spans for f in ("e5.c1", "e5.c2", "e5.c3")} == {
        "e2": ((1, 15), (19, 40)), "e3": ((10, 15), (19, 20)), "e4": ((15, 15), (19, 30))}
    assert list(state.active) == ["e5.c1", "e5.c2", "e5.c3", "e5"]


def test_a_stale_rest_is_compared_on_the_lines_it_shows() -> None:
    """The rest of r1 keeps lines 1-9 and 21-40: a read at r1 whose lines 10-20 are r2's (a label
    that names no fixed text) agrees with it where the rest shows lines, and stays beside it; one
    whose line 22 differs cuts it again."""
    head = (UserInput("go"), FileRead(path="a.py", content=R1, revision="r1"),
            FileRead(path="a.py", content=_lines("r2", 10, 20), revision="r2", start_line=10, end_line=20))
    agrees = _lines("r1", 5, 9) + _lines("r2", 10, 20) + _lines("r1", 21, 25)
    state = _fold(*head, FileRead(path="a.py", content=agrees, revision="r1", start_line=5, end_line=25))
    assert state.superseded_by == {"e2": "e3", "e3": "e4"}  # r2's read at another revision: as before
    assert list(state.active) == ["e3.c1", "e4"]
    differs = agrees.replace("r1 line 22\n", "r3 line 22\n")
    state = _fold(*head, FileRead(path="a.py", content=differs, revision="r1", start_line=5, end_line=25))
    assert state.superseded_by == {"e2": "e3", "e3.c1": "e4", "e3": "e4"}
    assert state.stale_reads["e4.c1"].spans == ((1, 4), (26, 40))


def test_a_same_revision_read_held_in_an_artifact_is_not_compared() -> None:
    """The fold does not load an artifact: nothing says the file changed, so the reads stay side by
    side as before."""
    ref = ArtifactRef(hash="ab" * 32, size=4000, media_type="text/plain")
    for older, newer in ((FileRead(path="a.py", content="preview", artifact=ref),
                          FileRead(path="a.py", content="changed\n", start_line=1, end_line=1)),
                         (FileRead(path="a.py", content=R1),
                          FileRead(path="a.py", content="changed\n", start_line=1, end_line=1,
                                   artifact=ref))):
        state = _fold(UserInput("go"), older, newer)
        assert not state.superseded_by and list(state.active) == ["e2", "e3"]
