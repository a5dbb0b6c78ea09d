"""Secrets in a model reply's call arguments: found as the model wrote them, the JSON kept."""

from __future__ import annotations

import json

import pytest

from contextfold.projections.redact import RedactionPolicy
from contextfold.projections.redact_calls import redact_arguments, redact_reply
from tests.unit.test_redact import SECRETS, _line

POLICY = RedactionPolicy()


@pytest.mark.parametrize(("template", "secret", "rule"), SECRETS, ids=[f"{r}-{i}" for i, (_, _, r) in
                                                                        enumerate(SECRETS)])
def test_every_corpus_secret_is_found_in_a_json_string_even_escaped(template: str, secret: str, rule: str
                                                                    ) -> None:
    # JSON escapes the quotes of a JSON-in-a-command and the line breaks of a PEM key: scanning
    # the JSON text missed ``\"password\": \"...\"`` and an assignment in escaped quotes
    arguments = json.dumps({"cmd": _line(template, secret), "keep": [1, "same", {"x": None}]})
    got = redact_arguments(arguments, POLICY)
    value = json.loads(got.text)
    assert secret not in value["cmd"] and f"[REDACTED:{rule}]" in value["cmd"]
    assert value["keep"] == [1, "same", {"x": None}]
    assert got.findings and all(f.rule == rule for f in got.findings)
    assert all(0 <= f.start < f.end <= len(arguments) for f in got.findings)


def test_only_the_strings_holding_a_secret_are_written_again() -> None:
    arguments = '{"a":  "keep\\u00e9 as is",  "b": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}'
    got = redact_arguments(arguments, POLICY)
    assert got.text == '{"a":  "keep\\u00e9 as is",  "b": "token [REDACTED:github_token]"}'
    start = arguments.index("ghp_")
    assert [(f.start, f.end) for f in got.findings] == [(start, start + 40)]


def test_arguments_that_are_not_json_are_scanned_as_text() -> None:
    got = redact_arguments("curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx' x", POLICY)
    assert got.text == "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' x"
    assert redact_arguments('{"clean": true}', POLICY).findings == ()


def test_a_reply_reports_offsets_over_its_text_then_each_calls_arguments() -> None:
    text = "key AKIAQWERTYUIOPASDFGH"
    arguments = ['{"k": "AKIAQWERTYUIOPASDFGH"}', "x AKIAQWERTYUIOPASDFGH"]
    said, shown = redact_reply(text, arguments, POLICY)
    whole = "\n".join([text, *arguments])
    assert [whole[f.start:f.end] for f in said.findings] == ["AKIAQWERTYUIOPASDFGH"] * 3
    assert said.text == "key [REDACTED:aws_access_key_id]"
    assert shown == ('{"k": "[REDACTED:aws_access_key_id]"}', "x [REDACTED:aws_access_key_id]")


def test_a_string_with_an_escaped_lone_surrogate_is_scanned_as_spelled() -> None:
    # the decoded value cannot be encoded (the scan raised UnicodeEncodeError on every build)
    arguments = '{"a": "\\ud83d token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}'
    got = redact_arguments(arguments, POLICY)
    assert got.text == '{"a": "\\ud83d token [REDACTED:github_token]"}'
    assert json.loads(got.text)["a"].endswith("[REDACTED:github_token]")


@pytest.mark.parametrize(("arguments", "kept"), [
    ('{"username": "bob", "password": "Tr0ub4dor&3-horse", "api_key": "k3y-9f8e7d6c5b4a"}', "bob"),
    ('{"auth": {"password": "x\\"y-zzzzzz"}, "n": 1}', None),
    ('{"env": {"DB_PASSWORD": "correct horse battery staple"}}', None),
])
def test_a_key_beside_its_value_is_seen_as_the_json_shows_it(arguments: str, kept: str | None) -> None:
    """Scanned string by string, ``"password"`` and its value were never together: a login call
    went out with the password in clear (review). The JSON text is scanned as a whole too."""
    got = redact_arguments(arguments, POLICY)
    value = json.loads(got.text)
    shown = json.dumps(value)
    assert "Tr0ub4dor" not in shown and "zzzzzz" not in shown and "battery" not in shown
    assert "[REDACTED:secret_assignment]" in shown and got.findings
    assert kept is None or kept in shown


def test_neither_scan_stands_for_the_other_without_escapes() -> None:
    """A whole-text scan that finds nothing in escape-free JSON did not prove the strings clean
    (review): a rejected label match consumed the assignment inside it, a quoted passphrase
    needs the line to end after its quote, an anchored custom rule needs the string alone."""
    from contextfold.projections.redact import policy_from

    label = json.dumps({"password": "use token=Zq8fK2mN9pL4xR7tW3b", "user": "bob"})
    assert "Zq8fK2mN9pL4xR7tW3b" not in redact_arguments(label, POLICY).text
    quoted = json.dumps({"line": "db_password: 'correct horse battery staple'"})
    assert "battery" not in redact_arguments(quoted, POLICY).text
    card = policy_from(deny={"card": r"^\d{16}$"})
    assert json.loads(redact_arguments('{"card": "4111111111111111"}', card).text) == {
        "card": "[REDACTED:custom:card]"}


def test_secret_keys_stay_distinct_and_a_bare_value_is_replaced() -> None:
    two = '{"ghp_' + "A" * 36 + '": "x", "ghp_' + "B" * 36 + '": "y"}'
    assert sorted(json.loads(redact_arguments(two, POLICY).text).values()) == ["x", "y"]  # no value lost
    number = '{"api_key": 1234567890.9876543210e+12, "n": 3}'
    got = redact_arguments(number, POLICY)
    assert json.loads(got.text) == {"api_key": "[REDACTED:secret_assignment]", "n": 3} and got.findings


@pytest.mark.parametrize("arguments", [
    '{"pass\\u0077ord": "Hunter2Xyz9"}',
    '[{"name": "DB_PASSWORD", "value": "Hunter2Xyz9"}, {"name": "MODE", "value": "fast"}]',
    '{"argv": ["psql", "--password", "Hunter2Xyz9"]}',
    '{"env": [{"Name": "API_TOKEN", "Value": "Hunter2Xyz9"}], "a": "\\ud83d"}',
])
def test_a_secret_the_json_text_does_not_spell_is_found_in_how_a_runtime_reads_it(arguments: str) -> None:
    """An escaped key, an environment of name/value pairs, an argv list: the key and its value are
    never side by side in the JSON text (second review)."""
    got = redact_arguments(arguments, POLICY)
    assert "Hunter2Xyz9" not in json.dumps(json.loads(got.text)) and got.findings
    assert "fast" in got.text or "fast" not in arguments  # nothing else struck out


def test_arguments_nested_past_the_parsers_limit_are_scanned_as_text() -> None:
    """``{"a": [[[...]]]}`` 1500 deep was accepted on append, then json.loads raised RecursionError
    (no ValueError) in every build of the run."""
    token = "ghp_" + "A1b2C3d4" * 5
    arguments = '{"token": "' + token + '", "a": ' + "[" * 1500 + "]" * 1500 + "}"
    got = redact_arguments(arguments, POLICY)
    assert token not in got.text and got.text.endswith("[" * 1500 + "]" * 1500 + "}")
    assert [arguments[f.start:f.end] for f in got.findings] == [token]


def test_the_views_of_deeply_nested_arguments_do_not_recurse() -> None:
    """A value the parser takes (it stops near 1000 levels) was walked by a recursive ``_views``
    one Python frame per level, past the interpreter's limit."""
    from contextfold.projections.redact_calls import _views

    value: object = ["--password", "hunter2hunter2"]
    for _ in range(5000):
        value = [value, {"name": "DB_PASSWORD", "value": "x"}]
    out: list[str] = []
    _views(value, out)
    # document order: the innermost list comes first, then each level's pair, inside out
    assert out == ["--password hunter2hunter2", "--password=hunter2hunter2", *["DB_PASSWORD=x"] * 5000]
