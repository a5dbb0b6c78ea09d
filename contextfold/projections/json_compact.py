"""A JSON cut's first question, before the knob's search is set up: does the compact form fit?

Why apart from ``truncate``: the search needs the value's ``saturations`` (and, for a large text,
its pieces), built once per text; a text whose compact form fits needs neither, and 9 of a
tau-bench run's 141 first builds cut such a text (one written with ``json.dumps``' default
separators, ``", "`` and ``": "``), ~10k bytecodes each for what it did not use. The answer is
the search's (strategy ``none``, its render at the top knob, which is this very text), so
``truncate`` asks here first and keeps the search for the texts that need it.
"""

from __future__ import annotations

from typing import Any

from contextfold.projections.json_shrink import dump, whole_kept
from contextfold.projections.line_windows import kept_probe
from contextfold.projections.truncation_result import TokenCounter, Truncation, truncation_of

__all__ = ["PIECES_CHARS_PER_TOKEN", "compact_fits", "count_compact"]

PIECES_CHARS_PER_TOKEN = 4
"""A large text counted by pieces has its compact form counted whole first only up to this many
characters per token of the grant (JSON is ~3 a token): a larger one is not likely to fit, and a
whole count of it is what the pieces' bounded count spares (``JsonPieces.tokens_within``)."""


def count_compact(entry: dict[str, Any], text: str, value: Any, orjson_safe: bool, numbers: bool,
                   count: TokenCounter, within: int | None) -> int | None:
    """The count of ``text``'s compact form, counted before anything the knob's search needs is
    built (its ``saturations``, its pieces); the form is kept in ``entry``, the answer of every
    cut it fits (:func:`compact_fits`). ``None`` (nothing kept) for a form that is not ``text``
    and longer than ``within`` characters.

    Why: 9 of a tau-bench run's 141 first builds cut a text written with ``json.dumps``' default
    separators (``", "``, ``": "``) only to find its compact form fits (strategy ``none``),
    having built the search first: ~10k bytecodes each. The count is the search's: its render
    at the top knob is this very text, counted whole, or by pieces whose sum is the whole
    count (``json_pieces``) where it is at most twice the grant; past that the pieces' count
    is a bound, which decides every grant as the count does."""
    compact = dump(value, orjson_safe, numbers)
    if compact == text:  # compact already (most APIs' JSON): counted as the search counts it
        compact = text
    elif within is not None and len(compact) > within:
        return None
    else:
        kept_probe(compact)
    tokens = count(compact)
    entry["compact"] = (compact, tokens, "json_member" if isinstance(value, list | dict) else "char",
                        whole_kept(value))
    return tokens


def compact_fits(entry: dict[str, Any], text: str, original_tokens: int, max_tokens: int
                  ) -> Truncation | None:
    """The cut of ``text`` that is its compact form, when :func:`count_compact` kept it and it
    fits ``max_tokens``: what the search answers at its top knob (strategy ``none``)."""
    compact = entry.get("compact")
    if compact is None or compact[1] > max_tokens:
        return None
    out_text, tokens, unit, kept = compact
    return truncation_of(out_text, strategy="none", unit=unit, original=text,
                         original_tokens=original_tokens, tokens=tokens, kept=kept)
