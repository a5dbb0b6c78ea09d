"""What ``why RUN --turn N QUERY`` matches (``cli_why.explain``): a call id or a name as a whole
word before a part of one."""

from __future__ import annotations

import unicodedata

from contextfold.cli_why import explain
from contextfold.domain.events import FileRead, MemoryRecalled, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from tests.unit.test_fold import Log


def _manifest() -> ContextManifest:
    log = Log()
    log.add(UserInput("go"))
    for i in range(1, 13):
        log.add(ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="read", arguments="{}")]))
        log.add(ToolResult(call_id=f"c{i}", content=f"result {i}"))
    return build_context(fold(log.records), BuildConfig(window=8_000, reserve=1_000)).manifest


def test_a_call_id_names_its_own_result_not_those_it_prefixes() -> None:
    """``why RUN c1`` listed the results of c10, c11 and c12 as well."""
    found = explain(_manifest(), "c1")
    assert [f["source_ref"] for f in found] == ["call://run-1/c1@2"]


def test_a_part_of_a_name_still_matches_when_no_whole_word_does() -> None:
    found = explain(_manifest(), "run-1/c")
    expected = sorted(f"call://run-1/c{i}@{2 * i}" for i in range(1, 13))
    assert sorted(f["source_ref"] for f in found) == expected


NFC_PATH = "src/café_配置.py"
NFD_PATH = unicodedata.normalize("NFD", NFC_PATH)


def _read_twice() -> ContextManifest:
    """A file read under its NFD path (macOS' file system, ``git ls-files``), then re-read at a
    newer revision under the NFC path a model types."""
    log = Log()
    log.add(UserInput("What is TIMEOUT?"))
    log.add(FileRead(path=NFD_PATH, revision="r1", content="TIMEOUT = 10  # OLD_VALUE\n"))
    log.add(FileRead(path=NFC_PATH, revision="r2", content="TIMEOUT = 30  # NEW_VALUE\n"))
    return build_context(fold(log.records), BuildConfig(window=8_000, reserve=1_000)).manifest


def test_a_paths_nfd_and_nfc_spellings_are_one_file() -> None:
    """Both revisions were sent side by side, contradicting each other: the supersession key
    compared the two spellings as different paths."""
    manifest = _read_twice()
    assert [f.source_ref for f in manifest.fragments if f.kind == "evidence"] == [f"file://{NFC_PATH}@r2"]
    assert [(x.source_ref, x.reason) for x in manifest.excluded_items] == [
        (f"file://{NFD_PATH}@r1", "superseded")]


def test_why_finds_a_path_under_either_spelling() -> None:
    for query in ("café", unicodedata.normalize("NFD", "café")):
        found = explain(_read_twice(), query)
        assert {f["verdict"] for f in found} == {"kept", "dropped"}, query


def test_a_recalled_memory_is_named_by_its_id_in_its_source() -> None:
    """A memory layer gives the store as the source and names each memory by id: every memory of
    a store reached the model and the manifest under one source (``mem0://user-42``), and ``why
    RUN mem-7f3a`` said a memory the request held was not part of it."""
    log = Log()
    log.add(UserInput("Book me a flight to Rome"))
    log.add(MemoryRecalled(memory_id="mem-7f3a", content="prefers an aisle seat", source_ref="mem0://user-42"))
    log.add(MemoryRecalled(memory_id="mem-19bc", content="flies Lufthansa", source_ref="mem0://user-42"))
    log.add(MemoryRecalled(memory_id="m-1", content="lives in Berlin", source_ref="zep://u/7#facts/m-1"))
    manifest = build_context(fold(log.records), BuildConfig(window=8_000, reserve=1_000)).manifest
    assert sorted(f.source_ref for f in manifest.fragments if f.kind == "memory") == [
        "mem0://user-42#memory=mem-19bc", "mem0://user-42#memory=mem-7f3a", "zep://u/7#facts/m-1"]
    assert [f["source_ref"] for f in explain(manifest, "mem-7f3a")] == ["mem0://user-42#memory=mem-7f3a"]
