"""``visible_json``: JSON text safe to show on a terminal, the same JSON value."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contextfold.audit.text import visible_json

_HIDDEN = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)


@given(values, st.sampled_from([None, 2]))
def test_the_same_value_with_nothing_a_terminal_acts_on(value: Any, indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    shown = visible_json(text)
    assert json.loads(shown) == value
    assert [c for c in shown if c != "\n" and unicodedata.category(c) in _HIDDEN] == []
    assert [c for c in shown if not c.isascii()] == [c for c in text if not c.isascii()
                                                     and unicodedata.category(c) not in _HIDDEN]


def test_printable_text_is_left_as_it_is() -> None:
    text = json.dumps({"name": "全角 café", "n": [1, 2]}, ensure_ascii=False, indent=2)
    assert visible_json(text) == text
    assert visible_json('"a\u202eb\x9b\U000e0041"') == '"a\\u202eb\\u009b\\udb40\\udc41"'
