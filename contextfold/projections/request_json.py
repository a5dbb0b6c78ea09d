"""Request JSON and its canonical hash, assembled from per-message pieces kept across builds.

Why: a long run's request holds thousands of messages, and an agent loop
builds one after every step. Dumping every message model to JSON and
re-serialising the whole body to hash it cost more than the selection itself.
A message model is immutable, and the layout reuses the same message objects
from build to build for unchanged items, so its JSON form and its canonical
JSON text are computed once and reused while the object lives.

The canonical JSON (``json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``) is compositional: a list is ``[`` + its items' texts
joined by ``,`` + ``]``, an object its sorted ``"key":value`` pairs. So
:func:`canonical_bytes` of a body whose message dicts are remembered equals the
UTF-8 of the text ``json.dumps`` gives, byte for byte (tested), at the cost of
the new messages only.

The pieces are kept as UTF-8 bytes, not str: a body is hashed (and sent) as bytes,
and one non-ASCII character anywhere makes encoding a whole str slow (0.65 ms for
440 KB here, against 0.02 ms for ASCII), where joining kept bytes is a copy.

Memo entries hold the object they describe (so an ``id`` is never reused
while its entry lives); a memo is emptied when it grows past its bound.

Callers never hold the remembered dicts: ``render`` and ``BuildResult.request``
hand out deep copies (:func:`hand_out`), so editing a request in place (adding a
``cache_control`` to a content part, say) cannot leak into later builds.
"""

from __future__ import annotations

import json
import marshal
import operator
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import blake3
from pydantic import BaseModel, TypeAdapter

from contextfold.domain import trusted
from contextfold.domain.canonical import (
    canonical_object,
    canonical_utf8,
    canonical_utf8_no_float,
    orjson_writes_the_same,
    quote,
)
from contextfold.domain.conversation import Conversation
from contextfold.domain.float_members import float_members
from contextfold.domain.manifest import ContextManifest, ExcludedFragment, ManifestFragment
from contextfold.projections.memo_budget import memo_share
from contextfold.projections.message_json import message_json

__all__ = [
    "all_remembered",
    "bytes_hash",
    "canonical_body",
    "canonical_bytes",
    "canonical_hash",
    "canonical_size",
    "canonical_text",
    "conversation_json",
    "hand_out",
    "is_remembered",
    "manifest_json",
    "misses",
    "model_json_all",
    "on_clear",
    "remember",
    "rendered",
    "rendered_all",
]

_HELD_PER_TEXT_BYTE = 3
_HELD_PER_ENTRY = 1536
"""What the memos here hold for a dict kept with its JSON text, estimated from that text: the text
itself, the dict's strings (as long), and the objects around it (the dict, the message or
manifest line it was made from, their entries in ``_RENDERED`` and ``_LINES``, ~1.5 KB: a
tau-bench run's memos held ~5.5 bytes per byte of their JSON text, ~2.8 KB per dict)."""
_HELD_LIMIT = 0
"""The memos' share of the process-wide memo ceiling (:mod:`.memo_budget`): it was 64 MB of JSON
text and 100,000 entries, which held ~350 MB."""
_LIMIT = 100_000
_TEXT_BYTES_LIMIT = 64 * 1024 * 1024
"""Past this much kept JSON text or ``_LIMIT`` entries every memo here starts over: a long-lived
process serving many runs must not grow without bound. Set by ``_bound`` so that neither the
texts nor the entries can hold more than half of ``_HELD_LIMIT`` (``_HELD_PER_TEXT_BYTE`` a byte
of text, ``_HELD_PER_ENTRY`` an entry): the check is the one it was, two compares a new dict."""
_text_bytes = 0
_TEXTS: dict[int, tuple[object, bytes]] = {}
"""id(dict) -> (the dict, its canonical JSON as UTF-8), for dicts handed out by this module."""
_RENDERED: dict[str, dict[int, tuple[object, list[dict[str, Any]]]]] = {}
"""provider -> id(message) -> (the message, its rendered dicts)."""
_LINES: dict[int, tuple[object, dict[str, Any], bytes]] = {}
"""id(manifest line) -> (the line, its JSON dict, that dict's canonical JSON as UTF-8)."""
_ON_CLEAR: list[Callable[[], None]] = []
"""Other modules' memos of remembered dicts, emptied with these (``on_clear``)."""


def on_clear(hook: Callable[[], None]) -> None:
    """Call ``hook`` whenever the memos here start over (a memo holding remembered dicts)."""
    _ON_CLEAR.append(hook)


def _clear() -> None:
    global _text_bytes
    _TEXTS.clear()
    _RENDERED.clear()
    _LINES.clear()
    _text_bytes = 0
    for hook in _ON_CLEAR:
        hook()


def _bound(limit: int) -> None:
    """The memos' share of the memo ceiling (again when it changes): emptied if they hold more."""
    global _HELD_LIMIT, _LIMIT, _TEXT_BYTES_LIMIT
    _HELD_LIMIT = limit
    _LIMIT = min(100_000, limit // (2 * _HELD_PER_ENTRY))
    _TEXT_BYTES_LIMIT = limit // (2 * _HELD_PER_TEXT_BYTE)
    if len(_TEXTS) > _LIMIT or _text_bytes > _TEXT_BYTES_LIMIT:
        _clear()


_bound(memo_share("request_json", _bound))


def remember(obj: dict[str, Any]) -> dict[str, Any]:
    """Register ``obj`` (never to be mutated again) so :func:`canonical_bytes` reuses its text."""
    _remember(obj)
    return obj


def _remember(obj: dict[str, Any], data: bytes | None = None) -> bytes:
    """:func:`remember`, returning its JSON (another thread may empty the memo at any time);
    ``data``, when given, is that JSON already."""
    global _text_bytes
    if len(_TEXTS) >= _LIMIT or _text_bytes >= _TEXT_BYTES_LIMIT:
        _clear()
    if data is None:
        data = canonical_utf8(obj)
    _TEXTS[id(obj)] = (obj, data)
    _text_bytes += len(data)
    return data


def is_remembered(obj: object) -> bool:
    """Whether ``obj`` is a dict this module handed out as immutable (its text is kept)."""
    hit = _TEXTS.get(id(obj))
    return hit is not None and hit[0] is obj


def all_remembered(items: Sequence[object]) -> bool:
    """Whether every item of ``items`` is a dict handed out as immutable (looked up in C)."""
    got: list[Any] = list(map(_TEXTS.get, map(id, items)))
    return None not in got and all(map(operator.is_, map(itemgetter(0), got), items))


def misses(got: list[Any], missing: object = None) -> Iterator[int]:
    """Indices of the ``missing`` (``None``) entries of ``got``: C-level scans between them."""
    i = -1
    while True:
        try:
            i = got.index(missing, i + 1)
        except ValueError:
            return
        yield i


def _bytes(obj: Any) -> bytes:
    out: list[bytes] = []
    _parts(obj, out)
    return out[0] if len(out) == 1 else b"".join(out)


def _parts(obj: Any, out: list[bytes]) -> None:
    """Append the canonical JSON of ``obj`` to ``out``, in pieces joined once by the caller: a
    long run's body is ~440 KB, and joining its messages array first, then the object around it,
    copied it twice. Exact types, not ``isinstance``: a body is plain JSON data, and a subclass
    goes to ``canonical_utf8``, which writes it the same (a short run's body has a handful of
    members, and the checks were a tenth of its canonical bytes)."""
    t = type(obj)
    if t is dict:
        _dict_parts(obj, out, None)
        return
    if t is list or t is tuple:
        _list_parts(obj, out)
        return
    out.append(canonical_utf8(obj))


def _dict_parts(obj: dict[str, Any], out: list[bytes], remembered: set[str] | None) -> None:
    """Append the canonical JSON of the dict ``obj`` to ``out``; with ``remembered``, add to it
    each key whose value is a list of remembered dicts only."""
    if not obj:
        out.append(b"{}")
        return
    sep = b"{"
    append = out.append
    for key in sorted(obj):
        append(sep)
        append(_KEYS.get(key) or _key_bytes(key))
        value = obj[key]
        if remembered is not None and type(value) is list:
            if _list_parts(value, out):
                remembered.add(key)
        else:
            _parts(value, out)
        sep = b","
    append(b"}")


def _list_parts(obj: list[Any] | tuple[Any, ...], out: list[bytes]) -> bool:
    """Append the canonical JSON of the list ``obj`` to ``out``; whether every item was a
    remembered dict (as :func:`all_remembered`, from the same lookups)."""
    # Memo entries hold their object, so a hit by id is that very object. A long run's
    # body has ~1,000 remembered messages: look them all up in C, dump only the others.
    got: list[Any] = list(map(_TEXTS.get, map(id, obj)))
    missed = got.count(None)
    if missed == len(got):  # nothing remembered (a short list of scalars, say)
        out.append(canonical_utf8(obj))
        return not got
    for i in misses(got):
        got[i] = (obj[i], canonical_utf8(obj[i]))
    _array_parts(list(map(itemgetter(1), got)), out)
    return not missed


_KEYS: dict[str, bytes] = {}
"""A body member's key -> its ``"key":`` as UTF-8 (a body's keys are a few field names)."""


def _key_bytes(key: str) -> bytes:
    if len(_KEYS) >= 4096:
        _KEYS.clear()
    data = _KEYS[key] = quote(key).encode() + b":"  # a non-str key fails in quote, as json's would
    return data


def _array_parts(texts: list[bytes], out: list[bytes]) -> None:
    """Append the JSON array of the items' canonical ``texts`` to ``out``, in pieces."""
    if not texts:
        out.append(b"[]")
        return
    out.append(b"[")
    out += chain.from_iterable(zip(texts, repeat(b",")))
    out[-1] = b"]"


def _array(texts: list[bytes]) -> bytes:
    """The JSON array of the items' canonical ``texts``, in one join."""
    parts: list[bytes] = []
    _array_parts(texts, parts)
    return b"".join(parts)


def canonical_bytes(obj: Any) -> bytes:
    """``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()``.

    Remembered dicts are reused where a body keeps them: as items of a list held by a
    top-level key (``messages``, ``input``, ``contents``); anything else is dumped in C.
    Keys must be strings (JSON bodies)."""
    return _bytes(obj)


_SCALARS = (str, int, bool, type(None))
"""Member types whose equality means equal JSON (no float: ``-0.0 == 0.0`` is written apart)."""


def canonical_body(request: dict[str, Any], last: tuple[Any, ...] | None
                   ) -> tuple[bytes, str, tuple[Any, ...] | None]:
    """:func:`canonical_bytes` of a request body and its :func:`bytes_hash`, with what tells the
    next call whether its body is this one again (pass it back as ``last``).

    Why: a build with nothing new (a rebuild, or a retry) makes a body of the same remembered
    dicts as the last one, and joining and hashing its ~450 KB cost ~0.3 ms on a long run. The
    body is taken again when every member is the same: each list holds the very same remembered
    dicts (immutable: their text is the same), each other member is an equal str, int, bool or
    None of the same type. A body with any other member is never taken again."""
    if last is not None and last[0] == len(request):
        for key, value in last[1]:
            got = request.get(key, last)
            if type(value) is tuple:
                if (type(got) is not list or len(got) != len(value)
                        or not all(map(operator.is_, got, value))):
                    break
            elif type(got) is not type(value) or got != value:
                break
        else:
            return last[2], last[3], last
    # The body's own walk, noting which lists were all remembered dicts: the lookups that
    # gather their texts answer that (a second pass over a long run's ~230 cold entries
    # was ~0.09 ms).
    parts: list[bytes] = []
    remembered: set[str] = set()
    _dict_parts(request, parts, remembered)
    body = parts[0] if len(parts) == 1 else b"".join(parts)
    digest = bytes_hash(body)
    members = []
    for key, value in request.items():
        if type(value) is list and key in remembered:
            members.append((key, tuple(value)))  # a copy: the caller's list may change
        elif type(value) in _SCALARS:
            members.append((key, value))
        else:
            return body, digest, None
    return body, digest, (len(request), tuple(members), body, digest)


def canonical_size(obj: Any) -> int:
    """``len(canonical_bytes(obj))``, from its pieces: nothing is joined (a request with 30 MB of
    inline media is measured for its size limit, ``request_size``)."""
    out: list[bytes] = []
    _parts(obj, out)
    return sum(map(len, out))


def canonical_text(obj: Any) -> str:
    """:func:`canonical_bytes` as text."""
    return _bytes(obj).decode()


def canonical_hash(obj: Any) -> str:
    """blake3 of :func:`canonical_bytes`."""
    return bytes_hash(_bytes(obj))


def bytes_hash(data: bytes) -> str:
    """The hash of canonical bytes: for a caller that keeps the bytes too (a request body)."""
    return blake3.blake3(data).hexdigest()


def _dump(message: BaseModel) -> list[dict[str, Any]]:
    """``[message.model_dump(mode="json")]``, remembered. Its text is written by orjson without
    walking the members its model's schema says hold no float (``domain.float_members``): a
    validated instance, or one :func:`~contextfold.domain.trusted.trusted` made from values of
    its fields' types. The suite (``trusted.CHECKED``) checks each such text against the walked
    one, so a builder path that put a value of another type in a message fails there."""
    obj = message_json(message)  # the usual messages, written field by field (``message_json``)
    if obj is None:
        obj = message.model_dump(mode="json")
    elif trusted.CHECKED and json.dumps(obj) != json.dumps(message.model_dump(mode="json")):  # in order
        raise AssertionError(f"{type(message).__name__}: its JSON written apart is not model_dump's")
    floats = float_members(type(message))
    if floats is not None:
        for key in floats:
            value = obj.get(key)
            if value is not None and not orjson_writes_the_same(value):
                break
        else:
            data = canonical_utf8_no_float(obj)
            if trusted.CHECKED and data != canonical_utf8(obj):
                raise AssertionError(f"{type(message).__name__}: a value its schema does not allow")
            _remember(obj, data)
            return [obj]
    _remember(obj)
    return [obj]


def model_json_all(models: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """``[m.model_dump(mode="json") for m in models]``, each dict made once per model object and
    remembered (read-only: :func:`canonical_bytes` reuses its text)."""
    return rendered_all("json", models, _dump, remembered=True)


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    """``conversation.model_dump(mode="json")``, each message's JSON computed once per message object."""
    return {"model": conversation.model, "system": model_json_all(conversation.system),
            "tools": model_json_all(conversation.tools),
            "messages": model_json_all(conversation.messages),
            "stable_prefix_messages": conversation.stable_prefix_messages}


_LINE_ADAPTERS: dict[str, TypeAdapter[list[Any]]] = {
    "fragments": TypeAdapter(list[ManifestFragment]), "excluded_items": TypeAdapter(list[ExcludedFragment])}
"""The manifest's line lists, each with the serializer of its lines."""


def manifest_json(manifest: ContextManifest) -> tuple[dict[str, Any], bytes]:
    """``manifest.model_dump(mode="json")`` and its canonical JSON text, each line's dict and
    text made once per line object.

    Why: the builder keeps a manifest line object while the line is unchanged, and a long
    run's manifest has ~10,000 lines (most of them excluded ones), so its record dumped ~2 MB
    of JSON per turn, mostly the same. The line dicts are remembered (read-only, shared by the
    records of later turns), so the text is their kept texts joined."""
    top = manifest.model_dump(mode="json", exclude=set(_LINE_ADAPTERS))
    members = {key: canonical_utf8(value) for key, value in top.items()}  # fresh: nothing remembered
    for key, adapter in _LINE_ADAPTERS.items():
        lines = getattr(manifest, key)
        got: list[Any] = list(map(_LINES.get, map(id, lines)))  # in C: ~10,000 per record
        new = list(misses(got))
        # the new lines in one serializer call (a short run's lines are mostly new each turn)
        for i, line in zip(new, adapter.dump_python([lines[i] for i in new], mode="json"), strict=True):
            got[i] = _LINES[id(lines[i])] = (lines[i], line, _remember(line))
        top[key] = list(map(itemgetter(1), got))
        members[key] = _array(list(map(itemgetter(2), got)))
    out = {key: top[key] for key in type(manifest).model_fields}  # the model's field order
    return out, canonical_object(members)


def rendered(provider: str, message: object,
             render: Callable[[Any], Sequence[dict[str, Any]]], remembered: bool = False
             ) -> list[dict[str, Any]]:
    """``render(message)`` for ``provider``, computed once per message object (a model, or a
    tuple of models); the dicts are remembered (see :func:`remember`; by ``render`` itself when
    ``remembered``). ``render`` must depend on the message alone."""
    memo = _RENDERED.setdefault(provider, {})
    hit = memo.get(id(message))
    if hit is not None:  # the entry holds its message: a hit by id is that very object
        return hit[1]
    out = list(render(message)) if remembered else [remember(d) for d in render(message)]
    _RENDERED.setdefault(provider, {})[id(message)] = (message, out)  # remember() may have cleared
    return out


def rendered_all(provider: str, messages: Sequence[object],
                 render: Callable[[Any], Sequence[dict[str, Any]]], remembered: bool = False
                 ) -> list[dict[str, Any]]:
    """The concatenated :func:`rendered` dicts of ``messages``: the kept ones gathered in C."""
    got: list[Any] = list(map(_RENDERED.setdefault(provider, {}).get, map(id, messages)))
    for i in misses(got):
        got[i] = (None, rendered(provider, messages[i], render, remembered))
    return list(chain.from_iterable(map(itemgetter(1), got)))


def hand_out(body: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``body`` for a caller to keep or edit: the remembered dicts (and what they
    hold) are reused by later builds, so no edit of the caller's may reach them. A marshal round
    trip: the body is plain JSON data of our own (dicts, lists, str, int, float, bool, None),
    copied in-process only, and marshal is the fastest deep copy of it in the standard library
    (0.53 ms for a 380 KB body here, pickle 0.79 ms, json 3.1 ms)."""
    out: dict[str, Any] = marshal.loads(marshal.dumps(body))
    return out
