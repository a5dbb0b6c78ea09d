"""A stored audio or video medium is estimated by its length when folded, never read as text.

Why: the fold counted an artifact-backed document without a page count by reading the
artifact's bytes as text and tokenizing them. For a stored video that was a count of noise (a
20 MB clip "cost" 15.6 million tokens) and slow: 18.6 s to fold and 12.7 s more to build (the
build's media plan counted it again), where the media rules price it by its length
(``media_cost``: 263 tokens a second of video, 32 of audio). A text-like artifact (JSON read from
a file) is still counted from its text: that text is what a request shows.

The spy is on the store's text reads (``Store.cited_text`` / ``artifact_text``), the only way the
fold and the build load an artifact as text; the build still loads a medium's bytes to send
them (``load_bytes``), as bytes.
"""

from __future__ import annotations

import blake3
import pytest

from contextfold.api import Store, open_store
from contextfold.domain.events import (
    ArtifactRef,
    DocumentBlock,
    EvidenceRetrieved,
    FileRead,
    TextBlock,
    UserInput,
)
from contextfold.projections.fold_content import DOCUMENT_PAGE_TOKENS, block_tokens
from contextfold.projections.media_cost import (
    GEMINI_AUDIO_TOKENS_PER_SECOND,
    GEMINI_VIDEO_TOKENS_PER_SECOND,
)
from tests.unit.test_media_duration import box, mvhd, wav

VIDEO_SECONDS = 90
AUDIO_SECONDS = 120


def _video(seconds: int, noise_bytes: int) -> bytes:
    """A real MP4 of ``seconds`` whose ``mdat`` holds ``noise_bytes`` of pseudo-random data, as
    compressed video is: as text, mostly replacement characters and one-byte tokens."""
    noise = blake3.blake3(b"frames").digest(length=noise_bytes)
    return (box(b"ftyp", b"isom" + (0x200).to_bytes(4, "big") + b"isommp41") + box(b"mdat", noise)
            + box(b"moov", mvhd(seconds * 90_000, 90_000) + box(b"trak", box(b"tkhd", bytes(84)))))


def _spy_text_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hashes of the artifacts ``store`` is asked to load as text, in order."""
    read: list[str] = []
    cited, whole = store.cited_text, store.artifact_text

    def cited_text(ref: ArtifactRef) -> str:
        read.append(ref.hash)
        return cited(ref)

    def artifact_text(ref: str | ArtifactRef) -> str:
        read.append(ref.hash if isinstance(ref, ArtifactRef) else ref)
        return whole(ref)

    monkeypatch.setattr(store, "cited_text", cited_text)
    monkeypatch.setattr(store, "artifact_text", artifact_text)
    return read


def test_stored_audio_and_video_are_folded_by_their_length_without_reading_them_as_text(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    video, audio = _video(VIDEO_SECONDS, 4_000_000), wav(AUDIO_SECONDS)  # ~4 MB and ~3.8 MB
    listing = b'{"files": ["a.py", "b.py"], "total": 2}'
    with open_store(store_url) as store:
        reads = _spy_text_reads(store, monkeypatch)
        video_ref = store.events.put_artifact(video, "video/mp4")
        audio_ref = store.events.put_artifact(audio, "audio/wav")
        json_ref = store.events.put_artifact(listing, "application/json")
        run = store.run("r")
        run.append(UserInput(content=(TextBlock(text="What happens in this clip?"),
                                      DocumentBlock(artifact=video_ref, media_type="video/mp4"))))
        run.append(EvidenceRetrieved(source_ref="https://example.com/call.wav", source_kind="other",
                                     blocks=(DocumentBlock(artifact=audio_ref, media_type="audio/wav"),)))
        run.append(FileRead(path="listing.json", artifact=json_ref))

        state = run.state()
        assert reads == [json_ref.hash]  # the JSON as text, as before; neither medium
        documents = {b.media_type: b for e in state.entries.values() for b in e.fragment.content
                     if isinstance(b, DocumentBlock)}
        clip, call = documents["video/mp4"], documents["audio/wav"]
        assert (clip.duration_ms, call.duration_ms) == (VIDEO_SECONDS * 1000, AUDIO_SECONDS * 1000)
        assert block_tokens(state, clip) == VIDEO_SECONDS * GEMINI_VIDEO_TOKENS_PER_SECOND  # 23,670
        assert block_tokens(state, call) == max(DOCUMENT_PAGE_TOKENS,
                                                AUDIO_SECONDS * GEMINI_AUDIO_TOKENS_PER_SECOND)
        assert block_tokens(state, documents["application/json"]) > 0  # its text, counted

        for provider in ("neutral", "gemini", "anthropic", "openai-chat"):
            built = run.build(provider, window=64_000, reserve=1_000, model="gemini-2.5-flash", record=False)
            assert built.manifest.selected_tokens <= built.manifest.budget_tokens
            priced = {m.media_type: m for f in built.manifest.fragments for m in f.media}
            if provider in ("neutral", "gemini"):
                assert priced["video/mp4"].tokens >= VIDEO_SECONDS * GEMINI_VIDEO_TOKENS_PER_SECOND
        assert set(reads) == {json_ref.hash}  # no build read a medium as text either
