"""Ctrl-C at any point of a command: "interrupted" and exit code 130, never a traceback (and once
an import's transaction committed, the import reported as recorded, not as interrupted).

The command line imports the whole package first (~0.5 s); a Ctrl-C that landed then printed a
traceback of the import machinery. The interrupt is staged deterministically: the child process
raises KeyboardInterrupt from an import hook when the package's heavy module is first imported,
which is where a real Ctrl-C in that window lands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from tests.cli_runner import cf

INTERRUPT_WHILE_LOADING = textwrap.dedent("""
    import sys

    class CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == sys.argv[1]:
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    from contextfold.console import main
    sys.exit(main(["runs"]))
""")


@pytest.mark.parametrize("module", ["contextfold.cli_args", "contextfold.store.event_store"])
def test_a_ctrl_c_while_the_package_loads_exits_130_saying_interrupted(module: str) -> None:
    """While the command line loads, or while the command imports the modules it uses (each
    command imports its own when it runs: ``runs`` the store's)."""
    done = subprocess.run([sys.executable, "-c", INTERRUPT_WHILE_LOADING, module], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr, done.stdout) == (130, "contextfold: interrupted\n", "")


def test_importing_the_package_loads_no_module_until_a_name_is_used() -> None:
    """What lets the entry point catch that interrupt: ``import contextfold`` imports none of its
    modules (nor pydantic); the first use of a public name imports the module defining it."""
    probe = textwrap.dedent("""
        import sys
        import contextfold
        loaded = sorted(m for m in sys.modules if m.startswith("contextfold.") or m == "pydantic")
        print(loaded)
        from contextfold import UserInput, open_store
        print(UserInput.__module__, open_store.__module__, "contextfold.api" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          check=True)
    # open_store from store_api, without contextfold.api (the run handle): test_library_light_imports
    assert done.stdout.splitlines() == ["[]", "contextfold.domain.events contextfold.store_api False"]


CTRL_C_ONCE_DONE = textwrap.dedent("""
    import os, signal, sys
    from contextfold.console import main
    code = main(["--store", sys.argv[1], "runs"])
    os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C as the process exits, the command done
    print("exiting", code)
    sys.exit(code)
""")


def test_a_ctrl_c_once_the_command_is_done_leaves_its_exit_code(tmp_path: Path) -> None:
    """A Ctrl-C after the command returned (an import reported every run recorded) ended the
    process with exit 130, or a traceback, as if it had been interrupted."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    store = f"sqlite:///{tmp_path / 'contextfold.db'}"
    done = subprocess.run([sys.executable, "-c", CTRL_C_ONCE_DONE, store], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert re.fullmatch(r"demo-fix-invoice\t25 events\t\S+Z \.\. \S+Z\nexiting 0\n", done.stdout), done.stdout


CHAT = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])


def _interrupted_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
                        when: str, store: str | None = None) -> CompletedProcess[str]:
    """``import`` with a Ctrl-C staged ``when``: before the transaction, just after it committed
    (on the way back from the store), or while the import is reported; "refused": the store
    refuses the events (an import format error, once the store was made)."""
    import contextfold.cli_import as cli_import
    from contextfold.domain.errors import InvalidInputError
    from contextfold.store.event_store import EventStore

    append = EventStore.append_new_runs

    def ctrl_c_around_the_commit(self: EventStore, *args: Any, **kwargs: Any) -> int:
        if when == "before":
            raise KeyboardInterrupt
        if when == "refused":
            raise InvalidInputError("refused by the store")
        append(self, *args, **kwargs)
        raise KeyboardInterrupt

    def ctrl_c_on_output(text: str) -> None:
        raise KeyboardInterrupt

    if when == "reporting":
        monkeypatch.setattr(cli_import, "_out", ctrl_c_on_output)
    else:
        monkeypatch.setattr(EventStore, "append_new_runs", ctrl_c_around_the_commit)
    where = ("--store", store) if store else ()
    return cf(*where, "import", "-", "--run", "r", "--format", "openai-chat", cwd=tmp_path,
              stdin=CHAT.encode())


@pytest.mark.parametrize("when", ["committed", "reporting"])
def test_a_ctrl_c_after_an_import_committed_reports_it_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str) -> None:
    """A Ctrl-C just after the import's transaction committed printed "interrupted" and exit 130,
    which say nothing was written, though every run was: the retry then failed, RunExistsError."""
    out = _interrupted_import(tmp_path, monkeypatch, when=when)
    assert out.returncode == 0, out.stderr
    if when == "committed":  # the store is asked: the import is reported as any other
        assert out.stdout.startswith("imported 3 events into 1 run(s) from <stdin>") and out.stderr == ""
    else:
        assert out.stderr == ("contextfold: interrupted, after the import was recorded: 3 events into 1 "
                              "run(s) from <stdin> are in the store\n")
    monkeypatch.undo()
    assert cf("runs", cwd=tmp_path).stdout.split() == ["r", "3", "events", "no", "times"]  # chat: none


def test_a_ctrl_c_before_an_import_committed_leaves_nothing(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Not even the store file the import created: left empty, later commands took it for a store
    recorded into ("no runs in ...") where they say there is no store."""
    out = _interrupted_import(tmp_path, monkeypatch, when="before")
    assert (out.returncode, out.stderr, out.stdout) == (130, "contextfold: interrupted\n", "")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert "no store at" in cf("runs", cwd=tmp_path).stderr


def _schema_exists(url: str) -> bool:
    import psycopg

    from contextfold.store.store_url import parse_store_url

    schema = parse_store_url(url).schema
    with psycopg.connect(url.split("?")[0], connect_timeout=5) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is not None


@pytest.mark.postgres
@pytest.mark.parametrize("when", ["before", "refused"])
def test_an_import_into_a_new_schema_that_failed_drops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          pg_url: str, when: str) -> None:
    """As the SQLite file: the schema the import made was left with empty tables, and later
    commands took it for a store recorded into ("no runs in ...")."""
    assert not _schema_exists(pg_url)
    out = _interrupted_import(tmp_path, monkeypatch, when=when, store=pg_url)
    if when == "before":
        assert (out.returncode, out.stderr) == (130, "contextfold: interrupted\n")
    else:
        assert out.returncode != 0 and "refused by the store" in out.stderr, out.stderr
    monkeypatch.undo()
    assert not _schema_exists(pg_url)
    assert "no store in schema" in cf("--store", pg_url, "runs", cwd=tmp_path).stderr


@pytest.mark.postgres
@pytest.mark.parametrize("made", ["empty", "a store"])
def test_an_import_into_a_schema_there_before_that_failed_leaves_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str, made: str) -> None:
    import psycopg

    from contextfold.api import open_store
    from contextfold.store.store_url import parse_store_url

    if made == "empty":
        with psycopg.connect(pg_url.split("?")[0], autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE SCHEMA "{parse_store_url(pg_url).schema}"')
    else:
        open_store(pg_url).close()
    out = _interrupted_import(tmp_path, monkeypatch, when="before", store=pg_url)
    assert out.returncode == 130, out.stderr
    monkeypatch.undo()
    assert _schema_exists(pg_url)


def _interrupted_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, when: str,
                       turn: bool = False) -> CompletedProcess[str]:
    """``build r --out req.json`` (``--turn 1``: the rebuild of a past turn without a record) with
    a Ctrl-C staged ``when``: before the record is appended, just after it committed (on the way
    back from the store), while the store closes, or once --out is in place."""
    from contextfold.api import Store, open_store
    from contextfold.cli_files import StagedOutput
    from contextfold.domain.events import ContextBuilt, GoalSet, ModelResponse, UserInput
    from contextfold.store.event_store import EventStore

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        store.run("r").append(GoalSet(goal="g"), UserInput("go"), ModelResponse(text="ok"), UserInput("more"))
    append, close, commit = EventStore.append, Store.close, StagedOutput.commit

    def ctrl_c_around_the_record(self: EventStore, run_id: str, events: Any, **kwargs: Any) -> Any:
        if not any(isinstance(e, ContextBuilt) for e in events):
            return append(self, run_id, events, **kwargs)
        if when == "before":
            raise KeyboardInterrupt
        append(self, run_id, events, **kwargs)
        raise KeyboardInterrupt

    def ctrl_c_after(real: Any) -> Any:
        pressed: list[bool] = []

        def interrupted(self: Any) -> None:
            real(self)
            if not pressed:  # once: a Ctrl-C is one keypress
                pressed.append(True)
                raise KeyboardInterrupt
        return interrupted

    if when in ("before", "committed"):
        monkeypatch.setattr(EventStore, "append", ctrl_c_around_the_record)
    elif when == "closing":
        monkeypatch.setattr(Store, "close", ctrl_c_after(close))
    else:
        monkeypatch.setattr(StagedOutput, "commit", ctrl_c_after(commit))
    out = cf("build", "r", "--provider", "anthropic", "--out", "req.json", *(["--turn", "1"] if turn else []),
             cwd=tmp_path)
    monkeypatch.undo()
    return out


@pytest.mark.parametrize(("when", "turn"), [("committed", False), ("committed", True), ("closing", False),
                                            ("written", False)])
def test_a_ctrl_c_after_a_build_was_recorded_writes_its_out_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str, turn: bool) -> None:
    """A Ctrl-C once the build's record committed printed "interrupted", exit 130, and discarded
    --out, while the log kept the record: the turn's first record, the one replay --verify and
    audits check, was of a request no caller received (and the retry recorded a second). Now the
    build is finished: --out written, exit 0; interrupted once --out is in place, it says so."""
    from contextfold.api import open_store

    out = _interrupted_build(tmp_path, monkeypatch, when=when, turn=turn)
    assert out.returncode == 0, out.stderr
    number = 1 if turn else 2
    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        [record] = store.run("r").records(number)
    assert record.rebuild is turn
    written = json.loads((tmp_path / "req.json").read_text())
    assert written["messages"]  # the request, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    note = (f"contextfold: interrupted, after the build was recorded: turn {number}, request "
            f"{record.request_hash[:16]}, written to req.json\n")
    if when == "written":
        assert (out.stdout, out.stderr) == ("", note)
    else:
        assert out.stdout.startswith(f"wrote req.json: turn {number}, ") and out.stderr == ""


def test_a_ctrl_c_before_a_build_was_recorded_writes_nothing(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from contextfold.api import open_store

    out = _interrupted_build(tmp_path, monkeypatch, when="before")
    assert (out.returncode, out.stderr, out.stdout) == (130, "contextfold: interrupted\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contextfold.db"]  # no req.json, no .part
    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        assert store.run("r").records(2) == []


def test_a_ctrl_c_before_an_import_into_an_existing_store_keeps_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a file the import created is removed: one that was there (even empty) stays."""
    (tmp_path / "contextfold.db").write_bytes(b"")
    out = _interrupted_import(tmp_path, monkeypatch, when="before")
    assert out.returncode == 130
    monkeypatch.undo()
    assert (tmp_path / "contextfold.db").exists()
    assert cf("demo", "--run", "d", cwd=tmp_path).returncode == 0
    out = _interrupted_import(tmp_path, monkeypatch, when="before")
    assert out.returncode == 130
    monkeypatch.undo()
    assert cf("runs", cwd=tmp_path).stdout.split()[:3] == ["d", "25", "events"]


def test_a_refused_demo_run_id_makes_no_store(tmp_path: Path) -> None:
    """``demo --run "a b"`` was refused after it had made the store: an empty one was left."""
    out = cf("demo", "--run", "a b", cwd=tmp_path)
    assert out.returncode == 2 and "invalid run id 'a b'" in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []
