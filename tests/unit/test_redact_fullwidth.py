"""Secrets assigned the way CJK input methods and web pages write it (``redact_patterns._ASSIGN``).

A Chinese or Japanese input method types ``＝`` (U+FF1D) and ``：`` (U+FF1A), and U+3000 for a
space; a line pasted from a web page or a wiki carries no-break spaces. ``DB_PASSWORD＝…`` was
sent to the provider in clear while ``DB_PASSWORD=…`` was redacted.
"""

from __future__ import annotations

import json

import pytest

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.projections.redact import redact

_SECRET = "Zq8fK2mPx9LwR4tYv7Nc"
_AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzzzzzKEY"


@pytest.mark.parametrize("line", [
    f"DB_PASSWORD＝{_SECRET}",
    f"API_TOKEN： {_SECRET}",
    f"SMTP_PASSWORD =\u00a0{_SECRET}",
    f"secret_key\u3000：\u3000{_SECRET}",
    f"client_secret\u202f=\u202f{_SECRET}",
    f'"api_key"：\u00a0"{_SECRET}"',
    f"SIGNING_KEY＝\n\u3000{_SECRET}",
    f"部署配置：DB_PASSWORD＝{_SECRET}，请勿外传。",
])
def test_a_secret_assigned_with_full_width_or_no_break_spaces_is_redacted(line: str) -> None:
    out = redact(line)
    assert _SECRET not in out.text and "[REDACTED:" in out.text


def test_the_aws_and_bearer_rules_take_full_width_operators_too() -> None:
    assert _AWS not in redact(f"AWS_SECRET_ACCESS_KEY：{_AWS}").text
    assert "dXNlcjpwYXNzd29yZA" not in redact("Authorization： Basic dXNlcjpwYXNzd29yZA==").text


def test_a_quoted_passphrase_after_a_full_width_equals_is_one_value() -> None:
    out = redact('DB_PASSWORD＝"correct horse battery staple"')
    assert out.text == 'DB_PASSWORD＝"[REDACTED:secret_assignment]"'


def test_a_value_ends_at_cjk_punctuation() -> None:
    """CJK prose puts no space after a value: the rest of the clause is not the secret."""
    hidden = "[REDACTED:secret_assignment]"
    assert redact(f"password＝{_SECRET}，然后重启服务。").text == f"password＝{hidden}，然后重启服务。"
    assert redact(f"token: {_SECRET}。下一步").text == f"token: {hidden}。下一步"


@pytest.mark.parametrize("prose", [
    "请先获取 token：在控制台的设置页面生成。",
    "配置 API_KEY：见下文说明",
    "token: 在控制台生成",
    "password：请联系管理员获取",
    "パスワード password：管理者に問い合わせてください",
    "API 키 api_key: 관리자에게 문의하세요",
])
def test_a_cjk_sentence_after_a_secret_word_is_no_secret(prose: str) -> None:
    assert redact(prose).text == prose


def test_a_full_width_env_snippet_is_not_sent_in_clear(tmp_path: object) -> None:
    out = f"部署配置如下：\nDB_PASSWORD＝{_SECRET}\nAWS_SECRET_ACCESS_KEY：{_AWS}\n请检查。\n"
    store = contextfold.open_store(f"sqlite:///{tmp_path}/r.db")
    try:
        run = store.run("fw")
        run.append(UserInput("读取部署配置"))
        run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="cat", arguments="{}")]))
        run.append(ToolResult(call_id="c1", content=out))
        body = json.dumps(run.build("openai-chat", window=20_000, reserve=2_000).request, ensure_ascii=False)
    finally:
        store.close()
    assert _SECRET not in body and _AWS not in body and "请检查。" in body
