"""What a secret's *value* looks like, for the redaction rules (``projections.redact``).

Pure. The rules find a name (``DB_PASSWORD``, ``"api_key"``) and an assignment; this module
says where the value assigned ends and whether it is a credential or a look-alike. Why its own
module: the value grammar (quoting, escapes, placeholders, entropy) is one concern, and the
rules' module is large enough without it.

**Quoted values run to their closing quote.** A value in quotes is the whole quoted string:
backslash escapes inside (``"Tr0ub4dor\\"&3"`` in JSON, a shell or Python string) and YAML's
doubled ``''`` do not end it. A value that stopped at the escaped quote left the secret's
tail in the request and broke the JSON around it (``"[REDACTED:...]"&3"``).

**Quoted values with spaces** (a passphrase: ``DB_PASSWORD="correct horse battery staple"``)
are a value only where an assignment plainly ends with them, because prose and code put a
keyword, a colon and a quote side by side too (``print("password: " + pw + "...")``,
``password: "at least 8 characters" is required``):

- the value neither starts nor ends with whitespace;
- the quote is right after ``NAME=`` (a ``.env`` line, a shell assignment), or the closing
  quote ends the assignment: end of line, ``,`` ``;`` ``)`` ``}`` ``]`` or a ``#`` comment;
- it does not read as a label: no secret word (``"Enter your password"``,
  ``"API key for the staging bucket"``) and no closing ``. ? :``.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from contextfold.projections.lazy_regex import LazyPattern

__all__ = ["ASSIGNED_VALUE", "assigned_secret", "high_entropy", "is_placeholder", "real_value"]

_PLACEHOLDER = LazyPattern(
    r"""^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\(.*\)|<[^<>]*>|\{\{.*\}\}|%\(.*\)s|\{[A-Za-z_]*\}
        |os\.environ.*|os\.getenv.*|process\.env.*|env\(.*|getenv\(.*|secrets\..*|vault:.*
        |\*+|x{3,}|X{3,}|\.{3,}|-+|_+|\[REDACTED[^\]]*\]?|redacted|changeme|change_me|example|none
        |null|nil|true|false|undefined|your[-_a-z]*|my[-_]?(?:password|secret|token|key)
        |password|secret|token|\d+|[A-Za-z_][\w.]*[\[(].*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+
        |&?(?:str|string|bytes|int|integer|bool|boolean|number|float|double|usize|isize
           |[ui](?:8|16|32|64|128)|secretstr|secretbytes|any|object))$""",
    re.IGNORECASE | re.VERBOSE,
)


def is_placeholder(value: str) -> bool:
    """Whether an assigned value is a stand-in, not a secret (``${VAR}``, ``<token>``, ``***``, a
    redaction's own ``[REDACTED:rule]``...). A placeholder's closing bracket may be missing: an
    assignment's value ends before a ``]`` (``KEY=[REDACTED:rule]`` is read as
    ``[REDACTED:rule``), and a text redacted twice (an audit masking what a build masked, a
    summary of redacted content) was given ``[REDACTED:secret_assignment]]``."""
    return bool(_PLACEHOLDER.match(value.strip("\"'`,;")))


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_HEX_OR_UUID = re.compile(r"^(?:[0-9a-fA-F]+|[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})$")


def high_entropy(value: str) -> bool:
    return (len(value) >= 20 and not _HEX_OR_UUID.match(value)
            and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and _entropy(value) >= 3.5)


def real_value(value: str) -> bool:
    return len(value) >= 4 and not is_placeholder(value)


_DQ = r"""(?:\\[^\r\n]|[^"\\\r\n])"""
"""A character of a double-quoted string: a backslash escape, or anything but the quote."""
_END = r"[ \t]*(?:[,;)}\]#\r\n]|$)"
"""What may follow a closing quote that ends the assignment."""
_ENDS = f"(?={_END})"
_LAST_BACKSLASH = rf"\\(?='{_END})"
"""A backslash right before a closing quote that ends the assignment: shell and YAML take a
backslash in single quotes literally (``'C:\\tmp\\'``); Python's ``'a\\'b c'`` escapes the quote."""
_SQ = rf"""(?:\\[^\r\n]|''|{_LAST_BACKSLASH}|[^'\\\r\n])"""
"""Of a single-quoted string: an escape, a doubled quote (YAML), a last literal backslash, or
anything else but the quote. Never two ways to read a run of backslashes or quotes, which
would backtrack exponentially on a long one."""
_AFTER_NAME = r"(?<=[A-Za-z0-9_.-][=\uff1d])"
"""The quote right after ``NAME=`` (or the full-width ``NAME＝`` a CJK input method types)."""


def _spaced(quote: str, char: str) -> str:
    body = rf"(?=[^\s{quote}])({char}+)(?<=\S)"  # no whitespace at either end
    return rf"{_AFTER_NAME}{quote}{body}{quote}|{quote}{body}{quote}{_ENDS}"


ASSIGNED_VALUE = (
    rf'''(?:"((?:\\\S|[^"\\\s]){{4,}})"|{_spaced('"', _DQ)}'''
    rf"""|'((?:\\\S|''|{_LAST_BACKSLASH}|[^'\\\s]){{4,}})'|{_spaced("'", _SQ)}"""
    r"""|`([^`\s]{4,})`|(?!`)([^\s"',;#)}\]\uff0c\uff1b\uff09\u3001\u3002\u300d\u300f\u3011\uff01\uff1f]{4,}))"""
)
"""An assigned value, one group per form (the first that took part is the value): a quoted
string without whitespace, one with (where an assignment plainly ends with it), for each quote,
a Markdown code span without whitespace (``password: `hunter22` ``), then a bare word. A bare
word never starts with a backtick: ``the current token: `git remote set-url …` `` is prose
about a command, and its ``git`` was redacted. It ends, as at ``,`` ``;`` ``)``, at CJK
punctuation (，；）、。」』】！？): Chinese and Japanese prose puts no space after a value, and
``password＝…，然后重启服务`` lost the rest of its clause."""

_LABEL_WORD = LazyPattern(r"(?i)\b(?:passwords?|passwd|passphrase|secrets?|tokens?|keys?|credentials?|api)\b")


_CJK_START = LazyPattern("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                        "\U00020000-\U0003ffff]")
"""A kana, a Han ideograph or a Hangul syllable: what a Chinese, Japanese or Korean sentence
starts with, and no credential does."""


def assigned_secret(value: str) -> bool:
    """Whether a value a secret's name is assigned is a credential: real (:func:`real_value`),
    not a CJK sentence (``token：在控制台的设置页面生成``, a label the full-width colon ends), and,
    when it holds whitespace, not a label or sentence about one."""
    if not real_value(value) or _CJK_START.match(value):
        return False
    return not (any(c.isspace() for c in value)
                and (_LABEL_WORD.search(value) is not None or value[-1] in ".?:\u2026"))
