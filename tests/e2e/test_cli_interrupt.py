"""Ctrl-C at any point of a command: "interrupted" and exit code 130, never a traceback (and once
an import's transaction committed, the import reported as recorded, not as interrupted).

The command line imports the whole package first (~0.5 s); a Ctrl-C that landed then printed a
traceback of the import machinery. The interrupt is staged deterministically: the child process
raises KeyboardInterrupt from an import hook when the package's heavy module is first imported,
which is where a real Ctrl-C in that window lands."""

from __future__ import annotations

import json
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
            if name == "contextfold.api":
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    from contextfold.console import main
    sys.exit(main(["runs"]))
""")


def test_a_ctrl_c_while_the_package_loads_exits_130_saying_interrupted() -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPT_WHILE_LOADING], capture_output=True,
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
    assert done.stdout.splitlines() == ["[]", "contextfold.domain.events contextfold.api True"]


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
    assert done.stdout == "demo-fix-invoice\t25 events\nexiting 0\n"


CHAT = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])


def _interrupted_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
                        when: str) -> CompletedProcess[str]:
    """``import`` with a Ctrl-C staged ``when``: before the transaction, just after it committed
    (on the way back from the store), or while the import is reported."""
    import contextfold.cli_import as cli_import
    from contextfold.store.event_store import EventStore

    append = EventStore.append_new_runs

    def ctrl_c_around_the_commit(self: EventStore, *args: Any, **kwargs: Any) -> int:
        if when == "before":
            raise KeyboardInterrupt
        append(self, *args, **kwargs)
        raise KeyboardInterrupt

    def ctrl_c_on_output(text: str) -> None:
        raise KeyboardInterrupt

    if when == "reporting":
        monkeypatch.setattr(cli_import, "_out", ctrl_c_on_output)
    else:
        monkeypatch.setattr(EventStore, "append_new_runs", ctrl_c_around_the_commit)
    return cf("import", "-", "--run", "r", "--format", "openai-chat", cwd=tmp_path, stdin=CHAT.encode())


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
    assert cf("runs", cwd=tmp_path).stdout.split() == ["r", "3", "events"]


def test_a_ctrl_c_before_an_import_committed_leaves_nothing(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = _interrupted_import(tmp_path, monkeypatch, when="before")
    assert (out.returncode, out.stderr, out.stdout) == (130, "contextfold: interrupted\n", "")
    monkeypatch.undo()
    assert cf("runs", cwd=tmp_path).stdout.startswith("no runs")
