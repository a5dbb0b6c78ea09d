"""The ``contextfold`` command run in-process, for the CLI tests that are not about the process.

:func:`cf` takes the arguments of ``tests.e2e.test_cli_record.cf`` (which starts a subprocess)
and returns what it would: ``cli.main`` runs with its own stdin, stdout and stderr (each with a
``.buffer``, as ``show`` and ``import -`` use), in ``cwd``, under the environment the subprocess
would have had, and the exit code is ``main``'s return (or argparse's ``SystemExit``). The same
parser, handlers and exit codes run; only the interpreter start and the imports are saved: each
subprocess paid ~0.5-1 s of them, and the CLI tests started a few hundred.

Tests about the process itself (the installed entry point, a terminal, signals, a pipe closed
early, the locale's encoding of its output) start one with :func:`cf_process`. What stays
behind in-process between calls (token-count memos, render caches) is what a long-lived API
user keeps too; a test of what a fresh process reads back from the store uses the subprocess.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["TerminalOut", "cf", "cf_process", "on_terminal"]


class TerminalOut(io.TextIOWrapper):
    """A standard output that says it is a terminal, as a person's shell gives the command."""

    def isatty(self) -> bool:
        return True


def on_terminal(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, bytes]:
    """``contextfold ARGS`` in-process with a terminal as standard output: its exit code and the
    bytes it showed."""
    from contextfold.cli import main

    screen = io.BytesIO()
    terminal = TerminalOut(screen, encoding="utf-8", write_through=True)
    with monkeypatch.context() as patch:
        patch.setattr(sys, "stdout", terminal)
        code = main(list(args))
    terminal.flush()
    return code, screen.getvalue()


def cf(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
       ) -> subprocess.CompletedProcess[str]:
    from contextfold.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    streams = sys.stdin, sys.stdout, sys.stderr
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        os.environ.pop("CONTEXTFOLD_STORE", None)
        os.environ.update(env or {})
        os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse refusing the arguments, or --help
            if isinstance(exc.code, str):  # the interpreter would print it
                sys.stderr.write(exc.code + "\n")
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["contextfold", *args], code, stdout.decode("utf-8", "replace"),
                                       stderr.decode("utf-8", "replace"))


def cf_process(*args: str, cwd: Path, stdin: bytes | None = None, env: dict[str, str] | None = None,
               ) -> subprocess.CompletedProcess[str]:
    """``python -m contextfold ARGS`` in a subprocess, without the caller's ``CONTEXTFOLD_STORE``."""
    full_env = {k: v for k, v in os.environ.items() if k != "CONTEXTFOLD_STORE"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "contextfold", *args], cwd=cwd,
                          input=stdin.decode() if stdin else None,
                          capture_output=True, text=True, env=full_env, timeout=300)
