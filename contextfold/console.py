"""The ``contextfold`` command's entry point: the command line, with a Ctrl-C taken at any time.

Why a module of its own: the command line imports the whole package (~0.5 s), and a Ctrl-C that
landed while it loaded printed a traceback of the import machinery instead of the command's
"interrupted" and exit code 130. This module and the package's ``__init__`` import nothing
heavy, so the interrupt is caught here wherever it lands.
"""

from __future__ import annotations

import sys
import warnings

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
        with warnings.catch_warnings(record=True) as caught:  # the filters in force still apply
            from contextfold.cli import main as run_command
    except KeyboardInterrupt:  # nothing was read or written yet
        return interrupted()
    _warned_while_loading(caught)
    code = run_command(argv)
    _done()
    return code


def _warned_while_loading(caught: list[warnings.WarningMessage]) -> None:
    """Show what the package warned of while it loaded (a bad ``$CONTEXTFOLD_MEMO_MB``, read then)
    as the command shows its own warnings (``cli.ONE_LINE_WARNINGS``): one line of ours, not
    Python's display of a warning with the file, line and source line it came from (which say
    nothing to someone running a command); any other warning as Python shows it."""
    from contextfold.cli import shown_in_one_line

    for w in caught:
        if not shown_in_one_line(w.message, w.category):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)


def _done() -> None:
    """Ignore SIGINT from here on (the main thread only can: elsewhere it is left as it is)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
