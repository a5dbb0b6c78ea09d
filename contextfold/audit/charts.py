"""Inline SVG charts for the audit report: pure functions, strings out, no external assets.

Each chart carries its numbers as ``data-*`` attributes, so a person hovers
(``<title>``) and a test reads the same figures from the DOM. Sizes are linear
in the number of turns: one path per series, one small element per point.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from contextfold.audit.models import TurnAudit

__all__ = ["LAYER_COLORS", "axis_label", "layers_chart", "prefix_chart", "usage_chart"]

LAYER_COLORS: dict[str, str] = {
    "policy": "#4e79a7", "tools": "#9c755f", "goal": "#59a14f", "plan": "#8cd17d",
    "history": "#f28e2b", "retrieval": "#b07aa1", "observations": "#e15759", "input": "#76b7b2",
}
W, H, PAD = 900, 240, 40


def _x(i: int, n: int) -> float:
    return PAD + (W - 2 * PAD) * (i / (n - 1) if n > 1 else 0.5)


def _y(value: float, top: float) -> float:
    return H - PAD - (H - 2 * PAD) * (value / top if top else 0)


def axis_label(value: float) -> str:
    """A token count short enough for the left margin: ``137996`` ran past the chart's edge and
    read as 37996 (the margin holds five digits); it is ``138k``."""
    n = int(value)
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    return f"{n / 1000:.0f}k" if n >= 10_000 else str(n)


def _axes(top: float, n_turns: int, first: int, last: int, unit: str) -> str:
    return (f'<line class="axis" x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}"/>'
            f'<line class="axis" x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}"/>'
            f'<text x="{PAD - 4}" y="{PAD + 4}" text-anchor="end"><title>{int(top)} tokens</title>'
            f"{axis_label(top)}</text>"
            f'<text x="{PAD - 4}" y="{H - PAD}" text-anchor="end">0</text>'
            f'<text x="{PAD}" y="{H - PAD + 16}">turn {first}</text>'
            f'<text x="{W - PAD}" y="{H - PAD + 16}" text-anchor="end">turn {last}</text>'
            f'<text x="{W / 2}" y="{H - 6}" text-anchor="middle">{escape(unit)} over {n_turns} turns</text>')


def layers_chart(turns: Sequence[TurnAudit]) -> str:
    """Stacked areas of tokens per semantic layer across turns, with the budget as a line."""
    if not turns:
        return '<p class="empty">no turns</p>'
    n = len(turns)
    layers = list(LAYER_COLORS)
    # scaled to what was selected (a 128k budget would flatten a 3k request); the budget line is
    # drawn only where it falls inside the chart
    peak = max(sum(t.manifest.layer_tokens.values()) for t in turns)
    top = max(1, int(peak * 1.15))
    lower = [0.0] * n
    parts: list[str] = []
    totals: dict[str, int] = {}
    for layer in layers:
        values = [t.manifest.layer_tokens.get(layer, 0) for t in turns]
        totals[layer] = sum(values)
        upper = [lo + v for lo, v in zip(lower, values, strict=True)]
        pts = [f"{_x(i, n):.1f},{_y(upper[i], top):.1f}" for i in range(n)]
        pts += [f"{_x(i, n):.1f},{_y(lower[i], top):.1f}" for i in reversed(range(n))]
        if n == 1:  # a single turn: draw a bar, not a zero-width area
            x0, x1 = PAD + 300, W - PAD - 300
            pts = [f"{x0},{_y(upper[0], top):.1f}", f"{x1},{_y(upper[0], top):.1f}",
                   f"{x1},{_y(lower[0], top):.1f}", f"{x0},{_y(lower[0], top):.1f}"]
        parts.append(f'<path class="layer" data-layer="{layer}" data-total="{totals[layer]}" '
                     f'fill="{LAYER_COLORS[layer]}" d="M{" L".join(pts)} Z"><title>{layer}: '
                     f'{totals[layer]} tokens over all turns</title></path>')
        lower = upper
    if min(t.manifest.budget_tokens for t in turns) <= top:
        budget = " ".join(f"{_x(i, n):.1f},{_y(min(t.manifest.budget_tokens, top), top):.1f}"
                          for i, t in enumerate(turns))
        parts.append(f'<polyline class="budget" points="{budget}"><title>budget</title></polyline>')
    else:
        parts.append(f'<text x="{W - PAD}" y="{PAD - 8}" text-anchor="end">budget '
                     f'{min(t.manifest.budget_tokens for t in turns)}+ tokens: above the chart</text>')
    return (f'<svg id="layers-chart" class="chart" viewBox="0 0 {W} {H}" role="img" '
            f'aria-label="tokens per layer across turns" data-turns="{n}" data-max="{top}">'
            f'{_axes(top, n, turns[0].turn, turns[-1].turn, "tokens per layer")}{"".join(parts)}</svg>')


def prefix_chart(turns: Sequence[TurnAudit]) -> str:
    """One cell per turn: green when the stable prefix (cache key) was re-used, orange when it changed."""
    n = max(1, len(turns))
    width = (W - 2 * PAD) / n
    cells = []
    for i, t in enumerate(turns):
        state = "first" if t.prefix_changed is None else "changed" if t.prefix_changed else "reused"
        cells.append(f'<rect class="cell {state}" data-turn="{t.turn}" x="{PAD + i * width:.2f}" y="10" '
                     f'width="{max(width - (1 if width > 3 else 0), 0.5):.2f}" height="30">'
                     f'<title>turn {t.turn}: {state}</title></rect>')
    reused = sum(1 for t in turns if t.prefix_changed is False)
    changed = sum(1 for t in turns if t.prefix_changed)
    return (f'<svg id="prefix-chart" class="chart strip" viewBox="0 0 {W} 50" role="img" '
            f'aria-label="prefix stability" data-reused="{reused}" data-changed="{changed}">'
            f'{"".join(cells)}</svg>')


def usage_chart(turns: Sequence[TurnAudit]) -> str:
    """Estimated vs provider-observed input tokens, for turns that have both: the estimate of the
    request the report counts (``Usage.estimated_tokens``, as calibration pairs them)."""
    points = [(t, t.usage) for t in turns if t.usage is not None]
    if not points:
        return ""
    n = len(points)
    top = max(max(u.estimated_tokens, u.input_tokens) for _, u in points)
    est = " ".join(f"{_x(i, n):.1f},{_y(u.estimated_tokens, top):.1f}" for i, (_, u) in enumerate(points))
    obs = " ".join(f"{_x(i, n):.1f},{_y(u.input_tokens, top):.1f}" for i, (_, u) in enumerate(points))
    dots = []
    for i, (t, u) in enumerate(points):
        ratio = u.input_tokens / max(1, u.estimated_tokens)
        dots.append(f'<circle class="est" cx="{_x(i, n):.1f}" cy="{_y(u.estimated_tokens, top):.1f}" '
                    f'r="3"><title>turn {t.turn}: estimated {u.estimated_tokens}</title></circle>')
        dots.append(f'<circle class="obs" data-turn="{t.turn}" data-estimated="{u.estimated_tokens}" '
                    f'data-observed="{u.input_tokens}" cx="{_x(i, n):.1f}" '
                    f'cy="{_y(u.input_tokens, top):.1f}" r="3"><title>turn {t.turn}: estimated '
                    f'{u.estimated_tokens}, observed {u.input_tokens} (x{ratio:.3f})</title>'
                    f'</circle>')
    return (f'<svg id="usage-chart" class="chart" viewBox="0 0 {W} {H}" role="img" '
            f'aria-label="estimated vs observed input tokens" data-points="{n}">'
            f'{_axes(top, n, points[0][0].turn, points[-1][0].turn, "input tokens")}'
            f'<polyline class="estimated" points="{est}"><title>estimated (tiktoken)</title></polyline>'
            f'<polyline class="observed" points="{obs}"><title>observed (provider)</title></polyline>'
            f'{"".join(dots)}</svg>')
