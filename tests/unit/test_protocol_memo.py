"""The openai-chat protocol check that takes groups it passed before whole gives, for any body,
the verdict and the error of the full walk.

Why a property test: the shortcut (``protocol._passes_known_openai_chat``) must never pass a
body the walk refuses. Bodies here are drawn from one pool of remembered (immutable) dicts, so
the groups the shortcut keeps from one body meet the next one in new company: answers missing,
out of order or duplicated, groups cut short, tool names no longer declared.
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


def _remember_pool() -> None:
    for message in POOL[:13]:
        remember(message)
    assert all(map(is_remembered, POOL[:13])) and not any(map(is_remembered, POOL[13:]))

GROUPED = [[0], [1], [2], [3, 4], [5, 6, 7], [5, 7, 6], [8, 9], [10, 11], [12], [13], [14], [3], [5, 6]]


def _outcome(check: Any, body: dict[str, Any]) -> str | None:
    try:
        check("openai-chat", body)
    except RenderError as exc:
        return str(exc)
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(range(len(GROUPED))), max_size=12), min_size=1, max_size=4),
       st.lists(st.sets(st.sampled_from(["read", "run", "deploy"])), min_size=1, max_size=4))
def test_the_shortcut_gives_the_full_walks_verdict(bodies: list[list[int]],
                                                   tool_sets: list[set[str]]) -> None:
    _remember_pool()
    for picks in bodies:
        for names in tool_sets:  # the same messages under other declared tools
            messages = [POOL[i] for g in picks for i in GROUPED[g]]
            body = {"model": "m", "messages": messages,
                    "tools": [{"type": "function", "function": {"name": n}} for n in sorted(names)]}
            expected = _outcome(protocol._check_openai_chat, body)
            assert _outcome(protocol.check_protocol, body) == expected
            assert _outcome(protocol.check_protocol, body) == expected  # its groups now known


def test_a_known_group_is_taken_whole_and_a_changed_one_walked() -> None:
    _remember_pool()
    tools = [{"type": "function", "function": {"name": n}} for n in ("read", "run")]
    body = {"messages": [POOL[1], POOL[5], POOL[6], POOL[7], POOL[2]], "tools": tools}
    protocol.check_protocol("openai-chat", body)
    assert protocol._PASSED_GROUPS[id(POOL[5])] == (POOL[5], (POOL[6], POOL[7]), frozenset({"read", "run"}))
    assert protocol._passes_known_openai_chat(body)
    cut = {"messages": [POOL[1], POOL[5], POOL[6], POOL[2]], "tools": tools}
    assert not protocol._passes_known_openai_chat(cut)
    try:
        protocol.check_protocol("openai-chat", cut)
    except RenderError as exc:
        assert "unanswered tool calls ['b2']" in str(exc)
    else:
        raise AssertionError("a group missing an answer passed")
    own = {"role": "user", "content": "a dict of the caller's"}
    mixed = {"messages": [own, POOL[3], POOL[4]],
             "tools": [{"type": "function", "function": {"name": "read"}}]}
    protocol.check_protocol("openai-chat", mixed)
    assert id(own) not in protocol._PASSED_GROUPS  # only remembered dicts are kept
