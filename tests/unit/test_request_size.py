"""The measure of a request's text beside its media (``request_size``) and the tries it takes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.domain.conversation import Conversation
from contextfold.projections.media_finish import MediaFinish
from contextfold.projections.request_json import canonical_bytes, remember
from contextfold.projections.request_size import Attempt, measured, sent_text_bytes, within_request_size

PAYLOAD = "QUJD" * 1000


def _body(text: str, payload: str) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": payload}}]},
        remember({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})]}


def test_a_payload_is_found_by_identity_and_a_text_equal_to_it_stays_text() -> None:
    twin = "".join(list(PAYLOAD))  # equal, another object: a text that happens to read the same
    assert twin == PAYLOAD and twin is not PAYLOAD
    body = _body(twin, PAYLOAD)
    size = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    assert sent_text_bytes(body, "anthropic", {id(PAYLOAD): PAYLOAD}) == size - len(PAYLOAD)
    assert sent_text_bytes(body, "anthropic", {}) == size


@pytest.mark.parametrize("text", ["plain", "中文\x01", "\U0001f600 emoji", "é, : \"q\" \\ \u2028", ""])
def test_the_text_is_measured_as_each_providers_sdk_sends_it(text: str) -> None:
    body = _body(text, PAYLOAD)
    body["generationConfig"] = {"temperature": 0.5, "stopSequences": ["a, b", "中"], "empty": {}, "none": []}
    payloads = {id(PAYLOAD): PAYLOAD}
    size, data = measured(body, "anthropic", payloads)
    assert data == canonical_bytes(body)  # what the build hashes
    # Anthropic's SDK: json.dumps(..., ensure_ascii=False, separators=(",", ":")) (openapi_dumps)
    assert size == len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()) - len(PAYLOAD)
    # google-genai: json.dumps(data): each non-ASCII character a \\uXXXX escape (two for an
    # emoji), ", " and ": "
    assert sent_text_bytes(body, "gemini", payloads) == len(json.dumps(body).encode()) - len(PAYLOAD)


LIMIT = 32 * 1024 * 1024
MEDIUM = "A" * (LIMIT - 1000)
"""The base64 of medium "a": beside more than 1,000 bytes of text the request is over Anthropic's limit."""


def _choose(text_bytes: int) -> set[str]:
    return {"a"} if text_bytes + len(MEDIUM) > LIMIT else set()


def _tries(texts: dict[frozenset[str], int], guess: int) -> list[int]:
    """Run ``within_request_size`` over fake tries: a try for ``text_bytes`` leaves medium "a" out
    when it does not fit beside that text, and its body's text is ``texts[what it left out]`` bytes
    (a note in place of a medium is text too)."""
    made: list[int] = []

    def attempt(text_bytes: int) -> Attempt:
        made.append(text_bytes)
        notes = {key: "why" for key in _choose(text_bytes)}
        body: dict[str, Any] = {"t": ""} if notes else {"t": "", "p": MEDIUM}
        pad = texts[frozenset(notes)] - len(canonical_bytes(body)) + (0 if notes else len(MEDIUM))
        body["t"] = "x" * pad
        payloads = {} if notes else {id(MEDIUM): MEDIUM}
        return MediaFinish(Conversation(), request_notes=notes, payloads=payloads), Conversation(), body

    within_request_size(attempt, guess, "anthropic",
                        lambda text_bytes: {key: "why" for key in _choose(text_bytes)})
    return made


def test_a_right_guess_takes_one_try_and_a_wrong_one_is_corrected() -> None:
    texts = {frozenset(): 500, frozenset({"a"}): 600}
    assert _tries(texts, 400) == [400]  # measured 500: "a" fits, as guessed
    assert _tries(texts, 2000) == [2000, 600]  # measured 600 leaves nothing out: tried again
    texts = {frozenset(): 1500, frozenset({"a"}): 1600}
    assert _tries(texts, 400) == [400, 1500]  # measured 1500 leaves "a" out
    assert _tries(texts, 1200) == [1200]


def test_choices_that_alternate_end_with_a_request_within_the_limit() -> None:
    """Leaving "a" out makes the text shorter than what leaves it out (a note shorter than the
    medium's caption): the choice would flip for ever; the text tried only grows, and the try
    made for more text than it measured is taken."""
    texts = {frozenset(): 1100, frozenset({"a"}): 900}
    assert _tries(texts, 100) == [100, 1100]  # the second leaves "a" out for 1,100 bytes, measures 900
