"""A words cut moves to a word break only nearby (``truncate_words._word_end`` / ``_word_start``).

Chinese and Japanese prose has no spaces between words: a one-line page with a space only in
its title and its footer was cut back to the title and forward to the footer, however far, and a
grant of thousands of tokens sent a few dozen. The ends now move to a space or a CJK stop
(。，！？；：、, U+3000) within a few characters, else stay at a grapheme cluster boundary.
"""

from __future__ import annotations

import pytest

from contextfold.projections.diagnose import lean_log
from contextfold.projections.graphemes import ceil_boundary, floor_boundary
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate
from tests.counters import Counter, cl100k, quarter
from tests.unit.test_grapheme_cuts import kept_chars, words_ends

_ZH = "这是从网页中提取的正文内容，包含了关于系统架构设计的详细说明，以及部署步骤和注意事项。"
_PAGE = "标题: 部署指南 " + _ZH * 300 + " 来源: example.com"
_JA = "これはウェブページから抽出した本文で、システム構成の詳細な説明を含みます。"
_STOPS = "。，！？；：、"


@pytest.mark.parametrize("budget", [300, 2_000, 4_900])
def test_a_one_line_cjk_page_keeps_about_its_whole_grant(budget: int) -> None:
    result = truncate(_PAGE, budget, kind="text", count=cl100k)
    assert result.strategy == "words"
    assert budget * 0.9 <= result.tokens <= budget  # on main: 23 tokens of 4,900
    head, tail = words_ends(_PAGE, result)
    assert _PAGE[head - 1] in _STOPS and _PAGE[tail - 1] in _STOPS  # a clause ends, one starts


def test_japanese_and_ideographic_spaces_are_breaks_too() -> None:
    text = "見出し" + _JA * 200 + "\u3000".join(["終わり"] * 40)
    result = truncate(text, 500, kind="log", count=cl100k)
    head, tail = words_ends(text, result)
    assert text[head - 1] in "、。" and (text[tail - 1] == "\u3000" or text[tail - 1] in "、。")
    assert result.tokens >= 450


def test_a_word_longer_than_the_reach_is_cut_at_a_cluster_not_dropped() -> None:
    """A token of thousands of characters (base64, a minified line) between two words: the
    head was the first word alone, the tail the last."""
    text = "blob: " + "QUJD" * 2_000 + "e\u0301" * 500 + " end"
    result = truncate(text, 400, kind="text", count=cl100k)
    head, tail = words_ends(text, result)
    assert head > 100 and len(text) - tail > 100 and result.tokens >= 360
    assert floor_boundary(text, head) == head and ceil_boundary(text, tail) == tail


def test_english_words_still_end_and_start_at_spaces() -> None:
    text = "Please summarise the report below. " + " ".join(f"word{i}" for i in range(4_000))
    for budget in (20, 200, 900):
        result = truncate(text, budget, kind="text", count=cl100k)
        head, tail = words_ends(text, result)
        assert text[head] == " " and text[tail - 1] == " "


@pytest.mark.parametrize("count", [quarter, cl100k])
def test_cjk_cuts_keep_more_for_more(count: Counter) -> None:
    text = "标题 " + (_ZH + _JA) * 12 + " 尾"
    kept = [kept_chars(text, truncate(text, budget, kind="text", count=count))
            for budget in range(0, count(text) + 1, 7)]
    assert kept == sorted(kept)


def test_a_one_line_cjk_log_keeps_its_grant_beside_the_diagnosis() -> None:
    """``diagnose._char_excerpt`` cuts the log with the words strategy."""
    counter = get_counter("cl100k_base")
    log = "构建 失败 " + _ZH * 300 + " 完成"
    result = lean_log(log, 1, 2_000, counter.count)
    assert result.unit == "char" and 1_800 <= result.tokens <= 2_000
