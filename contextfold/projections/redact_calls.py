"""Secret redaction in a model reply's tool calls: the arguments stay valid JSON.

Why a module of its own: a model copies what it read into its calls (a token from a ``.env`` it
just printed into a ``curl`` header, a password into a login call), and those arguments are sent
back in every later request that keeps the call. They were never scanned: the builder redacted
the reply's text and the manifest said so, while the request carried both the text and the
arguments as logged (the layout read them from the log, not from the redacted view).

JSON arguments are redacted string by string, each decoded first: a secret is found as the
model wrote it, not as JSON escapes it (``{\\"password\\": \\"...\\"}`` inside a command, a PEM
key with ``\\n`` escapes were missed when the JSON text was scanned), and only the strings that
held one are written again, so the call stays the same JSON with the same keys and values
elsewhere. Arguments that are not JSON are scanned as the text they are.

Offsets: a reply's findings are offsets into its text followed by each call's arguments, each
after a line break (``RedactionRecord``): one coordinate space for the whole reply.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise

from contextfold.domain.events import TextBlock
from contextfold.domain.fragments import ContextFragment, MessageBlock, ToolCallBlock
from contextfold.projections.fold_content import arguments_tokens
from contextfold.projections.redact import (
    JSON_STRING,
    Finding,
    Redacted,
    RedactionPolicy,
    may_find,
    merged_findings,
    placeholder,
    redact,
    with_placeholders,
)

__all__ = ["redact_arguments", "redact_reply", "redact_reply_fragment"]

_KEY_END = re.compile(r"\s*:")
"""After a string that is an object's key."""
_BARE = re.compile(r"[-+0-9.eE]+|true|false|null")
"""A JSON value that is not a string (what a finding outside every string stands in)."""


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_NAME_KEYS = ("name", "key", "Name", "Key")
_VALUE_KEYS = ("value", "Value")
_HIDDEN_MIN = 6
"""A secret found only in a view is replaced wherever the arguments' strings hold it: at least
this long, so a short value is not struck out of unrelated text."""


def _views(value: object, out: list[str]) -> None:
    """How a runtime reads ``value`` that the JSON text does not spell: a ``{"name": ..., "value":
    ...}`` pair as ``NAME=value`` (Kubernetes, ECS environments), a list of strings as one
    command line and each flag with the word after it (``["--password", "..."]``).

    Depth first, in document order, from a stack of its own: arguments nested as deep as the
    JSON parser takes them (~1000 levels) recursed past Python's limit here."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            name = next((item[k] for k in _NAME_KEYS if isinstance(item.get(k), str)), None)
            said = next((item[k] for k in _VALUE_KEYS if isinstance(item.get(k), str)), None)
            if name is not None and said is not None:
                out.append(f"{name}={said}")
            stack += reversed(item.values())
        elif isinstance(item, list):
            words = [word for word in item if isinstance(word, str)]
            if len(words) > 1:
                out.append(" ".join(words))
                # a flag and the word after it, as the program reads them: --password VALUE
                out += [f"{flag}={word}" for flag, word in pairwise(words)
                        if flag.startswith("-") and not word.startswith("-")]
            stack += reversed(item)


def _hidden_secrets(parsed: object, policy: RedactionPolicy) -> dict[str, str]:
    """Secret values found in the arguments' decoded JSON (a key spelled with escapes,
    ``"pass\\u0077ord"``) and in their views (:func:`_views`), by value: -> rule."""
    views = [json.dumps(parsed)]  # ASCII: a lone surrogate stays an escape
    _views(parsed, views)
    text = "\n".join(v for v in views if v.isascii() or _encodable(v))
    if not may_find(text, policy):  # the common case: no scan, no memo entry
        return {}
    return {text[f.start:f.end]: f.rule for f in redact(text, policy).findings
            if f.end - f.start >= _HIDDEN_MIN}


def redact_arguments(arguments: str, policy: RedactionPolicy) -> Redacted:
    """``arguments`` with every secret replaced; JSON stays the same JSON (module docstring).
    Findings are offsets into ``arguments``.

    JSON is scanned twice: each string decoded (what the model wrote, escapes undone), and the
    JSON text as a whole, where a key stands beside its value (``"password": "..."``: scanned
    apart, neither string is a secret). Neither scan stands for the other: a rule anchored at a
    value's end, or a rejected match that consumed the text after it, finds in one what the
    other misses. A whole-text finding inside one string without escapes is replaced there; one
    that reaches across quotes or escapes replaces each string it touches whole; one outside
    every string (a bare number) replaces that value with the placeholder as a string. A key
    redacted stays unique (its position appended): two keys made equal lost a value."""
    # No rule can match in the arguments or in any part of them (``may_find``): neither the
    # whole text nor a string without escapes (a part of it) is scanned. Most calls' arguments
    # (ids, names, dates) hold none of the rules' hints; each string was scanned apart.
    quiet = not may_find(arguments, policy)
    whole_text = Redacted(arguments, ()) if quiet else redact(arguments, policy)
    try:
        hidden = _hidden_secrets(json.loads(arguments), policy)
    except (ValueError, RecursionError):
        # not JSON, or JSON nested past what Python parses and writes again (the parser and
        # json.dumps raise RecursionError at ~1000 levels, which failed every build of the run):
        # scanned as the text it is
        return whole_text
    if quiet and not hidden and "\\" not in arguments:
        # Nothing found anywhere, and no string with an escape (whose decoded text the walk below
        # scans apart): every string would be kept as written. Most calls' arguments; walking
        # their strings to find that was a third of a new reply's redaction (~8 of ~30 us).
        return whole_text
    literals = [m.span() for m in JSON_STRING.finditer(arguments)]
    starts = [start for start, _ in literals]
    inside: dict[int, list[tuple[int, int, str]]] = {}  # offsets in the string's text
    escaped: dict[int, set[str]] = {}  # rules found inside a string with escapes
    whole: dict[int, str] = {}  # across quotes: the string goes whole
    bare: list[Finding] = []  # outside every string
    findings: list[Finding] = list(whole_text.findings)
    for f in findings:
        touched = False
        for i in range(max(0, bisect_right(starts, f.start) - 1), bisect_left(starts, f.end)):
            start, end = literals[i]
            if start >= f.end or end <= f.start:
                continue
            touched = True
            if not (start < f.start and f.end < end):
                whole.setdefault(i, f.rule)
            elif "\\" in arguments[start:end]:
                escaped.setdefault(i, set()).add(f.rule)
            else:
                inside.setdefault(i, []).append((f.start - start - 1, f.end - start - 1, f.rule))
        if not touched:
            bare.append(f)
    edits: list[tuple[int, int, str]] = []  # (start, end, text) in ``arguments``
    marked = whole.keys() | escaped.keys() | inside.keys()
    for i, (start, end) in enumerate(literals):
        literal = arguments[start:end]
        if "\\" not in literal:  # no escape: the JSON string's text is what its quotes hold
            if i not in marked and not hidden and (quiet or not redact(literal[1:-1], policy).findings):
                continue  # nothing found in it either way: the common case, kept as written
            value = literal[1:-1]
        else:
            value = json.loads(literal)
        spelled = not (value.isascii() or _encodable(value))  # an escaped lone surrogate: no text,
        got = redact(literal[1:-1] if spelled else value, policy)  # so its JSON spelling is scanned
        if i in whole or not escaped.get(i, set()) <= {f.rule for f in got.findings}:
            # what the whole text found is not what the string's own text shows: all of it goes
            shown = placeholder(whole.get(i) or min(escaped[i]))
        else:
            exact = spelled or "\\" not in literal  # offsets in the value are offsets in the literal
            findings += [Finding(f.rule, start + 1 + f.start, start + 1 + f.end) if exact
                         else Finding(f.rule, start + 1, end - 1) for f in got.findings]
            spans = [(f.start, f.end, f.rule) for f in got.findings] + inside.get(i, [])
            for secret, rule in hidden.items():  # found only in a view the text does not show
                at = value.find(secret) if not spelled else -1
                while at >= 0:
                    spans.append((at, at + len(secret), rule))
                    findings.append(Finding(rule, start + 1 + at, start + 1 + at + len(secret)) if exact
                                    else Finding(rule, start + 1, end - 1))
                    at = value.find(secret, at + len(secret))
            if not spans:
                continue
            shown = with_placeholders(literal[1:-1] if spelled else value, merged_findings(sorted(spans)))
        if _KEY_END.match(arguments, end):
            shown += f" #{i}"
        edits.append((start, end, f'"{shown}"' if spelled and i not in whole
                      else json.dumps(shown, ensure_ascii=False)))
    for f in bare:  # a value that is no string: the whole token goes
        token = _BARE.search(arguments, max(0, f.start - 64), f.end + 64)
        while token is not None and token.end() <= f.start:
            token = _BARE.search(arguments, token.end(), f.end + 64)
        if token is not None and token.start() <= f.start:
            edits.append((token.start(), max(token.end(), f.end), json.dumps(placeholder(f.rule))))
    if not findings:
        return Redacted(arguments, ())
    parts: list[str] = []
    cursor = 0
    for start, end, text in sorted(edits):
        if start < cursor:
            continue
        parts += [arguments[cursor:start], text]
        cursor = end
    parts.append(arguments[cursor:])
    shown_text = "".join(parts)
    try:
        json.loads(shown_text)
    except (ValueError, RecursionError):  # no edit of ours should break it; if one did, say no more
        shown_text = json.dumps({"redacted": placeholder(findings[0].rule)})
    unique = sorted(set(findings), key=lambda f: (f.start, f.end, f.rule))
    return Redacted(shown_text, tuple(unique))


def redact_reply(text: str, arguments: Sequence[str], policy: RedactionPolicy
                 ) -> tuple[Redacted, tuple[str, ...]]:
    """A reply's text and its calls' arguments redacted: the text's :class:`Redacted` with the
    findings of every part (offsets in the module docstring), and the arguments as shown."""
    said = redact(text, policy)
    findings = list(said.findings)
    shown: list[str] = []
    base = len(text) + 1
    for args in arguments:
        got = redact_arguments(args, policy)
        shown.append(got.text)
        findings += [Finding(f.rule, f.start + base, f.end + base) for f in got.findings]
        base += len(args) + 1
    return Redacted(said.text, tuple(findings)), tuple(shown)


def redact_reply_fragment(make: Callable[[], ContextFragment], text: str, arguments: Sequence[str],
                          policy: RedactionPolicy, count: Callable[[str], int]
                          ) -> tuple[ContextFragment, Redacted] | None:
    """``redact_fragment`` for a model reply with calls: its text (``text``, as the build renders
    it) and its calls' ``arguments`` redacted, the token count adjusted as the fold priced them
    (``fold_content.arguments_tokens``); None when there is nothing to redact. ``make`` gives the
    reply's fragment, made only when there is (building it, blocks validated, was most of a
    new reply's cost)."""
    said, shown = redact_reply(text, arguments, policy)
    if not said.findings:
        return None
    frag = make()
    calls = [b for b in frag.content if isinstance(b, ToolCallBlock)]
    tokens = frag.token_count - count(text) + count(said.text) + sum(
        arguments_tokens(new, count) - arguments_tokens(b.arguments, count)
        for b, new in zip(calls, shown, strict=True))
    content: list[MessageBlock] = []
    placed = False
    redacted = iter(shown)
    for block in frag.content:
        if isinstance(block, TextBlock):
            if not placed:
                content.append(TextBlock(text=said.text))
            placed = True
        elif isinstance(block, ToolCallBlock):
            content.append(block.model_copy(update={"arguments": next(redacted)}))
        else:
            content.append(block)
    return frag.model_copy(update={"content": tuple(content), "token_count": max(0, tokens)}), said
