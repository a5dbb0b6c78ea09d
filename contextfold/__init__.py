"""contextfold: an event-sourced context builder for LLM agents.

An agent's activity is an append-only event log per run; the context for the
next model request is a projection of that log: typed fragments with trust,
budgets and provenance, rendered as one provider request plus a manifest of
what the model saw and why.

    import contextfold
    from contextfold import UserInput, ModelResponse, ToolCall, ToolResult

    store = contextfold.open_store("sqlite:///runs.db")
    run = store.run("run-42")
    run.append(UserInput("Fix the failing test"))
    built = run.build("anthropic", window=200_000, reserve=8_000)
    built.request      # ready to send: client.messages.create(**built.request)
    built.body_bytes   # the same request as canonical JSON: the bytes the manifest's hash covers
    built.manifest     # what was selected, left out, and why

The names are imported on first use (PEP 562): ``import contextfold`` stays cheap, so a command
that needs one module does not import them all first, and the command line can take a Ctrl-C
that lands while the heavy modules load (``contextfold.console``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextfold.api import ReplayReport, Run, Store, open_store
    from contextfold.domain.errors import (
        ArtifactNotFoundError,
        BudgetError,
        CompactionError,
        ConcurrencyConflictError,
        ContextfoldError,
        CryptoError,
        DuplicateToolCallError,
        DuplicateToolResultError,
        ImportFormatError,
        InputLimitError,
        IntegrityError,
        InvalidInputError,
        NotFoundError,
        PendingToolCallsError,
        ProtocolError,
        RecordNotFoundError,
        RenderError,
        RequiredContextExceedsBudgetError,
        RunNotFoundError,
        StoreConfigError,
        StoreError,
        StoreFullError,
        StoreNotWritableError,
        StoreReadOnlyError,
        StoreUnavailableError,
        TenantMismatchError,
        TurnNotFoundError,
        UnknownToolCallError,
        UnsupportedMediaError,
    )
    from contextfold.domain.events import (
        AnyEvent,
        ArtifactRef,
        CompactionSummary,
        ContextBuilt,
        DocumentBlock,
        EvidenceRetrieved,
        FileRead,
        GoalSet,
        HandOff,
        HistoryCompacted,
        ImageBlock,
        InstructionSet,
        MemoryRecalled,
        ModelResponse,
        PlanStep,
        PlanUpdated,
        PolicySet,
        RunStarted,
        TextBlock,
        ToolCall,
        ToolCallCancelled,
        ToolResult,
        ToolResultLost,
        ToolSpec,
        ToolsRegistered,
        UsageObserved,
        UserInput,
    )
    from contextfold.domain.fragments import ContextFragment
    from contextfold.domain.manifest import BuildConfig, ContextManifest
    from contextfold.projections.builder import BuildResult

_EXPORTS: dict[str, str] = {
    "AnyEvent": "contextfold.domain.events",
    "ArtifactNotFoundError": "contextfold.domain.errors",
    "ArtifactRef": "contextfold.domain.events",
    "BudgetError": "contextfold.domain.errors",
    "BuildConfig": "contextfold.domain.manifest",
    "BuildResult": "contextfold.projections.builder",
    "CompactionError": "contextfold.domain.errors",
    "CompactionSummary": "contextfold.domain.events",
    "ConcurrencyConflictError": "contextfold.domain.errors",
    "ContextBuilt": "contextfold.domain.events",
    "ContextFragment": "contextfold.domain.fragments",
    "ContextManifest": "contextfold.domain.manifest",
    "ContextfoldError": "contextfold.domain.errors",
    "CryptoError": "contextfold.domain.errors",
    "DocumentBlock": "contextfold.domain.events",
    "DuplicateToolCallError": "contextfold.domain.errors",
    "DuplicateToolResultError": "contextfold.domain.errors",
    "EvidenceRetrieved": "contextfold.domain.events",
    "FileRead": "contextfold.domain.events",
    "GoalSet": "contextfold.domain.events",
    "HandOff": "contextfold.domain.events",
    "HistoryCompacted": "contextfold.domain.events",
    "ImageBlock": "contextfold.domain.events",
    "ImportFormatError": "contextfold.domain.errors",
    "InputLimitError": "contextfold.domain.errors",
    "InstructionSet": "contextfold.domain.events",
    "IntegrityError": "contextfold.domain.errors",
    "InvalidInputError": "contextfold.domain.errors",
    "MemoryRecalled": "contextfold.domain.events",
    "ModelResponse": "contextfold.domain.events",
    "NotFoundError": "contextfold.domain.errors",
    "PendingToolCallsError": "contextfold.domain.errors",
    "PlanStep": "contextfold.domain.events",
    "PlanUpdated": "contextfold.domain.events",
    "PolicySet": "contextfold.domain.events",
    "ProtocolError": "contextfold.domain.errors",
    "RecordNotFoundError": "contextfold.domain.errors",
    "RenderError": "contextfold.domain.errors",
    "ReplayReport": "contextfold.api",
    "RequiredContextExceedsBudgetError": "contextfold.domain.errors",
    "Run": "contextfold.api",
    "RunNotFoundError": "contextfold.domain.errors",
    "RunStarted": "contextfold.domain.events",
    "Store": "contextfold.api",
    "StoreConfigError": "contextfold.domain.errors",
    "StoreError": "contextfold.domain.errors",
    "StoreFullError": "contextfold.domain.errors",
    "StoreNotWritableError": "contextfold.domain.errors",
    "StoreReadOnlyError": "contextfold.domain.errors",
    "StoreUnavailableError": "contextfold.domain.errors",
    "TenantMismatchError": "contextfold.domain.errors",
    "TextBlock": "contextfold.domain.events",
    "ToolCall": "contextfold.domain.events",
    "ToolCallCancelled": "contextfold.domain.events",
    "ToolResult": "contextfold.domain.events",
    "ToolResultLost": "contextfold.domain.events",
    "ToolSpec": "contextfold.domain.events",
    "ToolsRegistered": "contextfold.domain.events",
    "TurnNotFoundError": "contextfold.domain.errors",
    "UnknownToolCallError": "contextfold.domain.errors",
    "UnsupportedMediaError": "contextfold.domain.errors",
    "UsageObserved": "contextfold.domain.events",
    "UserInput": "contextfold.domain.events",
    "open_store": "contextfold.api",
}
"""Each public name -> the module that defines it."""

__all__ = [
    "AnyEvent",
    "ArtifactNotFoundError",
    "ArtifactRef",
    "BudgetError",
    "BuildConfig",
    "BuildResult",
    "CompactionError",
    "CompactionSummary",
    "ConcurrencyConflictError",
    "ContextBuilt",
    "ContextFragment",
    "ContextManifest",
    "ContextfoldError",
    "CryptoError",
    "DocumentBlock",
    "DuplicateToolCallError",
    "DuplicateToolResultError",
    "EvidenceRetrieved",
    "FileRead",
    "GoalSet",
    "HandOff",
    "HistoryCompacted",
    "ImageBlock",
    "ImportFormatError",
    "InputLimitError",
    "InstructionSet",
    "IntegrityError",
    "InvalidInputError",
    "MemoryRecalled",
    "ModelResponse",
    "NotFoundError",
    "PendingToolCallsError",
    "PlanStep",
    "PlanUpdated",
    "PolicySet",
    "ProtocolError",
    "RecordNotFoundError",
    "RenderError",
    "ReplayReport",
    "RequiredContextExceedsBudgetError",
    "Run",
    "RunNotFoundError",
    "RunStarted",
    "Store",
    "StoreConfigError",
    "StoreError",
    "StoreFullError",
    "StoreNotWritableError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "TenantMismatchError",
    "TextBlock",
    "ToolCall",
    "ToolCallCancelled",
    "ToolResult",
    "ToolResultLost",
    "ToolSpec",
    "ToolsRegistered",
    "TurnNotFoundError",
    "UnknownToolCallError",
    "UnsupportedMediaError",
    "UsageObserved",
    "UserInput",
    "open_store",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
