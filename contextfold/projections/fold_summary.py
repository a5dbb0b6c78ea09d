"""Text of a compaction summary fragment.

Why a fixed layout: the summary is a runtime fragment that stands in for many
turns, so it must be deterministic (same event -> same bytes -> same hash)
and keep the seed's sections in a stable order. Inferences are labelled as
such so the model never reads them as recorded facts.
"""

from __future__ import annotations

from contextfold.domain.events import HistoryCompacted

__all__ = ["render_summary"]

_SECTIONS: tuple[tuple[str, str], ...] = (
    ("success_contract", "success contract"),
    ("completed_steps", "completed steps"),
    ("pending_steps", "pending steps"),
    ("decisions", "decisions"),
    ("constraints", "constraints"),
    ("tool_calls_and_results", "tool calls and results"),
    ("evidence_refs", "evidence refs"),
    ("side_effects", "side effects"),
    ("known_failures", "known failures"),
    ("inferences", "inferences (not recorded facts)"),
)


def render_summary(event: HistoryCompacted) -> str:
    """``event.summary`` as sectioned text; empty sections are left out."""
    s = event.summary
    lines = [f"summary of events {event.covers_from}-{event.covers_to} "
             f"({event.strategy}, {event.summarizer})"]
    if s.goal:
        lines.append(f"goal: {s.goal}")
    for attr, title in _SECTIONS:
        values: tuple[str, ...] = getattr(s, attr)
        if values:
            lines.append(f"{title}:")
            lines.extend(f"- {v}" for v in values)
    if s.next_action:
        lines.append(f"next action: {s.next_action}")
    return "\n".join(lines)
