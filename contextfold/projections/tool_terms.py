"""The terms tool exposure ranks by: a tool's BM25 document and a query, cut the same way.

Apart from ``tool_exposure`` (the rules and the ranking) to keep each module one subject's size;
``tool_exposure`` re-exports :func:`tokenize`.

Text is split on snake_case, camelCase, kebab-case and dots. Terms are
lower-cased, English stop words dropped, and a plural ``s``/``ies`` folded,
so "emails" matches "email". A camelCase word yields its parts and each two
neighbouring parts joined ("GitHub" is git, hub and github;
"GitHubOpenIssue" has github, hubopen and openissue too), on the query's side
and the tool's: a brand is written "GitHub" in a sentence and ``github`` in a
snake_case name, and with the parts alone "File a GitHub issue" never reached
``github_create_issue`` (nor GitLab, PagerDuty, HubSpot, BigQuery ...). Pairs,
not the whole word: a brand is two parts, and inside a camelCase identifier the
whole word would be one term no query writes.

Chinese and Japanese are written without spaces, and Korean glues particles to
its words ("주문을"): a run of Han, kana or hangul is one "word" to a split on
non-word characters, so "请帮我取消订单" never matched a tool described as "取消订单", and
"请在GitHub上创建一个issue" lost "github" and "issue" to its neighbours. With
no segmenter at hand, such a run is cut from the Latin around it and indexed
as overlapping character bigrams (a lone character as itself), the usual BM25
practice for CJK (Lucene's CJKBigramFilter): "取消订单" is 取消 消订 订单, and
the idf of a bigram does what a word's would. Thai, Lao, Khmer and Myanmar are
indexed the same way: they put no spaces between words either, and their vowel
signs are combining marks, on which a split on non-word characters cut a word
into pieces that depended on its neighbours. Text is NFKC-normalised first,
so full-width "ＧｉｔＨｕｂ" and half-width katakana read as their usual forms.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

from contextfold.domain.events import ToolSpec
from contextfold.projections.spec_memo import SpecAccount
from contextfold.projections.unicode_pins import pinned_nfkc

__all__ = ["tokenize", "tool_document"]

_STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "get",
    "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on",
    "or", "our", "please", "should", "so", "that", "the", "their", "them", "then", "there",
    "this", "to", "us", "use", "using", "was", "we", "what", "when", "which", "will", "with",
    "you", "your",
))
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_UNSPACED = ("\u0e00-\u0e4e\u0e50-\u0e59\u0e80-\u0eff\u1000-\u1049\u1050-\u109f\u1780-\u17d3"
             "\u17db-\u17ff\u19e0-\u19ff\uaa60-\uaa7f\ua9e0-\ua9ff"
             "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3040-\u30ff\u3100-\u312f\u3130-\u318f"
             "\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
             "\U00020000-\U0003134f")
"""Thai and Lao, Myanmar (with its extensions), Khmer (with its symbols); Han (with radicals and
iteration marks), bopomofo, kana and hangul: scripts whose words are not separated by spaces, or
carry attached particles (module docstring). A run is taken with its combining marks; the
scripts' sentence punctuation (Thai ๏ ๚ ๛, Myanmar ၊ ။, Khmer ។ ៕ and the like) ends it."""
_WORD = re.compile(f"[{_UNSPACED}]+|[^\\W_{_UNSPACED}]+")
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]")


def _fold(term: str) -> str:
    if len(term) > 4 and term.endswith("ies"):
        return term[:-3] + "y"
    if len(term) > 3 and term.endswith("s") and not term.endswith(("ss", "us", "is")):
        return term[:-1]
    return term


def tokenize(text: str) -> list[str]:
    """Lower-cased terms of ``text``, split on case changes (neighbouring camelCase parts joined too)
    and punctuation, stop words out; a run of a script written without spaces (CJK, Thai, ...) as
    its overlapping bigrams (module docstring)."""
    if not text.isascii():
        text = pinned_nfkc(text)
    out: list[str] = []
    for word in _WORD.findall(text):
        if _UNSPACED_RUN.match(word):
            out += [word] if len(word) == 1 else [word[i:i + 2] for i in range(len(word) - 1)]
            continue
        parts = _CAMEL.split(word)
        # each two neighbouring camel parts joined too: "GitHub" -> git, hub, github
        for part in (*parts, *map(operator.add, parts, parts[1:])):
            term = part.lower()
            if term and term not in _STOP_WORDS:
                out.append(_fold(term))
    return out


_DOC_MEMO: dict[int, tuple[ToolSpec, Counter[str]]] = {}
"""Per spec object: its BM25 document, made only when a build ranks (a run whose tools are all
pinned or used never does: tokenizing a description was most of pricing a new spec)."""
_DOC_MEMO_LIMIT = 20_000
_DOC_HELD = SpecAccount(_DOC_MEMO, _DOC_MEMO_LIMIT)


def _param_names(schema: Any, depth: int = 0) -> Iterator[str]:
    if not isinstance(schema, dict) or depth > 4:
        return
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            yield str(key)
            yield from _param_names(sub, depth + 1)
    items = schema.get("items")
    if items is not None:
        yield from _param_names(items, depth + 1)


def _document(spec: ToolSpec) -> list[str]:
    name = tokenize(spec.name)
    terms = name + name + tokenize(spec.description)
    for tag in spec.tags:
        terms += tokenize(tag)
    for param in _param_names(spec.parameters):
        terms += tokenize(param)
    return terms


def tool_document(spec: ToolSpec) -> Counter[str]:
    """The terms of ``spec``'s BM25 document with their counts: its name twice (a simple field
    boost: the name is the most telling part), its description, tags and parameter names (nested
    properties included); kept per spec object."""
    hit = _DOC_MEMO.get(id(spec))
    if hit is None or hit[0] is not spec:
        document = Counter(_document(spec))
        _DOC_HELD.admit(spec, 100 * len(document))  # a term and its count: ~100 bytes
        hit = _DOC_MEMO[id(spec)] = (spec, document)
    return hit[1]
