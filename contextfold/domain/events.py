"""The event vocabulary of a run's log.

Every event is a frozen pydantic model with ``extra="forbid"``, a ``type``
discriminator and a class version ``v``. The canonical JSON of an event is
``canonical_json(event)``: sorted keys, no spaces, UTF-8. That is what the
store hashes and keeps, so a replay reads back byte-identical events.

Old stored events are upcast on read (:mod:`contextfold.domain.upcasts`); a version
this release does not know is a validation error.

Trust is never a free field that content could set. It follows from the event
type (policy -> runtime, user input -> user, file reads -> workspace) or from an
``origin`` the runtime declares when it appends (tool output, evidence, memory:
workspace or external, external by default; instructions: workspace by default).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterator
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from contextfold.domain.canonical import canonical_dumps, canonical_object, canonical_utf8
from contextfold.domain.checked import Integer
from contextfold.domain.event_values import (
    ArtifactRef,
    CompactionSummary,
    ContentBlock,
    DocumentBlock,
    FrozenModel,
    ImageBlock,
    PlanStep,
    TextBlock,
    ToolCall,
    ToolSpec,
)
from contextfold.domain.items import Items, ItemsOrNone
from contextfold.domain.reasoning import (
    REASONING_ADAPTER,
    AnthropicReasoning,
    GeminiReasoning,
    GeminiSignature,
    OpenAIResponsesReasoning,
    Reasoning,
    ReasoningItem,
)
from contextfold.domain.text_breaks import TextBreak, text_break_error
from contextfold.domain.upcasts import UPCASTERS, upcast

__all__ = [
    "EVENT_ADAPTER",
    "REASONING_ADAPTER",
    "UPCASTERS",
    "AnthropicReasoning",
    "AnyEvent",
    "ArtifactRef",
    "CompactionSummary",
    "ContentBlock",
    "ContextBuilt",
    "DocumentBlock",
    "EvidenceRetrieved",
    "FileRead",
    "GeminiReasoning",
    "GeminiSignature",
    "GoalSet",
    "HandOff",
    "HistoryCompacted",
    "ImageBlock",
    "InstructionSet",
    "MemoryRecalled",
    "ModelResponse",
    "OpenAIResponsesReasoning",
    "PlanStep",
    "PlanUpdated",
    "PolicySet",
    "Reasoning",
    "ReasoningItem",
    "RunStarted",
    "RuntimeNote",
    "TextBlock",
    "TextBreak",
    "ToolCall",
    "ToolCallCancelled",
    "ToolResult",
    "ToolResultLost",
    "ToolSpec",
    "ToolsRegistered",
    "UsageObserved",
    "UserInput",
    "artifact_refs",
    "canonical_dumps",
    "canonical_json",
    "canonical_object",
    "event_from_json",
    "event_to_json",
    "is_vouched_record",
    "known_json_depth",
]


# ---------------------------------------------------------------- events (their values: ``event_values``)




class _Event(FrozenModel):
    model_config = ConfigDict(defer_build=True)
    """Frozen and ``extra="forbid"`` (``FrozenModel``'s); each event class's validator is built
    when it is first used, not when it is defined (the union's, ``EVENT_ADAPTER``, likewise).
    Why: a process that opens a store imports the events, and most commands use few classes or
    none (``runs`` lists rows, a recording process makes a few kinds): building all 19 classes'
    validators was ~20 ms of CPU of each. What a class validates, dumps and its JSON Schema are
    the same whenever it is built."""

    v: int = 1
    """The class version: a subclass's default is the one it writes and reads; older stored ones
    are lifted to it first (:mod:`contextfold.domain.upcasts`)."""

    @field_validator("v")
    @classmethod
    def _known_version(cls, v: int) -> int:
        """Any other version is refused: read under this schema it was stored as what it is not."""
        known = cls.model_fields["v"].default
        if v != known:
            raise ValueError(f"version {v} of this event is not one this contextfold knows (it writes "
                             f"{known}, and upcasts older ones it knows when reading)")
        return v


class RunStarted(_Event):
    """Opens a run. ``encoding`` is the tiktoken encoding hint (v2 renamed v1's ``tokenizer``)."""

    type: Literal["run_started"] = "run_started"
    v: Literal[2] = 2
    agent: str | None = None
    model: str | None = None
    encoding: str | None = None


class PolicySet(_Event):
    """Runtime policy: the rules and the tool permissions. Always trust=runtime."""

    type: Literal["policy_set"] = "policy_set"
    text: str
    source_ref: str = "runtime://policy"
    allowed_tools: ItemsOrNone[str] = ItemsOrNone()
    """None allows every registered tool; a tuple allows only these names."""
    denied_tools: Items[str] = Items()
    pinned_tools: Items[str] = Items()


ToolOrigin: TypeAlias = Literal["workspace", "external"]


class InstructionSet(_Event):
    """Instructions that configure the agent but are not the runtime's policy: the project's (an
    AGENTS.md, trust=workspace) or a third party's few-shot examples (trust=external)."""

    type: Literal["instruction_set"] = "instruction_set"
    text: str
    source_ref: str
    origin: ToolOrigin = Field(default="workspace", exclude_if=lambda value: value == "workspace")
    """Where the text comes from, as the runtime declares it: ``workspace``, the project being
    worked on (its AGENTS.md, a repository's microagent); ``external``, anyone else (SWE-agent's
    demonstrations, worked examples a third party recorded on another repository, with that
    repository's issue text and tool output in them). Either way a data block, never an
    instruction with authority (DESIGN 8). Left out of the JSON when ``workspace``, so a log
    written before the field reads, and hashes, as it did (no version bump, as for
    ``ToolsRegistered.replace``)."""


class GoalSet(_Event):
    """The run's current goal and its success contract (the checks that say it is met). Trust=runtime."""

    type: Literal["goal_set"] = "goal_set"
    goal: str
    success_contract: Items[str] = Items()


class PlanUpdated(_Event):
    """The whole current plan: typed steps, budget and stop conditions; it replaces the previous one."""

    type: Literal["plan_updated"] = "plan_updated"
    steps: Items[PlanStep]
    budget: str | None = None
    stop_conditions: Items[str] = Items()


class ToolsRegistered(_Event):
    """Tools the runtime can run from now on: added to (or, a name again, replacing) the registry."""

    type: Literal["tools_registered"] = "tools_registered"
    tools: Items[ToolSpec]
    replace: bool = Field(default=False, exclude_if=lambda value: not value)
    """The registry is these tools alone: every other registered tool is dropped (a hand-off to an
    agent with another toolkit, an MCP server gone). A dropped tool is never exposed again (until
    registered anew); its past calls stay paired and are shown as the runtime's note of them
    (``projections.not_offered``). Left out of the JSON when False, so a log written before the
    field reads, and hashes, as it did (no version bump: a release without it refuses a
    ``replace: true`` it would misread, as ``extra="forbid"`` refuses any unknown field)."""


class UserInput(_Event):
    """What the user said: text (``UserInput("...")``) or content blocks. Trust=user."""

    type: Literal["user_input"] = "user_input"
    content: Items[ContentBlock]
    required: bool = False
    """Mark a user message whose constraints must survive every build."""

    def __init__(self, text: str | None = None, /, **data: Any) -> None:
        if text is not None:
            data.setdefault("content", (TextBlock(text=text),))
        super().__init__(**data)

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class ModelResponse(_Event):
    """One model response = one turn. Tool calls in one response form a parallel batch."""

    type: Literal["model_response"] = "model_response"
    text: str = ""
    tool_calls: Items[ToolCall] = Items()
    model: str | None = None
    reasoning: Reasoning | None = Field(default=None, exclude_if=lambda value: value is None)
    """The provider's reasoning for this response, opaque and verbatim (``domain.reasoning``).
    Left out of the JSON when absent, so a response without it keeps the bytes (and the hash)
    it had before the field existed."""

    text_breaks: Items[TextBreak] = Field(default=Items(), exclude_if=lambda value: not value)
    """Where the pieces of ``text`` stood among the calls and reasoning items, when not all before
    the first call (``domain.text_breaks``): the provider's order, sent back so. Left out of the
    JSON when empty, so a response without it keeps the bytes (and the hash) it had before."""

    @field_validator("tool_calls")
    @classmethod
    def _unique_ids_in_batch(cls, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        ids = [c.call_id for c in calls]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate call_id within one response: {ids}")
        return calls

    @model_validator(mode="after")
    def _breaks_cut_the_text(self) -> ModelResponse:
        if self.text_breaks:
            items = (len(self.reasoning.items)
                     if isinstance(self.reasoning, AnthropicReasoning | OpenAIResponsesReasoning) else 0)
            error = text_break_error(self.text, self.text_breaks, len(self.tool_calls) + items)
            if error is not None:
                raise ValueError(error)
        return self



class ToolResult(_Event):
    """The result of one tool call. Large content is moved to an artifact by the store."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str = Field(min_length=1)
    content: str = ""
    blocks: Items[ContentBlock] = Items()
    artifact: ArtifactRef | None = None
    """Set by the store when ``content`` was too large to keep inline; content is then a preview."""
    is_error: bool = False
    exit_code: Integer | None = None
    origin: ToolOrigin = "external"

    def text_and_media(self) -> tuple[str, tuple[ContentBlock, ...]]:
        """The result's whole text (``content``, then each ``TextBlock`` of ``blocks``, a line
        apart) and its other blocks. A result passed as text blocks (the MCP shape) was counted
        and then never rendered: the model got an empty answer. The fold shows this text, and the
        store moves it to an artifact whole when it is large."""
        texts = [b.text for b in self.blocks if isinstance(b, TextBlock)]
        if not texts:
            return self.content, self.blocks
        return ("\n".join([self.content, *texts] if self.content else texts),
                tuple(b for b in self.blocks if not isinstance(b, TextBlock)))


class ToolCallCancelled(_Event):
    """A call that will get no result: cancelled (by the runtime, or by a build's in-flight policy).
    Never a success."""

    type: Literal["tool_call_cancelled"] = "tool_call_cancelled"
    call_id: str
    reason: str


class ToolResultLost(_Event):
    """Runtime recovery: the call's result never arrived. Never a success."""

    type: Literal["tool_result_lost"] = "tool_result_lost"
    call_id: str
    reason: str
    call_position: Integer | None = None
    """Log position (1-based) of the model response that issued the call."""


class FileRead(_Event):
    """A repository file (or a line range of it). Trust=workspace. Newer revision supersedes."""

    type: Literal["file_read"] = "file_read"
    path: str
    content: str = ""
    revision: str | None = None
    start_line: Integer | None = None
    end_line: Integer | None = None
    artifact: ArtifactRef | None = None


class EvidenceRetrieved(_Event):
    """Retrieved outside material: web page, e-mail, document chunk. Trust=external unless declared."""

    type: Literal["evidence_retrieved"] = "evidence_retrieved"
    content: str = ""
    blocks: Items[ContentBlock] = Items()
    source_ref: str
    source_kind: Literal["web", "email", "document", "chunk", "other"] = "chunk"
    semantic_key: str | None = None
    origin: ToolOrigin = "external"
    artifact: ArtifactRef | None = None


class MemoryRecalled(_Event):
    """A memory recalled into the run; a newer recall of the same ``memory_id`` supersedes the
    older. Trust is its ``origin`` (workspace unless declared external)."""

    type: Literal["memory_recalled"] = "memory_recalled"
    memory_id: str
    content: str
    source_ref: str
    origin: ToolOrigin = "workspace"


class HistoryCompacted(_Event):
    """A structured summary standing in for the events at positions ``covers_from..covers_to``."""

    type: Literal["history_compacted"] = "history_compacted"
    summary: CompactionSummary
    covers_from: Integer = Field(ge=1)
    covers_to: Integer = Field(ge=1)
    strategy: Literal["mask", "summary"] = "summary"
    summarizer: str = "deterministic"


class ContextBuilt(_Event):
    """What one request contained: the manifest (hashes and refs, no content) and its hashes."""

    type: Literal["context_built"] = "context_built"
    turn: Integer = Field(ge=1)
    provider: str
    request_hash: str
    prefix_hash: str
    config_hash: str
    manifest: dict[str, Any]
    rebuild: bool = False
    log_version: Integer = Field(default=0, ge=0)
    """The last log position the build folded: a replay folds exactly up to here."""
    builder: str | None = None
    """The contextfold that built it (``"contextfold 0.31.0"``; None in records made before
    builders were named). A replay that differs from the record names both builders: an
    upgraded builder may select or render differently from the same log."""

    @classmethod
    def with_manifest_json(cls, manifest_json: bytes, manifest_depth: int | None = None,
                           **fields: Any) -> ContextBuilt:
        """The event of ``fields``, its manifest's canonical JSON already known.

        ``manifest_json`` must be exactly the canonical JSON (UTF-8) of ``fields["manifest"]``
        as the event dumps it, and ``manifest_depth`` (if given) at least its nesting depth
        (``BuildResult.record`` makes all three from the same manifest, each line's text kept
        from build to build). Why: a long run's manifest is ~2 MB of JSON, and dumping it
        again to store its record, then reading that for its depth, cost more than the build;
        with them known, :func:`canonical_json` dumps only the few other fields and the store
        skips the read (:func:`known_json_depth`). They are kept beside the event (not in it:
        events compare by their fields) for as long as this very event object lives; a copy
        of the event is dumped and checked in full.
        """
        event = cls(**fields)
        key = id(event)

        def forget(ref: weakref.ref[ContextBuilt]) -> None:
            hit = _MANIFEST_TEXTS.get(key)
            if hit is not None and hit[0] is ref:
                del _MANIFEST_TEXTS[key]

        _MANIFEST_TEXTS[key] = (weakref.ref(event, forget), manifest_json, manifest_depth)
        return event


_MANIFEST_TEXTS: dict[int, tuple[weakref.ref[ContextBuilt], bytes, int | None]] = {}
"""id(event) -> (the event, its manifest's canonical JSON and depth bound), see
``ContextBuilt.with_manifest_json``."""


def _known_manifest(event: BaseModel) -> tuple[weakref.ref[ContextBuilt], bytes, int | None] | None:
    hit = _MANIFEST_TEXTS.get(id(event)) if type(event) is ContextBuilt else None
    return hit if hit is not None and hit[0]() is event else None


def is_vouched_record(event: BaseModel) -> bool:
    """Whether ``event`` is a record made by :meth:`ContextBuilt.with_manifest_json` (this very
    object): validated when made, and frozen since, so the store need not parse its JSON back to
    know a read will (a long run's manifest is megabytes; the store checks any other event so)."""
    return _known_manifest(event) is not None


def known_json_depth(event: BaseModel) -> int | None:
    """A bound on the nesting depth of ``canonical_json(event)`` known without reading it, or
    None: the record of a build whose manifest depth the builder vouched for."""
    hit = _known_manifest(event)
    # The event is an object of scalars but its manifest, an object: one level above it.
    return None if hit is None or hit[2] is None else 1 + hit[2]


class HandOff(_Event):
    """Another agent (or a resumed process) takes over the run."""

    type: Literal["hand_off"] = "hand_off"
    mode: Literal["hand_off", "resume"] = "hand_off"
    from_agent: str | None = None
    to_agent: str | None = None
    note: str = ""


class RuntimeNote(_Event):
    """A message the runtime showed the model that is neither a tool result nor the user's words.

    Why its own event: OpenHands answers a malformed call it refused (no action, so no call to
    answer) with an error the model sees as a user-role message. Imported as a
    :class:`UserInput` it became "the latest user input" -- required, while the user's real task
    turned optional and was cut first. A note stays where it was logged, in the runtime's voice,
    as a data block the budget may drop like any stale note. Always trust=runtime."""

    type: Literal["runtime_note"] = "runtime_note"
    text: str
    source_ref: str = "runtime://note"
    is_error: bool = False


class UsageObserved(_Event):
    """The token usage the provider reported for one turn's request (``Run.observe_usage``);
    later builds for the model calibrate their budget to it."""

    type: Literal["usage_observed"] = "usage_observed"
    turn: Integer = Field(ge=1)
    input_tokens: Integer = Field(ge=0)
    cached_tokens: Integer = Field(default=0, ge=0)
    output_tokens: Integer = Field(default=0, ge=0)
    model: str | None = None


AnyEvent: TypeAlias = Annotated[
    RunStarted
    | PolicySet
    | InstructionSet
    | GoalSet
    | PlanUpdated
    | ToolsRegistered
    | UserInput
    | ModelResponse
    | ToolResult
    | ToolCallCancelled
    | ToolResultLost
    | FileRead
    | EvidenceRetrieved
    | MemoryRecalled
    | HistoryCompacted
    | ContextBuilt
    | HandOff
    | RuntimeNote
    | UsageObserved,
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent, config=ConfigDict(defer_build=True))
"""Parses any event by its ``type``; built on its first use (``_Event.model_config`` says why)."""


# ---------------------------------------------------------------- canonical JSON


def canonical_json(event: BaseModel) -> bytes:
    """Sorted keys, compact separators, UTF-8: the bytes the store hashes."""
    hit = _known_manifest(event)
    if hit is not None:  # the manifest's text is known: splice it in
        rest = event.model_dump(mode="json", exclude={"manifest"})
        members = {key: canonical_utf8(value) for key, value in rest.items()}
        members["manifest"] = hit[1]
        return canonical_object(members)
    return canonical_utf8(event.model_dump(mode="json"))


def event_to_json(event: AnyEvent) -> bytes:
    return canonical_json(event)


def artifact_refs(value: object) -> Iterator[ArtifactRef]:
    """Every :class:`ArtifactRef` in ``value`` (an event, a block, a tuple of them): the payloads
    and media an event cites by hash, which a store must hold for the run to build."""
    if isinstance(value, ArtifactRef):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from artifact_refs(getattr(value, name))
    elif isinstance(value, tuple | list):
        for item in value:
            yield from artifact_refs(item)


def event_from_json(raw: bytes | str | dict[str, Any]) -> AnyEvent:
    """Parse canonical (or older) event JSON, upcasting old versions first."""
    data = json.loads(raw) if isinstance(raw, bytes | str) else raw
    if not isinstance(data, dict):
        raise ValueError("an event must be a JSON object")
    return EVENT_ADAPTER.validate_python(upcast(data))
