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
    from contextfold.api import Run
    from contextfold.domain.errors import (
        ArtifactNotFoundError,
        BudgetError,
        CompactionError,
        ConcurrencyConflictError,
        ContextfoldError,
        CryptoError,
        DuplicateToolCallError,
        DuplicateToolResultError,
        EncodingConflictError,
        EncodingUnavailableError,
        HandleNotPicklableError,
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
        RunExistsError,
        RunNotFoundError,
        StoreBusyError,
        StoreConfigError,
        StoreError,
        StoreFullError,
        StoreNotWritableError,
        StoreReadOnlyError,
        StoreUnavailableError,
        StreamIncompleteError,
        SummaryRejectedError,
        TenantMismatchError,
        TimeNotInRunError,
        TokenizerError,
        TurnNotFoundError,
        UnknownToolCallError,
        UnsupportedMediaError,
        UpgradeRequiredError,
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
        RuntimeNote,
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
    from contextfold.importers.provider_reply import ProviderReply, read_response
    from contextfold.importers.provider_stream import StreamReader, read_stream
    from contextfold.projections.builder import BuildResult
    from contextfold.projections.memo_budget import (
        MemoCeilingWarning,
        memo_ceiling,
        memo_report,
        set_memo_ceiling,
    )
    from contextfold.projections.render.validate import SdkCheckSkippedWarning
    from contextfold.replay_report import ReplayReport
    from contextfold.store_api import Store, open_store
    from contextfold.usage_api import UsageWarning

_EXPORTS: dict[str, tuple[str, ...]] = {
    "contextfold.api": ("Run",),
    "contextfold.domain.errors": (
        "ArtifactNotFoundError", "BudgetError", "CompactionError", "ConcurrencyConflictError",
        "ContextfoldError", "CryptoError", "DuplicateToolCallError", "DuplicateToolResultError",
        "EncodingConflictError", "EncodingUnavailableError", "HandleNotPicklableError",
        "ImportFormatError", "InputLimitError", "IntegrityError", "InvalidInputError", "NotFoundError",
        "PendingToolCallsError", "ProtocolError", "RecordNotFoundError", "RenderError",
        "RequiredContextExceedsBudgetError", "RunExistsError", "RunNotFoundError", "StoreBusyError",
        "StoreConfigError", "StoreError", "StoreFullError", "StoreNotWritableError", "StoreReadOnlyError",
        "StoreUnavailableError", "StreamIncompleteError", "SummaryRejectedError", "TenantMismatchError",
        "TimeNotInRunError", "TokenizerError", "TurnNotFoundError", "UnknownToolCallError",
        "UnsupportedMediaError", "UpgradeRequiredError",
    ),
    "contextfold.domain.events": (
        "AnyEvent", "ArtifactRef", "CompactionSummary", "ContextBuilt", "DocumentBlock",
        "EvidenceRetrieved", "FileRead", "GoalSet", "HandOff", "HistoryCompacted", "ImageBlock",
        "InstructionSet", "MemoryRecalled", "ModelResponse", "PlanStep", "PlanUpdated", "PolicySet",
        "RunStarted", "RuntimeNote", "TextBlock", "ToolCall", "ToolCallCancelled", "ToolResult",
        "ToolResultLost", "ToolSpec", "ToolsRegistered", "UsageObserved", "UserInput",
    ),
    "contextfold.domain.fragments": ("ContextFragment",),
    "contextfold.domain.manifest": ("BuildConfig", "ContextManifest"),
    "contextfold.importers.provider_reply": ("ProviderReply", "read_response"),
    "contextfold.importers.provider_stream": ("StreamReader", "read_stream"),
    "contextfold.projections.builder": ("BuildResult",),
    "contextfold.projections.memo_budget": ("MemoCeilingWarning", "memo_ceiling", "memo_report",
                                            "set_memo_ceiling"),
    "contextfold.projections.render.validate": ("SdkCheckSkippedWarning",),
    "contextfold.replay_report": ("ReplayReport",),
    "contextfold.store_api": ("Store", "open_store"),
    "contextfold.usage_api": ("UsageWarning",),
}
"""Each module and the public names it defines: the imports above, for the first use of a name.
Each name from the module that defines it, not one that re-exports it: ``open_store`` taken from
:mod:`contextfold.api` loaded the run handle, the builder, the renderers and tiktoken for a
process that only opens a store (``tests/unit/test_library_light_imports.py``)."""

_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

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
    "EncodingConflictError",
    "EncodingUnavailableError",
    "EvidenceRetrieved",
    "FileRead",
    "GoalSet",
    "HandOff",
    "HandleNotPicklableError",
    "HistoryCompacted",
    "ImageBlock",
    "ImportFormatError",
    "InputLimitError",
    "InstructionSet",
    "IntegrityError",
    "InvalidInputError",
    "MemoCeilingWarning",
    "MemoryRecalled",
    "ModelResponse",
    "NotFoundError",
    "PendingToolCallsError",
    "PlanStep",
    "PlanUpdated",
    "PolicySet",
    "ProtocolError",
    "ProviderReply",
    "RecordNotFoundError",
    "RenderError",
    "ReplayReport",
    "RequiredContextExceedsBudgetError",
    "Run",
    "RunExistsError",
    "RunNotFoundError",
    "RunStarted",
    "RuntimeNote",
    "SdkCheckSkippedWarning",
    "Store",
    "StoreBusyError",
    "StoreConfigError",
    "StoreError",
    "StoreFullError",
    "StoreNotWritableError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "StreamIncompleteError",
    "StreamReader",
    "SummaryRejectedError",
    "TenantMismatchError",
    "TextBlock",
    "TimeNotInRunError",
    "TokenizerError",
    "ToolCall",
    "ToolCallCancelled",
    "ToolResult",
    "ToolResultLost",
    "ToolSpec",
    "ToolsRegistered",
    "TurnNotFoundError",
    "UnknownToolCallError",
    "UnsupportedMediaError",
    "UpgradeRequiredError",
    "UsageObserved",
    "UsageWarning",
    "UserInput",
    "memo_ceiling",
    "memo_report",
    "open_store",
    "read_response",
    "read_stream",
    "set_memo_ceiling",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
