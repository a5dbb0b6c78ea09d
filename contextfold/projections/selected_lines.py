"""The manifest line and the view of each selected fragment.

Why a module of its own: these are the per-fragment outputs of a build (the line the
manifest lists, the fragment view ``BuildResult.fragments`` makes on demand), and the
part of a long run's build that runs for every fragment whose freshness moved. The
builder decides what is kept; this says how each kept fragment is reported.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from contextfold.domain.fragments import ContextFragment
from contextfold.domain.manifest import LAYER_NAMES, ManifestFragment
from contextfold.projections.entries import FragmentEntry
from contextfold.projections.selection import score
from contextfold.projections.units import BuildCtx, Facts

__all__ = ["SelectedView", "plain_line", "required_reason", "selected_line"]


def required_reason(f: ContextFragment, ctx: BuildCtx, current_input: str | None) -> str:
    """Why a required fragment is in the request, as the manifest says it."""
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


def plain_line(ctx: BuildCtx, facts: Facts, layer_no: int, fresh: float, current_input: str | None
               ) -> tuple[int, int, int, SelectedView, ManifestFragment]:
    """:func:`selected_line` for the common case: no media, nothing cut or loaded (its text tokens are
    the view's). The manifest line holds the score only to one decimal, so it is kept per
    (view, layer, required, reason): a fragment far enough back keeps its line for several
    turns although its freshness moves every turn."""
    f = facts.frag  # for a lazy entry its head: the line needs no text, the view loads it if made
    fid = f.id
    entry = ctx.state.entries[fid]
    lazy = entry if entry.lazy and f is entry.head else None
    layer = layer_no if f.kind != "tool_result" or layer_no == 5 else 7
    required = fid in ctx.required
    if required:
        reason = required_reason(f, ctx, current_input)
    else:
        value = score(f.priority, fresh, f.token_count)
        reason = f"selected: score {value:.1f} in layer {LAYER_NAMES[layer]}"
    tokens = facts.text_tokens
    view = SelectedView(f, {"freshness": fresh, "required": required, "token_count": tokens,
                     "selection_reason": reason, "truncated": False}, lazy)
    key = (facts.frag, layer, required, reason)
    line = ctx.cached("line", fid, key) or ctx.keep("line", fid, key, ManifestFragment(
        id=fid, kind=f.kind, layer=layer, source_ref=f.source_ref, trust=f.trust, tokens=tokens,
        required=required, truncated=False, selection_reason=reason, content_hash=f.content_hash))
    return layer, tokens, facts.overhead, view, line


def selected_line(ctx: BuildCtx, facts: Facts, layer_no: int, fresh: float, current_input: str | None,
                  text_cut: dict[str, int], reduced: set[str], truncated: set[str],
                  original_tokens: dict[str, int], shown_in: dict[str, dict[str, str]]
                  ) -> tuple[int, int, int, SelectedView, ManifestFragment]:
    """One selected fragment: its layer, tokens, overhead, view and manifest line.

    ``text_cut`` maps a fragment whose text was cut to that text's tokens (the truncation
    counted them: counting the text again cost a whole tokenization when its probes were
    counted from line blocks)."""
    f, m = ctx.shown(facts.frag), facts.media  # a lazy text is loaded here: this fragment is rendered
    fid = f.id
    text = text_cut.get(fid, facts.text_tokens)
    tokens = text + (0 if m is None else m.reduced_tokens if fid in reduced else m.tokens)
    layer = layer_no if f.kind != "tool_result" or layer_no == 5 else 7
    if fid in ctx.required:
        reason = required_reason(f, ctx, current_input)
    else:
        value = score(f.priority, fresh, f.token_count)
        reason = f"selected: score {value:.1f} in layer {LAYER_NAMES[layer]}"
    if fid in reduced and m is not None:
        reason += f"; media reduced to detail low ({m.tokens} -> {m.reduced_tokens} tokens)"
    if fid in text_cut:
        reason += f"; truncated {original_tokens[fid]} -> {tokens} tokens at safe boundaries"
    view = SelectedView(f, {"freshness": fresh, "required": fid in ctx.required, "token_count": tokens,
                     "selection_reason": reason, "truncated": fid in truncated})
    media = None if m is None else m.records(reduced=fid in reduced, shown_in=shown_in.get(fid))
    line = ManifestFragment(
        id=fid, kind=f.kind, layer=layer, source_ref=f.source_ref, trust=f.trust, tokens=tokens,
        required=fid in ctx.required, truncated=fid in truncated, selection_reason=reason,
        content_hash=f.content_hash, original_tokens=original_tokens.get(fid), media=media or ())
    return layer, tokens, facts.overhead, view, line


class SelectedView(NamedTuple):
    """A selected fragment as the build saw it: ``fragment`` with ``update`` applied. Made into a
    ``ContextFragment`` only when a caller reads :attr:`BuildResult.fragments` (a copy per
    fragment per turn was a tenth of a short run's build)."""

    fragment: ContextFragment
    update: dict[str, Any]
    lazy: FragmentEntry | None = None
    """The entry of a fragment costed from its head: its text is read back from the log only
    when the view is made (the manifest line needs no text)."""

    @property
    def id(self) -> str:
        return self.fragment.id

    def made(self) -> ContextFragment:
        base = self.fragment if self.lazy is None else self.lazy.fragment
        return base.model_copy(update=self.update)
