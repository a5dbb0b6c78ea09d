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

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import blake3

from contextfold.domain.conversation import Conversation
from contextfold.domain.errors import BudgetError
from contextfold.domain.events import ArtifactRef, DocumentBlock, TextBlock, ToolSpec
from contextfold.domain.fragments import TRUST_RANK, ContextFragment, ToolResultBlock
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
from contextfold.projections.calibration import calibrated_budget
from contextfold.projections.diagnose import lean_log
from contextfold.projections.fold import paused_gc
from contextfold.projections.layout import LayoutInput, lay_out
from contextfold.projections.media_plan import FragmentMedia, finalize_media, plan_fragment
from contextfold.projections.redact import Redacted, RedactionPolicy, config_policy, redact_fragment
from contextfold.projections.selection import Unit, score, select_units
from contextfold.projections.state import MessageItem, RunState, ToolGroup
from contextfold.projections.tool_exposure import canonical_tool_json, select_tools
from contextfold.projections.truncate import Truncation, truncate

__all__ = ["MESSAGE_OVERHEAD", "REPLY_PRIMING", "BuildResult", "build_context", "canonical_hash"]

MESSAGE_OVERHEAD = 4
_REDACTION_MEMO_LIMIT = 200_000
_REDACTIONS: dict[tuple[str, str, str, str, RedactionPolicy], tuple[ContextFragment, Redacted] | None] = {}
"""Redaction results by fragment identity and content: builds of a growing run repeat them."""
REPLY_PRIMING = 3
_SHRINK_FLOOR = 48
_STATE_LAYER = {"policy": "policy", "instruction": "policy", "goal": "goal", "success_contract": "goal",
                "plan": "plan", "evidence": "retrieval", "memory": "retrieval"}
_DATA_KINDS = frozenset({"instruction", "evidence", "memory", "tool_result"})


def canonical_hash(obj: Any) -> str:
    return blake3.blake3(json.dumps(obj, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class BuildResult:
    conversation: Conversation
    request: dict[str, Any]
    manifest: ContextManifest
    fragments: tuple[ContextFragment, ...]
    """The selected fragments, with selection_reason and truncated set."""


@dataclass
class _Ctx:
    state: RunState
    config: BuildConfig
    load_text: Callable[[ArtifactRef], str] | None
    required: frozenset[str]
    count: Callable[[str], int]
    media_plans: dict[str, FragmentMedia | None] = field(default_factory=dict)
    redacted: dict[str, tuple[ContextFragment, Redacted]] = field(default_factory=dict)
    """Fragments with secrets: the redacted view (token count adjusted) and the result."""
    policy: RedactionPolicy | None = None

    def frag(self, fid: str) -> ContextFragment:
        hit = self.redacted.get(fid)
        return hit[0] if hit is not None else self.state.entries[fid].fragment

    def media(self, fid: str) -> FragmentMedia | None:
        """The fragment's images/PDFs priced for the provider being built (``media_plan``)."""
        if fid not in self.media_plans:
            self.media_plans[fid] = plan_fragment(self.state, self.frag(fid), self.config.provider)
        return self.media_plans[fid]

    def text_tokens(self, fid: str) -> int:
        m = self.media(fid)
        return self.frag(fid).token_count - (m.fold_tokens if m is not None else 0)

    def content_tokens(self, fid: str, *, reduced: bool = False) -> int:
        m = self.media(fid)
        return self.text_tokens(fid) + (0 if m is None else m.reduced_tokens if reduced else m.tokens)

    def raw_text(self, fid: str) -> str:
        """The logged text of ``fid`` (artifact-backed payloads loaded through the port)."""
        parts: list[str] = []
        for block in self.state.entries[fid].fragment.content:
            if isinstance(block, TextBlock | ToolResultBlock):
                if isinstance(block, ToolResultBlock) and block.artifact and self.load_text:
                    parts.append(self.load_text(block.artifact))
                else:
                    parts.append(block.text)
            elif isinstance(block, DocumentBlock) and block.artifact and block.media_type.startswith("text/"):
                parts.append(self.load_text(block.artifact) if self.load_text else "")
        return "\n".join(parts)

    def redact(self, fid: str) -> None:
        """Apply the redaction policy to ``fid`` once per distinct content (memoised across builds)."""
        if self.policy is None or fid in self.redacted:
            return
        frag = self.state.entries[fid].fragment
        if frag.kind not in self.config.redact_kinds:
            return
        key = (frag.id, frag.content_hash, frag.source_ref, frag.trust, self.policy)
        if key not in _REDACTIONS:
            if len(_REDACTIONS) >= _REDACTION_MEMO_LIMIT:
                _REDACTIONS.clear()
            _REDACTIONS[key] = redact_fragment(frag, self.raw_text(fid), self.policy, self.count)
        hit = _REDACTIONS[key]
        if hit is not None:
            self.redacted[fid] = hit

    def full_text(self, fid: str) -> str:
        """The text a build may render: redacted first, so truncation never cuts a secret in half."""
        self.redact(fid)
        if fid in self.redacted:
            return self.redacted[fid][1].text
        return self.raw_text(fid)

    def has_artifact_text(self, fid: str) -> bool:
        return any((isinstance(b, ToolResultBlock) and b.artifact is not None)
                   or (isinstance(b, DocumentBlock) and b.artifact is not None
                       and b.media_type.startswith("text/"))
                   for b in self.frag(fid).content)

    def overhead(self, fid: str) -> int:
        f = self.frag(fid)
        if f.kind not in _DATA_KINDS and f.trust in ("runtime", "user"):
            return MESSAGE_OVERHEAD
        wrapper = f'<data source="{f.source_ref}" trust="{f.trust}" kind="{f.kind}">\n\n</data>'
        return MESSAGE_OVERHEAD + self.count(wrapper)

    def cost(self, fid: str) -> int:
        return self.content_tokens(fid) + self.overhead(fid)

    def text_shrinkable(self, fid: str) -> bool:
        f = self.frag(fid)
        text = self.text_tokens(fid)
        if f.kind in ("evidence", "memory", "instruction", "user_input"):
            return text > _SHRINK_FLOOR
        if f.kind == "tool_result":
            block = next((b for b in f.content if isinstance(b, ToolResultBlock)), None)
            return block is not None and block.status in ("ok", "error") and text > _SHRINK_FLOOR
        return False

    def shrinkable(self, fid: str) -> bool:
        """Text can be truncated, or media has a cheaper rendition (reduced before truncating)."""
        m = self.media(fid)
        return self.text_shrinkable(fid) or (m is not None and m.reducible)

    def min_cost(self, fid: str) -> int:
        text = _SHRINK_FLOOR if self.text_shrinkable(fid) else self.text_tokens(fid)
        m = self.media(fid)
        return self.overhead(fid) + text + (m.reduced_tokens if m is not None else 0)


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


def _truncate_text(ctx: _Ctx, fid: str, max_tokens: int) -> Truncation:
    f = ctx.frag(fid)
    text = ctx.full_text(fid)
    if f.kind == "tool_result":
        block = next(b for b in f.content if isinstance(b, ToolResultBlock))
        ref = f"artifact:{block.artifact.hash}" if block.artifact else f.source_ref
        if block.exit_code is not None or block.status == "error":
            return lean_log(text, block.exit_code, max_tokens, ctx.count, artifact_ref=ref)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        kind = "json"
    elif f.source_ref.startswith("file://"):
        kind = "file"
    elif "```" in text or "~~~" in text:
        kind = "markdown"
    else:
        kind = "log" if f.kind == "tool_result" else "text"
    return truncate(text, max_tokens, kind=kind, count=ctx.count)  # type: ignore[arg-type]


def _split(room: int, sizes: list[int]) -> list[int]:
    """Share ``room`` tokens among truncatable parts: each gets the floor, the rest
    goes by size (so a short result is not starved by a long sibling)."""
    floors = [min(size, _SHRINK_FLOOR) for size in sizes]
    rest = max(0, room - sum(floors))
    extra = [size - floor for size, floor in zip(sizes, floors, strict=True)]
    total = sum(extra) or 1
    grants = [floor + rest * e // total for floor, e in zip(floors, extra, strict=True)]
    return grants


def _required_reason(f: ContextFragment, ctx: _Ctx, current_input: str | None) -> str:
    match f.kind:
        case "policy":
            return "required: runtime policy"
        case "goal" | "success_contract":
            return "required: current goal and success contract"
        case "plan":
            return "required: current plan"
        case "user_input":
            return ("required: current user input" if f.id == current_input
                    else "required: user input marked required")
        case _:
            return "required: latest protocol group (a call and its answers)"


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
    body; without it (or for provider ``neutral``) the request is the
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
    ctx = _Ctx(state, config, load_text, state.required_ids(), state.counter.count)
    timeline = state.timeline()
    if config.redact:
        # Inline texts are redacted before selection, so costs see the redacted text.
        # Artifact-backed payloads (the big ones) are redacted when their text is
        # first needed (kept or truncated): loading every artifact on every build
        # would cost the whole log's payloads.
        ctx.policy = config_policy(config)
        for fid in dict.fromkeys([*state.active, *(f for it in timeline for f in it.fragment_ids)]):
            if not ctx.has_artifact_text(fid):
                ctx.redact(fid)
    excluded: list[ExcludedFragment] = []
    repair_notes = list(repairs)

    # ---- tools
    policy = state.tool_policy()
    used_names = sorted({c.name for it in timeline if isinstance(it, ToolGroup) for c in it.calls})
    registry: dict[str, ToolSpec] = dict(state.tools)
    for name in used_names:
        if name not in registry:
            registry[name] = ToolSpec(
                name=name, description="Declared by contextfold: the run's history uses this tool "
                "but its log never registered a schema.", parameters={"type": "object"})
            repair_notes.append(f"declared_unregistered_tool:{name}")
    shares = config.layer_shares
    exposure = select_tools(
        [registry[n] for n in sorted(registry)], query=_query(state), pinned=policy.pinned,
        referenced=used_names, allowed=policy.allowed, denied=policy.denied,
        budget_tokens=int(shares.get("tools", 0.0) * budget), count=ctx.count,
        max_relevant=config.max_tools)
    exposed = {t.name for t in exposure.exposed}
    tools = tuple(registry[n] for n in sorted(exposed))

    # ---- candidates: state fragments (deduped) and timeline units
    current_input: str | None = None
    for item in reversed(timeline):
        if isinstance(item, MessageItem) and item.role == "user":
            current_input = item.fragment_id
        if not (isinstance(item, MessageItem) and item.role == "note"):
            break
    units: list[Unit] = []
    members: dict[str, tuple[str, ...]] = {}
    unit_layer_no: dict[str, int] = {}
    seen_keys: dict[str, str] = {}
    state_ids = [fid for fid in state.active if ctx.frag(fid).kind != "tool_spec"]
    ranked = sorted(state_ids, key=lambda fid: (-TRUST_RANK[ctx.frag(fid).trust],
                                                -state.entries[fid].position, fid))
    for fid in ranked:
        f = ctx.frag(fid)
        keys = [f"hash:{f.content_hash}"]
        if f.kind == "evidence" and not f.source_ref.startswith("file://"):
            keys.append(f"source:{f.source_ref}")
        winner = next((seen_keys[k] for k in keys if k in seen_keys), None)
        if winner is not None and fid not in ctx.required:
            excluded.append(ExcludedFragment(id=fid, kind=f.kind, source_ref=f.source_ref,
                                             tokens=f.token_count, reason="duplicate", replaced_by=winner))
            continue
        for k in keys:
            seen_keys.setdefault(k, fid)
    kept_state = [fid for fid in state_ids if fid not in {e.id for e in excluded}]
    for fid in kept_state:
        f = ctx.frag(fid)
        pos = state.entries[fid].position
        tokens = ctx.cost(fid)
        units.append(Unit(fid, _STATE_LAYER.get(f.kind, "retrieval"), tokens,
                          score(f.priority, state.freshness(pos), tokens), pos, fid in ctx.required,
                          ctx.min_cost(fid) if ctx.shrinkable(fid) else None))
        members[fid] = (fid,)
        unit_layer_no[fid] = {"policy": 1, "goal": 3, "plan": 4}.get(units[-1].layer, 6)
    recent = {it.position for it in [t for t in timeline if isinstance(t, ToolGroup)][-config.recent_groups:]}
    for item in timeline:
        ids = item.fragment_ids
        if isinstance(item, ToolGroup):
            uid = item.group_id
            missing = sorted({c.name for c in item.calls} - exposed)
            detail = (f"uses tools the policy does not expose: {', '.join(missing)}" if missing
                      else "" if item.closed else
                      "a call of this group is still unanswered at this point of the log")
            if detail:
                for fid in ids:
                    f = ctx.frag(fid)
                    excluded.append(ExcludedFragment(
                        id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count, reason="stale",
                        detail=detail))
                continue
            layer = "recent" if item.position in recent else "history"
            unit_layer_no[uid] = 7 if layer == "recent" else 5
        else:
            uid = ids[0]
            is_input = uid == current_input
            layer = "input" if is_input else "history"
            unit_layer_no[uid] = 8 if is_input else 5
        tokens = sum(ctx.cost(fid) for fid in ids)
        shrink = [fid for fid in ids if ctx.shrinkable(fid)]
        min_tokens = sum(ctx.min_cost(fid) for fid in ids) if shrink else None
        head = ctx.frag(ids[0])
        fresh = max(state.freshness(state.entries[fid].position) for fid in ids)
        units.append(Unit(uid, layer, tokens, score(head.priority, fresh, tokens), item.position,
                          any(fid in ctx.required for fid in ids), min_tokens))
        members[uid] = ids

    # ---- selection
    available = budget - REPLY_PRIMING - exposure.tokens
    if available <= 0:
        raise BudgetError(f"tool schemas alone ({exposure.tokens} tokens) exhaust the budget {budget}")

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

    fragment_shares = {k: v for k, v in shares.items() if k != "tools"}
    selection = select_units(units, available, shares=fragment_shares, shrink_required=shrink_required)
    unit_by_id = {u.id: u for u in units}

    # ---- truncation and texts
    texts: dict[str, str] = {}
    truncations: list[TruncationRecord] = []
    truncated: set[str] = set()
    text_cut: set[str] = set()
    reduced: set[str] = set()
    original_tokens: dict[str, int] = {}
    for uid, grant in sorted(selection.kept.items()):
        unit = unit_by_id[uid]
        ids = members[uid]
        for fid in ids:
            if ctx.has_artifact_text(fid) and grant >= unit.tokens:
                logged = ctx.state.entries[fid].fragment.token_count
                texts[fid] = ctx.full_text(fid)  # redacted now, if it holds secrets
                if ctx.frag(fid).token_count > logged:  # a placeholder longer than its secret
                    texts[fid] = _truncate_text(ctx, fid, logged).text
                    truncated.add(fid)
                    text_cut.add(fid)
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
        shares_of = _split(room, [ctx.text_tokens(fid) for fid in shrink])
        for fid, share in zip(shrink, shares_of, strict=True):
            result = _truncate_text(ctx, fid, max(share, 1))
            texts[fid] = result.text
            truncated.add(fid)
            text_cut.add(fid)
            original_tokens[fid] = (ctx.content_tokens(fid) if ctx.media(fid) is not None
                                    else result.original_tokens)
            kept_ranges = ", ".join(f"{r.start}-{r.end}" for r in result.kept)
            truncations.append(TruncationRecord(
                id=fid, strategy=result.strategy, original_tokens=result.original_tokens,
                tokens=result.tokens, original_chars=result.original_chars,
                kept=f"{result.unit}s {kept_ranges}" if kept_ranges else "marker only"))

    kept_ids = frozenset(fid for uid in selection.kept for fid in members[uid])
    for fid in sorted(kept_ids & ctx.redacted.keys()):
        texts.setdefault(fid, ctx.redacted[fid][1].text)
    for uid, reason in sorted(selection.dropped.items()):
        for fid in members[uid]:
            f = ctx.frag(fid)
            excluded.append(ExcludedFragment(id=fid, kind=f.kind, source_ref=f.source_ref,
                                             tokens=f.token_count, reason=reason,
                                             detail=f"unit {uid} needs {unit_by_id[uid].tokens} tokens"))
    active_ids = set(state.active)
    for old, new in sorted(state.superseded_by.items()):
        if new in active_ids and ctx.frag(old).kind != "tool_spec":
            f = ctx.frag(old)
            excluded.append(ExcludedFragment(id=old, kind=f.kind, source_ref=f.source_ref,
                                             tokens=f.token_count, reason="superseded", replaced_by=new))

    conversation = lay_out(LayoutInput(state=state, kept=kept_ids, texts=texts,
                                       truncated=frozenset(truncated), tools=tools,
                                       model=config.model or state.model, current_input=current_input))
    media = finalize_media(conversation, reduced=frozenset(reduced),
                           load_bytes=None if config.provider == "neutral" else load_bytes)
    conversation = media.conversation
    if render is None or config.provider == "neutral":
        request = conversation.model_dump(mode="json")
    else:
        request = render(conversation, config.provider, config.reserve)
    return _finish(ctx, config, budget, conversation, request, selection.kept, members, unit_layer_no,
                   texts, truncated, original_tokens, truncations, excluded, exposure, repair_notes,
                   current_input, calibration, (text_cut, reduced, media.shown_in))


def _finish(ctx: _Ctx, config: BuildConfig, budget: int, conversation: Conversation,
            request: dict[str, Any], kept: dict[str, int], members: dict[str, tuple[str, ...]],
            unit_layer_no: dict[str, int], texts: dict[str, str], truncated: set[str],
            original_tokens: dict[str, int], truncations: list[TruncationRecord],
            excluded: list[ExcludedFragment], exposure: Any, repairs: list[str],
            current_input: str | None, calibration: Calibration | None = None,
            cuts: tuple[set[str], set[str], dict[str, dict[str, str]]] = (set(), set(), {})
            ) -> BuildResult:
    state = ctx.state
    text_cut, reduced, shown_in = cuts
    selected: list[tuple[int, int, ContextFragment, int]] = []
    layer_tokens: dict[str, int] = {name: 0 for name in LAYER_NAMES.values()}
    overhead_total = REPLY_PRIMING
    for uid, _grant in kept.items():
        layer_no = unit_layer_no[uid]
        for fid in members[uid]:
            f = ctx.frag(fid)
            m = ctx.media(fid)
            text = ctx.count(texts[fid]) if fid in text_cut else ctx.text_tokens(fid)
            tokens = text + (0 if m is None else m.reduced_tokens if fid in reduced else m.tokens)
            overhead = ctx.overhead(fid)
            overhead_total += overhead
            layer = layer_no if f.kind != "tool_result" or layer_no == 5 else 7
            layer_tokens[LAYER_NAMES[layer]] += tokens + overhead
            if fid in ctx.required:
                reason = _required_reason(f, ctx, current_input)
            else:
                value = score(f.priority, state.freshness(state.entries[fid].position), f.token_count)
                reason = f"selected: score {value:.1f} in layer {LAYER_NAMES[layer]}"
            if fid in reduced and m is not None:
                reason += f"; media reduced to detail low ({m.tokens} -> {m.reduced_tokens} tokens)"
            if fid in text_cut:
                reason += f"; truncated {original_tokens[fid]} -> {tokens} tokens at safe boundaries"
            view = f.model_copy(update={
                "freshness": state.freshness(state.entries[fid].position), "required": fid in ctx.required,
                "token_count": tokens, "selection_reason": reason, "truncated": fid in truncated})
            selected.append((layer, state.entries[fid].position, view, tokens))
    selected.sort(key=lambda s: (s[0], s[1], s[2].id))
    layer_tokens["tools"] = exposure.tokens
    tool_fragments = [ManifestTool(name=t.name, tokens=t.tokens, reason=t.reason if t.reason != "relevant"
                                   else f"relevant (bm25 {t.score:.2f})") for t in exposure.exposed]
    stable = {"system": [p.model_dump(mode="json") for p in conversation.system],
              "tools": [canonical_tool_json(t) for t in conversation.tools],
              "prefix": [m.model_dump(mode="json")
                         for m in conversation.messages[:conversation.stable_prefix_messages]]}
    cache_key = canonical_hash(stable)
    request_hash = canonical_hash(request)
    config_hash = canonical_hash(config.model_dump(mode="json"))
    turn = state.turn + 1
    counts = {r: 0 for r in ("duplicate", "superseded", "low_priority", "over_budget", "stale")}
    for e in excluded:
        counts[e.reason] += 1
    manifest = ContextManifest(
        request_id="req_" + canonical_hash([state.run_id, turn, state.version, config_hash])[:16],
        run_id=state.run_id, turn=turn, log_version=state.version, provider=config.provider,
        model=config.model or state.model, encoding=state.counter.encoding_name,
        window_tokens=config.window, reserved_output_tokens=config.reserve, budget_tokens=budget,
        selected_tokens=sum(layer_tokens.values()) + REPLY_PRIMING, overhead_tokens=overhead_total,
        layer_tokens=layer_tokens,
        fragments=tuple(ManifestFragment(
            id=v.id, kind=v.kind, layer=layer, source_ref=v.source_ref, trust=v.trust, tokens=tokens,
            required=v.required, truncated=v.truncated, selection_reason=v.selection_reason or "",
            content_hash=v.content_hash, original_tokens=original_tokens.get(v.id),
            media=() if (m := ctx.media(v.id)) is None else m.records(
                reduced=v.id in reduced, shown_in=shown_in.get(v.id)))
            for layer, _, v, tokens in selected),
        excluded=counts, excluded_items=tuple(sorted(excluded, key=lambda e: (e.reason, e.id))),
        tools=tuple(tool_fragments), tool_tokens=exposure.tokens, truncations=tuple(truncations),
        repairs=tuple(repairs), cache_key=cache_key, request_hash=request_hash,
        config_hash=config_hash, config=config, calibration=calibration,
        redactions=tuple(RedactionRecord(fragment_id=v.id, rule=f.rule, start=f.start, end=f.end)
                         for _, _, v, _ in selected if v.id in ctx.redacted
                         for f in ctx.redacted[v.id][1].findings))
    return BuildResult(conversation, request, manifest, tuple(v for _, _, v, _ in selected))

