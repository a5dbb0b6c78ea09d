"""Which files under a folder ``contextfold import`` reads as traces, and which folders are one run.

Apart from :mod:`contextfold.cli_import` because telling a trace from what lies beside it is a walk
of its own: hidden entries, symlinked folders, ``--glob`` patterns, and OpenHands conversations
kept one JSON file per event (``sessions/<id>/events/<n>.json``, the V1 SDK's
``<conversation>/events/event-NNNNN-<uuid>.json``), each ONE run, not one run per file.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from pathlib import Path
from typing import NamedTuple

from contextfold.domain.errors import ImportFormatError

__all__ = ["EventFolder", "trace_files"]


class EventFolder(NamedTuple):
    """An OpenHands conversation kept one JSON file per event, as OpenHands' file store keeps a
    session (``sessions/<id>/events/<n>.json``): ONE run, named after ``conversation``."""

    conversation: Path
    """The folder holding ``events/`` (the run's name), or the ``events`` folder itself when
    it was the folder imported."""
    files: tuple[Path, ...]
    """The event files, in event-id order."""
    state: Path | None = None
    """The conversation's own state beside ``events/``, read for the model's name."""


_STATE_FILES = ("base_state.json", "metadata.json")
"""A conversation's state files (the V1 SDK's, the earlier file store's): not traces."""


_EVENT_FILE = re.compile(r"(?:event-(?P<index>[0-9]{5,})-[0-9a-fA-F-]{8,}|(?P<id>[0-9]+))\.json")
"""An OpenHands event file: ``<id>.json``, or the V1 SDK's ``event-<index>-<event uuid>.json``."""


def _event_order(path: Path) -> int:
    m = _EVENT_FILE.fullmatch(path.name)
    assert m is not None  # only matching names are ordered
    return int(m["index"] or m["id"])


def _event_files(folder: Path) -> tuple[Path, ...] | None:
    """The files of ``folder`` in event-id order when it is an OpenHands ``events`` folder (named
    so, holding ``<id>.json`` files and nothing else but hidden entries, the first of them an
    OpenHands event), else None: another tool's numbered files are read one by one, as before."""
    if folder.name != "events":
        return None
    try:
        entries = [e for e in os.scandir(folder) if not e.name.startswith(".")]
    except OSError:
        return None  # the walk reports what it cannot read
    if not entries or not all(_EVENT_FILE.fullmatch(e.name) and e.is_file() for e in entries):
        return None
    files = tuple(sorted((Path(e.path) for e in entries), key=_event_order))
    return files if _is_openhands_event(files[0]) else None


_PEEK_BYTES = 16 << 20
"""An event file up to this size is read to tell an OpenHands event folder from another tool's
numbered files; a bigger one is taken for an event (it is read in full by the import anyway)."""


def _is_openhands_event(path: Path) -> bool:
    """Whether ``path`` holds one OpenHands event (``importers.openhands.is_event_object``). A
    file that cannot be read or parsed is left for the import to report, as an event's."""
    from contextfold.importers.openhands import is_event_object

    try:
        if path.stat().st_size > _PEEK_BYTES:
            return True
        value = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return True
    return is_event_object(value)


def trace_files(root: Path, patterns: tuple[str, ...], *, event_folders: bool = True
                ) -> list[Path | EventFolder]:
    """The files under ``root`` whose name matches one of ``patterns``, and (with
    ``event_folders``) the OpenHands conversations kept one file per event, in path order.

    Hidden files and folders (``.git``, editor swap files) are passed over, and so are
    symlinked folders (a link back up the tree would never end); a symlinked file is read. A
    conversation's ``event_cache`` folder is passed over too: its pages copy its events."""
    # event folders only where their files would be read: ``--glob '*.traj'`` reads no event
    event_folders = event_folders and any(fnmatch.fnmatchcase("0.json", p) for p in patterns)
    own = _event_files(root) if event_folders else None
    if own is not None:
        return [EventFolder(root, own)]
    found: list[Path | EventFolder] = []

    def refuse(exc: OSError) -> None:
        raise ImportFormatError(f"{exc.filename or root}:0", f"cannot read: {exc.strerror or exc}")

    for folder, dirs, files in os.walk(root, onerror=refuse):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        events = _event_files(Path(folder, "events")) if event_folders and "events" in dirs else None
        if events is not None:
            state = next((name for name in _STATE_FILES if name in files), None)
            found.append(EventFolder(Path(folder), events, None if state is None else Path(folder, state)))
            dirs[:] = [d for d in dirs if d not in ("events", "event_cache")]
            files = [name for name in files if name != state]
        for name in files:
            if not name.startswith(".") and any(fnmatch.fnmatchcase(name, p) for p in patterns):
                path = Path(folder, name)
                if path.is_file():  # not a socket, FIFO or dangling link
                    found.append(path)

    def order(item: Path | EventFolder) -> tuple[str, ...]:
        return (item.conversation if isinstance(item, EventFolder) else item).relative_to(root).parts

    return sorted(found, key=order)
