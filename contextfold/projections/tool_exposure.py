"""Which registered tools a request exposes, and why the others are left out.

With hundreds of registered tools, exposing them all costs thousands of
tokens per turn and dilutes the model's choice (DESIGN.md section 5). The
exposure is, in this order:

1. **policy** — a tool the run's policy does not allow (not in ``allowed``
   when that is given, or in ``denied``) is never exposed, whatever its
   relevance, pinning, reference, or anything the content says;
2. **pinned** tools (the policy's standing set);
3. **referenced** tools, used by calls in the retained history: providers
   reject a history that calls an undeclared tool, so these are exposed even
   past the relevance cap and the budget (``over_budget`` then says so);
4. **relevant** tools by BM25 score against the query (goal, plan step,
   input), highest first, while they fit the budget and the cap
   ``max_relevant``; a tool with score 0 is never exposed for relevance,
5. **recent** tools: while the cap has slots left, the tools relevant to an *earlier* user
   input (its text shares a term with the tool's document: ``tool_recency``), the most recent
   first (ties by name). Why: tools are the start of every provider's cached prefix (DESIGN.md
   section 4), and the query's newest input is often a short reply ("yes", "my reservation id
   is ...") that matches other tools, or none: on tau-bench's airline traces the declared set
   swung turn to turn (5, 8, 1, 9, 2 tools) and 293 of 531 turns restarted the cache (53.1% of
   the prefix reused). Kept like an LRU, the tools a conversation has touched stay declared, the
   ones relevant now first: a recent tool never takes the slot of one relevant to the current
   query, and in the selection it ranks below every one of them (a small budget drops it first).
   A tool the history calls is recent from the turn it was called in (``tool_recency``): in the
   slots still spare after those, it holds one (``turn`` set; ``referenced`` while a kept group
   calls it), so when a small window cuts its calls it stays declared;
6. unless the whole permitted registry fits under the cap
   (:func:`whole_toolkit`): then every permitted tool is exposed, those that
   share no term with the query last, as ``toolkit``. The seed asks for a
   retrieved subset of a *large* catalogue; a coding agent's three tools
   (``read_file``, ``edit_file``, ``bash``) share no word with "Login is
   broken, fix it", and a request that declared none of them left the model
   unable to act. The whole toolkit is also the same for every turn, so the
   cache key does not move with the user's words;
7. **fallback**: in a larger registry, when no tool the relevance rule may
   expose shares a term with the query ("Login is broken, fix it", "yes, go
   ahead"), nor any earlier input with a permitted tool that is not pinned (a
   recent tool answers then, or one the history calls is declared with its calls:
   filling the cap around it swung the tool list on every "yes"), the cap is
   filled anyway, as ``fallback``, from the permitted registered tools in
   registration order (a runtime lists its core tools first). The fallback
   set is the first ``max_tools`` permitted, fixed: a pinned or referenced
   tool among them fills its own slot, so a run that calls its core tools
   does not pull in the next one each turn and move the cache key.
   Without it, a 12-tool agent got all 12 tools for that request and a 13-tool
   agent none: a model that cannot act is the worst answer, and a retriever's
   top-k is never empty. A query that matches even one tool is taken as the
   retrieval's answer: padding it with unmatched tools would dilute the choice
   the exposure exists to narrow. Whether the rule applies depends on the
   scores (and the earlier inputs' matches) alone, never on the budget, and
   it fills in a fixed order, so it is deterministic and a larger budget
   never keeps less (in a build, each tool competes in the selection as a
   unit of its own).

Relevance is Okapi BM25 over each tool's document (:mod:`~.tool_relevance` says how).

A tool's token cost is ``count(canonical_tool_json(spec))`` plus
:data:`TOOL_OVERHEAD_TOKENS` for the framing a provider wraps around each
declaration, or the OpenAI cookbook's count of the declaration as OpenAI
renders it when that is dearer (:mod:`contextfold.projections.tool_pricing`:
an enum's values cost about three tokens each more there than in the JSON); in an OpenAI Chat
build for a measured model family, that count alone (``tool_pricing.tool_bill``). A request declaring
tools pays :data:`~.tool_pricing.FUNC_END` once besides, unless one of its tools' prices holds
it (:func:`request_closing_tokens`): :func:`select_tools` counts it within its budget and in
the tokens it reports.
When a name is registered twice, the last registration wins.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Literal, NamedTuple, TypeAlias, cast

from pydantic import BaseModel, ConfigDict

from contextfold.domain.canonical import canonical_utf8
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import ToolSpec
from contextfold.projections.spec_memo import SpecAccount
from contextfold.projections.tool_pricing import DEAREST_BILL, FUNC_END, ToolBill, closing_tokens, tool_price
from contextfold.projections.tool_relevance import BM25_B, BM25_K1, bm25, matching_tools, rank_tools
from contextfold.projections.tool_terms import tokenize

__all__ = [
    "BM25_B",
    "BM25_K1",
    "TOOL_OVERHEAD_TOKENS",
    "ExcludedTool",
    "ExclusionReason",
    "ExposedTool",
    "ExposureReason",
    "ToolChoice",
    "ToolExposure",
    "canonical_tool_json",
    "choose_tools",
    "matching_tools",
    "permitted",
    "rank_tools",
    "rankable",
    "request_closing_tokens",
    "select_tools",
    "tokenize",
    "tool_tokens",
    "whole_toolkit",
]

TOOL_OVERHEAD_TOKENS = 8
"""Per-tool framing a provider adds around a declaration (the ``{"type":
"function", "function": ...}`` wrapper and separators, about 7-10 tokens in
OpenAI's and Anthropic's tool encodings); counted so the reserve is honest."""

ExposureReason: TypeAlias = Literal["fallback", "pinned", "recent", "referenced", "relevant", "toolkit"]
ExclusionReason: TypeAlias = Literal["not_allowed", "not_registered", "over_budget", "over_cap",
                                     "irrelevant"]

class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ExposedTool(_Frozen):
    name: str
    reason: ExposureReason
    score: float
    tokens: int
    turn: int | None = None
    """A ``recent`` tool's: the turn of the earlier input it is relevant to."""


class ExcludedTool(_Frozen):
    """A tool left out. ``not_registered``: pinned or referenced but no spec is known."""

    name: str
    reason: ExclusionReason
    score: float
    tokens: int
    turn: int | None = None
    """A tool relevant to an earlier input (``over_cap``: the more recent filled the cap): its turn."""


class ToolExposure(_Frozen):
    """The exposed tools (sorted by name, as they are rendered) and the excluded ones."""

    exposed: tuple[ExposedTool, ...]
    excluded: tuple[ExcludedTool, ...]
    tokens: int
    """What declaring the exposed tools costs: their prices and, once, the request's closing
    ``func_end`` unless one of their prices holds it (``request_closing_tokens``); 0 when none
    is exposed."""
    budget_tokens: int
    over_budget: bool
    """Pinned + referenced tools alone exceed the budget (they are exposed anyway)."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.exposed)


_SPEC_MEMO: dict[int, tuple[ToolSpec, str]] = {}
"""Per spec object: its canonical JSON. A run's specs are the same objects build after build,
and every build prices the tools it may expose."""
_SPEC_MEMO_LIMIT = 20_000
_SPEC_HELD = SpecAccount(_SPEC_MEMO, _SPEC_MEMO_LIMIT)


def _spec_json(spec: ToolSpec) -> str:
    hit = _SPEC_MEMO.get(id(spec))
    if hit is None or hit[0] is not spec:
        text = canonical_utf8(spec.model_dump(mode="json")).decode()
        _SPEC_HELD.admit(spec, sys.getsizeof(text))
        hit = _SPEC_MEMO[id(spec)] = (spec, text)
    return hit[1]


def canonical_tool_json(spec: ToolSpec) -> str:
    """The byte-stable JSON of a spec: sorted keys, compact, UTF-8 kept as is."""
    return _spec_json(spec)


def _json_price(spec: ToolSpec, count: Callable[[str], int]) -> Callable[[], int]:
    return lambda: count(canonical_tool_json(spec)) + TOOL_OVERHEAD_TOKENS


def request_closing_tokens(specs: Iterable[ToolSpec], count: Callable[[str], int],
                           bill: ToolBill = DEAREST_BILL) -> int:
    """What a request declaring any of ``specs`` may pay once besides their prices: the
    functions' closing ``func_end`` unless every one of them holds it in its own price
    (``tool_pricing.closing_tokens``): fixed before a selection, whichever of them it keeps."""
    return max((closing_tokens(spec, _json_price(spec, count), count, bill) for spec in specs), default=0)


def tool_tokens(spec: ToolSpec, count: Callable[[str], int], bill: ToolBill = DEAREST_BILL) -> int:
    """What declaring ``spec`` costs: its canonical JSON plus the per-tool overhead, or OpenAI's
    count of its rendered declaration when dearer (long enums), or alone (``tool_pricing.tool_bill``)."""
    return tool_price(spec, _json_price(spec, count), count, bill)


def _registry(tools: Sequence[ToolSpec]) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in tools}


def permitted(name: str, allowed: Collection[str] | None, denied: Collection[str]) -> bool:
    """Whether the run's policy lets the tool ``name`` be exposed: not denied, and on the allow
    list when there is one."""
    return name not in denied and (allowed is None or name in allowed)


def rankable(names: Iterable[str], *, pinned: Collection[str], referenced: Collection[str],
             allowed: Collection[str] | None, denied: Collection[str]) -> bool:
    """Whether any of ``names`` could be exposed only for its relevance (permitted, neither pinned
    nor referenced): when none can, :func:`choose_tools` exposes the same tools for every query."""
    return any(n not in pinned and n not in referenced and permitted(n, allowed, denied) for n in names)


def whole_toolkit(names: Iterable[str], *, allowed: Collection[str] | None, denied: Collection[str],
                  cap: int) -> bool:
    """Whether every permitted tool of ``names`` (the registry) fits under the relevance ``cap``:
    then all of them are exposed, scored or not (module docstring, rule 6)."""
    return cap > 0 and sum(permitted(n, allowed, denied) for n in names) <= cap


class ToolChoice(NamedTuple):
    """One tool's decision as plain data: ``reason`` is an exposure or an exclusion reason."""

    name: str
    reason: str
    score: float
    tokens: int
    turn: int | None = None
    """The turn of the earlier input a ``recent`` tool is relevant to (one excluded ``over_cap``
    after the recent ones filled the cap too, a ``referenced`` one holding a recent slot); None
    for any other."""


def choose_tools(
    tools: Sequence[ToolSpec],
    *,
    query: str,
    pinned: Collection[str] = (),
    referenced: Collection[str] = (),
    allowed: Collection[str] | None = None,
    denied: Collection[str] = (),
    budget_tokens: int,
    count: Callable[[str], int],
    max_relevant: int = 8,
    report_excluded: bool = True,
    toolkit: Sequence[str] | None = None,
    recent: Mapping[str, int] | None = None,
    matched: Collection[str] | None = None,
    bill: ToolBill = DEAREST_BILL,
) -> tuple[list[ToolChoice], list[ToolChoice], int, bool]:
    """:func:`select_tools` as plain data: (exposed by name, excluded by name, tokens, over budget).

    ``toolkit``: the names :func:`whole_toolkit` counts and the fallback (rule 7) fills from, in
    registration order (default: every name of ``tools``, in their order); a builder leaves out
    the stand-in schemas it declares for names the history called that no runtime registered: one
    made-up call must not make the toolkit a catalogue, nor a stand-in a fallback.

    ``recent``: tool name -> the turn of the newest earlier user input relevant to it
    (``tool_recency``): rule 5 fills the cap's spare slots from it, the most recent first; a
    referenced tool among them holds a slot still spare after the others (``turn`` set).
    ``matched``: the names of ``recent`` an input's words matched (``input_matches``; default:
    all of them): rule 7 waits for those, not for a call's. ``bill``: ``tool_pricing.tool_bill``.

    Why apart: a build needs only the exposed tools, and ranks again whenever its query
    changes; making a model per excluded tool was most of that. With ``report_excluded=False``
    the excluded list is empty and only the tools that could be exposed are priced: on a
    200-tool registry, pricing and reporting the ~190 others was most of a ranking."""
    if budget_tokens < 0 or max_relevant < 0:
        raise InvalidInputError("budget_tokens and max_relevant must be >= 0")
    registry = _registry(tools)
    allowed_set = None if allowed is None else set(allowed)
    denied_set = set(denied)
    scores = bm25(list(registry.values()), query)
    costs: dict[str, int] = {}
    used = 0
    closing = FUNC_END  # what the request pays once besides its tools' prices (``tool_pricing``)

    def cost(name: str) -> int:
        if name not in costs:
            costs[name] = tool_tokens(registry[name], count, bill) if name in registry else 0
        return costs[name]

    def closing_of(name: str) -> int:
        spec = registry.get(name)
        return closing if spec is None else closing_tokens(spec, _json_price(spec, count), count, bill)

    def fits(name: str) -> bool:
        """Whether declaring ``name`` too keeps the request within the budget: its price, and
        the closing charge, none once a tool whose own price holds it is declared."""
        return used + cost(name) + min(closing, closing_of(name)) <= budget_tokens

    def expose(choice: ToolChoice) -> None:
        nonlocal used, closing
        closing = min(closing, closing_of(choice.name))
        exposed[choice.name] = choice
        used += choice.tokens

    exposed: dict[str, ToolChoice] = {}
    excluded: dict[str, ToolChoice | None] = {}

    def exclude(name: str, reason: ExclusionReason) -> None:
        excluded[name] = (ToolChoice(name, reason, scores.get(name, 0.0), cost(name)) if report_excluded
                          else None)

    for name in registry:
        if not permitted(name, allowed_set, denied_set):
            exclude(name, "not_allowed")
    mandatory: list[tuple[str, ExposureReason]] = [(n, "pinned") for n in sorted(set(pinned))]
    mandatory += [(n, "referenced") for n in sorted(set(referenced) - set(pinned))]
    for name, reason in mandatory:
        if not permitted(name, allowed_set, denied_set):
            exclude(name, "not_allowed")
        elif name not in registry:
            exclude(name, "not_registered")
        else:
            expose(ToolChoice(name, reason, scores[name], cost(name)))
    over_budget = bool(exposed) and used + closing > budget_tokens
    relevant = 0
    whole = whole_toolkit(registry if toolkit is None else toolkit, allowed=allowed_set, denied=denied_set,
                          cap=max_relevant)
    recent = {} if recent is None else recent
    pinned_set = set(pinned)
    matched_before = any(n in registry and n not in pinned_set and permitted(n, allowed_set, denied_set)
                         for n in (recent if matched is None else matched))  # rule 7 waits for these
    if not whole and max_relevant > 0 and not matched_before and not any(
            score > 0.0 and n not in exposed and n not in excluded for n, score in scores.items()):
        slots = 0  # the first max_tools permitted, whatever else exposes them: a fixed set
        for name in registry if toolkit is None else toolkit:  # rule 7: in registration order
            if slots >= max_relevant:
                break
            if name not in registry or (name in excluded and name not in exposed):
                continue  # not permitted
            slots += 1
            if name in exposed:  # pinned or referenced: its slot taken, no other tool pulled in
                continue
            if not fits(name):
                exclude(name, "over_budget")
            else:
                expose(ToolChoice(name, "fallback", scores[name], cost(name)))
                relevant += 1
    for name, score in sorted(scores.items(), key=lambda item: (-item[1], item[0])):
        if name in exposed or name in excluded or (score <= 0.0 and not whole and name in recent):
            continue  # (a recent one: rule 5 decides it, below)
        if (score <= 0.0 and not whole) or relevant >= max_relevant:
            if not report_excluded:  # by score, best first: nothing after this is exposed
                break
            exclude(name, "irrelevant" if score <= 0.0 else "over_cap")
        elif not fits(name):
            exclude(name, "over_budget")
        else:
            expose(ToolChoice(name, "relevant" if score > 0.0 else "toolkit", score, cost(name)))
            relevant += 1
    if not whole:  # rule 5: the spare slots, the most recently relevant first
        for name in sorted((n for n in recent if n in registry and scores[n] <= 0.0 and n not in exposed
                            and n not in excluded), key=lambda n: (-recent[n], n)):
            turn = recent[name]
            if relevant >= max_relevant:
                if not report_excluded:
                    break
                excluded[name] = ToolChoice(name, "over_cap", 0.0, cost(name), turn)
            elif not fits(name):
                excluded[name] = (ToolChoice(name, "over_budget", 0.0, cost(name), turn) if report_excluded
                                  else None)
            else:
                expose(ToolChoice(name, "recent", 0.0, cost(name), turn))
                relevant += 1
        # then the called tools, in the slots still spare (``turn`` set): first, one evicted an earlier
        # input's tool when a call moved up (tau-bench at 200k: 91.1% of the prefix reused -> 86.0%)
        for name in sorted((n for n in recent if n in exposed and exposed[n].reason == "referenced"
                            and scores[n] <= 0.0), key=lambda n: (-recent[n], n)):
            if relevant >= max_relevant:
                break
            exposed[name] = exposed[name]._replace(turn=recent[name])
            relevant += 1
    return ([exposed[n] for n in sorted(exposed)],
            [c for n in sorted(excluded) if (c := excluded[n]) is not None],
            used + closing if exposed else 0, over_budget)


def select_tools(
    tools: Sequence[ToolSpec],
    *,
    query: str,
    pinned: Collection[str] = (),
    referenced: Collection[str] = (),
    allowed: Collection[str] | None = None,
    denied: Collection[str] = (),
    budget_tokens: int,
    count: Callable[[str], int],
    max_relevant: int = 8,
    recent: Mapping[str, int] | None = None,
    bill: ToolBill = DEAREST_BILL,
) -> ToolExposure:
    """The tools to declare in one request (rules in the module doc), priced by ``bill``."""
    exposed, excluded, used, over_budget = choose_tools(
        tools, query=query, pinned=pinned, referenced=referenced, allowed=allowed, denied=denied,
        budget_tokens=budget_tokens, count=count, max_relevant=max_relevant, recent=recent, bill=bill)
    return ToolExposure(
        exposed=tuple(ExposedTool(name=t.name, reason=cast(ExposureReason, t.reason), score=t.score,
                                  tokens=t.tokens, turn=t.turn) for t in exposed),
        excluded=tuple(ExcludedTool(name=t.name, reason=cast(ExclusionReason, t.reason), score=t.score,
                                    tokens=t.tokens, turn=t.turn) for t in excluded),
        tokens=used, budget_tokens=budget_tokens, over_budget=over_budget,
    )
