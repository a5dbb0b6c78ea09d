"""Secret redaction on texts built to make it slow or crash: the work stays near-linear in the
text, and what a build needs of it never raises (a security hunt, each case found there).

No timings: the work is counted (characters a rule's matches were read from), or the input is
one that overflowed the recursion limit before.
"""

from __future__ import annotations

import re

import pytest

from contextfold.projections import redact as redact_module
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
