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
from collections.abc import Callable, Sequence

from contextfold.domain.events import TextBlock
from contextfold.domain.fragments import ContextFragment, MessageBlock, ToolCallBlock
from contextfold.projections.fold_content import arguments_tokens
from contextfold.projections.redact import Finding, Redacted, RedactionPolicy, redact

__all__ = ["redact_arguments", "redact_reply", "redact_reply_fragment"]

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def redact_arguments(arguments: str, policy: RedactionPolicy) -> Redacted:
    """``arguments`` with every secret replaced; JSON stays the same JSON (module docstring).
    Findings are offsets into ``arguments``."""
    try:
        json.loads(arguments)
    except ValueError:  # not JSON: scanned as the text it is
        return redact(arguments, policy)
    parts: list[str] = []
    findings: list[Finding] = []
    cursor = 0
    for m in _STRING.finditer(arguments):
        literal = m.group()
        start, end = m.span()
        value = json.loads(literal)
        if value.isascii() or _encodable(value):
            got = redact(value, policy)
            shown = json.dumps(got.text, ensure_ascii=False)
            exact = "\\" not in literal  # offsets in the value are offsets in the literal
        else:  # an escaped lone surrogate: no text to scan, so its JSON spelling is scanned
            got = redact(literal[1:-1], policy)
            shown = f'"{got.text}"'
            exact = True
        if not got.findings:
            continue
        findings += [Finding(f.rule, start + 1 + f.start, start + 1 + f.end) if exact
                     else Finding(f.rule, start + 1, end - 1) for f in got.findings]
        parts += [arguments[cursor:start], shown]
        cursor = end
    if not findings:
        return Redacted(arguments, ())
    parts.append(arguments[cursor:])
    return Redacted("".join(parts), tuple(findings))


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


def redact_reply_fragment(frag: ContextFragment, text: str, policy: RedactionPolicy,
                          count: Callable[[str], int]) -> tuple[ContextFragment, Redacted] | None:
    """``redact_fragment`` for a model reply with calls: its text (``text``, as the build renders
    it) and its calls' arguments redacted, the token count adjusted as the fold priced them
    (``fold_content.arguments_tokens``); None when there is nothing to redact."""
    calls = [b for b in frag.content if isinstance(b, ToolCallBlock)]
    said, shown = redact_reply(text, [b.arguments for b in calls], policy)
    if not said.findings:
        return None
    tokens = frag.token_count - count(text) + count(said.text) + sum(
        arguments_tokens(new, count) - arguments_tokens(b.arguments, count)
        for b, new in zip(calls, shown, strict=True))
    content: list[MessageBlock] = []
    placed = False
    arguments = iter(shown)
    for block in frag.content:
        if isinstance(block, TextBlock):
            if not placed:
                content.append(TextBlock(text=said.text))
            placed = True
        elif isinstance(block, ToolCallBlock):
            content.append(block.model_copy(update={"arguments": next(arguments)}))
        else:
            content.append(block)
    return frag.model_copy(update={"content": tuple(content), "token_count": max(0, tokens)}), said
