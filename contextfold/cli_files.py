"""Argument types, output files and standard output of the ``contextfold`` commands.

Why a module of its own: every command module checks its arguments and writes its output the
same way (a blank value is a usage error, an output path is checked before any work and written
all or nothing, JSON on a terminal is shown with its control characters escaped), and ``cli``
itself is the commands' registry and entry point.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from contextfold.audit.text import visible_json
from contextfold.domain.errors import InvalidInputError

__all__ = ["StagedOutput", "closed_streams_to_devnull", "log_position", "nonempty", "nonnegative",
           "output_file", "shown_json", "stdout_failed", "stdout_is_terminal", "stdout_to_devnull",
           "write_output", "write_output_bytes"]


def closed_streams_to_devnull() -> None:
    """A standard stream that was closed when the process started (``>&-``, cron, a daemon) is
    None in :mod:`sys`, and every command died on it with ``AttributeError``. Each becomes
    /dev/null, as Python's ``print`` treats a None stdout: output dropped, and an empty stdin
    (which ``import -`` refuses as empty input). Opened at the OS level first, so descriptor
    0, 1 or 2 is taken by /dev/null and never by the store's database file, which a stray write
    to "stdout" would then corrupt."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:  # closed: /dev/null takes the lowest free descriptor, this one
            os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        setattr(sys, name, open(os.devnull, "r" if fd == 0 else "w", encoding="utf-8"))  # noqa: SIM115


def stdout_failed(exc: OSError) -> bool:
    """Whether ``exc`` is standard output refusing a write (a full disk behind ``> log``): it
    names no file, and a frame of its traceback wrote to stdout (``sys.stdout.write``,
    ``print``, ``json.dump(..., sys.stdout)``, or the final flush). Anything else is left
    alone: it is not the output's fault and must not be reported as such."""
    if exc.filename is not None or isinstance(exc, BrokenPipeError):
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    return any("stdout" in (f.line or "") or "print(" in (f.line or "") for f in frames)


def stdout_to_devnull() -> None:
    """Point descriptor 1 at /dev/null once stdout failed, so what is still buffered is dropped
    at exit instead of failing again there ("Exception ignored ..." and exit 120)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file descriptor (a test's in-memory stream)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def stdout_is_terminal() -> bool:
    """Whether standard output is a terminal, which a person reads, rather than a pipe or a file,
    which a program reads. The one place the commands decide it: on a terminal untrusted text
    is shown with its control and format characters escaped (``show``, every ``--json``);
    piped or redirected, the output is the data as it is."""
    return sys.stdout.isatty()


def shown_json(text: str) -> str:
    """JSON text as a command prints it: as it is when piped or redirected (a program gets the
    bytes it always got), and on a terminal with its control and format characters as JSON
    escapes (:func:`~contextfold.audit.text.visible_json`: the same JSON value). A tool output's
    ``U+202E`` or ``U+009B`` in a request body reordered the rest of the line on screen or
    started a control sequence, where the text outputs show it as ``\\u202e``."""
    return visible_json(text) if stdout_is_terminal() else text


def nonempty(what: str) -> Callable[[str], str]:
    """An argparse ``type`` refusing an empty (or blank) value as a usage error: ``--out "$UNSET"``
    printed the request to stdout and ``--store ""`` opened the default store, each as if the
    option had been left out."""
    def check(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"an empty {what} ({text!r}) is not one")
        return text

    check.__name__ = what  # argparse names the type in "invalid <name> value"
    return check


def nonnegative(text: str, expected: str) -> int:
    """``text`` as an integer >= 0, or an argparse usage error saying what was ``expected``."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def log_position(text: str) -> int:
    """``--upto``: a log position, 0 or more (a negative one printed nothing, as if the log were
    empty)."""
    return nonnegative(text, "a log position >= 0")


def output_file(path: str) -> Path:
    """The file an ``--out``/``--html`` flag names, checked before any work (a build records its
    result: a path that cannot be written must fail before, not after): its directory must
    exist and it must not be one."""
    p = Path(path)
    if p.is_dir():
        raise InvalidInputError(f"cannot write {path}: it is a directory")
    if not p.parent.is_dir():
        raise InvalidInputError(f"cannot write {path}: no directory {str(p.parent)!r}")
    existed = p.exists()
    try:  # what the OS refuses (permissions, a read-only or virtual file system), refused now
        with p.open("ab"):
            pass
    except OSError as exc:
        raise InvalidInputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if not existed:  # the probe leaves no empty file behind if the work then fails
        p.unlink(missing_ok=True)
    return p


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (checked by :func:`output_file`), all or nothing: a disk that
    fills up leaves the file as it was, not cut short. What the OS refuses is an
    InvalidInputError naming it."""
    write_output_bytes(path, text.encode("utf-8"))


def write_output_bytes(path: Path, data: bytes) -> None:
    """:func:`write_output` of bytes as they are."""
    StagedOutput(path).stage_bytes(data).commit()


class StagedOutput:
    """A file written in two steps: :meth:`stage` writes the text in full beside the target (a
    temporary file, flushed to disk), :meth:`commit` renames it into place. So a command that
    records its work (``build``) stages first and records only once the text is on disk. A
    target that is not a regular file (``/dev/stdout``, a pipe) cannot be renamed over: it is
    written at :meth:`stage`. :meth:`discard` removes what was staged."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._staged: Path | None = None

    def _refused(self, exc: OSError) -> InvalidInputError:
        return InvalidInputError(f"cannot write {self.path}: {exc.strerror or exc}")

    def stage(self, text: str) -> StagedOutput:
        return self.stage_bytes(text.encode("utf-8"))

    def stage_bytes(self, data: bytes) -> StagedOutput:
        """:meth:`stage` of bytes as they are (``show --out``: an artifact's, an image's)."""
        self.discard()
        try:
            if self.path.exists() and not self.path.is_file():
                with self.path.open("wb") as special:
                    special.write(data)
                return self
            fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".part")
            self._staged = Path(name)
            with os.fdopen(fd, "wb") as staged:
                staged.write(data)
                staged.flush()
                os.fsync(staged.fileno())
        except OSError as exc:
            self.discard()
            raise self._refused(exc) from exc
        return self

    def commit(self) -> None:
        if self._staged is None:
            return
        try:
            os.replace(self._staged, self.path)
        except OSError as exc:
            self.discard()
            raise self._refused(exc) from exc
        self._staged = None

    def discard(self) -> None:
        if self._staged is not None:
            self._staged.unlink(missing_ok=True)
            self._staged = None
