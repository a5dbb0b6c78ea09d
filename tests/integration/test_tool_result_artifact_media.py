"""A tool result whose own artifact is a medium (a screenshot, a recording, a PDF the tool stored
and cited as ``ToolResult.artifact``) is priced and sent as that medium, as the same medium in a
user message is, never read and shown as text.

Why: the fold counted a tool result's artifact as text whatever its media type, and the build
showed it as text: a 512x512 PNG screenshot was 1,859 tokens of U+FFFD replacement characters in
every provider's request (and a 30 s clip 156,197), where an image in a user message is priced by
its provider's image rule and sent as an image. The artifact is now folded as the tool result's
media block; a text artifact (the store's offload of a long output) is text, as before.
"""

from __future__ import annotations

import base64
import json

import pytest

from contextfold.api import open_store
from contextfold.domain.events import (
    ArtifactRef,
    DocumentBlock,
    ImageBlock,
    ModelResponse,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.fragments import ToolResultBlock
from contextfold.projections.fold import fold
from contextfold.projections.fold_content import IMAGE_TOKENS_DEFAULT, block_tokens
from contextfold.projections.render import validate_sdk_types
from tests.integration.test_stored_media_fold_estimate import _spy_text_reads, _video
from tests.unit.test_fold import Log, call
from tests.unit.test_media import image_bytes

PROVIDERS = [("openai-chat", "gpt-4o"), ("openai-responses", "gpt-4o"), ("anthropic", "claude-sonnet-4-5"),
             ("gemini", "gemini-2.5-flash"), ("neutral", None)]


@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
def test_a_tool_result_s_own_media_artifact_is_priced_and_sent_as_media(
        store_url: str, monkeypatch: pytest.MonkeyPatch, provider: str, model: str | None) -> None:
    png = image_bytes("PNG", (512, 512))
    clip = _video(30, 200_000)
    with open_store(store_url) as store:
        reads = _spy_text_reads(store, monkeypatch)
        shot = store.events.put_artifact(png, "image/png")
        video = store.events.put_artifact(clip, "video/mp4")
        tool_run, user_run = store.run("tool"), store.run("user")
        tool_run.append(UserInput("take a screenshot and record the screen"))
        tool_run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="shot"),
                                                  ToolCall(call_id="c2", name="record"))))
        tool_run.append(ToolResult(call_id="c1", content="", artifact=shot))
        tool_run.append(ToolResult(call_id="c2", content="the recording", artifact=video))
        # the same media in a user message: the price the tool's media must have
        user_run.append(UserInput(content=(ImageBlock(artifact=shot, media_type="image/png"),
                                           DocumentBlock(artifact=video, media_type="video/mp4"))))

        built = tool_run.build(provider, window=400_000, reserve=1_000, model=model, record=False)
        as_user = user_run.build(provider, window=400_000, reserve=1_000, model=model, record=False)
        assert reads == []  # no medium read as text, by the fold or the build
        priced = {m.media_type: m.tokens for f in built.manifest.fragments if f.kind == "tool_result"
                  for m in f.media}
        user_priced = {m.media_type: m.tokens for f in as_user.manifest.fragments for m in f.media}
        assert priced == user_priced and set(priced) == {"image/png", "video/mp4"}, (priced, user_priced)
        # the tool results' fragments cost their media and their few words, no text of the bytes
        # (words: a caption, and where the provider takes no video the note in its place, which
        # Chat Completions names twice, in the result and in the user message that follows)
        results = [f for f in built.manifest.fragments if f.kind == "tool_result"]
        assert all(f.tokens < sum(m.tokens for m in f.media) + 200 for f in results), results
        body = json.dumps(built.request)
        assert "\\ufffd" not in body and "\ufffd" not in body
        if provider == "neutral":  # a neutral request cites its media by artifact
            assert shot.hash in body and video.hash in body
        else:
            assert base64.b64encode(png).decode("ascii") in body  # the screenshot, sent as bytes
            assert validate_sdk_types(provider, built.request)


def test_a_log_written_with_the_medium_as_the_result_s_artifact_folds_it_as_media() -> None:
    """A log written before the store moved a tool result's medium to its blocks holds it as the
    result's artifact: the fold reads it as that medium too (its size unknown: the image rule's
    default), never as text, and keeps the result's own words."""
    shot = ArtifactRef(hash="a" * 64, size=40_000, media_type="image/png")
    state = fold(Log().add(UserInput("shoot"), ModelResponse(tool_calls=(call("c1"),)),
                           ToolResult(call_id="c1", content="the screen", artifact=shot)).records)
    answer = next(e for e in state.entries.values() if e.kind == "tool_result")
    block = next(b for b in answer.fragment.content if isinstance(b, ToolResultBlock))
    assert (block.text, block.artifact) == ("the screen", None)
    assert block.blocks == (ImageBlock(artifact=shot, media_type="image/png"),)
    assert block_tokens(state, block.blocks[0]) == IMAGE_TOKENS_DEFAULT
    assert answer.token_count < IMAGE_TOKENS_DEFAULT + 50  # not its 40,000 bytes / 4 as text
