"""Audio and video are logged with the playing time their bytes tell, and priced by it, on every
backend.

Why: Gemini counts video at 263 tokens a second and audio at 32 (ai.google.dev/gemini-api/docs/
tokens), and a video was priced as one 258-token page: a minute of video is ~15,800 tokens.
Reading the file's header while pricing is no fix: the build never reads a stored medium's
bytes, and a fallback length (600 s, ~158,000 tokens) made every neutral build under ~180k
tokens drop the video. The length is read when the medium enters the log (an inline ``data:``
URL, as importers keep them, or an artifact the event cites) and kept in
``DocumentBlock.duration_ms``; a log written before that field reads and hashes as it did.
"""

from __future__ import annotations

import base64

import blake3
import pytest

from contextfold.api import open_store, render_request
from contextfold.domain.canonical import canonical_utf8
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    DocumentBlock,
    TextBlock,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, MediaCostRecord
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.media_cost import (
    GEMINI_AUDIO_TOKENS_PER_SECOND,
    GEMINI_AUDIO_UNKNOWN_SECONDS,
    GEMINI_TOKENS_PER_IMAGE,
    GEMINI_VIDEO_TOKENS_PER_SECOND,
    MediaCost,
    media_cost,
)
from contextfold.store.event_store import EventStore
from tests.unit.test_media_duration import mp3_frames, mp4, wav


def _ref(data: bytes, media_type: str) -> ArtifactRef:
    return ArtifactRef(hash=blake3.blake3(data).hexdigest(), size=len(data), media_type=media_type)


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _asked(block: DocumentBlock) -> UserInput:
    return UserInput(content=(TextBlock(text="What happens in this clip?"), block))


def _logged(store: EventStore, run: str) -> list[DocumentBlock]:
    return [b for r in store.read(run) if isinstance(r.event, UserInput)
            for b in r.event.content if isinstance(b, DocumentBlock)]


def _media(blocks: list[DocumentBlock], provider: str, window: int) -> list[MediaCostRecord]:
    events: list[AnyEvent] = [_asked(b) for b in blocks]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    built = build_context(state, BuildConfig(provider=provider, model="gemini-2.5-flash", window=window,
                                             reserve=1_000), render=render_request)
    return [m for f in built.manifest.fragments for m in f.media]


def test_a_cited_video_and_inline_audio_are_logged_with_their_length(store: EventStore) -> None:
    video, song = mp4(75.5, brand=b"qt  "), mp3_frames(20)
    store.put_artifact(video, "video/quicktime")
    quicktime = DocumentBlock(artifact=_ref(video, "video/quicktime"), media_type="video/quicktime")
    store.append("r", [_asked(quicktime),
                       _asked(DocumentBlock(url=_data_url("audio/wav", wav(30)), media_type="audio/wav")),
                       _asked(DocumentBlock(url=_data_url("audio/mpeg", song), media_type="audio/mpeg")),
                       _asked(DocumentBlock(url="https://example.com/talk.mp4", media_type="video/mp4",
                                            duration_ms=61_000))])  # a runtime that knows the length
    stored, wave_, mp3, remote = _logged(store, "r")
    assert stored.duration_ms == 75_500 and stored.artifact is not None
    assert stored.artifact.hash == _ref(video, "x").hash  # the bytes, as they came
    assert wave_.duration_ms == 30_000 and wave_.url is None and wave_.artifact is not None  # kept once,
    assert store.artifact(wave_.artifact) == wav(30)  # as an image's data: URL is (test_inline_timed_media)
    assert mp3.duration_ms == -(-round(20 * 44_100 / 1152) * 1152 * 1000 // 44_100)
    assert remote.duration_ms == 61_000
    assert store.verify("r").ok


def test_media_whose_length_cannot_be_read_are_kept_as_they_came(store: EventStore) -> None:
    odd = b"\x00\x00\x00\x18ftypisom" + bytes(100)
    store.put_artifact(odd, "video/mp4")
    store.append("r", [_asked(DocumentBlock(artifact=_ref(odd, "video/mp4"), media_type="video/mp4")),
                       _asked(DocumentBlock(url=_data_url("audio/mpeg", b"ID3" + bytes(500)),
                                            media_type="audio/mpeg"))])
    assert [b.duration_ms for b in _logged(store, "r")] == [None, None]


def test_a_block_without_a_length_serializes_as_a_log_written_before_the_field() -> None:
    block = DocumentBlock(url="https://example.com/a.mp4", media_type="video/mp4")
    assert canonical_utf8(block.model_dump(mode="json")) == (
        b'{"artifact":null,"media_type":"video/mp4","pages":null,"title":null,"type":"document",'
        b'"url":"https://example.com/a.mp4"}')
    old = UserInput.model_validate_json(
        '{"type":"user_input","content":[{"type":"document","url":"https://example.com/a.mp4",'
        '"media_type":"video/mp4"}]}')
    assert old.model_dump_json() == UserInput(content=(block,)).model_dump_json()


def test_gemini_prices_video_and_audio_by_their_logged_length() -> None:
    minute = DocumentBlock(url="https://example.com/a.mp4", media_type="video/mp4", duration_ms=60_000)
    assert media_cost("gemini", minute).tokens == 60 * GEMINI_VIDEO_TOKENS_PER_SECOND == 15_780
    assert media_cost("neutral", minute).tokens >= 15_780
    clip = minute.model_copy(update={"duration_ms": 10_200})
    assert media_cost("gemini", clip).tokens == 11 * 263  # whole seconds, rounded up
    unknown = minute.model_copy(update={"duration_ms": None})
    price = media_cost("gemini", unknown)
    assert price.tokens == GEMINI_TOKENS_PER_IMAGE and "duration unknown" in price.rule
    voice = DocumentBlock(artifact=_ref(wav(30), "audio/wav"), media_type="audio/wav", duration_ms=30_000)
    assert media_cost("gemini", voice).tokens == 30 * GEMINI_AUDIO_TOKENS_PER_SECOND
    assert media_cost("openai-chat", voice).tokens == 300  # 1 token per 100 ms
    # without the length, the bound its bytes allow, as before (16-bit 16 kHz is 4x the least PCM's)
    unlogged = voice.model_copy(update={"duration_ms": None})
    assert media_cost("gemini", unlogged).tokens == -(-len(wav(30)) * 32 // 8000)


def test_a_stored_video_is_kept_by_a_neutral_build_priced_at_its_length(sqlite_url: str) -> None:
    video = mp4(90)
    with open_store(sqlite_url) as store:
        run = store.run("r")
        ref = store.events.put_artifact(video, "video/mp4")
        run.append(_asked(DocumentBlock(artifact=ref, media_type="video/mp4")))
        built = run.build("neutral", window=40_000, reserve=1_000, model="gemini-2.5-flash")
    [line] = [f for f in built.manifest.fragments if f.media]
    [media] = line.media
    assert media.tokens == 90 * GEMINI_VIDEO_TOKENS_PER_SECOND == 23_670
    assert "gemini-video:263/s, 90 s logged" in media.rule
    assert built.manifest.selected_tokens <= built.manifest.budget_tokens


@pytest.mark.parametrize("window", [20_000, 200_000])
def test_a_gemini_build_keeps_a_video_that_fits_and_leaves_out_one_that_does_not(window: int) -> None:
    minute = DocumentBlock(url="https://example.com/a.mp4", media_type="video/mp4", duration_ms=60_000)
    long = minute.model_copy(update={"url": "https://example.com/b.mp4", "duration_ms": 3_600_000})
    media = _media([long, minute], "gemini", window)
    assert [m.tokens for m in media] == ([15_780] if window == 20_000 else [946_800, 15_780])[-len(media):]


@pytest.mark.parametrize("model", [None, "gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"])
def test_a_neutral_build_prices_a_video_as_gemini_does_the_only_provider_that_takes_one(model: str | None
                                                                                        ) -> None:
    """A neutral build (no provider, often no model) priced a video as the dearest PDF page of
    every provider: 27,751 tokens (gpt-4o-mini's page image) for a 10 s clip, a price no provider
    charges for a video (OpenAI and Anthropic are sent a note in its place, "not attached"; only
    Gemini sees it, at 263 tokens a second). It is Gemini's price now, by the logged length (one
    258-token page when the length is not logged, as Gemini's build prices it), and the rule says
    why."""
    clip = DocumentBlock(url="https://example.com/a.mp4", media_type="video/mp4", duration_ms=10_000)
    price = media_cost("neutral", clip, model)
    assert price.tokens == media_cost("gemini", clip, model).tokens == 10 * GEMINI_VIDEO_TOKENS_PER_SECOND
    assert "gemini-video:263/s, 10 s logged" in price.rule and "only Gemini takes video" in price.rule
    unknown = media_cost("neutral", clip.model_copy(update={"duration_ms": None}), model)
    assert unknown.tokens == GEMINI_TOKENS_PER_IMAGE
    assert "duration unknown" in unknown.rule and "only Gemini takes video" in unknown.rule


@pytest.mark.parametrize(("medium", "media_type", "per_second"), [
    (mp4(10), "video/mp4", GEMINI_VIDEO_TOKENS_PER_SECOND),
    (wav(10.0), "audio/wav", GEMINI_AUDIO_TOKENS_PER_SECOND),
])
def test_a_neutral_build_without_a_model_keeps_a_short_video_or_voice_note(
        sqlite_url: str, medium: bytes, media_type: str, per_second: int) -> None:
    with open_store(sqlite_url) as store:
        run = store.run("r")
        ref = store.events.put_artifact(medium, media_type)
        run.append(_asked(DocumentBlock(artifact=ref, media_type=media_type)))
        built = run.build("neutral", window=8_000, reserve=1_000)
    [media] = [m for f in built.manifest.fragments for m in f.media]
    assert media.tokens == 10 * per_second and media.not_attached is None, media
    assert built.manifest.selected_tokens <= built.manifest.budget_tokens


@pytest.mark.parametrize("model", [None, "gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-flash"])
def test_a_neutral_build_prices_audio_as_the_dearest_provider_that_takes_it(model: str | None) -> None:
    """A neutral build floored audio at the dearest PDF page: 27,751 tokens (gpt-4o-mini's page
    image) with no model for a 10 s voice note, which Gemini counts at 320 and OpenAI Chat's
    audio models at 100 (Anthropic and Responses send a note). It is the dearer of those two now,
    by the logged length; by the longest the bytes hold when it is not logged; at Gemini's stated
    guess (600 s) when not even the size is known; and the rule says why."""
    note = DocumentBlock(url=_data_url("audio/wav", wav(10.0)), media_type="audio/wav", duration_ms=10_000)
    price = media_cost("neutral", note, model)
    assert price.tokens == 10 * GEMINI_AUDIO_TOKENS_PER_SECOND == media_cost("gemini", note, model).tokens
    assert "gemini-audio:32/s, 10 s logged" in price.rule and "take audio" in price.rule
    bound = media_cost("neutral", note.model_copy(update={"duration_ms": None}), model)
    assert bound == MediaCost(media_cost("gemini", note.model_copy(update={"duration_ms": None})).tokens,
                              bound.rule) and "duration not logged" in bound.rule
    remote = DocumentBlock(url="https://example.com/note.ogg", media_type="audio/ogg")
    guess = media_cost("neutral", remote, model)
    assert guess.tokens == GEMINI_AUDIO_UNKNOWN_SECONDS * GEMINI_AUDIO_TOKENS_PER_SECOND
    assert "length unknown" in guess.rule and "take audio" in guess.rule


def test_a_neutral_build_prices_audio_only_openai_chat_takes_by_its_rule() -> None:
    """``audio/x-wav`` is a type Gemini does not list (it sends a note) and Chat Completions does:
    the neutral price is OpenAI's, 10 tokens a second, not Gemini's 600 s guess."""
    note = DocumentBlock(url=_data_url("audio/x-wav", wav(3.0)), media_type="audio/x-wav", duration_ms=3_000)
    price = media_cost("neutral", note)
    assert price.tokens == 30 and "openai-audio:10/s, 3000 ms logged" in price.rule
