"""The openai-chat protocol check that takes groups it passed before whole gives, for any body,
the verdict and the error of the full walk, and says whether every message is a remembered dict.

Why a property test: skipping a known group (``protocol._PASSED_GROUPS``), a run of known plain
messages (``_PASSED_PLAIN``) or the check of a known tools list (``_DECLARED_TOOLS``) must never
pass a body the plain walk refuses, nor change its error. The reference below is that walk as it
was before anything was kept. Bodies are drawn from one pool of remembered (immutable) dicts, so
the groups and messages kept from one body meet the next one in new company: answers missing,
out of order or duplicated, groups cut short, a plain message while a call is open, tool names no
longer declared.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import RenderError
from contextfold.projections.render import protocol
from contextfold.projections.request_json import is_remembered, remember


def _assistant(ids: list[str], names: list[str]) -> dict[str, Any]:
    return ({"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": "{}"}}
        for i, n in zip(ids, names, strict=True)]})


def _answer(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


POOL: list[dict[str, Any]] = [
    {"role": "system", "content": "rules"},
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "done"},
    _assistant(["a1"], ["read"]), _answer("a1"),
    _assistant(["b1", "b2"], ["read", "run"]), _answer("b1"), _answer("b2"),
    _assistant(["c1", "c1"], ["run", "run"]), _answer("c1"),
    _assistant(["d1"], ["deploy"]), _answer("d1"),
    _answer("zz"),
    {"role": "user", "content": "not remembered"},
    {"role": "robot", "content": "unknown role"},
]
"""Messages the bodies are made of: groups (an assistant message and its answers), a call
repeating its id, an answer to no call, a dict of the caller's (never remembered), an unknown
role. The first 13 are remembered by each test (another test may have emptied the memos)."""


TOOLS = {n: {"type": "function", "function": {"name": n}} for n in ("read", "run", "deploy")}
"""Tool dicts remembered by each test, as a build's body holds them."""


def _remember_pool() -> None:
    for message in POOL[:13]:
        remember(message)
    for tool in TOOLS.values():
        remember(tool)
    assert all(map(is_remembered, POOL[:13])) and not any(map(is_remembered, POOL[13:]))

GROUPED = [[0], [1], [2], [3, 4], [5, 6, 7], [5, 7, 6], [8, 9], [10, 11], [12], [13], [14], [3], [5, 6]]


def _reference_walk(p: str, body: dict[str, Any]) -> None:
    """The openai-chat rules, walked message by message with nothing remembered."""
    declared = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    pending: list[str] = []
    asked_at = -1
    messages = protocol._list(p, body, "messages")
    if not messages:
        protocol._fail(p, "at least one message is required" + protocol._NOTHING_TO_SEND)
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if pending:
            if role == "tool":
                call_id = msg.get("tool_call_id")
                if call_id not in pending:
                    protocol._fail(p, f"tool message answers {call_id!r}, which is not an open call of "
                                   f"assistant message {asked_at} (duplicate or unknown id)", i)
                pending.remove(call_id)
                continue
            protocol._fail(p, f"assistant message {asked_at} has unanswered tool calls "
                           f"{pending}: its tool messages must follow it immediately, but "
                           f"message {i} is a {role!r} message", asked_at)
        if role == "tool":
            protocol._fail(p, f"tool message for {msg.get('tool_call_id')!r} does not follow an "
                           "assistant message that called it", i)
        elif role == "assistant":
            ids = [c.get("id") for c in msg.get("tool_calls") or []]
            if len(set(ids)) != len(ids):
                protocol._fail(p, f"assistant message repeats a tool call id: {ids}", i)
            for call in msg.get("tool_calls") or []:
                protocol._declared(p, declared, call.get("function", {}).get("name"), i)
            pending, asked_at = list(ids), i
        elif role not in ("system", "developer", "user"):
            protocol._fail(p, f"unknown role {role!r}", i)
    if pending:
        protocol._fail(p, f"assistant message {asked_at} has unanswered tool calls {pending}", asked_at)


def _outcome(check: Any, body: dict[str, Any]) -> str | None:
    try:
        check("openai-chat", body)
    except RenderError as exc:
        return str(exc)
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(range(len(GROUPED))), max_size=12), min_size=1, max_size=4),
       st.lists(st.sets(st.sampled_from(["read", "run", "deploy"])), min_size=1, max_size=4))
def test_skipping_known_groups_gives_the_plain_walks_verdict(bodies: list[list[int]],
                                                   tool_sets: list[set[str]]) -> None:
    _remember_pool()
    for picks in bodies:
        for names in tool_sets:  # the same messages under other declared tools
            messages = [POOL[i] for g in picks for i in GROUPED[g]]
            # the caller's own tool dicts, then remembered ones (whose names the next body with
            # the same tools takes from the last one)
            for tools in ([{"type": "function", "function": {"name": n}} for n in sorted(names)],
                          [TOOLS[n] for n in sorted(names)]):
                body = {"model": "m", "messages": messages, "tools": tools}
                expected = _outcome(_reference_walk, body)
                assert _outcome(protocol.check_protocol, body) == expected
                assert _outcome(protocol.check_protocol, body) == expected  # its groups now known
                if expected is None:  # what the walk says of the messages, without a pass of its own
                    assert protocol.check_protocol_noting("openai-chat", body) == all(
                        map(is_remembered, messages))


def test_a_known_group_is_taken_whole_and_a_changed_one_walked(monkeypatch: Any) -> None:
    _remember_pool()
    tools = [{"type": "function", "function": {"name": n}} for n in ("read", "run")]
    body = {"messages": [POOL[1], POOL[5], POOL[6], POOL[7], POOL[2]], "tools": tools}
    protocol.check_protocol("openai-chat", body)
    assert protocol._PASSED_GROUPS[id(POOL[5])] == (POOL[5], (POOL[6], POOL[7]), frozenset({"read", "run"}))
    asked: list[object] = []
    real = protocol._declared

    def declared(p: str, names: set[str], name: Any, index: int) -> None:
        asked.append(name)
        real(p, names, name, index)

    monkeypatch.setattr(protocol, "_declared", declared)
    protocol.check_protocol("openai-chat", body)
    assert asked == []  # the group was taken whole
    cut = {"messages": [POOL[1], POOL[5], POOL[6], POOL[2]], "tools": tools}
    try:
        protocol.check_protocol("openai-chat", cut)
    except RenderError as exc:
        assert "unanswered tool calls ['b2']" in str(exc)
    else:
        raise AssertionError("a group missing an answer passed")
    assert asked == ["read", "run"]  # walked
    own = {"role": "user", "content": "a dict of the caller's"}
    mixed = {"messages": [own, POOL[3], POOL[4]],
             "tools": [{"type": "function", "function": {"name": "read"}}]}
    protocol.check_protocol("openai-chat", mixed)
    assert id(own) not in protocol._PASSED_GROUPS  # only remembered dicts are kept
