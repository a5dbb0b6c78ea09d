"""The command line given bad or unusual input: a typed one-line error, a non-zero exit, nothing written."""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import blake3
import pytest

from contextfold.store.event_store import EventStore
from tests.cli_runner import cf_process as cf

CLI = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> CLI:
    """``contextfold.cli.main`` in-process in ``tmp_path`` (same parser, handlers and exit codes)."""
    from contextfold.cli import main

    monkeypatch.delenv("CONTEXTFOLD_STORE", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse refusing the arguments
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out.out, out.err)

    return run


def _no_runs(tmp_path: Path) -> None:
    if (tmp_path / "contextfold.db").exists():
        assert json.loads(cf("runs", "--json", cwd=tmp_path).stdout) == []


def _one_line_error(out: subprocess.CompletedProcess[str], error: str) -> None:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"contextfold: {error}: " in out.stderr, out.stderr


def _address_space_4g() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_import_of_an_endless_stream_stops_at_the_default_limit(tmp_path: Path) -> None:
    """/dev/zero was read whole (until memory ran out); it stops past 256 MiB, before any parse or write.
    The child's address space is capped, so a reader without a limit fails instead of eating the machine."""
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTFOLD_STORE"}
    out = subprocess.run([sys.executable, "-m", "contextfold", "import", "/dev/zero", "--run", "z"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
                         preexec_fn=_address_space_4g)
    _one_line_error(out, "InputLimitError")
    assert "/dev/zero: more than 268435456 bytes, the import limit" in out.stderr
    assert "--max-bytes" in out.stderr
    _no_runs(tmp_path)


def test_import_limit_covers_files_and_pipes(tmp_path: Path) -> None:
    history = json.dumps([{"role": "user", "content": "hi " * 100}]).encode()
    (tmp_path / "h.json").write_bytes(history)
    for path, stdin, source in (("h.json", None, "h.json"), ("-", history, "<stdin>")):
        out = cf("import", path, "--run", "r", "--max-bytes", "100", cwd=tmp_path, stdin=stdin)
        _one_line_error(out, "InputLimitError")
        assert f"{source}: more than 100 bytes" in out.stderr
        _no_runs(tmp_path)
    exact = cf("import", "h.json", "--run", "r", "--max-bytes", str(len(history)), cwd=tmp_path)
    assert exact.returncode == 0, exact.stderr
    for bad in ("0", "-5", "lots"):
        out = cf("import", "h.json", "--run", "r2", "--max-bytes", bad, cwd=tmp_path)
        assert out.returncode == 2 and "--max-bytes" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("bad", ["abc", "-5", "0"])
def test_a_bad_memo_ceiling_in_the_environment_is_one_warning_line_and_the_command_runs(
        tmp_path: Path, bad: str) -> None:
    """``CONTEXTFOLD_MEMO_MB`` set wrong: the command runs with the default ceiling, and stderr says
    so on one line of ours, not as Python's warning with a file name and a source line."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    out = cf("runs", cwd=tmp_path, env={"CONTEXTFOLD_MEMO_MB": bad})
    assert (out.returncode, out.stdout.split("\t")[:2]) == (0, ["demo-fix-invoice", "25 events"])
    assert out.stderr == (f"contextfold: warning: CONTEXTFOLD_MEMO_MB={bad!r} is not a positive number of "
                          "MiB: using the default memo ceiling, 256 MiB (set it to a number such as 512, "
                          "or unset it)\n")


def test_why_with_an_empty_query_is_a_usage_error(tmp_path: Path, cli: CLI) -> None:
    """An empty query is a substring of every source: it listed the whole manifest as matches."""
    assert cli("demo").returncode == 0
    for query in ("", "   ", "\t"):
        for extra in ((), ("--json",)):
            out = cli("why", "demo-fix-invoice", "--turn", "6", query, *extra)
            _one_line_error(out, "InvalidInputError")
            assert "why needs a fragment id" in out.stderr and out.stdout == ""
    assert cli("why", "demo-fix-invoice", "--turn", "6", "e9").returncode == 0


def test_events_upto_a_negative_position_is_a_usage_error(tmp_path: Path, cli: CLI) -> None:
    """``events RUN --upto -1`` printed nothing and exited 0, as if the run's log were empty."""
    assert cli("demo").returncode == 0
    for bad in ("-1", "x"):
        out = cli("events", "demo-fix-invoice", "--upto", bad)
        assert out.returncode == 2 and out.stdout == ""
        assert f"--upto: expected a log position >= 0, got '{bad}'" in out.stderr
    assert cli("events", "demo-fix-invoice", "--upto", "2").stdout.count("\n") == 2


def test_a_run_imported_under_a_new_name_replays_its_recorded_turns(tmp_path: Path, cli: CLI) -> None:
    """Its context_built records were made under the old name (refs event://OLD/5, the request id):
    replay --verify of each recorded turn was a MISMATCH though the log was intact."""
    from contextfold import ModelResponse, UserInput
    from contextfold.api import open_store

    assert cli("demo", "--run", "orig").returncode == 0
    assert cli("compact", "orig", "--keep-recent", "1").returncode == 0
    assert cli("build", "orig", "--provider", "anthropic").returncode == 0
    (tmp_path / "orig.jsonl").write_text(cli("events", "orig", "--json").stdout)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    for url in (f"sqlite:///{tmp_path / 'contextfold.db'}", other):  # the same store, and another one
        assert cli("--store", url, "import", "orig.jsonl", "--run", "copy").returncode == 0
        with open_store(url) as store:
            copy = store.run("copy")
            assert copy.replay(6).ok
            copy.append(ModelResponse(text="done"), UserInput("and the docs?"))
            copy.build("gemini")  # a turn of its own, recorded under its own name
            assert copy.replay(7).ok
        out = cli("--store", url, "replay", "copy", "--turn", "6", "--verify")
        assert out.returncode == 0, out.stderr
        assert "recorded in run 'orig'" in out.stdout and "imported as 'copy'" in out.stdout
        assert cli("--store", url, "audit", "copy", "--turn", "6").returncode == 0
        own = cli("--store", url, "replay", "copy", "--turn", "7", "--verify")
        assert own.returncode == 0 and "recorded in run" not in own.stdout, own.stderr


def test_an_implausible_usage_is_refused_and_the_calibration_never_starves_the_budget(
        tmp_path: Path, cli: CLI) -> None:
    """A mistyped usage (zeros too many) was recorded, and every later build of the model failed
    ("shrunk to 0 by the usage calibration") until 10 newer observations outranked it."""
    assert cli("demo").returncode == 0
    runs = json.loads(cli("runs", "--json").stdout)
    for typo in ("9" * 12, str(4 * 16_000 + 1)):  # the demo built turn 6 for a 16,000-token window
        out = cli("usage", "demo-fix-invoice", "--turn", "6", "--input-tokens", typo)
        _one_line_error(out, "InvalidInputError")
        assert (f"implausible usage for turn 6: {typo} input tokens, over 4x the 16000-token window "
                "its request was built for") in out.stderr and "nothing recorded" in out.stderr
    assert json.loads(cli("runs", "--json").stdout) == runs  # nothing appended
    assert cli("build", "demo-fix-invoice").returncode == 0
    # within the bound but far off (ratio ~42 on a 2,354-token request): refused as a run's total
    # unless forced, and then the correction is capped at 4
    far = cli("usage", "demo-fix-invoice", "--turn", "6", "--input-tokens", "99999")
    _one_line_error(far, "InvalidInputError")
    assert "implausible usage for turn 6: 99999 input tokens, over 4x the " in far.stderr
    assert "a run's total" in far.stderr and "--force" in far.stderr
    forced = cli("usage", "demo-fix-invoice", "--turn", "6", "--input-tokens", "99999", "--force")
    assert forced.returncode == 0, forced.stderr
    built = json.loads(cli("build", "demo-fix-invoice", "--json").stdout)["manifest"]
    assert built["calibration"]["correction"] == 4.0 and built["calibration"]["last_observed"] == 99999
    assert built["budget_tokens"] == (128_000 - 8_000) // 4
    # a budget the capped calibration still shrinks to nothing names it, not the config
    out = cli("build", "demo-fix-invoice", "--window", "103", "--reserve", "100")
    _one_line_error(out, "BudgetError")
    assert "shrunk to 0 by the usage calibration for model 'gpt-4o'" in out.stderr
    assert "turn 6 observed 99999 vs estimated" in out.stderr
    plain = cli("build", "demo-fix-invoice", "--window", "100", "--reserve", "100", "--model", "other")
    _one_line_error(plain, "BudgetError")
    assert "window 100 minus reserve 100 leaves no budget" in plain.stderr


def test_an_import_interrupted_or_failing_mid_write_leaves_no_run(tmp_path: Path, cli: CLI,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-run file was written run by run (a long run in 5,000-event chunks): Ctrl-C or a
    lost server once the first run was written left it (and a traceback) behind. Now one transaction."""
    from eventsourcing.persistence import OperationalError, StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder

    two_runs = (b'{"messages": [{"role": "user", "content": "hi"}]}\n'
                b'{"messages": [{"role": "user", "content": "again"}]}\n')
    (tmp_path / "two.jsonl").write_bytes(two_runs)
    real = SQLiteApplicationRecorder.insert_events
    for failure, code, message in ((OperationalError("disk I/O error"), 4, "StoreUnavailableError"),
                                   (KeyboardInterrupt(), 130, "contextfold: interrupted")):
        def failing(self: SQLiteApplicationRecorder, stored: list[StoredEvent], *args: object,
                    failure: BaseException = failure, **kwargs: object) -> object:
            if any(e.originator_id == "r/run-1" for e in stored):  # the write of the second run
                raise failure
            return real(self, stored, *args, **kwargs)

        monkeypatch.setattr(SQLiteApplicationRecorder, "insert_events", failing)
        out = cli("import", "two.jsonl", "--run", "r", "--format", "openai-chat")
        assert out.returncode == code and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
        monkeypatch.setattr(SQLiteApplicationRecorder, "insert_events", real)
        # nor the store file it created: an empty one was taken for a store recorded into
        assert not (tmp_path / "contextfold.db").exists()
        assert "no store at" in cli("runs", "--json").stderr
    assert cli("import", "two.jsonl", "--run", "r", "--format", "openai-chat").returncode == 0
    assert [r["run_id"] for r in json.loads(cli("runs", "--json").stdout)] == ["r/run-0", "r/run-1"]


def test_append_new_runs_is_all_or_nothing(store: EventStore) -> None:
    from contextfold import ConcurrencyConflictError, RunExistsError, UnknownToolCallError, UserInput
    from contextfold.domain.events import ToolResult

    store.append("old", [UserInput("hi")])
    with pytest.raises(RunExistsError, match="run 'old' already exists with 1 event; pick another run id"):
        store.append_new_runs([("a", [UserInput("x")]), ("old", [UserInput("y")])])
    with pytest.raises(ConcurrencyConflictError):  # the same run twice
        store.append_new_runs([("a", [UserInput("x")]), ("a", [UserInput("y")])])
    with pytest.raises(UnknownToolCallError):  # what append refuses
        store.append_new_runs([("a", [UserInput("x")]), ("b", [ToolResult(call_id="c", content="?")])])
    assert [r.run_id for r in store.runs()] == ["old"]
    assert store.append_new_runs([("a", [UserInput("x")]), ("b", [UserInput("y"), UserInput("z")])],
                                 artifacts=[(b"carried by an export", "text/plain")]) == 3
    assert store.artifact(blake3.blake3(b"carried by an export").hexdigest()) == b"carried by an export"
    assert store.verify("b").ok and store.version("a") == 1
    store.append("a", [UserInput("more")], expected_version=1)  # the heads moved on
    assert store.verify("a").ok


def test_an_in_memory_store_is_refused_by_every_command(tmp_path: Path, cli: CLI,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command is its own process: ``import`` said "imported 1 events" into a store that was
    gone when it returned."""
    (tmp_path / "h.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    memory = "sqlite:///:memory:"
    for args in (("import", "h.json", "--run", "r"), ("demo",), ("runs",), ("build", "r"), ("compact", "r"),
                 ("audit", "r"), ("show", "r", "1"), ("why", "r", "--turn", "1", "e1")):
        out = cli("--store", memory, *args)
        _one_line_error(out, "StoreConfigError")
        assert "in-memory store" in out.stderr and out.stdout == ""
    monkeypatch.setenv("CONTEXTFOLD_STORE", memory)
    _one_line_error(cli("import", "h.json", "--run", "r"), "StoreConfigError")
    monkeypatch.delenv("CONTEXTFOLD_STORE")
    assert cli("import", "h.json", "--run", "r").returncode == 0


def test_a_sqlite_store_path_that_cannot_be_a_store_says_what_is_wrong(tmp_path: Path, cli: CLI) -> None:
    """A directory was "StoreUnavailableError: create schema: unable to open database file" (as if a
    retry could help), a text file "StoreError: ... file is not a database": neither named the path."""
    from contextfold.api import open_store
    from contextfold.domain.errors import StoreConfigError

    (tmp_path / "adir").mkdir()
    (tmp_path / "notes.txt").write_text("not a database\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "h.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    before = sorted(p.name for p in tmp_path.iterdir())
    for path, message in (("adir", "adir is a directory, not a contextfold SQLite store file"),
                          ("adir/", "adir/ is a directory"),
                          ("notes.txt", "notes.txt is not a contextfold SQLite store (not a database)"),
                          ("fifo", "fifo is not a regular file"),
                          ("notes.txt/x.db", "notes.txt is not a directory, so it cannot hold the store")):
        for args in (("runs",), ("demo",), ("import", "h.json", "--run", "r")):
            out = cli("--store", f"sqlite:///{path}", *args)
            _one_line_error(out, "StoreConfigError")
            assert message in out.stderr and out.stdout == ""
        with pytest.raises(StoreConfigError, match=re.escape(message)):
            open_store(f"sqlite:///{tmp_path}/{path}")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "notes.txt").read_text() == "not a database\n"
    assert not any((tmp_path / "adir").iterdir())
    (tmp_path / "empty.db").touch()  # an empty file is an empty database: a new store
    assert cli("--store", "sqlite:///empty.db", "demo").returncode == 0


def _snapshot(path: Path) -> tuple[bytes, int, list[str]]:
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(p.name for p in path.parent.iterdir())


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_applications_sqlite_database_is_refused_and_left_unchanged(
        tmp_path: Path, cli: CLI, journal: str) -> None:
    """A database with tables, none of ours, was opened as a store: switched to WAL and given our tables.
    Refused now, before SQLite opens it for writing: its bytes, mtime and directory stay as they were."""
    import sqlite3

    from contextfold.api import open_store
    from contextfold.domain.errors import StoreConfigError

    app = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(app)) as conn:
        conn.execute(f"PRAGMA journal_mode={journal}")
        for name in ("users", "orders", "invoices", "payments", "audit_log", "settings", "tags"):
            conn.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, note TEXT)")
        conn.execute("INSERT INTO users (note) VALUES ('alice')")
        conn.commit()
    message = ("app.db is not a contextfold SQLite store: it is another application's database (tables "
               "audit_log, invoices, orders, payments, settings and 2 more; none of contextfold's)")
    (tmp_path / "h.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    before = _snapshot(app)
    for args in (("runs",), ("demo",), ("import", "h.json", "--run", "r")):
        out = cli("--store", "sqlite:///app.db", *args)
        _one_line_error(out, "StoreConfigError")
        assert message in out.stderr and out.stdout == ""
    for create_schema in (True, False):
        with pytest.raises(StoreConfigError, match=re.escape(message.replace("app.db", str(app), 1))):
            open_store(f"sqlite:///{app}", create_schema=create_schema)
    assert _snapshot(app) == before


def test_an_empty_database_or_one_holding_our_tables_still_opens(tmp_path: Path, cli: CLI) -> None:
    """The refusal of other applications' databases keeps every database that is (or may become) ours;
    one holding none of our tables (an empty file, a database without tables) becomes a store only for
    a command that makes one: ``runs`` made an empty file a 28 KB store."""
    import sqlite3

    from contextfold.api import open_store
    from contextfold.domain.events import UserInput

    with contextlib.closing(sqlite3.connect(tmp_path / "blank.db")) as conn:  # a database, no tables
        conn.execute("PRAGMA user_version = 7")
        conn.commit()
    (tmp_path / "empty.db").touch()
    open_store(f"sqlite:///{tmp_path / 'half.db'}").close()
    with contextlib.closing(sqlite3.connect(tmp_path / "half.db")) as conn:  # a creation cut short
        conn.execute("DROP TABLE contextfold_artifacts")
        conn.commit()
    with open_store(f"sqlite:///{tmp_path / 'tenant.db'}", tenant="acme") as store:
        store.run("r").append(UserInput("hi"))
    with open_store(f"sqlite:///{tmp_path / 'tenant.db'}", tenant="acme") as store:  # + contextfold_meta
        assert len(store.run("r").events()) == 1
    assert cli("--store", "sqlite:///half.db", "runs").returncode == 0
    for name in ("blank.db", "empty.db"):  # none of our tables: a store only to a command that makes one
        before = (tmp_path / name).read_bytes()
        out = cli("--store", f"sqlite:///{name}", "runs")
        assert out.returncode == 2 and f"StoreConfigError: no store at {name}" in out.stderr, out.stderr
        assert (tmp_path / name).read_bytes() == before
        assert cli("--store", f"sqlite:///{name}", "demo").returncode == 0
        assert cli("--store", f"sqlite:///{name}", "runs").returncode == 0  # our tables now: opens again


def test_old_cipher_keys_without_a_current_key_are_refused_by_the_cli(
        tmp_path: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CONTEXTFOLD_CIPHER_KEYS_OLD`` alone was ignored: the command opened the store without a key, so
    a rotation that lost the new key wrote plain rows, while ``open_store(old_cipher_keys=...)`` refused."""
    from contextfold.store.crypto import generate_key

    (tmp_path / "h.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    monkeypatch.delenv("CONTEXTFOLD_CIPHER_KEY", raising=False)
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEYS_OLD", generate_key())
    for args in (("demo",), ("import", "h.json", "--run", "r")):
        out = cli(*args)
        _one_line_error(out, "CryptoError")
        assert "CONTEXTFOLD_CIPHER_KEYS_OLD is set without CONTEXTFOLD_CIPHER_KEY" in out.stderr
        assert out.stdout == ""
    assert not (tmp_path / "contextfold.db").exists()  # refused before the store is opened
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEY", generate_key())
    assert cli("import", "h.json", "--run", "r").returncode == 0
    monkeypatch.delenv("CONTEXTFOLD_CIPHER_KEY")
    out = cli("runs")  # a store that exists, opened with the old keys alone
    _one_line_error(out, "CryptoError")
    assert "CONTEXTFOLD_CIPHER_KEYS_OLD is set without CONTEXTFOLD_CIPHER_KEY" in out.stderr


def test_an_empty_path_or_store_url_is_a_usage_error(tmp_path: Path, cli: CLI) -> None:
    """``build --out ""`` printed the request to stdout (and recorded the build), ``audit --html ""``
    printed the summary, ``--store ""`` opened ./contextfold.db: each as if the option was left out,
    which is what ``--out "$UNSET_VARIABLE"`` does not mean."""
    from contextfold.api import open_store
    from contextfold.domain.errors import StoreConfigError

    assert cli("demo").returncode == 0
    (tmp_path / "h.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    events = json.loads(cli("runs", "--json").stdout)
    before = sorted(p.name for p in tmp_path.iterdir())
    for blank in ("", " "):
        for args, argument in ((("build", "demo-fix-invoice", "--out", blank), "--out: an empty path"),
                               (("audit", "demo-fix-invoice", "--html", blank), "--html: an empty path"),
                               (("import", blank, "--run", "r"), "path: an empty path"),
                               (("--store", blank, "runs"), "--store: an empty store URL"),
                               (("runs", "--store", blank), "--store: an empty store URL"),
                               (("--store", blank, "import", "h.json", "--run", "r"), "--store: an empty"),
                               (("build", "demo-fix-invoice", "--model", blank), "--model: an empty model"),
                               (("usage", "demo-fix-invoice", "--turn", "6", "--input-tokens", "2000",
                                 "--model", blank), "--model: an empty model")):
            out = cli(*args)
            assert out.returncode == 2 and f"error: argument {argument}" in out.stderr, out.stderr
            assert out.stdout == "" and "Traceback" not in out.stderr
    assert json.loads(cli("runs", "--json").stdout) == events  # no build, usage or import recorded
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    with pytest.raises(StoreConfigError, match="an empty store URL"):
        open_store("")


def test_append_new_runs_reports_progress_run_by_run(store: EventStore) -> None:
    """The import's progress bar advances as each run is prepared (the transaction's long part)."""
    from contextfold import UserInput

    seen: list[int] = []
    runs = [("a", [UserInput("x")]), ("b", [UserInput("y"), UserInput("z")]), ("c", [])]
    assert store.append_new_runs(runs, progress=seen.append) == 3
    assert seen == [1, 2]


def test_build_takes_retries_and_refuses_a_negative_count(tmp_path: Path, cli: CLI) -> None:
    """``--retries N`` reaches ``Run.build``: a bad count is its typed error and writes nothing."""
    assert cli("demo").returncode == 0
    with EventStore(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        before = store.version("demo-fix-invoice")
    out = cli("build", "demo-fix-invoice", "--retries", "-1")
    _one_line_error(out, "InvalidInputError")
    assert "retries must be an integer >= 0" in out.stderr
    with EventStore(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        assert store.version("demo-fix-invoice") == before
    built = cli("build", "demo-fix-invoice", "--retries", "3", "--json")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["manifest"]["log_version"] == before


def test_a_store_that_refuses_writes_exits_5_and_an_unavailable_one_4(
        tmp_path: Path, cli: CLI, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only or full store exited 2 as StoreUnavailableError, like bad input and like a
    store locked by another writer: a script could not tell "fix the input" from "retry later"
    from "fix the disk". Now 5 for a store that refuses writes (read-only, full), 4 for one that
    is unavailable (locked past the busy timeout), each one line naming the store file."""
    import sqlite3

    from contextfold.store import backends
    from tests.storage import page_limit, read_only

    (tmp_path / "h.json").write_text(json.dumps([{"role": "user", "content": os.urandom(30_000).hex()}]))
    assert cli("demo").returncode == 0  # the default store, contextfold.db, with a run
    store = tmp_path / "contextfold.db"
    with read_only(store):
        out = cli("import", "h.json", "--run", "r")
    assert out.returncode == 5 and "contextfold: StoreReadOnlyError: " in out.stderr, out.stderr
    assert str(store) in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    with page_limit(monkeypatch, 1):
        out = cli("import", "h.json", "--run", "r")
    assert out.returncode == 5 and "contextfold: StoreFullError: " in out.stderr, out.stderr
    monkeypatch.setattr(backends, "SQLITE_LOCK_TIMEOUT", 0.05)
    locker = sqlite3.connect(store, isolation_level=None)
    try:
        locker.execute("BEGIN IMMEDIATE")
        out = cli("import", "h.json", "--run", "r")
    finally:
        locker.close()
    # busy, a StoreUnavailableError: exit 4, retry later
    assert out.returncode == 4 and "contextfold: StoreBusyError: " in out.stderr, out.stderr
    assert cli("import", "h.json", "--run", "r").returncode == 0
    assert "demo-fix-invoice" in cli("runs").stdout


def _events_of(tmp_path: Path, run: str) -> int:
    from contextfold.api import open_store

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        return store.run(run).version


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_out_file_the_disk_refuses_records_no_build(tmp_path: Path, cli: CLI) -> None:
    """``build --out /dev/full`` exited 2 but had appended its context_built record, once per retry."""
    assert cli("demo").returncode == 0
    before = _events_of(tmp_path, "demo-fix-invoice")
    from contextfold.api import open_store

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("demo-fix-invoice")
        unrecorded = next(t for t in range(1, run.next_turn()) if not run.records(t))
    for args in (("--out", "/dev/full"), ("--out", "/dev/full"),
                 ("--turn", str(unrecorded), "--out", "/dev/full")):  # a rebuild records one too
        out = cli("build", "demo-fix-invoice", *args)
        _one_line_error(out, "InvalidInputError")
        assert "No space left on device" in out.stderr
    assert _events_of(tmp_path, "demo-fix-invoice") == before


def test_an_out_file_is_written_whole_or_left_as_it_was(tmp_path: Path, cli: CLI,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that filled up mid-write left a truncated req.json (and an HTML report cut short)."""
    assert cli("demo").returncode == 0
    target = tmp_path / "req.json"
    target.write_text("the previous request\n")
    before = _events_of(tmp_path, "demo-fix-invoice")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as disk:
        disk.setattr(os, "fsync", full)
        for args in (("build", "demo-fix-invoice", "--out", "req.json"),
                     ("audit", "demo-fix-invoice", "--html", "req.json")):
            _one_line_error(cli(*args), "InvalidInputError")
            assert target.read_text() == "the previous request\n"
            assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".req.json")) == []
    assert _events_of(tmp_path, "demo-fix-invoice") == before
    assert cli("build", "demo-fix-invoice", "--out", "req.json").returncode == 0
    assert json.loads(target.read_text())["messages"]
    assert _events_of(tmp_path, "demo-fix-invoice") == before + 1


def test_an_integer_too_long_to_read_is_a_format_error_at_its_line(tmp_path: Path) -> None:
    """Python reads at most 4,300 digits of an int and says so with a bare ValueError, which
    ``import`` let through as a traceback and exit 1 ("a check found a difference"). Every JSON
    entry point (a document, JSONL, stdin, a folder's files) names the file and line, exit 2."""
    from tests.cli_runner import cf as in_process

    big = "7" * 5000
    chat = '{"messages": [{"role": "user", "content": "hi", "x": ' + big + "}]}"
    events = "\n".join(['{"type": "user_input", "v": 1, "content": [{"type": "text", "text": "a"}]}',
                        '{"type": "user_input", "v": 1, "content": [], "n": ' + big + "}", ""])
    (tmp_path / "chat.json").write_text(chat)
    (tmp_path / "events.jsonl").write_text(events)
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "ok.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (folder / "big.jsonl").write_text(events)
    for args, stdin, where in (
            (("chat.json", "--run", "c"), None, "chat.json:1"),
            (("events.jsonl", "--run", "e", "--format", "events"), None, "events.jsonl:2"),
            (("events.jsonl", "--run", "e"), None, "events.jsonl:2"),
            (("-", "--run", "s", "--format", "openai-chat"), chat.encode(), "<stdin>:1"),
            (("traces", "--run", "f"), None, "big.jsonl:2")):
        out = in_process("import", *args, cwd=tmp_path, stdin=stdin)
        _one_line_error(out, "ImportFormatError")
        shown = f"{where}: invalid JSON: a number of 5000 digits (at most 4300 are read)"
        assert shown in out.stderr, out.stderr
    _no_runs(tmp_path)


def test_an_event_version_this_release_does_not_know_is_a_format_error(tmp_path: Path) -> None:
    """``"v": 99`` (a newer release's event) or -5 imported with exit 0, read under the v1 schema;
    only run_started refused one. An older version with an upcaster still imports."""
    from tests.cli_runner import cf as in_process

    store = f"sqlite:///{tmp_path / 's.db'}"
    for v in (99, -5, 0):
        line = json.dumps({"type": "user_input", "v": v, "content": [{"type": "text", "text": "hi"}]}) + "\n"
        (tmp_path / "in.jsonl").write_text('{"type":"user_input","v":1,"content":[]}\n' + line)
        out = in_process("--store", store, "import", "in.jsonl", "--run", f"r{v}", "--format", "events",
                         cwd=tmp_path)
        _one_line_error(out, "ImportFormatError")
        assert "in.jsonl:2: " in out.stderr and f"version {v} " in out.stderr, out.stderr
        assert in_process("--store", store, "events", f"r{v}", cwd=tmp_path).returncode == 2  # no run
    (tmp_path / "old.jsonl").write_text('{"type":"run_started","v":1,"tokenizer":"o200k_base"}\n')
    out = in_process("--store", store, "import", "old.jsonl", "--run", "old", "--format", "events",
                     cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    shown = in_process("--store", store, "events", "old", "--json", cwd=tmp_path).stdout
    assert '"encoding":"o200k_base"' in shown and '"v":2' in shown


def test_a_memo_ceiling_below_the_floor_is_one_warning_line_and_the_command_runs(tmp_path: Path) -> None:
    """``CONTEXTFOLD_MEMO_MB=1e-9`` (positive, but a ceiling under which every memo starts over
    at almost every entry): the default ceiling, said on one line, as for a value that is not a
    number."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    out = cf("runs", cwd=tmp_path, env={"CONTEXTFOLD_MEMO_MB": "1e-9"})
    assert (out.returncode, out.stdout.split("\t")[:2]) == (0, ["demo-fix-invoice", "25 events"])
    assert out.stderr == ("contextfold: warning: CONTEXTFOLD_MEMO_MB='1e-9' is below the floor of 1 MiB, "
                          "where every memo would start over at almost every entry: using the default memo "
                          "ceiling, 256 MiB (set it to a number from 1 up, such as 512, or unset it)\n")
