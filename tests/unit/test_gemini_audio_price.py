"""Gemini audio is priced by its length: "Gemini represents each second of audio as 32 tokens"
(ai.google.dev/gemini-api/docs/audio, "Technical details about audio").

It had been priced as a PDF page (258 tokens), what Gemini counts for 8 s of audio: a 30-second
voice note (960 tokens) was under-counted almost fourfold. The log keeps no duration, so the
price is that of the longest the bytes can hold at the format's least bitrate (as OpenAI Chat's
``input_audio``); audio whose size the log does not know (a remote URL) is priced at a stated
fallback length. Real WAV bytes (the standard library's ``wave``) go through a real build, whose
Gemini body carries the audio inline.
"""

from __future__ import annotations

import base64
import io
import json
import wave

import pytest

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ArtifactRef, DocumentBlock, TextBlock, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, MediaCostRecord
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.media_cost import (
    GEMINI_AUDIO_TOKENS_PER_SECOND,
    GEMINI_AUDIO_UNKNOWN_SECONDS,
    media_cost,
)
from contextfold.projections.render import validate_sdk_types


def _wav(seconds: float, rate: int = 16_000, width: int = 2) -> bytes:
    """``seconds`` of silence as a real WAV file (mono)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(bytes(int(seconds * rate) * width))
    return out.getvalue()


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _records(block: DocumentBlock, provider: str = "gemini") -> tuple[list[MediaCostRecord], str]:
    events: list[AnyEvent] = [UserInput(content=(TextBlock(text="What is said in this recording?"), block))]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    built = build_context(state, BuildConfig(provider=provider, model="gemini-2.5-flash", window=200_000,
                                             reserve=1_000), render=render_request)
    assert validate_sdk_types(provider, built.request)
    return [m for f in built.manifest.fragments for m in f.media], json.dumps(built.request)


@pytest.mark.parametrize(("seconds", "rate", "width"), [(30, 16_000, 2), (9, 8_000, 1), (120, 44_100, 2)])
def test_a_wav_recording_costs_at_least_32_tokens_a_second_of_it(seconds: int, rate: int, width: int) -> None:
    data = _wav(seconds, rate, width)
    (record,), body = _records(DocumentBlock(url=_data_url("audio/wav", data), media_type="audio/wav"))
    assert '"mimeType": "audio/wav"' in body and record.not_attached is None
    assert record.tokens >= GEMINI_AUDIO_TOKENS_PER_SECOND * seconds
    assert record.rule.startswith("gemini-audio:32/s")
    # the bound is the least PCM's (8 kHz, 8-bit): exact for such a file, never under for any other
    assert record.tokens == -(-len(data) * 32 // 8000)


def test_an_mp3_is_bounded_at_its_lowest_bitrate_and_an_artifacts_size_counts_as_its_bytes() -> None:
    mp3 = DocumentBlock(url=_data_url("audio/mpeg", b"ID3" + bytes(99_997)), media_type="audio/mpeg")
    assert media_cost("gemini", mp3).tokens == 100 * 32  # at most 100 s at 1,000 bytes a second
    stored = DocumentBlock(artifact=ArtifactRef(hash="a" * 64, size=480_000, media_type="audio/wav"),
                           media_type="audio/wav")
    assert media_cost("gemini", stored).tokens == 60 * 32  # at most 60 s of the least PCM


def test_audio_of_unknown_size_is_priced_at_the_stated_fallback_length() -> None:
    remote = DocumentBlock(url="https://example.com/call.ogg", media_type="audio/ogg")
    (record,), _ = _records(remote)
    assert record.tokens == GEMINI_AUDIO_UNKNOWN_SECONDS * 32 > 258
    assert "length unknown" in record.rule


def test_a_neutral_build_pays_at_least_geminis_price_for_audio() -> None:
    block = DocumentBlock(url=_data_url("audio/wav", _wav(60)), media_type="audio/wav")
    assert media_cost("neutral", block).tokens >= media_cost("gemini", block).tokens >= 60 * 32
