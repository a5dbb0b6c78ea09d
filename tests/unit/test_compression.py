"""The compressed state format on its own: round trip, threshold, bounds and damage."""

from __future__ import annotations

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import IntegrityError
from contextfold.store.compression import (
    COMPRESS_MIN_BYTES,
    COMPRESSED_MAGIC,
    is_compressed,
    pack_artifact,
    pack_state,
    unpack_artifact,
    unpack_state,
)


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 3 * COMPRESS_MIN_BYTES))
def test_round_trip_whatever_the_size(seed: bytes, size: int) -> None:
    state = (b"0123456789abcdef" * 4 + seed * (size // max(len(seed), 1) + 1))[:max(size, 64)]
    packed = pack_state(state)
    assert unpack_state(packed, len(state), "test") == state
    if len(state) < COMPRESS_MIN_BYTES:
        assert packed is state  # small states are stored as they are
    assert not is_compressed(packed) or len(packed) < len(state)


def test_incompressible_large_state_is_stored_as_is() -> None:
    import os

    state = os.urandom(COMPRESS_MIN_BYTES * 2)
    assert pack_state(state) == state


def test_plain_rows_and_envelopes_are_never_taken_for_frames() -> None:
    assert not is_compressed(b"a" * 64 + b'{"type":"user_input"}')
    assert not is_compressed(b"cfenc1:0123")
    assert unpack_state(b"f" * 64 + b"{}", 10, "test") == b"f" * 64 + b"{}"


def test_limit_and_damage_are_integrity_errors() -> None:
    state = b"x" * (COMPRESS_MIN_BYTES * 4)
    packed = pack_state(state)
    with pytest.raises(IntegrityError, match="declares"):
        unpack_state(packed, len(state) - 1, "run 'r' position 3", position=3)
    with pytest.raises(IntegrityError, match="damaged") as info:
        unpack_state(packed[:-3] + b"\0\0\0", len(state), "run 'r' position 3", position=3)
    assert info.value.position == 3
    with pytest.raises(IntegrityError, match="damaged"):
        unpack_state(COMPRESSED_MAGIC + b"not a frame", len(state), "test")
    unsized = COMPRESSED_MAGIC + zstandard.ZstdCompressor(write_content_size=False).compress(state)
    with pytest.raises(IntegrityError, match="does not declare"):
        unpack_state(unsized, len(state), "test")


@pytest.mark.parametrize(("media_type", "compressed"), [
    ("text/plain; charset=utf-8", True), ("application/json", True), ("application/vnd.api+json", True),
    ("image/png", False), ("application/pdf", False), ("application/octet-stream", False)])
def test_only_text_artifacts_are_compressed(media_type: str, compressed: bool) -> None:
    raw = b'{"line": "the same again"}\n' * 5000
    stored = pack_artifact(raw, media_type)
    assert is_compressed(stored) is compressed
    assert unpack_artifact(stored, len(raw), "artifact x") == raw


def test_an_artifact_is_a_frame_only_when_shorter_than_its_size() -> None:
    raw = COMPRESSED_MAGIC + b"not a frame, just text that starts like one"
    assert unpack_artifact(raw, len(raw), "artifact x") == raw
    with pytest.raises(IntegrityError, match="damaged"):
        unpack_artifact(raw, len(raw) + 1, "artifact x")  # claimed compressed by its size: it is not
