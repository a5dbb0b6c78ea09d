"""A trace whose tool output holds half an emoji (a ``\\ud83d`` escape with no partner) imports,
the half read as U+FFFD and named in a note, instead of the whole trace being refused.

Found by the hostile-bytes hunt: a JavaScript tool that cuts its output by UTF-16 units leaves a
lone surrogate, which JSON spells as a valid ``\\ud83d`` escape. No UTF-8 store or request body
can carry the half, so the store refused the event, and with it every run of the file
(``ImportFormatError ... holds text that is not valid Unicode``, exit 2): the trace could not be
imported at all, though the refusal's advice (decode with ``errors='replace'``) is for a caller
that decodes the bytes itself.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.importers import parse
from contextfold.importers._json import load
from tests.cli_runner import cf

HISTORY = [
    {"role": "user", "content": "fetch the page"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "PAGE"},
    {"role": "assistant", "content": "done"},
]
# a lone high half, a lone low half, a whole pair written as ASCII, and a backslash written as text
_NOTE = ("2 lone surrogate escape(s) (half a UTF-16 pair, e.g. \\ud83d of an emoji cut in two) "
         "recorded as U+FFFD: no UTF-8 text can hold one")
PAGE = "cut \\ud83d| low \\udc00| pair \\ud83d\\ude00| text \\\\ud83d"


def _trace(tmp_path: Path, page: str = PAGE) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(HISTORY, indent=1).replace('"PAGE"', f'"{page}"'), encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_lone_surrogate_in_a_tool_output_imports_as_the_replacement_character(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    url = str(request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url"))
    got = cf("--store", url, "import", str(_trace(tmp_path)), "--run", "half", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "note: " in got.stdout and "2 lone surrogate escape(s)" in got.stdout
    assert "trace.json:23: 2 lone" in got.stdout  # the line of the first, in the indented trace
    with open_store(url) as store:
        run = store.run("half")
        results = [r.event for r in run.events() if r.event.type == "tool_result"]
        assert [r.content for r in results] == ["cut \ufffd| low \ufffd| pair \U0001F600| text \\ud83d"]
        built = run.build(provider="anthropic", window=50_000, reserve=1_000)
        assert "\ufffd" in json.loads(built.body_bytes)["messages"][2]["content"][0]["content"][0]["text"]
    assert cf("--store", url, "verify", "half", cwd=tmp_path).returncode == 0


def test_a_trace_without_a_lone_half_is_read_as_before(tmp_path: Path) -> None:
    data = _trace(tmp_path, "pair \\ud83d\\ude00 and \\\\ud800").read_bytes()
    doc = load(data, "t.json")
    assert doc.lone_surrogates == (0, 0) and doc.surrogate_note("t.json") == []
    assert doc.value[2]["content"] == "pair \U0001F600 and \\ud800"
    assert [e.type for e in parse(data, format="openai-chat")].count("tool_result") == 1


def test_keys_and_jsonl_lines_are_mended_too() -> None:
    doc = load(b'{"a": 1}\n{"k\\udfff": ["x\\ud800", {"y": "\\udbff"}]}\n', "t.jsonl")
    assert doc.value == [{"a": 1}, {"k\ufffd": ["x\ufffd", {"y": "\ufffd"}]}]
    assert doc.lone_surrogates == (3, 2)


# -- every import path says so: an OpenHands event folder, and the Python API's iter_runs/parse.
# Found by the hostile-input hunt: a file import noted the mend (file, line, count), but these two
# paths mended silently: the text in the log was not the trace's, and nothing said so.


def test_an_openhands_event_folder_notes_the_lone_surrogates_it_mends(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.e2e.test_cli_import_folder import cf as cf_in
    from tests.e2e.test_cli_import_openhands_folder import conversation, session

    events = conversation("Fix the failing tests", 2)
    folder = session(tmp_path / "sessions", "s1", events)
    cut = folder / "events" / "4.json"  # the first command's output
    cut.write_text(cut.read_text().replace("case0: 1 failed", "case0: 1 failed \\ud83d| \\\\ud83d"))
    code, out, err = cf_in(tmp_path, capsys, "import", str(tmp_path / "sessions"), "--run", "oh")
    assert code == 0, err
    line = next(n for n, text in enumerate(cut.read_text().split("\n"), 1) if "\\ud83d|" in text)
    assert f"note: {cut}:{line}: 1 lone surrogate escape(s)" in out
    code, out, err = cf_in(tmp_path, capsys, "events", "oh/s1", "--json")
    assert "case0: 1 failed \ufffd| \\\\ud83d" in out  # the escaped backslash stays text


def test_iter_runs_and_parse_warn_of_the_lone_surrogates_they_mend(tmp_path: Path) -> None:
    from contextfold.importers import ImportNoteWarning, iter_runs, runs_artifacts_and_notes

    data = _trace(tmp_path).read_bytes()
    with pytest.warns(ImportNoteWarning, match=r"^trace\.json:23: 2 lone surrogate escape\(s\)"):
        runs = list(iter_runs(data, format="openai-chat", source="trace.json"))
    with pytest.warns(ImportNoteWarning, match="2 lone surrogate"):
        assert parse(data, format="openai-chat", source="trace.json") == runs[0][1]
    with warnings.catch_warnings():  # the notes' own entry point returns them and does not warn
        warnings.simplefilter("error")
        assert runs_artifacts_and_notes(data, format="openai-chat", source="trace.json")[2] == [
            f"note: trace.json:23: {_NOTE}"]
        assert list(iter_runs(_trace(tmp_path, "pair \\ud83d\\ude00").read_bytes(), format="openai-chat"))


def test_parse_event_files_warns_and_event_files_and_notes_returns_the_note() -> None:
    from contextfold.importers import ImportNoteWarning, event_files_and_notes, parse_event_files
    from tests.e2e.test_cli_import_openhands_folder import conversation

    events = conversation("Fix the failing tests", 1)
    files = [(f"{e['id']}.json", json.dumps(e, indent=1).replace("case0", "case0 \\udc00").encode())
             for e in events]
    with pytest.warns(ImportNoteWarning) as caught:
        parsed = parse_event_files(files)
    assert [str(w.message).split(" (")[0] for w in caught] == [
        "3.json:5: 3 lone surrogate escape(s)", "4.json:6: 1 lone surrogate escape(s)"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again, notes = event_files_and_notes(files)
    assert again == parsed and [n.split(":")[1].strip() for n in notes] == ["3.json", "4.json"]
