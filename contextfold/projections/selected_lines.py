"""The manifest line and the view of each selected fragment.

Why a module of its own: these are the per-fragment outputs of a build (the line the
manifest lists, the fragment view ``BuildResult.fragments`` makes on demand). The
builder decides what is kept; this says how each kept fragment is reported.

Nothing here depends on the log's horizon, so a line or view is made once per fragment
and reused build after build while its unit is: the reason names the score's inputs
(priority, position, tokens), not the age, and a view's freshness is computed from the
horizon of the build that made the fragment (``SelectedView.made``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from contextfold.domain.fragments import ContextFragment
from contextfold.domain.manifest import LAYER_NAMES, ManifestFragment
from contextfold.domain.trusted import trusted
from contextfold.projections.entries import FragmentEntry, FragmentFields, reasoning_of
from contextfold.projections.fragment_facts import BuildCtx, Facts
from contextfold.projections.media_plan import priced_as_sent
from contextfold.projections.media_repeats import priced_as_repeats
from contextfold.projections.reasoning import reasoning_note, reasoning_tokens, unsent_tokens, with_refused
from contextfold.projections.stale_reads import stale_reason
from contextfold.projections.state import SummaryItem, freshness_at
from contextfold.projections.timeline_units import ranked_position

__all__ = ["SelectedView", "optional_reason", "plain_line", "required_reason", "selected_line", "shown_as"]


def required_reason(f: FragmentFields, ctx: BuildCtx, current_input: str | None) -> str:
    """Why a required fragment is in the request, as the manifest says it: the rule that made it
    required (``RunState.required_ids``), not a guess from its kind. The latest user input stays
    required while tool calls answer it, and a compaction summary is the history kind too: both
    were once reported as something they are not ("marked required", "protocol group")."""
    match f.kind:
        case "policy":
            return "required: runtime policy"
        case "goal" | "success_contract":
            return "required: current goal and success contract"
        case "plan":
            return "required: current plan"
        case "user_input":
            what = "worker task" if f.trust == "runtime" else "user input"  # a hand-off's: the runtime's
            if f.id == current_input:
                return f"required: current {what}"
            if ctx.state.entries[f.id].required:
                return "required: user input marked required"
            return f"required: latest {what} (the turn still works on it)"
        case _:
            if isinstance(ctx.state.items.get(ctx.state.entries[f.id].position), SummaryItem):
                return "required: latest compaction summary (it stands in for the history it covers)"
            if f.id in ctx.floor:
                return "required: latest error, at least its diagnosis (its tool answered nothing newer)"
            return "required: latest protocol group (a call and its answers)"


def optional_reason(f: FragmentFields, position: int, layer: int, unsent: int = 0) -> str:
    """Why an optional fragment was kept: the inputs of its score, which never change. ``position``:
    the one it ranks by (``ranked_position``: a lost call's answer, its call's). ``unsent``:
    tokens of provider reasoning the fold counted and this build does not send (a hand-off)."""
    return (f"selected: priority {f.priority}, position {position}, {f.token_count - unsent} tokens, "
            f"in layer {LAYER_NAMES[layer]}")


def shown_as(facts: Facts) -> str:
    """What a reason adds for a view shown otherwise than as logged (calls shown as a note)."""
    if not facts.not_offered:
        return ""
    return (f"; its calls shown as a runtime note: the request does not offer "
            f"{', '.join(facts.not_offered)}")


def _unsent(ctx: BuildCtx, facts: Facts, f: ContextFragment | FragmentEntry) -> int:
    """Tokens of ``f``'s reasoning the fold counted and a build for this provider does not send
    (``facts``: ``f``'s)."""
    if not ctx.state.reasoning_seen:
        return 0
    reasoning = reasoning_of(f)
    if reasoning is None:
        return 0
    if facts.not_offered:
        return reasoning_tokens(reasoning, ctx.count)
    return unsent_tokens(reasoning, ctx.config.provider, ctx.model, ctx.count)


def plain_line(ctx: BuildCtx, facts: Facts, layer_no: int, current_input: str | None
               ) -> tuple[int, int, int, SelectedView, ManifestFragment]:
    """:func:`selected_line` for the common case: no media, nothing cut or loaded (its text tokens are
    the view's). The manifest line is kept per (fragment, layer, required, reason)."""
    f = facts.view  # the entry, or the redacted fragment: the line needs no blocks and no text
    fid = f.id
    position = ctx.state.entries[fid].position
    layer = layer_no if f.kind != "tool_result" or layer_no == 5 else 7
    required = fid in ctx.required
    reason = (required_reason(f, ctx, current_input) if required
              else optional_reason(f, ranked_position(ctx.state, fid), layer, _unsent(ctx, facts, f))
              ) + shown_as(facts) + stale_reason(ctx.state.stale_reads, fid)
    tokens = facts.text_tokens
    view = SelectedView(f, {"required": required, "token_count": tokens, "selection_reason": reason,
                            "truncated": False}, position)
    # A line is shared by the providers' builds, but reasoning is sent to and priced for one
    # (and not for its models that do not reason: ``BuildCtx.pricing``).
    key = (f, layer, required, reason, ctx.pricing if ctx.state.reasoning_seen else None)
    line = ctx.cached("line", fid, key)
    if line is None:
        note = _reasoning_note(ctx, facts, f)
        line = ctx.keep("line", fid, key, trusted(
            ManifestFragment, id=fid, kind=f.kind, layer=layer, source_ref=f.source_ref, trust=f.trust,
            tokens=tokens, required=required, truncated=False, selection_reason=reason,
            content_hash=f.content_hash, **({} if note is None else {"reasoning": note})))
    return layer, tokens, facts.overhead, view, line


def _reasoning_note(ctx: BuildCtx, facts: Facts, f: ContextFragment | FragmentEntry) -> str | None:
    """The line's ``reasoning``: what became of the fragment's provider reasoning (``reasoning``).
    A reply shown as the note of calls to a tool not offered sends none of it (``not_offered``)."""
    if not ctx.state.reasoning_seen:
        return None
    refused = ctx.state.reasoning_refused.get(f.id) if ctx.state.reasoning_refused else None
    reasoning = reasoning_of(f)
    if reasoning is None:
        return refused
    tokens = reasoning_tokens(reasoning, ctx.count)
    if facts.not_offered:
        return with_refused(f"{reasoning.provider} reasoning not sent: {tokens} tokens of it beside calls "
                            "shown as a runtime note (no assistant turn to carry it)", refused)
    return with_refused(reasoning_note(reasoning, ctx.config.provider, tokens, ctx.model, ctx.count),
                        refused)


def selected_line(ctx: BuildCtx, facts: Facts, layer_no: int, current_input: str | None,
                  text_cut: dict[str, int], reduced: set[str], truncated: set[str],
                  original_tokens: dict[str, int],
                  notes: tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]
                  ) -> tuple[int, int, int, SelectedView, ManifestFragment]:
    """One selected fragment: its layer, tokens, overhead, view and manifest line.

    ``text_cut`` maps a fragment whose text was cut to that text's tokens (the truncation
    counted them: counting the text again cost a whole tokenization when its probes were
    counted from line blocks). ``notes``: per fragment, the media shown in another (dedupe) and
    those the request carries as a note (``media_plan.MediaFinish``)."""
    f, m = ctx.shown(facts.frag), facts.media  # a lazy text is loaded here: this fragment is rendered
    fid = f.id
    if m is not None and fid in notes[1]:  # media sent as notes for a rule of the whole request
        planned = facts.view if isinstance(facts.view, ContextFragment) else facts.view.head
        m = priced_as_sent(ctx.state, planned, ctx.config.provider, m, notes[1][fid])
    if m is not None and fid in notes[0]:  # media shown in another fragment: priced as the repeat line
        m = priced_as_repeats(ctx.state, ctx.config.provider, m, notes[0][fid], fid)
    text = text_cut.get(fid, facts.text_tokens)
    tokens = text + (0 if m is None else m.reduced_tokens if fid in reduced else m.tokens)
    layer = layer_no if f.kind != "tool_result" or layer_no == 5 else 7
    position = ctx.state.entries[fid].position
    reason = (required_reason(f, ctx, current_input) if fid in ctx.required
              else optional_reason(f, ranked_position(ctx.state, fid), layer, _unsent(ctx, facts, f))
              ) + shown_as(facts) + stale_reason(ctx.state.stale_reads, fid)
    if fid in reduced and m is not None:
        reason += f"; media reduced to detail low ({m.tokens} -> {m.reduced_tokens} tokens)"
    if fid in text_cut and fid in truncated:
        reason += f"; truncated {original_tokens[fid]} -> {tokens} tokens at safe boundaries"
    elif fid in text_cut:  # JSON whose compact form fits: nothing left out
        reason += f"; compacted {original_tokens[fid]} -> {tokens} tokens, nothing omitted"
    view = SelectedView(f, {"required": fid in ctx.required, "token_count": tokens,
                            "selection_reason": reason, "truncated": fid in truncated}, position)
    media = None if m is None else m.records(reduced=fid in reduced, shown_in=notes[0].get(fid),
                                             unsent=notes[1].get(fid), own=fid)
    note = _reasoning_note(ctx, facts, f)
    line = trusted(
        ManifestFragment, id=fid, kind=f.kind, layer=layer, source_ref=f.source_ref, trust=f.trust,
        tokens=tokens, required=fid in ctx.required, truncated=fid in truncated, selection_reason=reason,
        content_hash=f.content_hash, original_tokens=original_tokens.get(fid), media=media or (),
        **({} if note is None else {"reasoning": note}))
    overhead = facts.overhead + (ctx.truncated_extra(fid) if fid in truncated else 0)  # truncated="true"
    return layer, tokens, overhead, view, line


class SelectedView(NamedTuple):
    """A selected fragment as the build saw it: ``fragment`` with ``update`` applied and its
    freshness at the build's horizon. Made into a ``ContextFragment`` only when a caller reads
    :attr:`BuildResult.fragments` (a copy per fragment per turn was a tenth of a short run's
    build). Independent of the horizon, so a later build reuses it while nothing else moved."""

    fragment: ContextFragment | FragmentEntry
    """The fragment shown, or its folded entry: made (a lazy text read back from the log) only
    when the view is."""
    update: dict[str, Any]
    position: int
    """The fragment's log position: its freshness is computed from it when made."""

    @property
    def id(self) -> str:
        return self.fragment.id

    def made(self, horizon: int) -> ContextFragment:
        """The fragment as shown by a build whose log horizon was ``horizon``."""
        base = self.fragment.fragment if isinstance(self.fragment, FragmentEntry) else self.fragment
        return base.model_copy(update={**self.update, "freshness": freshness_at(horizon, self.position)})
