"""Audio to OpenAI Chat Completions: an ``input_audio`` part for an audio model, a note otherwise.

Chat Completions takes WAV and MP3 as ``{"type": "input_audio", "input_audio": {"data",
"format"}}`` on its audio models only (gpt-4o-audio-preview, gpt-audio ...) and refuses the whole
request of any other model that carries one. An earlier change sent it to every model, and the
rendered messages are kept across builds per message object: the model decides the form, so it
must decide which kept render a build reuses. One ``Run`` handle builds the same run for gpt-4o
and for gpt-4o-audio-preview in both orders, through the store (SQLite); each body is checked
against the openai SDK's request types.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.events import (
    DocumentBlock,
    ModelResponse,
    PolicySet,
    RunStarted,
    TextBlock,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.model_family import chat_audio_model
from contextfold.projections.render import validate_sdk_types

WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00voice note").decode()
MP3 = base64.b64encode(b"ID3\x04\x00\x00\x00\x00\x00\x23TSSE tool recording").decode()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'audio.db'}")


def _run(store: Store, run_id: str) -> Run:
    """A voice note from the user, and a recording a tool returned (media Chat Completions
    carries in the user message after the tool messages)."""
    run = store.run(run_id)
    run.append(RunStarted(model="gpt-4o"), PolicySet(text="Answer the user's voice notes."))
    run.append(UserInput(content=(TextBlock(text="Here is my voice note:"),
                                  DocumentBlock(url=f"data:audio/wav;base64,{WAV}", media_type="audio/wav"))))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="record", arguments="{}"),)))
    recording = DocumentBlock(url=f"data:audio/mpeg;base64,{MP3}", media_type="audio/mpeg")
    run.append(ToolResult(call_id="c1", content="recorded 2 s", blocks=(recording,)))
    run.append(UserInput("What did both say?"))
    return run


def _audio_parts(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for m in request["messages"] if isinstance(m["content"], list) for p in m["content"]
            if p["type"] == "input_audio"]


def _build(run: Run, model: str) -> dict[str, Any]:
    built = run.build("openai-chat", model=model, window=20_000, reserve=1_000, record=False)
    assert built.request["model"] == model
    assert validate_sdk_types("openai-chat", built.request)
    return built.request


def _sent(request: dict[str, Any]) -> None:
    assert _audio_parts(request) == [{"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
                                     {"type": "input_audio", "input_audio": {"data": MP3, "format": "mp3"}}]
    assert "not attached" not in json.dumps(request)


def _noted(request: dict[str, Any]) -> None:
    assert _audio_parts(request) == []
    text = json.dumps(request)
    assert WAV not in text and MP3 not in text
    assert text.count("takes no audio") == 2 and "audio/wav" in text and "audio/mpeg" in text


@pytest.mark.parametrize("models", [("gpt-4o", "gpt-4o-audio-preview"), ("gpt-4o-audio-preview", "gpt-4o")])
def test_one_handle_sends_audio_to_the_audio_model_only_in_either_order(store: Store,
                                                                        models: tuple[str, str]) -> None:
    run = _run(store, "voice")
    for model in (*models, *models):  # and back again: each build gets its model's form
        request = _build(run, model)
        (_sent if chat_audio_model(model) else _noted)(request)


def test_every_audio_model_name_and_only_those() -> None:
    for name in ("gpt-4o-audio-preview", "gpt-4o-audio-preview-2024-12-17", "gpt-4o-mini-audio-preview",
                 "gpt-4o-mini-audio-preview-2024-12-17", "gpt-audio", "gpt-audio-2025-08-28",
                 "gpt-audio-mini", "gpt-audio-mini-2025-10-06", "openai/gpt-4o-audio-preview", "GPT-Audio"):
        assert chat_audio_model(name), name
    assert not chat_audio_model(None)
    for name in ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-5", "gpt-4o-realtime-preview",
                 "gpt-4o-transcribe", "gpt-4o-mini-tts", "gpt-realtime", "claude-sonnet-4-5", "gpt-audio-x"):
        assert not chat_audio_model(name), name


def test_audio_by_remote_url_is_a_note_for_an_audio_model_too(store: Store) -> None:
    """``input_audio`` takes base64 only, not a URL."""
    run = store.run("remote")
    run.append(UserInput(content=(TextBlock(text="listen"),
                                  DocumentBlock(url="https://x.test/a.mp3", media_type="audio/mpeg"))))
    request = _build(run, "gpt-audio")
    assert _audio_parts(request) == [] and "this API takes audio inline only" in json.dumps(request)
