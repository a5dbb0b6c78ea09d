"""Input limits of the write side: how big, how deep, how many.

Checked for the whole batch before anything is written, each with a typed
:class:`~contextfold.domain.errors.InputLimitError`, so a hostile or broken
producer (a 2 GB tool output inlined, a JSON bomb in a tool schema) fails
loudly at the door instead of filling the store or blowing the stack of the
next reader. Payloads above the artifact threshold are moved to artifacts
before the event size is measured: the event limit bounds what every reader
of the run loads, the artifact limit bounds one blob.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

__all__ = ["StoreLimits", "json_depth"]


@dataclass(frozen=True)
class StoreLimits:
    """What one append may carry. Defaults: 8 MiB of canonical JSON per event (after
    payloads above the artifact threshold moved out), 256 MiB per artifact, JSON
    nesting depth 64 (tool schemas and manifests are the only free-form trees),
    10 000 events per append.

    ``max_import_bytes`` (default 256 MiB, the largest artifact) bounds one import
    source: ``contextfold import`` reads at most that many bytes of a file or a stream
    (``/dev/zero``, a pipe that never ends) and refuses anything longer with an
    :class:`~contextfold.domain.errors.InputLimitError` before it parses or writes
    anything (the importers parse in memory; ``import --max-bytes N`` raises it)."""

    max_event_bytes: int = 8 * 1024 * 1024
    max_artifact_bytes: int = 256 * 1024 * 1024
    max_depth: int = 64
    max_batch: int = 10_000
    max_import_bytes: int = 256 * 1024 * 1024


_SKELETON = bytes(b for b in range(256) if b not in b'"[]{}')
"""Every byte but quotes and brackets: deleted, what is left is the document's skeleton."""
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(body: bytes) -> int:
    """Nesting depth of a JSON document (strings skipped; ``{}``/``[]`` count one level).

    In C, because a long run's manifest is ~2 MB of JSON with ~70,000 brackets (a regex over
    the strings and a Python loop over the brackets were a quarter of its write; this is
    2.7x faster):

    1. drop every escape pair ``\\\\`` then every ``\\"`` (backslashes occur only in strings,
       where JSON pairs them from the left, as ``bytes.replace`` does): the quotes left
       delimit strings;
    2. keep only quotes and brackets; the pieces at even positions of ``split(b'"')`` are
       outside every string (the many empty ones cost nothing: the empty bytes is shared);
    3. their brackets as +1/-1 steps, summed as they come: the deepest running sum is the depth.
    """
    skeleton = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _SKELETON)
    brackets = b"".join(skeleton.split(b'"')[::2])
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))
