"""ContextFragment: the seed's data contract, exactly, plus the message blocks it carries.

A fragment is one unit the builder can select, drop, truncate or dedupe. Its
``content`` is a tuple of message blocks; big payloads stay in the artifact
table and the block holds the ref (content is loaded when rendered).
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from contextfold.domain.events import ArtifactRef, DocumentBlock, ImageBlock, Reasoning, TextBlock
from contextfold.domain.items import Items

__all__ = [
    "FRAGMENT_KINDS",
    "LAYER_OF_KIND",
    "TRUST_RANK",
    "ContextFragment",
    "FragmentKind",
    "MessageBlock",
    "ReasoningBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "Trust",
]

FragmentKind: TypeAlias = Literal[
    "policy", "instruction", "goal", "success_contract", "plan",
    "history", "tool_spec", "tool_result", "evidence", "memory",
    "user_input",
]
FRAGMENT_KINDS: tuple[FragmentKind, ...] = (
    "policy", "instruction", "goal", "success_contract", "plan",
    "history", "tool_spec", "tool_result", "evidence", "memory",
    "user_input",
)

Trust: TypeAlias = Literal["runtime", "user", "workspace", "external"]
TRUST_RANK: dict[str, int] = {"runtime": 3, "user": 2, "workspace": 1, "external": 0}
"""Authority order for dedupe: runtime > user > workspace > external."""

LAYER_OF_KIND: dict[str, int] = {
    "policy": 1, "instruction": 1,
    "tool_spec": 2,
    "goal": 3, "success_contract": 3,
    "plan": 4,
    "history": 5,
    "evidence": 6, "memory": 6,
    "tool_result": 7,
    "user_input": 8,
}
"""The seed's eight semantic layers (1 = stable prefix ... 8 = current input)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCallBlock(_Frozen):
    """An assistant's tool call, arguments verbatim."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str


class ToolResultBlock(_Frozen):
    """The single answer to one call.

    ``status``: ``ok``/``error`` for a real result; ``lost`` and ``cancelled``
    for runtime recovery answers (rendered as is_error, never as success).
    """

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str | None = None
    status: Literal["ok", "error", "lost", "cancelled"] = "ok"
    text: str = ""
    artifact: ArtifactRef | None = None
    blocks: Items[TextBlock | ImageBlock | DocumentBlock] = Items()
    exit_code: int | None = None


class ReasoningBlock(_Frozen):
    """A model response's provider reasoning (``events.Reasoning``), verbatim: sent back only to
    the provider that made it (``render``), never cut, redacted or summarised."""

    type: Literal["reasoning"] = "reasoning"
    reasoning: Reasoning


MessageBlock: TypeAlias = Annotated[
    TextBlock | ImageBlock | DocumentBlock | ToolCallBlock | ToolResultBlock | ReasoningBlock,
    Field(discriminator="type"),
]


class ContextFragment(_Frozen):
    """The seed's ContextFragment contract (section 2), field for field.

    ``source_ref`` points back to the log (``event://RUN/POSITION``), a file
    line range (``file://path@rev#L10-L20``), a retrieval chunk, or a call
    (``call://RUN/CALL_ID@POSITION``: the position of the response that made the
    call, since real logs re-use call ids). ``freshness`` is in [0, 1] and derives
    from log position only (1.0 = the newest event), never from the wall clock.
    """

    id: str
    kind: FragmentKind
    source_ref: str
    trust: Trust
    priority: int
    required: bool
    freshness: float = Field(ge=0.0, le=1.0)
    token_count: int = Field(ge=0)
    content_hash: str
    content: Items[MessageBlock]
    selection_reason: str | None = None
    truncated: bool = False
