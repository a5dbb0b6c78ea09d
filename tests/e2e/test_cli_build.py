"""build / manifest / replay / diff through the real command."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.test_cli_record import cf


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
    assert runs.stdout.split() == ["demo-fix-invoice", "25", "events"]


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
    assert cf("runs", cwd=tmp_path).stdout.split() == ["r", "3", "events"]
    assert cf("build", "r", cwd=tmp_path).returncode == 0
    events = cf("events", "r", cwd=tmp_path).stdout
    assert "tool_call_cancelled" in events and "context_built" in events


def test_build_out_writes_the_request_body(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    out = cf("build", "demo-fix-invoice", "--provider", "anthropic", "--out", "req.json", cwd=tmp_path)
    assert out.returncode == 0
    body = json.loads((tmp_path / "req.json").read_text())
    assert body["messages"][0]["role"] == "user" and "system" in body


def test_replay_verify_without_a_record_exits_non_zero(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    out = cf("replay", "demo-fix-invoice", "--turn", "2", "--verify", cwd=tmp_path)
    assert out.returncode == 1
    assert "no context_built record" in out.stderr


def test_replay_verify_shows_the_first_difference(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    db = sqlite3.connect(tmp_path / "contextfold.db")
    row = db.execute("SELECT originator_version, state FROM contextfold_events "
                     "WHERE topic LIKE 'context_built@%'").fetchone()
    position, state = row
    body = json.loads(state[64:])
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


def test_schema_manifest(tmp_path: Path) -> None:
    out = cf("schema", "manifest", cwd=tmp_path)
    schema = json.loads(out.stdout)
    assert schema["title"] == "ContextManifest"
    assert "selected_tokens" in schema["properties"]
