"""Audio and video that arrive as ``data:`` URLs are kept once as artifacts, as images and PDFs
are, and a build sends the same bytes as it did from the inline URL; a log an older release
wrote with them inline reads, verifies and builds as it did.

Why: an importer keeps inline base64 media as a ``data:`` URL, and the store moved only images
and PDFs out of the event. An audio or video clip stayed in the event's JSON: base64 in the log
(a third larger than its bytes), hashed into the chain, read by every fold and shown by
``events``, once per message that carries it, and refused past ``max_event_bytes`` (8 MiB)
where the same clip from ``Store.attach_media`` is an artifact of up to ``max_document_bytes``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import blake3
import pytest

from contextfold.api import open_store, render_request
from contextfold.cli import main
from contextfold.domain.events import ArtifactRef, DocumentBlock, TextBlock, UserInput, canonical_json
from contextfold.domain.log import RecordedEvent, chain_hash
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import validate_sdk_types
from contextfold.store.event_store import EventStore
from tests.integration.test_newer_release_log import _write_raw
from tests.unit.test_media_duration import mp4, wav

CLIP = wav(1.5)
B64 = base64.b64encode(CLIP).decode("ascii")
BUILDS = [("openai-chat", "gpt-4o-audio-preview"), ("gemini", "gemini-2.5-flash"),
          ("anthropic", "claude-sonnet-4-5"), ("openai-responses", "gpt-4o")]
"""Each provider's request: the clip sent (Chat's audio model, Gemini) or the note in its place."""


def _clips(records: list[RecordedEvent]) -> list[DocumentBlock]:
    return [b for r in records if isinstance(r.event, UserInput) for b in r.event.content
            if isinstance(b, DocumentBlock)]


def _stored(block: DocumentBlock) -> ArtifactRef:
    assert block.url is None and block.artifact is not None, block
    return block.artifact


def _chat_history() -> bytes:
    """An OpenAI Chat history whose user sends the same voice note twice."""
    note = {"type": "input_audio", "input_audio": {"data": B64, "format": "wav"}}
    return json.dumps([
        {"role": "system", "content": "Answer the user's voice notes."},
        {"role": "user", "content": [{"type": "text", "text": "Listen:"}, note]},
        {"role": "assistant", "content": "It is silent."},
        {"role": "user", "content": [note, {"type": "text", "text": "And again?"}]},
    ]).encode()


def _inline_request(events: list[Any], provider: str, model: str | None) -> bytes:
    """The request body built from ``events`` as parsed, their audio an inline ``data:`` URL: what
    a log that kept it inline sends."""
    state = fold([RecordedEvent("r1", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    return build_context(state, BuildConfig(provider=provider, model=model, window=100_000, reserve=2_000),
                         render=render_request).body_bytes


def test_an_imported_voice_note_is_stored_once_and_sent_as_the_same_bytes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = tmp_path / "chat.json"
    history.write_bytes(_chat_history())
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["--store", url, "import", str(history), "--run", "r1", "--format", "openai-chat"]) == 0, \
        capsys.readouterr().err
    parsed = parse(_chat_history(), format="openai-chat")
    inline = [b for e in parsed if isinstance(e, UserInput)
              for b in e.content if isinstance(b, DocumentBlock)]
    assert [b.url for b in inline] == [f"data:audio/wav;base64,{B64}"] * 2  # what the importer keeps
    with open_store(url) as store:
        notes = _clips(store.events.read("r1"))
        ref = _stored(notes[0])
        assert len(notes) == 2 and notes[1] == notes[0]
        assert notes[0].media_type == "audio/wav" and notes[0].duration_ms == 1_500
        assert store.events.artifact_count() == 1 and store.events.artifact(ref) == CLIP
        assert all(B64 not in canonical_json(r.event).decode() for r in store.events.read("r1"))
        run = store.run("r1")
        assert run.verify().ok
        # The one difference: a note standing for the clip (its second showing; the note of an API
        # that takes no audio) names it by the artifact's hash, as a stored image's does, where it
        # named the hash of the URL. The clip's bytes and type are sent as they were.
        by_url = blake3.blake3(f"data:audio/wav;base64,{B64}".encode()).hexdigest()[:12].encode()
        by_bytes = ref.hash[:12].encode()
        for provider, model in BUILDS:
            built = run.build(provider, model=model, window=100_000, reserve=2_000, record=False)
            before = _inline_request(parsed, provider, model)
            assert built.body_bytes == before.replace(b"sha:" + by_url, b"sha:" + by_bytes), provider
            assert validate_sdk_types(provider, built.request)
            first = _inline_request(parsed[:3], provider, model)  # the clip once
            once = run.build(provider, model=model, window=100_000, reserve=2_000, record=False, turn=1)
            assert once.body_bytes == first.replace(b"sha:" + by_url, b"sha:" + by_bytes), provider
            if provider in ("openai-chat", "gemini"):  # sent, not noted: the very same body
                assert by_url not in first
        # The neutral request cites a stored medium by its artifact (as it does a stored image),
        # where it carried the URL's payload: the bytes are the store's
        neutral = run.build("neutral", window=100_000, reserve=2_000, record=False).request
        media = [p for m in neutral["messages"] for p in m.get("parts", ()) if p.get("type") == "media"]
        assert [p["artifact"]["hash"] for p in media] == [ref.hash]
        assert B64 not in json.dumps(neutral)
        chat = run.build("openai-chat", model="gpt-4o-audio-preview", window=100_000, reserve=2_000,
                         record=False)
        assert chat.body.count(B64) == 1  # the second is the same clip: sent once, named after
        gemini = run.build("gemini", model="gemini-2.5-flash", window=100_000, reserve=2_000, record=False)
        assert {"inlineData": {"mimeType": "audio/wav", "data": B64}} in [
            p for c in gemini.request["contents"] for p in c["parts"]]


def test_an_appended_video_data_url_is_an_artifact_and_gemini_gets_the_same_bytes(store: EventStore) -> None:
    video = mp4(12)
    url = f"data:video/mp4;base64,{base64.b64encode(video).decode()}"
    asked = UserInput(content=(TextBlock(text="What happens here?"),
                               DocumentBlock(url=url, media_type="video/mp4", title="clip.mp4")))
    store.append("r1", [asked])
    [block] = _clips(store.read("r1"))
    ref = _stored(block)
    assert block.title == "clip.mp4"
    assert (block.media_type, block.duration_ms) == ("video/mp4", 12_000)
    assert store.artifact(ref) == video
    state = fold(store.read("r1"))
    cfg = BuildConfig(provider="gemini", model="gemini-2.5-flash", window=100_000, reserve=2_000)
    stored = build_context(state, cfg, render=render_request, load_bytes=store.artifact)
    assert stored.body_bytes == _inline_request([asked], "gemini", "gemini-2.5-flash")


def _padding_bits_set(text: str) -> str:
    """``text`` (base64 ending in one ``=``) with the unused low bits of its last character set:
    the same bytes to a decoder, another text when they are encoded again."""
    assert text.endswith("=") and not text.endswith("==")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet[alphabet.index(text[-2]) | 0b11]
    assert base64.b64decode(text[:-2] + last + "=") == base64.b64decode(text)
    return text[:-2] + last + "="


@pytest.mark.parametrize("url, media_type, why", [
    ("data:audio/wav;base64," + _padding_bits_set(B64), "audio/wav", "base64 that is not canonical"),
    ("data:audio/mpeg;base64," + B64, "audio/wav", "the URL says another type than the block"),
    ("data:audio/wav;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(40)).decode(), "audio/wav",
     "the bytes are an image"),
])
def test_a_data_url_an_artifact_would_not_send_as_it_came_stays_inline(
        store: EventStore, url: str, media_type: str, why: str) -> None:
    """Moved, such a clip would be sent otherwise than the URL sent it (another base64 text,
    another type): it is kept as it came, as before."""
    store.append("r1", [UserInput(content=(DocumentBlock(url=url, media_type=media_type),))])
    [block] = _clips(store.read("r1"))
    assert block.url == url and block.artifact is None, why
    assert store.artifact_count() == 0


def test_a_log_written_with_an_inline_voice_note_reads_verifies_and_builds_as_before(
        store: EventStore) -> None:
    """As an older release wrote it (the clip inline in the event, chained): read back byte for
    byte, verified, and sent from its URL."""
    store.append("r1", [UserInput("Here is a voice note.")])
    old = UserInput(content=(DocumentBlock(url=f"data:audio/wav;base64,{B64}", media_type="audio/wav",
                                           duration_ms=1_500),))
    _write_raw(store, "r1", "user_input@1", canonical_json(old))
    records = store.read("r1")
    assert records[1].event == old and canonical_json(records[1].event) == canonical_json(old)
    assert records[1].hash == chain_hash("r1", 2, records[0].hash, canonical_json(old))
    assert store.verify("r1").ok and store.artifact_count() == 0
    cfg = BuildConfig(provider="openai-chat", model="gpt-4o-audio-preview", window=100_000, reserve=2_000)
    built = build_context(fold(records), cfg, render=render_request, load_bytes=store.artifact)
    assert {"type": "input_audio", "input_audio": {"data": B64, "format": "wav"}} in [
        p for m in built.request["messages"] if isinstance(m["content"], list) for p in m["content"]]
