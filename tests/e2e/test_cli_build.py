"""build / manifest / replay / diff through the real command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.cli_build import EXCLUDED_SHOWN
from contextfold.store.compression import unpack_state
from tests.cli_runner import cf


def test_build_json_manifest_replay_and_diff(tmp_path: Path) -> None:
    assert cf("demo", cwd=tmp_path).returncode == 0
    out = cf("build", "demo-fix-invoice", "--provider", "openai-chat", "--window", "4000", "--reserve", "500",
             "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["request"]["messages"][0]["role"] == "system"
    assert data["manifest"]["selected_tokens"] <= data["manifest"]["budget_tokens"] == 3500
    table = cf("manifest", "demo-fix-invoice", "--window", "1500", "--reserve", "500", cwd=tmp_path)
    assert table.returncode == 0
    assert "excluded:" in table.stdout and "low_priority" in table.stdout
    ok = cf("replay", "demo-fix-invoice", "--turn", "6", "--verify", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("ok:")
    diff = cf("diff", "demo-fix-invoice", "2", "6", cwd=tmp_path)
    assert diff.returncode == 0 and "turn 2 -> 6" in diff.stdout and "superseded" in diff.stdout


def test_a_small_window_without_a_reserve_builds_with_a_quarter_of_it_reserved(tmp_path: Path) -> None:
    """``build --window 8000`` failed: "window 8000 minus reserve 8000 leaves no budget"."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    out = cf("build", "demo-fix-invoice", "--provider", "anthropic", "--window", "8000", "--json",
             cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    manifest = data["manifest"]
    assert (manifest["reserved_output_tokens"], manifest["budget_tokens"]) == (2000, 6000)
    assert data["request"]["max_tokens"] == 2000  # the reply is asked to fit what was reserved
    out = cf("build", "demo-fix-invoice", "--window", "8000", "--reserve", "8000", cwd=tmp_path)
    assert out.returncode == 2 and "window 8000 minus reserve 8000 leaves no budget" in out.stderr
    out = cf("compact", "demo-fix-invoice", "--window", "8000", "--dry-run", cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def test_bad_run_settings_or_paths_exit_2_with_one_line_and_write_nothing(tmp_path: Path) -> None:
    assert cf("demo", cwd=tmp_path).returncode == 0
    for args, message in ((("build", "no-such-run"), "RunNotFoundError: run 'no-such-run' not found"),
                          (("manifest", "no-such-run"), "RunNotFoundError"),
                          (("usage", "no-such-run", "--turn", "1", "--input", "5"), "RunNotFoundError"),
                          (("build", "demo-fix-invoice", "--model", "gpt-\udcff"),  # argv byte 0xff
                           "InvalidInputError: invalid build config: model: text that is not valid Unicode"),
                          (("build", "demo-fix-invoice", "--window", "-5"),
                           "InvalidInputError: invalid build config: window: Input should be greater than 0"),
                          (("audit", "demo-fix-invoice", "--turn", "1", "--window", "0"),
                           "invalid build config: window"),
                          # 400 digits ended in an OverflowError traceback; 1e20 was recorded
                          (("manifest", "demo-fix-invoice", "--window", "9" * 400),
                           "invalid build config: window: at most 1000000000 tokens (a model's window is "
                           "at most ~10M), got a 400-digit number"),
                          (("build", "demo-fix-invoice", "--window", str(10**20)),
                           "invalid build config: window: at most 1000000000 tokens"),
                          (("build", "demo-fix-invoice", "--reserve", str(10**12)),
                           "invalid build config: reserve: at most 1000000000 tokens"),
                          (("usage", "demo-fix-invoice", "--turn", "1", "--input", "-5"),
                           "InvalidInputError: invalid usage: input_tokens"),
                          (("usage", "demo-fix-invoice", "--turn", "1", "--input", "50", "--cached", "3000"),
                           "InvalidInputError: invalid usage: cached_tokens 3000 > input_tokens 50"),
                          (("build", "demo-fix-invoice", "--out", "no/such/dir/req.json"),
                           "cannot write no/such/dir/req.json: no directory 'no/such/dir'"),
                          (("build", "demo-fix-invoice", "--out", "."), "cannot write .: it is a directory"),
                          # a directory the OS will not create files in (even as root): refused before
                          # the build records itself
                          (("build", "demo-fix-invoice", "--out", "/proc/req.json"),
                           "InvalidInputError: cannot write /proc/req.json"),
                          (("audit", "demo-fix-invoice", "--html", "no/such/dir/r.html"),
                           "cannot write no/such/dir/r.html: no directory"),
                          (("audit", "demo-fix-invoice", "--turn", "2", "--html", "r.html"),
                           "InvalidInputError: --html writes the report of the whole run"),
                          (("compact", "demo-fix-invoice", "--keep-recent", "-1"),
                           "InvalidInputError: keep_recent must be >= 0"),
                          (("compact", "demo-fix-invoice", "--keep-recent", "-1", "--window", "20000"),
                           "keep_recent must be >= 0"),
                          (("compact", "demo-fix-invoice", "--window", "0"), "invalid build config: window"),
                          # turn 2 has no record: a diff failing on turn 99 must not record its rebuild
                          (("diff", "demo-fix-invoice", "2", "99"),
                           "TurnNotFoundError: run 'demo-fix-invoice' has no turn 99 (turns 1..6)")):
        out = cf(*args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert message in out.stderr and "Traceback" not in out.stderr
    runs = cf("runs", cwd=tmp_path)
    assert runs.stdout.split()[:3] == ["demo-fix-invoice", "25", "events"]  # then when: its span


def test_a_log_with_a_missing_event_is_an_integrity_failure_exit_3(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    db = sqlite3.connect(tmp_path / "contextfold.db")
    db.execute("DELETE FROM contextfold_events WHERE originator_version = 9")
    db.commit()
    db.close()
    out = cf("replay", "demo-fix-invoice", "--turn", "6", "--verify", cwd=tmp_path)
    assert out.returncode == 3, out.stderr  # an integrity failure, not a plain mismatch (1)
    assert "integrity error" in out.stderr and "Traceback" not in out.stderr
    out = cf("show", "demo-fix-invoice", "8-10", cwd=tmp_path)  # not events 8 and 10 as if whole
    assert out.returncode == 3 and "position 9 is missing" in out.stderr, (out.stdout, out.stderr)


def test_a_build_that_fails_leaves_calls_in_flight_open(tmp_path: Path) -> None:
    # the run ends on a call still in flight: a build cancels it, but only a build that succeeds
    history = json.dumps([
        {"role": "user", "content": "run ls"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}])
    assert cf("import", "-", "--run", "r", cwd=tmp_path, stdin=history.encode()).returncode == 0
    out = cf("build", "r", "--window", "10", "--reserve", "1", cwd=tmp_path)
    assert out.returncode == 2 and "RequiredContextExceedsBudgetError" in out.stderr, out.stderr
    assert cf("runs", cwd=tmp_path).stdout.split() == ["r", "3", "events", "no", "times"]  # chat: none
    assert cf("build", "r", cwd=tmp_path).returncode == 0
    events = cf("events", "r", cwd=tmp_path).stdout
    assert "tool_call_cancelled" in events and "context_built" in events


def test_build_out_writes_the_request_body(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    out = cf("build", "demo-fix-invoice", "--provider", "anthropic", "--out", "req.json", cwd=tmp_path)
    assert out.returncode == 0
    body = json.loads((tmp_path / "req.json").read_text())
    assert body["messages"][0]["role"] == "user" and "system" in body


def test_replay_verify_without_a_record_exits_non_zero_and_says_what_to_do(tmp_path: Path) -> None:
    """A turn with no record is a record not found (exit 2, as README and ``--help`` list it), not
    a mismatch (1), and not an integrity failure of the log."""
    cf("demo", cwd=tmp_path)
    out = cf("replay", "demo-fix-invoice", "--turn", "2", "--verify", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr == ("contextfold: RecordNotFoundError: run 'demo-fix-invoice' turn 2 has no "
                          "context_built record yet, so there is no first record to read: build the turn to "
                          "record one (contextfold build demo-fix-invoice --turn 2; in Python "
                          "Run.build(turn=2)), then ask again\n")
    # what the message says to do works: the build records the turn, which --verify then checks
    assert cf("build", "demo-fix-invoice", "--turn", "2", cwd=tmp_path).returncode == 0
    assert cf("replay", "demo-fix-invoice", "--turn", "2", "--verify", cwd=tmp_path).returncode == 0
    out = cf("replay", "demo-fix-invoice", "--turn", "2", "--verify", "--record", "2", cwd=tmp_path)
    assert (out.returncode, out.stderr) == (
        2, "contextfold: RecordNotFoundError: run 'demo-fix-invoice' turn 2 has one context_built record, so "
           "there is no record 2: ask for first, last or 1 (each names that record)\n")


def test_replay_verify_shows_the_first_difference(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    db = sqlite3.connect(tmp_path / "contextfold.db")
    row = db.execute("SELECT originator_version, state FROM contextfold_events "
                     "WHERE topic LIKE 'context_built@%'").fetchone()
    position, state = row  # a record is stored compressed: read, edited and written back plain
    body = json.loads(unpack_state(state, 1 << 30, "test")[64:])
    assert body["builder"].startswith("contextfold ")
    body["request_hash"] = "0" * 64
    body["manifest"]["request_hash"] = "0" * 64
    body["builder"] = "contextfold 0.0.1"  # as if an older release had recorded it
    from contextfold.domain.log import chain_hash

    prev = db.execute("SELECT state FROM contextfold_events WHERE originator_version = ?",
                      (position - 1,)).fetchone()[0][:64].decode()
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    db.execute("UPDATE contextfold_events SET state = ? WHERE originator_version = ?",
               (chain_hash("demo-fix-invoice", position, prev, raw).encode() + raw, position))
    db.commit()
    db.close()
    out = cf("replay", "demo-fix-invoice", "--turn", "6", "--verify", cwd=tmp_path)
    assert out.returncode == 1
    assert "request_hash" in out.stderr
    assert "note: recorded by contextfold 0.0.1, rebuilt by contextfold " in out.stderr


def test_replay_verify_over_a_damaged_log_or_artifact_is_an_integrity_failure(tmp_path: Path) -> None:
    """An altered event under a recorded turn was a plain MISMATCH (exit 1), a damaged artifact the
    turn cites "cannot verify" (exit 1), while ``verify`` and ``audit --turn`` said integrity (3)."""
    big = "\n".join(f"line {i} FAILED test_{i}" for i in range(6000))  # over 64 KiB: an artifact
    chat = [{"role": "user", "content": "Run tests"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "pytest", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": big},
            {"role": "assistant", "content": "fixing"}, {"role": "user", "content": "go on"}]
    (tmp_path / "chat.json").write_text(json.dumps(chat))
    assert cf("import", "chat.json", "--run", "r", cwd=tmp_path).returncode == 0
    assert cf("build", "r", "--provider", "anthropic", cwd=tmp_path).returncode == 0  # records turn 3
    assert cf("replay", "r", "--turn", "3", "--verify", cwd=tmp_path).returncode == 0
    db = sqlite3.connect(tmp_path / "contextfold.db")
    [(data,)] = db.execute("SELECT data FROM contextfold_artifacts").fetchall()
    db.execute("UPDATE contextfold_artifacts SET data = x'00ff'")
    db.commit()
    out = cf("replay", "r", "--turn", "3", "--verify", cwd=tmp_path)
    assert out.returncode == 3 and "integrity error: artifact" in out.stderr, out.stderr
    db.execute("UPDATE contextfold_artifacts SET data = ?", (data,))  # the artifact whole again
    db.execute("UPDATE contextfold_events SET state = CAST(REPLACE(CAST(state AS TEXT), 'Run tests', "
               "'Run TESTS') AS BLOB) WHERE originator_id = 'r' AND originator_version = 2")
    db.commit()
    db.close()
    out = cf("replay", "r", "--turn", "3", "--verify", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert "integrity error: run 'r' position 2: " in out.stderr and "turn 3 cannot be verified" in out.stderr


def test_schema_manifest(tmp_path: Path) -> None:
    out = cf("schema", "manifest", cwd=tmp_path)
    schema = json.loads(out.stdout)
    assert schema["title"] == "ContextManifest"
    assert "selected_tokens" in schema["properties"]


def _long_run(tmp_path: Path) -> str:
    """A run whose request at a 2,000-token window leaves out ~40 old messages (low_priority)
    and one file version (superseded); the store's URL."""
    from contextfold.api import open_store
    from contextfold.domain.events import FileRead, UserInput

    store = f"sqlite:///{tmp_path / 'long.db'}"
    with open_store(store) as s:
        run = s.run("long")
        run.append(FileRead(path="a.py", content="x = 1\n", revision="r1"))
        run.append(FileRead(path="a.py", content="x = 2\n", revision="r2"))
        for i in range(60):
            run.append(UserInput(f"message {i}: " + "word " * 60))
    return store


def test_manifest_table_lists_the_newest_excluded_of_each_reason_and_counts_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table of a 10,000-event run listed its 9,783 low-priority lines in id order
    (e10, e100, e1000, ...). Now each reason says how many and how many tokens, lists its
    newest ``--excluded`` (default 20) and says how many more; ``all`` lists every one."""
    store = _long_run(tmp_path)

    def table(*extra: str) -> str:
        capsys.readouterr()
        assert main(["--store", store, "manifest", "long", "--window", "2000", "--reserve", "500",
                     *extra]) == 0
        return capsys.readouterr().out

    manifest = json.loads(table("--json"))
    dropped = sorted((e for e in manifest["excluded_items"] if e["reason"] == "low_priority"),
                     key=lambda e: int(e["id"][1:]), reverse=True)
    assert len(dropped) > EXCLUDED_SHOWN + 5
    assert [e["reason"] for e in manifest["excluded_items"]].count("superseded") == 1

    def listed(text: str, reason: str) -> list[str]:
        return [line.split()[1] for line in text.splitlines() if line.startswith(f"  {reason} ")]

    default = table()
    assert listed(default, "low_priority") == [e["id"] for e in dropped[:EXCLUDED_SHOWN]]
    assert (f"  low_priority: {len(dropped)} fragments, {sum(e['tokens'] for e in dropped)} tokens, "
            "newest first") in default
    assert f"  ... {len(dropped) - EXCLUDED_SHOWN} more low_priority (--excluded all" in default
    assert len(listed(default, "superseded")) == 1 and "more superseded" not in default
    assert listed(table("--excluded", "all"), "low_priority") == [e["id"] for e in dropped]
    few = table("--excluded", "3")
    assert listed(few, "low_priority") == [e["id"] for e in dropped[:3]]
    assert len(listed(few, "superseded")) == 1
    assert listed(table("--excluded", "0"), "low_priority") == []
    for bad in ("-1", "some", ""):
        with pytest.raises(SystemExit) as exit_:
            main(["--store", store, "manifest", "long", "--excluded", bad])
        assert exit_.value.code == 2
        assert "--excluded: expected a number >= 0 or 'all'" in capsys.readouterr().err


def test_manifest_table_orders_any_excluded_ids_newest_first_without_failing(tmp_path: Path) -> None:
    """Ids are natural-ordered by their runs of ASCII digits; other characters (a superscript
    digit, another script's digits) are text, not numbers: ``int('²')`` raised in a first cut."""
    from contextfold.api import open_store
    from contextfold.cli_build import manifest_table
    from contextfold.domain.manifest import ExcludedFragment

    with open_store(_long_run(tmp_path)) as s:
        manifest = s.run("long").build(window=2000, reserve=500, record=False).manifest
    ids = ["e9", "e10", "g100", "a1²", "mem", "e2x3", "\u0663"]
    odd = manifest.model_copy(update={"excluded_items": tuple(
        ExcludedFragment(id=i, kind="history", source_ref=f"x:{i}", tokens=1, reason="low_priority")
        for i in ids)})
    listed = [line.split()[1] for line in manifest_table(odd).splitlines()
              if line.startswith("  low_priority ")]
    assert listed == ["\u0663", "mem", "g100", "e10", "e9", "e2x3", "a1²"]


def test_audit_of_a_turn_lists_excluded_fragments_as_manifest_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _long_run(tmp_path)
    budget = ["--window", "2000", "--reserve", "500"]
    assert main(["--store", store, "build", "long", *budget, "--out", str(tmp_path / "r.json")]) == 0

    def audit(*extra: str) -> list[str]:
        capsys.readouterr()
        assert main(["--store", store, "audit", "long", "--turn", "1", *budget, *extra]) == 0
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("  low_priority ")]

    assert len(audit()) == EXCLUDED_SHOWN
    assert len(audit("--excluded", "1")) == 1
    assert len(audit("--excluded", "all")) > EXCLUDED_SHOWN


def test_manifest_of_the_next_request_is_a_preview_that_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``manifest RUN`` on a run whose tool still ran logged the call as cancelled and recorded
    a request no model was sent (as the turn's first record). It previews now; ``build`` writes."""
    from contextfold.api import open_store
    from contextfold.domain.events import ModelResponse, ToolCall, UserInput

    store = f"sqlite:///{tmp_path / 'live.db'}"
    with open_store(store) as s:
        s.run("live").append(UserInput("list the files"),
                             ModelResponse(tool_calls=[ToolCall(call_id="c1", name="ls", arguments="{}")]))

    def types() -> list[str]:
        with open_store(store) as s:
            return [r.event.type for r in s.run("live").events()]

    capsys.readouterr()
    assert main(["--store", store, "manifest", "live"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("turn 2, the next request, previewed: nothing was written")
    assert "tool_call_cancelled:c1" in out  # what a build would append, named
    assert main(["--store", store, "manifest", "live", "--json"]) == 0
    previewed = json.loads(capsys.readouterr().out)
    # the turn not answered yet named by number is the same preview, not the log as it stands
    # (which dropped the call's group as stale: two requests for one turn)
    assert main(["--store", store, "manifest", "live", "--turn", "2"]) == 0
    assert capsys.readouterr().out == out
    assert main(["--store", store, "why", "live", "--turn", "2", "c1"]) == 0  # and say so
    assert "turn 2 (the next request, previewed: the turn has no record yet" in capsys.readouterr().out
    assert main(["--store", store, "audit", "live", "--turn", "2"]) == 2  # shown; nothing to check it against
    assert "this is the next request as a build would make it now" in capsys.readouterr().out
    assert types() == ["user_input", "model_response"]
    with pytest.raises(SystemExit) as exit_info:  # nothing to retry: it never writes
        main(["--store", store, "manifest", "live", "--retries", "1"])
    assert exit_info.value.code == 2
    assert main(["--store", store, "build", "live", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["manifest"] == previewed
    assert types() == ["user_input", "model_response", "tool_call_cancelled", "context_built"]


def test_diff_says_why_each_tool_entered_or_left(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """diff listed the tools that left by name only ("tools +[..] -[..]"), though it promises
    reasons: a manifest lists the tools a request declares, not why the others were left out."""
    from contextfold.api import open_store
    from contextfold.domain.events import ModelResponse, PolicySet, ToolSpec, ToolsRegistered, UserInput
    from contextfold.domain.manifest import BuildConfig

    monkeypatch.chdir(tmp_path)
    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("tools")
        run.append(PolicySet(text="careful", pinned_tools=("deploy",)),
                   ToolsRegistered(tools=(ToolSpec(name="deploy", description="deploy a release"),
                                          ToolSpec(name="drop_db", description="drop the database"),
                                          ToolSpec(name="weather", description="forecast by city"))),
                   UserInput("what is the weather in Oslo?"))
        catalogue = BuildConfig(provider="openai-chat", max_tools=1)  # more tools than the cap: ranked
        run.build(config=catalogue)
        run.append(ModelResponse(text="sunny"),
                   PolicySet(text="no deploys today", source_ref="runtime://freeze",
                             denied_tools=("deploy",)),
                   UserInput("then clean up the old database"))
        run.build(config=catalogue)
    capsys.readouterr()
    assert main(["diff", "tools", "1", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  + tool drop_db: exposed: relevant (bm25 0.88)" in lines
    assert ("  - tool deploy: tool 'deploy' (registered) is never exposed: the run's policy denies it "
            "(denied_tools)") in lines
    # relevant to the first input: rule 5 would keep it, but the one slot went to drop_db
    assert ("  - tool weather: tool 'weather' (registered) is neither pinned nor called by the kept "
            "history, and shares no term with the turn's goal, ready plan steps and latest input; it is "
            "relevant to the user's input of turn 1, but max_tools (1) were filled by the tools relevant "
            "to the turn") in lines  # drop_db, relevant now: no recent tool holds a slot
    assert main(["diff", "tools", "1", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["tools_entered"], data["tools_left"]) == (["drop_db"], ["deploy", "weather"])
    assert set(data["tool_reasons"]) == {"drop_db", "deploy", "weather"}
