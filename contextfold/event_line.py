"""One human line for an event: what ``contextfold events`` prints for each of a run's events.

A module of its own, apart from ``cli``: it imports the event models (pydantic), which a
command that prints no event does not load (``cli``'s docstring says why that matters)."""

from __future__ import annotations

import json

from contextfold.domain.events import (
    AnyEvent,
        ContextBuilt,
        EvidenceRetrieved,
        FileRead,
        GoalSet,
        InstructionSet,
        MemoryRecalled,
        ModelResponse,
        PlanUpdated,
        PolicySet,
        ToolCallCancelled,
        ToolResult,
        ToolResultLost,
        ToolsRegistered,
        UserInput,
)

__all__ = ["summarize_event"]


def summarize_event(event: AnyEvent, width: int = 90) -> str:
    """One human line for an event (for ``events`` and reports)."""
    match event:
        case UserInput():
            text = event.text
        case ModelResponse():
            calls = ", ".join(f"{c.name}#{c.call_id}" for c in event.tool_calls)
            text = event.text + (f" -> {calls}" if calls else "")
        case ToolResult():
            flag = " ERROR" if event.is_error else ""
            code = f" exit={event.exit_code}" if event.exit_code is not None else ""
            art = f" [artifact {event.artifact.hash[:12]} {event.artifact.size}B]" if event.artifact else ""
            text = f"#{event.call_id}{flag}{code}{art} {event.text_and_media()[0]}"
        case FileRead():
            text = f"{event.path}@{event.revision} {event.content}"
        case PolicySet() | InstructionSet():
            text = f"[{event.source_ref}] {event.text}"
        case EvidenceRetrieved() | MemoryRecalled():
            text = f"[{event.source_ref}] {event.content}"
        case GoalSet():
            text = event.goal
        case PlanUpdated():
            text = ", ".join(f"{s.id}:{s.status}" for s in event.steps)
        case ToolsRegistered():
            text = f"{len(event.tools)} tools: " + ", ".join(t.name for t in event.tools)
        case ToolCallCancelled() | ToolResultLost():
            text = f"#{event.call_id} {event.reason}"
        case ContextBuilt():
            text = f"turn {event.turn} {event.provider} request {event.request_hash[:12]}"
        case _:
            text = json.dumps(event.model_dump(exclude={"type", "v"}), ensure_ascii=False, default=str)
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
