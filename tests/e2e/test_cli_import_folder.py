"""``contextfold import FOLDER``: every trace under a folder, one run per file, in one transaction."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from blake3 import blake3

from contextfold.cli import main
from contextfold.import_run_ids import run_id_for
from tests.conftest import TRACES

TRAJ = {"history": [{"role": "system", "content": "You work in a shell."},
                    {"role": "user", "content": "Fix the failing test in calc.py"}],
        "trajectory": [{"thought": "Look first.", "action": "open calc.py\n",
                        "observation": "[File: calc.py (1 lines total)]\n1:def add(a, b): return a - b"}]}
CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


def cf(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--store", f"sqlite:///{tmp_path / 'cf.db'}", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    if not (tmp_path / "cf.db").exists():  # an import refused before it opened the store
        return {}
    code, out, _ = cf(tmp_path, capsys, "runs", "--json")
    assert code == 0
    return {r["run_id"]: r["events"] for r in json.loads(out)}


def events_json(tmp_path: Path, capsys: pytest.CaptureFixture[str], run: str) -> list[dict[str, object]]:
    code, out, err = cf(tmp_path, capsys, "events", run, "--json")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def sweep_folder(root: Path) -> Path:
    """SWE-agent's layout (<instance>/<instance>.traj beside preds.json and logs), a chat
    export in a subfolder, and files an import must not read (hidden, not matched)."""
    write(root / "django-1" / "django-1.traj", TRAJ)
    write(root / "flask-2" / "flask-2.traj", TRAJ)
    write(root / "chats" / "greeting.json", CHAT)
    write(root / "preds.json", {"django-1": {"model_patch": "diff --git ..."}})
    (root / "django-1" / "django-1.debug.log").write_text("not a trace")
    write(root / ".cache" / "old.json", CHAT)
    write(root / "chats" / ".draft.json", CHAT)
    return root


def test_a_folder_imports_each_trace_as_a_run_named_by_its_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sweep_folder(tmp_path / "sweep")
    code, out, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp")
    assert code == 0, err
    assert "skipped 1 file(s) of no known trace format: preds.json" in out
    assert f"into 3 run(s) from {root} (1 openai-chat file, 2 swe-agent files)" in out
    assert runs(tmp_path, capsys) == {"exp/chats/greeting": 3, "exp/django-1": 6, "exp/flask-2": 6}
    code, out, _ = cf(tmp_path, capsys, "runs", "exp/d")
    assert code == 0 and out == "exp/django-1\t6 events\tno times\n"  # SWE-agent trajectories hold none
    code, out, _ = cf(tmp_path, capsys, "runs", "nope/")
    assert code == 0 and out.startswith("no runs starting with 'nope/' in ")
    # each run is what importing its file alone records
    code, _, err = cf(tmp_path, capsys, "import", str(root / "django-1" / "django-1.traj"), "--run", "one")
    assert code == 0, err
    assert events_json(tmp_path, capsys, "exp/django-1") == events_json(tmp_path, capsys, "one")


def test_glob_picks_the_files_and_format_reads_them_all(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = sweep_folder(tmp_path / "sweep")
    code, out, err = cf(tmp_path, capsys, "import", str(root), "--run", "t", "--glob", "*.traj")
    assert code == 0, err
    assert "skipped" not in out and set(runs(tmp_path, capsys)) == {"t/django-1", "t/flask-2"}
    # --format is a promise about every matched file: preds.json is not OpenAI chat
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "f", "--format", "openai-chat",
                      "--glob", "*.json")
    assert code == 2 and f"ImportFormatError: {root / 'preds.json'}:1" in err, err
    assert set(runs(tmp_path, capsys)) == {"t/django-1", "t/flask-2"}
    code, _, err = cf(tmp_path, capsys, "import", str(root / "preds.json"), "--run", "g", "--glob", "*.traj")
    assert code == 2 and "--glob selects files in a folder; this is not one" in err


def test_a_broken_trace_fails_the_whole_folder_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sweep_folder(tmp_path / "sweep")
    (root / "zeta" / "zeta.traj").parent.mkdir()
    (root / "zeta" / "zeta.traj").write_text(json.dumps(TRAJ)[:-20])  # cut off mid-write
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp")
    assert code == 2 and f"ImportFormatError: {root / 'zeta' / 'zeta.traj'}:" in err, err
    assert runs(tmp_path, capsys) == {}


def test_a_taken_run_id_writes_none_of_the_folder(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root = sweep_folder(tmp_path / "sweep")
    one = str(root / "flask-2" / "flask-2.traj")
    assert cf(tmp_path, capsys, "import", one, "--run", "exp/flask-2")[0] == 0
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp")
    assert code == 2, err
    assert (f"RunExistsError: run 'exp/flask-2' (the run of {one}) already exists with "
            in err and "; pick another --run" in err), err
    assert err.count(one) == 1
    assert set(runs(tmp_path, capsys)) == {"exp/flask-2"}


def test_two_files_named_as_one_run_are_refused_before_writing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sweep"
    write(root / "a" / "a.traj", TRAJ)
    write(root / "a.traj", TRAJ)
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp")
    assert code == 2 and "its run id 'exp/a' is also" in err, err
    assert runs(tmp_path, capsys) == {}


def test_limits_and_empty_folders_are_typed_errors(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    root = sweep_folder(tmp_path / "sweep")
    total = sum(p.stat().st_size for p in [*root.rglob("*.traj"), root / "chats" / "greeting.json",
                                           root / "preds.json"])
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp", "--max-bytes", str(total - 1))
    assert code == 2, err
    assert f"InputLimitError: {root} (its 4 trace files): more than {total - 1} bytes" in err, err
    assert cf(tmp_path, capsys, "import", str(root), "--run", "exp", "--max-bytes", str(total))[0] == 0
    (tmp_path / "empty").mkdir()
    code, _, err = cf(tmp_path, capsys, "import", str(tmp_path / "empty"), "--run", "e")
    assert code == 2 and "no file in this folder matches *.traj or *.json or *.jsonl" in err, err
    only_preds = tmp_path / "preds"
    write(only_preds / "preds.json", {"x": {"model_patch": ""}})
    code, _, err = cf(tmp_path, capsys, "import", str(only_preds), "--run", "p")
    assert code == 2 and "none of its 1 matching files is a trace in a known format" in err, err
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "bad id")
    assert code == 2, err
    assert f"InputLimitError: {root / 'chats' / 'greeting.json'}: invalid run id 'bad id/" in err, err
    # a multi-run file's ids are checked too, before the store is opened: the file is named
    two_runs = tmp_path / "two.jsonl"
    two_runs.write_text('{"messages": [{"role": "user", "content": "a"}]}\n'
                        '{"messages": [{"role": "user", "content": "b"}]}\n')
    code, _, err = cf(tmp_path, capsys, "import", str(two_runs), "--run", "x" * 198,
                      "--format", "openai-chat")
    assert code == 2 and f"InputLimitError: {two_runs}: invalid run id 'xxx" in err, err
    assert not [r for r in runs(tmp_path, capsys) if r.startswith("x")]


def test_exported_runs_move_to_another_store_as_one_folder(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-off of several runs: each exported with 'events --json' into a file named after
    it, the folder imported elsewhere under a prefix; every run's log comes back the same."""
    root = sweep_folder(tmp_path / "sweep")
    assert cf(tmp_path, capsys, "import", str(root), "--run", "team/exp")[0] == 0
    exported = tmp_path / "handoff"
    for run_id in runs(tmp_path, capsys):
        code, out, err = cf(tmp_path, capsys, "events", run_id, "--json")
        assert code == 0, err
        (exported / f"{run_id}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (exported / f"{run_id}.jsonl").write_text(out)
    other = tmp_path / "other"
    other.mkdir()
    code, out, err = cf(other, capsys, "import", str(exported), "--run", "in")
    assert code == 0 and "(3 events files)" in out, err
    moved = runs(other, capsys)
    assert sorted(moved) == ["in/team/exp/chats/greeting", "in/team/exp/django-1", "in/team/exp/flask-2"]
    for run_id in moved:
        assert events_json(other, capsys, run_id) == events_json(tmp_path, capsys, run_id.removeprefix("in/"))


def test_run_ids_follow_the_path_and_name_an_instance_once() -> None:
    assert run_id_for("x", Path("inst/inst.traj")) == "x/inst"
    assert run_id_for("x", Path("a/inst/inst.traj")) == "x/a/inst"
    assert run_id_for("x", Path("a/b.json")) == "x/a/b"
    assert run_id_for("x", Path("b.jsonl")) == "x/b"
    assert run_id_for("x", Path("b/b/c.traj")) == "x/b/b/c"
    # what a run id cannot hold becomes "_": a folder of files named by people imports too; a
    # name with a non-ASCII letter is told apart by its hash
    naive = blake3("naïve".encode()).hexdigest()[:8]
    assert run_id_for("x", Path("run 1 (retry)/naïve.json")) == f"x/run_1__retry_/na_ve+{naive}"


def test_names_in_other_scripts_import_as_runs_of_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every CJK letter is a character a run id cannot hold: ``登录错误.json`` and ``支付错误.json``
    both became ``imp/____`` and the whole folder was refused for the clash."""
    root = tmp_path / "traces"
    write(root / "登录错误.json", CHAT)
    write(root / "支付错误.json", [*CHAT, {"role": "user", "content": "pay"}])
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "imp")
    assert code == 0, err
    imported = runs(tmp_path, capsys)
    assert imported == {f"imp/____+{blake3(name.encode()).hexdigest()[:8]}": events
                        for name, events in (("登录错误", 3), ("支付错误", 4))}


def test_paths_that_differ_only_in_what_a_run_id_cannot_hold_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sweep"
    write(root / "a b.json", CHAT)
    write(root / "a_b.json", CHAT)
    write(root / "my run (2).json", CHAT)
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp")
    assert code == 2 and "its run id 'exp/a_b' is also" in err, err
    (root / "a_b.json").unlink()
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "exp")
    assert code == 0, err
    assert set(runs(tmp_path, capsys)) == {"exp/a_b", "exp/my_run__2_"}


@pytest.mark.skipif(not (TRACES / "swe-agent-demos").is_dir(), reason=f"{TRACES} has no swe-agent-demos")
def test_the_swe_agent_demonstrations_folder_imports_as_22_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = shutil.copytree(TRACES / "swe-agent-demos", tmp_path / "demos")
    code, out, err = cf(tmp_path, capsys, "import", str(root), "--run", "demos")
    assert code == 0, err
    assert "(22 swe-agent files)" in out and "... 2 more" in out
    found = runs(tmp_path, capsys)
    expected = {run_id_for("demos", p.relative_to(root)) for p in root.rglob("*.traj")}
    assert set(found) == expected and len(expected) == 22
    assert "demos/trajectories/demonstrations/ctf/crypto/katy" in found


def test_tool_names_an_api_refuses_are_named_at_import(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A runtime names MCP tools ``server.tool``; OpenAI and Anthropic refuse the name, so every build
    of the run for them fails. The import says so, and for which APIs, before the first build does.
    A name the history only calls (never registered) is shown under an alias instead: no note."""
    from importlib.resources import files

    lines = files("contextfold.samples").joinpath("fix_invoice_rounding.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    registered = next(e for e in events if e["type"] == "tools_registered")
    registered["tools"][0]["name"] = "github.create_issue"
    source = tmp_path / "run.jsonl"
    source.write_text("\n".join(json.dumps(e) for e in events))
    code, out, _ = cf(tmp_path, capsys, "import", str(source), "--run", "mcp")
    assert code == 0
    [note] = [line for line in out.splitlines() if line.startswith("note:")]
    assert note.startswith("note: tool name(s) 'github.create_issue' are refused by openai-chat (letters, "
                           "digits, _ and -, at most 64); openai-responses (")
    assert "; anthropic (letters, digits, _ and -, at most 128): builds of these runs" in note
    assert "do not offer them" in note
    assert "gemini" not in note  # Gemini takes dots
    code, out, _ = cf(tmp_path, capsys, "build", "mcp", "--provider", "anthropic", "--json")
    assert code == 0 and "tool_not_offered:github.create_issue" in out  # as announced
    assert cf(tmp_path, capsys, "build", "mcp", "--provider", "gemini")[0] == 0
    call = {"id": "c1", "type": "function", "function": {"name": "github.create_issue", "arguments": "{}"}}
    called = [{"role": "user", "content": "file it"},
              {"role": "assistant", "content": None, "tool_calls": [call]},
              {"role": "tool", "tool_call_id": "c1", "content": "#12"}]
    path = write(tmp_path / "called.json", called)
    code, out, _ = cf(tmp_path, capsys, "import", str(path), "--run", "called")
    assert code == 0 and "note:" not in out
    assert cf(tmp_path, capsys, "build", "called", "--provider", "anthropic")[0] == 0
    code, out, _ = cf(tmp_path, capsys, "import", str(write(tmp_path / "plain.json", CHAT)), "--run", "plain")
    assert code == 0 and "note:" not in out


def test_tool_schemas_an_api_refuses_are_named_at_import(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Parameters whose schema is not an object (an array, say), a top-level ``anyOf`` (MCP's zod
    unions) or a ``filter[id]`` key are refused by OpenAI and Anthropic as a whole request; the
    import names the tools, the APIs and why, and a build for them does not offer the tools."""
    from importlib.resources import files

    lines = files("contextfold.samples").joinpath("fix_invoice_rounding.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    registered = next(e for e in events if e["type"] == "tools_registered")
    registered["tools"][0]["parameters"] = {"type": "array", "items": {"type": "string"}}
    registered["tools"][3]["parameters"]["anyOf"] = [{"required": ["path"]}, {"required": ["n"]}]
    registered["tools"][4]["parameters"]["properties"]["filter[q]"] = {"type": "string"}
    source = tmp_path / "run.jsonl"
    source.write_text("\n".join(json.dumps(e) for e in events))
    code, out, _ = cf(tmp_path, capsys, "import", str(source), "--run", "arr")
    assert code == 0
    [note] = [line for line in out.splitlines() if line.startswith("note:")]
    assert note == (
        "note: tool(s) 'git_log' ('anyOf' at the top level of its parameters schema: openai-chat, "
        "openai-responses, anthropic), 'run_tests' (its parameters schema is of type 'array', not 'object': "
        "openai-chat, openai-responses, anthropic, gemini), 'search_docs' (property key 'filter[q]' of its "
        "parameters schema is outside ^[a-zA-Z0-9_.-]{1,64}$: anthropic) take parameters schemas the APIs "
        "named refuse: builds of these runs for those do not offer them (their calls are shown as runtime "
        "notes; fix the schema in the source to offer them)")
    code, out, _ = cf(tmp_path, capsys, "build", "arr", "--provider", "openai-chat", "--json")
    assert code == 0  # as announced: built, without them
    names = {t["function"]["name"] for t in json.loads(out).get("tools", [])}
    assert not names & {"run_tests", "git_log"} and "TOOL_NOT_OFFERED" in out  # run_tests was called


def test_a_multi_run_files_task_ids_that_a_run_id_cannot_hold_become_underscores(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tau-bench file whose task id held a space was refused whole (InputLimitError on the run
    id), though a folder's file names are mapped to ``_``. Its suffixes are mapped the same way
    (``/`` kept), and two runs that then share an id are refused, writing nothing."""
    def record(task_id: str) -> dict[str, object]:
        return {"task_id": task_id, "trial": 0, "traj": CHAT}

    write(tmp_path / "tb.json", [record("a b"), record("x/y (z)"), record("a_b")])
    code, _, err = cf(tmp_path, capsys, "import", str(tmp_path / "tb.json"), "--run", "tb")
    assert code == 2 and "its run id 'tb/task-a_b-trial-0' is also another of its runs'" in err, err
    assert runs(tmp_path, capsys) == {}
    write(tmp_path / "tb.json", [record("a b"), record("x/y (z)")])
    code, _, err = cf(tmp_path, capsys, "import", str(tmp_path / "tb.json"), "--run", "tb")
    assert code == 0, err
    assert runs(tmp_path, capsys) == {"tb/task-a_b-trial-0": 3, "tb/task-x/y__z_-trial-0": 3}
