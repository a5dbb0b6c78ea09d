"""The built-in redaction rules (``projections.redact``): the rule type, the table, and the
keyword-anchored matcher two of the rules run through.

Pure. Apart from ``redact`` (policy, findings, rescans, placeholders) to keep each module one
concern and under ~500 lines; the patterns themselves and their linear matchers are in
``redact_patterns``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import ahocorasick_rs

from contextfold.projections.redact_patterns import (
    _AWS_SECRET,
    _B,
    _BEARER,
    _E,
    _ENTROPY_NAME,
    _ENTROPY_REST,
    _ENTROPY_WORDS,
    _JWT,
    _NAME_CHARS,
    _NAME_RUN,
    _PEM,
    _SECRET_NAME,
    _SECRET_REST,
    _SECRET_WORDS,
    _aws_secret_matches,
    _jwt_matches,
    _pem_matches,
)
from contextfold.projections.redact_values import (
    assigned_secret,
    high_entropy,
    is_placeholder,
    real_value,
)

__all__ = ["RULES", "RULE_NAMES", "Rule", "keyword_matches"]


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...]
    """Lower-case substrings one of which must occur (cheap pre-filter); empty = always run."""
    group: int = 0
    check: Callable[[str], bool] | None = None
    keyword: re.Pattern[str] | None = None
    """For a rule whose match starts with a name (``_B`` then name characters, one of them
    starting a keyword): the keywords, case-insensitive. The rule is then tried only at the
    name starts around each keyword (:func:`keyword_matches`), not at every position of the text."""
    keyword_lower: ahocorasick_rs.BytesAhoCorasick | None = None
    """The keywords' spellings in lower case (``api_key api-key apikey ...``, in the regex's order
    of preference), searched leftmost-first in the lowered bytes of an ASCII text: the same
    hits as the case-insensitive regex, found in one automaton pass (a regex alternation is
    tried at every position: ~70 us for a 9 KB tool output, against ~15)."""
    rest: re.Pattern[str] | None = None
    """For a keyword rule: what follows the name in its pattern (the assignment and the value),
    case-insensitive, matched where the name's run of name characters ends (:func:`keyword_matches`)."""
    matches: Callable[[str], Iterator[re.Match[str]]] | None = None
    """What ``pattern.finditer`` yields, found another way (``_pem_matches``: in linear time)."""


def _spellings(keyword: str) -> list[str]:
    """Every string a keyword alternation (``(?:A|B[_-]?C|Ds?)``: literals, ``[_-]?`` and a
    final ``s?``) matches, lower-cased, in the order a regex prefers them at one position."""
    out: list[str] = []
    for alternative in keyword.removeprefix("(?:").removesuffix(")").split("|"):
        forms = [alternative.lower()]
        if "[_-]?" in forms[0]:
            forms = [forms[0].replace("[_-]?", sep) for sep in ("_", "-", "")]
        if forms[0].endswith("s?"):
            forms = [forms[0][:-2] + "s", forms[0][:-2]]  # greedy: the longer first
        if not all(re.fullmatch(r"[a-z0-9_-]+", form) for form in forms):
            raise ValueError(f"not a keyword alternation of literals: {keyword!r}")
        out += forms
    return out


def _keyword_finder(keyword: str) -> ahocorasick_rs.BytesAhoCorasick:
    return ahocorasick_rs.BytesAhoCorasick([w.encode() for w in _spellings(keyword)],
                                           matchkind=ahocorasick_rs.MatchKind.LeftmostFirst)


def _rule(name: str, pattern: str, hints: tuple[str, ...], group: int = 0,
          check: Callable[[str], bool] | None = None, keyword: str | None = None,
          rest: str | None = None, matches: Callable[[str], Iterator[re.Match[str]]] | None = None
          ) -> Rule:
    return Rule(name, re.compile(pattern), hints, group, check,
                 None if keyword is None else re.compile("(?i)" + keyword),
                 None if keyword is None else _keyword_finder(keyword),
                 None if rest is None else re.compile("(?i)" + rest), matches)


_NAME_CHAR_I = re.compile("(?i)" + _NAME_CHARS)
_WORD_CHAR_I = re.compile(r"(?i)[A-Za-z0-9_]")
"""The classes of ``_NAME_CHARS`` and ``_B`` as the case-insensitive rules see them (which
includes four non-ASCII letters, such as the Kelvin sign)."""


def keyword_matches(rule: Rule, text: str, ascii_lowered: bytes | None) -> Iterator[re.Match[str]]:
    """What ``rule.pattern.finditer(text)`` yields, for a rule with a ``keyword``
    (``ascii_lowered``: ``text.lower().encode()`` for an ASCII text, else None).

    Why: the two assignment rules start with ``_B`` and a name of ``_NAME_CHARS``, so the
    regex engine tried them at every word of a text and backtracked through each name
    looking for a keyword (~3 ms for a 10 KB log here, most of a build's secret scan).

    Why it is the same: a match starting at ``x`` has a keyword occurrence ``o >= x`` in
    its name, and the keyword search (leftmost, non-overlapping) has a hit ``h`` with
    ``h.start() <= o < h.end()`` (``o`` itself, or the hit that overlapped it). Keywords
    are name characters, so ``x``, ``o`` and ``h`` lie in one run of name characters:
    ``x`` is in ``[run start, h.end())``. Those positions, where ``_B`` holds, are tried
    in order with ``pattern.match`` (the attempt a search makes at that position, its
    lookbehind seeing the text before it), resuming after each match as ``finditer`` does.

    Why it is linear: a match's name runs to the end of its run of name characters (the
    assignment starts with none), so what follows the name (``rest``: the assignment and the
    value) is matched once per run, where it ends: when it fails, no start in the run is tried
    (a long name with many keywords and no value, ``"token" * 8000``, tried the regex from
    every start and backtracked through the whole name from each: cubic time); when it holds,
    a start with a keyword after it in the run matches, and the match consumes the run. The
    run's bounds are found once per run, not once per keyword in it.
    """
    assert rule.keyword is not None and rule.keyword_lower is not None
    # ASCII: lower() keeps every position, and ignoring case is comparing lower cases
    hits: Iterable[tuple[int, int]] = (
        ((a, b) for _, a, b in rule.keyword_lower.find_matches_as_indexes(ascii_lowered))
        if ascii_lowered is not None else (m.span() for m in rule.keyword.finditer(text)))
    assert rule.rest is not None
    resume = 0  # finditer's next start: the end of the last match
    tried = 0  # positions below this were tried
    run_start = run_end = -1  # the run of name characters that holds the last hit
    run_ok = False  # the rule's assignment and value follow that run
    for start, end in hits:
        if end <= resume:  # inside the last match: no start left to try (and no value to read)
            continue
        if end > run_end:  # a hit in the next run (a keyword is name characters: in one run)
            run = _NAME_RUN.match(text, end)  # never None: it matches the empty string too
            run_end = end if run is None else run.end()
            run_start = start
            while run_start > 0 and _NAME_CHAR_I.match(text, run_start - 1):
                run_start -= 1
            run_ok = rule.rest.match(text, run_end) is not None
        if not run_ok:  # no start in this run can match
            tried = max(tried, end)
            continue
        for x in range(max(run_start, resume, tried), end):
            if x and _WORD_CHAR_I.match(text, x - 1):  # _B does not hold
                continue
            m = rule.pattern.match(text, x)
            if m is not None:
                yield m
                resume = m.end()  # never empty: a match holds a keyword
                break
        tried = max(tried, end)


RULES: tuple[Rule, ...] = (
    _rule("private_key", _PEM, ("private key",), matches=_pem_matches),
    _rule("aws_access_key_id", _B + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _E,
          ("akia", "asia", "abia", "acca")),
    _rule("aws_secret_access_key", _AWS_SECRET, ("aws",), group=1, matches=_aws_secret_matches),
    _rule("github_token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E,
          ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _rule("gitlab_token", _B + r"gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}",
          ("glpat-", "gldt-", "glrt-", "glptt-")),
    _rule("slack_token", _B + r"xox[abposr]-(?:[0-9A-Za-z]+-){1,4}[0-9A-Za-z]{6,}", ("xox",)),
    _rule("slack_webhook",
          r"(?:https?://)?hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,}",
          ("hooks.slack.com",)),
    _rule("stripe_key", _B + r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}" + _E, ("k_live_", "k_test_")),
    _rule("anthropic_api_key", _B + r"sk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_-]{20,}", ("sk-ant-",)),
    _rule("openai_api_key", _B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}", ("sk-",),
          check=lambda v: any(c.isdigit() for c in v) and any(c.isalpha() for c in v[3:])),
    _rule("google_api_key", _B + r"AIza[0-9A-Za-z_-]{35}" + _E, ("aiza",)),
    _rule("google_oauth_token", _B + r"ya29\.[0-9A-Za-z_-]{20,}", ("ya29.",)),
    _rule("jwt", _JWT, ("eyj",), matches=_jwt_matches),
    _rule("bearer_token", _BEARER, ("bearer", "authorization"), group=1, check=real_value),
    _rule("url_password", r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'<>]{1,128}:([^\s@/\"'<>]{1,256})@"
          r"[A-Za-z0-9.\[-]", ("://",), group=1, check=lambda v: not is_placeholder(v)),
    _rule("secret_assignment", r"(?i)" + _B + _SECRET_NAME + _SECRET_REST,
          ("passw", "secret", "token", "key", "credential"), group=-1, check=assigned_secret,
          keyword=_SECRET_WORDS, rest=_SECRET_REST),
    _rule("high_entropy_assignment", r"(?i)" + _B + _ENTROPY_NAME + _ENTROPY_REST,
          ("key", "secret", "token", "auth", "cred", "signature"), group=1, check=high_entropy,
          keyword=_ENTROPY_WORDS, rest=_ENTROPY_REST),
)
"""The built-in rules, in priority order (the first rule wins a tie at one position)."""

RULE_NAMES: frozenset[str] = frozenset(r.name for r in RULES)
