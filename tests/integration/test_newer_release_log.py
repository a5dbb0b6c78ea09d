"""A run a newer contextfold wrote to (an event type or version this release does not know) is
not a damaged log: reads, ``verify`` and the CLI say to upgrade, with a typed error that is no
:class:`IntegrityError`, while a row that is damaged is still reported as damage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from contextfold.domain.errors import IntegrityError, UpgradeRequiredError
from contextfold.domain.events import UserInput
from contextfold.domain.log import chain_hash
from contextfold.store.event_store import EventStore
from contextfold.store.store_tables import EVENTS_TABLE
from tests.cli_runner import cf_process as cf


def _write_raw(store: EventStore, run_id: str, topic: str, body: bytes) -> None:
    """Append ``body`` under ``topic`` as a release that knows it would: chained to the run's head."""
    head = store.read(run_id)[-1]
    position = head.position + 1
    digest = chain_hash(run_id, position, head.hash, body)
    store.backend.recorder.insert_events([StoredEvent(run_id, position, topic, digest.encode() + body)])


@pytest.mark.parametrize(("topic", "body"), [
    ("plan_forked@1", b'{"branch":"b2","type":"plan_forked","v":1}'),  # a type added later
    ("user_input@2", b'{"content":"hi","source":"user","type":"user_input","v":2}'),  # a later version
])
def test_a_newer_release_s_event_asks_for_an_upgrade(store: EventStore, topic: str, body: bytes) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, body)
    etype, _, version = topic.partition("@")
    for read in (lambda: store.read("r"), lambda: store.verify("r")):
        with pytest.raises(UpgradeRequiredError) as caught:
            read()
        assert not isinstance(caught.value, IntegrityError)
        assert caught.value.position == 2
        assert f"{etype!r} version {version}" in str(caught.value) and "upgrade" in str(caught.value)


@pytest.mark.parametrize(("topic", "body"), [
    ("plan_forked@1", b'{"type":"user_input","v":1,"content":7}'),  # the body is not the topic's type
    ("user_input@1", b'{"content":7,"source":"user","type":"user_input","v":1}'),  # a known one, invalid
    ("plan_forked@x", b'{"type":"plan_forked","v":"x"}'),  # nonsense, not a release's
    # a required key renamed: the unknown key comes with a known one missing
    ("user_input@1", b'{"v":1,"type":"user_input","contents":[{"type":"text","text":"hi"}]}'),
    # an unknown field beside a known one of the wrong type
    ("user_input@1", b'{"v":1,"type":"user_input","content":[{"type":"text","text":7,"lang":"en"}]}'),
    # an unknown field in JSON cut short
    ("user_input@1", b'{"v":1,"type":"user_input","content":[{"type":"text","text":"hi"}],"language":"en"'),
])
def test_a_damaged_row_is_still_an_integrity_error(store: EventStore, topic: str, body: bytes) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, body)
    with pytest.raises(IntegrityError):
        store.read("r")
    report = store.verify("r")
    assert (report.ok, report.first_bad_position) == (False, 2)


def test_the_cli_says_to_upgrade_with_exit_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with EventStore(url) as store:
        store.append("r", [UserInput("a")])
        _write_raw(store, "r", "plan_forked@1", b'{"branch":"b2","type":"plan_forked","v":1}')
    for args in (("verify", "r"), ("build", "r"), ("events", "r")):
        out: subprocess.CompletedProcess[str] = cf("--store", url, *args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr and "integrity" not in out.stderr, out.stderr
        assert "UpgradeRequiredError" in out.stderr and "upgrade contextfold" in out.stderr, out.stderr


# A newer release that adds an optional field (omitted when None, no version bump, as
# ``DocumentBlock.duration_ms`` and ``ToolSpec.strict`` were added) or a block type writes rows this
# release's models refuse (``extra="forbid"``, a discriminator it does not know). Such a row, whose
# bytes are those its chain hash covers, asks for an upgrade and names what is unknown; the same row
# with a byte changed after it was written (the hash no longer holds) is damage.
_NEWER_ROWS = [
    ("user_input@1", b'{"v":1,"type":"user_input","content":[{"type":"document","url":"https://x/v.mp4",'
                     b'"media_type":"video/mp4","frame_rate":30}],"required":false}',
     "content.0.document.frame_rate"),
    ("tools_registered@1", b'{"v":1,"type":"tools_registered","tools":[{"name":"ls","description":"",'
                           b'"parameters":{"type":"object","properties":{}},"tags":[],"cache":"ephemeral"}]}',
     "tools.0.cache"),
    ("user_input@1", b'{"v":1,"type":"user_input","content":[{"type":"video","url":"https://x/v.mp4"}],'
                     b'"required":false}', "'video'"),
    ("user_input@1", b'{"v":1,"type":"user_input","content":[{"type":"text","text":"hi"}],'
                     b'"required":false,"language":"en"}', "language"),
    # a build's record, read without its manifest by a fold: refused as its whole read refuses it
    ("context_built@1", b'{"config_hash":"c","log_version":0,"manifest":{},"prefix_hash":"p","provider":'
                        b'"neutral","request_hash":"r","turn":1,"type":"context_built","v":1,"cached":7}',
     "cached"),
]


@pytest.mark.parametrize(("topic", "body", "named"), _NEWER_ROWS)
def test_a_newer_release_s_field_or_block_asks_for_an_upgrade(store: EventStore, topic: str, body: bytes,
                                                              named: str) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, body)
    for read in (lambda: store.read("r"), lambda: store.verify("r"), lambda: list(store.fold_events("r"))):
        with pytest.raises(UpgradeRequiredError) as caught:
            read()
        assert not isinstance(caught.value, IntegrityError)
        assert caught.value.position == 2
        message = str(caught.value)
        assert "position 2" in message and named in message and "upgrade contextfold" in message, message


def _flip_after_write(store: EventStore, run_id: str, position: int, old: bytes, new: bytes) -> None:
    """Change the stored row at ``position`` in place, its chain hash left as it was (a bad disk,
    a hand edit): what a read must not take for a newer release's row."""
    table = store.backend.table(EVENTS_TABLE)
    p = store.backend.placeholder
    state = bytes(store.backend.query(f"SELECT state FROM {table} WHERE originator_id = {p} "
                                      f"AND originator_version = {p}", (run_id, position))[0][0])
    assert old in state
    store.backend.execute(f"UPDATE {table} SET state = {p} WHERE originator_id = {p} "
                          f"AND originator_version = {p}", (state.replace(old, new), run_id, position))


@pytest.mark.parametrize(("old", "new"), [
    (b'"exit_code"', b'"exit_codf"'),  # an optional key's name: alone it reads as an unknown field
    (b'"blocks"', b'"blockz"'),  # another one
])
def test_a_key_changed_after_it_was_written_is_damage_not_an_upgrade(store: EventStore, old: bytes,
                                                                      new: bytes) -> None:
    from contextfold.domain.events import ModelResponse, TextBlock, ToolCall, ToolResult
    store.append("r", [UserInput("a"), ModelResponse(tool_calls=(ToolCall(call_id="c", name="ls"),)),
                       ToolResult(call_id="c", content="ok", blocks=(TextBlock(text="x"),), exit_code=0)])
    store.close()
    with EventStore(store.url) as fresh:
        _flip_after_write(fresh, "r", 3, old, new)
        with pytest.raises(IntegrityError) as caught:
            fresh.read("r")
        assert not isinstance(caught.value, UpgradeRequiredError) and caught.value.position == 3
        assert "chain hash" in str(caught.value), str(caught.value)
        report = fresh.verify("r")
        assert (report.ok, report.first_bad_position) == (False, 3)


# A newer release may add a value to a field whose values describe (what evidence is, an image's
# detail, a plan step's status, a compaction's strategy: ``OPEN_LITERALS``) without a version bump:
# such a row asks for an upgrade and names the value. A value outside a closed set the design fixes
# (a tool output's origin, a hand-off's mode) is damage even with its hash intact, and so is a value
# no release names so (not snake_case), or a new value beside a known field of the wrong type.
_IMAGE = {"type": "image", "url": "https://x/a.png", "media_type": "image/png", "detail": "auto"}
_OPEN_VALUES = [
    ("plan_updated@1", {"v": 1, "type": "plan_updated",
                        "steps": [{"id": "s1", "title": "ship", "status": "cancelled", "depends_on": []}]},
     "status 'cancelled' at steps.0.status"),
    ("evidence_retrieved@1", {"v": 1, "type": "evidence_retrieved", "content": "x", "source_ref": "u",
                              "source_kind": "issue_thread"}, "source_kind 'issue_thread'"),
    ("history_compacted@1", {"v": 1, "type": "history_compacted", "summary": {}, "covers_from": 1,
                             "covers_to": 1, "strategy": "drop"}, "strategy 'drop'"),
    ("user_input@1", {"v": 1, "type": "user_input", "content": [{**_IMAGE, "detail": "original"}]},
     "detail 'original' at content.0.image.detail"),
]
_CLOSED_VALUES = [
    ("tool_result@1", {"v": 1, "type": "tool_result", "call_id": "c", "content": "x", "origin": "runtime"}),
    ("hand_off@1", {"v": 1, "type": "hand_off", "mode": "fork", "note": ""}),
    ("plan_updated@1", {"v": 1, "type": "plan_updated",
                        "steps": [{"id": "s1", "title": "t", "status": "Cancelled"}]}),  # no release's name
    ("user_input@1", {"v": 1, "type": "user_input",  # a new value beside a known field of the wrong type
                      "content": [{**_IMAGE, "detail": "original", "width": "wide"}]}),
]


def _json(body: dict[str, object]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


@pytest.mark.parametrize(("topic", "body", "named"), _OPEN_VALUES)
def test_a_newer_release_s_value_of_an_open_field_asks_for_an_upgrade(
        store: EventStore, topic: str, body: dict[str, object], named: str) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, _json(body))
    for read in (lambda: store.read("r"), lambda: store.verify("r"), lambda: list(store.fold_events("r"))):
        with pytest.raises(UpgradeRequiredError) as caught:
            read()
        assert not isinstance(caught.value, IntegrityError) and caught.value.position == 2
        assert named in str(caught.value) and "upgrade contextfold" in str(caught.value), str(caught.value)


def _assert_damage_with_hash_intact(store: EventStore, topic: str, body: dict[str, object]) -> None:
    """``body`` written as event 2 with a valid chain hash reads as damage there, not as a newer
    release's event: no release writes it."""
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, _json(body))
    with pytest.raises(IntegrityError) as caught:
        store.read("r")
    assert not isinstance(caught.value, UpgradeRequiredError) and caught.value.position == 2
    report = store.verify("r")
    assert (report.ok, report.first_bad_position) == (False, 2)


@pytest.mark.parametrize(("topic", "body"), _CLOSED_VALUES)
def test_a_value_outside_a_closed_set_is_damage_even_with_its_hash_intact(store: EventStore, topic: str,
                                                                           body: dict[str, object]) -> None:
    _assert_damage_with_hash_intact(store, topic, body)


def _assert_flipped_byte_is_damage(store: EventStore, event: Any, old: bytes, new: bytes) -> None:
    """``event`` logged as event 2, then ``old`` changed to ``new`` in its stored bytes: a value
    shaped like a newer release's, but the chain hash breaks, so it reads as damage."""
    store.append("r", [UserInput("a"), event])
    store.close()
    with EventStore(store.url) as fresh:
        _flip_after_write(fresh, "r", 2, old, new)
        with pytest.raises(IntegrityError) as caught:
            fresh.read("r")
        assert not isinstance(caught.value, UpgradeRequiredError) and "chain hash" in str(caught.value)


def test_a_changed_byte_in_an_open_field_s_value_is_damage(store: EventStore) -> None:
    """``pending`` read as ``pendinf``: snake_case like a newer release's status, but its hash breaks."""
    from contextfold.domain.event_values import PlanStep
    from contextfold.domain.events import PlanUpdated
    _assert_flipped_byte_is_damage(store, PlanUpdated(steps=(PlanStep(id="s1", title="ship"),)),
                                   b'"pending"', b'"pendinf"')


def test_the_cli_says_upgrade_for_a_newer_field_and_damage_for_a_changed_byte(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with EventStore(url) as store:
        store.append("r", [UserInput("a")])
        _write_raw(store, "r", *_NEWER_ROWS[0][:2])
    for args in (("verify", "r"), ("build", "r"), ("events", "r")):
        out: subprocess.CompletedProcess[str] = cf("--store", url, *args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert "UpgradeRequiredError" in out.stderr and "frame_rate" in out.stderr, out.stderr
    with EventStore(url) as store:
        _flip_after_write(store, "r", 2, b'"https://x/v.mp4"', b'"https://x/v.mp5"')
    for args in (("verify", "r"), ("build", "r"), ("events", "r")):
        out = cf("--store", url, *args, cwd=tmp_path)
        assert out.returncode == 3, (args, out.stderr)
        assert "chain hash" in out.stderr and "Upgrade" not in out.stderr, out.stderr


# A response's reasoning is tagged with its provider (``openai-responses``: the provider tags are
# not snake_case) and its items carry the provider's own kind (``raw["type"]``). Both are open: a
# later release may read another provider's reasoning, or a kind of item a provider adds, without a
# new event version. Such a row asks for an upgrade; a key outside snake_case, a tag or kind no
# release names so, an item with no kind, or a kind this release knows under another provider, is
# damage.
def _response(provider: str = "anthropic", raw: dict[str, object] | None = None) -> dict[str, object]:
    item = {"before_call": 0, "raw": raw if raw is not None else {"type": "thinking", "thinking": "t",
                                                                   "signature": "s"}}
    return {"v": 1, "type": "model_response", "text": "x", "tool_calls": [],
            "reasoning": {"provider": provider, "items": [item]}}


_OPEN_REASONING = [
    (_response("xai-responses"), "provider 'xai-responses' at reasoning"),
    (_response("bedrock_converse"), "provider 'bedrock_converse' at reasoning"),
    (_response(raw={"type": "thinking_summary", "text": "t"}), "type 'thinking_summary' at reasoning"),
    (_response("openai-responses", {"type": "reasoning-v2", "id": "rs_1"}), "type 'reasoning-v2'"),
]
_DAMAGED_REASONING = [
    _response("Anthropic"),  # no release's tag
    _response("xai responses"),
    _response(raw={"type": "reasoning", "id": "rs_1", "summary": []}),  # a known kind, another provider's
    _response(raw={"type": "web_search_call", "id": "ws_1"}),  # a hosted tool's item, another provider's
    _response("openai-responses", {"type": "server_tool_use", "id": "srvtoolu_1"}),
    _response(raw={"thinking": "t", "signature": "s"}),  # no kind at all
    _response(raw={"type": 7}),
    {**_response(), "exit-code": 0},  # a key no release names so (keys stay snake_case)
]


@pytest.mark.parametrize(("body", "named"), _OPEN_REASONING)
def test_a_newer_release_s_reasoning_provider_or_kind_asks_for_an_upgrade(
        store: EventStore, body: dict[str, object], named: str) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", "model_response@1", _json(body))
    for read in (lambda: store.read("r"), lambda: store.verify("r"), lambda: list(store.fold_events("r"))):
        with pytest.raises(UpgradeRequiredError) as caught:
            read()
        assert not isinstance(caught.value, IntegrityError) and caught.value.position == 2
        assert named in str(caught.value) and "upgrade contextfold" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("body", _DAMAGED_REASONING)
def test_reasoning_no_release_writes_is_damage_even_with_its_hash_intact(store: EventStore,
                                                                         body: dict[str, object]) -> None:
    _assert_damage_with_hash_intact(store, "model_response@1", body)


def test_a_changed_byte_in_a_reasoning_provider_is_damage(store: EventStore) -> None:
    """``openai-responses`` read as ``openai-responsez``: a tag like a newer release's, its hash broken."""
    from contextfold.domain.events import ModelResponse
    from contextfold.domain.reasoning import OpenAIResponsesReasoning, ReasoningItem
    reasoning = OpenAIResponsesReasoning(items=(ReasoningItem(raw={"type": "reasoning", "id": "rs_1",
                                                                    "summary": []}),))
    _assert_flipped_byte_is_damage(store, ModelResponse(text="x", reasoning=reasoning),
                                   b'"openai-responses"', b'"openai-responsez"')
