"""The line of an events export that carries an artifact (``events --json --with-artifacts``).

``{"artifact": {"data": BASE64, "hash": H, "media_type": M, "size": N}}``: the large payloads and
media a run's events cite by hash, so that another store can import the run
(:mod:`contextfold.importers.events_jsonl` reads them back, each checked against its hash).

Here, not beside the reader, because the command that writes the lines exports a log and imports
nothing: taking the format from the importer loaded every importer, and through them the
renderers (~0.15 s of CPU a command; ``tests/unit/test_cli_light_imports.py``).
"""

from __future__ import annotations

import base64
from typing import Any

from contextfold.domain.events import ArtifactRef

__all__ = ["ARTIFACT_LINE", "artifact_line"]

ARTIFACT_LINE = "artifact"
"""The one key of an artifact line (see the module docstring)."""


def artifact_line(ref: ArtifactRef, data: bytes) -> dict[str, Any]:
    """The export line carrying one artifact (``events --json --with-artifacts``)."""
    return {ARTIFACT_LINE: {"data": base64.b64encode(data).decode("ascii"), "hash": ref.hash,
                            "media_type": ref.media_type, "size": ref.size}}
