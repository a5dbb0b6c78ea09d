"""The last stage of a build: the manifest's lines, the layer totals, the cache key, the body and
its hashes.

Why a module of its own: the builder decides what is kept, cut and laid out; this turns that
outcome into the audited record of what the model saw (``ContextManifest``) and the sendable
bytes. It is also where a long run's builds reuse the most (a kept unit's lines while its Unit
object lives, the stable prefix's key while its objects do), so its memo rules sit together.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any

import orjson

from contextfold.domain import trusted as checked
from contextfold.domain.canonical import canonical_object, canonical_utf8
from contextfold.domain.conversation import AssistantMessage, Conversation
from contextfold.domain.manifest import (
    LAYER_NAMES,
    BuildConfig,
    Calibration,
    ContextManifest,
    ExcludedFragment,
    ExcludedLines,
    ManifestFragment,
    ManifestTool,
    RedactionRecord,
    TruncationRecord,
)
from contextfold.domain.trusted import trusted
from contextfold.domain.version import BUILDER
from contextfold.projections.build_result import BuildResult
from contextfold.projections.fragment_facts import BuildCtx, Facts
from contextfold.projections.framing import MESSAGE_OVERHEAD
from contextfold.projections.kept_rows import KeptRows, Row, RowsEntry
from contextfold.projections.layout import HISTORY_OPENS_TEXT, HISTORY_START_TEXT, PREFIX_KINDS
from contextfold.projections.model_family import run_model_for
from contextfold.projections.reasoning import left_out_note, reasoning_tokens, with_refused
from contextfold.projections.render.anthropic import unsent_thinking
from contextfold.projections.request_json import (
    bytes_hash,
    canonical_body,
    canonical_hash,
    misses,
    model_json_all,
)
from contextfold.projections.selected_lines import plain_line, selected_line
from contextfold.projections.selection import Unit
from contextfold.projections.tool_exposure import ToolChoice, canonical_tool_json
from contextfold.projections.tool_recency import recency_phrase

__all__ = ["REPLY_PRIMING", "finish_build", "history_start_tokens", "selection_key"]

REPLY_PRIMING = 3
"""Tokens a request pays for the reply's priming, whatever it holds."""

_CONFIG_HASHES: dict[int, tuple[BuildConfig, str, str]] = {}
_NO_ROWS = (None, ())
_NO_LAYER_TOKENS: dict[str, int] = {name: 0 for name in LAYER_NAMES.values()}
"""Every layer's name at 0, in the manifest's order: a build's ``layer_tokens`` start as a copy
(a dict made in C, not a comprehension per build)."""
_NO_EXCLUSIONS: dict[str, int] = {r: 0 for r in ("duplicate", "superseded", "low_priority", "over_budget",
                                                 "stale")}
"""Every exclusion reason at 0, in the manifest's order (copied per build, as above)."""
_PATCH_LIMIT = 64
"""The last build's kept rows are patched while fewer than this many units (plus a quarter of
those kept) changed; past it (another budget's builds, say) they are gathered and sorted anew."""


def history_start_tokens(ctx: BuildCtx) -> int:
    """What the layout's opening note (``HISTORY_START_TEXT`` or ``HISTORY_OPENS_TEXT``) costs,
    when a request may need it: a request whose first kept message is the model's opens with it.
    Nothing but a required instruction, goal or plan (laid out before the timeline) keeps that
    from happening, so
    without one it is set aside before selection, whatever is then kept, and counted in the
    manifest's history layer and overhead. It went unpriced: 48 of 1,433 tau-bench builds at
    small windows sent up to 9 tokens more than their budget."""
    entries, active = ctx.state.entries, ctx.state.active
    if any(fid in active and entries[fid].kind in PREFIX_KINDS for fid in ctx.required):
        return 0
    # which of the two notes it is depends on what selection keeps: the longer is set aside
    return max(ctx.count(HISTORY_START_TEXT), ctx.count(HISTORY_OPENS_TEXT)) + MESSAGE_OVERHEAD


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


def selection_key(config: BuildConfig) -> str:
    """What names the memos of configurations that select alike: the config's hash without the
    provider and model, which change how a request is written, not (much) what it keeps."""
    return _hashes(config)[2]


def _content_only(value: Any) -> Any:
    """``value`` (the prefix's JSON) without its ``fragment_id`` members: a log position, not
    content. A policy or instruction appended again, word for word, moved the key, though the
    request's prefix (all a provider caches) was the same bytes."""
    if isinstance(value, dict):
        return {k: _content_only(v) for k, v in value.items() if k != "fragment_id"}
    if isinstance(value, list):
        return [_content_only(v) for v in value]
    return value


def finish_build(ctx: BuildCtx, config: BuildConfig, budget: int, conversation: Conversation,
                 request: dict[str, Any], kept: dict[str, int],
                 units: tuple[dict[str, tuple[str, ...]], Mapping[str, Unit], list[str]],
                 unit_layer_no: dict[str, int], truncated: set[str],
                 original_tokens: dict[str, int], truncations: list[TruncationRecord],
                 exclusions: tuple[list[ExcludedFragment], ExcludedLines],
                 exposure: tuple[tuple[ToolChoice, ...], int],
                 repairs: list[str],
                 current_input: str | None, calibration: Calibration | None = None,
                 cuts: tuple[dict[str, int], set[str], dict[str, dict[str, str]], dict[str, dict[str, str]]]
                 = ({}, set(), {}, {}),
                 *, opening: int, tool_prompt: int = 0, body_bytes: bytes | None = None) -> BuildResult:
    """The build's result for what was kept (``kept``: unit id -> granted tokens), cut and laid
    out: each kept fragment's manifest line and view in (layer, position) order, the layer
    totals, the exclusions in (reason, id) order, the stable prefix's cache key, the request's
    canonical bytes and hashes, and the manifest itself (unvalidated: every field is made here
    from validated parts). ``body_bytes``: the request's canonical bytes when they were made for
    its size limit already (``request_size``). ``tool_prompt``: what the builder set aside for
    the provider's tool-use system prompt (``tool_prompt``), in the tools layer and the overhead."""
    state = ctx.state
    members, unit_of, worked_units = units
    worked = frozenset(worked_units)
    # A unit's lines are the same as long as its Unit object is (a re-layered,
    # newly required or changed item gets a new one) and nothing was cut, reduced or loaded
    # for it. Plain rows are kept per unit id with the Unit they were made for: the ~1,000
    # unchanged units of a long run are matched in C, against the last build's rows first.
    unit_rows = ctx.objects_for("selected-units")
    last_rows = ctx.objects_for("kept-rows")
    kept_rows: KeptRows | None = last_rows.pop("last", None)  # put back when this build is done
    base = unit_rows if kept_rows is None else kept_rows.entries
    kept_uids = list(kept)
    kept_units = list(map(unit_of.__getitem__, kept_uids))
    got: list[Any] = list(map(base.get, kept_uids, repeat(_NO_ROWS)))
    same = list(map(operator.is_, map(itemgetter(0), got), kept_units))
    for uid in worked:  # cut, reduced or loaded now: never a kept plain row
        if uid in kept:
            same[kept_uids.index(uid)] = False
    changed: dict[str, Any] = {}
    last_entries = kept_rows.entries if kept_rows is not None else {}
    for i in misses(same, False):
        uid = kept_uids[i]
        entry = unit_rows.get(uid)
        if entry is None or entry[0] is not kept_units[i] or uid in worked:
            entry = unit_rows[uid] = _remade(ctx, uid, kept_units[i], members[uid], unit_layer_no[uid],
                                             uid in worked, current_input, truncated, original_tokens, cuts)
        if last_entries.get(uid) is not entry:  # (the unit cut as in the last build: its entry)
            changed[uid] = entry
    if kept_rows is None or len(changed) > _PATCH_LIMIT + len(kept_uids) // 4:  # start over: a full sort
        entries = dict(zip(kept_uids, got, strict=True))
        entries.update(changed)
        kept_rows = KeptRows(entries)
    else:
        # Units the last build kept and this one does not: none when every one it kept was found.
        found = len(kept_uids) - len(changed) + sum(uid in kept_rows.entries for uid in changed)
        gone = kept_rows.entries.keys() - kept.keys() if found < len(kept_rows.entries) else ()
        kept_rows.patch(gone, changed)
    layer_tokens = _NO_LAYER_TOKENS.copy()
    row_overhead = kept_rows.overhead
    for layer, tokens in kept_rows.tokens.items():
        layer_tokens[LAYER_NAMES[layer]] += tokens + row_overhead[layer]
    overhead_total = REPLY_PRIMING + sum(kept_rows.overhead.values())
    # ``opening``: what the builder set aside for the opening note (``history_start_tokens``),
    # counted whether or not this request opens with it: a budget the manifest says a request
    # fits in then holds it (and a larger one keeps all a smaller kept).
    layer_tokens["history"] += opening
    overhead_total += opening
    exposed_tools, tool_tokens = exposure
    # ``tool_tokens`` stays the schemas' (audits report it as such); the tools layer also holds
    # the tool-use system prompt, set aside as ``opening`` is, whether or not a tool was kept.
    layer_tokens["tools"] = tool_tokens + tool_prompt
    overhead_total += tool_prompt
    tool_fragments = []
    for t in exposed_tools:  # the same few lines build after build
        reason = (f"relevant (bm25 {t.score:.2f})" if t.reason == "relevant" else
                  "toolkit (the run's whole toolkit fits max_tools)" if t.reason == "toolkit" else
                  "fallback (no tool shares a term with the turn: the first registered fill max_tools)"
                  if t.reason == "fallback" else
                  f"recent ({recency_phrase(state, t.name, t.turn or 0)}; kept so the tool list, the start "
                  "of the cached prefix, does not change)" if t.reason == "recent" else t.reason)
        # One kept line per tool and price: a turn's neutral build and an OpenAI Chat build for
        # a measured model price a tool apart (``tool_pricing.tool_bill``), and with one line per
        # tool each build replaced the other's, so every build validated its tools' lines afresh.
        slot = f"{t.tokens} {t.name}"
        tool_fragments.append(ctx.cached("tool", slot, reason) or ctx.keep(
            "tool", slot, reason, ManifestTool(name=t.name, tokens=t.tokens, reason=reason)))
    # The stable prefix rarely changes: hash it once. The layout keeps its objects while they
    # are unchanged, so the same objects mean the same key; otherwise compare the dumps.
    # (Equality of the dumps implies equal JSON here: tools are already JSON strings and the
    # parts' fields have fixed types, so no 1 == True == 1.0 ambiguity can reach the comparison.)
    prefix_objects = (conversation.system, *conversation.tools,
                      *conversation.messages[:conversation.stable_prefix_messages])
    memo = state.memo.get(("cache_key", config.provider))
    if isinstance(memo, tuple) and len(memo[2]) == len(prefix_objects) and all(
            map(operator.is_, memo[2], prefix_objects)):
        cache_key: str = memo[1]
    else:
        cache_key, state.memo[("cache_key", config.provider)] = _cache_key(
            conversation, config.provider, memo if isinstance(memo, tuple) else None, prefix_objects)
    # canonical_hash(request), from the bytes kept as the body; the last body of this provider
    # again when the request is made of the same members (a rebuild with nothing new)
    last_body = state.memo.get(("body", config.provider))
    if body_bytes is not None:
        body, request_hash, state.memo[("body", config.provider)] = body_bytes, bytes_hash(body_bytes), None
    else:
        body, request_hash, state.memo[("body", config.provider)] = canonical_body(
            request, last_body if isinstance(last_body, tuple) else None)
    config_hash = _config_hash(config)
    turn = state.turn + 1
    # Sorted by (reason, id): the few other lines around the kept-sorted low_priority block.
    excluded, low_priority = exclusions
    counts = _NO_EXCLUSIONS.copy()
    for e in excluded:
        counts[e.reason] += 1
    counts["low_priority"] += len(low_priority)
    others = sorted(excluded, key=attrgetter("reason", "id"))
    split = next((i for i, e in enumerate(others) if e.reason > "low_priority"), len(others))
    excluded_items = (ExcludedLines.from_chunks((tuple(others[:split]), *low_priority.chunks,
                                                 tuple(others[split:]))) if others else low_priority)
    # Every field is made above from typed objects (tuples of validated lines, the validated
    # config): re-validating them per build cost 0.35 ms on a long run's ~10,000 lines.
    # tests/unit/test_build_cache.py validates built manifests against the model, and the tests
    # run with ``trusted.CHECKED``.
    manifest = trusted(
        ContextManifest,
        request_id=_request_id(state.run_id, turn, state.version, config_hash),
        run_id=state.run_id, turn=turn, log_version=state.version, provider=config.provider,
        model=config.model or run_model_for(config.provider, state.model),
        encoding=state.counter.encoding_name,
        window_tokens=config.window, reserved_output_tokens=config.reserve, budget_tokens=budget,
        selected_tokens=sum(layer_tokens.values()) + REPLY_PRIMING, overhead_tokens=overhead_total,
        layer_tokens=layer_tokens,
        fragments=_noting_unsent_thinking(ctx, conversation, kept_rows.fragments()),
        excluded=counts, excluded_items=excluded_items,
        tools=tuple(tool_fragments), tool_tokens=tool_tokens, truncations=tuple(truncations),
        repairs=tuple(repairs), cache_key=cache_key, request_hash=request_hash,
        config_hash=config_hash, config=config, calibration=calibration,
        redactions=tuple(RedactionRecord(fragment_id=fid, rule=f.rule, start=f.start, end=f.end)
                         for fid in _kept_in_order(kept_rows, ctx.redacted.keys())
                         for f in ctx.redacted[fid][1].findings))
    result = BuildResult(conversation, request, manifest, kept_rows.view_tuple(), horizon=state.horizon,
                         body_bytes=body)
    last_rows["last"] = kept_rows
    return result


def _request_id(run_id: str, turn: int, version: int, config_hash: str) -> str:
    """The manifest's ``request_id``: ``req_`` and the first 16 hex of
    ``canonical_hash([run_id, turn, version, config_hash])``. Written by orjson straight away:
    a list of two strs and two ints is written as ``json.dumps`` writes it or orjson raises (a
    lone surrogate, an int past 64 bits: the canonical path then), and the general path (the
    body's remembered-dict lookups, the float walk, a copy) took ~4 of a build's ~5 us here,
    in every build."""
    try:
        data = orjson.dumps([run_id, turn, version, config_hash])
    except TypeError:  # orjson.JSONEncodeError
        data = canonical_utf8([run_id, turn, version, config_hash])
    return "req_" + bytes_hash(data)[:16]


def _cache_key(conversation: Conversation, provider: str, memo: tuple[Any, ...] | None,
               prefix_objects: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """The stable prefix's cache key, and the memo to keep: blake3 of the canonical JSON of
    ``{"prefix": ..., "rendered_by": [provider, BUILDER], "system": ..., "tools": [...]}``.

    With the provider and the builder that render it: the key is of the rendered prefix
    (DESIGN 4), and one neutral prefix is rendered to other bytes for another provider or by a
    builder whose renderer changed (0.9.0 added "properties" to OpenAI tool schemas).

    Why per member: the tools a kept history calls come and go as its window slides (40% of
    tau-bench's first builds at 3k declare other tools than the last), and each time the whole
    key was dumped and hashed again, the ~6 KB system prompt with it. The canonical JSON of an
    object is its sorted members' (``canonical_object``), so a member whose objects are the
    last key's keeps its bytes; equal bytes keep the last key."""
    system = conversation.system
    prefix = conversation.messages[:conversation.stable_prefix_messages]
    last = memo[3] if memo is not None and len(memo) == 4 else None
    # (the layout hands out the same system tuple and prefix messages while they are unchanged)
    system_json = (last[1] if last is not None and last[0] is system
                   else canonical_utf8(_content_only(model_json_all(system))))
    prefix_json = (last[3] if last is not None and len(last[2]) == len(prefix)
                   and all(map(operator.is_, last[2], prefix))
                   else canonical_utf8(_content_only(model_json_all(prefix))))
    data = canonical_object({"system": system_json,
                             "tools": canonical_utf8([canonical_tool_json(t) for t in conversation.tools]),
                             "prefix": prefix_json, "rendered_by": canonical_utf8([provider, BUILDER])})
    key = memo[1] if memo is not None and memo[0] == data else bytes_hash(data)
    if checked.CHECKED:  # the suite: the key is the hash of the stable prefix's JSON, dumped whole
        whole = canonical_hash({"system": _content_only(model_json_all(system)),
                                "tools": [canonical_tool_json(t) for t in conversation.tools],
                                "prefix": _content_only(model_json_all(prefix)),
                                "rendered_by": [provider, BUILDER]})
        if whole != key:
            raise AssertionError(f"cache key {key} from its members, {whole} dumped whole")
    return key, (data, key, prefix_objects, (system, system_json, prefix, prefix_json))



def _noting_unsent_thinking(ctx: BuildCtx, conversation: Conversation,
                            lines: tuple[ManifestFragment, ...]) -> tuple[ManifestFragment, ...]:
    """``lines``, with the word on each reply whose Anthropic thinking the body leaves out made
    true (``render.anthropic.unsent_thinking``): it said "sent verbatim" of the thinking of a
    reply merged with a later one, which the message does not carry."""
    if ctx.config.provider != "anthropic" or not ctx.state.reasoning_seen:
        return lines
    unsent = unsent_thinking(conversation)
    if not unsent:
        return lines
    reasoning = {m.fragment_id: m.reasoning for m in conversation.messages
                 if isinstance(m, AssistantMessage) and m.fragment_id in unsent and m.reasoning is not None}
    out = []
    for line in lines:
        r = reasoning.get(line.id)
        out.append(line if r is None else line.model_copy(update={"reasoning": with_refused(
            left_out_note(r, reasoning_tokens(r, ctx.count), unsent[line.id]),
            ctx.state.reasoning_refused.get(line.id))}))
    return tuple(out)


def _kept_in_order(kept_rows: KeptRows, fids: Iterable[str]) -> list[str]:
    """The kept ones of ``fids``, in the manifest's (layer, position, id) order."""
    row_of = kept_rows.row_of
    return [r[2] for r in sorted(row_of[fid] for fid in fids if fid in row_of)]


def _remade(ctx: BuildCtx, uid: str, unit: Unit, fids: tuple[str, ...], layer_no: int, worked: bool,
            current_input: str | None, truncated: set[str], original_tokens: dict[str, int],
            cuts: tuple[dict[str, int], set[str], dict[str, dict[str, str]], dict[str, dict[str, str]]]
            ) -> RowsEntry:
    """A kept unit's entry ``(unit, rows)`` made afresh, or ``(None, rows)`` when its rows are
    not plain (something cut, reduced, loaded or priced as media).

    Rows that are not plain are kept per unit with every input they were made from (the unit,
    each fragment's entry and facts, what was cut, reduced or shown of it), so the unit cut at
    the budget's edge is not remade by the next builds that cut it alike (the second provider
    of a turn, a rebuild): its entry is then the last build's, and nothing is patched."""
    facts = list(map(ctx.facts, fids))
    if not worked and truncated.isdisjoint(fids) and all(f.media is None for f in facts):  # plain
        return (unit, _unit_rows(ctx, fids, facts, layer_no, True, current_input, truncated,
                                 original_tokens, cuts)[1])
    text_cut, reduced, shown_in, unsent = cuts
    entries, required = ctx.state.entries, ctx.required
    key = (unit, layer_no, worked, current_input, [
        (entries[fid], f, fid in required, text_cut.get(fid), fid in reduced, fid in truncated,
         original_tokens.get(fid), shown_in.get(fid), unsent.get(fid))
        for fid, f in zip(fids, facts, strict=True)])
    memo = ctx.objects_for("remade-rows")
    hit = memo.get(uid)
    if hit is not None and hit[0] == key:
        entry: RowsEntry = hit[1]
        return entry
    plain, rows = _unit_rows(ctx, fids, facts, layer_no, not worked, current_input, truncated,
                             original_tokens, cuts)
    if plain:
        return (unit, rows)
    if len(memo) >= 4096:
        memo.clear()
    entry = (None, rows)
    memo[uid] = (key, entry)
    return entry


def _unit_rows(ctx: BuildCtx, fids: tuple[str, ...], fids_facts: list[Facts], layer_no: int, plain: bool,
               current_input: str | None, truncated: set[str], original_tokens: dict[str, int],
               cuts: tuple[dict[str, int], set[str], dict[str, dict[str, str]], dict[str, dict[str, str]]]
               ) -> tuple[bool, list[Row]]:
    """The manifest rows of a kept unit's fragments (``fids_facts``: their ``ctx.facts``, which
    the caller has asked for already), and whether they are plain (no media, nothing cut,
    reduced or loaded: the same while the unit object is)."""
    text_cut, reduced, shown_in, unsent = cuts
    entries = ctx.state.entries
    rows: list[Row] = []
    for fid, facts in zip(fids, fids_facts, strict=True):
        if facts.media is None and fid not in truncated and fid not in text_cut:  # JSON compacted whole
            line = plain_line(ctx, facts, layer_no, current_input)
        else:
            plain = False
            line = selected_line(ctx, facts, layer_no, current_input, text_cut, reduced,
                                 truncated, original_tokens, (shown_in, unsent))
        layer, tokens, overhead, view, mline = line
        rows.append((layer, entries[fid].position, fid, view, mline, tokens, overhead))
    return plain, rows
