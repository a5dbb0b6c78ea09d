"""Secret redaction: credentials never enter a provider request.

Pure. The builder runs :func:`redact` over every fragment of the configured
kinds (tool results, files and evidence, memory, workspace instructions,
history notes and summaries) *before* selection and truncation, so token
counts are those of the redacted text and truncation can never cut a private
key block in half and leave its first lines behind. The raw content stays in
the log (encrypt the store to protect it at rest); the request carries
``[REDACTED:<rule>]`` and the manifest records fragment id, rule and character
offsets in the fragment's unredacted text — never the secret.

**No hash in the placeholder.** A hash prefix would let the model tell two
equal secrets apart, but it also lets anyone holding the request confirm a
guessed low-entropy password offline (run ids are not secret, so a per-run
salt does not help), and it would make a redacted prefix depend on data the
reader must not see. ``[REDACTED:rule]`` is deterministic, so the stable
prefix (and the cache key) stays byte-stable across turns.

Rules (name: what, and why it is shaped the way it is):

- ``private_key``: PEM ``-----BEGIN ... PRIVATE KEY-----`` through its END line
  (or through the base64 body when the END line is missing).
- ``aws_access_key_id``: ``AKIA``/``ASIA``/``ABIA``/``ACCA`` + 16 upper-case
  alphanumerics.
- ``aws_secret_access_key``: 40 base64 characters assigned to a name with
  ``aws`` and ``secret`` in it (the value alone looks like any base64).
- ``github_token``: ``ghp_ gho_ ghu_ ghs_ ghr_`` + 36+ alphanumerics,
  ``github_pat_`` + 22+ characters.
- ``gitlab_token``: ``glpat-`` (and ``gldt-``, ``glrt-``) + 20+ characters.
- ``slack_token``: ``xoxb- xoxp- xoxa- xoxo- xoxr- xoxs-`` tokens;
  ``slack_webhook``: ``hooks.slack.com/services/T.../B.../...``.
- ``stripe_key``: ``sk_live_ sk_test_ rk_live_ rk_test_`` (publishable
  ``pk_`` keys are public by design and kept).
- ``anthropic_api_key``: ``sk-ant-api03-...`` / ``sk-ant-admin01-...``.
- ``openai_api_key``: ``sk-`` / ``sk-proj-`` / ``sk-svcacct-`` + 20+ characters.
- ``google_api_key``: ``AIza`` + 35; ``google_oauth_token``: ``ya29.`` tokens.
- ``jwt``: three base64url segments, the first two starting ``eyJ``.
- ``bearer_token``: the credential after ``Authorization: Bearer|Basic|Token``
  (header or curl ``-H``) or a free-standing ``Bearer <16+ chars>``.
- ``url_password``: the password in ``scheme://user:password@host``.
- ``secret_assignment``: ``.env``/shell/YAML/JSON/Python assignments to a name
  containing PASSWORD, PASSWD, SECRET, TOKEN, API_KEY/APIKEY,
  ACCESS_KEY, PRIVATE_KEY, CREDENTIAL, AUTH_KEY — the value only: a quoted
  value whole, escapes and spaces included, up to its closing quote
  (``projections.redact_values`` says where a value ends and what is a look-alike).
- ``high_entropy_assignment``: a value of 20+ characters from the base64/url
  alphabet with letters *and* digits and Shannon entropy >= 3.5 bits/char,
  assigned to a name containing KEY, SECRET, TOKEN, AUTH, CRED or SIGNATURE.
  Pure hex and UUID values are exempt: in agent logs those are digests, commit
  SHAs and ids far more often than secrets (hex-shaped secrets of a known
  provider are caught by that provider's rule).

Never redacted (documented look-alikes): values that are placeholders or
references (``${VAR}``, ``$VAR``, ``<your-key>``, ``{{ secret }}``,
``os.environ[...]``, ``process.env.X``, ``***``, ``xxxx``, ``changeme``,
``example``, ``None``/``null``/``true``/``false``, pure digits, code references
such as ``self.password``, ``get_token()``, ``Optional[str]``, type names in
annotations such as ``token: String`` or ``password: str``; ``PWD`` is the
working directory, not a password) and the
**documented example credentials** from vendor docs (AWS's
``AKIAIOSFODNN7EXAMPLE`` and ``wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY``):
they are public, appear in tutorials and tests, and redacting them only
destroys the example. ``redact_examples=True`` redacts them too.

Overlaps merge into one redaction (the union of the spans, the first rule by
position), so no fragment of a secret survives between two findings.
``allow`` regexes (full match against the secret) exempt values; ``deny``
adds named custom rules (the whole match, or group 1 when the pattern has one);
``disabled`` switches rules off by name.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import ahocorasick_rs

from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import TextBlock
from contextfold.projections.bounded_memo import BoundedMemo, text_bytes
from contextfold.projections.redact_rules import RULE_NAMES, RULES, Rule, keyword_matches

if TYPE_CHECKING:  # the build's models: a display that masks text (``redact_shown``) defines none
    from contextfold.domain.fragments import ContextFragment, MessageBlock
    from contextfold.domain.manifest import BuildConfig

__all__ = [
    "DOCUMENTED_EXAMPLES",
    "RULES",
    "Finding",
    "Redacted",
    "RedactionPolicy",
    "find_secrets",
    "placeholder",
    "redact",
]


def placeholder(rule: str) -> str:
    return f"[REDACTED:{rule}]"


DOCUMENTED_EXAMPLES: frozenset[str] = frozenset({
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AKIAI44QH8DHBEXAMPLE",
    "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
})
"""Vendor-documented example credentials: public, kept unless ``redact_examples``."""

__all__ += ["RULE_NAMES", "merged_findings", "with_placeholders"]

JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
"""A JSON string literal with its escapes, as written (a call's arguments, a JSON tool output):
what :mod:`.redact_calls` and :mod:`.redact_escapes` read and write again one at a time."""
__all__ += ["JSON_STRING"]


@dataclass(frozen=True, eq=False)
class RedactionPolicy:
    """Which rules run, what is exempt, and which custom rules are added.

    Equal and hashed by :attr:`key`, every field in one tuple made once. Why: the memos of a
    build hold the policy in their keys, and a dataclass's generated ``__hash__`` builds and
    hashes a tuple of its fields in Python at every lookup (17 per first build); the memos
    that can key on ``key`` itself do (a tuple of hashed values: hashed in C)."""

    disabled: frozenset[str] = frozenset()
    allow: tuple[str, ...] = ()
    """Regexes; a secret that fully matches one is kept."""
    deny: tuple[tuple[str, str], ...] = ()
    """(name, regex) custom rules, reported as ``custom:<name>``."""
    redact_examples: bool = False
    key: tuple[frozenset[str], tuple[str, ...], tuple[tuple[str, str], ...], bool] = field(
        init=False, repr=False)
    """Every field above: what decides a redaction (a field added above belongs here too)."""
    _hash: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        key = (self.disabled, self.allow, self.deny, self.redact_examples)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RedactionPolicy):
            return NotImplemented
        return self is other or self.key == other.key


@dataclass(frozen=True)
class Finding:
    rule: str
    start: int
    end: int


@dataclass(frozen=True)
class Redacted:
    text: str
    findings: tuple[Finding, ...]


def _span(m: re.Match[str], group: int) -> tuple[int, int] | None:
    if group == -1:  # the first group that participated
        for g in range(1, (m.re.groups or 0) + 1):
            if m.start(g) >= 0:
                return m.start(g), m.end(g)
        return m.span()
    if m.start(group) < 0:
        return None
    return m.start(group), m.end(group)


ASCII_FOLDS: dict[int, str] = {0x130: "i", 0x131: "i", 0x17F: "s", 0x212A: "k"}
"""The non-ASCII characters a case-insensitive regex matches to an ASCII letter (dotted and
dotless I, long s, Kelvin sign), each to that letter: the hints are searched in the text with
these folded, so ``ſecret=...`` (which ``(?i)SECRET`` matches) still lets its rule run."""


class _Compiled(NamedTuple):
    rules: tuple[Rule, ...]
    allow: tuple[re.Pattern[str], ...]
    hinted: tuple[tuple[int, ...], ...]
    """For each hint (in ``finder``'s pattern order): the indices of the rules it lets run."""
    finder: ahocorasick_rs.BytesAhoCorasick | None
    """Every hint at once, over the UTF-8 of the lowered text (None: no rule has a hint).
    The hints are ASCII, and no byte of a multi-byte UTF-8 sequence is, so a hint occurs in
    the bytes exactly when it occurs in the text. Why an automaton: searching each of the ~36
    hints apart scanned a text 36 times (0.16 ms for a 9 KB tool output, the larger part of
    its secret scan); one pass is ~0.015 ms."""
    always: tuple[int, ...]
    """Indices of the rules with no hint (custom ones): they run on every text."""


_COMPILED: dict[tuple[object, ...], _Compiled] = {}
"""Compiled rules by policy key (at most 64 policies: a caller makes few)."""


def _compiled(policy: RedactionPolicy) -> _Compiled:
    """The policy's rules compiled, kept by its key: a lookup hashes no dataclass."""
    hit = _COMPILED.get(policy.key)
    if hit is None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        hit = _COMPILED[policy.key] = _compile(policy)
    return hit


def _compile(policy: RedactionPolicy) -> _Compiled:
    rules = [r for r in RULES if r.name not in policy.disabled]
    for name, pattern in policy.deny:
        compiled = _user_regex(pattern, f"redact_deny[{name!r}]")
        rules.append(Rule(f"custom:{name}", compiled, (), group=1 if compiled.groups else 0))
    hints = sorted({h for r in rules for h in r.hints})
    hinted = tuple(tuple(i for i, r in enumerate(rules) if h in r.hints) for h in hints)
    finder = ahocorasick_rs.BytesAhoCorasick([h.encode() for h in hints]) if hints else None
    allow = tuple(_user_regex(a, f"redact_allow[{i}]") for i, a in enumerate(policy.allow))
    return _Compiled(tuple(rules), allow, hinted, finder,
                     tuple(i for i, r in enumerate(rules) if not r.hints))


def _user_regex(pattern: str, where: str) -> re.Pattern[str]:
    """A caller's redaction regex, or InvalidInputError (the build raised a bare ``re.error``)."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidInputError(f"invalid build config: {where}: {pattern!r} is not a regex: {exc}") from exc


def find_secrets(text: str, policy: RedactionPolicy = RedactionPolicy()) -> list[Finding]:
    """Non-overlapping findings in ``text``, sorted by position.

    Only the rules whose hints occur in the text run (and those without hints): on most texts
    no hint occurs and no rule runs. The findings are sorted before they are merged, so which
    rules ran first does not matter."""
    raw = _raw_findings(text, policy)
    raw.sort()
    return merged_findings((start, -neg_end, name) for start, neg_end, _, name in raw)


def merged_findings(spans: Iterable[tuple[int, int, str]]) -> list[Finding]:
    """``spans`` (start, end, rule), sorted by start, as non-overlapping findings: an overlap
    extends the finding it overlaps, under that finding's rule."""
    merged: list[Finding] = []
    for start, end, name in spans:
        if merged and start < merged[-1].end:
            last = merged[-1]
            if end > last.end:
                merged[-1] = Finding(last.rule, last.start, end)
            continue
        merged.append(Finding(name, start, end))
    return merged


def with_placeholders(text: str, findings: Iterable[Finding], *, keep_lines: bool = False) -> str:
    """``text`` with each finding (non-overlapping, in order) replaced by its placeholder.

    ``keep_lines``: the placeholder is followed by the line breaks of the text it replaces, so
    every line after a multi-line secret keeps its logged number. Why: a 27-line PEM key became
    one line, and a log cut after it told the model and the manifest line numbers 26 lower than
    the log's (the ``[N lines omitted: lines A–B]`` marker, the kept ranges, a diagnosis's line),
    while its ``[full log: call://…]`` ref and the redaction records count in the logged text. A
    map back through the redactions' line shifts would have to reach every place that numbers
    lines; a text with the same lines needs none. The blank lines cost a token or so each."""
    parts: list[str] = []
    cursor = 0
    for f in findings:
        parts += [text[cursor:f.start], placeholder(f.rule)]
        if keep_lines:
            parts.append("\n" * text.count("\n", f.start, f.end))
        cursor = f.end
    parts.append(text[cursor:])
    return "".join(parts)


_RESCAN_BUDGET_PER_CHAR = 8
_RESCAN_BUDGET_BASE = 1 << 16
"""How many characters the rescans of refused values (:func:`_raw_findings`) may read in all,
for a text of n characters: ``8 n + 65536``. Why a bound: a refused value can hold another
refused match whose value is shorter by only its name (``"key=" * 1100``, a 4.4 KB tool output),
so rescanning every one read the text once per level, quadratic time, and recursed one level
per 4 characters until RecursionError failed every build of the run."""


def _raw_findings(text: str, policy: RedactionPolicy) -> list[tuple[int, int, int, str]]:
    """Every rule's matches in ``text``, and in the values the rules' checks refused.

    A match its rule's check refuses (a label, a placeholder) has consumed its text all the
    same, and a secret inside it was never tried: ``{"password": "use token=Zq8f..."}`` kept
    the token, since the quoted value reads as a label. So the refused value is scanned again
    on its own when it is shorter than the text it came from (so the rescans end), each span
    once, breadth first, from a worklist (no recursion: the nesting is as deep as the text
    lets it be). The rescans read at most ``_RESCAN_BUDGET_*`` characters in all; a refused
    value past that budget is redacted whole, under the rule that refused it, instead of
    scanned: a secret is never left in because looking for it cost too much, and only a text
    built to nest refused values hundreds deep gets there."""
    raw: list[tuple[int, int, int, str]] = []
    budget = _RESCAN_BUDGET_PER_CHAR * len(text) + _RESCAN_BUDGET_BASE
    seen: set[tuple[int, int]] = set()
    work: deque[tuple[int, int]] = deque([(0, len(text))])
    while work:
        start, end = work.popleft()
        part = text if end - start == len(text) else text[start:end]
        for value_start, value_end, priority, name in _scan(part, policy, start, raw):
            if value_end - value_start >= end - start or (value_start, value_end) in seen:
                continue
            seen.add((value_start, value_end))
            if value_end - value_start <= budget:
                budget -= value_end - value_start
                work.append((value_start, value_end))
            elif _kept(text[value_start:value_end], policy, _compiled(policy).allow):
                continue
            else:
                raw.append((value_start, -value_end, priority, name))
    return raw


def _kept(value: str, policy: RedactionPolicy, allow: tuple[re.Pattern[str], ...]) -> bool:
    """Whether a value a rule found is exempt: a documented example, or allowed (``allow``: the
    policy's compiled ``allow`` regexes)."""
    if not policy.redact_examples and value in DOCUMENTED_EXAMPLES:
        return True
    return any(a.fullmatch(value) for a in allow)


def _rules_to_run(text: str, compiled: _Compiled, ascii_lowered: bytes | None) -> set[int]:
    """The indices of the rules that may match in ``text``: those whose hint occurs in it (in
    its lowered, :data:`ASCII_FOLDS`-folded UTF-8) and those with none. ``ascii_lowered``: the
    text's lowered bytes when it is ASCII (None else)."""
    run = set(compiled.always)
    if compiled.finder is not None:  # every occurrence of every hint, in one pass
        folded = (ascii_lowered if ascii_lowered is not None
                  else text.translate(ASCII_FOLDS).lower().encode())
        found = {i for i, _, _ in compiled.finder.find_matches_as_indexes(folded, overlapping=True)}
        run = run.union(*map(compiled.hinted.__getitem__, found))
    return run


def may_find(text: str, policy: RedactionPolicy) -> bool:
    """Whether :func:`redact` may find anything in ``text`` or in any part of it: False when the
    policy has no rule without a hint and none of its hints occurs in the text. Why "any part":
    the folded text is the folds of its characters one by one (a hint is ASCII, and no byte of
    a multi-byte character is), so a hint in a part occurs in the whole; a caller that would
    scan a text's parts one by one (``redact_calls``: each string of a call's arguments) asks
    once. One pass of the hint automaton, no memo entry."""
    ascii_lowered = text.lower().encode() if text.isascii() else None
    return bool(_rules_to_run(text, _compiled(policy), ascii_lowered))


__all__ += ["may_find"]


def _scan(text: str, policy: RedactionPolicy, base: int, raw: list[tuple[int, int, int, str]]
          ) -> list[tuple[int, int, int, str]]:
    """Every rule's matches in ``text`` (offsets from ``base``) appended to ``raw``; returns the
    values the rules' checks refused, as (start, end, rule priority, rule name)."""
    compiled = _compiled(policy)
    rules, allow = compiled.rules, compiled.allow
    # an ASCII text lower-cased once, for the hints and every keyword rule's automaton
    ascii_lowered = text.lower().encode() if text.isascii() else None
    run = _rules_to_run(text, compiled, ascii_lowered)
    refused: list[tuple[int, int, int, str]] = []
    for priority in sorted(run):
        rule = rules[priority]
        for m in (keyword_matches(rule, text, ascii_lowered) if rule.keyword is not None
                  else rule.matches(text) if rule.matches is not None else rule.pattern.finditer(text)):
            span = _span(m, rule.group)
            if span is None or span[0] == span[1]:
                continue
            value = text[span[0]:span[1]]
            if rule.check is not None and not rule.check(value):
                refused.append((base + span[0], base + span[1], priority, rule.name))
                continue
            if _kept(value, policy, allow):
                continue
            raw.append((base + span[0], -(base + span[1]), priority, rule.name))
    return refused


_REDACTED: BoundedMemo[tuple[str, tuple[object, ...]], Redacted] = BoundedMemo(2048, share="redacted")
"""Results by (text, policy key), holding the text and, when it had secrets, its redacted copy."""


def redact(text: str, policy: RedactionPolicy = RedactionPolicy()) -> Redacted:
    """``text`` with every finding replaced by its placeholder (remembered: builds repeat)."""
    key = (text, policy.key)
    hit = _REDACTED.get(key)
    if hit is None:
        hit = _redact(text, policy)
        _REDACTED.put(key, hit, text_bytes(text, hit.text) if hit.findings else text_bytes(text))
    return hit


def _redact(text: str, policy: RedactionPolicy) -> Redacted:
    findings = find_secrets(text, policy)
    if not findings:
        return Redacted(text, ())
    return Redacted(with_placeholders(text, findings, keep_lines=True), tuple(findings))


def policy_from(disabled: Sequence[str] = (), allow: Sequence[str] = (),
                deny: dict[str, str] | None = None, *, redact_examples: bool = False) -> RedactionPolicy:
    return RedactionPolicy(frozenset(disabled), tuple(allow), tuple(sorted((deny or {}).items())),
                           redact_examples)


__all__ += ["policy_from"]


_CONFIG_POLICIES: dict[int, tuple[BuildConfig, RedactionPolicy]] = {}


def config_policy(config: BuildConfig) -> RedactionPolicy:
    """The policy a :class:`BuildConfig` asks for: one object per config object. Why: the builder's
    memo keys hold the policy, and a key found again with the very same policy object compares
    by identity instead of field by field (an agent loop reuses its config)."""
    hit = _CONFIG_POLICIES.get(id(config))
    if hit is None or hit[0] is not config:
        if len(_CONFIG_POLICIES) >= 1024:
            _CONFIG_POLICIES.clear()
        hit = _CONFIG_POLICIES[id(config)] = (config, policy_from(
            config.redact_disabled_rules, config.redact_allow, config.redact_deny,
            redact_examples=config.redact_examples))
    return hit[1]


def redact_fragment(frag: ContextFragment, text: str, policy: RedactionPolicy,
                    count: Callable[[str], int], result: Redacted | None = None
                    ) -> tuple[ContextFragment, Redacted] | None:
    """``frag`` with its text (``text``: the full text the build would render) redacted, and
    its token count adjusted; None when there is nothing to redact. ``result``: ``redact(text,
    policy)`` when the caller has it (a text too long for the memo is not scanned twice).

    The returned fragment keeps its media blocks and ``content_hash`` (which names the
    logged content); its text lives in one block, no longer behind an artifact ref.
    """
    if result is None:
        result = redact(text, policy)
    if not result.findings:
        return None
    from contextfold.domain.fragments import ToolResultBlock  # loaded by the builder calling this

    content: list[MessageBlock] = []
    placed = False
    for block in frag.content:
        if isinstance(block, TextBlock | ToolResultBlock):
            if placed:
                continue
            placed = True
            if isinstance(block, ToolResultBlock):
                content.append(block.model_copy(update={"text": result.text, "artifact": None}))
            else:
                content.append(TextBlock(text=result.text))
        else:
            content.append(block)
    tokens = max(0, frag.token_count - count(text) + count(result.text))
    return frag.model_copy(update={"content": tuple(content), "token_count": tokens}), result


__all__ += ["config_policy", "redact_fragment"]
