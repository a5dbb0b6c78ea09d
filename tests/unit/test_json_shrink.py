"""JSON truncation by pieces: the word-end split is exact, and the pieces give the same cuts.

Why: ``JsonPieces`` counts a render by chunks cut after ASCII letters and digits (a rule
derived from cl100k_base's pre-tokenizer, ``LineSplitting.word_ends``) and lays renders out
from kept subtree texts; a wrong split or a wrong piece would change what the model sees, or
put a request over budget. So the rule is checked against tiktoken itself on random texts, and
every cut against the same cut counted whole (the path taken without the rule).
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.domain.canonical import orjson_writes_the_same
from contextfold.projections import json_pieces
from contextfold.projections import truncate as truncate_module
from contextfold.projections.json_pieces import _WORD_END as WORD_END
from contextfold.projections.json_pieces import JsonPieces, pieces_apply
from contextfold.projections.json_shrink import ShrinkStats, dump, saturations, shrink, size_knob_max
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate

COUNTER = get_counter("cl100k_base")
ENCODE = COUNTER._encoding.encode_ordinary

_ALPHABET = [*"abcXYZ019 _-'\".,:;{}[]()\n\r\t\\/|@#$%&*+=<>?!~`^",
             "é", "ß", "ı", "İ", "ſ", "K", "٣", "²", "一", "😀", "\u00a0", "\u2028", "'s", "'ll", "'VE", "’"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET) | st.text(max_size=4), max_size=40).map("".join))
def test_a_text_cut_after_a_word_end_counts_as_its_two_parts(text: str) -> None:
    """Every split ``JsonPieces`` may use (after an ASCII letter or digit that an ASCII character
    of neither kind follows) splits cl100k_base's pieces: the parts' counts add up."""
    assert COUNTER.line_splitting is not None and COUNTER.line_splitting.word_ends
    whole = len(ENCODE(text))
    for m in WORD_END.finditer(text):
        at = m.end()
        assert len(ENCODE(text[:at])) + len(ENCODE(text[at:])) == whole, (text, at)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET) | st.text(max_size=4), max_size=120).map("".join), st.booleans())
def test_a_chunk_ends_after_the_last_word_end_of_its_window(text: str, ends_value: bool) -> None:
    """``_split_of`` finds the last word end with one backward-greedy search: the same position as
    the last of every word end in the window, found one by one."""
    if ends_value and text and text[-1].isascii() and text[-1].isalnum():
        want: int | None = len(text)
    else:
        want = None
        for m in WORD_END.finditer(text, max(0, len(text) - json_pieces._SPLIT_WINDOW)):
            want = m.end()
    assert json_pieces._split_of(text, ends_value) == want


def test_word_ends_add_up_on_real_json() -> None:
    rng = random.Random(5)
    rows = [{"id": f"INV{i:05d}", "n": rng.randint(-10**6, 10**6),
             "x": rng.random() * 10 ** rng.randint(-8, 20), "tags": ["a", "b c", "d'll", "ü"],
             "ok": rng.random() < 0.5, "none": None,
             "note": "".join(rng.choice("ab c\n'\"\\é😀") for _ in range(rng.randint(0, 30)))}
            for i in range(300)]
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    cuts = [m.end() for m in WORD_END.finditer(text)]
    parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert len(parts) > 1000
    assert sum(len(ENCODE(p)) for p in parts) == len(ENCODE(text))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=6), inner, max_size=40),
    max_leaves=300,
)


def assert_pieces_are_the_shrink(parsed: Any, knobs: list[int]) -> None:
    """At each knob, the pieces lay out :func:`shrink`'s dump exactly (text, stats, tokens)."""
    pieces = JsonPieces(parsed, COUNTER.count, lambda t: t)
    for knob in knobs:
        want_stats, got_stats = ShrinkStats(), ShrinkStats()
        want = dump(shrink(parsed, knob, want_stats, top=True))
        atoms = pieces.atoms(knob, got_stats)
        assert pieces.text(atoms) == want
        assert (got_stats.omitted, got_stats.omitted_chars, got_stats.kept) == (
            want_stats.omitted, want_stats.omitted_chars, want_stats.kept)
        assert pieces.tokens(atoms) == COUNTER.count(want)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, knobs=st.lists(st.integers(0, 400), min_size=1, max_size=6))
def test_pieces_lay_out_the_shrunk_value_and_count_it(value: Any, knobs: list[int]) -> None:
    text = json.dumps(value, ensure_ascii=False)
    if not pieces_apply(text):
        return
    parsed = json.loads(text)
    records_from = json_pieces._RECORDS_FROM
    for shortest_run in (records_from, 2):  # arrays laid out item by item, and in runs
        json_pieces._RECORDS_FROM = shortest_run
        try:
            assert_pieces_are_the_shrink(parsed, knobs)
        finally:
            json_pieces._RECORDS_FROM = records_from


@settings(max_examples=300, deadline=None)
@given(value=json_values, surrogate=st.booleans(),
       knobs=st.lists(st.integers(0, 12) | st.integers(0, 400), min_size=1, max_size=8))
def test_subtrees_kept_whole_are_not_walked_and_render_the_same(value: Any, knobs: list[int],
                                                                surrogate: bool) -> None:
    """``shrink`` with the value's saturations returns the subtrees a knob keeps whole as they
    are, and ``dump`` trusts orjson when its source passed the check: the same text and stats
    as the full walk, knob by knob (a lone surrogate included: orjson refuses it)."""
    text = json.dumps([value, "\ud800 lone"] if surrogate else value)
    parsed = json.loads(text)
    saturated = saturations(parsed)
    assert saturated[id(parsed)] == size_knob_max(parsed)
    safe = orjson_writes_the_same(parsed)
    edges = sorted({e for sat in saturated.values() for e in (sat - 1, sat) if e >= 0})  # whole from here
    for knob in [*knobs, *edges[:30]]:
        want_stats, got_stats = ShrinkStats(), ShrinkStats()
        want = dump(shrink(parsed, knob, want_stats, top=True))
        got = dump(shrink(parsed, knob, got_stats, top=True, saturated=saturated), safe)
        assert got == want
        assert (got_stats.omitted, got_stats.omitted_chars, got_stats.kept) == (
            want_stats.omitted, want_stats.omitted_chars, want_stats.kept)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, budgets=st.lists(st.integers(0, 3000), min_size=1, max_size=4),
       indent=st.none() | st.just(2))
def test_json_cuts_by_pieces_equal_cuts_counted_whole(value: Any, budgets: list[int],
                                                       indent: int | None) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    for budget in budgets:
        smallest = truncate_module._JSON_PIECES_FROM
        truncate_module._JSON_PIECES_FROM = 0  # these values are small: by pieces all the same
        truncate_module._PROBES.clear()  # (an entry made without pieces would be reused)
        try:
            by_pieces = truncate(text, budget, kind="json", count=COUNTER.count,
                                 line_splitting=COUNTER.line_splitting)
        finally:
            truncate_module._JSON_PIECES_FROM = smallest
        truncate_module._PROBES.clear()
        whole = truncate(text, budget, kind="json", count=COUNTER.count, line_splitting=None)
        assert by_pieces == whole
        assert by_pieces.over_budget or by_pieces.tokens == COUNTER.count(by_pieces.text) <= budget


def test_a_big_array_cut_again_and_again_is_the_same_as_cut_fresh() -> None:
    """The shape the pieces are for (a long array of records, cut at one size after another as
    a run's window slides): each cut equals the one made with nothing remembered."""
    rng = random.Random(3)
    rows = [{"id": f"INV{i:05d}", "status": rng.choice(["paid", "pending"]),
             "price": round(rng.random() * 1000, 2), "tags": ["a", "b"], "note": "x" * rng.randint(0, 80)}
            for i in range(3000)]
    text = json.dumps(rows, indent=2)
    budgets = [20_000, 19_500, 19_000, 4_000, 12_345]
    again = [truncate(text, b, kind="json", count=COUNTER.count, line_splitting=COUNTER.line_splitting)
             for b in budgets]
    for b, got in zip(budgets, again, strict=True):
        truncate_module._PROBES.clear()
        assert got == truncate(text, b, kind="json", count=COUNTER.count, line_splitting=None)
        assert got.strategy == "json" and got.tokens <= b


def test_threads_cutting_one_big_array_at_once_get_the_cuts_made_alone() -> None:
    """The pieces of one input are shared by the whole process: threads cutting it at once (a
    server building several runs' requests) must each get the cut a lone caller gets."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(8)
    rows = [{"id": i, "name": f"row {i}", "v": rng.random()} for i in range(2000)]
    text = json.dumps(rows)
    budgets = [9_000, 8_800, 8_600, 3_000, 2_900, 7_777, 8_000, 1_000]
    alone = {}
    for b in budgets:
        truncate_module._PROBES.clear()
        alone[b] = truncate(text, b, kind="json", count=COUNTER.count, line_splitting=None)
    for _ in range(3):
        truncate_module._PROBES.clear()
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda b: truncate(text, b, kind="json", count=COUNTER.count,
                                                   line_splitting=COUNTER.line_splitting), budgets))
        assert got == [alone[b] for b in budgets]
