"""``redact_arguments`` scans a call's arguments once when no rule can match in them, and still
finds what only a string's decoded text, or its own scan, shows."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import redact as redact_module
from contextfold.projections import redact_calls as redact_calls_module
from contextfold.projections.redact import RedactionPolicy, may_find, policy_from, redact
from contextfold.projections.redact_calls import redact_arguments

POLICY = RedactionPolicy()


def _scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the real ``_scan`` is asked to scan from here on."""
    scanned: list[str] = []
    real = redact_module._scan

    def counted(text: str, *args: object) -> object:
        scanned.append(text)
        return real(text, *args)  # type: ignore[arg-type]
    monkeypatch.setattr(redact_module, "_scan", counted)
    return scanned


def test_arguments_without_a_hint_are_not_scanned_string_by_string(monkeypatch: pytest.MonkeyPatch) -> None:
    scanned = _scans(monkeypatch)
    arguments = json.dumps({"user_id": "mia_li_3668", "cabin": "economy",
                            "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}]})
    assert not may_find(arguments, POLICY)
    got = redact_arguments(arguments, POLICY)
    assert got == redact_module.Redacted(arguments, ())
    assert scanned == []  # each of its 8 strings, the whole text and its views were scanned


def test_a_hint_spelled_with_escapes_is_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # the raw text holds no hint ("\\u0074oken"), the decoded string does: it is still scanned
    arguments = '{"cmd": "export GH_\\u0074oken=ghp_abcdefghijklmnopqrstuvwxyz0123456789"}'
    assert not may_find(arguments.replace("ghp_", "xyz_"), POLICY)
    got = redact_arguments(arguments, POLICY)
    assert json.loads(got.text)["cmd"] == "export GH_token=[REDACTED:github_token]"


def test_a_rule_without_a_hint_runs_on_every_text() -> None:
    policy = policy_from(deny={"ticket": r"INTERNAL-\d+"})
    arguments = json.dumps({"note": "see INTERNAL-42"})
    assert may_find(arguments, policy) and not may_find(arguments, POLICY)
    assert json.loads(redact_arguments(arguments, policy).text)["note"] == "see [REDACTED:custom:ticket]"


_ALPHABET = "tokenkeysecrtpawdbhgi_-=:. \"\u017f\u0130\u0131\u212a\u03a3\u03c3\u00e9"
"""Letters of the rules' hints, and the characters whose case folds reach or touch ASCII."""


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=24))
def test_a_text_without_a_hint_has_none_in_any_part(whole: str) -> None:
    # the folds are per character, so a part's hints are the whole's: what the quiet path relies on
    if may_find(whole, POLICY):
        return
    assert redact(whole, POLICY).findings == ()
    for i in range(len(whole)):
        for j in range(i + 1, len(whole) + 1):
            assert not may_find(whole[i:j], POLICY), whole[i:j]


def _walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The arguments whose string literals ``redact_arguments`` walks from here on."""
    walked: list[str] = []
    real = redact_module.JSON_STRING  # what redact_calls imported

    class Recorded:
        def finditer(self, text: str) -> object:
            walked.append(text)
            return real.finditer(text)
    monkeypatch.setattr(redact_calls_module, "JSON_STRING", Recorded())
    return walked


def test_quiet_arguments_without_an_escape_are_returned_without_walking_their_strings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    walked = _walks(monkeypatch)
    arguments = json.dumps({"reservation_id": "JG7FMM", "cabin": "economy", "passengers": 2})
    assert redact_arguments(arguments, POLICY) == redact_module.Redacted(arguments, ())
    assert walked == []  # no finding and no escape: every string would have been kept as written


def test_quiet_arguments_with_an_escape_still_have_their_strings_walked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    walked = _walks(monkeypatch)
    # a string with an escape is decoded and scanned apart: the walk is what does that
    quiet = '{"note": "line one\\nline two", "city": "Z\\u00fcrich"}'
    assert not may_find(quiet, POLICY)
    assert redact_arguments(quiet, POLICY) == redact_module.Redacted(quiet, ())
    assert walked == [quiet]
    escaped = '{"cmd": "export GH_\\u0074oken=ghp_abcdefghijklmnopqrstuvwxyz0123456789"}'
    shown = json.loads(redact_arguments(escaped, POLICY).text)["cmd"]
    assert shown == "export GH_token=[REDACTED:github_token]"
