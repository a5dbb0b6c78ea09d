"""Audio and video bytes a user sends, stored through the public API (``Store.attach_media``).

Why: images had ``Store.attach_image`` and PDFs ``attach_document``, but a user's voice note or
screen recording could only reach the log as a URL (a ``data:`` URL kept inline in the event,
or a remote one with ``duration_ms``), or through ``store.events.put_artifact``, which is no
public call. ``attach_media`` stores the bytes once as a blake3 artifact, as ``attach_image``
does, with the playing time its container tells (what Gemini prices audio and video by). Each
body built from such a block is checked against the official SDK's request types.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import blake3
import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.errors import (
    ArtifactNotFoundError,
    InputLimitError,
    InvalidInputError,
    UnsupportedMediaError,
)
from contextfold.domain.events import DocumentBlock, PolicySet, RunStarted, TextBlock, UserInput
from contextfold.projections.render import validate_sdk_types
from contextfold.store.media import MediaLimits, attach_media
from tests.unit.test_media_duration import mp3_frames, mp4, wav

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
       b"\x00\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


def _asked(store: Store, run_id: str, *blocks: DocumentBlock) -> Run:
    run = store.run(run_id)
    run.append(RunStarted(model="gpt-4o"), PolicySet(text="Answer the user."),
               UserInput(content=(TextBlock(text="What is in these?"), *blocks)))
    return run


def _built(run: Run, provider: str, model: str | None = None) -> dict[str, Any]:
    request = run.build(provider, model=model, window=200_000, reserve=4_000, record=False).request
    assert validate_sdk_types(provider, request) is True  # the SDK is here, and its types accept it
    return request


def test_a_voice_note_is_stored_once_with_its_length(store: Store) -> None:
    voice = wav(30)
    block = store.attach_media(voice, media_type="audio/wav")
    assert block.artifact is not None and block.url is None
    assert (block.media_type, block.duration_ms, block.artifact.size) == ("audio/wav", 30_000, len(voice))
    assert store.artifact(block.artifact.hash) == voice
    run = _asked(store, "r", block)
    logged = run.events()[-1].event
    assert isinstance(logged, UserInput) and logged.content[1] == block  # appended as attached


def test_stored_audio_is_sent_to_the_chat_audio_model_and_to_gemini(store: Store) -> None:
    voice, song = wav(3), mp3_frames(2)
    run = _asked(store, "r", store.attach_media(voice, media_type="audio/wav"),
                 store.attach_media(song, media_type="audio/mpeg"))
    chat = _built(run, "openai-chat", "gpt-4o-audio-preview")
    audio = [p for m in chat["messages"] if isinstance(m["content"], list) for p in m["content"]
             if p["type"] == "input_audio"]
    assert audio == [{"type": "input_audio", "input_audio": {"data": base64.b64encode(voice).decode(),
                                                             "format": "wav"}},
                     {"type": "input_audio", "input_audio": {"data": base64.b64encode(song).decode(),
                                                             "format": "mp3"}}]
    gemini = _built(run, "gemini")
    inline = [p["inlineData"] for c in gemini["contents"] for p in c["parts"] if "inlineData" in p]
    assert inline == [{"mimeType": "audio/wav", "data": base64.b64encode(voice).decode()},
                      {"mimeType": "audio/mpeg", "data": base64.b64encode(song).decode()}]


def test_stored_video_is_sent_to_gemini_and_a_note_to_the_others(store: Store) -> None:
    clip = mp4(4)
    block = store.attach_media(clip, media_type="video/mp4", title="screen recording")
    assert block.duration_ms == 4_000
    run = _asked(store, "v", block)
    gemini = _built(run, "gemini")
    inline = [p["inlineData"] for c in gemini["contents"] for p in c["parts"] if "inlineData" in p]
    assert inline == [{"mimeType": "video/mp4", "data": base64.b64encode(clip).decode()}]
    encoded = base64.b64encode(clip).decode()
    for provider, model in (("anthropic", "claude-sonnet-4-5"), ("openai-chat", None),
                            ("openai-responses", None)):
        text = json.dumps(_built(run, provider, model))
        assert encoded not in text and "video/mp4" in text  # a note names what was not sent


@pytest.mark.parametrize(("data", "media_type", "error", "message"), [
    (wav(1), "image/png", UnsupportedMediaError, "audio or video"),
    (wav(1), "application/pdf", UnsupportedMediaError, "audio or video"),
    (PNG, "audio/wav", UnsupportedMediaError, "image/png"),
    (b"", "audio/wav", UnsupportedMediaError, "no bytes"),
    ("not bytes", "audio/wav", InvalidInputError, "must be bytes"),
])
def test_what_is_not_audio_or_video_is_refused_and_nothing_stored(
        store: Store, data: Any, media_type: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        store.attach_media(data, media_type=media_type)
    if isinstance(data, bytes):
        with pytest.raises(ArtifactNotFoundError):
            store.artifact(blake3.blake3(data).hexdigest())


def test_audio_over_the_limit_is_refused_before_it_is_stored(store: Store) -> None:
    with pytest.raises(InputLimitError, match="exceeds the limit of 1000 bytes"):
        attach_media(store.events, wav(1), media_type="audio/wav",
                     limits=MediaLimits(max_document_bytes=1000))


def test_audio_whose_container_does_not_tell_its_length_is_stored_without_one(store: Store) -> None:
    raw = b"OggS" + bytes(200)  # an Ogg page header without a granule position to read
    block = store.attach_media(raw, media_type="audio/ogg")
    assert block.duration_ms is None and block.artifact is not None
    assert store.artifact(block.artifact.hash) == raw
