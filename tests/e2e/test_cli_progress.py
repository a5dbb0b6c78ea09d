"""Long commands draw a progress bar on a terminal, and only there.

Folding a 10,000-event run takes seconds before a build, replay, diff, compaction or audit
can start (an audit --html of one took minutes): with nothing on screen a user could not
tell work from a hang. The bar goes to stderr and only when stdout and stderr are both a
terminal, never with --json (the output is data) nor when piped (a script's). Every command
runs on a pseudo-terminal here, as a user at a shell runs it.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import cf_process as cf
from tests.e2e.test_cli_bad_input import CLI, cli

__all__ = ["cli", "on_terminal"]  # cli: the in-process fixture, re-used here

RUN = "demo-fix-invoice"

BAR = "━"
"""What rich draws a bar with (the label alone could be part of an error message)."""

LONG_COMMANDS = [  # (arguments, the bar's label, whether the command takes --json)
    (("build", RUN), f"building {RUN}", True),
    (("manifest", RUN), f"building {RUN}", True),
    (("replay", RUN, "--turn", "2"), f"replaying {RUN} turn 2", False),
    (("diff", RUN, "1", "2"), f"diffing {RUN}", True),
    (("compact", RUN, "--dry-run"), f"compacting {RUN}", True),
    (("audit", RUN), f"auditing {RUN}", True),
    (("audit", RUN, "--turn", "2"), f"auditing {RUN} turn 2", True),
    (("why", RUN, "--turn", "1", "e1"), f"rebuilding {RUN} turn 1", True),
]


def on_terminal(*args: str, cwd: Path, stdout: Path | None = None) -> tuple[int, str]:
    """``contextfold ARGS`` with stdin, stdout and stderr on one pseudo-terminal (stdout to a file
    when given); its exit code and everything it wrote on the terminal."""
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTFOLD_STORE"} | {"TERM": "xterm",
                                                                               "COLUMNS": "150"}
    leader, follower = pty.openpty()
    with open(stdout or os.devnull, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "contextfold", *args], cwd=cwd, env=env,
                                stdin=follower, stdout=follower if stdout is None else out,
                                stderr=follower, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    code = proc.wait(timeout=300)
    os.close(leader)
    return code, b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample run recorded once; each test works on its own copy."""
    where = tmp_path_factory.mktemp("demo")
    assert cf("demo", cwd=where).returncode == 0
    return where / "contextfold.db"


@pytest.mark.parametrize(("args", "label", "has_json"), LONG_COMMANDS,
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_a_long_command_shows_a_bar_on_a_terminal_only(demo_db: Path, tmp_path: Path, cli: CLI,
                                                        args: tuple[str, ...], label: str,
                                                        has_json: bool) -> None:
    """On a terminal: the bar. With --json (data a program reads, even on a terminal) and with
    the output captured (a script's): none."""
    shutil.copy(demo_db, tmp_path / "contextfold.db")
    code, screen = on_terminal(*args, cwd=tmp_path)
    # replay/why may report a failed check, audit --turn a turn without a record to check (2)
    assert code in (0, 1) or (code == 2 and "NOT CHECKED" in screen), screen
    assert label in screen and BAR in screen, screen
    if has_json:
        code, screen = on_terminal(*args, "--json", cwd=tmp_path)
        # the JSON alone (on the terminal, stderr's NOT CHECKED line of a turn without a record follows it)
        shown = screen[screen.index("{"):].split("\nNOT CHECKED: ")[0]
        assert code in (0, 1, 2) and json.loads(shown), screen
        assert label not in screen and BAR not in screen, screen
    piped = cli(*args)
    assert piped.returncode in (0, 1) or piped.stderr.startswith("NOT CHECKED: "), piped.stderr
    assert label not in piped.stdout + piped.stderr and BAR not in piped.stdout + piped.stderr


def test_import_draws_its_bar_on_a_terminal_and_not_when_output_is_redirected(tmp_path: Path) -> None:
    """The import bar was drawn whenever stderr was a terminal, on stdout: ``import ... > log``
    left the bar's redraws in the log file. Now it needs both streams on the terminal."""
    history = [{"role": "user", "content": f"question {i}"} if i % 2 == 0
               else {"role": "assistant", "content": f"answer {i}"} for i in range(40)]
    (tmp_path / "h.json").write_text(json.dumps(history))
    code, screen = on_terminal("import", "h.json", "--run", "a", cwd=tmp_path)
    assert code == 0 and "importing h.json" in screen and BAR in screen, screen
    code, screen = on_terminal("import", "h.json", "--run", "b", cwd=tmp_path, stdout=tmp_path / "log")
    log = (tmp_path / "log").read_text()
    assert code == 0 and log.startswith("imported 41 events"), screen + log
    assert BAR not in screen + log and "importing" not in screen + log


def test_import_of_one_file_shows_a_bar_while_it_is_parsed(tmp_path: Path) -> None:
    """Importing one big file drew nothing while it was detected and parsed (23 of 48 s for a 54 MB
    file), only the store's bar at the end: a pulsing bar now shows the parse, on a terminal only."""
    history = [{"role": "user", "content": f"question {i}"} if i % 2 == 0
               else {"role": "assistant", "content": f"answer {i}"} for i in range(40)]
    (tmp_path / "h.json").write_text(json.dumps(history))
    code, screen = on_terminal("import", "h.json", "--run", "a", cwd=tmp_path)
    assert code == 0 and "parsing h.json (0.0 MB)" in screen, screen
    code, screen = on_terminal("import", "h.json", "--run", "b", cwd=tmp_path, stdout=tmp_path / "log")
    assert code == 0 and "parsing" not in screen + (tmp_path / "log").read_text(), screen
