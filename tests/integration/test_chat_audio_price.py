"""What OpenAI Chat audio is priced at: what the request carries, by what OpenAI counts.

An audio model gets ``input_audio``, which OpenAI counts at 1 token per 100 ms of audio
(platform.openai.com/docs/guides/realtime-costs). The log keeps no duration: the price is the
longest the bytes can hold (WAV at 8,000 bytes a second, MP3 at 1,000), and the rule says so.
Any other model gets a note, priced as that note (no media tokens, ``not_attached``). Both had
been priced as a one-page PDF, 3,015 tokens: a 10-minute recording under-counted, a one-line
note over-counted. Built through the store (SQLite), each body checked against the SDK's types.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.events import DocumentBlock, PolicySet, RunStarted, TextBlock, UserInput
from contextfold.domain.manifest import MediaCostRecord
from contextfold.projections.render import validate_sdk_types

WAV_BYTES = 160_000  # 10 s of 16 kHz 16-bit mono; at most 20 s at the least PCM's 8,000 bytes a second
MP3_BYTES = 100_000  # at most 100 s at MP3's lowest bitrate (1,000 bytes a second)
WAV = base64.b64encode(b"RIFF" + bytes(WAV_BYTES - 4)).decode()
MP3 = base64.b64encode(b"ID3" + bytes(MP3_BYTES - 3)).decode()


@pytest.fixture
def run(tmp_path: Path) -> Run:
    store: Store = open_store(f"sqlite:///{tmp_path / 'audio.db'}")
    run = store.run("voice")
    run.append(RunStarted(model="gpt-4o"), PolicySet(text="Answer the user's voice notes."))
    wav = DocumentBlock(url=f"data:audio/wav;base64,{WAV}", media_type="audio/wav")
    mp3 = DocumentBlock(url=f"data:audio/mpeg;base64,{MP3}", media_type="audio/mpeg")
    run.append(UserInput(content=(TextBlock(text="Two recordings:"), wav, mp3)))
    return run


def _build(run: Run, model: str) -> tuple[list[MediaCostRecord], str]:
    built = run.build("openai-chat", model=model, window=50_000, reserve=1_000, record=False)
    assert validate_sdk_types("openai-chat", built.request)
    records = [p for f in built.manifest.fragments for p in f.media]
    return records, json.dumps(built.request, ensure_ascii=False)


def test_audio_sent_to_an_audio_model_is_priced_by_its_longest_duration(run: Run) -> None:
    records, body = _build(run, "gpt-audio")
    assert body.count('"type": "input_audio"') == 2
    wav, mp3 = records
    assert wav.tokens == 200 and mp3.tokens == 1000  # 20 s and 100 s at 10 tokens a second
    for record, fmt, rate in ((wav, "wav", 8000), (mp3, "mp3", 1000)):
        assert record.rule.startswith("openai-audio:10/s, duration not logged")
        assert f"{rate} bytes a second ({fmt})" in record.rule and record.not_attached is None


def test_audio_for_any_other_model_is_priced_as_the_note_it_is_sent_as(run: Run) -> None:
    records, body = _build(run, "gpt-4o")
    assert '"input_audio"' not in body and WAV not in body
    assert [r.tokens for r in records] == [0, 0]
    for record in records:
        assert record.not_attached is not None and "takes no audio" in record.not_attached
        assert record.not_attached in body  # the note priced is the note sent


@pytest.mark.parametrize("models", [("gpt-audio", "my-model"), ("my-model", "gpt-audio")])
def test_one_handle_prices_each_models_form(run: Run, models: tuple[str, str]) -> None:
    """Both names are unknown to the image table (one image rule, one facts table before): the
    audio model's prices must not be reused for the other model, nor back."""
    for model in (*models, *models):
        records, _ = _build(run, model)
        assert [r.tokens for r in records] == ([200, 1000] if model == "gpt-audio" else [0, 0]), model
