"""The command's standard streams when they cannot be used: a full disk behind stdout, or stdin
and stdout closed (as cron or a daemon may start it). Each is a process test: the interpreter's
own streams, and its flush at exit, are what is under test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_runner import cf_process


def _run(tmp_path: Path, *args: str, stdout: int, close: int | None = None,
         ) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess writing to ``stdout`` (a descriptor), with ``close`` closed."""
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTFOLD_STORE"}
    return subprocess.run([sys.executable, "-m", "contextfold", *args], cwd=tmp_path, env=env,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
                          preexec_fn=None if close is None else (lambda: os.close(close)))


def _demo(tmp_path: Path) -> None:
    assert cf_process("demo", "--run", "r", cwd=tmp_path).returncode == 0


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [("replay", "--verify", "--turn", "1", "r"), ("events", "r"),
                                  ("events", "r", "--json")])
def test_a_stdout_the_disk_refuses_is_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    """``replay --verify ... > log`` on a full disk printed a traceback and exited 1, which says
    "the replay found a difference" though it matched. As ``--out /dev/full``: one line, exit 2,
    whether the write fails at once (a long output) or at the final flush (a short one)."""
    _demo(tmp_path)
    assert cf_process("build", "--turn", "1", "r", cwd=tmp_path).returncode == 0
    with open("/dev/full", "w") as full:
        out = _run(tmp_path, *args, stdout=full.fileno())
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("contextfold: InvalidInputError: cannot write stdout: No space left"), \
        out.stderr


@pytest.mark.parametrize(("args", "fd"), [(("runs",), 1), (("build", "r"), 1), (("events", "r", "--json"), 1),
                                          (("import", "--run", "x", "-"), 0)])
def test_closed_stdin_or_stdout_is_no_crash(tmp_path: Path, args: tuple[str, ...], fd: int) -> None:
    """With fd 0 or 1 closed, ``sys.stdin``/``sys.stdout`` is None and the command died with
    AttributeError ('NoneType' object has no attribute 'write', 'isatty', 'buffer'). A closed
    stdout reads as /dev/null (the output is dropped, as Python's ``print`` drops it); a closed
    stdin as an empty one, which ``import -`` refuses in one line."""
    _demo(tmp_path)
    out = _run(tmp_path, *args, stdout=subprocess.DEVNULL, close=fd)
    assert "Traceback" not in out.stderr, out.stderr
    if fd == 1:
        assert out.returncode == 0, out.stderr
    else:
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
