"""Which tools a build may expose, ranked, and why a tool was not exposed.

The builder asks :func:`tool_inputs` for the registry it declares from (the run's registered
tools, plus a minimal schema for a tool the history calls that the log never registered, under
an alias where the provider refuses its name) and :func:`tool_candidates` for the ranked
candidates, which then compete in the selection's ``tools`` layer. ``tool_reasons`` answers
``why RUN TOOL --turn N`` from the same inputs and the same ranking (:func:`ranking`,
:func:`choices`), with every exclusion reported: a manifest lists the tools a request declares,
not the hundreds it left out.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, NamedTuple

from contextfold.domain.events import ToolSpec
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.render.tool_checks import MAX_TOOLS
from contextfold.projections.render.tool_schemas import SCHEMA_PROVIDERS, refused_schema
from contextfold.projections.selection import Unit
from contextfold.projections.state import RunState, ToolPolicy
from contextfold.projections.tool_descriptions import cut_descriptions
from contextfold.projections.tool_exposure import ToolChoice, choose_tools, permitted, rankable, whole_toolkit
from contextfold.projections.tool_names import (
    TOOL_NAME_RULES,
    refuses_tool_name,
    renamed_note,
    tool_name_alias,
)
from contextfold.projections.tool_pricing import ToolBill, tool_bill
from contextfold.projections.tool_query import newest_user_item, tool_query
from contextfold.projections.tool_recency import input_matches, tool_recency
from contextfold.projections.tool_strict import loosened_tools

__all__ = ["OVER_LIMIT", "ToolCandidates", "ToolInputs", "choices", "holds_recent_slot", "limit_note",
           "newest_user_item", "past_limit", "ranking", "tool_candidates", "tool_inputs",
           "tool_query", "whole_exposed"]

_UNBOUNDED = 1 << 40
_TOOL_SCORE = 100.0
"""Optional tool units rank from this base (:func:`_tool_rank`): within the tools layer only their
order matters."""


_DECLARED: dict[str, ToolSpec] = {}
_DECLARED_LIMIT = 4096


def _declared_spec(name: str) -> ToolSpec:
    """The minimal schema declared for a tool the history used but the log never registered: one
    object per name for the process (it depends on the name alone), so every run and build that
    declares it reuses its pricing (a new spec's JSON was ~40 us of the build that first used it)."""
    spec = _DECLARED.get(name)
    if spec is None:
        if len(_DECLARED) >= _DECLARED_LIMIT:
            _DECLARED.clear()
        spec = _DECLARED[name] = ToolSpec(
            name=name, description="Declared by contextfold: the run's history uses this tool "
            "but its log never registered a schema.", parameters={"type": "object"})
    return spec


class ToolInputs(NamedTuple):
    """What tool exposure starts from in one build."""

    registry: dict[str, ToolSpec]
    """Name (or alias) -> spec: the registered tools and those declared for the history's calls."""
    used_names: list[str]
    """The names the visible history calls, sorted, aliased where the provider refuses them."""
    renamed: dict[str, str]
    """A made-up name the provider refuses -> the alias it is shown under (``tool_names``)."""
    policy: ToolPolicy
    notes: list[tuple[str, str]]
    """(name declared, the manifest's repair) for each tool declared or renamed for the history's
    calls, or whose description is cut to the provider's bound (``tool_descriptions``): a repair only
    when the request declares it (its calls may all be left out, a relevant tool not chosen)."""
    blocked: frozenset[str]
    """The names the history calls that the policy does not allow, or whose schema the provider
    refuses (``refused``): never declared (nor renamed), so their groups are shown as notes
    (``projections.not_offered``)."""
    refused: dict[str, str]
    """A registered tool the policy allows whose parameters schema the build's provider refuses ->
    why (``render.tool_schemas``). Never offered: ``policy`` denies it for this build."""
    provider: str
    over_limit: frozenset[str] = frozenset()
    """Tools pinned or called by the history past the provider's count (``MAX_TOOLS``): never
    offered, like a refused one (:func:`_over_limit`)."""

    def refusal_notes(self) -> list[str]:
        """The manifest's repairs for the tools not offered for their schema or past the provider's
        count: which, and why."""
        return [*(f"tool_not_offered:{name} ({self.provider} refuses it: {why})"
                  for name, why in sorted(self.refused.items())),
                *(f"tool_not_offered:{name} ({self.provider} {OVER_LIMIT.format(MAX_TOOLS[self.provider])})"
                  for name in sorted(self.over_limit))]


OVER_LIMIT = ("takes at most {} tools in a request: the tools pinned and called more recently came "
               "first")


def _over_limit(state: RunState, provider: str, policy: ToolPolicy, registry: Collection[str]
                ) -> frozenset[str]:
    """The pinned and history-called tools past ``provider``'s count of tools in one request
    (``MAX_TOOLS``), when there are more of them than it takes: the pinned first (by name), then
    those called most recently. Each is declared whatever the relevance and the budget (a call of
    an undeclared tool is refused), so the count cannot be kept by leaving relevant tools out; the
    ones past it are not offered and the history's calls to them are shown as the runtime's notes,
    as a refused tool's are, rather than the whole request refused turn after turn."""
    limit = MAX_TOOLS.get(provider)
    used = state.used_tool_names()
    pinned = [n for n in sorted(policy.pinned)
              if n in registry and permitted(n, policy.allowed, policy.denied)]
    if limit is None or len(used) + len(pinned) <= limit:
        return frozenset()
    order = dict.fromkeys(pinned)
    for group in reversed(state.groups()):  # the latest calls first
        order.update((c.name, None) for c in reversed(group.calls)
                     if c.name not in order and permitted(c.name, policy.allowed, policy.denied))
    return frozenset(list(order)[limit:])


def refused_tools(state: RunState, provider: str) -> dict[str, str]:
    """name -> why ``provider`` refuses the registered tool (its name or its schema), for those it
    refuses.

    Why such a tool is not offered rather than the build failing (a RenderError) or the request
    sent (the provider refuses it whole): either way every turn of the run fails, for one tool the
    model may never call, and an MCP server that publishes a top-level ``anyOf`` is not the run's
    to fix. Left out, the rest of the toolkit still goes, the history's calls to it are shown as
    the runtime's notes of them (as a denied tool's are), and the manifest's repairs and ``why``
    say which tool and why. Another provider of the same run (Gemini) still gets it.

    The last answer per provider is kept on the state while its registered specs are the same
    objects: asking for each of a 400-tool registry took ~160 us of every build."""
    if provider not in TOOL_NAME_RULES or not state.tools:  # neutral: nothing refused
        return {}
    key = tuple(map(id, state.tools.values()))
    hit = state.memo.get(f"refused-tools:{provider}")
    if isinstance(hit, tuple) and hit[0] == key:  # (the specs are held with it: their ids stay theirs)
        return hit[2]  # type: ignore[no-any-return]
    found = {}
    schemas = provider in SCHEMA_PROVIDERS
    for name, spec in state.tools.items():
        # A name it refuses too: an import registers a body's tools as its provider named them
        # (Gemini's github.create_issue), and a hand-off's build failed on the name.
        if refuses_tool_name(provider, name):
            found[name] = f"its name is not one this API takes ({TOOL_NAME_RULES[provider][1]})"
            continue
        why = refused_schema(provider, spec.parameters) if schemas else None
        if why is not None:
            found[name] = why
    state.memo[f"refused-tools:{provider}"] = (key, list(state.tools.values()), found)
    return found


def tool_inputs(state: RunState, config: BuildConfig) -> ToolInputs:
    """The registry a build of ``state`` for ``config`` declares tools from (see the module).

    The last answer per provider is kept on the state while its inputs are the same (policies and
    specs the same objects, the unregistered and called tools' names equal): every build made it
    again, ~30 us of a tau-bench build. One with tools past the provider's count is not kept: which
    are past it depends on the order of the calls (``_over_limit``)."""
    key = (tuple(state.policies.values()), tuple(state.tools.values()), state.dropped_tools.keys(),
           state.used_tool_names())
    hit = state.memo.get(("tool-inputs", config.provider))
    if isinstance(hit, tuple) and _same(hit[0], key):
        return hit[1]  # type: ignore[no-any-return]
    inputs = _tool_inputs(state, config)
    if not inputs.over_limit:
        state.memo[("tool-inputs", config.provider)] = ((*key[:2], frozenset(key[2]), key[3]), inputs)
    return inputs


def _same(old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether a kept answer's inputs are ``new``'s: the policies and specs the same objects (held
    by the memo: their ids stay theirs), the names equal."""
    return (len(old[0]) == len(new[0]) and all(map(operator.is_, old[0], new[0]))
            and len(old[1]) == len(new[1]) and all(map(operator.is_, old[1], new[1]))
            and old[2] == new[2] and old[3] == new[3])


def _tool_inputs(state: RunState, config: BuildConfig) -> ToolInputs:
    policy = state.tool_policy()
    if state.dropped_tools:  # unregistered (``ToolsRegistered.replace``): as denied, calls shown as notes
        policy = ToolPolicy(policy.allowed, policy.denied | frozenset(state.dropped_tools), policy.pinned)
    refused = {name: why for name, why in refused_tools(state, config.provider).items()
               if permitted(name, policy.allowed, policy.denied)}
    if refused:  # denied for this build: never exposed, its calls shown as notes
        policy = ToolPolicy(policy.allowed, policy.denied | frozenset(refused), policy.pinned)
    over_limit = _over_limit(state, config.provider, policy, state.tools)
    if over_limit:  # so are those past the provider's count
        policy = ToolPolicy(policy.allowed, policy.denied | over_limit, policy.pinned)
    used_names = sorted(state.used_tool_names())
    registry: dict[str, ToolSpec] = dict(state.tools)
    renamed: dict[str, str] = {}
    notes: list[tuple[str, str]] = []
    blocked: list[str] = []
    for name in used_names:
        # Not permitted: never declared, so no note says it was (its calls are shown as notes,
        # naming the policy). A name no request can declare (every name over MAX_SPEC_NAME) is
        # refused by every provider: shown under an alias.
        if not permitted(name, policy.allowed, policy.denied):
            blocked.append(name)
            continue
        if name in registry:
            continue
        if refuses_tool_name(config.provider, name):
            alias = renamed[name] = tool_name_alias(name, registry.keys() | set(used_names))
            registry[alias] = _declared_spec(alias)
            notes.append((alias, renamed_note(name, alias)))
            continue
        registry[name] = _declared_spec(name)
        notes.append((name, f"declared_unregistered_tool:{name}"))
    if renamed:
        used_names = sorted(renamed.get(name, name) for name in used_names)
        policy = _aliased_policy(policy, renamed)
    for name, (spec, note) in cut_descriptions(config.provider, registry).items():
        registry[name] = spec  # what the request declares, and so what it is priced and ranked by
        notes.append((name, note))
    for name, (spec, note) in loosened_tools(config.provider, registry).items():
        registry[name] = spec  # strict where the provider's strict mode takes its schema (tool_strict)
        notes.append((name, note))
    return ToolInputs(registry, used_names, renamed, policy, notes, frozenset(blocked), refused,
                      config.provider, over_limit)


def _aliased_policy(policy: ToolPolicy, renamed: dict[str, str]) -> ToolPolicy:
    """``policy`` with each renamed tool also under its alias: the exposure decides by the name it
    declares, and an allow-list naming ``multi_tool_use.parallel`` allowed its calls but not the
    ``multi_tool_use_parallel_...`` that declares them (its groups were dropped as denied). A
    denied name is never renamed (:func:`tool_inputs`), so ``denied`` needs no alias."""
    allowed = (None if policy.allowed is None else
               policy.allowed | {alias for name, alias in renamed.items() if name in policy.allowed})
    pinned = policy.pinned | {alias for name, alias in renamed.items() if name in policy.pinned}
    return ToolPolicy(allowed, policy.denied, pinned)


def ranking(state: RunState, config: BuildConfig, inputs: ToolInputs
            ) -> tuple[list[ToolSpec], str, Mapping[str, int], frozenset[str]]:
    """The specs in name order, the query they are ranked against ("" when nothing is ranked),
    the registered tools' recency (``tool_recency``) and those an input's words matched
    (``input_matches``; both empty when nothing is ranked)."""
    specs = [inputs.registry[n] for n in sorted(inputs.registry)]
    policy = inputs.policy
    # A registered tool the history calls is ranked too: when its calls are left out, it is
    # declared only if it is relevant to the turn (its score gives it a unit of its own) or holds
    # a recent slot (rule 5: its recency is the input its call answered). One
    # the log never registered is declared with the calls that use it, never for relevance.
    ranked = config.max_tools > 0 and rankable(
        state.tools, pinned=policy.pinned, referenced=(), allowed=policy.allowed, denied=policy.denied)
    if not ranked:
        return specs, "", {}, frozenset()
    return specs, tool_query(state), tool_recency(state), input_matches(state)


def choices(specs: list[ToolSpec], query: str, recent: Mapping[str, int], matched: Collection[str],
            config: BuildConfig, inputs: ToolInputs, count: Callable[[str], int], report_excluded: bool,
            registered: Collection[str], bill: ToolBill) -> tuple[list[ToolChoice], list[ToolChoice]]:
    """``registered``: the run's registered tools, in registration order (a dict's keys: the order
    the fallback fills in, ``tool_exposure`` rule 7); ``bill``: ``tool_pricing.tool_bill``'s."""
    policy = inputs.policy
    exposed, excluded, _, _ = choose_tools(
        specs, query=query, pinned=policy.pinned, referenced=inputs.used_names, allowed=policy.allowed,
        denied=policy.denied, budget_tokens=_UNBOUNDED, count=count, max_relevant=config.max_tools,
        report_excluded=report_excluded, toolkit=tuple(registered), recent=recent, matched=matched,
        bill=bill)
    return exposed, excluded


def whole_exposed(state: RunState, config: BuildConfig, inputs: ToolInputs) -> bool:
    """Whether the run's whole permitted toolkit is exposed (``tool_exposure.whole_toolkit``): a
    registered tool the history calls is then declared on its own too, whatever the query."""
    policy = inputs.policy  # the registered tools: a stand-in declared for a made-up name is none of them
    return whole_toolkit(state.tools, allowed=policy.allowed, denied=policy.denied, cap=config.max_tools)


class ToolCandidates(NamedTuple):
    """The tools a build may expose and how the selection sees them."""

    exposed: list[ToolChoice]
    """Every tool that may be exposed: pinned, referenced by the history, the most relevant."""
    units: list[Unit]
    """The tools' own units: a pinned tool's required, a relevant one's optional (a referenced
    tool's too, when it shares a term with the query: it may be exposed for that alone)."""
    attach: dict[str, tuple[str, int]]
    """A name the history's calls use -> (its tool's unit id, tokens): kept with the groups
    that call it (``select_units(tools=...)``), never for a group the request leaves out."""


def tool_candidates(ctx: BuildCtx, inputs: ToolInputs) -> ToolCandidates:
    """The tools that may be exposed, ranked, and their selection units. Pure in its inputs,
    which rarely change between builds (the query moves with the goal, the ready plan step and
    the latest user input): the last answer is kept and reused while they are equal.

    A tool the history calls is declared because a kept group calls it: a required unit made
    every such tool's schema required, so a 40-tool run's old calls, dropped, still filled the
    request with their schemas and a small window failed with RequiredContextExceedsBudgetError.

    When every permitted registered tool is pinned (or the log registers none: the history's
    calls declare their own), there is nothing to rank: the query is neither made nor ranked,
    and a new user input does not invalidate the answer."""
    specs, query, recent, matched = ranking(ctx.state, ctx.config, inputs)
    bill = tool_bill(ctx.config.provider, ctx.model)  # the prices differ by provider and model
    key = (query, tuple(specs), inputs.policy, tuple(inputs.used_names), ctx.config.max_tools,
           ctx.state.counter.encoding_name, tuple(recent.items()), matched, bill)
    # one slot per bill: a turn's neutral and OpenAI builds alternate, and when their bills differ
    # (an OpenAI Chat build for a measured model) one slot made each build rank afresh
    slot = ("tool-candidates", bill)
    hit = ctx.state.memo.get(slot)
    if isinstance(hit, tuple) and hit[0] == key:
        return hit[1]  # type: ignore[no-any-return]
    exposed, _ = choices(specs, query, recent, matched, ctx.config, inputs, ctx.count, False,
                          ctx.state.tools, bill)
    whole = whole_exposed(ctx.state, ctx.config, inputs)
    fallback = {t.name for t in exposed if t.reason == "fallback"}
    # fallback tools (score 0) rank in registration order, below every relevant one of their size
    # (``_tool_rank``): a small tools share keeps the first registered, as the fill chose them
    order = {n: i for i, n in enumerate(n for n in ctx.state.tools if n in fallback)} if fallback else {}
    # recent tools rank below every tool relevant now, the most recent first, as the fill chose them
    lru = sorted((t for t in exposed if holds_recent_slot(t)), key=lambda t: (-(t.turn or 0), t.name))
    order.update((t.name, i) for i, t in enumerate(lru))
    units = [Unit(f"tool:{t.name}", "tools", t.tokens,
                  _tool_rank(t, (order[t.name] + 1) / (len(order) + 1) if t.name in order else 0.0),
                  0, required=t.reason == "pinned")
             for t in exposed
             if t.reason != "referenced"
             or ((t.score > 0.0 or whole or t.turn is not None) and t.name in ctx.state.tools)]
    by_name = {t.name: t for t in exposed}
    attach = {}
    for name in ctx.state.used_tool_names():
        shown = by_name.get(inputs.renamed.get(name, name))
        if shown is not None:
            attach[name] = (f"tool:{shown.name}", shown.tokens)
    answer = ToolCandidates(exposed, units, attach)
    ctx.state.memo[slot] = (key, answer)
    return answer


def holds_recent_slot(tool: ToolChoice) -> bool:
    """A ``recent`` tool, or one the history calls that holds a recent slot (``tool_exposure``
    rule 5: ``turn`` set): its own unit ranks as a recent one's, kept without its calls."""
    return tool.reason == "recent" or (tool.reason == "referenced" and tool.turn is not None)


LARGE_TOOL_TOKENS = 1_000
"""A tool whose schema costs more than this ranks after every smaller one (:func:`_tool_rank`)."""


def _tool_rank(tool: ToolChoice, tie: float) -> float:
    """A tool unit's rank in the ``tools`` layer: its BM25 score less ``tie`` (under 1:
    registration order among fallback tools), and a schema over :data:`LARGE_TOOL_TOKENS` after
    every smaller tool. Ranked by relevance alone, a 4,000-token deploy tool (an MCP server's
    schema) that matched the query came first, did not fit a small budget, and the walk (which
    stops at the first unit that does not fit) left out every tool after it: a three-tool agent
    got a request with no tool at all. Only large schemas sink, not every tool by its cost as
    fragments are ranked: between tools of ordinary sizes the order stays relevance's, or the
    runtime's registration order for the fallback. A fixed order, as before: a larger budget
    still keeps every tool a smaller one kept.

    A ``recent`` tool (``tool_exposure`` rule 5) ranks below every other tool, large ones too, in
    (0, 1): it is kept for the cache's sake, and a tight share keeps what the turn needs first."""
    if holds_recent_slot(tool):  # the most recent first (``tie``), a large schema after the small
        return (0.5 if tool.tokens <= LARGE_TOOL_TOKENS else 0.0) + 0.5 * (1.0 - tie)
    if tool.tokens <= LARGE_TOOL_TOKENS:
        return _TOOL_SCORE + tool.score - tie  # >= _TOOL_SCORE - 1
    # below every ordinary tool, by score among the large ones: (0, _TOOL_SCORE - 1)
    return 1.0 + (_TOOL_SCORE - 2.0) * tool.score / (tool.score + 1.0) - tie


def past_limit(provider: str, kept: Sequence[ToolChoice], units: Sequence[Unit],
               attach: Mapping[str, tuple[str, int]]) -> list[str]:
    """The kept tools to leave out so that a request declares no more than ``provider`` takes
    (``MAX_TOOLS``): the lowest-ranked of those kept for their relevance alone (a raised
    ``max_tools``, the whole toolkit), as the selection ranked their units. The pinned and those the
    history calls (``attach``) are never among them: :func:`_over_limit` left no more of those
    than fit, so leaving out the others always keeps the count.

    Why after the selection: whether a tool the history calls is declared depends on which of its
    groups are kept, so the room left for relevant tools is known only then (the builder selects
    again without these, so their budget goes to the fragments)."""
    limit = MAX_TOOLS.get(provider)
    if limit is None or len(kept) <= limit:
        return []
    called = {uid for uid, _ in attach.values()}
    score = {u.id: u.score for u in units if not u.required and u.id not in called}
    optional = sorted((t for t in kept if t.reason != "referenced" and f"tool:{t.name}" in score),
                      key=lambda t: (score[f"tool:{t.name}"], t.name))
    return [t.name for t in optional[:len(kept) - limit]]


def limit_note(provider: str, names: Collection[str]) -> str:
    """The manifest's repair for the relevant tools :func:`past_limit` left out: one line naming
    them all (a whole toolkit of 400 is 272 names, not 272 repairs)."""
    return (f"tools_over_limit:{provider} takes at most {MAX_TOOLS[provider]} tools in a request; "
            f"{len(names)} ranked below the declared ones were left out: {', '.join(sorted(names))}")
