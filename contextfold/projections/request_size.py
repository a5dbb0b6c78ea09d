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

from collections.abc import Callable, Mapping
from typing import Any

from contextfold.domain.conversation import Conversation
from contextfold.projections.media_cost import media_family
from contextfold.projections.media_finish import MediaFinish
from contextfold.projections.media_limits import REQUEST_LIMITS
from contextfold.projections.request_json import canonical_bytes

__all__ = ["Attempt", "measured", "sent_text_bytes", "within_request_size"]

Attempt = tuple[MediaFinish, Conversation, dict[str, Any]]
"""One try of a build's end: its media finalized for a text size, the conversation, the request."""


def _walk(body: Any, payloads: Mapping[int, str]) -> tuple[int, int]:
    """(the characters of ``body``'s strings that are media payloads, the body's separators).

    Payloads: the very ``payloads`` strings, by identity (the renderers put a part's
    ``data_base64`` into the body as it is, and a text that happens to equal one is text); base64
    is ASCII without escapes, so its characters are its bytes in every serialisation. Separators:
    the ``,`` and ``:`` between members and items, each of which ``json.dumps`` follows with a
    space. One walk of a long run's body (~6,600 values) is ~0.6 ms."""
    chars = separators = 0
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str:
            payload = payloads.get(id(node))
            if payload is node:
                chars += len(payload)
        elif kind is dict and node:
            separators += 2 * len(node) - 1
            stack.extend(node.values())
        elif (kind is list or kind is tuple) and node:
            separators += len(node) - 1
            stack.extend(node)
    return chars, separators


_UTF8_LEADS = bytes.maketrans(bytes(range(0xC0, 0xF8)), bytes([2] * 32 + [3] * 16 + [4] * 8))
"""A UTF-8 lead byte -> its sequence's length (2, 3, 4); a byte below 5 otherwise keeps its value
(an ASCII control character, never in canonical JSON: it is escaped)."""


def _escape_growth(data: bytes) -> int:
    """What ``ensure_ascii`` adds to the UTF-8 JSON ``data``: a ``\\uXXXX`` (6 bytes) for a
    character of 2 or 3 bytes, two (12) for one of 4."""
    if data.isascii():
        return 0
    leads = data.translate(_UTF8_LEADS)
    return 4 * leads.count(2) + 3 * leads.count(3) + 8 * leads.count(4)


def _text_bytes(body: dict[str, Any], data: bytes, provider: str, payloads: Mapping[int, str]) -> int:
    chars, separators = _walk(body, payloads)
    size = len(data)
    if media_family(provider) == "gemini":
        size += separators + _escape_growth(data)
    return size - chars


def measured(body: dict[str, Any], provider: str, payloads: Mapping[int, str]) -> tuple[int, bytes]:
    """(the bytes of ``body`` as ``provider``'s SDK sends it, its media payloads
    (``MediaFinish.payloads``) aside; the body's canonical JSON, which the build hashes).

    Anthropic's is the canonical JSON's length (compact UTF-8: the order of keys aside, the same
    text); Gemini's (``json.dumps``) adds a space after each separator and escapes every
    non-ASCII character."""
    data = canonical_bytes(body)
    return _text_bytes(body, data, provider, payloads), data


def sent_text_bytes(body: dict[str, Any], provider: str, payloads: Mapping[int, str]) -> int:
    """:func:`measured`'s bytes."""
    return measured(body, provider, payloads)[0]


def _at_most(data: bytes, provider: str) -> int:
    """A bound on the bytes of the body whose canonical JSON is ``data`` as ``provider``'s SDK
    sends it, from ``data``'s length: Gemini's adds a space after a ``,`` or ``:`` (one byte)
    and escapes a non-ASCII character (``é``: 2 bytes, 6 escaped), so at most two bytes a byte,
    and one when ``data`` is ASCII. A body of a few screenshots is far below its limit, and this
    tells so without a walk of its values."""
    if media_family(provider) != "gemini":
        return len(data)
    return (2 if data.isascii() else 3) * len(data)


def within_request_size(attempt: Callable[[int], Attempt], guess: int, provider: str,
                        notes_for: Callable[[int], dict[str, str]]) -> tuple[Attempt, bytes | None]:
    """The last of the tries ``attempt(text_bytes)`` needed for the request to keep within its
    provider's size, the first with ``guess``; and the request's canonical JSON when it was
    measured (for the build's hash: a second dump of a long run's body saved).

    ``notes_for(text_bytes)``: the media the whole request's rules leave out for that text
    (``media_plan.request_notes``). A try is taken when they are those it left out for its own
    text as measured (the request is then within the limit, and no medium that fits is left
    out), or, once the guess was corrected, when its measured text is no more than the text it
    was made for (the request is within the limit; a medium left out for those few bytes of
    text is the price of ending). Otherwise the next try is made for the measured text: the guess
    is corrected either way once, then the text tried only grows, so the tries end (each a
    different choice of media, of which there are finitely many).

    Most requests with media are far below their limit: when the whole body is within it by
    :func:`_at_most` and the try left out only what it would for no text at all, the media it
    sends fit beside the text whatever its exact size, so the text is not measured."""
    tried = attempt(guess)
    limits = REQUEST_LIMITS.get(media_family(provider))
    if limits is None or not limits.text_counts or limits.inline_bytes is None:
        return tried, None
    text, corrected = guess, False
    while True:
        finish, _, body = tried
        data = canonical_bytes(body)
        # (nothing left out for a text leaves nothing out for no text: the rules but size's
        # do not read it)
        if _at_most(data, provider) <= limits.inline_bytes and (
                not finish.request_notes or finish.request_notes == notes_for(0)):
            return tried, data
        size = _text_bytes(body, data, provider, finish.payloads)
        if notes_for(size) == finish.request_notes or (corrected and size <= text):
            return tried, data
        text, corrected = size, True
        tried = attempt(text)
