"""The redaction rules' patterns (``projections.redact``), and the matchers that run the
patterns a regex engine would run in more than linear time.

Pure. Why a module of its own: the rules' module was past 500 lines, and a pattern with the
code that finds its matches in linear time (with the proof that they are the same matches)
is one concern. Each linear matcher yields what ``re.compile(pattern).finditer(text)``
yields; the pattern stays the rule's meaning (the tests compare the two).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from contextfold.projections.lazy_regex import LazyPattern
from contextfold.projections.redact_values import ASSIGNED_VALUE

__all__ = [
    "_ASSIGN",
    "_AWS_SECRET",
    "_B",
    "_BEARER",
    "_E",
    "_ENTROPY_NAME",
    "_ENTROPY_REST",
    "_ENTROPY_WORDS",
    "_JWT",
    "_NAME_CHARS",
    "_NAME_RUN",
    "_PEM",
    "_SECRET_NAME",
    "_SECRET_REST",
    "_SECRET_WORDS",
    "_aws_secret_matches",
    "_jwt_matches",
    "_pem_matches",
]

_B = r"(?<![A-Za-z0-9_])"  # a word start that also treats _ as part of a word
_E = r"(?![A-Za-z0-9_])"
_NAME_CHARS = r"[A-Za-z0-9_.-]"
_SECRET_WORDS = (r"(?:PASSWORD|PASSWD|SECRET|TOKEN|API[_-]?KEY|ACCESS[_-]?KEY"
                 r"|PRIVATE[_-]?KEY|CREDENTIALS?|AUTH[_-]?KEY)")
_ENTROPY_WORDS = r"(?:KEY|SECRET|TOKEN|AUTH|CRED|SIGNATURE)"
_SECRET_NAME = _NAME_CHARS + "*" + _SECRET_WORDS + _NAME_CHARS + "*"
_ENTROPY_NAME = _NAME_CHARS + "*" + _ENTROPY_WORDS + _NAME_CHARS + "*"
_SPACE = r"[ \t\u00a0\u202f\u3000]"
"""A space around an assignment operator: also a no-break space (a line pasted from a web page or
a wiki), a narrow one, an ideographic one (typed by a CJK input method)."""
_ASSIGN = (r"""["']?""" + _SPACE + r"*(?::=|=>|[:=\uff1a\uff1d])(?:" + _SPACE + r"*\r?\n" + _SPACE + r"+|"
           + _SPACE + "*)")
"""A name's assignment operator, with the spaces around it: the value on the same line, or on
the next line indented (a YAML plain scalar, a wrapped dict literal). Not on the next line
unindented: that is a terminal's next output (``Password: `` then ``Login incorrect``, or the
flag an agent just printed), which was redacted as the password. The full-width ``：`` and ``＝``
count as ``:`` and ``=``: a Chinese or Japanese input method types them (``DB_PASSWORD＝…`` in a
pasted ``.env`` snippet, ``API_TOKEN： …`` in localized docs), and such secrets were sent in clear."""
_SECRET_REST = _ASSIGN + ASSIGNED_VALUE
_ENTROPY_REST = _ASSIGN + r"""["']?([A-Za-z0-9+/_=.-]{20,})"""

_AWS_SECRET_REST = _ASSIGN + r"""["']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"""
_AWS_SECRET = r"(?i)aws[A-Za-z0-9_.-]*secret[A-Za-z0-9_.-]*" + _AWS_SECRET_REST
_JWT_REST = r"\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"
_JWT = _B + r"eyJ[A-Za-z0-9_-]{8,}" + _JWT_REST
_BEARER = (r"(?i)(?:authorization[\"']?\s*[:=\uff1a\uff1d]\s*[\"']?(?:bearer|basic|token)\s+"
           r"|\bbearer\s+(?=[A-Za-z0-9._~+/-]{16}))([A-Za-z0-9._~+/-]{8,}=*)")
_PEM_BEGIN = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = r"(?:(?:[ \t]*\r?\n|\\n)(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]+:[^\n\\]*))*"
_PEM = _PEM_BEGIN + r"(?:[\s\S]*?" + _PEM_END + "|" + _PEM_BODY + ")"
"""A PEM private key: its BEGIN line through the first END line after it, or, when no END line
follows, through its base64 body and headers (``private_key`` in the module docstring). What
the rule means; it is run by :func:`_pem_matches`, which finds the same matches in linear time."""

_PEM_BEGIN_RE = re.compile(_PEM_BEGIN)
_PEM_END_RE = re.compile(_PEM_END)
_PEM_CLOSED_RE = re.compile(_PEM_BEGIN + r"[\s\S]*?" + _PEM_END)
_PEM_OPEN_RE = re.compile(_PEM_BEGIN + _PEM_BODY)


def _pem_matches(text: str) -> Iterator[re.Match[str]]:
    """What ``re.compile(_PEM).finditer(text)`` yields, in linear time.

    Why: for each BEGIN line the regex's lazy ``[\\s\\S]*?`` looked for an END line up to the end
    of the text, so a tool output repeating ``-----BEGIN PRIVATE KEY-----`` with no END line took
    quadratic time (6 s for 100 KB, 96 s for 400 KB). Here the END lines are searched once,
    forward: a BEGIN line with an END line after it matches through the first one (the regex's
    first alternative, its lazy scan run only up to that END, which the match then consumes),
    and once no END line follows a position, none follows any later BEGIN line either, which
    then matches through its body (the second alternative, never a scan to the end)."""
    pos = 0
    end: re.Match[str] | None = None  # the first END line at or after ``searched``, if any
    searched = -1  # END lines were looked for from here (none from here on when ``end`` is None)
    while (begin := _PEM_BEGIN_RE.search(text, pos)) is not None:
        if searched < 0 or (end is not None and end.start() < begin.end()):
            end = _PEM_END_RE.search(text, begin.end())
            searched = begin.end()
        m = (_PEM_CLOSED_RE.match(text, begin.start(), end.end()) if end is not None
             else _PEM_OPEN_RE.match(text, begin.start()))
        assert m is not None  # BEGIN matched here, and the END line follows it
        yield m
        pos = m.end()


_NAME_RUN = re.compile("(?i)" + _NAME_CHARS + "*+")
"""The rest of a run of name characters: a keyword rule's name runs to the end of its run (the
assignment after it starts with a quote, a space, ``:`` or ``=``, none a name character)."""


_AWS_RE = LazyPattern(_AWS_SECRET)
_AWS_START = re.compile("(?i)aws")
_AWS_SECRET_WORD = re.compile("(?i)secret")
_AWS_REST_RE = LazyPattern("(?i)" + _AWS_SECRET_REST)


def _aws_secret_matches(text: str) -> Iterator[re.Match[str]]:
    """What ``re.compile(_AWS_SECRET).finditer(text)`` yields, in linear time.

    Why: the pattern has no word start, and its name is two unbounded runs of name characters
    around ``secret``: the regex was tried at every ``aws`` in a name and backtracked through
    the rest of the name for every ``secret`` in it (``"aws" * 3400``, 10 KB: 1 s; a name of
    ``aws`` and ``secret`` with no value: cubic, minutes for 10 KB).

    Why it is the same: the assignment after the name starts with no name character, so a
    match at an ``aws`` runs its name to the end of its run of name characters, and matches
    exactly when a ``secret`` lies in the run after that ``aws`` and the assignment and value
    (``_AWS_SECRET_REST``) match at the run's end. Both are found once per run; the match
    itself (the regex, from a start known to match) consumes the run."""
    pos = 0
    run_end = -1  # the end of the run of name characters that holds the last ``aws``
    last_secret = -1  # where the last ``secret`` in that run starts (-1: none)
    rest = False  # the assignment and value follow that run
    for start in _AWS_START.finditer(text):  # "aws" cannot overlap itself: every occurrence
        at = start.start()
        if at < pos:
            continue
        if at >= run_end:
            run = _NAME_RUN.match(text, at)  # never None: it matches the empty string too
            run_end = at if run is None else run.end()
            last_secret = max((m.start() for m in _AWS_SECRET_WORD.finditer(text, at, run_end)), default=-1)
            rest = _AWS_REST_RE.match(text, run_end) is not None
        if rest and last_secret >= at + 3:
            m = _AWS_RE.match(text, at)
            assert m is not None  # the name, then the assignment and value, as above
            yield m
            pos = m.end()


_JWT_RE = re.compile(_JWT)
_JWT_START = re.compile(_B + "eyJ")
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]*+")
_JWT_REST_RE = re.compile(_JWT_REST)


def _jwt_matches(text: str) -> Iterator[re.Match[str]]:
    """What ``re.compile(_JWT).finditer(text)`` yields, in linear time.

    Why: ``-`` ends a word for ``_B`` but is a character of a segment, so every ``eyJ`` after a
    ``-`` started an attempt that read the segment to its end (``"eyJ-" * 10_000``: quadratic,
    1 s for 40 KB). Why it is the same: ``.`` is no segment character, so the first segment of
    a match at an ``eyJ`` runs to the end of its run of segment characters; it matches exactly
    when that run is 11+ characters from the ``eyJ`` and the other two segments
    (``_JWT_REST``) match at the run's end, found once per run."""
    pos = 0
    run_end = -1  # the end of the run of segment characters that holds the last ``eyJ``
    rest = False
    for start in _JWT_START.finditer(text):
        at = start.start()
        if at < pos:
            continue
        if at >= run_end:
            run = _TOKEN_RUN.match(text, at)  # never None: it matches the empty string too
            run_end = at if run is None else run.end()
            rest = _JWT_REST_RE.match(text, run_end) is not None
        if rest and run_end - at >= 11:
            m = _JWT_RE.match(text, at)
            assert m is not None  # the first segment to the run's end, then the rest, as above
            yield m
            pos = m.end()
