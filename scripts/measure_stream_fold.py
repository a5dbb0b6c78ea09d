#!/usr/bin/env python3
"""What ``contextfold.StreamReader`` costs per chunk, beside the official SDK's own accumulator
fed the same chunks, on streams long enough for a per-chunk cost that grows to show.

Why: a runtime feeds every chunk of every response to the reader, on the hot path between the
provider and its UI. The SDKs accumulate too (the stream helpers do, whether or not a final
object is asked for): the ratio says what reading the stream costs beyond what the helper
already pays. Workloads (built by ``tests/stream_events.py``, the same events the tests feed):

- ``openai-chat``: a reply of N text pieces and two parallel calls whose arguments come in N
  pieces each, interleaved, as ``ChatCompletionChunk`` objects; peer ``ChatCompletionStreamState
  .handle_chunk`` (what ``client.chat.completions.stream()`` runs per chunk).
- ``anthropic``: thinking, text and a call's input in N pieces each, as raw event objects
  (``RawMessageStreamEvent``); peer ``accumulate_event`` (``MessageStream``'s per event).
- ``openai-responses``: a message of N text deltas and a call of N argument deltas, as event
  objects; peer ``ResponseStreamState.handle_event`` (``ResponseStream``'s per event).
- ``gemini``: N text chunks then the calls, as ``GenerateContentResponse`` objects; no peer
  (google-genai has no accumulator): the reader's cost alone.

Each figure is the best of ``--repeat`` runs of feeding the whole stream (µs per chunk); the
reader's includes its final ``reply()``, the peer's its final object where it has one. The
chunks are built (validated into SDK objects) before timing, as a client yields them.

Usage: .venv/bin/python scripts/measure_stream_fold.py [--pieces 500,4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextfold
from tests.stream_events import anthropic_events, chat_chunks, gemini_chunks, responses_events
from tests.unit.test_read_response import ANTHROPIC, CHAT, GEMINI, RESPONSES


def _long(provider: str, n: int) -> tuple[dict[str, Any], int]:
    """A response whose text and arguments come in ``n`` pieces of 4 characters each."""
    text = "".join(f"w{i % 10}, " for i in range(n))  # 4 characters a piece
    args = '{"q": "' + "x" * (4 * n - 10) + '"}'
    if provider == "openai-chat":
        body = copy.deepcopy(CHAT)
        body["choices"][0]["message"]["content"] = text
        for call in body["choices"][0]["message"]["tool_calls"]:
            call["function"]["arguments"] = args
        return body, 4
    if provider == "anthropic":
        body = copy.deepcopy(ANTHROPIC)
        body["content"][0]["thinking"] = text
        body["content"][1]["text"] = text
        body["content"][2]["input"] = {"q": "x" * (4 * n - 10)}
        return body, 4
    if provider == "openai-responses":
        body = copy.deepcopy(RESPONSES)
        body["output"][1]["content"][0]["text"] = text
        body["output"][2]["arguments"] = args
        return body, 4
    body = copy.deepcopy(GEMINI)
    body["candidates"][0]["content"]["parts"][0]["text"] = text
    return body, 4


def _sdk_chunks(provider: str, body: dict[str, Any], size: int) -> list[Any]:
    if provider == "openai-chat":
        from openai.types.chat import ChatCompletionChunk

        return [ChatCompletionChunk.model_validate(c) for c in chat_chunks(body, size=size)]
    if provider == "anthropic":
        from anthropic.types import RawMessageStreamEvent
        from pydantic import TypeAdapter

        adapter: Any = TypeAdapter(RawMessageStreamEvent)
        return [adapter.validate_python(e) for e in anthropic_events(body, size=size)]
    if provider == "openai-responses":
        from openai._models import construct_type
        from openai.types.responses import ResponseStreamEvent

        return [construct_type(type_=ResponseStreamEvent, value=e) for e in responses_events(body, size=size)]
    from google.genai.types import GenerateContentResponse

    return [GenerateContentResponse.model_validate(c) for c in gemini_chunks(body, size=size)]


def _peer(provider: str) -> Callable[[list[Any]], Any] | None:
    if provider == "openai-chat":
        from openai.lib.streaming.chat import ChatCompletionStreamState

        def chat(chunks: list[Any]) -> Any:
            state: Any = ChatCompletionStreamState()
            for chunk in chunks:
                state.handle_chunk(chunk)
            return state.get_final_completion()

        return chat
    if provider == "anthropic":
        from anthropic.lib.streaming._messages import accumulate_event

        def messages(events: list[Any]) -> Any:
            snapshot: Any = None
            buffers: dict[int, bytes] = {}
            for event in events:
                snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
            return snapshot

        return messages
    if provider == "openai-responses":
        from openai import omit
        from openai.lib.streaming.responses._responses import ResponseStreamState

        def responses(events: list[Any]) -> Any:
            state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
            for event in events:
                state.handle_event(event)
            return state._completed_response

        return responses
    return None


def _ours(provider: str) -> Callable[[list[Any]], Any]:
    def read(chunks: list[Any]) -> Any:
        reader = contextfold.StreamReader(provider)
        for chunk in chunks:
            reader.add(chunk)
        return reader.reply()

    return read


def _best(fn: Callable[[list[Any]], Any], chunks: list[Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(chunks)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", default="500,4000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    head = ("provider", "pieces", "chunks", "reader µs/chunk", "SDK µs/chunk", "ratio")
    print(f"{head[0]:<17} {head[1]:>6} {head[2]:>7} {head[3]:>16} {head[4]:>13} {head[5]:>6}")
    for provider in contextfold.importers.provider_reply.PROVIDERS:
        for n in (int(p) for p in args.pieces.split(",")):
            body, size = _long(provider, n)
            chunks = _sdk_chunks(provider, body, size)
            ours = _best(_ours(provider), chunks, args.repeat)
            assert _ours(provider)(chunks) == contextfold.read_response(provider, body)
            peer = _peer(provider)
            theirs = _best(peer, chunks, args.repeat) if peer else None
            per = 1e6 / len(chunks)
            print(
                f"{provider:<17} {n:>6} {len(chunks):>7} {ours * per:>16.1f} "
                + (f"{theirs * per:>13.1f} {ours / theirs:>6.2f}" if theirs else f"{'-':>13} {'-':>6}")
            )


if __name__ == "__main__":
    main()
