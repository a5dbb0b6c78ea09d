"""The run ids an import gives the runs it reads: after the file (and folders) each came from.

Why a module of its own: the naming rules (characters a run id cannot hold, names in other
scripts told apart by a hash, a multi-run file's suffixes) are pure and tested on their own;
``cli_import`` reads files and writes stores.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from blake3 import blake3

__all__ = ["joined_run_id", "run_id_for", "run_in_file"]

_NOT_IN_RUN_IDS = re.compile(r"[^A-Za-z0-9._:@+=-]")
"""What a run id cannot hold, besides its ``/`` separators (``store.event_reads.RUN_ID_PATTERN``)."""
_NOT_IN_SUFFIXES = re.compile(r"[^A-Za-z0-9._:@/+=-]")
"""What a multi-run file's run suffix cannot hold: its ``/`` is kept, a separator as in a folder."""


def _spelled(not_held: re.Pattern[str], part: str) -> str:
    """``part`` with each character a run id cannot hold as ``_``; a part that held a non-ASCII
    character also gets ``+`` and 8 hex digits of its blake3 hash. Why: every letter of a CJK,
    Cyrillic or accented name is such a character, so ``登录错误.json`` and ``支付错误.json`` both
    became ``PREFIX/____`` and the folder's import was refused for the clash. An ASCII name
    keeps the id it always had (a space or bracket as ``_``), so importing it again finds it."""
    shown = not_held.sub("_", part)
    if part.isascii():
        return shown
    return f"{shown}+{blake3(part.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def run_id_for(prefix: str, relative: Path) -> str:
    """The run id of the trace at ``relative`` (a path under the imported folder):
    ``PREFIX/<folders>/<file name without its extension>``. A file named after its own folder
    (SWE-agent's ``<instance>/<instance>.traj``) is named once: ``PREFIX/<instance>``. A
    character a run id cannot hold (a space, a bracket, a non-ASCII letter) becomes ``_``, and a
    name with a non-ASCII letter is told apart by its hash (:func:`_spelled`): two files that
    still share an id are refused by the import, naming both."""
    *folders, name = relative.parts
    stem = Path(name).stem
    return joined_run_id(prefix, folders if folders and folders[-1] == stem else [*folders, stem])


def joined_run_id(prefix: str, parts: Iterable[str]) -> str:
    """``PREFIX/part/part...``, each part spelled as a run id can hold it (:func:`_spelled`)."""
    return "/".join([prefix, *(_spelled(_NOT_IN_RUN_IDS, part) for part in parts)])


def run_in_file(name: str, suffix: str, runs: int) -> str:
    """The run id of one of a file's ``runs``: ``name`` itself for a file of one run, else
    ``name/<suffix>``, a character a run id cannot hold (tau-bench's task id ``"a b"``) as ``_``
    (:func:`_spelled`): the file was refused whole for one such id."""
    return name if runs == 1 else f"{name}/{_spelled(_NOT_IN_SUFFIXES, suffix)}"
