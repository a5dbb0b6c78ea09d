"""How relevant each registered tool is to a query: Okapi BM25 over the tools' documents, and
which tools share a term with a text.

Relevance is Okapi BM25 (k1 = :data:`BM25_K1` = 1.2, b = :data:`BM25_B` =
0.75, the non-negative Lucene idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``).
A tool's document is its name (counted twice as a simple field boost: the name is the most telling
part), its description, its tags and its parameter names (nested properties included), cut into
terms by :func:`tool_terms.tokenize` (snake_case, camelCase, CJK bigrams...: that module says how
and why).

Apart from :mod:`~contextfold.projections.tool_exposure` because it is the retrieval, not the
exposure: that module's rules (policy, pinned, referenced, relevant, recent, toolkit, fallback)
take a score per tool from here, and ``tool_recency`` asks which tools an earlier input matched
(:func:`matching_tools`) without any rule. Each keeps the last registry's statistics (a run ranks
the same registry build after build), so the index lives with the scoring that reads it.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from contextfold.domain.events import ToolSpec
from contextfold.projections.tool_terms import tokenize, tool_document

__all__ = ["BM25_B", "BM25_K1", "bm25", "matching_tools", "rank_tools"]

BM25_K1 = 1.2
"""Term-frequency saturation: the usual Okapi default."""
BM25_B = 0.75
"""Document-length normalisation: the usual Okapi default."""


@dataclass(frozen=True, slots=True)
class _Index:
    """BM25 statistics of one registry: documents, lengths and postings (term -> tool names)."""

    specs: tuple[ToolSpec, ...]
    docs: dict[str, Counter[str]]
    lengths: dict[str, int]
    avgdl: float
    postings: dict[str, list[str]]


_INDEX: list[_Index] = []
"""The last registry's index: a run ranks the same registry build after build, for a new query
whenever its goal, ready step or latest input changes."""


def _index(specs: Sequence[ToolSpec]) -> _Index:
    key = tuple(specs)
    if _INDEX and len(_INDEX[0].specs) == len(key) and all(map(operator.is_, _INDEX[0].specs, key)):
        return _INDEX[0]
    docs = {spec.name: tool_document(spec) for spec in key}
    lengths = {name: sum(tf.values()) for name, tf in docs.items()}
    postings: dict[str, list[str]] = {}
    for name, tf in docs.items():  # in registry order, as the per-document loop visited them
        for term in tf:
            postings.setdefault(term, []).append(name)
    index = _Index(key, docs, lengths, sum(lengths.values()) / len(docs) if docs else 0.0, postings)
    _INDEX[:] = [index]
    return index


def bm25(specs: Sequence[ToolSpec], query: str) -> dict[str, float]:
    """Okapi BM25 of each spec for ``query``. Walks the postings of the query's terms only; each
    tool's score adds its terms in sorted order, as a loop over every (tool, term) pair would."""
    terms = sorted(set(tokenize(query)))
    if not terms:  # every score is 0: no index needed (a build with nothing to rank asks this)
        return {spec.name: 0.0 for spec in specs}
    index = _index(specs)
    docs = index.docs
    n = len(docs)
    if n == 0:
        return {}
    avgdl = index.avgdl or 1.0
    scores = dict.fromkeys(docs, 0.0)
    for t in terms:
        holders = index.postings.get(t, ())
        df = len(holders)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for name in holders:
            f = docs[name][t]
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * index.lengths[name] / avgdl)
            scores[name] += idf * f * (BM25_K1 + 1.0) / (f + norm)
    return scores


_TERMS: list[tuple[tuple[ToolSpec, ...], dict[str, list[str]]]] = []
"""The last registry's postings for :func:`matching_tools` (apart from :data:`_INDEX`: a build
ranks the registry it declares from, and asks this of the registered tools)."""


def matching_tools(specs: Sequence[ToolSpec], text: str) -> list[str]:
    """The names of ``specs`` whose BM25 document shares a term with ``text``: under the Lucene
    idf (positive for every term) exactly those a query of ``text`` scores above 0, whatever the
    registry's other documents (``tool_recency``)."""
    terms = set(tokenize(text))
    if not terms:
        return []
    key = tuple(specs)
    if not (_TERMS and len(_TERMS[0][0]) == len(key) and all(map(operator.is_, _TERMS[0][0], key))):
        postings: dict[str, list[str]] = {}
        for spec in key:
            for term in tool_document(spec):
                postings.setdefault(term, []).append(spec.name)
        _TERMS[:] = [(key, postings)]
    postings = _TERMS[0][1]
    return sorted({name for term in terms for name in postings.get(term, ())})


def rank_tools(tools: Sequence[ToolSpec], query: str) -> list[tuple[str, float]]:
    """Every registered tool with its BM25 score for ``query``, best first, ties by name."""
    scores = bm25(list({spec.name: spec for spec in tools}.values()), query)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))
