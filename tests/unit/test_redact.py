"""Secret redaction: a corpus of credential shapes that must go, and look-alikes that must stay.

Every secret is synthetic (random characters in the provider's format). Each
case is ``(context line with {s} where the secret sits, secret, rule)``; the
look-alikes are whole lines that must come through byte-identical.
"""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import InvalidInputError
from contextfold.projections.redact import (
    ASCII_FOLDS,
    DOCUMENTED_EXAMPLES,
    RULE_NAMES,
    RULES,
    find_secrets,
    placeholder,
    policy_from,
    redact,
)
from contextfold.projections.redact import _span as _span

_PEM_BODY = ("MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
             "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
             "LxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+\n")

SECRETS: list[tuple[str, str, str]] = [
    ("aws_access_key_id={s}", "AKIAZ7Q3B4N5K6L7M8P9", "aws_access_key_id"),
    ("export AWS_ACCESS_KEY_ID={s}", "ASIAY34FZKBOKMUTVV7A", "aws_access_key_id"),
    ("aws_secret_access_key = {s}", "Zk3q9vR2mXw8Lp4Tn7Yb1Hc6Fd5Gs0Ja2Ke9Uv3W", "aws_secret_access_key"),
    ('"AWS_SECRET_ACCESS_KEY": "{s}"', "h7Gk2LmP9qRs4TvW8xYz1AbC3dEf5GhI6jKl0MnO", "aws_secret_access_key"),
    ("git remote set-url origin https://{s}@github.com/acme/app", "ghp_4fT9kLm2Qx7Rv1Zp8Wb3Nc6Yd0Hs5Jg2Ka9E",
     "github_token"),
    ("GH_TOKEN={s}", "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789"
     "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234", "github_token"),
    ("token: {s}", "ghs_16C7e42F292c6912E7710c838347Ae178B4a", "github_token"),
    ("CI_JOB={s}", "glpat-xY7z9KqL2mN4pR6sT8vW", "gitlab_token"),
    ("slack: {s}", "xoxb-2648194657-5012348712345-Rk8fJq2LmZx9WvT4pN7bYc3D", "slack_token"),
    ("webhook {s}", "https://hooks.slack.com/services/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",
     "slack_webhook"),
    ("stripe.api_key = {s}", "sk_live_51HqLyjWDarjtT1zdp7dcXk3m9Q2Rt8Vn", "stripe_key"),
    ("key {s}", "rk_test_4eC39HqLyjWDarjtT1zdp7dc9Xk3m", "stripe_key"),
    ("OPENAI_API_KEY={s}", "sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3k", "openai_api_key"),
    ("client = OpenAI(api_key={s})", "sk-4Kq8Vn2Lp6Rt0Xz3Bw7Ym1Cd5Fh9Jg2Ns6Qa0We8Ty", "openai_api_key"),
    ("x-api-key: {s}", "sk-ant-api03-Rk8fJq2LmZx9WvT4pN7bYc3DhG5sK1aE6uI0oP_QwErTyU-AsDfGhJkL",
     "anthropic_api_key"),
    ("maps key {s}", "AIzaSyD4kL9mQ2xR7vT1nP8wB3cZ6yH0jF5gK2s", "google_api_key"),
    ("oauth {s}", "ya29.a0AfH6SMBx7kL2mQ9vR4tN1pW8cZ3yH6jF0gK5sD2aE7uI", "google_oauth_token"),
    ("cookie session={s}", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
     "eyJzdWIiOiIxMjM0NTY3ODkwIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "jwt"),
    ("curl -H 'Authorization: Bearer {s}' https://api.acme.dev", "f8Kq2LmZx9WvT4pN7bYc3DhG5sK1aE6u",
     "bearer_token"),
    ("Authorization: Basic {s}", "YWxhZGRpbjpvcGVuc2VzYW1lMTIzNDU2", "bearer_token"),
    ("{s}", "-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY + "-----END RSA PRIVATE KEY-----", "private_key"),
    ("key.pem: {s}",
     "-----BEGIN OPENSSH PRIVATE KEY-----\n" + _PEM_BODY + "-----END OPENSSH PRIVATE KEY-----",
     "private_key"),
    ("DATABASE_URL=postgres://app:{s}@db.internal:5432/prod", "Tr0ub4dor&3xyz", "url_password"),
    ("redis://default:{s}@cache:6379/0", "n0tS0S3cr3t!", "url_password"),
    ("DB_PASSWORD={s}", "hunter2hunter2", "secret_assignment"),
    ('{{"password": "{s}"}}', "c0rrect-h0rse-battery", "secret_assignment"),
    ("client_secret: {s}", "9f8e7d6c5b4aQwErTy", "secret_assignment"),
    ("export SENTRY_AUTH_TOKEN={s}", "sntrys_eyJpYXQiOjE3MDAwMDAwMDB9_k3Lq9Vx2", "secret_assignment"),
    ("signing_key = {s}", "Qm9vW2k3Lp7Rt1Xz5Bn8Cv4Df6Gh0Jk2", "high_entropy_assignment"),
    # quoted values run to their closing quote: escapes, doubled quotes and spaces included
    ('{{"user": "bob", "password": "{s}", "host": "db1"}}', 'Tr0ub4dor\\"&3-xyzzy!Q9', "secret_assignment"),
    ('DB_PASSWORD="{s}"', "correct horse battery staple", "secret_assignment"),
    ("export DB_PASSWORD='{s}'", "correct horse battery staple", "secret_assignment"),
    ("  db_password: '{s}'  # prod", "it''s my dog rex 1999", "secret_assignment"),
    ('PGPASSWORD="{s}" psql -h db', "tr0ub4dor and 3 more", "secret_assignment"),
    # a Markdown code span; a value on the next line, indented (YAML)
    ("the db password: `{s}`", "hunter2hunter2", "secret_assignment"),
    ("db_password:\n  {s}\nport: 5432", "s3cr3tV4lu3x", "secret_assignment"),
]

LOOKALIKES: list[str] = [
    "request id 3f2a1b9c-8d7e-4f5a-9b3c-2d1e0f9a8b7c completed",
    "commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a (HEAD -> main)",
    "cache_key=3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a9b8c7d6e5f4a3b2c1d0e9f8a",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "![img](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "AWS docs example: AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "DB_PASSWORD=${DB_PASSWORD}",
    "password: <your-password-here>",
    "api_key = os.environ['OPENAI_API_KEY']",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "max_tokens=4096",
    "input_tokens: 15234, output_tokens: 812",
    "PWD=/home/runner/work/app",
    "api_key: Optional[str] = None",
    "fun f(token: String, n: USize) => None",  # type annotations (a Pony source, a real trace)
    "def login(password: str, token: bytes) -> bool:",
    "fn auth(api_token: &str) -> Result<(), Error>",
    "token = self.token",
    "password = get_password()",
    "postgres://app:${PGPASSWORD}@db:5432/prod",
    "https://user@github.com/acme/app.git",
    "stripe publishable pk_live_51HqLyjWDarjtT1zdp7dcXk3m",
    "ghp_ prefix documented in the GitHub blog",
    "sk-learn is not scikit-learn",
    "Authorization: Bearer ${TOKEN}",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
    "-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "TOKENIZERS_PARALLELISM=false",
    "secret_santa_group = 12",
    "password_min_length = 12",
    "idempotency_key: 7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "eyJhbGciOiJIUzI1NiJ9 is a JWT header only",
    'print("password: " + pw + " was rejected")',
    'password: "at least eight characters" is required',
    '{"password_hint": "Enter your password", "token_help": "Paste the API token here."}',
    # a terminal's prompt, then its next output unindented (real traces: the flag an agent found)
    "hockeyinjune-virtual-machine login: \nPassword: \nLogin incorrect\n",
    "Password: \nflag{d316759c281bf925d600be698a4973d5}\n",
    "DB_PASSWORD=\nexport NEXT=1",
    # prose about a command in a code span (OpenHands' github microagent)
    "update the remote URL to include the current token: `git remote set-url origin "
    "https://${GITHUB_TOKEN}@github.com/username/repo.git`",
]


def _line(template: str, secret: str) -> str:
    return template.replace("{{", "{").replace("}}", "}").replace("{s}", secret) if "{{" in template \
        else template.replace("{s}", secret)


def test_corpus_sizes() -> None:
    assert len(SECRETS) >= 25 and len(LOOKALIKES) >= 25
    assert {rule for _, _, rule in SECRETS} <= RULE_NAMES


@pytest.mark.parametrize(("template", "secret", "rule"), SECRETS, ids=[f"{r}-{i}" for i, (_, _, r) in
                                                                       enumerate(SECRETS)])
def test_secret_is_redacted(template: str, secret: str, rule: str) -> None:
    text = _line(template, secret)
    result = redact(text)
    assert secret not in result.text
    assert placeholder(rule) in result.text
    [finding] = [f for f in result.findings if f.rule == rule]
    # offsets point at the secret in the original text (or a span covering it)
    assert finding.start <= text.index(secret) and finding.end >= text.index(secret) + len(secret)


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalike_is_kept(text: str) -> None:
    assert redact(text).text == text, find_secrets(text)


def test_placeholder_has_no_hash_and_is_deterministic() -> None:
    a = redact("DB_PASSWORD=hunter2hunter2").text
    b = redact("DB_PASSWORD=another-one-99").text
    assert a == b == "DB_PASSWORD=[REDACTED:secret_assignment]"


def test_unterminated_private_key_block_is_redacted_to_the_end_of_its_body() -> None:
    text = "before\n-----BEGIN EC PRIVATE KEY-----\n" + _PEM_BODY + "trailing words stay"
    out = redact(text).text
    assert "MIIEowIBAAKCAQEA" not in out and "LxoS2tFcz" not in out
    assert out.startswith("before\n[REDACTED:private_key]") and out.endswith("trailing words stay")


def test_json_escaped_private_key_is_redacted() -> None:
    text = ('{"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n'
            '-----END PRIVATE KEY-----\\n"}')
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in redact(text).text


def test_overlapping_findings_merge_so_nothing_of_the_secret_survives() -> None:
    jwt = SECRETS[17][1]
    text = f"Authorization: Bearer {jwt}"
    result = redact(text)
    assert len(result.findings) == 1 and jwt not in result.text
    assert not any(part in result.text for part in jwt.split("."))


def test_policy_disable_allow_deny_and_examples() -> None:
    text = "AKIAZ7Q3B4N5K6L7M8P9 and AKIAIOSFODNN7EXAMPLE and ticket INTERNAL-7731"
    assert "AKIAZ7Q3B4N5K6L7M8P9" in redact(text, policy_from(disabled=["aws_access_key_id"])).text
    assert "AKIAZ7Q3B4N5K6L7M8P9" in redact(text, policy_from(allow=[r"AKIAZ7.*"])).text
    assert "AKIAIOSFODNN7EXAMPLE" not in redact(text, policy_from(redact_examples=True)).text
    out = redact(text, policy_from(deny={"ticket": r"INTERNAL-\d+"})).text
    assert "INTERNAL-7731" not in out and "[REDACTED:custom:ticket]" in out


def test_a_redaction_option_that_is_not_a_regex_is_invalid_input() -> None:
    """BuildConfig(redact_deny={"x": "("}) or redact_allow=("[",) made every build raise a bare
    re.error from the regex compiler."""
    for policy, where in ((policy_from(deny={"ticket": "INTERNAL-("}), "redact_deny['ticket']"),
                          (policy_from(allow=["ok", "[abc"]), "redact_allow[1]")):
        with pytest.raises(InvalidInputError, match=re.escape(f"invalid build config: {where}: ")):
            redact("AKIAZ7Q3B4N5K6L7M8P9", policy)


def test_secret_in_a_big_log_is_found() -> None:
    log = "\n".join(f"2024-05-01T10:00:{i % 60:02d} INFO worker={i} processed batch in 12ms"
                    for i in range(20_000))
    result = redact(log + "\nDB_PASSWORD=hunter2hunter2\n" + log)
    assert "hunter2hunter2" not in result.text and len(result.findings) == 1


_HINT_PIECES = ["pass", "passw", "PASSWORD", "passwd", "passenger", "secret", "token", "TOKEN", "key",
                "api_key", "API-KEY", "credential", "auth", "gh", "ghp_", "GHS_", "github_pat_", "gl",
                "glpat-", "gldt-", "=", ":", ": ", '"', "'", " ", "\n", "_", "-", ".",
                "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0", "xY7z9KqL2mN4pR6sT8vW", "hunter2hunter2", "abc",
                "0123456789"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_HINT_PIECES), max_size=30).map("".join))
def test_rule_hints_are_necessary_for_a_match(text: str) -> None:
    """The hints only skip rules that cannot match: skipping never loses a finding."""
    for rule in RULES:
        if rule.hints and rule.pattern.search(text):
            assert any(h in text.lower() for h in rule.hints), (rule.name, text)


def test_rule_hints_hold_on_the_corpora() -> None:
    for text in [_line(t, s) for t, s, _ in SECRETS] + LOOKALIKES:
        for rule in RULES:
            if rule.hints and rule.pattern.search(text):
                assert any(h in text.lower() for h in rule.hints), (rule.name, text)


_NAME_PIECES = [*_HINT_PIECES, "Secret", "access_key", "PRIVATE-KEY", "auth-key", "CREDENTIALS", "cred",
                "signature", "KEY", "x.", "-token", "a_b", ":=", "=>", "$", "{", "}", "#", ",", "(",
                "\u017f", "\u212a", "\u0130", "\u00e9", "\t", "\u017fecret", "TO\u212aEN", "\u212aey"]
"""Name characters, keywords that overlap or share prefixes, separators, assignments, values,
and the non-ASCII letters a case-insensitive ``[A-Za-z]`` also matches (long s, Kelvin sign)."""


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_NAME_PIECES), max_size=40).map("".join))
def test_keyword_rules_find_exactly_what_their_regex_finds(text: str) -> None:
    """The assignment rules are tried only at the name starts around a keyword: that yields
    the same matches, in the same order, as scanning every position with the regex."""
    from contextfold.projections.redact_rules import keyword_matches

    ascii_lowered = text.lower().encode() if text.isascii() else None
    for rule in RULES:
        if rule.keyword is not None:
            expected = [(m.span(), m.groups()) for m in rule.pattern.finditer(text)]
            assert [(m.span(), m.groups()) for m in keyword_matches(rule, text, ascii_lowered)] == expected, (
                rule.name, text)


def _every_rule_raw(text: str, base: int) -> list[tuple[int, int, int, str]]:
    raw = []
    for priority, rule in enumerate(RULES):
        for m in rule.pattern.finditer(text):
            span = _span(m, rule.group)
            if span is None or span[0] == span[1]:
                continue
            value = text[span[0]:span[1]]
            if rule.check is not None and not rule.check(value):
                if len(value) < len(text):  # a refused value is scanned again on its own
                    raw += _every_rule_raw(value, base + span[0])
                continue
            if value not in DOCUMENTED_EXAMPLES:
                raw.append((base + span[0], -(base + span[1]), priority, rule.name))
    return raw


def _every_rule_everywhere(text: str) -> list[tuple[str, int, int]]:
    """``find_secrets`` without its pre-filters: every rule's regex over the whole text, with the
    same checks, the same rescan of a refused value on its own, and the same merge of overlaps."""
    raw = _every_rule_raw(text, 0)
    merged: list[tuple[str, int, int]] = []
    for start, neg_end, _, name in sorted(raw):
        if merged and start < merged[-1][2]:
            merged[-1] = (merged[-1][0], merged[-1][1], max(merged[-1][2], -neg_end))
            continue
        merged.append((name, start, -neg_end))
    return merged


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from([*_NAME_PIECES, "AKIA", "eyJ", "sk-", "sk-ant-api03-", "xoxb-", "://u:",
                                 "@h", "Bearer ", "Authorization: ", "hooks.slack.com/services/"]),
                max_size=40).map("".join))
def test_pre_filters_never_change_the_findings(text: str) -> None:
    """The hint automaton and the keyword starts only skip work: the findings are those of every
    rule tried at every position."""
    assert [(f.rule, f.start, f.end) for f in find_secrets(text)] == _every_rule_everywhere(text)


def test_pre_filters_never_change_the_findings_on_the_corpora() -> None:
    for text in [_line(t, s) for t, s, _ in SECRETS] + LOOKALIKES:
        assert [(f.rule, f.start, f.end) for f in find_secrets(text)] == _every_rule_everywhere(text)


def test_ascii_folds_are_every_character_a_case_insensitive_regex_takes_for_an_ascii_letter() -> None:
    letters = re.compile("(?i)[a-z]")
    found = {}
    for cp in range(128, 0x110000):
        if letters.fullmatch(chr(cp)):
            found[cp] = next(a for a in string.ascii_lowercase if re.fullmatch("(?i)" + a, chr(cp)))
    assert found == ASCII_FOLDS


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([*_NAME_PIECES, "apikey", "api_key", "api-key", "accesskey", "credentials",
                                 "privatekey", "authkey", "passwd", "password"]), max_size=30).map("".join))
def test_keyword_automata_find_what_the_keyword_regexes_find(text: str) -> None:
    """An ASCII text's keywords are found by an automaton of their spellings: the same hits
    (leftmost-first, non-overlapping) as the case-insensitive keyword regex."""
    if not text.isascii():
        return
    for rule in RULES:
        if rule.keyword is not None and rule.keyword_lower is not None:
            found = [(a, b) for _, a, b in rule.keyword_lower.find_matches_as_indexes(text.lower().encode())]
            assert found == [m.span() for m in rule.keyword.finditer(text)], (rule.name, text)


def test_a_credential_in_a_source_ref_reaches_neither_request_nor_manifest() -> None:
    """Secrets in content were replaced, but a source ref (a retrieved page's URL with a token in
    its user info, a memory's ?api_key=, a file read by URL) was shown verbatim in every data
    block's tag and in the manifest's fragments."""
    import json

    from contextfold.api import render_request
    from contextfold.domain.events import AnyEvent, EvidenceRetrieved, FileRead, MemoryRecalled, UserInput
    from contextfold.domain.log import RecordedEvent
    from contextfold.domain.manifest import BuildConfig
    from contextfold.projections.builder import build_context
    from contextfold.projections.fold import fold

    token = "ghp_" + "A1b2C3d4" * 5
    events: list[AnyEvent] = [
              UserInput("read the docs"),
              EvidenceRetrieved(content="install with pip", source_ref=f"https://x-access-token:{token}@github.com/o/r"),
              MemoryRecalled(memory_id="m1", content="user prefers tabs", source_ref=f"mem://store?api_key={token}"),
              FileRead(path=f"https://user:{token}@files.example.com/a.txt", content="hello")]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    for provider in ("openai-chat", "openai-responses", "anthropic", "gemini", "neutral"):
        built = build_context(state, BuildConfig(provider=provider, window=16_000), render=render_request)
        assert token not in built.body_bytes.decode(), provider
        assert token not in json.dumps(built.manifest.model_dump(mode="json")), provider
        assert {f.id for f in built.manifest.fragments} >= {"e2", "e3", "e4"}, provider


@pytest.mark.parametrize("secret", ['Tr0ub4dor"&3-xyzzy!Q9', "ends with a backslash \\", 'a "quoted" word 7',
                                    "tab\tand\nnewline 9x", "x\\\"y\\\\z"])
def test_a_json_string_value_is_redacted_whole_and_the_json_stays_valid(secret: str) -> None:
    """A JSON string value holding an escaped quote was cut at the backslash: the request got
    ``"[REDACTED:secret_assignment]"&3-xyzzy!Q9"``, invalid JSON with the secret's tail in clear."""
    import json

    text = json.dumps({"user": "bob", "password": secret, "host": "db1"})
    out = redact(text).text
    assert json.loads(out) == {"user": "bob", "password": placeholder("secret_assignment"), "host": "db1"}


@pytest.mark.parametrize(("line", "shown"), [
    ('DB_PASSWORD="correct horse battery staple"\nNEXT=1', 'DB_PASSWORD="{p}"\nNEXT=1'),
    ("password: 'it''s my dog rex'", "password: '{p}'"),
    ("PASSWORD='C:\\tmp\\'  # a shell string", "PASSWORD='{p}'  # a shell string"),
    ("api_token = 'abc\\'def 42'", "api_token = '{p}'"),
    ('connect(password="correct horse battery", host=h)', 'connect(password="{p}", host=h)'),
])
def test_quoted_values_are_redacted_up_to_their_closing_quote(line: str, shown: str) -> None:
    assert redact(line).text == shown.format(p=placeholder("secret_assignment"))


@settings(max_examples=1500, deadline=None)
@given(st.text(st.sampled_from([*"aZ9 !&#,;:.\\\"'{}[]()=\t\u00e9"]), min_size=1, max_size=30),
       st.sampled_from(["password", "DB_PASSWORD", "api_key", "client_secret"]))
def test_a_json_value_is_redacted_whole_or_kept_whole(value: str, name: str) -> None:
    """Whatever a JSON string value holds (escapes, quotes, spaces, separators): the text stays
    valid JSON, and the value is either the placeholder or itself."""
    import json

    out = json.loads(redact(json.dumps({name: value, "host": "db1"})).text)
    assert out["host"] == "db1" and out[name] in (value, placeholder("secret_assignment"))


def test_a_refused_match_does_not_hide_a_secret_inside_it() -> None:
    """The quoted value after ``password`` reads as a label (it holds the word "token"), and the
    refused match had consumed it: the ``token=`` assignment inside was never tried (review)."""
    text = '{"password": "use token=Zq8fK2mN9pL4xR7tW3b", "user": "bob"}'
    got = redact(text)
    assert "Zq8fK2mN9pL4xR7tW3b" not in got.text and got.findings
    assert [text[f.start:f.end] for f in got.findings] == ["Zq8fK2mN9pL4xR7tW3b"]
    labels = "password: 'Enter your password here' " * 200  # refused, rescanned, nothing inside
    assert redact(labels).text == labels


@pytest.mark.parametrize("text", [
    "ANTHROPIC_API_KEY=sk-ant-api03-Rk8fJq2LmZx9WvT4pN7bYc3DhG5sK1aE6uI0oP_QwErTyU-AsDfGhJkL",
    'config = {"password": "hunter2-Correct-Horse-9", "token": "ghp_16C7e42F292c6912E7710c838347Ae178B4a"}',
    "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Rt3Lm",
])
def test_redacting_redacted_text_changes_nothing(text: str) -> None:
    """A text redacted once and redacted again (a summary of redacted content, an audit masking
    what a build already masked) is the same text: a placeholder is no value. The assignment rule
    read ``KEY=[REDACTED:anthropic_api_key]`` up to the closing bracket, took the placeholder
    for a secret and wrote ``[REDACTED:secret_assignment]]``."""
    once = redact(text).text
    assert "[REDACTED:" in once
    assert redact(once).text == once
