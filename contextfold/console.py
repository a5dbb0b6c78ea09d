"""The ``contextfold`` command's entry point: the command line, with a Ctrl-C taken at any time.

Why a module of its own: the command line imports the whole package (~0.5 s), and a Ctrl-C that
landed while it loaded printed a traceback of the import machinery instead of the command's
"interrupted" and exit code 130. This module and the package's ``__init__`` import nothing
heavy, so the interrupt is caught here wherever it lands.
"""

from __future__ import annotations

import sys

__all__ = ["INTERRUPTED", "interrupted", "main"]

INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT)."""


def interrupted() -> int:
    """Say a command was interrupted, and its exit code: while loading (here) or running
    (``contextfold.cli``; each write is one transaction, so nothing is left half-done)."""
    sys.stderr.write("contextfold: interrupted\n")
    return INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``) and return its exit code.

    Once the command is done, a Ctrl-C is ignored while the process exits: what it wrote and
    printed stands. One that landed then killed the process during the interpreter's teardown
    (exit 130, nothing printed) after an import had reported every run recorded."""
    try:
        from contextfold.cli import main as run_command
    except KeyboardInterrupt:  # nothing was read or written yet
        return interrupted()
    code = run_command(argv)
    _done()
    return code


def _done() -> None:
    """Ignore SIGINT from here on (the main thread only can: elsewhere it is left as it is)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
