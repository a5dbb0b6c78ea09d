"""A request's bytes against its provider's limit on the whole request, measured as sent.

Why a module of its own: Anthropic refuses a request over 32 MB, Gemini one over 20 MB, its text
and its inline media's base64 together (``media_limits.REQUEST_LIMITS``). The media past the
limit, the oldest first, become notes (``media_plan.request_notes``), and what they may take is
what the text leaves. The text's bytes were reckoned at 4 a selected token, which is wrong both
ways: indented code is ~50 bytes a token, an escaped control character 6, and Gemini's SDK sends
every non-ASCII character as a ``\\uXXXX`` escape (CJK: ~6 bytes a token), so a request the API
refuses went out; random CJK text is ~1.3 bytes a token as Anthropic's SDK sends it (UTF-8), so a
medium that fitted was left out.

Now the request is rendered and its text measured as its provider's SDK serialises it, the media
payloads aside (:func:`sent_text_bytes`):

- Anthropic: ``json.dumps(body, ensure_ascii=False, separators=(",", ":"))`` (the SDK's
  ``openapi_dumps``), the length of the canonical JSON the build hashes anyway;
- Gemini: ``json.dumps(body)`` (google-genai's ``_api_client``: ASCII escapes, ``", "`` and
  ``": "``).

When the media left out for the measured text are not those left out for the guess, the media are
finalized and the request rendered again (:func:`within_request_size`). A build without media, or
for OpenAI (whose limits count media only), does none of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from contextfold.domain.conversation import Conversation
from contextfold.projections.media_cost import media_family
from contextfold.projections.media_limits import REQUEST_LIMITS
from contextfold.projections.media_plan import MediaFinish
from contextfold.projections.request_json import canonical_size

__all__ = ["Attempt", "payload_chars", "sent_text_bytes", "within_request_size"]

Attempt = tuple[MediaFinish, Conversation, dict[str, Any]]
"""One try of a build's end: its media finalized for a text size, the conversation, the request."""


def payload_chars(body: Any, payloads: Mapping[int, str]) -> int:
    """The characters of ``body``'s strings that are media payloads: the very ``payloads`` strings
    (by identity: the renderers put a part's ``data_base64`` into the body as it is, and a text
    that happens to equal one is text). Base64 is ASCII without escapes, so its characters are its
    bytes in every serialisation."""
    if not payloads:
        return 0
    total = 0
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str:
            payload = payloads.get(id(node))
            if payload is node:
                total += len(payload)
        elif kind is dict:
            stack.extend(node.values())
        elif kind is list or kind is tuple:
            stack.extend(node)
    return total


def sent_text_bytes(body: dict[str, Any], provider: str, payloads: Mapping[int, str]) -> int:
    """The bytes of ``body`` as ``provider``'s SDK sends it (module docstring), its media
    payloads (``MediaFinish.payloads``) aside."""
    size = len(json.dumps(body)) if media_family(provider) == "gemini" else canonical_size(body)
    return size - payload_chars(body, payloads)


def within_request_size(attempt: Callable[[int], Attempt], guess: int, provider: str,
                        notes_for: Callable[[int], dict[str, str]]) -> Attempt:
    """The last of the tries ``attempt(text_bytes)`` needed for the request to keep within its
    provider's size, the first with ``guess``.

    ``notes_for(text_bytes)``: the media the whole request's rules leave out for that text
    (``media_plan.request_notes``). A try is taken when they are those it left out for its own
    text as measured (the request is then within the limit, and no medium that fits is left
    out), or, once the guess was corrected, when its measured text is no more than the text it
    was made for (the request is within the limit; a medium left out for those few bytes of
    text is the price of ending). Otherwise the next try is made for the measured text: the guess is
    corrected either way once, then the text tried only grows, so the tries end (each a
    different choice of media, of which there are finitely many)."""
    tried = attempt(guess)
    limits = REQUEST_LIMITS.get(media_family(provider))
    if limits is None or not limits.text_counts:
        return tried
    text, corrected = guess, False
    while True:
        finish, _, body = tried
        measured = sent_text_bytes(body, provider, finish.payloads)
        if notes_for(measured) == finish.request_notes or (corrected and measured <= text):
            return tried
        text, corrected = measured, True
        tried = attempt(text)
