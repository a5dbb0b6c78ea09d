"""What one build returns: the conversation, the request body and its bytes, the manifest.

Apart from the builder because it is the build's output contract, read by the API, the CLI
and the audit, and because it knows how to record itself in the log (:meth:`BuildResult.record`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from contextfold.domain.conversation import Conversation
from contextfold.domain.events import ContextBuilt
from contextfold.domain.fragments import ContextFragment
from contextfold.domain.manifest import ContextManifest, manifest_json_depth
from contextfold.domain.version import BUILDER
from contextfold.projections.entries import FragmentEntry
from contextfold.projections.request_json import hand_out, manifest_json
from contextfold.projections.selected_lines import SelectedView

__all__ = ["BuildResult"]


@dataclass(frozen=True)
class BuildResult:
    conversation: Conversation
    shared_request: dict[str, Any] = field(repr=False)
    """The request body as the builder keeps it: its message dicts are reused by later builds
    of the same state (``request_json``). Read-only; :attr:`request` is the caller's copy."""
    manifest: ContextManifest
    views: tuple[SelectedView, ...] = field(repr=False, compare=False)
    """What :attr:`fragments` are made from; not compared: the manifest names each fragment, and
    a view's folded entry compares by identity (a result unpickled, or built by another handle,
    was unequal to the same build)."""
    horizon: int = field(repr=False)
    """The log horizon the build saw: the fragments' freshness is computed from it."""
    body_bytes: bytes = field(repr=False)
    """The request as canonical JSON (sorted keys, compact, UTF-8): exactly the bytes
    ``manifest.request_hash`` is the blake3 of. Immutable, so it is handed out as is: send it
    as the HTTP body and the provider receives the audited bytes."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with each view's fragment whole. Why: the view of a long tool output keeps a
        reader of the run's log in place of its text (``entries.LazyText``: the store's handle),
        so a result returned from a worker process (``ProcessPoolExecutor``) failed to pickle for
        any run with an output over ``LAZY_TEXT_CHARS``."""
        views = tuple(v._replace(fragment=v.fragment.fragment) if isinstance(v.fragment, FragmentEntry)
                      else v for v in self.views)
        return {**self.__dict__, "views": views}

    @cached_property
    def body(self) -> str:
        """:attr:`body_bytes` as text (decoded on first access: the build itself never needs it)."""
        return self.body_bytes.decode()

    @cached_property
    def fragments(self) -> tuple[ContextFragment, ...]:
        """The selected fragments, with selection_reason and truncated set (made on first access)."""
        return tuple(v.made(self.horizon) for v in self.views)

    @cached_property
    def request(self) -> dict[str, Any]:
        """The request body to send or edit: a deep copy, made on first access."""
        return hand_out(self.shared_request)

    def record(self, *, rebuild: bool = False) -> ContextBuilt:
        """The ``context_built`` event that records this build in the log.

        Its manifest dict shares the line dicts that unchanged lines had in earlier records
        (read-only), and its canonical JSON is joined from their kept texts: on a long run
        this made the record's append several times faster (``request_json.manifest_json``).
        Its depth is vouched for by the manifest's schema (``manifest_json_depth``)."""
        m = self.manifest
        manifest, data = manifest_json(m)
        return ContextBuilt.with_manifest_json(
            data, manifest_json_depth(), turn=m.turn, provider=m.provider, request_hash=m.request_hash,
            prefix_hash=m.cache_key, config_hash=m.config_hash, manifest=manifest, rebuild=rebuild,
            log_version=m.log_version, builder=BUILDER)
