"""Secrets a JSON text hides behind its escapes, redacted as the JSON means them.

Why: :func:`~contextfold.projections.redact.redact` scans a tool output, file or page as it is
written. A JSON output may spell a secret with escapes: PHP's ``json_encode`` writes every ``/``
as ``\\/`` (``"https:\\/\\/user:pass@host"``: no ``://`` for ``url_password`` to see), a
serializer may ``\\u``-escape a letter of a token or of a key (``"pass\\u0077ord"``). The model
reads the escapes as the characters they stand for, and a JSON cut (the output over its grant,
:mod:`~contextfold.projections.truncate`) writes the JSON again with them undone: the secret went
out in clear, with no redaction recorded.

How: the text is scanned a second time as the JSON shows it (its *view*): each string literal
holding an escape is spelled as ``json.dumps(value, ensure_ascii=False)`` spells it, what a cut
writes (``\\/`` and ``\\u0041`` undone; ``\\n`` and ``\\"`` kept, so the view is the same JSON).
A finding of the view that the scan of the text as written does not cover touches literals;
each such literal is written again as its view with every finding inside it replaced by its
placeholder, so the JSON stays the same JSON and its other strings stay as written. A finding of
the text as written is replaced as :func:`redact` replaces it. A text with no hidden secret is
returned as :func:`redact` returns it, byte for byte: the common case, an output with escapes
and no secret, is not written again.

Scope: text whose first character (past whitespace and a byte order mark) opens a JSON array or
object and holds a backslash; a literal whose value is a lone surrogate (``"\\ud83d"``, which no
UTF-8 body carries) keeps its spelling in the view. Offsets of a literal written again cover its
whole content (between its quotes) in the text as logged, as :mod:`.redact_calls` records a call
argument's escaped string.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from typing import NamedTuple

from contextfold.projections.redact import (
    JSON_STRING,
    Finding,
    Redacted,
    RedactionPolicy,
    find_secrets,
    may_find,
    merged_findings,
    placeholder,
    redact,
    with_placeholders,
)

__all__ = ["redact_json_escapes"]

_RESPELLED = re.compile(r"\\[/u]")
"""The escapes the view undoes: ``json.dumps`` writes ``\\n``, ``\\t``, ``\\"``, ``\\\\`` back as
they were, so a literal holding no other (a JSON output's line breaks) is its own view."""
_OPENS_JSON = re.compile(r"[\ufeff\s]*[\[{]")


class _Respelled(NamedTuple):
    """A literal of the text spelled as its view spells it: its spans in both."""

    start: int
    end: int
    view_start: int
    view_end: int
    view: str


def _view(text: str) -> tuple[str, list[_Respelled]]:
    """The text as its JSON shows it (module docstring), and the literals spelled anew in it."""
    parts: list[str] = []
    respelled: list[_Respelled] = []
    cursor = shift = 0
    for match in JSON_STRING.finditer(text):
        literal = match.group()
        if _RESPELLED.search(literal) is None:
            continue
        try:
            value = json.loads(literal)
            spelled = json.dumps(value, ensure_ascii=False)
            spelled.encode("utf-8")
        except (ValueError, RecursionError):  # not a JSON string after all, or a lone surrogate
            continue
        if spelled == literal:
            continue
        start, end = match.span()
        parts += [text[cursor:start], spelled]
        view_start = start + shift
        respelled.append(_Respelled(start, end, view_start, view_start + len(spelled), spelled))
        shift += len(spelled) - (end - start)
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts), respelled


def _text_span(view_start: int, view_end: int, respelled: list[_Respelled], starts: list[int]
               ) -> tuple[int, int]:
    """A view span's span in the text, at least as wide: an edge inside a literal spelled anew
    moves out to that literal's quote."""

    def place(at: int, *, end: bool) -> int:
        i = bisect_right(starts, at - 1 if end else at) - 1  # the last literal starting before
        if i < 0:
            return at
        lit = respelled[i]
        if at < lit.view_end or (end and at == lit.view_end):
            return lit.end if end else lit.start
        return at - (lit.view_end - lit.end)  # past it: shifted as the literals before shift

    return place(view_start, end=False), place(view_end, end=True)


def redact_json_escapes(text: str, policy: RedactionPolicy) -> Redacted:
    """``text`` redacted as :func:`redact` does, and as its JSON shows it (module docstring)."""
    plain = redact(text, policy)
    if not _OPENS_JSON.match(text) or _RESPELLED.search(text) is None:  # the cheap look first
        return plain
    view, respelled = _view(text)
    if not respelled or not may_find(view, policy):
        return plain
    starts = [r.view_start for r in respelled]
    seen = [(f.start, f.end) for f in plain.findings]
    # what the findings of the view that the text's own findings do not cover touch: literals
    # spelled anew (written again), and text spelled alike in both (replaced where it is)
    exposed: dict[int, list[Finding]] = {}
    alike: list[tuple[int, int, str]] = []
    for f in find_secrets(view, policy):
        start, end = _text_span(f.start, f.end, respelled, starts)
        if any(a <= start and end <= b for a, b in seen):
            continue
        touched = [i for i, lit in enumerate(respelled) if lit.view_start < f.end and f.start < lit.view_end]
        for i in touched:
            exposed.setdefault(i, []).append(f)
        edges = [start, *(x for i in touched for x in (respelled[i].start, respelled[i].end)), end]
        alike += [(a, b, f.rule) for a, b in zip(edges[::2], edges[1::2], strict=True) if a < b]
    if not exposed and not alike:
        return plain
    spans = [(f.start, f.end, f.rule) for f in plain.findings] + alike
    written: dict[tuple[int, int], str] = {}
    for i, found in exposed.items():
        lit = respelled[i]
        inner = lit.view[1:-1]
        if any(a < lit.end and lit.start < b for a, b in seen):
            # a finding of the text as written reaches into it too: its offsets are in the
            # escaped spelling, so the string's content goes whole
            spans.append((lit.start + 1, lit.end - 1, found[0].rule))
            continue
        base = lit.view_start + 1
        clipped = merged_findings(sorted(
            (max(f.start - base, 0), min(f.end - base, len(inner)), f.rule) for f in found))
        written[(lit.start + 1, lit.end - 1)] = with_placeholders(inner, clipped)
        spans.append((lit.start + 1, lit.end - 1, clipped[0].rule))
    findings = merged_findings(sorted(spans))
    parts: list[str] = []
    cursor = 0
    for f in findings:
        parts += [text[cursor:f.start], written.get((f.start, f.end)) or (
            placeholder(f.rule) + "\n" * text.count("\n", f.start, f.end))]
        cursor = f.end
    parts.append(text[cursor:])
    return Redacted("".join(parts), tuple(findings))
