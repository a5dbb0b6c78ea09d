"""A secret a JSON tool output spells with escapes (``\\/``, ``\\u0041``) is redacted as the JSON
means it: a cut of the output writes the JSON again with those escapes undone, and the model
reads them as the characters they stand for either way.

Found by the hostile-bytes hunt: PHP's ``json_encode`` writes every ``/`` as ``\\/``, so a URL
with its password read ``https:\\/\\/user:pass@host`` and the ``url_password`` rule saw no
``://``; a JSON cut (the result over its grant) wrote the URL back with plain slashes and sent the
password with no redaction recorded. The same for a token whose one letter was ``\\u``-escaped
and for a key spelled ``"pass\\u0077ord"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.projections.redact import RedactionPolicy, redact
from contextfold.projections.redact_escapes import redact_json_escapes
from contextfold.projections.render.validate import PROVIDERS

PASSWORD = "S3cretPassw0rd-9x"
TOKEN = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
VALUE = "Zq8fK2mW9xLp4vR7"
POLICY = RedactionPolicy()


def _escaped_outputs() -> list[tuple[str, str]]:
    """(tool output, the secret it hides behind escapes): a list of 300 records, so a small
    window cuts it as JSON."""
    filler = [{"id": i, "note": "filler text " * 4} for i in range(300)]
    url = json.dumps([{"url": f"https://deploy:{PASSWORD}@db.example.com/app"}, *filler]).replace("/", "\\/")
    token = json.dumps([{"data": TOKEN}, *filler]).replace("ghp_A", "ghp_\\u0041")
    key = json.dumps([{"pass\u0077ord": VALUE}, *filler]).replace('"password"', '"pass\\u0077ord"')
    return [(url, PASSWORD), (token, TOKEN), (key, VALUE)]


@pytest.fixture
def leaky_url(store_url: str) -> Iterator[str]:
    with open_store(store_url) as store:
        run = store.run("escaped")
        outputs = _escaped_outputs()
        run.append(UserInput("read the configs"))
        run.append(ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="read", arguments="{}")
                                             for i in range(len(outputs))]))
        for i, (content, _) in enumerate(outputs):
            assert not redact(content, POLICY).findings  # hidden from a scan of the text as written
            run.append(ToolResult(call_id=f"c{i}", content=content))
        run.append(UserInput("summarize"))
    yield store_url


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("window", [400_000, 6_000])  # whole, and cut as JSON
def test_an_escaped_secret_in_json_output_never_reaches_a_request(leaky_url: str, provider: str,
                                                                  window: int) -> None:
    with open_store(leaky_url) as store:
        built = store.run("escaped").build(provider=provider, window=window, reserve=500)
    texts = list(_strings(json.loads(built.body_bytes)))
    shown = "\n".join(texts)
    # what the model reads: the request's texts, and any JSON among them with its escapes undone
    decoded = "\n".join(json.dumps(json.loads(t), ensure_ascii=False) for t in texts
                        if t.lstrip()[:1] in ("[", "{") and _parses(t))
    for _, secret in _escaped_outputs():
        assert secret not in shown and secret not in decoded, (provider, window, secret)
    assert window > 6_000 or built.manifest.truncations  # the small window did cut
    found = {(r.fragment_id, r.rule) for r in built.manifest.redactions}
    assert {rule for _, rule in found} >= {"url_password", "github_token"}
    assert len({fid for fid, _ in found}) == 3


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_json_without_a_hidden_secret_is_left_as_written() -> None:
    """Escapes alone change nothing: the text (and so the request) is the one logged."""
    text = '{"path": "C:\\\\temp\\/x", "caf\\u00e9": "line\\nnext", "k": "\\ud83d"}'
    assert redact_json_escapes(text, POLICY).text == text
    assert redact_json_escapes(text, POLICY).findings == ()


def test_a_string_with_a_hidden_secret_is_written_again_and_the_json_still_parses() -> None:
    text = ('{"keep": "as\\u00e9 \\/ is", "url": "https:\\/\\/u:' + PASSWORD
            + '@h.example.com\\/x", "n": 1}')
    got = redact_json_escapes(text, POLICY)
    value = json.loads(got.text)
    assert value == {"keep": "asé / is", "url": "https://u:[REDACTED:url_password]@h.example.com/x", "n": 1}
    assert got.text.startswith('{"keep": "as\\u00e9 \\/ is", ')  # the other strings as written
    start = text.index('"https:') + 1
    assert [(f.rule, f.start, f.end) for f in got.findings] == [("url_password", start, text.index('", "n"'))]


def test_a_secret_seen_without_escapes_is_redacted_as_before() -> None:
    text = '{"a": "x\\ny", "url": "https://u:' + PASSWORD + '@h.example.com/x"}'
    got = redact_json_escapes(text, POLICY)
    assert got.text == '{"a": "x\\ny", "url": "https://u:[REDACTED:url_password]@h.example.com/x"}'
