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

from contextfold.domain.errors import InputLimitError

__all__ = ["RECORD_TYPE", "StoreLimits", "json_depth"]

RECORD_TYPE = "context_built"
"""The event type of a build's record: bounded by ``max_record_bytes``, not ``max_event_bytes``."""


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
    anything (the importers parse in memory; ``import --max-bytes N`` raises it).

    ``max_record_bytes`` (default 256 MiB, the largest artifact) bounds a build's own record
    (``context_built``) instead of ``max_event_bytes``: it lists every fragment the build left
    out (~190 bytes each), so it grows with the run, and a 28,000-call run's record (9.3 MB)
    made ``Run.build`` fail with an error meant for user input that no caller could act on.
    What still bounds it is this limit, on the write and on the read (a stored frame declaring
    more is refused before it is inflated); it is stored as a zstd frame or a delta of the
    run's previous record, a few KB to a few hundred."""

    max_event_bytes: int = 8 * 1024 * 1024
    max_artifact_bytes: int = 256 * 1024 * 1024
    max_depth: int = 64
    max_batch: int = 10_000
    max_import_bytes: int = 256 * 1024 * 1024
    max_record_bytes: int = 256 * 1024 * 1024

    def event_bytes(self, event_type: str) -> tuple[int, str]:
        """The most canonical JSON one event of ``event_type`` may hold, and the limit's name
        (for errors: the field to raise)."""
        if event_type == RECORD_TYPE:
            return self.max_record_bytes, "StoreLimits.max_record_bytes"
        return self.max_event_bytes, "StoreLimits.max_event_bytes"

    def check_event_bytes(self, index: int, event_type: str, size: int) -> None:
        """InputLimitError for event ``index`` of a batch when its JSON is over its limit."""
        limit, name = self.event_bytes(event_type)
        if size <= limit:
            return
        advice = ("carry large payloads as artifacts" if event_type != RECORD_TYPE else
                  f"raise {name} (a build's record lists every fragment it left out)")
        raise InputLimitError(f"event {index} ({event_type}) is {size} bytes of JSON after artifact "
                              f"offload; the limit is {limit}: {advice}")


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
