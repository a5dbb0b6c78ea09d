"""Why a tool was not exposed: ``contextfold why RUN TOOL --turn N``'s answer for a tool.

Apart from :mod:`~contextfold.projections.tool_candidates` because it is another reader of the
same ranking, not part of a build: a build asks ``tool_candidates`` for the tools it may expose
and never for a reason, and the ``why`` command asks this module, which re-derives the decision
from the same inputs (``tool_inputs``), query and ranking (``ranking``, ``choices``) with every
exclusion reported, then words it (the policy, a replace, the provider's count or schema rules,
the history's calls, relevance, recency, the cap). The wording is two thirds of it and changes
with the reasons; the ranking changes with the build.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from contextfold.domain.manifest import BuildConfig
from contextfold.projections.model_family import run_model_for
from contextfold.projections.render.tool_checks import MAX_TOOLS
from contextfold.projections.state import RunState
from contextfold.projections.tool_candidates import (
    OVER_LIMIT,
    choices,
    holds_recent_slot,
    ranking,
    tool_inputs,
    whole_exposed,
)
from contextfold.projections.tool_exposure import ToolChoice, permitted
from contextfold.projections.tool_pricing import tool_bill
from contextfold.projections.tool_recency import recency_phrase

__all__ = ["not_exposed_reason"]


def _no_recent_slot(state: RunState, config: BuildConfig, name: str, recent: Mapping[str, int],
                    candidates: Collection[ToolChoice]) -> str:
    """Why a tool the history calls, recent (``tool_recency``: called at turn N, or relevant to an
    input) but given no recent slot, was not declared for that: the cap had none to spare (rule 5
    fills the spare slots, the most recent first). "" for a tool nothing made recent. Without it
    the reason said only that it shares no term with the turn, as if the run had never used it."""
    turn = recent.get(name)
    if turn is None:
        return ""
    return f"; it is {recency_phrase(state, name, turn)}, but max_tools ({config.max_tools}) were filled" \
           f"{_filled_by(candidates)}"


def _filled_by(candidates: Collection[ToolChoice]) -> str:
    """" by ..." naming what holds the cap's slots a recent tool did not get: the tools relevant
    to the turn, those that hold a recent slot, or both (only what does: a cap filled by the
    turn's tools alone had read "and by those relevant more recently" too)."""
    fillers = [text for text, filled in (
        ("the tools relevant to the turn", any(c.reason == "relevant" for c in candidates)),
        ("those relevant more recently (recent)", any(map(holds_recent_slot, candidates)))) if filled]
    return f" by {' and by '.join(fillers)}" if fillers else ""




def not_exposed_reason(state: RunState, config: BuildConfig, name: str,
                       exposed: Collection[str]) -> str | None:
    """Why a build of ``state`` for ``config`` that exposed the tools ``exposed`` (a manifest's
    ``tools``) did not expose ``name``; None when the run knows no tool of that name (neither
    registered, called, pinned nor named by its policy) or it was exposed."""
    inputs = tool_inputs(state, config)
    policy = state.tool_policy()  # the run's: a tool this build denies for its schema is told apart
    shown = inputs.renamed.get(name, name)
    registered, called = name in state.tools, name in state.used_tool_names()
    named = name in policy.pinned or name in policy.denied or name in (policy.allowed or ())
    if shown in exposed or not (registered or called or named):
        return None
    # a tool a replace dropped was registered: "never registered" contradicted the line's own reason
    known = ("registered" if registered else "registered, then dropped" if name in state.dropped_tools
             else "called by the history but never registered" if called
             else "named by the run's policy but never registered")
    stale = "; the history's calls to it are shown as runtime notes" if called else ""
    if name in policy.denied:
        return f"tool {name!r} ({known}) is never exposed: the run's policy denies it (denied_tools){stale}"
    if name in state.dropped_tools:
        return (f"tool {name!r} ({known}) is no longer exposed: the ToolsRegistered(replace=True) at "
                f"position {state.dropped_tools[name]} unregistered it (register it again to offer it)"
                f"{stale}")
    if not permitted(name, policy.allowed, policy.denied):
        return (f"tool {name!r} ({known}) is never exposed: it is not among the run's policy's "
                f"allowed_tools{stale}")
    if name in inputs.over_limit:
        return (f"tool {name!r} ({known}) is not offered to {config.provider}: it "
                f"{OVER_LIMIT.format(MAX_TOOLS[config.provider]).replace(': ', ', and ')}{stale}")
    if name in inputs.refused:
        return (f"tool {name!r} ({known}) is not offered to {config.provider}, which refuses it: "
                f"{inputs.refused[name]}{stale}. Register it with a name and schema this API takes "
                "to offer it")
    if not (registered or called):
        how = "pinned by" if name in policy.pinned else "on the allowed_tools of"
        return (f"tool {name!r} is {how} the run's policy, but no tool of that name is registered "
                "(ToolsRegistered) and the history does not call it: there is no schema to declare")
    specs, query, recent, matched = ranking(state, config, inputs)
    bill = tool_bill(config.provider, config.model or run_model_for(config.provider, state.model))
    candidates, excluded = choices(specs, query, recent, matched, config, inputs, state.counter.count, True,
                                    state.tools, bill)
    decided = {c.name: c for c in (*candidates, *excluded)}.get(shown)
    if decided is None:  # every registered or declared name is decided: not reached
        return None
    if decided in candidates and decided.reason == "referenced":
        alone = ("and the tools layer's share had no room for it alone (it shares terms with the turn's "
                 "goal, ready plan steps and latest input)" if decided.score > 0.0 else
                 "and the tools layer's share had no room for it alone (the run's whole toolkit fits "
                 "max_tools)" if whole_exposed(state, config, inputs) and registered else
                 "and the tools layer's share had no room for it alone (it holds a recent slot: "
                 f"{recency_phrase(state, decided.name, decided.turn)})" if decided.turn is not None else
                 "and it shares no term with the turn's goal, ready plan steps and latest input"
                 + _no_recent_slot(state, config, decided.name, recent, candidates))
        return (f"tool {name!r} ({known}) is called by the history, but by none of the calls the "
                f"request kept (a tool is declared with the calls that use it), {alone}")
    limit = MAX_TOOLS.get(config.provider)
    earlier = recency_phrase(state, decided.name, decided.turn or 0)
    what = f"recent: {earlier}" if decided.reason == "recent" else decided.reason
    if decided in candidates and limit is not None and len(exposed) >= limit:
        return (f"tool {name!r} ({known}) was a candidate ({what}, BM25 score "
                f"{decided.score:.3f}), but {config.provider} takes at most {limit} tools in a request "
                "and it ranked below the declared ones")
    if decided in candidates:
        below = (" (a recent tool ranks below every tool relevant to the turn)" if decided.reason == "recent"
                 else "")
        return (f"tool {name!r} ({known}) was a candidate ({what}, {decided.tokens} tokens), but "
                f"the selection had no room for it in the tools layer's share of the budget{below}")
    if decided.reason == "irrelevant" and any(c.reason == "fallback" for c in candidates):
        return (f"tool {name!r} ({known}) shares no term with the turn's goal, ready plan steps and latest "
                "input, nor does any other tool, and no earlier user input matched one that is not pinned: "
                "max_tools were filled with the tools registered before it (the fallback)")
    if config.max_tools == 0:
        return f"tool {name!r} ({known}) is neither pinned nor called, and max_tools is 0: none is exposed " \
               "for its relevance"
    if decided.reason == "over_cap" and decided.turn is not None:
        return (f"tool {name!r} ({known}) is neither pinned nor called by the kept history, and shares no "
                f"term with the turn's goal, ready plan steps and latest input; it is {earlier}, but "
                f"max_tools ({config.max_tools}) were filled{_filled_by(candidates)}")
    if decided.reason == "over_cap":
        return (f"tool {name!r} ({known}) is neither pinned nor called by the kept history, and ranked "
                f"below the {config.max_tools} most relevant tools (max_tools) for the turn's goal, ready "
                f"plan steps and latest input (BM25 score {decided.score:.3f})")
    return (f"tool {name!r} ({known}) is neither pinned nor called by the kept history, and shares no "
            "term with the turn's goal, ready plan steps and latest input (BM25 score 0), nor with any "
            "earlier user input")
