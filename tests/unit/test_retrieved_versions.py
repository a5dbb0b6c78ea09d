"""Retrieved evidence against file reads: which version of a file or page a request shows.

DESIGN 7: dedupe by content hash + source_ref + semantic key, the newer or more authoritative
version wins, and the manifest says what replaced what; of contradicting old and new versions of
a file the current one is shown, with its source.
"""

from __future__ import annotations

from contextfold.domain.events import AnyEvent, EvidenceRetrieved, FileRead, UserInput
from contextfold.domain.manifest import ExcludedFragment
from tests.unit.test_builder import build, request_text


def _build(events: list[AnyEvent]) -> tuple[str, dict[str, ExcludedFragment]]:
    result = build(events, "anthropic", window=20_000, reserve=2_000)
    return request_text(result), {e.id: e for e in result.manifest.excluded_items}


def test_an_index_copy_a_whole_read_replaced_stays_out_after_a_partial_re_read() -> None:
    """The code index returns app/config.py keyed by its path; the agent reads the file whole at
    r1 (the index copy is left out), edits line 2 and re-reads only that line at r2. The index
    copy, the oldest version, came back unmarked beside the stale rest of r1 and the r2 line: only
    the whole read held the path's key, and the partial read superseded it."""
    index = EvidenceRetrieved(content="TIMEOUT = 60\nRETRIES = 1\n", source_ref="code-index://app/config.py",
                              semantic_key="app/config.py", origin="workspace")
    whole = FileRead(path="app/config.py", revision="r1", content="import os\nTIMEOUT = 30\nRETRIES = 3\n")
    line_2 = FileRead(path="app/config.py", revision="r2", start_line=2, end_line=2, content="TIMEOUT = 5\n")
    body, left = _build([UserInput("Set the timeout to 5."), index, whole])
    assert "TIMEOUT = 60" not in body and left["e2"].replaced_by == "e3"

    body, left = _build([UserInput("Set the timeout to 5."), index, whole, line_2])
    assert "TIMEOUT = 60" not in body
    assert "TIMEOUT = 5" in body and "RETRIES = 3" in body and "[stale: app/config.py" in body
    assert "TIMEOUT = 30" not in body  # r1's line 2 is cut from the rest
    assert sorted(left) == ["e2", "e3"]
    assert (left["e2"].reason, left["e2"].replaced_by) == ("superseded", "e4")
    assert left["e2"].detail == "a newer version under the same semantic key"
    assert (left["e3"].reason, left["e3"].replaced_by) == ("superseded", "e4")
    assert "e4.c1" in left["e3"].detail  # its other lines: the stale rest, shown

    # a rest cut again by a newer partial read keeps the key too
    line_3 = FileRead(path="app/config.py", revision="r3", start_line=3, end_line=3, content="RETRIES = 5\n")
    body, left = _build([UserInput("Set the timeout to 5."), index, whole, line_2, line_3])
    assert "TIMEOUT = 60" not in body and "RETRIES = 5" in body and "import os" in body
    assert (left["e2"].reason, left["e2"].replaced_by) == ("superseded", "e5")


def test_an_index_copy_keyed_by_a_path_read_only_in_part_is_still_shown() -> None:
    """No whole read ever held the key: a partial read is no version of the whole file, and the
    index's copy may show lines the read does not."""
    index = EvidenceRetrieved(content="def handler():\n    return 42\n", source_ref="code-index://app/api.py",
                              semantic_key="app/api.py", origin="workspace")
    part = FileRead(path="app/api.py", revision="r1", start_line=1, end_line=2,
                    content="import os\nimport re\n")
    body, left = _build([UserInput("where is the handler?"), index, part])
    assert "return 42" in body and "import re" in body and left == {}


def test_a_retrieved_file_chunk_is_superseded_by_another_revision_of_its_lines() -> None:
    """An index chunk whose source ref names file, revision and lines (DESIGN 2) and a newer read
    of the file, or the same lines retrieved, at another revision: both versions were sent as
    current, unmarked, while two file reads were superseded. The chunk is a read of its lines."""
    ask = UserInput("What is TIMEOUT now?")
    chunk_r1 = EvidenceRetrieved(content="TIMEOUT = 30\n", source_ref="file://app/config.py@r1#L2-L2",
                                 origin="workspace")
    read_r2 = FileRead(path="app/config.py", revision="r2", content="import os\nTIMEOUT = 5\nRETRIES = 3\n")
    chunk_r2 = EvidenceRetrieved(content="TIMEOUT = 5\n", source_ref="file://app/config.py@r2#L2-L2",
                                 origin="workspace")
    for newer in (read_r2, chunk_r2):
        body, left = _build([ask, chunk_r1, newer])
        assert "TIMEOUT = 5" in body and "TIMEOUT = 30" not in body
        assert [(e.id, e.reason, e.replaced_by, e.detail) for e in left.values()] == [
            ("e2", "superseded", "e3", "")]

    # and it supersedes an older revision: a file read whole at r1, then line 2 retrieved at r2,
    # keeps r1's other lines as a stale rest, as a partial re-read does
    read_r1 = FileRead(path="app/config.py", revision="r1", content="import os\nTIMEOUT = 30\nRETRIES = 3\n")
    body, left = _build([ask, read_r1, chunk_r2])
    assert "TIMEOUT = 5" in body and "TIMEOUT = 30" not in body
    assert "[stale: app/config.py as read at revision r1" in body and "RETRIES = 3" in body
    assert (left["e2"].reason, left["e2"].replaced_by) == ("superseded", "e3")
    assert "e3.c1" in left["e2"].detail

    # a chunk of three lines at r1, line 2 read again at r2: lines 1 and 3 stay, marked stale
    chunk_1_3 = EvidenceRetrieved(content="import os\nTIMEOUT = 30\nRETRIES = 3\n",
                                  source_ref="file://app/config.py@r1#L1-L3", origin="external")
    line_2 = FileRead(path="app/config.py", revision="r2", start_line=2, end_line=2, content="TIMEOUT = 5\n")
    body, left = _build([ask, chunk_1_3, line_2])
    assert "TIMEOUT = 30" not in body and "RETRIES = 3" in body and "import os" in body
    assert "[line 2 left out: read again at revision r2]" in body
    assert list(left) == ["e2"] and left["e2"].replaced_by == "e3"


def test_retrieved_file_chunks_of_one_revision_stay_side_by_side() -> None:
    """Different lines of one revision are no versions of each other (the file read rule: reads
    of one revision that do not contain each other stay); the newer containing the older
    supersedes it."""
    ask = UserInput("explain")
    line_1 = EvidenceRetrieved(content="import os\n", source_ref="file://app/config.py@r1#L1-L1")
    line_3 = EvidenceRetrieved(content="RETRIES = 3\n", source_ref="file://app/config.py@r1#L3-L3")
    body, left = _build([ask, line_1, line_3])
    assert "import os" in body and "RETRIES = 3" in body and left == {}
    lines_1_3 = EvidenceRetrieved(content="import os\nTIMEOUT = 30\nRETRIES = 3\n",
                                  source_ref="file://app/config.py@r1#L1-L3")
    body, left = _build([ask, line_1, line_3, lines_1_3])
    assert body.count("import os") == 1 and body.count("RETRIES = 3") == 1
    assert sorted((e.id, e.replaced_by) for e in left.values()) == [("e2", "e4"), ("e3", "e4")]


def test_a_chunk_of_the_revision_read_whole_is_a_copy_of_the_read_not_its_newer_version() -> None:
    """After a whole read at r1 (59 lines), the index returned line 10 of r1 keyed by the path: the
    chunk won the key by recency and the read was left out as "a newer version", so the model saw
    1 of 59 lines. A part of the same revision, with the read's text, is a copy of the read."""
    whole = FileRead(path="app/config.py", revision="r1",
                     content="".join(f"SETTING_{i} = {i}\n" for i in range(1, 60)))
    chunk = EvidenceRetrieved(content="SETTING_10 = 10\n", source_ref="file://app/config.py@r1#L10-L10",
                              semantic_key="app/config.py", origin="workspace")
    ask = UserInput("Explain app/config.py")
    body, left = _build([ask, whole, chunk])
    assert all(f"SETTING_{i} = {i}" in body for i in range(1, 60))
    assert body.count("SETTING_10 = 10") == 1
    assert [(e.id, e.kind, e.reason, e.replaced_by, e.source_ref) for e in left.values()] == [
        ("e3", "evidence", "duplicate", "e2", "file://app/config.py@r1#L10-L10")]
    assert left["e3"].detail == "retrieved lines that e2, a read of the file at the same revision, shows"
    # the other way round, the whole read of the revision replaces the chunk it contains (the file
    # read rule), and the manifest says so
    body, left = _build([ask, chunk, whole])
    assert all(f"SETTING_{i} = {i}" in body for i in range(1, 60)) and body.count("SETTING_10 = 10") == 1
    assert [(e.id, e.reason, e.replaced_by) for e in left.values()] == [("e2", "superseded", "e3")]

    # the read cut by a newer partial read: the chunk's stale rest is a copy of the read's
    line_2 = FileRead(path="app/config.py", revision="r2", start_line=2, end_line=2,
                      content="SETTING_2 = 20\n")
    body, left = _build([ask, whole, chunk, line_2])
    assert body.count("SETTING_10 = 10") == 1 and "SETTING_59 = 59" in body and "SETTING_2 = 20" in body
    assert "SETTING_2 = 2\n" not in body
    assert (left["e4.c2"].reason, left["e4.c2"].replaced_by) == ("duplicate", "e4.c1")

    # of two chunks of r1 the wider stands for the narrower it contains
    wide = EvidenceRetrieved(content="SETTING_9 = 9\nSETTING_10 = 10\nSETTING_11 = 11\n",
                             source_ref="file://app/config.py@r1#L9-L11")
    body, left = _build([ask, wide, chunk])
    assert body.count("SETTING_10 = 10") == 1 and "SETTING_11 = 11" in body
    assert [(e.id, e.reason, e.replaced_by) for e in left.values()] == [("e3", "duplicate", "e2")]


def test_a_chunk_with_other_text_under_the_same_revision_label_is_no_copy() -> None:
    """``HEAD`` names a file an edit changed: a chunk whose line differs from the read's at one
    label is not a copy of it but a newer version of that line (the file read rule for a line that
    differs): the read is superseded, its other lines kept as a stale rest."""
    whole = FileRead(path="app/config.py", revision="HEAD", content="import os\nTIMEOUT = 30\nRETRIES = 3\n")
    chunk = EvidenceRetrieved(content="TIMEOUT = 5\n", source_ref="file://app/config.py@HEAD#L2-L2",
                              origin="workspace")
    body, left = _build([UserInput("timeout?"), whole, chunk])
    assert "TIMEOUT = 30" not in body and "TIMEOUT = 5" in body and "RETRIES = 3" in body
    assert [(e.id, e.reason, e.replaced_by) for e in left.values()] == [("e2", "superseded", "e3")]
    assert "e3.c1" in left["e2"].detail
    # a part of a file read (the agent's own view) stays beside the whole read, as before
    part = FileRead(path="app/config.py", revision="HEAD", start_line=2, end_line=2, content="TIMEOUT = 30\n")
    _, left = _build([UserInput("timeout?"), whole, part])
    assert left == {}


def test_chunks_of_one_document_are_its_passages_not_its_versions() -> None:
    """A top-3 retrieval from one page, logged as LangChain or LlamaIndex give it (the document's
    URL as source_ref, ``source_kind="chunk"``, the default): only the last chunk was sent, the
    other two "superseded: a newer retrieval of the same source"."""
    url = "https://docs.example.com/billing/refunds"
    passages = ["Refunds are issued within 14 days of the request.",
                "Refunds for annual plans are prorated by unused months.",
                "Contact billing@example.com for refunds over $1,000."]
    chunks: list[AnyEvent] = [EvidenceRetrieved(content=c, source_ref=url) for c in passages]
    ask = UserInput("How do refunds work for an annual plan?")
    body, left = _build([ask, *chunks])
    assert all(p in body for p in passages) and left == {}
    # the same passage retrieved again is a copy, kept once
    body, left = _build([ask, *chunks, EvidenceRetrieved(content=passages[0], source_ref=url)])
    assert body.count(passages[0]) == 1 and [(e.id, e.reason) for e in left.values()] == [("e2", "duplicate")]
    # a newer fetch of the whole page is its newer version: it supersedes what was retrieved of it,
    # chunks too, and an older page fetch; a chunk retrieved after the page stays beside it
    page = EvidenceRetrieved(content="Refunds: within 7 days; annual plans are not prorated.", source_ref=url,
                             source_kind="web")
    later = EvidenceRetrieved(content="Refund requests are answered by e-mail.", source_ref=url)
    body, left = _build([ask, *chunks, page, later])
    assert not any(p in body for p in passages) and "within 7 days" in body and "answered by e-mail" in body
    assert [(e.id, e.reason, e.replaced_by, e.detail) for e in left.values()] == [
        (f"e{i}", "superseded", "e5", "a newer retrieval of the whole web page from the same source")
        for i in (2, 3, 4)]
    for kind, named in (("email", "e-mail"), ("document", "document")):
        old = page.model_copy(update={"source_kind": kind, "content": "Refunds: within 30 days."})
        new = page.model_copy(update={"source_kind": kind})
        body, left = _build([ask, old, new])
        assert "within 30 days" not in body and "within 7 days" in body
        assert [(e.id, e.replaced_by, e.detail) for e in left.values()] == [
            ("e2", "e3", f"a newer retrieval of the whole {named} from the same source")]
