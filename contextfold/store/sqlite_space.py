"""Why SQLite could not write a store file: a size limit or no room, told apart from a disk fault.

SQLite reports ENOSPC from ``write()`` as SQLITE_FULL ("database or disk is full"), but every
other errno of a write as SQLITE_IOERR_WRITE and a failed ``fsync`` as SQLITE_IOERR_FSYNC, both
"disk I/O error". So a process file-size limit (RLIMIT_FSIZE, ``ulimit -f``: EFBIG), a user's
disk quota (EDQUOT), and a disk that fills at ``fsync`` (delayed allocation, network file
systems) came out as StoreUnavailableError, "retry later" (exit 4), although the write fails
the same way every time until someone raises the limit or frees space. Python's sqlite3 does
not hand out the errno (``sqlite3_system_errno``), so the place is looked at instead, only
once such a write failed: the limit against the sizes of the store's files, and whether the
store's directory takes a page-sized write. Anything else stays a disk I/O error.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["WRITE_ERRORS", "why_no_room"]

# SQLite's extended result codes of a write or sync the OS refused (SQLITE_IOERR | n << 8):
# IOERR_WRITE, IOERR_FSYNC, IOERR_DIR_FSYNC, IOERR_TRUNCATE (a file extended by ftruncate),
# IOERR_SHMOPEN (the -shm file's first bytes written: a reader's too) and IOERR_SHMSIZE (the
# -shm file grown)
WRITE_ERRORS = frozenset({10 | 3 << 8, 10 | 4 << 8, 10 | 5 << 8, 10 | 6 << 8, 10 | 18 << 8, 10 | 19 << 8})

# the most SQLite writes in one call: a page of the largest size (64 KiB) and a WAL frame header
_MOST_WRITTEN = 65_536 + 24
_NO_ROOM = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def why_no_room(path: str) -> str | None:
    """Why the store file ``path`` (or its -wal, -journal or -shm file) cannot grow, or None
    when neither a file-size limit nor a lack of room explains the failed write."""
    place = Path(path)
    if not place.parent.is_dir():
        return None
    return _size_limit(place) or _no_room(place.parent)


def _size_limit(place: Path) -> str | None:
    """The process's file-size limit, when a file of the store is within one write of it (a write
    that crosses the limit fills the file up to it, then fails)."""
    if sys.platform == "win32":
        return None
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return None
    sizes = []
    for suffix in ("", "-wal", "-journal", "-shm"):
        try:
            sizes.append(os.path.getsize(f"{place}{suffix}"))
        except OSError:
            continue
    if max(sizes, default=0) + _MOST_WRITTEN < soft:
        return None
    return (f"this process may not write files larger than {soft} bytes (its file-size limit, "
            "RLIMIT_FSIZE: ulimit -f), and the store's files reached it; raise the limit")


def _no_room(directory: Path) -> str | None:
    """What a write of a page into ``directory`` says, when it is that there is no room (a full
    file system, or this user's quota used up): written to an unnamed file, synced, removed."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".contextfold-room-") as probe:
            probe.write(os.urandom(_MOST_WRITTEN))  # random: a compressing file system stores it
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        if exc.errno is not None and exc.errno in _NO_ROOM:
            return (f"the file system holding it has no room left for this user ({os.strerror(exc.errno)}: "
                    "a full disk, or a disk quota used up); free space there, or move the store")
    return None
