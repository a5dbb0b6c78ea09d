"""Secret redaction on texts built to make it slow or crash: the work stays near-linear in the
text, and what a build needs of it never raises (a security hunt, each case found there).

No timings: the work is counted (characters a rule's matches were read from), or the input is
one that overflowed the recursion limit before.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import redact as redact_module
from contextfold.projections import redact_patterns, redact_rules
from contextfold.projections.redact import find_secrets, placeholder, redact


def _characters_read(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    """The total length of the texts the rules' matches in ``find_secrets(text)`` were made in."""
    read = 0
    span = redact_module._span

    def counted(m: re.Match[str], group: int) -> tuple[int, int] | None:
        nonlocal read
        read += len(m.string)
        return span(m, group)

    monkeypatch.setattr(redact_module, "_span", counted)
    find_secrets(text)
    return read


def test_nested_refused_values_do_not_recurse_once_per_level() -> None:
    """``"key=" * 1100`` (a 4.4 KB tool output): each value the entropy check refused was
    rescanned by a recursive call, the next value 4 characters shorter, until RecursionError
    failed every build of the run."""
    text = "key=" * 5000
    got = redact(text)
    # past the rescans' budget the refused value is redacted whole, never left unread
    assert got.text.endswith(placeholder("high_entropy_assignment")) and got.text.startswith("key=")


def test_nested_refused_values_are_rescanned_in_near_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "key=" * 800  # deep enough to be quadratic before, shallow enough not to overflow
    read = _characters_read(monkeypatch, text)
    assert read <= 10 * len(text) + 65536  # the rescans' budget (8 n + 65536), and the first scan


def test_a_secret_inside_nested_refused_values_is_still_found() -> None:
    text = '{"password": "use the token: \'see secret=Zq8fK2mN9pL4xR7tW3b\' here"}'
    got = redact(text)
    assert "Zq8fK2mN9pL4xR7tW3b" not in got.text
    assert [text[f.start:f.end] for f in got.findings] == ["Zq8fK2mN9pL4xR7tW3b"]


_PEM_PIECES = ["-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----", "-----END PRIVATE KEY-----",
               "-----END EC PRIVATE KEY BLOCK-----", "-----BEGIN A B PRIVATE KEY BLOCK-----", "-----BEGIN ",
               "-----END ", "PRIVATE KEY", "-----", "\n", "\r\n", "\\n", " ", "\t",
               "MIIEowIBAAKCAQEAu1SU1LfV", "AAAA", "Proc-Type: 4,ENCRYPTED", "x", ":", "RSA "]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PEM_PIECES), max_size=30).map("".join))
def test_the_private_key_matcher_finds_what_its_regex_finds(text: str) -> None:
    """The private-key rule runs as :func:`_pem_matches` (linear), and means its regex."""
    pattern = re.compile(redact_patterns._PEM)
    expected = [m.span() for m in pattern.finditer(text)]
    assert [m.span() for m in redact_patterns._pem_matches(text)] == expected


def test_begin_lines_without_an_end_line_are_scanned_in_linear_work() -> None:
    """A tool output repeating ``-----BEGIN PRIVATE KEY-----`` with no END line: the regex looked
    for an END line to the end of the text from every BEGIN line (96 s for 400 KB; this 1 MB
    one took minutes). Each BEGIN line is still redacted, as its regex says."""
    line = "-----BEGIN PRIVATE KEY-----\n"
    got = find_secrets(line * 40_000)
    assert len(got) == 40_000
    assert all(f.rule == "private_key" and f.end - f.start == len(line) - 1 for f in got)


def test_a_private_key_block_is_redacted_through_its_first_end_line() -> None:
    key = "-----BEGIN PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfV\n-----END PRIVATE KEY-----"
    text = "-----BEGIN PRIVATE KEY-----\n" * 3 + key + "\nkept\n" + key
    got = find_secrets(text)
    first, second = len(text) - len(key) - len("\nkept\n"), len(text) - len(key)
    assert [(f.start, f.end) for f in got] == [(0, first), (second, len(text))]


class _Counted:
    """A compiled pattern whose ``match`` calls are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(text, pos)


@pytest.mark.parametrize("unit", ["token-", "api_key.", "password_"])
def test_a_long_name_with_many_keywords_is_read_once(monkeypatch: pytest.MonkeyPatch, unit: str) -> None:
    """A name of many keywords then an assignment whose value fails: each keyword walked back to
    the start of the name and tried the regex from every start in it, backtracking through the
    whole name from each (cubic: ``"token-" * 300 + "=ab"`` read the name ~10^5 times)."""
    counted = _Counted(redact_rules._NAME_CHAR_I)
    monkeypatch.setattr(redact_rules, "_NAME_CHAR_I", counted)
    text = unit * 300 + "=ab"
    assert find_secrets(text) == []
    assert counted.calls <= 2 * len(text)


def test_a_long_name_of_keywords_without_an_assignment_is_scanned_in_linear_work() -> None:
    """``"token" * 40_000`` (200 KB): each keyword's end looked for an assignment after the rest
    of the name, to the end of the name: quadratic (8 s for 40 KB, minutes for this one)."""
    assert find_secrets("token" * 40_000 + " " + "api_key-" * 25_000) == []


_AWS_PIECES = ["aws", "AWS", "aw\u017f", "secret", "SECRET", "\u017fecret", "_", "-", ".", "access", "key",
               "=", ": ", ' = "', "'", "\n", " ", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               "Zk3q9vR2mXw8Lp4Tn7Yb", "1Hc6Fd5Gs0Ja2Ke9Uv3W", "+/", "x"]
_JWT_PIECES = ["eyJ", "eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOiIxMjM0NTY3ODkwIn0", "SflKxwRJSMeKKF2QT4fwpMeJf36P",
               ".", "-", "_", "a", "0", " ", "\n", "x-eyJ", "ab"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_AWS_PIECES), max_size=30).map("".join))
def test_the_aws_secret_matcher_finds_what_its_regex_finds(text: str) -> None:
    expected = [(m.span(), m.groups()) for m in re.compile(redact_patterns._AWS_SECRET).finditer(text)]
    assert [(m.span(), m.groups()) for m in redact_patterns._aws_secret_matches(text)] == expected


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_JWT_PIECES), max_size=30).map("".join))
def test_the_jwt_matcher_finds_what_its_regex_finds(text: str) -> None:
    expected = [m.span() for m in re.compile(redact_patterns._JWT).finditer(text)]
    assert [m.span() for m in redact_patterns._jwt_matches(text)] == expected


def test_a_name_of_many_aws_and_secret_words_is_scanned_in_linear_work() -> None:
    """The AWS secret rule, with no word start, backtracked through the rest of a name from every
    ``aws`` in it, and again for every ``secret``: ``"awssecret" * 1100`` (10 KB) took minutes."""
    assert find_secrets("awssecret" * 20_000 + " " + "aws-" * 50_000) == []


def test_segments_joined_by_dashes_are_scanned_in_linear_work() -> None:
    """Every ``eyJ`` after a ``-`` started a JWT attempt that read to the end of the run."""
    assert find_secrets("eyJ-" * 100_000) == []
