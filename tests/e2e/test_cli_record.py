"""The `contextfold` command end to end, as a user runs it (subprocess, real SQLite file)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.cli_runner import cf, cf_process
from tests.conftest import TRACES


def test_help_on_every_command(tmp_path: Path) -> None:
    top = cf_process("--help", cwd=tmp_path)
    assert top.returncode == 0
    for name in ("import", "runs", "events", "verify", "schema", "demo"):
        assert name in top.stdout
        sub = cf_process(name, "--help", cwd=tmp_path)
        assert sub.returncode == 0, sub.stderr
        assert "--store" in sub.stdout


def test_demo_records_into_default_sqlite_and_verifies(tmp_path: Path) -> None:
    out = cf_process("demo", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "contextfold.db").exists()
    assert "integrity: ok" in out.stdout
    assert "call_01" in out.stdout and "tool_result" in out.stdout
    runs = cf_process("runs", "--json", cwd=tmp_path)
    # 24 sample events + the context_built record of the demo's build
    (listed,) = json.loads(runs.stdout)
    assert {k: listed[k] for k in ("run_id", "events")} == {"run_id": "demo-fix-invoice", "events": 25}
    assert listed["first_at"] <= listed["last_at"] and listed["last_at"].endswith("Z")  # when it was recorded
    again = cf_process("demo", cwd=tmp_path)  # a second demo never clobbers the first
    assert "demo-fix-invoice-2" in again.stdout


def test_demo_says_why_its_anthropic_request_names_no_model(tmp_path: Path) -> None:
    """The sample run is gpt-4o's; a body for Anthropic names no model of another vendor
    (``model_family``), and the table printed ``model None``. It says what is true, and the remedy."""
    out = cf("demo", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "model None" not in out.stdout
    assert ("turn 6  provider anthropic  model none in the body (the run's model, gpt-4o, is another "
            "vendor's; --model names an anthropic one)  encoding cl100k_base") in out.stdout
    preview = cf("manifest", "demo-fix-invoice", "--provider", "anthropic", cwd=tmp_path).stdout
    assert "provider anthropic  model none in the body (--model names one)  encoding" in preview
    named = cf("manifest", "demo-fix-invoice", "--provider", "anthropic", "--model", "claude-sonnet-4-5",
               cwd=tmp_path).stdout
    assert "provider anthropic  model claude-sonnet-4-5  encoding" in named
    gpt = cf("manifest", "demo-fix-invoice", "--provider", "openai-chat", cwd=tmp_path).stdout
    assert "provider openai-chat  model gpt-4o  encoding" in gpt
    assert cf("audit", "demo-fix-invoice", "--html", "r.html", cwd=tmp_path).returncode == 0
    report = (tmp_path / "r.html").read_text()
    assert "anthropic · model none in the body · encoding" in report and "model None" not in report


def test_demo_masks_the_password_of_the_store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``demo`` printed the store's URL whole, where ``runs`` masks it: with ``--store
    postgresql://user:pw@host/db`` the password went to the terminal (and any log of it). No
    server: the SQLite store's URL is swapped for the one a PostgreSQL store holds."""
    import argparse

    import contextfold.cli as cli
    import contextfold.cli_demo as demo
    from contextfold.api import Store

    opened = cli.store_for

    def postgres_named(args: argparse.Namespace, *, create: bool = False) -> Store:
        store = opened(args, create=create)
        store.events.url = "postgresql://alice:S3cretPW@db.example:5432/runs"
        return store

    monkeypatch.setattr(demo, "store_for", postgres_named)  # the demo's module opens its store
    out = cf("demo", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "S3cretPW" not in out.stdout
    assert ("recorded the sample agent run as 'demo-fix-invoice' in postgresql://alice:***@db.example"
            in out.stdout)


def test_events_json_round_trips_through_import(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    dump = cf("events", "demo-fix-invoice", "--json", cwd=tmp_path)
    assert dump.returncode == 0
    (tmp_path / "dump.jsonl").write_text(dump.stdout)
    imp = cf("import", "dump.jsonl", "--run", "copy", "--format", "events", cwd=tmp_path)
    assert imp.returncode == 0, imp.stderr
    again = cf("events", "copy", "--json", cwd=tmp_path)
    assert again.stdout == dump.stdout


def test_events_json_of_a_run_without_run_started_round_trips_positions_and_all(tmp_path: Path) -> None:
    """A run recorded through the API has no run_started; its import got one prepended, so every
    position moved by one: the copy's compaction covered (and its stubs cited) the wrong events
    and replay --verify of its recorded turn was a MISMATCH."""
    from contextfold.api import open_store
    from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput

    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        run = s.run("r1")
        run.append(UserInput("run the tests"))
        for t in range(1, 4):
            run.append(ModelResponse(tool_calls=[ToolCall(call_id=f"c{t}", name="pytest")]),
                       ToolResult(call_id=f"c{t}", content=f"output {t}\n" * 200, is_error=t == 2))
        run.compact("mask", keep_recent=1)
        run.build("anthropic")
    dump = cf("--store", store, "events", "r1", "--json", cwd=tmp_path).stdout
    assert '"type":"run_started"' not in dump and '"type":"history_compacted"' in dump
    (tmp_path / "dump.jsonl").write_text(dump)
    assert cf("--store", store, "import", "dump.jsonl", "--run", "copy", cwd=tmp_path).returncode == 0
    assert cf("--store", store, "events", "copy", "--json", cwd=tmp_path).stdout == dump
    replay = cf("--store", store, "replay", "copy", "--turn", "4", "--verify", cwd=tmp_path)
    assert replay.returncode == 0 and "MISMATCH" not in replay.stdout, replay.stdout + replay.stderr


def test_events_json_into_another_store_refuses_refs_to_artifacts_it_lacks(tmp_path: Path) -> None:
    history = json.dumps([
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a line of output\n" * 10_000},  # an artifact
        {"role": "assistant", "content": "done"}])
    assert cf("import", "-", "--run", "r", cwd=tmp_path, stdin=history.encode()).returncode == 0
    (tmp_path / "dump.jsonl").write_text(cf("events", "r", "--json", cwd=tmp_path).stdout)
    assert cf("import", "dump.jsonl", "--run", "copy", cwd=tmp_path).returncode == 0  # same store: fine
    other = f"sqlite:///{tmp_path / 'other.db'}"
    out = cf("--store", other, "import", "dump.jsonl", "--run", "r", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "run 'r': position 4 refers to artifact" in out.stderr and "does not hold" in out.stderr
    assert not (tmp_path / "other.db").exists()  # nothing written: not even an empty store


def test_verify_names_the_tampered_event(tmp_path: Path) -> None:
    cf("demo", cwd=tmp_path)
    db = sqlite3.connect(tmp_path / "contextfold.db")
    state = db.execute("SELECT state FROM contextfold_events WHERE originator_version = 9").fetchone()[0]
    db.execute("UPDATE contextfold_events SET state = ? WHERE originator_version = 9",
               (state.replace(b"exit", b"EXIT", 1) if b"exit" in state else state + b" ",))
    db.commit()
    db.close()
    out = cf("verify", "demo-fix-invoice", cwd=tmp_path)
    assert out.returncode == 3
    assert "position 9" in out.stderr


def test_import_is_atomic_and_names_the_line(tmp_path: Path) -> None:
    bad = (b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "ok"}\n'
           b'{"role": "tool", "tool_call_id": "nope", "content": "x"}\n')
    out = cf("import", "-", "--run", "r1", "--format", "openai-chat", cwd=tmp_path, stdin=bad)
    assert out.returncode == 2
    assert "<stdin>:3" in out.stderr
    assert not (tmp_path / "contextfold.db").exists()  # refused before the store was opened
    good = b'{"role": "user", "content": "hi"}\n'
    out = cf("import", "-", "--run", "r0", "--format", "openai-chat", cwd=tmp_path, stdin=good)
    assert out.returncode == 0, out.stderr
    out = cf("import", "-", "--run", "r1", "--format", "openai-chat", cwd=tmp_path, stdin=bad)
    assert out.returncode == 2 and "<stdin>:3" in out.stderr
    runs = cf("runs", "--json", cwd=tmp_path)
    assert [r["run_id"] for r in json.loads(runs.stdout)] == ["r0"]


def test_import_refused_by_the_store_writes_no_run(tmp_path: Path) -> None:
    # the second run (or the events past the first 5,000-event append of a long run) holds a
    # schema bound JSON cannot hold (NaN), which the store refuses: nothing of the import may stay
    # in the store (a lone surrogate was the trigger until the importers read one as U+FFFD)
    nan_tool = {"name": "t", "parameters": {"type": "object", "properties": {"a": {"maximum": "NAN"}}}}
    second = {"messages": [{"role": "user", "content": "x"}],
              "tools": [{"type": "function", "function": nan_tool}]}
    two_runs = (b'{"messages": [{"role": "user", "content": "hi"}]}\n'
                + json.dumps(second).replace('"NAN"', "NaN").encode() + b"\n")

    def user(text: str) -> bytes:
        block = {"type": "text", "text": text}
        return json.dumps({"type": "user_input", "v": 1, "content": [block]}).encode()

    long_run = b"\n".join([b'{"type": "run_started", "v": 2}', *(user(f"m{i}") for i in range(5001)),
                           json.dumps({"type": "tools_registered", "v": 1, "tools": [nan_tool]})
                           .replace('"NAN"', "NaN").encode()])
    for data, fmt, where in ((two_runs, "openai-chat", "run 'r/run-1'"), (long_run, "events", "run 'r'")):
        out = cf("import", "-", "--run", "r", "--format", fmt, cwd=tmp_path, stdin=data)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert f"<stdin>:0: {where}: " in out.stderr and "a number JSON cannot hold" in out.stderr, out.stderr
        assert "no store at" in cf("runs", "--json", cwd=tmp_path).stderr  # nor the store it created


def test_an_import_into_a_run_id_already_taken_writes_nothing(tmp_path: Path) -> None:
    one = b'[{"role": "user", "content": "hi"}]'
    assert cf("import", "-", "--run", "r", "--format", "openai-chat", cwd=tmp_path, stdin=one).returncode == 0
    assert cf("import", "-", "--run", "r/run-1", "--format", "openai-chat", cwd=tmp_path,
              stdin=one).returncode == 0
    before = cf("events", "r", "--json", cwd=tmp_path).stdout
    again = cf("import", "-", "--run", "r", "--format", "openai-chat", cwd=tmp_path, stdin=one)
    assert again.returncode == 2, again.stderr
    assert "RunExistsError: run 'r' already exists with 2 events; pick another --run" in again.stderr
    # a two-run file whose second run id is taken: the first is not written either
    two_runs = (b'{"messages": [{"role": "user", "content": "a"}]}\n'
                b'{"messages": [{"role": "user", "content": "b"}]}\n')
    out = cf("import", "-", "--run", "r", "--format", "openai-chat", cwd=tmp_path, stdin=two_runs)
    assert out.returncode == 2 and "RunExistsError: run 'r/run-1' already exists" in out.stderr, out.stderr
    runs = json.loads(cf("runs", "--json", cwd=tmp_path).stdout)
    assert sorted(r["run_id"] for r in runs) == ["r", "r/run-1"]
    assert cf("events", "r", "--json", cwd=tmp_path).stdout == before


def test_import_errors_name_the_file_given(tmp_path: Path) -> None:
    (tmp_path / "odd.json").write_text('{"not": "a history"}')
    for path, message in (("odd.json", "odd.json:1: cannot detect the format; pass --format"),
                          ("missing.json", "missing.json:0: no such file"),
                          (".", ".:0: none of its 1 matching files is a trace in a known format")):
        out = cf("import", path, "--run", "r", cwd=tmp_path)
        assert out.returncode == 2 and f"ImportFormatError: {message}" in out.stderr, out.stderr


def test_bad_run_id_and_missing_run_are_typed_errors(tmp_path: Path) -> None:
    out = cf("import", "-", "--run", "x';drop table", "--format", "openai-chat", cwd=tmp_path,
             stdin=b'[{"role": "user", "content": "hi"}]')
    assert out.returncode == 2 and "InputLimitError" in out.stderr
    out = cf("events", "ghost", cwd=tmp_path)  # the failed import created no store
    assert out.returncode == 2 and "StoreConfigError: no store at contextfold.db" in out.stderr
    assert not (tmp_path / "contextfold.db").exists()
    out = cf("import", "-", "--run", "r1", "--format", "openai-chat", cwd=tmp_path,
             stdin=b'[{"role": "user", "content": "hi"}]')
    assert out.returncode == 0, out.stderr
    out = cf("events", "ghost", cwd=tmp_path)
    assert out.returncode == 2 and "RunNotFoundError" in out.stderr


def test_only_import_and_demo_create_a_sqlite_store(tmp_path: Path) -> None:
    """A mistyped store path is an error naming it, and no empty store is left at the typo: every
    command but ``import`` and ``demo`` works on runs a store already holds."""
    typo = tmp_path / "contextfol.db"
    for args in (("runs",), ("events", "r1"), ("verify", "r1"), ("build", "r1"), ("manifest", "r1"),
                 ("replay", "r1", "--turn", "1", "--verify"), ("diff", "r1", "1", "2"), ("compact", "r1"),
                 ("audit", "r1"), ("why", "r1", "--turn", "1", "x"), ("show", "r1", "event://1"),
                 ("usage", "r1", "--turn", "1", "--input-tokens", "10")):
        out = cf("--store", f"sqlite:///{typo}", *args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert f"StoreConfigError: no store at {typo}" in out.stderr, (args, out.stderr)
        assert not typo.exists(), args
    out = cf("--store", f"sqlite:///{typo}", "import", "-", "--run", "r1", "--format", "openai-chat",
             cwd=tmp_path, stdin=b'[{"role": "user", "content": "hi"}]')
    assert out.returncode == 0, out.stderr
    out = cf("--store", f"sqlite:///{typo}", "runs", cwd=tmp_path)
    assert out.returncode == 0 and "r1" in out.stdout


def test_store_url_from_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    out = cf_process("demo", cwd=tmp_path, env={"CONTEXTFOLD_STORE": url})
    assert out.returncode == 0
    assert not (tmp_path / "contextfold.db").exists()
    out = cf_process("--store", url, "runs", cwd=tmp_path)
    assert "demo-fix-invoice" in out.stdout


def test_unreachable_or_bad_store_is_one_line_exit_2(tmp_path: Path) -> None:
    """No traceback, the password never shown, and what was tried named (user, host, port). A bad
    URL exits 2; an unreachable server 4 (retry later), apart from bad input."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for url, message in ((f"postgresql://someone:hunter2@127.0.0.1:{port}/test",
                          f"StoreUnavailableError: cannot reach postgresql://someone@127.0.0.1:{port}/test: "
                          "connection failed"),
                         ("foo://u:hunter2@x", "StoreConfigError: unsupported store URL 'foo://u:***@x'"),
                         ("postgresql://u:hunter2@127.0.0.1:notaport/test", "StoreConfigError: invalid port"),
                         ("postgresql://u:hunter2@[::1/test",
                          "invalid store URL 'postgresql://u:***@[::1/test': Invalid IPv6 URL"),
                         ('postgresql://u@127.0.0.1/test?schema=x";drop table t;--',
                          "StoreConfigError: invalid schema 'x\";drop table t;--'"),
                         (f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}", "StoreConfigError: directory"),
                         # options we do not apply are refused, not dropped (TLS not required, a write)
                         (f"postgresql://u:hunter2@127.0.0.1:{port}/test?sslmode=require",
                          "StoreConfigError: unsupported option 'sslmode'"),
                         (f"sqlite:///{tmp_path / 'ro.db'}?mode=ro",
                          "StoreConfigError: unsupported option 'mode'"),
                         # an empty or repeated schema is not 'public' or the first one
                         (f"postgresql://u:hunter2@127.0.0.1:{port}/test?schema=",
                          "StoreConfigError: empty schema in the store URL"),
                         (f"postgresql://u:hunter2@127.0.0.1:{port}/test?schema=a&schema=b",
                          "StoreConfigError: option 'schema' given more than once")):
        out = cf("--store", url, "runs", cwd=tmp_path)
        assert out.returncode == (4 if "StoreUnavailableError" in message else 2), out.stderr
        assert message in out.stderr
        assert "Traceback" not in out.stderr and "hunter2" not in out.stderr


@pytest.mark.postgres
def test_a_missing_database_or_role_says_so_at_once(tmp_path: Path, pg_url: str) -> None:
    """The server's reason, not the pool's timeout after 10 s of retrying a connection that cannot succeed;
    a bad URL (exit 2), not an outage (4): retrying will not make the database appear."""
    base = urlparse(pg_url)
    for netloc, path, reason in ((base.netloc, "/no_such_db_cf", 'database "no_such_db_cf" does not exist'),
                                 (f"no_such_role_cf@{base.hostname}:{base.port or 5432}", base.path,
                                  'role "no_such_role_cf" does not exist')):
        out = cf("--store", base._replace(netloc=netloc, path=path, query="").geturl(), "runs", cwd=tmp_path)
        assert out.returncode == 2 and "StoreConfigError" in out.stderr, out.stderr
        assert "retrying will not help" in out.stderr, out.stderr
        assert reason in out.stderr and "pool initialization" not in out.stderr, out.stderr


def test_schema_events_is_json_schema(tmp_path: Path) -> None:
    out = cf("schema", "events", cwd=tmp_path)
    schema = json.loads(out.stdout)
    assert "oneOf" in schema or "anyOf" in schema or "discriminator" in schema
    assert "ToolResult" in schema["$defs"]


@pytest.mark.skipif(not TRACES.exists(), reason="../shared/traces not present")
def test_import_tau_bench_file_as_200_runs(tmp_path: Path) -> None:
    out = cf("import", str(TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"), "--run", "tau",
             cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    runs = json.loads(cf("runs", "--json", cwd=tmp_path).stdout)
    assert len(runs) == 200
    assert all(r["run_id"].startswith("tau/") for r in runs)


def test_a_swe_agent_trajectory_is_detected_imported_built_and_replayed(tmp_path: Path) -> None:
    traj = {"history": [{"role": "system", "content": "You work in a shell."},
                        {"role": "user", "content": "Fix the failing test in calc.py"}],
            "trajectory": [{"thought": "Look first.", "action": "open calc.py\n",
                            "observation": "[File: calc.py (1 lines total)]\n1:def add(a, b): return a - b"},
                           {"thought": "Run the tests.", "action": "pytest -q\n",
                            "observation": "F\nFAILED test_calc.py::test_add"}]}
    (tmp_path / "run.traj").write_text(json.dumps(traj, indent=2))
    out = cf("import", "run.traj", "--run", "swe", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "(swe-agent)" in out.stdout and "swe: 8 events" in out.stdout
    built = cf("build", "swe", "--provider", "anthropic", "--json", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    messages = json.loads(built.stdout)["request"]["messages"]
    uses = [b for m in messages if isinstance(m["content"], list) for b in m["content"]
            if b["type"] == "tool_use"]
    assert [(u["id"], u["name"], u["input"]) for u in uses] == [
        ("swe-1", "open", {"command": "open calc.py\n"}), ("swe-2", "bash", {"command": "pytest -q\n"})]
    replay = cf("replay", "swe", "--turn", "3", "--verify", cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_import_of_a_50_mb_tool_output_stores_it_once_as_an_artifact(tmp_path: Path) -> None:
    big = "x" * (50 * 1024 * 1024)
    history = [
        {"role": "user", "content": "dump the table"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "dump", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": big},
    ]
    (tmp_path / "big.json").write_text(json.dumps(history))
    out = cf("import", "big.json", "--run", "big", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    db = sqlite3.connect(tmp_path / "contextfold.db")
    (size,) = db.execute("SELECT size FROM contextfold_artifacts").fetchone()
    (largest_event,) = db.execute("SELECT MAX(LENGTH(state)) FROM contextfold_events").fetchone()
    db.close()
    assert size == len(big)
    assert largest_event < 10_000  # the event keeps the ref, the size and a preview
    assert cf("verify", "big", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("damage", ["x'00ff1020'", "CAST(state AS TEXT)", "substr(state, 1, 100)"])
def test_a_damaged_event_row_is_a_one_line_integrity_error_for_every_command(tmp_path: Path,
                                                                              damage: str) -> None:
    """Non-ASCII bytes where the hash is, a row stored as TEXT, or a row cut short: ``verify`` said
    integrity while ``events``, ``build``, ``replay``, ``audit`` and ``show`` crashed with a
    traceback (UnicodeDecodeError, TypeError), and a cut row's error spanned lines and quoted the
    stored text."""
    secret = "Run tests with token sk-live-abcdefghijklmnop and report"
    chat = [{"role": "user", "content": secret}, {"role": "assistant", "content": "ok"}]
    out = cf("import", "-", "--run", "r", "--format", "openai-chat", cwd=tmp_path,
             stdin=json.dumps(chat).encode())
    assert out.returncode == 0, out.stderr
    db = sqlite3.connect(tmp_path / "contextfold.db")
    db.execute(f"UPDATE contextfold_events SET state = {damage} WHERE originator_version = 1")
    db.commit()
    db.close()
    for args in (("verify", "r"), ("events", "r"), ("build", "r"), ("replay", "r", "--turn", "1"),
                 ("show", "r", "1")):
        out = cf(*args, cwd=tmp_path)
        assert out.returncode == 3, (args, out.stderr)
        assert "Traceback" not in out.stderr and "sk-live" not in out.stderr, (args, out.stderr)
        assert len(out.stderr.splitlines()) == 1 and "position 1" in out.stderr, (args, out.stderr)


def test_output_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """Under a latin-1 stdout, ``events --json`` wrote ``café`` as latin-1 (its import then refused
    the file) and died on an emoji with a traceback after a partial write."""
    history = '[{"role": "user", "content": "café \\ud83d\\ude00"}, {"role": "assistant", "content": "ok"}]'
    assert cf("import", "-", "--run", "r", cwd=tmp_path, stdin=history.encode()).returncode == 0
    out = subprocess.run([sys.executable, "-m", "contextfold", "events", "r", "--json"], cwd=tmp_path,
                         capture_output=True, env={**os.environ, "PYTHONIOENCODING": "latin-1"}, timeout=300)
    assert out.returncode == 0, out.stderr
    (tmp_path / "r.jsonl").write_bytes(out.stdout)
    assert "café \U0001F600" in out.stdout.decode("utf-8")
    assert cf("import", "r.jsonl", "--run", "copy", cwd=tmp_path).returncode == 0
    assert cf("events", "copy", "--json", cwd=tmp_path).stdout.encode() == out.stdout


def test_events_json_of_a_run_without_run_started_and_with_no_positions_named_round_trips(
        tmp_path: Path) -> None:
    """A run recorded through the API that has not been built or compacted got a run_started
    prepended on import: the copy held one event more than the export it came from."""
    from contextfold.api import open_store
    from contextfold.domain.events import UserInput

    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        s.run("r1").append(UserInput("one"), UserInput("two"))
    dump = cf("--store", store, "events", "r1", "--json", cwd=tmp_path).stdout
    (tmp_path / "dump.jsonl").write_text(dump)
    assert cf("--store", store, "import", "dump.jsonl", "--run", "copy", cwd=tmp_path).returncode == 0
    assert cf("--store", store, "events", "copy", "--json", cwd=tmp_path).stdout == dump
