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

import re
from dataclasses import dataclass

__all__ = ["StoreLimits", "json_depth"]


@dataclass(frozen=True)
class StoreLimits:
    """What one append may carry. Defaults: 8 MiB of canonical JSON per event (after
    payloads above the artifact threshold moved out), 256 MiB per artifact, JSON
    nesting depth 64 (tool schemas and manifests are the only free-form trees),
    10 000 events per append."""

    max_event_bytes: int = 8 * 1024 * 1024
    max_artifact_bytes: int = 256 * 1024 * 1024
    max_depth: int = 64
    max_batch: int = 10_000


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKETS = re.compile(rb"[\[\]{}]")


def json_depth(body: bytes) -> int:
    """Nesting depth of a JSON document (strings skipped; ``{}``/``[]`` count one level)."""
    depth = deepest = 0
    for m in _JSON_BRACKETS.finditer(_JSON_STRING.sub(b"", body)):
        if m.group() in (b"{", b"["):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest
