"""Check a rendered request before anyone sends it.

Two layers, both raising :class:`RenderError` that names the offending message:

1. **Protocol rules** the providers enforce at request time but no type
   expresses (:mod:`.protocol`, re-exported here): every tool call answered
   exactly once and right after it, role alternation, ``tool_result`` placement,
   tools declared for every tool name used in history, at most four Anthropic
   cache breakpoints. These run on the rendered *body* (not on the Conversation),
   so they also hold for a body that was edited or imported.
2. **SDK request types** from the official packages (``openai``,
   ``anthropic``, ``google-genai``; the ``validate`` extra). The SDKs are
   imported lazily here, never at module import, and never needed at run time:
   when a package is missing, or older than the release the ``validate`` extra
   names (:data:`SDK_FLOORS`), this layer is skipped and
   :func:`validate_sdk_types` returns ``False`` so callers (and tests) can tell
   whether it really ran; the first skip for a provider in a process is a
   :class:`SdkCheckSkippedWarning` saying why (:func:`sdk_check_skipped`). A caller that hands
   out no body turns this layer off (:mod:`contextfold.projections.sdk_check`): the command line
   does for a command that shows a manifest, a table, a summary or a verdict.

The OpenAI and Anthropic request types are TypedDicts. Pydantic validates their
``Iterable[...]`` fields lazily (a ``ValidatorIterator``), and TypedDicts ignore
unknown keys, so a plain ``TypeAdapter.validate_python`` proves little. We
therefore validate with a strict, eager copy of the type's core schema
(:mod:`.strict_schema`): unknown keys forbidden, iterables validated as lists,
unions told apart by their ``type``/``role`` tag; one pass in pydantic-core.
Gemini's types are pydantic models with ``extra="forbid"`` and camelCase
aliases, so they validate the REST body directly, field by field (``model`` is
in the URL, not the body).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import operator
import re
import warnings
from collections.abc import Mapping
from typing import Any, TypeAlias

from pydantic import ValidationError

from contextfold.domain.errors import RenderError
from contextfold.domain.fork_locks import fork_safe_rlock
from contextfold.projections.render.protocol import (
    PROVIDERS,
    Provider,
    check_protocol,
    check_protocol_noting,
    parse_provider,
)
from contextfold.projections.render.strict_schema import TAG_MARK, strict_core_schema
from contextfold.projections.request_json import (
    all_remembered,
    canonical_text,
    is_remembered,
    misses,
    on_clear,
)
from contextfold.projections.sdk_check import sdk_types_checked

__all__ = [
    "PROVIDERS",
    "SDK_FLOORS",
    "SDK_PACKAGES",
    "Provider",
    "SdkCheckSkippedWarning",
    "check_protocol",
    "parse_provider",
    "sdk_available",
    "sdk_check_skipped",
    "validate_request",
    "validate_sdk_types",
]

SDK_PACKAGES: dict[str, str] = {
    "openai-chat": "openai",
    "openai-responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google.genai",
}

SDK_FLOORS: dict[str, tuple[str, str]] = {
    "openai-chat": ("openai", "2.0"),
    "openai-responses": ("openai", "2.0"),
    "anthropic": ("anthropic", "0.124"),
    "gemini": ("google-genai", "1.21"),
}
"""provider -> (distribution, lowest release) of the SDK whose request types accept every body the
renderers emit: the ``validate`` extra's floors (a test holds them equal to pyproject.toml, which
says why each). Why here too: an application may pin an older SDK and install contextfold without
the extra; that SDK imports, but its types refuse valid requests (anthropic 0.40 does not know
``cache_control``: ``contextfold demo`` exited 2). Such an SDK counts as absent: its check is
skipped, as when none is installed."""

_Path: TypeAlias = tuple[str | int, ...]

# ------------------------------------------------------------------ SDK types


_SDK_FOUND: dict[str, bool] = {}
"""provider -> whether its SDK was found recent enough, asked once a process. Why both answers:
every validated build asks, and a missing SDK cost a ``find_spec`` (~46 us, a tenth of a first
build) and an old one also a metadata read (~340 us) at every build. An SDK installed while the
process runs is used from the next process."""


_SKIP_REASON: dict[str, str] = {}
"""provider -> why its SDK check is skipped, set with ``_SDK_FOUND``'s answer when it is no."""
_SKIP_WARNED: set[str] = set()
"""Providers whose skipped check this process has warned of (once each, not at every build)."""


class SdkCheckSkippedWarning(UserWarning):
    """A provider's requests are not checked against its official SDK's request types: the SDK
    is not installed, or is older than the ``validate`` extra's floor (:data:`SDK_FLOORS`). Said
    once a process per provider, at its first build's check, with the reason. A warning, not an
    error (``contextfold.errors`` holds those): the request is built as ever and the protocol
    rules are checked; only the SDK types' second look is missing. The command line prints it as
    one ``contextfold: warning:`` line; filter it with :mod:`warnings` like any other."""


_SDK_IMPORTS = fork_safe_rlock()
"""Held while an SDK is looked for or its request types imported. Why: the openai package's
modules import each other in a cycle, and two threads that first imported its chat and its
responses types at once each held a module the other needed: one of two builds started
together, for openai-chat and openai-responses, failed with Python's ``_DeadlockError``."""


def sdk_available(provider: str) -> bool:
    """Whether the official SDK for ``provider`` is importable here and not older than its floor
    (:data:`SDK_FLOORS`): an older one's types refuse what the renderers rightly emit."""
    name = parse_provider(provider)
    known = _SDK_FOUND.get(name)
    if known is not None:
        return known
    with _SDK_IMPORTS:
        try:
            found = importlib.util.find_spec(SDK_PACKAGES[name]) is not None
        except ModuleNotFoundError:
            found = False
    distribution, floor = SDK_FLOORS[name]
    old = _older_than_floor(distribution, floor) if found else None
    if not found:
        _SKIP_REASON[name] = f"{distribution} is not installed"
    elif old is not None:
        _SKIP_REASON[name] = (f"{distribution} {old} is installed, older than {floor}, the first whose types "
                              "accept every request contextfold renders")
    usable = _SDK_FOUND[name] = found and old is None
    return usable


def sdk_check_skipped(provider: str) -> str | None:
    """Why a request for ``provider`` is not checked against its SDK's request types (the SDK
    missing, or older than its floor), or None when it is."""
    name = parse_provider(provider)
    return None if sdk_available(name) else _SKIP_REASON.get(name, "the SDK is not usable here")


def _older_than_floor(distribution: str, floor: str) -> str | None:
    """The installed ``distribution``'s version when it is below ``floor``, else None. A package
    importable without metadata (vendored, bundled) is trusted, as before versions were checked."""
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    return None if _release_at_least(installed, floor) else installed


_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)(.*)", re.ASCII)


def _release_at_least(version: str, floor: str) -> bool:
    """PEP 440's order for what matters here, without ``packaging`` (not a dependency): release
    numbers compared padded with zeros; a pre- or dev-release of the floor itself is below it
    (``2.0.0rc1`` < ``2.0``), a post-release or local version is not. An unreadable version is
    trusted."""
    got, want = _RELEASE.fullmatch(version), _RELEASE.fullmatch(floor)
    if got is None or want is None:
        return True
    have = [int(x) for x in got.group(1).split(".")]
    need = [int(x) for x in want.group(1).split(".")]
    width = max(len(have), len(need))
    have += [0] * (width - len(have))
    need += [0] * (width - len(need))
    if have != need:
        return have > need
    rest = got.group(2).lower().lstrip(".-_")
    return not re.match(r"(a|b|c|rc|alpha|beta|pre|preview|dev)\d*", rest)


@functools.cache
def _typed_dict_adapter(provider: Provider) -> Any:
    with _SDK_IMPORTS:
        return _import_typed_dict_adapter(provider)


def _import_typed_dict_adapter(provider: Provider) -> Any:
    from pydantic import TypeAdapter

    match provider:
        case "openai-chat":
            from openai.types.chat.completion_create_params import (
                CompletionCreateParamsNonStreaming as Chat,
            )

            return TypeAdapter(Chat)
        case "openai-responses":
            from openai.types.responses.response_create_params import (
                ResponseCreateParamsNonStreaming as Responses,
            )

            return TypeAdapter(Responses)
        case "anthropic":
            from anthropic.types.message_create_params import (
                MessageCreateParamsNonStreaming as Messages,
            )

            return TypeAdapter(Messages)
        case "gemini":
            raise AssertionError("gemini uses pydantic models, not a TypedDict")


@functools.cache
def _strict_validator(provider: Provider) -> Any:
    """The SDK request type's validator made strict and eager (:mod:`.strict_schema`)."""
    from pydantic_core import SchemaValidator

    return SchemaValidator(strict_core_schema(_typed_dict_adapter(provider).core_schema))


class _SdkMismatch(Exception):
    def __init__(self, path: _Path, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.detail = detail


def _body_path(body: Any, loc: tuple[Any, ...]) -> _Path:
    """The path in ``body`` of an error's ``loc``, without the union tags and member labels
    pydantic puts in it: a tag starts with :data:`TAG_MARK`, and a label (``typed-dict[...]``)
    is no key or index of the node it follows."""
    path: list[str | int] = []
    node = body
    for step in loc:
        if isinstance(step, str) and step.startswith(TAG_MARK):
            continue
        if isinstance(node, dict):
            if step in node:
                path.append(step)
                node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            path.append(step)
            node = node[step]
    return tuple(path)


def _mismatch(body: Mapping[str, Any], exc: Any) -> _SdkMismatch:
    """The strict validator's ``exc`` as a mismatch at a path of ``body``. A union's errors come
    one per member: the one that went deepest into the body names the offending node (``input:
    str | list``'s string branch says little)."""
    errors = exc.errors()
    paths = [_body_path(body, tuple(e["loc"])) for e in errors]
    deepest = max(range(len(paths)), key=lambda i: len(paths[i]), default=None)
    path = () if deepest is None else paths[deepest]
    error = {} if deepest is None else errors[deepest]
    unknown = error.get("type") == "extra_forbidden" and path
    message = f"unknown key {path[-1]!r} for the SDK type" if unknown else error.get("msg", "invalid")
    return _SdkMismatch(path, f"{message} ({len(errors)} error(s))", errors)


def _summary(exc: Any) -> str:
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = ".".join(str(x) for x in first.get("loc", ()))
    return f"{len(errors)} error(s), first at {loc or '<root>'}: {first.get('msg', exc)}"


@functools.cache
def _gemini_types() -> Any:
    with _SDK_IMPORTS:
        from google.genai import types
    return types


def _validate_gemini(body: Mapping[str, Any]) -> None:
    from pydantic import BaseModel

    types = _gemini_types()
    fields: dict[str, type[BaseModel]] = {
        "systemInstruction": types.Content,
        "contents": types.Content,
        "tools": types.Tool,
        "generationConfig": types.GenerationConfig,
        "toolConfig": types.ToolConfig,
    }
    for key, value in body.items():
        model = fields.get(key)
        if model is None:
            raise _SdkMismatch((key,), f"unknown key {key!r} for a generateContent body")
        items = value if key in ("contents", "tools") else [value]
        if not isinstance(items, list):
            raise _SdkMismatch((key,), f"{key!r} must be a list")
        for i, item in enumerate(items):
            path: _Path = (key, i) if key in ("contents", "tools") else (key,)
            try:
                model.model_validate(item)
            except ValidationError as exc:
                raise _SdkMismatch(path, _summary(exc), exc.errors()) from exc


def validate_sdk_types(provider: str, body: Mapping[str, Any]) -> bool:
    """Validate ``body`` against the official SDK's request type.

    Returns True when the validation ran and passed, False when the SDK package
    is not installed (nothing was checked). Raises :class:`RenderError` with the
    offending message's index when the body does not match. A body without
    ``model`` is checked as if the caller supplied one (the SDKs require it, and
    callers may pass it to the client separately).
    """
    name = parse_provider(provider)
    if not sdk_available(name):
        if name not in _SKIP_WARNED:  # once a process: a set lookup a build, nothing more
            _SKIP_WARNED.add(name)
            warnings.warn(f"{name} requests are not checked against the official SDK's request types: "
                          f"{_SKIP_REASON.get(name, 'the SDK is not usable here')}; pip install "
                          "'contextfold[validate]' to check them (the protocol rules are checked either way)",
                          SdkCheckSkippedWarning, stacklevel=2)
        return False
    body, kept_index = _unvalidated(name, body)
    header = None
    if all(not body.get(key) for key in (_HISTORY_KEY[name], "tools")):  # nothing new but the rest
        header = canonical_text(body)
        if header in _VALID_HEADERS.setdefault(name, {}):
            return True
    try:
        if name == "gemini":
            _validate_gemini(body)
        else:
            candidate = dict(body)
            candidate.setdefault("model", "model-set-by-caller")
            try:
                _strict_validator(name).validate_python(candidate)
            except ValidationError as exc:
                raise _mismatch(candidate, exc) from exc
    except _SdkMismatch as bad:
        if len(bad.path) > 1 and isinstance(bad.path[1], int) and bad.path[0] in kept_index:
            bad.path = (bad.path[0], kept_index[str(bad.path[0])][bad.path[1]], *bad.path[2:])
        where = ".".join(str(x) for x in bad.path)
        in_history = len(bad.path) > 1 and bad.path[0] in ("messages", "input", "contents")
        index = bad.path[1] if in_history and isinstance(bad.path[1], int) else None
        raise RenderError(provider, f"does not match the SDK request type at {where or '<root>'}: "
                          f"{bad.message}", index=index, detail=bad.detail) from bad
    for key in (_HISTORY_KEY[name], "tools"):
        items = body.get(key)
        for item in items if isinstance(items, list) else ():
            if is_remembered(item):
                _VALIDATED.setdefault(name, {})[id(item)] = item
    if header is not None:
        headers = _VALID_HEADERS[name]
        if len(headers) >= 64:
            headers.clear()
        headers[header] = None
    return True


_HISTORY_KEY: dict[Provider, str] = {"openai-chat": "messages", "openai-responses": "input",
                                     "anthropic": "messages", "gemini": "contents"}
_VALIDATED: dict[str, dict[int, object]] = {}
"""provider -> id -> history item or tool that passed SDK validation. Only items ``request_json``
handed out as immutable are noted, so a later body that reuses one skips re-checking it.
An entry holds its item, so a hit by id is that very item. Emptied whenever
``request_json``'s memos start over."""
on_clear(_VALIDATED.clear)
_VALID_HEADERS: dict[str, dict[str, None]] = {}
"""provider -> canonical JSON of bodies that passed with every history item and tool already
validated (what is left: model, output limit, options): a rebuild re-checks nothing. The text
tells ``1`` from ``true`` and ``1.0``, so an equal text is an equal value to the validator."""


def _unvalidated(name: Provider, body: Mapping[str, Any]
                 ) -> tuple[Mapping[str, Any], dict[str, list[int]]]:
    """``body`` without the history items and tools already validated, and per list left
    short, the original index of each item kept. The SDK types check each item on its own."""
    out: dict[str, Any] | None = None
    kept: dict[str, list[int]] = {}
    for key in (_HISTORY_KEY[name], "tools"):
        items = body.get(key)
        if not isinstance(items, list):
            continue
        seen = list(map(_VALIDATED.setdefault(name, {}).get, map(id, items)))  # in C: ~1,000 per build
        left = list(misses(seen))
        if len(left) < len(items):
            out = dict(body) if out is None else out
            out[key] = [items[i] for i in left]
            kept[key] = left
    return (body if out is None else out), kept


def validate_request(provider: str, body: Mapping[str, Any]) -> None:
    """Protocol rules, then SDK types when the SDK is installed and the caller did not turn that
    layer off (:func:`contextfold.projections.sdk_check.sdk_types_unchecked`: a command that
    outputs no body). Raises RenderError."""
    name = parse_provider(provider)
    split = _lists_and_rest(name, body)
    if not _checked_before(name, split):
        _note_checked(name, split, check_protocol_noting(name, body))
    if sdk_types_checked():
        validate_sdk_types(name, body)


_LAST_CHECKED: dict[str, tuple[tuple[tuple[object, ...], ...], str]] = {}
"""provider -> the last body that passed the protocol rules and whose history items and tools
were all remembered (immutable) dicts: those lists as tuples (held, so identity means the same
dict), and the canonical text of the rest. A rebuild with nothing new hands over the same
dicts: its verdict is known (the walk over every message was ~8% of a long run's rebuild)."""
on_clear(_LAST_CHECKED.clear)


_Split = tuple[tuple[list[Any], ...], dict[str, Any]]


def _lists_and_rest(name: Provider, body: Mapping[str, Any]) -> _Split | None:
    """The body's history and tools lists, and its other keys (None if a list is malformed)."""
    lists = tuple(body.get(key) for key in (_HISTORY_KEY[name], "tools"))
    if not all(isinstance(items, list | None) for items in lists):
        return None
    return (tuple(items or [] for items in lists),
            {k: v for k, v in body.items() if k not in (_HISTORY_KEY[name], "tools")})


def _checked_before(name: Provider, split: _Split | None) -> bool:
    last = _LAST_CHECKED.get(name)
    if last is None or split is None:
        return False
    lists, rest = split
    return all(len(new) == len(old) and all(map(operator.is_, new, old))
               for new, old in zip(lists, last[0], strict=True)) and canonical_text(rest) == last[1]


def _note_checked(name: Provider, split: _Split | None, history_remembered: bool | None) -> None:
    """Keep the verdict of a body that passed, if its lists are remembered dicts only
    (``history_remembered``: the protocol walk's answer for the history list, if it had one)."""
    if split is not None and (all_remembered(split[0][0]) if history_remembered is None
                              else history_remembered) and all_remembered(split[0][1]):
        _LAST_CHECKED[name] = (tuple(map(tuple, split[0])), canonical_text(split[1]))
    else:
        _LAST_CHECKED.pop(name, None)
