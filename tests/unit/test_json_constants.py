"""JSON holding NaN or Infinity (Python's ``json.dumps`` default) is cut as JSON, its tokens kept."""

from __future__ import annotations

import json
import math
import re

import pytest

from contextfold import ToolResult
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate
from tests.unit.test_json_blocks import cut_first_result

COUNTER = get_counter("cl100k_base")


def history(n: int) -> list[dict[str, float]]:
    rows = [{"epoch": i, "loss": 0.5 / (i + 1), "acc": 0.9} for i in range(n)]
    rows[0]["loss"] = float("nan")  # a diverged first step: kept in the head
    rows[1]["acc"] = float("inf")
    rows[-1]["loss"] = float("-inf")  # and the last: kept in the tail
    return rows


@pytest.mark.parametrize("pieces", [True, False], ids=["by-pieces", "whole"])
def test_nan_and_infinity_are_cut_as_json_and_written_back_as_they_were(pieces: bool) -> None:
    """``strict_json`` refused the constants, so the result was cut as characters: a document cut
    mid-object that no JSON reader (Python's included) parses."""
    text = json.dumps({"history": history(3_000)})
    result = truncate(text, 1_500, kind="json", count=COUNTER.count,
                      line_splitting=COUNTER.line_splitting if pieces else None)
    assert result.strategy == "json" and result.unit == "json_member" and result.tokens <= 1_500
    rows = json.loads(result.text)["history"]
    assert math.isnan(rows[0]["loss"]) and rows[1]["acc"] == math.inf and rows[-1]["loss"] == -math.inf
    tokens = re.findall(r"-?Infinity|NaN|null", result.text)
    assert tokens == ["NaN", "Infinity", "-Infinity"]  # as written, never null


def test_a_nan_document_that_fits_compacted_keeps_its_constants() -> None:
    text = json.dumps({"loss": float("nan"), "best": float("-inf"), "pad": list(range(20))}, indent=4)
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    result = truncate(text, COUNTER.count(compact), kind="json", count=COUNTER.count)
    assert not result.truncated and result.text == compact and "NaN" in result.text


def test_a_number_past_a_double_is_still_not_rewritten_as_infinity() -> None:
    text = json.dumps({"rows": [{"id": i, "note": "x" * 40, "loss": float("nan")} for i in range(200)]},
                      indent=1)
    text = text.replace('"id": 1,', '"id": 1e400,')
    result = truncate(text, 300, kind="json", count=COUNTER.count)
    assert result.strategy == "json" and "Infinity" not in result.text
    rows = json.loads(result.text)["rows"]
    assert '"id":1e400,' in result.text and math.isnan(rows[1]["loss"]) and rows[1]["id"] == math.inf


def test_a_failed_tool_s_nan_json_is_cut_as_json_not_as_a_log() -> None:
    """A JSON document stays JSON whatever the exit code: one holding NaN was read as not JSON
    and cut as a failing command's log."""
    cut, shown = cut_first_result(ToolResult(call_id="c1", content=json.dumps({"history": history(3_000)}),
                                             is_error=True, exit_code=1), 8_000)
    assert cut.strategy == "json"
    assert math.isnan(json.loads(shown)["history"][0]["loss"])
