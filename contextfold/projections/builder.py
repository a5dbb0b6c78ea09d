"""Build one request from a folded run: tools, dedupe, selection, truncation, layout, manifest.

Pure: the only ports are ``load_text`` (full text of an artifact-backed
payload, used when that payload is selected or truncated) and the renderer.
The same state and config always give the same request, manifest and hashes.

Costs counted, not ignored: every fragment pays ``MESSAGE_OVERHEAD`` tokens of
message framing, a data fragment also pays its ``<data ...>`` wrapper, each
exposed tool pays its canonical JSON plus ``TOOL_OVERHEAD_TOKENS`` (or OpenAI's
count of it, when dearer; in an OpenAI Chat build for gpt-4o, gpt-4.1 or a gpt-5 model, that
count alone, what OpenAI bills: ``tool_pricing.tool_bill``), the
request pays ``REPLY_PRIMING``, and a request with a tool to declare pays the
functions' closing framing once (OpenAI's ``func_end``, unless a tool's own price
holds it: ``tool_pricing``) and, for Anthropic, its tool-use system prompt (a gpt-5 model in
OpenAI Chat, its preamble: ``tool_prompt``), set aside before selection.

Dedupe: optional state fragments (instructions, evidence, memory) that share a
content hash or a semantic key (evidence ``source_ref`` or ``semantic_key``) keep one copy: the
more authoritative (runtime > user > workspace > external), then the newer.
The loser is excluded as ``duplicate`` with ``replaced_by``. Supersession
(a newer read of a file, a new plan or goal) comes from the fold and is
listed as ``superseded`` with ``replaced_by``.

Tool exposure: pinned tools, tools used by the visible history, and the most
relevant to the goal, the ready plan step and the latest input (BM25), under
the ``tools`` share. A tool the policy does not allow is never exposed; a
history group that used one is shown as the runtime's note of its calls and
results (a provider rejects a call to an undeclared tool: ``not_offered``), as is a tool whose
name or schema the provider refuses (``tool_candidates.refused_tools``). A
tool the history used but the log never registered is declared with a minimal
schema (imported histories often lack tool specs) and recorded as a repair.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from itertools import chain
from typing import Any

from contextfold.domain.conversation import AssistantMessage, Conversation, arguments_object
from contextfold.domain.errors import BudgetError, RenderError, RequiredContextExceedsBudgetError
from contextfold.domain.events import ArtifactRef, DocumentBlock, ImageBlock
from contextfold.domain.fragments import ToolCallBlock
from contextfold.domain.gc_pause import paused_gc
from contextfold.domain.manifest import BuildConfig, Calibration
from contextfold.projections.build_result import BuildResult
from contextfold.projections.calibration import calibrated_budget
from contextfold.projections.exclusions import copy_lines, dropped_lines, superseded_lines
from contextfold.projections.finish_build import (
    REPLY_PRIMING,
    finish_build,
    history_start_tokens,
    selection_key,
)
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.framing import MESSAGE_OVERHEAD
from contextfold.projections.kept_texts import kept_texts
from contextfold.projections.layout import LayoutInput, lay_out
from contextfold.projections.media_cost import UNKNOWN_MODEL_RULE
from contextfold.projections.media_finish import MediaFinish, finalize_media, request_notes
from contextfold.projections.media_plan import TEXT_BYTES_PER_TOKEN
from contextfold.projections.model_family import run_model_for
from contextfold.projections.redact import config_policy
from contextfold.projections.redacted_units import select_redacted
from contextfold.projections.request_json import (
    canonical_hash,
    conversation_json,
)
from contextfold.projections.request_size import Attempt, within_request_size
from contextfold.projections.selection import Selection, Unit, select_units
from contextfold.projections.state import RunState
from contextfold.projections.tool_candidates import limit_note, past_limit, tool_inputs
from contextfold.projections.tool_candidates import tool_candidates as _tool_candidates
from contextfold.projections.tool_exposure import ToolChoice, request_closing_tokens
from contextfold.projections.tool_names import renamed_tools
from contextfold.projections.tool_pricing import tool_bill
from contextfold.projections.tool_prompt import tool_prompt_name, tool_prompt_tokens
from contextfold.projections.twins import timeline_twins, twin_lines
from contextfold.projections.units import Units, current_input_of, make_units

__all__ = ["MESSAGE_OVERHEAD", "REPLY_PRIMING", "BuildResult", "build_context", "canonical_hash"]


def build_context(state: RunState, config: BuildConfig, *,
                  load_text: Callable[[ArtifactRef], str] | None = None,
                  render: Callable[[Conversation, str, int], dict[str, Any]] | None = None,
                  repairs: Sequence[str] = (),
                  calibration: Calibration | None = None,
                  load_bytes: Callable[[ArtifactRef], bytes] | None = None) -> BuildResult:
    """Build one request from ``state``; see :func:`_build` for the rules.

    The cyclic GC is paused for the build: it allocates many short-lived acyclic
    objects over a large live state, and the collector's re-scans of that state
    were half of a 10k-message build's time. Nothing here needs cycle collection.

    A build that raises (but for a budget or render refusal) empties ``state.memo``. Why: a
    build patches what the last one left there (the laid-out messages, the manifest's left-out
    lines, the kept texts) in several steps, and a failure between two of them (a long text
    read back from the store, a tokenizer error) left a memo half patched: the next build of
    the state, patching from it,
    sent a request short of kept messages or holding dropped ones, and a manifest that
    disagreed with a fresh process's. The next build starts from an empty memo instead (as a
    new process's first build does); the fold's state itself is untouched. A refusal is kept
    out: a run over its budget is refused build after build, each of which would start over.
    """
    with paused_gc():
        try:
            return _build(state, config, load_text=load_text, render=render, repairs=repairs,
                          calibration=calibration, load_bytes=load_bytes)
        except (BudgetError, RenderError):
            raise  # the library's refusals: raised before the patching starts or after it ends
        except BaseException:
            state.memo.clear()
            raise


def _no_budget(config: BuildConfig, budget: int, calibration: Calibration | None) -> str:
    """Why a build has no budget. When the usage calibration shrank it, that is named with the
    observation behind it: a mistyped ``usage --input-tokens`` (a few zeros too many) left every
    later build of the model failing with "window 128000 minus reserve 8000 leaves no budget",
    which blamed a configuration that was fine."""
    plain = f"window {config.window} minus reserve {config.reserve}"
    if calibration is None or budget == config.window - config.reserve:
        return f"{plain} leaves no budget"
    c = calibration
    return (f"{plain} is {config.window - config.reserve} tokens, shrunk to {budget} by the usage "
            f"calibration for model {c.model!r} (correction {c.correction:g}, the p{round(c.quantile * 100)} "
            f"of observed/estimated input tokens over {c.samples} turn(s), or the latest if higher; latest: "
            f"turn {c.last_turn} "
            f"observed {c.last_observed} vs estimated {c.last_estimated}): leaves no budget; check the "
            "run's usage_observed events")


def _build(state: RunState, config: BuildConfig, *,
                  load_text: Callable[[ArtifactRef], str] | None = None,
                  render: Callable[[Conversation, str, int], dict[str, Any]] | None = None,
                  repairs: Sequence[str] = (),
                  calibration: Calibration | None = None,
                  load_bytes: Callable[[ArtifactRef], bytes] | None = None) -> BuildResult:
    """Select, truncate and lay out ``state`` under ``config``; render with ``render``.

    ``calibration`` (from ``projections.calibration``, learned from the log's
    usage observations) shrinks the budget so estimate x correction fits.

    ``render(conversation, provider, max_output_tokens)`` returns the provider
    body (its message dicts may be shared with later builds, as ``render_shared``'s are:
    the result holds fresh copies); without it (or for provider ``neutral``) the request is the
    conversation's JSON.

    Media: images and PDFs are priced for ``config.provider`` and the model (``media_cost``;
    ``neutral`` takes the dearest provider), reduced (OpenAI ``detail: low``, where it saves,
    strategy ``media_detail_low``) before text is truncated or the unit is
    dropped, deduped by hash, and their artifact bytes are inlined through
    ``load_bytes`` when a provider request is rendered.
    """
    budget = calibrated_budget(config.window - config.reserve, calibration)
    if budget <= REPLY_PRIMING:
        raise BudgetError(_no_budget(config, budget, calibration))
    required, floor = state.required_and_floor()
    tool_in = tool_inputs(state, config)  # what the tools layer starts from (below)
    blocked = tool_in.blocked
    ctx = BuildCtx(state, config, load_text, required, state.counter.count,
                   policy=config_policy(config) if config.redact else None, floor=floor, blocked=blocked)
    if floor and _uncuttable_tokens(ctx, floor) > ERROR_FLOOR_MAX_UNCUTTABLE:
        # What of the latest error no cut may shorten (its calls' arguments) is large: it
        # competes like any optional unit (see ``_uncuttable_tokens``).
        ctx.required, ctx.floor = required - floor, frozenset()
    timeline, timeline_mark = state.live_timeline()  # read here, before anything folds
    # Inline texts are redacted before selection, so costs see the redacted text (Facts).
    # Payloads held apart (artifacts, long outputs) are redacted when a build first needs them:
    # reading and scanning every one of them would cost the whole log's payloads. Selection
    # prices those it reaches by their redacted text (``redacted_units``), so a kept one is
    # shown whole, placeholders and all.
    repair_notes = list(repairs)

    # ---- tools
    # Tool schemas compete in the same selection as fragments (layer "tools", its
    # share of the budget): pinned and history-referenced tools are required units,
    # the most relevant others optional ones ranked by BM25. Selecting them apart,
    # before the fragments, made the fragment budget jump down when a larger budget
    # let one more relevant tool in, so a larger budget could keep less.
    registry, renamed = tool_in.registry, tool_in.renamed
    shares = config.layer_shares
    candidates_tools, tool_units, attach = _tool_candidates(ctx, tool_in)

    # ---- candidates: state fragments (deduped) and timeline units
    current_input = current_input_of(timeline)
    candidates = make_units(ctx, timeline, timeline_mark, current_input)
    units, members, unit_layer_no = candidates.units, candidates.members, candidates.layer_no
    excluded = candidates.excluded

    # ---- selection
    opening = history_start_tokens(ctx)
    # What a request declaring tools pays once (Anthropic's tool-use system prompt, a gpt-5
    # model's Chat preamble; the functions' closing ``func_end`` unless every candidate's price
    # holds it: ``request_closing_tokens``), set aside whenever a tool may be declared (one the
    # exposure offers, or one a kept group calls: an imported history registers none): whether
    # one is depends on the selection it would be paid from, and a charge that came and went
    # with it would let a larger budget keep less. Builds that price their tools alike and set
    # aside the same share one turn's selection (``_select``).
    system_prompt = tool_prompt_tokens(config.provider, ctx.model) if candidates_tools else 0
    closing = request_closing_tokens((registry[t.name] for t in candidates_tools), ctx.count,
                                     tool_bill(config.provider, ctx.model))
    tool_prompt = system_prompt + closing
    available = budget - REPLY_PRIMING - opening - tool_prompt

    def shrink_required(required: Sequence[Unit], room: int) -> dict[str, int]:
        grants = {u.id: u.tokens for u in required}
        deficit = sum(grants.values()) - room
        # beside the latest error the current input keeps up to INPUT_KEPT_BESIDE_ERROR whole:
        # grants that do not fit so leave the error out (``selection._without_if_fits``)
        guarded = any(u.if_fits for u in required)
        for u in sorted((u for u in required if u.shrinkable), key=lambda u: (-u.tokens, u.id)):
            if deficit <= 0:
                break
            floor = u.tokens if u.min_tokens is None else u.min_tokens
            if guarded and u.layer == "input":
                floor = max(floor, min(u.tokens, INPUT_KEPT_BESIDE_ERROR))
            cut = min(deficit, u.tokens - floor)
            grants[u.id] -= cut
            deficit -= cut
        return grants

    try:
        selection, priced = _select(ctx, [*tool_units, *units], available, shares, shrink_required,
                                    candidates, attach)
    except RequiredContextExceedsBudgetError as exc:  # named by fragment, as the manifest would
        named = _by_fragment(ctx, exc.required, members)
        prompt_note = (f"{system_prompt} tokens set aside for {tool_prompt_name(config.provider)}"
                       if system_prompt else None)
        closing_note = (f"{closing} tokens set aside for the closing framing of the tools' declarations"
                        if closing else None)
        note = "; ".join(n for n in (exc.note, _unknown_model_note(ctx, named), prompt_note, closing_note)
                         if n)
        raise RequiredContextExceedsBudgetError(exc.budget, named, note=note or None) from None
    kept_tools = _kept_tools(candidates_tools, selection, candidates.unit_of, attach)
    left_out: list[str] = []
    while past := past_limit(config.provider, kept_tools, tool_units, attach):
        # more than the provider takes: select again without the lowest-ranked relevant ones (a
        # group kept then may declare one more tool it calls: again, until the count holds)
        left_out += past
        tool_units = [u for u in tool_units if u.id.removeprefix("tool:") not in past]
        selection, priced = _select(ctx, [*tool_units, *units], available, shares, shrink_required,
                                    candidates, attach)
        kept_tools = _kept_tools(candidates_tools, selection, candidates.unit_of, attach)
    if priced:  # the units reached at their redacted prices, for the rest of the build (the
        # timeline's own tables are left as they are: a copy, in a build that reached one)
        candidates = replace(candidates, unit_of={**candidates.unit_of, **priced})
    if left_out:
        repair_notes.append(limit_note(config.provider, left_out))
    repair_notes += tool_in.refusal_notes()  # the tools the provider refuses, and why
    if tool_in.notes:  # a tool declared or renamed for calls the request left out is neither
        declared = {t.name for t in kept_tools}
        repair_notes += [note for name, note in tool_in.notes if name in declared]
    exposure = (kept_tools, sum(t.tokens for t in kept_tools))
    tools = tuple(registry[t.name] for t in kept_tools)
    for t in candidates_tools:  # tools are reported apart from fragments
        selection.kept.pop(f"tool:{t.name}", None)
    unit_by_id = candidates.unit_of
    twins = _twins(ctx, selection, candidates.state_ids, members)  # sent once: in the conversation

    # ---- truncation and texts
    cuts = kept_texts(ctx, selection, candidates, twins)
    texts, truncated, text_cut, reduced = cuts.texts, cuts.truncated, cuts.text_cut, cuts.reduced
    original_tokens, truncations, worked = cuts.original_tokens, cuts.truncations, cuts.worked
    deferred, plain_fids = cuts.deferred, cuts.plain_fids

    walked = selection  # what the walk kept: the low-priority lines are derived from it
    if twins:
        selection = replace(selection, kept={uid: n for uid, n in selection.kept.items() if uid not in twins})
    kept_ids = frozenset(chain.from_iterable(map(members.__getitem__, selection.kept)))
    replies = {}  # model replies whose calls are shown redacted
    for fid in sorted(kept_ids & ctx.redacted.keys()):
        texts.setdefault(fid, ctx.redacted[fid][1].text)
        view = ctx.redacted[fid][0]
        if view.kind == "history" and any(isinstance(b, ToolCallBlock) for b in view.content):
            replies[fid] = view
    others, low_priority = dropped_lines(ctx, selection_key(config), walked, unit_by_id, members,
                                         candidates.timeline, candidates.state_ids)
    excluded.extend(others)
    if twins:
        excluded.extend(twin_lines(state, twins))
    if any(line.reason == "duplicate" for line in excluded):  # a copy of a copy not sent either
        excluded[:] = copy_lines(ctx, kept_ids, excluded, low_priority, twins)
    if state.superseded_by:
        excluded.extend(superseded_lines(ctx, kept_ids, excluded, low_priority))

    # ``texts`` holds only cut or redacted texts; payloads shown as logged are ``deferred``.
    conversation = lay_out(LayoutInput(state=state, kept=kept_ids, texts=texts,
                                       units=candidates.timeline, kept_units=selection.kept.keys(),
                                       deferred=plain_fids.union(deferred) if deferred else plain_fids,
                                       read_text=ctx.full_text,
                                       truncated=frozenset(truncated), tools=tools,
                                       model=config.model or run_model_for(config.provider, state.model),
                                       current_input=current_input,
                                       replies=replies, blocked=blocked))
    laid_out = conversation
    blocks_of = partial(_media_blocks_of, ctx)
    loaded = _loaded_once(None if config.provider == "neutral" else load_bytes)

    def attempt(text_bytes: int) -> Attempt:
        # Without priced media in the run the layout made no media part: nothing to reduce, inline
        # or dedupe (a pass over every message of a long run's request saved).
        media = (finalize_media(laid_out, reduced=frozenset(reduced), load_bytes=loaded,
                                provider=config.provider, blocks_of=blocks_of, text_bytes=text_bytes)
                 if state.media_seen else MediaFinish(laid_out))
        sent = media.conversation
        if renamed:
            sent = renamed_tools(sent, renamed, ctx.objects_for("renamed-tools"))
        if render is None or config.provider == "neutral":
            return media, sent, conversation_json(sent)
        return media, sent, render(sent, config.provider, config.reserve)

    # A request with media is measured against its provider's size (``request_size``).
    (media, conversation, request), body_bytes = (
        within_request_size(attempt, TEXT_BYTES_PER_TOKEN * (selection.used + opening), config.provider,
                            partial(request_notes, laid_out, config.provider, blocks_of))
        if state.media_seen else (attempt(0), None))
    if state.unparsed_arguments_seen:  # rare: only runs whose model once sent such arguments look
        repair_notes += [f"tool_arguments_not_an_object:{call.call_id}" for m in conversation.messages
                         if isinstance(m, AssistantMessage) for call in m.tool_calls
                         if arguments_object(call.arguments) is None]
    changed = text_cut.keys() | truncated | reduced
    cut_units = [uid for uid in worked if not changed.isdisjoint(members[uid])]
    return finish_build(ctx, config, budget, conversation, request, selection.kept,
                        (members, unit_by_id, cut_units), unit_layer_no,
                        truncated, original_tokens, truncations, (excluded, low_priority), exposure,
                        repair_notes, current_input, calibration,
                        (text_cut, reduced, media.shown_in, media.unsent),
                        opening=opening, tool_prompt=tool_prompt, body_bytes=body_bytes)


def _loaded_once(load_bytes: Callable[[ArtifactRef], bytes] | None
                 ) -> Callable[[ArtifactRef], bytes] | None:
    """``load_bytes``, each artifact read once per build: a request past its size is finalized
    again (``request_size``), and its media were read for the first try."""
    if load_bytes is None:
        return None
    seen: dict[str, bytes] = {}

    def load(ref: ArtifactRef) -> bytes:
        data = seen.get(ref.hash)
        if data is None:
            data = seen[ref.hash] = load_bytes(ref)
        return data
    return load


def _media_blocks_of(ctx: BuildCtx, fid: str) -> tuple[ImageBlock | DocumentBlock, ...]:
    """The priced media of fragment ``fid`` (their logged sizes, for ``finalize_media``)."""
    m = ctx.media(fid)
    return () if m is None else m.blocks


def _unknown_model_note(ctx: BuildCtx, required: Sequence[tuple[str, int]]) -> str | None:
    """Why a required image costs what it does, when it is priced for an OpenAI model the build
    does not know (``media_cost``: the dearest rule, gpt-4o-mini's 25,501 tokens for 1024x1024):
    a caller who named no model is told the remedy, not left to wonder at the count."""
    fids = [fid for fid, _ in required if fid in ctx.state.entries]
    if not any(UNKNOWN_MODEL_RULE in cost.rule for fid in fids if (m := ctx.media(fid)) is not None
               for cost in m.costs):
        return None
    model = "no model named" if ctx.model is None else f"model {ctx.model!r} not in its table"
    return (f"images priced by OpenAI's dearest rule (gpt-4o-mini's), {model}: name the OpenAI model "
            "(model=...), or build for the provider the request is for, to price them by its own")


def _by_fragment(ctx: BuildCtx, required: Sequence[tuple[str, int]], members: Mapping[str, Sequence[str]]
                 ) -> list[tuple[str, int]]:
    """The required units as the fragments they hold, each with what it needs (a result that may
    be cut, at its cut size: the 39k-token log of the latest error needs its diagnosis): a tool
    group was named by its unit id (``g3=4851``), which no manifest or log shows, and the big
    fragment in it went unnamed. A tool schema keeps its ``tool:NAME``."""
    out: list[tuple[str, int]] = []
    for uid, tokens in required:
        ids = members.get(uid, ())
        if len(ids) <= 1:
            out.append((ids[0] if ids else uid, tokens))
            continue
        facts = [ctx.facts(fid) for fid in ids]
        left = max(0, tokens - sum(f.cost for f in facts if not f.shrinkable))  # what its cut parts need
        cut_total = sum(f.cost for f in facts if f.shrinkable)
        shares = [f.cost * left // cut_total if f.shrinkable and cut_total else 0 for f in facts]
        last = max((i for i, f in enumerate(facts) if f.shrinkable), default=None)
        if last is not None:  # (the rounding's remainder)
            shares[last] += left - sum(shares)
        out.extend((fid, share if f.shrinkable else f.cost)  # each cut part its share of the cut
                   for fid, f, share in zip(ids, facts, shares, strict=True))
    return out


INPUT_KEPT_BESIDE_ERROR = 3_000
"""The current input is not cut below this many tokens (or its whole size, if smaller) to make
room for the latest error's group (``selection.Unit.if_fits``): where it would have to be, the
error is left out and the input gets what it gets alone. Cut for the error, a 1,505-token
question was sent whole at a 3,150 window and as 48 tokens at 3,200, where the error first fitted
beside it. The model answers the input; the error is required so that its length does not drop
it, not so that it displaces what the user just asked. A bound on the input, not on the budget,
so whether the error fits stays monotone in the budget (each grant of the greedy cut grows with
it). Why 3,000: ``timeline_units.NEWEST_WHOLE_TOKENS``, the size up to which the newest group is
kept whole; a longer input (a pasted log) still makes room for the error's diagnosis."""


ERROR_FLOOR_MAX_UNCUTTABLE = 2_000
"""The latest error's group is required (down to its diagnosis) only while what of it no cut may
shorten stays within this many tokens. A bound on the group, not a share of the budget: whether
it is required must not depend on the budget, or one token more of budget made it required and
it displaced history a smaller budget kept. Within the bound it is still required only where it
fits beside the other required content (``selection.Unit.if_fits``): at a smaller budget the
request is that content alone, not the typed error (a 1,800-token reply beside the failed call
failed every build up to a 3,000 window with a 1,000 reserve)."""


def _uncuttable_tokens(ctx: BuildCtx, ids: frozenset[str]) -> int:
    """Tokens of ``ids`` that no cut may shorten: all but tool results (the calls' arguments, and
    the model's text beside them, which is not cut either: counted, or a 2,000-token explanation
    beside a ``{}`` call made its group required and the build impossible at a small window). The
    latest error's group is required down to its diagnosis (``RunState.latest_error_ids``), and
    a failed ``write_file`` of a 19k-token file made every later build at a 16k window fail,
    although the model had answered and the user moved on, until that very tool succeeded,
    which needed a request that could not be built (:data:`ERROR_FLOOR_MAX_UNCUTTABLE`).
    Counted at this build's prices, not the fold's: a reply's reasoning another provider is not
    sent, or a reply shown as the note of calls to a tool not offered, is not what the fold
    counted (long thinking beside a call dropped the latest error from a hand-off's build)."""
    entries = ctx.state.entries
    return sum(ctx.content_tokens(fid) for fid in ids if entries[fid].kind != "tool_result")


def _twins(ctx: BuildCtx, selection: Selection, state_ids: Sequence[str],
           members: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """The kept state fragments whose text a kept conversation fragment holds (``twins``)."""
    kept_state = [uid for uid in state_ids if uid in selection.kept]
    if not kept_state:
        return {}
    state_units, cut = set(state_ids), set(selection.cut)  # a cut copy does not hold the text
    timeline = chain.from_iterable(members[uid] for uid in selection.kept
                                   if uid not in state_units and uid not in cut)
    return timeline_twins(ctx.state, kept_state, timeline, ctx.required)


def _kept_tools(candidates: Sequence[ToolChoice], selection: Selection, unit_of: Mapping[str, Unit],
                attach: Mapping[str, tuple[str, int]]) -> tuple[ToolChoice, ...]:
    """The tools the selection kept, each with its reason: a tool the history calls is
    ``referenced`` when a kept group calls it, else the reason its own unit was made for
    (:func:`_alone_reason`)."""
    kept = [t for t in candidates if f"tool:{t.name}" in selection.kept]
    alone = [t for t in kept if t.reason == "referenced" and f"tool:{t.name}" not in selection.needed]
    if not alone:
        return tuple(kept)
    # kept by its own unit before a group that calls it came (rare): is that group kept?
    called = {attach[name][0] for uid in selection.kept if (u := unit_of.get(uid)) is not None
              for name in u.needs if name in attach}
    return tuple(t._replace(reason=_alone_reason(t)) if t in alone and f"tool:{t.name}" not in called
                 else t for t in kept)


def _alone_reason(tool: ToolChoice) -> str:
    """Why a tool the history calls is declared when no kept group calls it: its own unit
    (``tool_candidates``) is made when it shares a term with the query (``relevant``), when it
    holds a recent slot (``recent``: ``turn`` set) or else because the whole toolkit fits
    max_tools (``toolkit``). Every such tool was labelled ``relevant (bm25 0.00)``: a manifest
    that said a coding agent's read_file matched "yes, go ahead"."""
    if tool.score > 0.0:
        return "relevant"
    return "recent" if tool.turn is not None else "toolkit"


def _select(ctx: BuildCtx, units: list[Unit], available: int, shares: Mapping[str, float],
            shrink_required: Callable[[Sequence[Unit], int], dict[str, int]], candidates: Units,
            tools: dict[str, tuple[str, int]]) -> tuple[Selection, dict[str, Unit]]:
    """``select_units`` over the candidates, the units it reaches priced by their redacted
    payloads (``redacted_units``: those so priced are returned too), reused while its inputs
    are equal.

    Builds of one turn for several providers (and a rebuild with nothing new) select from the
    same units: the timeline's are the same objects (its sorted layers unchanged while their
    version is), the few state units equal ones. Selection is pure in those inputs, so the last
    answer of this facts table is handed out again (as a copy: the builder edits its dicts)."""
    tu = candidates.timeline
    key = (available, tuple(shares.items()), tu.sorted_version, units, tools)
    memo = ctx.objects_for("selection")
    hit = memo.get("last")
    if not (isinstance(hit, tuple) and hit[0] is tu and hit[1] == key):
        def walk(units: Sequence[Unit], presorted: Mapping[str, Sequence[Unit]]) -> Selection:
            return select_units(units, available, shares=shares, shrink_required=shrink_required,
                                presorted=presorted, list_unreached=False,  # see dropped_lines
                                tools=tools)
        hit = memo["last"] = (tu, key, *select_redacted(ctx, walk, units, candidates))
    s: Selection = hit[2]
    return (Selection(dict(s.kept), dict(s.walked), s.used, s.over_budget, s.cut, s.unreached, s.needed,
                      s.repeats), hit[3])
