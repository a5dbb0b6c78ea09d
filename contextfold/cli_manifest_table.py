"""The ``manifest`` table (``manifest RUN``, ``audit --turn N``): a manifest for people to read.

Why apart from :mod:`contextfold.cli_build`: it is text only (no store, no build), and the
commands module had grown past the size a reader keeps in view.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import get_args

from contextfold.audit.text import visible
from contextfold.cli_args import EXCLUDED_SHOWN, excluded_count
from contextfold.domain.manifest import LAYER_NAMES, ContextManifest, ExcludedFragment, ExclusionReason

__all__ = ["EXCLUDED_SHOWN", "excluded_count", "manifest_table", "model_text"]


def _in_order(counts: dict[str, int], order: Iterable[str]) -> list[tuple[str, int]]:
    """``counts`` in the order the builder writes them (layers by number, reasons as listed), then
    any other key: a manifest read back from its record has them in JSON's sorted order, and the
    table of a recorded turn listed its layers alphabetically beside a rebuilt one's."""
    rank = {key: i for i, key in enumerate(order)}
    return sorted(counts.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def _newest_first(item: ExcludedFragment) -> tuple[tuple[int, int | str], ...]:
    """Ids in natural order, reversed by the caller: an event's fragment is named after its log
    position (``e9702``, ``g999``), so the highest come first: what left the request last."""
    parts = _DIGITS.split(item.id)  # text, digits, text, ...: the captured runs at odd indices
    return tuple((1, int(part)) if i % 2 else (0, part) for i, part in enumerate(parts))


_DIGITS = re.compile(r"([0-9]+)")


def _excluded_lines(m: ContextManifest, shown: int | None) -> list[str]:
    """Per reason, the newest ``shown`` excluded fragments (all when None) and how many more.

    Why: a long run's request leaves out nearly all of its history; the table of a 10,000-event
    run listed 9,783 low-priority lines in the order of their ids (``e10, e100, e1000``), which
    no one reads. The counts and token sums stay whole; ``--json`` has every line."""
    by_reason: dict[str, list[ExcludedFragment]] = {}
    for e in m.excluded_items:
        by_reason.setdefault(e.reason, []).append(e)
    lines: list[str] = []
    for reason, count in _in_order({r: len(v) for r, v in by_reason.items()}, get_args(ExclusionReason)):
        group = sorted(by_reason[reason], key=_newest_first, reverse=True)
        listed = group if shown is None else group[:shown]
        lines.append(f"  {reason}: {count} fragment{'s' if count != 1 else ''}, "
                     f"{sum(e.tokens for e in group)} tokens" + (", newest first" if count > 1 else ""))
        for e in listed:
            by = f" -> replaced by {e.replaced_by}" if e.replaced_by else ""
            detail = f" ({e.detail})" if e.detail else ""
            lines.append(f"  {e.reason:<12} {e.id:<10} {e.kind:<14} {e.tokens:>6}  "
                         f"{e.source_ref}{by}{detail}")
        if len(listed) < count:
            lines.append(f"  ... {count - len(listed)} more {reason} (--excluded all lists every one)")
    return lines


def model_text(m: ContextManifest, run_model: str | None = None) -> str:
    """The model the request names, or why it names none: a body for one vendor never names
    another's model (``model_family``: the demo's gpt-4o run built for Anthropic), and the table
    said ``model None``. ``run_model``: the run's recorded model, when the caller has it at hand
    (it is not in the manifest), to say which model was left out."""
    if m.model is not None:
        return m.model
    if run_model is not None:
        return (f"none in the body (the run's model, {run_model}, is another vendor's; --model names an "
                f"{m.provider} one)")
    return "none in the body (--model names one)"


def manifest_table(m: ContextManifest, excluded_shown: int | None = EXCLUDED_SHOWN, *,
                   run_model: str | None = None) -> str:
    """A readable table: budget, layers, selected fragments, what was excluded and why (the
    newest ``excluded_shown`` fragments per reason; None: all). ``run_model``: see
    :func:`model_text`."""
    lines = [
        f"run {m.run_id}  turn {m.turn}  provider {m.provider}  model {model_text(m, run_model)}  "
        f"encoding {m.encoding}",
        f"window {m.window_tokens}  reserved {m.reserved_output_tokens}  budget {m.budget_tokens}  "
        f"selected {m.selected_tokens} ({100 * m.selected_tokens / max(1, m.budget_tokens):.0f}%)  "
        f"overhead {m.overhead_tokens}",
        f"cache key {m.cache_key[:16]}  request {m.request_hash[:16]}  config {m.config_hash[:16]}",
        "",
        "layer          tokens",
    ]
    for layer, tokens in _in_order(m.layer_tokens, LAYER_NAMES.values()):
        lines.append(f"  {layer:<12} {tokens:>6}")
    lines += ["", f"{'fragment':<10} {'kind':<16} {'L':>1} {'trust':<9} {'tokens':>6}  reason"]
    for f in m.fragments:
        flag = " [truncated]" if f.truncated else ""
        lines.append(f"{f.id:<10} {f.kind:<16} {f.layer:>1} {f.trust:<9} {f.tokens:>6}  "
                     f"{f.selection_reason}{flag}")
    reasoning = [f for f in m.fragments if f.reasoning is not None]
    if reasoning:  # provider reasoning sent (counted in the fragment's tokens) or left out
        lines += ["", "reasoning:", *(f"  {f.id:<10} {f.reasoning}" for f in reasoning)]
    lines += ["", f"tools ({m.tool_tokens} tokens): " + ", ".join(f"{t.name} [{t.reason}]" for t in m.tools)]
    excluded = _in_order(m.excluded, get_args(ExclusionReason))
    lines += ["", "excluded: " + ", ".join(f"{k}={v}" for k, v in excluded)]
    lines += _excluded_lines(m, excluded_shown)
    if m.repairs:
        lines += ["", "protocol repairs: " + ", ".join(m.repairs)]
    # sources, tool and model names are untrusted text: an escape or newline in one must not
    # reach the terminal raw (each line is one row; nothing of ours contains a control character)
    return "\n".join(visible(line) for line in lines)
