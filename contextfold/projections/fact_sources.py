"""Which file a state fragment shows, so that the build's content dedupe keeps files apart.

Pure. The build keeps one copy of a text that several state fragments hold
(``units._state_units``: DESIGN 7, dedupe by content hash + source_ref + semantic key). A
text's source is part of the fact when the source is a file: ``replicas: 3`` read from
``prod/config.yaml`` and from ``staging/config.yaml`` is two facts, and keeping one of them
hid from the model that prod was read at all. A text from no file (a web page and its mirror,
a knowledge-base chunk, a memory) is one fact however many places returned it, and the more
authoritative or newer copy stands for it.

So a fragment that shows a file is a copy only of a fragment with the same text from the same
file (a workspace instruction read again as a file, one block read twice in two ranges); a
fragment that shows no file is a copy of any fragment with its text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from contextfold.domain.fragments import ContextFragment
from contextfold.projections.fold_content import file_key
from contextfold.projections.state import RunState

__all__ = ["FileRefRead", "copy_of", "file_reads", "file_sources", "parse_file_ref"]

_LINES_SUFFIX = re.compile(r"#L(\d+)(?:-L(\d+))?$")


_VERSION = re.compile(r"v?\d+(?:\.\d+)+")


class FileRefRead(NamedTuple):
    """What a ``file://`` source ref names: a path, its revision and lines (None: none named)."""

    path: str
    revision: str | None
    start_line: int | None
    end_line: int | None


def parse_file_ref(ref: str) -> FileRefRead:
    """The path, revision and lines of a ``file://path[@revision][#Lm[-Ln]]`` source ref
    (``fold_content.file_ref``'s shape: ``#Lm`` alone is line m to the end). A last ``@`` is a
    revision only when no ``/`` follows it (``node_modules/@types/x``) and what follows has no dot
    unless it is a version (``v1.2.3``): ``mail/team@corp.com`` and ``mail/team@corp.org`` are two
    files, and read as one path at two revisions their equal texts were one fact. (Misread the
    other way, two revisions of a file are kept both.)"""
    rest = ref.removeprefix("file://")
    lines = _LINES_SUFFIX.search(rest)
    start: int | None = None
    end: int | None = None
    if lines is not None:
        rest = rest[:lines.start()]
        start, end = int(lines[1]), (None if lines[2] is None else int(lines[2]))
    head, at, revision = rest.rpartition("@")
    if at and head and "/" not in revision and ("." not in revision or _VERSION.fullmatch(revision)):
        return FileRefRead(head, revision or None, start, end)
    return FileRefRead(rest, None, start, end)


def file_reads(state: RunState) -> dict[str, str]:
    """Each current read of a file (``RunState.files``: reads and stale rests) -> its path. The
    fold decided between the reads of one path (``fold_files``): which are current, which stale."""
    return {fid: path for path, kept in state.files.items() for fid, *_ in kept}


def file_sources(state: RunState, fids: Iterable[str], frag: Callable[[str], ContextFragment],
                 reads: dict[str, str] | None = None) -> dict[str, str]:
    """The file (a normalised path, ``fold_content.file_key``) each of ``fids`` shows, for those
    that show one: a file read's path (as the fold filed it; ``reads``, ``file_reads`` when
    None), a retrieved chunk's ``file://`` path, a workspace instruction's source
    (``AGENTS.md``) when it is a path, not a URL."""
    if reads is None:
        reads = file_reads(state)
    out: dict[str, str] = {}
    for fid in fids:
        if fid in reads:
            out[fid] = reads[fid]
            continue
        f = frag(fid)
        if f.source_ref.startswith("file://"):
            out[fid] = file_key(parse_file_ref(f.source_ref).path)
        elif f.kind == "instruction" and f.source_ref and "://" not in f.source_ref:
            out[fid] = file_key(f.source_ref)
    return out


def copy_of(fid: str, kept: Iterable[str], files: dict[str, str]) -> str | None:
    """The first of ``kept`` (fragments already kept, with ``fid``'s text) that ``fid`` is a copy
    of: any of them when ``fid`` shows no file, else one that shows the same file."""
    path = files.get(fid)
    return next((k for k in kept if path is None or files.get(k) == path), None)
