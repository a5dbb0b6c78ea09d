"""The measure of a request's text beside its media (``request_size``) and the tries it takes."""

from __future__ import annotations

import json
from typing import Any

from contextfold.domain.conversation import Conversation
from contextfold.projections.media_plan import MediaFinish
from contextfold.projections.request_size import Attempt, payload_chars, sent_text_bytes, within_request_size

PAYLOAD = "QUJD" * 1000


def _body(text: str, payload: str) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": payload}}]}]}


def test_a_payload_is_found_by_identity_and_a_text_equal_to_it_stays_text() -> None:
    twin = "".join(list(PAYLOAD))  # equal, another object: a text that happens to read the same
    assert twin == PAYLOAD and twin is not PAYLOAD
    body = _body(twin, PAYLOAD)
    assert payload_chars(body, {id(PAYLOAD): PAYLOAD}) == len(PAYLOAD)
    assert payload_chars(body, {}) == 0


def test_the_text_is_measured_as_each_providers_sdk_sends_it() -> None:
    body = _body("中文\x01", PAYLOAD)
    payloads = {id(PAYLOAD): PAYLOAD}
    compact = len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    assert sent_text_bytes(body, "anthropic", payloads) == compact - len(PAYLOAD)
    # google-genai: json.dumps(data), each CJK character a 6-byte escape, ", " and ": "
    assert sent_text_bytes(body, "gemini", payloads) == len(json.dumps(body)) - len(PAYLOAD)
    assert sent_text_bytes(body, "gemini", payloads) - sent_text_bytes(body, "anthropic", payloads) > 6


def _tries(texts: dict[frozenset[str], int], choose: Any, guess: int) -> list[int]:
    """Run ``within_request_size`` over fake tries: a try for ``text_bytes`` leaves out
    ``choose(text_bytes)`` and its body's text is ``texts[that choice]`` bytes long."""
    made: list[int] = []

    def attempt(text_bytes: int) -> Attempt:
        made.append(text_bytes)
        notes = {key: "why" for key in choose(text_bytes)}
        body = {"t": "x" * (texts[frozenset(notes)] - len('{"t":""}'))}
        return MediaFinish(Conversation(), request_notes=notes), Conversation(), body

    within_request_size(attempt, guess, "anthropic",
                        lambda text_bytes: {key: "why" for key in choose(text_bytes)})
    return made


def test_a_right_guess_takes_one_try_and_a_wrong_one_is_corrected() -> None:
    def choose(text: int) -> set[str]:
        return {"a"} if text > 1000 else set()

    texts = {frozenset(): 500, frozenset({"a"}): 600}
    assert _tries(texts, choose, 400) == [400]  # measured 500: the same choice
    assert _tries(texts, choose, 2000) == [2000, 600]  # measured 600 leaves nothing out: tried again
    texts = {frozenset(): 1500, frozenset({"a"}): 1600}
    assert _tries(texts, choose, 400) == [400, 1500]  # measured 1500 leaves "a" out


def test_choices_that_alternate_end_with_a_request_within_the_limit() -> None:
    """Leaving "a" out makes the text shorter than what leaves it out (a note shorter than the
    medium's caption): the choice would flip for ever; the text tried only grows, and the try
    made for more text than it measured is taken."""
    def choose(text: int) -> set[str]:
        return {"a"} if text > 1000 else set()

    texts = {frozenset(): 1100, frozenset({"a"}): 900}
    made = _tries(texts, choose, 100)
    assert made == [100, 1100]  # the second try leaves "a" out for 1100 bytes and measures 900
