"""A log that uses no feature newer than the first release is written as that release wrote it.

Why: events are ``extra="forbid"``, so a member an older release does not know makes it refuse
the event, and with it the run (an older worker sharing the store, a rollback, an export read
there). A field added since must be left out of the JSON at its default (``exclude_if``), as
``ModelResponse.reasoning`` and ``ToolsRegistered.replace`` are: then only a log that uses the
new feature is refused by a release that would misread it (``replace: true`` read as adding
tools), and a log that does not reads, and hashes, alike everywhere.

``PINNED`` is the canonical JSON of ``SAMPLE``. It was checked against the event models of
0.1.0 (3e96315) and 0.15.0 (3f6f79a), unpacked with ``git archive``: each line is accepted and
dumped again to the same bytes. The test pins the bytes, not the old code, so it needs no git.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from contextfold.domain import event_values
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
    canonical_json,
    event_from_json,
)

H = "ab" * 32
SAMPLE: tuple[BaseModel, ...] = (
    RunStarted(agent="coder", model="gpt-4o", encoding="o200k_base"),
    PolicySet(text="Never force-push."),
    InstructionSet(text="Use tabs.", source_ref="AGENTS.md"),
    GoalSet(goal="Make the build pass", success_contract=("cargo test exits 0",)),
    PlanUpdated(steps=(PlanStep(id="s1", title="build"),
                       PlanStep(id="s2", title="test", depends_on=("s1",)))),
    ToolsRegistered(tools=(ToolSpec(name="bash", description="run a command"),)),
    UserInput("Fix the build"),
    UserInput(content=(TextBlock(text="see"), ImageBlock(media_type="image/png", url="https://x/a.png"),
                       DocumentBlock(artifact=ArtifactRef(hash=H, size=3)))),
    ModelResponse(text="Building.",
                  tool_calls=(ToolCall(call_id="c1", name="bash", arguments='{"cmd":"cargo build"}'),)),
    ToolResult(call_id="c1", content="error[E0308]", is_error=True, exit_code=101),
    ToolCallCancelled(call_id="c2", reason="timeout"),
    ToolResultLost(call_id="c3", reason="worker died", call_position=9),
    FileRead(path="src/lib.rs", content="fn main() {}", revision="a1", start_line=1, end_line=1),
    EvidenceRetrieved(content="docs", source_ref="https://doc.rust-lang.org", source_kind="web"),
    MemoryRecalled(memory_id="m1", content="uses tabs", source_ref="memory://m1"),
    HistoryCompacted(summary=CompactionSummary(goal="build"), covers_from=1, covers_to=9),
    ContextBuilt(turn=2, provider="anthropic", request_hash=H, prefix_hash=H, config_hash=H,
                 manifest={"turn": 2}, log_version=16, builder="contextfold 0.16.0"),
    HandOff(from_agent="coder", to_agent="reviewer", note="over to you"),
    UsageObserved(turn=2, input_tokens=1200, cached_tokens=1000, output_tokens=50),
)

PINNED = (
    rb'{"agent":"coder","encoding":"o200k_base","model":"gpt-4o","type":"run_started","v":2}',
    (rb'{"allowed_tools":null,"denied_tools":[],"pinned_tools":[],"source_ref":"runtime://policy","text"'
     rb':"Never force-push.","type":"policy_set","v":1}'),
    rb'{"source_ref":"AGENTS.md","text":"Use tabs.","type":"instruction_set","v":1}',
    rb'{"goal":"Make the build pass","success_contract":["cargo test exits 0"],"type":"goal_set","v":1}',
    (rb'{"budget":null,"steps":[{"depends_on":[],"id":"s1","status":"pending","title":"build"},{"depends'
     rb'_on":["s1"],"id":"s2","status":"pending","title":"test"}],"stop_conditions":[],"type":"plan_upda'
     rb'ted","v":1}'),
    (rb'{"tools":[{"description":"run a command","name":"bash","parameters":{"properties":{},"type":"obj'
     rb'ect"},"tags":[]}],"type":"tools_registered","v":1}'),
    rb'{"content":[{"text":"Fix the build","type":"text"}],"required":false,"type":"user_input","v":1}',
    (rb'{"content":[{"text":"see","type":"text"},{"artifact":null,"detail":"auto","height":null,"media_t'
     rb'ype":"image/png","type":"image","url":"https://x/a.png","width":null},{"artifact":{"hash":"ababa'
     rb'bababababababababababababababababababababababababababababab","media_type":"text/plain","size":3}'
     rb',"media_type":"application/pdf","pages":null,"title":null,"type":"document","url":null}],"requir'
     rb'ed":false,"type":"user_input","v":1}'),
    (rb'{"model":null,"text":"Building.","tool_calls":[{"arguments":"{\"cmd\":\"cargo build\"}","call_id'
     rb'":"c1","name":"bash"}],"type":"model_response","v":1}'),
    (rb'{"artifact":null,"blocks":[],"call_id":"c1","content":"error[E0308]","exit_code":101,"is_error":'
     rb'true,"origin":"external","type":"tool_result","v":1}'),
    rb'{"call_id":"c2","reason":"timeout","type":"tool_call_cancelled","v":1}',
    rb'{"call_id":"c3","call_position":9,"reason":"worker died","type":"tool_result_lost","v":1}',
    (rb'{"artifact":null,"content":"fn main() {}","end_line":1,"path":"src/lib.rs","revision":"a1","star'
     rb't_line":1,"type":"file_read","v":1}'),
    (rb'{"artifact":null,"blocks":[],"content":"docs","origin":"external","semantic_key":null,"source_ki'
     rb'nd":"web","source_ref":"https://doc.rust-lang.org","type":"evidence_retrieved","v":1}'),
    (rb'{"content":"uses tabs","memory_id":"m1","origin":"workspace","source_ref":"memory://m1","type":"'
     rb'memory_recalled","v":1}'),
    (rb'{"covers_from":1,"covers_to":9,"strategy":"summary","summarizer":"deterministic","summary":{"com'
     rb'pleted_steps":[],"constraints":[],"decisions":[],"evidence_refs":[],"goal":"build","inferences":'
     rb'[],"known_failures":[],"next_action":"","pending_steps":[],"side_effects":[],"success_contract":'
     rb'[],"tool_calls_and_results":[]},"type":"history_compacted","v":1}'),
    (rb'{"builder":"contextfold 0.16.0","config_hash":"ababababababababababababababababababababababababa'
     rb'bababababababab","log_version":16,"manifest":{"turn":2},"prefix_hash":"ababababababababababababa'
     rb'bababababababababababababababababababab","provider":"anthropic","rebuild":false,"request_hash":"'
     rb'abababababababababababababababababababababababababababababababab","turn":2,"type":"context_built'
     rb'","v":1}'),
    (rb'{"from_agent":"coder","mode":"hand_off","note":"over to you","to_agent":"reviewer","type":"hand_'
     rb'off","v":1}'),
    (rb'{"cached_tokens":1000,"input_tokens":1200,"model":null,"output_tokens":50,"turn":2,"type":"usage'
     rb'_observed","v":1}'),
)

FIRST_RELEASE_FIELDS: dict[str, frozenset[str]] = {name: frozenset(fields.split()) for name, fields in {
    # events, by type
    "run_started": "agent encoding model type v",
    "policy_set": "allowed_tools denied_tools pinned_tools source_ref text type v",
    "instruction_set": "source_ref text type v",
    "goal_set": "goal success_contract type v",
    "plan_updated": "budget steps stop_conditions type v",
    "tools_registered": "tools type v",
    "user_input": "content required type v",
    "model_response": "model text tool_calls type v",
    "tool_result": "artifact blocks call_id content exit_code is_error origin type v",
    "tool_call_cancelled": "call_id reason type v",
    "tool_result_lost": "call_id call_position reason type v",
    "file_read": "artifact content end_line path revision start_line type v",
    "evidence_retrieved": "artifact blocks content origin semantic_key source_kind source_ref type v",
    "memory_recalled": "content memory_id origin source_ref type v",
    "history_compacted": "covers_from covers_to strategy summarizer summary type v",
    "context_built": "builder config_hash log_version manifest prefix_hash provider rebuild "
                     "request_hash turn type v",
    "hand_off": "from_agent mode note to_agent type v",
    "usage_observed": "cached_tokens input_tokens model output_tokens turn type v",
    # the values events carry, by class
    "ArtifactRef": "hash media_type size",
    "TextBlock": "text type",
    "ImageBlock": "artifact detail height media_type type url width",
    "DocumentBlock": "artifact media_type pages title type url",
    "ToolSpec": "description name parameters tags",
    "ToolCall": "arguments call_id name",
    "PlanStep": "depends_on id status title",
    "CompactionSummary": "completed_steps constraints decisions evidence_refs goal inferences known_failures "
                         "next_action pending_steps side_effects success_contract tool_calls_and_results",
}.items()}
"""The members the first release (0.1.0) reads, from its models: what every release since reads."""

NEWER_EVENT_TYPES = {"runtime_note"}
"""Event types added since: a release before refuses them, so they are written only when used
(``RuntimeNote``: an import meeting a call the runtime refused)."""


def _event_classes() -> list[type[BaseModel]]:
    union = typing.get_args(AnyEvent)[0]
    return list(typing.get_args(union))


def _kind(cls: type[BaseModel]) -> str:
    default: Any = cls.model_fields["type"].default if cls in _event_classes() else None
    return default if isinstance(default, str) else cls.__name__


@pytest.mark.parametrize("event, pinned", list(zip(SAMPLE, PINNED, strict=True)),
                         ids=[f"{i}-{_kind(type(e))}" for i, e in enumerate(SAMPLE)])
def test_a_log_without_newer_features_is_written_as_the_first_release_wrote_it(
        event: BaseModel, pinned: bytes) -> None:
    assert canonical_json(event) == pinned
    assert event_from_json(pinned) == event


def test_the_sample_holds_every_event_type_the_first_release_knew() -> None:
    assert {_kind(type(e)) for e in SAMPLE} == {_kind(c) for c in _event_classes()} - NEWER_EVENT_TYPES
    assert {_kind(c) for c in _event_classes()} - NEWER_EVENT_TYPES <= set(FIRST_RELEASE_FIELDS)


@pytest.mark.parametrize("cls", _event_classes() + [getattr(event_values, name) for name in (
    "ArtifactRef", "TextBlock", "ImageBlock", "DocumentBlock", "ToolSpec", "ToolCall", "PlanStep",
    "CompactionSummary")], ids=lambda cls: cls.__name__)
def test_a_field_added_since_is_left_out_of_the_json_at_its_default(cls: type[BaseModel]) -> None:
    """A field the first release does not read is written only when it is set: anything else
    makes every older release refuse the event even where the feature is unused."""
    if _kind(cls) in NEWER_EVENT_TYPES:
        return  # a type of its own, written only when used
    newer = set(cls.model_fields) - FIRST_RELEASE_FIELDS[_kind(cls)]
    for name in sorted(newer):
        info = cls.model_fields[name]
        assert not info.is_required(), f"{cls.__name__}.{name}: required, so every new log holds it"
        default = info.get_default(call_default_factory=True)
        assert info.exclude_if is not None and info.exclude_if(default), (
            f"{cls.__name__}.{name} is written at its default {default!r}: add "
            "Field(exclude_if=...) so a log that does not use it stays readable by older releases")


def test_the_store_writes_those_bytes(tmp_path: Any) -> None:
    """What a run's rows hold (after the chain hash) is the pinned JSON: the store writes
    ``canonical_json`` and nothing else, so the pin holds for the log itself."""
    from contextfold.api import open_store
    from contextfold.store.backends import EVENTS_TABLE

    used = [5, 6, 8, 9]  # tools, an input, a call and its result: a log the store takes as it is
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        store.run("r").append(*(SAMPLE[i] for i in used))  # type: ignore[arg-type]
        b = store.events.backend
        rows = b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} ORDER BY originator_version")
    assert [bytes(state)[64:] for (state,) in rows] == [PINNED[i] for i in used]
