"""Build one request from a folded run: tools, dedupe, selection, truncation, layout, manifest.

Pure: the only ports are ``load_text`` (full text of an artifact-backed
payload, used when that payload is selected or truncated) and the renderer.
The same state and config always give the same request, manifest and hashes.

Costs counted, not ignored: every fragment pays ``MESSAGE_OVERHEAD`` tokens of
message framing, a data fragment also pays its ``<data ...>`` wrapper, each
exposed tool pays its canonical JSON plus ``TOOL_OVERHEAD_TOKENS``, and the
request pays ``REPLY_PRIMING``.

Dedupe: optional state fragments (instructions, evidence, memory) that share a
content hash or a semantic key (evidence ``source_ref``) keep one copy: the
more authoritative (runtime > user > workspace > external), then the newer.
The loser is excluded as ``duplicate`` with ``replaced_by``. Supersession
(a newer read of a file, a new plan or goal) comes from the fold and is
listed as ``superseded`` with ``replaced_by``.

Tool exposure: pinned tools, tools used by the visible history, and the most
relevant to the goal, the ready plan step and the latest input (BM25), under
the ``tools`` share. A tool the policy does not allow is never exposed; a
history group that used one is excluded as ``stale`` (a provider rejects a
call to an undeclared tool). A tool the history used but the log never
registered is declared with a minimal schema (imported histories often lack
tool specs) and recorded as a repair.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from itertools import chain, groupby, repeat
from operator import attrgetter, itemgetter
from typing import Any

from contextfold.domain.conversation import Conversation
from contextfold.domain.errors import BudgetError
from contextfold.domain.events import ArtifactRef, TextBlock, ToolSpec
from contextfold.domain.manifest import (
    LAYER_NAMES,
    BuildConfig,
    Calibration,
    ContextManifest,
    ExcludedFragment,
    ManifestFragment,
    ManifestTool,
    RedactionRecord,
    TruncationRecord,
)
from contextfold.projections.build_result import BuildResult
from contextfold.projections.calibration import calibrated_budget
from contextfold.projections.cut_text import split_room, truncate_fragment
from contextfold.projections.exclusions import dropped_lines
from contextfold.projections.fold import paused_gc
from contextfold.projections.layout import LayoutInput, lay_out
from contextfold.projections.media_plan import MediaFinish, finalize_media
from contextfold.projections.redact import config_policy
from contextfold.projections.request_json import (
    bytes_hash,
    canonical_bytes,
    canonical_hash,
    conversation_json,
    misses,
    model_json_all,
)
from contextfold.projections.selected_lines import SelectedView, plain_line, selected_line
from contextfold.projections.selection import Selection, Unit, select_units
from contextfold.projections.state import MessageItem, RunState, ToolPolicy
from contextfold.projections.tool_exposure import ToolChoice, canonical_tool_json, choose_tools, rankable
from contextfold.projections.units import (
    MESSAGE_OVERHEAD,
    BuildCtx,
    Units,
    current_input_of,
    make_units,
)

__all__ = ["MESSAGE_OVERHEAD", "REPLY_PRIMING", "BuildResult", "build_context", "canonical_hash"]

_UNBOUNDED = 1 << 40
_TOOL_SCORE = 100.0
"""Optional tool units rank by BM25 above this base: within the tools layer only their order matters."""

REPLY_PRIMING = 3


def _query(state: RunState) -> str:
    parts: list[str] = []
    if state.goal is not None:
        parts.append(state.goal.goal)
    if state.plan is not None:
        parts += [s.title for s in state.plan.steps if s.status in ("ready", "in_progress")]
    for item in reversed(state.timeline()):
        if isinstance(item, MessageItem) and item.role == "user":
            f = state.entries[item.fragment_id].fragment
            parts += [b.text for b in f.content if isinstance(b, TextBlock)]
            break
    return "\n".join(parts)


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
    """
    with paused_gc():
        return _build(state, config, load_text=load_text, render=render, repairs=repairs,
                      calibration=calibration, load_bytes=load_bytes)


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

    Media: images and PDFs are priced for ``config.provider`` (``media_cost``;
    ``neutral`` takes the dearest provider), reduced (OpenAI ``detail: low``,
    strategy ``media_detail_low``) before text is truncated or the unit is
    dropped, deduped by hash, and their artifact bytes are inlined through
    ``load_bytes`` when a provider request is rendered.
    """
    budget = calibrated_budget(config.window - config.reserve, calibration)
    if budget <= REPLY_PRIMING:
        raise BudgetError(f"window {config.window} minus reserve {config.reserve} leaves no budget")
    ctx = BuildCtx(state, config, load_text, state.required_ids(), state.counter.count,
                   policy=config_policy(config) if config.redact else None)
    timeline = state.timeline()
    # Inline texts are redacted before selection, so costs see the redacted text (Facts).
    # Artifact-backed payloads (the big ones) are redacted when their text is first
    # needed (kept or truncated): loading every artifact on every build would cost
    # the whole log's payloads.
    repair_notes = list(repairs)

    # ---- tools
    policy = state.tool_policy()
    used_names = sorted(state.used_tool_names())
    registry: dict[str, ToolSpec] = dict(state.tools)
    for name in used_names:
        if name not in registry:
            registry[name] = _declared_spec(name)
            repair_notes.append(f"declared_unregistered_tool:{name}")
    shares = config.layer_shares
    # Tool schemas compete in the same selection as fragments (layer "tools", its
    # share of the budget): pinned and history-referenced tools are required units,
    # the most relevant others optional ones ranked by BM25. Selecting them apart,
    # before the fragments, made the fragment budget jump down when a larger budget
    # let one more relevant tool in, so a larger budget could keep less.
    candidates_tools, tool_units = _tool_candidates(
        ctx, [registry[n] for n in sorted(registry)], policy, used_names)
    offered = {t.name for t in candidates_tools}

    # ---- candidates: state fragments (deduped) and timeline units
    current_input = current_input_of(timeline)
    candidates = make_units(ctx, timeline, offered, current_input)
    units, members, unit_layer_no = candidates.units, candidates.members, candidates.layer_no
    excluded = candidates.excluded

    # ---- selection
    available = budget - REPLY_PRIMING

    def shrink_required(required: Sequence[Unit], room: int) -> dict[str, int]:
        grants = {u.id: u.tokens for u in required}
        deficit = sum(grants.values()) - room
        for u in sorted((u for u in required if u.shrinkable), key=lambda u: (-u.tokens, u.id)):
            if deficit <= 0:
                break
            cut = min(deficit, u.tokens - (u.min_tokens or u.tokens))
            grants[u.id] -= cut
            deficit -= cut
        return grants

    selection = _select(ctx, [*tool_units, *units], available, shares, shrink_required, candidates)
    kept_tools = tuple(t for t in candidates_tools if f"tool:{t.name}" in selection.kept)
    exposure = (kept_tools, sum(t.tokens for t in kept_tools))
    tools = tuple(registry[t.name] for t in kept_tools)
    for t in candidates_tools:  # tools are reported apart from fragments
        selection.kept.pop(f"tool:{t.name}", None)
    unit_by_id = candidates.unit_of

    # ---- truncation and texts
    texts: dict[str, str] = {}
    truncations: list[TruncationRecord] = []
    truncated: set[str] = set()
    text_cut: dict[str, int] = {}  # the fragments whose text was cut, with its tokens now
    reduced: set[str] = set()
    original_tokens: dict[str, int] = {}
    deferred: set[str] = set()
    # a state unit is one fragment, its id the fragment's; the timeline keeps its own set
    loads = (selection.kept.keys() & candidates.timeline.artifact_units
             | {uid for uid in candidates.state_ids if uid in selection.kept and ctx.has_artifact_text(uid)})
    worked = sorted(loads.union(selection.cut))
    plain_loads = ctx.objects_for("plain-loads")
    for uid in worked:  # units cut to fit, or with a payload to load: the rest render as logged
        grant = selection.kept[uid]
        unit = unit_by_id[uid]
        ids = members[uid]
        if grant >= unit.tokens and _shown_as_logged(ctx, plain_loads, uid, unit, ids, deferred):
            continue
        for fid in ids:
            if ctx.has_artifact_text(fid) and grant >= unit.tokens:
                ctx.redact(fid)  # memoised by content: reads the text back only the first time
                if fid not in ctx.redacted:  # shown as logged: read back if the layout needs it
                    deferred.add(fid)
                    continue
                logged = ctx.state.entries[fid].token_count
                texts[fid] = ctx.full_text(fid)  # redacted
                if ctx.frag(fid).token_count > logged:  # a placeholder longer than its secret
                    cut = truncate_fragment(ctx, fid, logged)
                    texts[fid] = cut.text
                    truncated.add(fid)
                    text_cut[fid] = cut.tokens
                    original_tokens[fid] = ctx.frag(fid).token_count
        if grant >= unit.tokens:
            continue
        deficit = unit.tokens - grant
        for fid in ids:  # the safe media step first: a cheaper rendition of the same image
            m = ctx.media(fid)
            if deficit > 0 and m is not None and m.reducible:
                deficit -= m.tokens - m.reduced_tokens
                reduced.add(fid)
                truncated.add(fid)
                original_tokens[fid] = ctx.content_tokens(fid)
                truncations.append(TruncationRecord(
                    id=fid, strategy="media_detail_low", original_tokens=m.tokens, tokens=m.reduced_tokens,
                    original_chars=0, kept=f"{len(m.blocks)} media at detail low ({m.tokens} -> "
                    f"{m.reduced_tokens} tokens)"))
        if deficit <= 0:
            continue
        shrink = [fid for fid in ids if ctx.text_shrinkable(fid)]
        fixed = sum(ctx.cost(fid) - (ctx.text_tokens(fid) if fid in shrink else 0) for fid in ids)
        room = grant - fixed + (unit.tokens - grant - deficit)  # media savings lower the fixed part
        shares_of = split_room(room, [ctx.text_tokens(fid) for fid in shrink])
        for fid, share in zip(shrink, shares_of, strict=True):
            # Redacted (and recorded as this build's) here, not as a side effect of cutting it:
            # a cut remembered from an earlier build reads no text, and the manifest's
            # redaction records and the fragment's facts must not depend on that.
            ctx.redact(fid)
            result = truncate_fragment(ctx, fid, max(share, 1))
            texts[fid] = result.text
            truncated.add(fid)
            text_cut[fid] = result.tokens
            original_tokens[fid] = (ctx.content_tokens(fid) if ctx.media(fid) is not None
                                    else result.original_tokens)
            kept_ranges = ", ".join(f"{r.start}-{r.end}" for r in result.kept)
            truncations.append(TruncationRecord(
                id=fid, strategy=result.strategy, original_tokens=result.original_tokens,
                tokens=result.tokens, original_chars=result.original_chars,
                kept=f"{result.unit}s {kept_ranges}" if kept_ranges else "marker only"))

    kept_ids = frozenset(chain.from_iterable(map(members.__getitem__, selection.kept)))
    for fid in sorted(kept_ids & ctx.redacted.keys()):
        texts.setdefault(fid, ctx.redacted[fid][1].text)
    others, low_priority = dropped_lines(ctx, _selection_key(config), selection, unit_by_id, members,
                                         candidates.timeline, candidates.state_ids)
    excluded.extend(others)
    for old, new in sorted(state.superseded_by.items()):
        if new in state.active and state.entries[old].fragment.kind != "tool_spec":
            f = ctx.seen_frag(old)
            excluded.append(ExcludedFragment(
                id=old, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count, reason="superseded",
                replaced_by=new))

    # ``texts`` holds only cut or redacted texts; payloads shown as logged are ``deferred``.
    conversation = lay_out(LayoutInput(state=state, kept=kept_ids, texts=texts,
                                       kept_items=candidates.timeline.kept_items(selection.kept.keys()),
                                       items_of=candidates.timeline.items_of,
                                       deferred=frozenset(deferred), read_text=ctx.full_text,
                                       truncated=frozenset(truncated), tools=tools,
                                       model=config.model or state.model, current_input=current_input))
    # Without priced media in the run the layout made no media part: nothing to reduce, inline
    # or dedupe (a pass over every message of a long run's request saved).
    media = (finalize_media(conversation, reduced=frozenset(reduced),
                            load_bytes=None if config.provider == "neutral" else load_bytes)
             if state.media_seen else MediaFinish(conversation))
    conversation = media.conversation
    if render is None or config.provider == "neutral":
        request = conversation_json(conversation)
    else:
        request = render(conversation, config.provider, config.reserve)
    changed = text_cut.keys() | truncated | reduced
    cut_units = [uid for uid in worked if not changed.isdisjoint(members[uid])]
    return _finish(ctx, config, budget, conversation, request, selection.kept,
                   (members, unit_by_id, cut_units), unit_layer_no,
                   truncated, original_tokens, truncations, (excluded, low_priority), exposure,
                   repair_notes, current_input, calibration, (text_cut, reduced, media.shown_in))


def _select(ctx: BuildCtx, units: list[Unit], available: int, shares: Mapping[str, float],
            shrink_required: Callable[[Sequence[Unit], int], dict[str, int]], candidates: Units
            ) -> Selection:
    """``select_units`` over the candidates, reused while its inputs are equal.

    Builds of one turn for several providers (and a rebuild with nothing new) select from the
    same units: the timeline's are the same objects (its sorted layers unchanged while their
    version is), the few state units equal ones. Selection is pure in those inputs, so the last
    answer of this facts table is handed out again (as a copy: the builder edits its dicts)."""
    tu = candidates.timeline
    key = (available, tuple(shares.items()), tu.sorted_version, units)
    memo = ctx.objects_for("selection")
    hit = memo.get("last")
    if not (isinstance(hit, tuple) and hit[0] is tu and hit[1] == key):
        hit = memo["last"] = (tu, key, select_units(units, available, shares=shares,
                                                    shrink_required=shrink_required,
                                                    presorted=candidates.presorted,
                                                    list_unreached=False))  # see dropped_lines
    s: Selection = hit[2]
    return Selection(dict(s.kept), dict(s.walked), s.used, s.over_budget, s.cut, s.unreached)


def _tool_candidates(ctx: BuildCtx, specs: list[ToolSpec], policy: ToolPolicy,
                     used_names: list[str]) -> tuple[list[ToolChoice], list[Unit]]:
    """The tools that may be exposed, ranked, and their selection units. Pure in its inputs,
    which rarely change between builds (the query moves with the goal, the ready plan step and
    the latest user input): the last answer is kept and reused while they are equal.

    When every permitted tool is pinned or used by the history (a runtime that registers no
    schemas of its own declares just those), there is nothing to rank: every candidate is a
    required unit, whose score orders nothing. Then the query is neither made nor ranked, and
    a new user input does not invalidate the answer."""
    ranked = ctx.config.max_tools > 0 and rankable(
        (s.name for s in specs), pinned=policy.pinned, referenced=set(used_names), allowed=policy.allowed,
        denied=policy.denied)
    query = _query(ctx.state) if ranked else ""
    key = (query, tuple(specs), policy, tuple(used_names), ctx.config.max_tools,
           ctx.state.counter.encoding_name)
    hit = ctx.state.memo.get("tool-candidates")
    if isinstance(hit, tuple) and hit[0] == key:
        return hit[1], hit[2]
    exposed, _, _, _ = choose_tools(specs, query=query, pinned=policy.pinned, referenced=used_names,
                                    allowed=policy.allowed, denied=policy.denied, budget_tokens=_UNBOUNDED,
                                    count=ctx.count, max_relevant=ctx.config.max_tools,
                                    report_excluded=False)
    units = [Unit(f"tool:{t.name}", "tools", t.tokens, _TOOL_SCORE + t.score, 0,
                  required=t.reason != "relevant") for t in exposed]
    ctx.state.memo["tool-candidates"] = (key, exposed, units)
    return exposed, units


def _shown_as_logged(ctx: BuildCtx, memo: dict[str, Any], uid: str, unit: Unit, ids: tuple[str, ...],
                     deferred: set[str]) -> bool:
    """Whether an uncut unit's payloads all render as logged (none has a secret): then they are
    added to ``deferred``. Known from an earlier build while the unit and its entries are the
    same objects: a long run keeps ~40 artifact-backed units, and asking the redaction memo
    for each of their fragments again was ~0.3 ms of every build."""
    hit = memo.get(uid)
    entries = ctx.state.entries
    if hit is not None and hit[0] is unit and all(map(operator.is_, map(entries.__getitem__, ids), hit[1])):
        deferred.update(hit[2])
        return True
    loads = tuple(fid for fid in ids if ctx.has_artifact_text(fid))
    if any(map(ctx.redacts, loads)):  # memoised by content: reads the text back the first time
        return False
    memo[uid] = (unit, tuple(map(entries.__getitem__, ids)), loads)
    deferred.update(loads)
    return True


_CONFIG_HASHES: dict[int, tuple[BuildConfig, str, str]] = {}
_NO_ROWS = (None, ())


def _hashes(config: BuildConfig) -> tuple[BuildConfig, str, str]:
    """(config, its canonical hash, the hash without provider and model), once per config
    object (an agent loop reuses its config)."""
    hit = _CONFIG_HASHES.get(id(config))
    if hit is None or hit[0] is not config:
        if len(_CONFIG_HASHES) >= 1024:
            _CONFIG_HASHES.clear()
        data = config.model_dump(mode="json")
        hit = _CONFIG_HASHES[id(config)] = (config, canonical_hash(data), canonical_hash(
            {k: v for k, v in data.items() if k not in ("provider", "model")}))
    return hit


def _config_hash(config: BuildConfig) -> str:
    """The config's canonical hash (the manifest's ``config_hash``)."""
    return _hashes(config)[1]


def _selection_key(config: BuildConfig) -> str:
    """What names the memos of configurations that select alike: the config's hash without the
    provider and model, which change how a request is written, not (much) what it keeps."""
    return _hashes(config)[2]


def _finish(ctx: BuildCtx, config: BuildConfig, budget: int, conversation: Conversation,
            request: dict[str, Any], kept: dict[str, int],
            units: tuple[dict[str, tuple[str, ...]], Mapping[str, Unit], list[str]],
            unit_layer_no: dict[str, int], truncated: set[str],
            original_tokens: dict[str, int], truncations: list[TruncationRecord],
            exclusions: tuple[list[ExcludedFragment], tuple[ExcludedFragment, ...]],
            exposure: tuple[tuple[ToolChoice, ...], int],
            repairs: list[str],
            current_input: str | None, calibration: Calibration | None = None,
            cuts: tuple[dict[str, int], set[str], dict[str, dict[str, str]]] = ({}, set(), {})
            ) -> BuildResult:
    state = ctx.state
    text_cut, reduced, shown_in = cuts
    members, unit_of, worked_units = units
    worked = frozenset(worked_units)
    entries = state.entries
    # A unit's lines are the same as long as its Unit object is (a re-layered,
    # newly required or changed item gets a new one) and nothing was cut, reduced or loaded
    # for it. Plain rows are kept per unit id with the Unit they were made for: the ~1,000
    # unchanged units of a long run are matched in C.
    unit_rows = ctx.objects_for("selected-units")
    kept_uids = list(kept)
    kept_units = list(map(unit_of.__getitem__, kept_uids))
    got: list[Any] = list(map(unit_rows.get, kept_uids, repeat(_NO_ROWS)))
    for i in misses(list(map(operator.is_, map(itemgetter(0), got), kept_units)), False):
        got[i] = None
    for uid in worked:  # cut, reduced or loaded now: never a kept plain row
        if uid in kept:
            got[kept_uids.index(uid)] = None
    for i in misses(got):
        uid = kept_uids[i]
        layer_no = unit_layer_no[uid]
        rows = []
        plain = uid not in worked
        for fid in members[uid]:
            facts = ctx.facts(fid)
            if facts.media is None and fid not in truncated:  # text_cut is a subset of truncated
                line = plain_line(ctx, facts, layer_no, current_input)
            else:
                plain = False
                line = selected_line(ctx, facts, layer_no, current_input, text_cut, reduced,
                                     truncated, original_tokens, shown_in)
            layer, tokens, overhead, view, mline = line
            rows.append((layer, entries[fid].position, fid, view, mline, tokens, overhead))
        got[i] = unit_rows[uid] = (kept_units[i] if plain else None, rows)  # None: remade next build
    selected: list[tuple[int, int, str, SelectedView, ManifestFragment, int, int]] = list(
        chain.from_iterable(map(itemgetter(1), got)))
    selected.sort()  # by (layer, position, id): ids are unique, so no comparison reaches the view
    kept_fids = set(map(itemgetter(2), selected))
    layer_tokens: dict[str, int] = {name: 0 for name in LAYER_NAMES.values()}
    overhead_total = REPLY_PRIMING
    for layer, group in groupby(selected, key=itemgetter(0)):  # sorted by layer first
        rows_of_layer = list(group)
        overhead = sum(map(itemgetter(6), rows_of_layer))
        overhead_total += overhead
        layer_tokens[LAYER_NAMES[layer]] += sum(map(itemgetter(5), rows_of_layer)) + overhead
    exposed_tools, tool_tokens = exposure
    layer_tokens["tools"] = tool_tokens
    tool_fragments = []
    for t in exposed_tools:  # the same few lines build after build
        reason = t.reason if t.reason != "relevant" else f"relevant (bm25 {t.score:.2f})"
        tool_fragments.append(ctx.cached("tool", t.name, (t.tokens, reason)) or ctx.keep(
            "tool", t.name, (t.tokens, reason), ManifestTool(name=t.name, tokens=t.tokens, reason=reason)))
    # The stable prefix rarely changes: hash it once. The layout keeps its objects while they
    # are unchanged, so the same objects mean the same key; otherwise compare the dumps.
    # (Equality of the dumps implies equal JSON here: tools are already JSON strings and the
    # parts' fields have fixed types, so no 1 == True == 1.0 ambiguity can reach the comparison.)
    prefix_objects = (conversation.system, *conversation.tools,
                      *conversation.messages[:conversation.stable_prefix_messages])
    memo = state.memo.get("cache_key")
    if isinstance(memo, tuple) and len(memo[2]) == len(prefix_objects) and all(
            map(operator.is_, memo[2], prefix_objects)):
        cache_key: str = memo[1]
    else:
        # The parts' dicts are the remembered ones (made once per object): a new tool in the
        # prefix re-hashes it without dumping the system prompt again.
        stable = {"system": model_json_all(conversation.system),
                  "tools": [canonical_tool_json(t) for t in conversation.tools],
                  "prefix": model_json_all(conversation.messages[:conversation.stable_prefix_messages])}
        cache_key = memo[1] if isinstance(memo, tuple) and memo[0] == stable else canonical_hash(stable)
        state.memo["cache_key"] = (stable, cache_key, prefix_objects)
    body = canonical_bytes(request)
    request_hash = bytes_hash(body)  # canonical_hash(request), from the bytes kept as the body
    config_hash = _config_hash(config)
    turn = state.turn + 1
    # Sorted by (reason, id): the few other lines around the kept-sorted low_priority block.
    excluded, low_priority = exclusions
    counts = {r: 0 for r in ("duplicate", "superseded", "low_priority", "over_budget", "stale")}
    for e in excluded:
        counts[e.reason] += 1
    counts["low_priority"] += len(low_priority)
    others = sorted(excluded, key=attrgetter("reason", "id"))
    split = next((i for i, e in enumerate(others) if e.reason > "low_priority"), len(others))
    excluded_items = (*others[:split], *low_priority, *others[split:]) if others else low_priority
    # Every field is made above from typed objects (tuples of validated lines, the validated
    # config): re-validating them per build cost 0.35 ms on a long run's ~10,000 lines.
    # tests/unit/test_build_cache.py validates built manifests against the model.
    manifest = ContextManifest.model_construct(
        request_id="req_" + canonical_hash([state.run_id, turn, state.version, config_hash])[:16],
        run_id=state.run_id, turn=turn, log_version=state.version, provider=config.provider,
        model=config.model or state.model, encoding=state.counter.encoding_name,
        window_tokens=config.window, reserved_output_tokens=config.reserve, budget_tokens=budget,
        selected_tokens=sum(layer_tokens.values()) + REPLY_PRIMING, overhead_tokens=overhead_total,
        layer_tokens=layer_tokens,
        fragments=tuple(map(itemgetter(4), selected)),
        excluded=counts, excluded_items=excluded_items,
        tools=tuple(tool_fragments), tool_tokens=tool_tokens, truncations=tuple(truncations),
        repairs=tuple(repairs), cache_key=cache_key, request_hash=request_hash,
        config_hash=config_hash, config=config, calibration=calibration,
        redactions=tuple(RedactionRecord(fragment_id=v.id, rule=f.rule, start=f.start, end=f.end)
                         for _, _, _, v, _, _, _ in (selected if ctx.redacted.keys() & kept_fids else ())
                         if v.id in ctx.redacted for f in ctx.redacted[v.id][1].findings))
    return BuildResult(conversation, request, manifest, tuple(map(itemgetter(3), selected)),
                       horizon=state.horizon, body_bytes=body)
