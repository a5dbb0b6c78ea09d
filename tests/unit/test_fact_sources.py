"""The content dedupe keeps files apart: the same text from two files is two facts."""

from __future__ import annotations

import pytest

from contextfold.domain.events import (
    AnyEvent,
    EvidenceRetrieved,
    FileRead,
    InstructionSet,
    MemoryRecalled,
    UserInput,
)
from contextfold.projections.fact_sources import FileRefRead, parse_file_ref
from tests.unit.test_builder import _left_out


def test_the_same_text_read_from_two_files_is_shown_for_both() -> None:
    """prod/config.yaml and staging/config.yaml read with the same text: the older read was left
    out as a duplicate of the newer by content hash alone, and the model never learnt that prod
    was read."""
    same = {"content": "replicas: 3\n", "revision": "abc1234"}
    body, left = _left_out([UserInput("compare the configs"), FileRead(path="prod/config.yaml", **same),
                            FileRead(path="staging/config.yaml", **same)])
    assert "prod/config.yaml" in body and "staging/config.yaml" in body
    assert left == []


def test_the_same_text_from_the_same_file_or_from_no_file_is_still_one_copy() -> None:
    block = "retry:\n  attempts: 3\n  backoff: 2s\n"
    same_file: list[AnyEvent] = [UserInput("look"),
                 FileRead(path="ci.yaml", content=block, revision="r1", start_line=1, end_line=3),
                 FileRead(path="./ci.yaml", content=block, revision="r1", start_line=20, end_line=22)]
    assert _left_out(same_file)[1] == [("e2", "duplicate", "e3")]
    # a knowledge-base chunk names no file: a file read of its text stands for it
    chunk_then_file: list[AnyEvent] = [UserInput("look"), EvidenceRetrieved(content=block, source_ref="kb://ci/retry"),
                       FileRead(path="ci.yaml", content=block, revision="r1")]
    assert _left_out(chunk_then_file)[1] == [("e2", "duplicate", "e3")]
    # an instruction read again as its file keeps the instruction; the same text in another
    # file is that file's fact
    rules = "Never push to main. Run `make check` before committing."
    body, left = _left_out([InstructionSet(text=rules, source_ref="AGENTS.md"), UserInput("go"),
                            FileRead(path="./AGENTS.md", content=rules),
                            FileRead(path="vendor/lib/AGENTS.md", content=rules)])
    assert left == [("e3", "duplicate", "e1")] and "vendor/lib/AGENTS.md" in body


@pytest.mark.parametrize(("ref", "path"), [
    ("file://a/b.py", "a/b.py"), ("file://a/b.py@HEAD", "a/b.py"), ("file://a/b.py@r2#L3-L9", "a/b.py"),
    ("file://a/b.py#L3", "a/b.py"), ("file://node_modules/@types/x.d.ts", "node_modules/@types/x.d.ts"),
    ("file://node_modules/@types/x.d.ts@v1#L1-L2", "node_modules/@types/x.d.ts"),
    # a dotted name after the last @ is the file's, a version is a revision (review)
    ("file://mail/team@corp.com", "mail/team@corp.com"), ("file://a/b.py@v1.2.3", "a/b.py"),
    ("file://a/b.py@1.4#L2", "a/b.py")])
def test_the_path_of_a_file_source_ref(ref: str, path: str) -> None:
    assert parse_file_ref(ref).path == path


@pytest.mark.parametrize(("ref", "read"), [
    ("file://a/b.py", FileRefRead("a/b.py", None, None, None)),
    ("file://a/b.py@r2#L3-L9", FileRefRead("a/b.py", "r2", 3, 9)),
    ("file://a/b.py#L3", FileRefRead("a/b.py", None, 3, None)),  # file_ref's shape: line 3 to the end
    ("file://node_modules/@types/x.d.ts@v1#L1-L2", FileRefRead("node_modules/@types/x.d.ts", "v1", 1, 2)),
    ("file://mail/team@corp.com#L4-L4", FileRefRead("mail/team@corp.com", None, 4, 4))])
def test_the_revision_and_lines_of_a_file_source_ref(ref: str, read: FileRefRead) -> None:
    assert parse_file_ref(ref) == read


def test_a_memory_with_a_files_text_is_one_copy_whichever_came_first() -> None:
    """A memory with the text of a file the run read is a copy of the read. When the memory was
    the newer it was kept first, the read was no copy of it (a copy is told by its file), and the
    text was sent twice; in the other order once. Of equally trusted copies, one that shows a file
    now stands for the text."""
    text = "deploy window is Friday 18:00 UTC"
    read = FileRead(path="ops/deploy.md", content=text)
    memory = MemoryRecalled(memory_id="m1", content=text, source_ref="mem://team", origin="workspace")
    page = EvidenceRetrieved(content=text, source_ref="https://wiki/deploy", origin="workspace")
    orders: list[tuple[list[AnyEvent], tuple[str, str, str]]] = [
        ([read, memory], ("e3", "duplicate", "e2")), ([memory, read], ("e2", "duplicate", "e3")),
        ([read, page], ("e3", "duplicate", "e2")), ([page, read], ("e2", "duplicate", "e3"))]
    for events, left_out in orders:
        body, left = _left_out([UserInput("when can we deploy?"), *events])
        assert body.count(text) == 1 and left == [left_out], events


def test_an_index_chunk_keyed_by_a_files_path_does_not_hide_the_read_of_it() -> None:
    """A code index's chunk (no file in its source ref) keyed by the path of a file the agent had
    read whole, newer than the read: the read was left out as superseded by age and the model saw
    one line of a 59-line file. A fragment that shows the file stands for it; two that show it
    still go by age (``test_builder``: a ``file://`` chunk newer than the read is shown)."""
    whole = "\n".join(f"line {i}: value_{i}" for i in range(1, 60))
    chunk = EvidenceRetrieved(content="def f(): pass  # indexed chunk", source_ref="index://repo/17",
                              semantic_key="src/a.py", origin="workspace")
    events: list[AnyEvent] = [UserInput("look at src/a.py"), FileRead(path="src/a.py", content=whole), chunk]
    body, left = _left_out(events)
    assert "line 30: value_30" in body and "indexed chunk" not in body
    assert left == [("e3", "superseded", "e2")]
