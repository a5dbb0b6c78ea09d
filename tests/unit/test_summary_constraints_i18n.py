"""A long user message's constraint sentences survive a summary in the languages agents are told
things in (``summary_text.CONSTRAINT_LINE``, :func:`user_statement`).

Why: the deterministic summary keeps, of a user message over ``USER_CHARS``, its opening and the
sentences that state a constraint. The most common Japanese and Korean prohibitions ("-te wa
ikemasen", "-naide kudasai" after a verb other than suru; "-ji maseyo" after a verb other than
hada, "jeoldae") and Chinese "yanjin" (strictly forbidden) were not recognised, so after
``compact --strategy summary`` the constraint was gone from every later request."""

from __future__ import annotations

import pytest

from contextfold.projections.summary_text import USER_CHARS, user_statement

FILLER = {
    "en": "Background of the project, lots of unrelated description. ",
    "zh": "项目背景说明，这里有很多无关的描述文字。",
    "ja": "プロジェクトの背景説明です。関係のない説明が続きます。",
    "ko": "프로젝트 배경 설명입니다. 관련 없는 설명이 계속됩니다. ",
}


@pytest.mark.parametrize(("lang", "rule"), [
    ("en", "You must not modify the files under tests/."),
    ("zh", "不要修改 tests/ 目录下的文件。"),
    ("zh", "严禁修改数据库迁移脚本。"),
    ("zh", "不准删除任何用户数据。"),
    ("ja", "tests/ 以下のファイルを変更してはいけません。"),
    ("ja", "tests/ 以下のファイルには触らないでください。"),
    ("ja", "本番データベースに書き込んではならない。"),
    ("ko", "tests/ 아래의 파일은 절대 바꾸지 마세요."),
    ("ko", "운영 데이터베이스는 수정하지 말고 보고만 하세요."),
    ("ko", "공개 API를 바꾸면 안 됩니다."),
])
def test_a_constraint_sentence_is_kept_from_a_long_message(lang: str, rule: str) -> None:
    filler = FILLER[lang] * (USER_CHARS // len(FILLER[lang]) + 2)
    message = filler + rule + " " + filler
    assert len(message) > 2 * USER_CHARS
    kept = user_statement(message, "event://r/5")
    assert rule.rstrip("。.") in kept


@pytest.mark.parametrize("lang", sorted(FILLER))
def test_the_filler_alone_states_no_constraint(lang: str) -> None:
    """The words added do not turn ordinary sentences into constraints."""
    filler = FILLER[lang] * (USER_CHARS // len(FILLER[lang]) + 2)
    kept = user_statement(filler + filler, "event://r/5")
    assert "…" not in kept  # nothing after the opening was picked out as a constraint
