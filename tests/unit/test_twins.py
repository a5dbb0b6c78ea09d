"""A retrieved or recalled text the kept conversation holds word for word is sent once."""

from __future__ import annotations

import json
from typing import Literal

from contextfold.api import open_store
from contextfold.domain.events import (
    AnyEvent,
    EvidenceRetrieved,
    FileRead,
    MemoryRecalled,
    ModelResponse,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.entries import LAZY_TEXT_CHARS
from tests.unit.test_builder import build, request_text

SOURCE = "\n".join(f"def f{i}(x):\n    return x * {i}" for i in range(30))  # under LAZY_TEXT_CHARS


def _read_then_file_read() -> list[AnyEvent]:
    """A read_file call, its result, and the FileRead the runtime records of the same text (the
    demo's e10 and e11)."""
    return [UserInput("fix f3"),
            ModelResponse(tool_calls=(ToolCall(call_id="r1", name="read_file",
                                               arguments=json.dumps({"path": "m.py"})),)),
            ToolResult(call_id="r1", content=SOURCE, origin="workspace"),
            FileRead(path="m.py", revision="HEAD", content=SOURCE)]


def test_a_file_read_identical_to_the_kept_result_it_came_from_is_sent_once() -> None:
    result = build(_read_then_file_read(), "anthropic", window=16_000, reserve=1_000)
    assert request_text(result).count("return x * 29") == 1
    assert [(e.id, e.reason, e.replaced_by) for e in result.manifest.excluded_items] == [
        ("e4", "duplicate", "e3")]
    assert "e4" not in {f.id for f in result.manifest.fragments}


def test_a_memory_identical_to_a_user_input_is_sent_once() -> None:
    said = "Always answer in French; the customer is in Lyon."
    events: list[AnyEvent] = [UserInput(said), ModelResponse(text="D'accord."),
                              MemoryRecalled(memory_id="m1", content=said, source_ref="memory://prefs/m1"),
                              UserInput("Ready?")]
    result = build(events, "openai-chat", window=16_000, reserve=1_000)
    assert request_text(result).count("customer is in Lyon") == 1
    assert [(e.id, e.reason, e.replaced_by) for e in result.manifest.excluded_items] == [
        ("e3", "duplicate", "e1")]


def test_when_the_conversation_copy_is_left_out_the_retrieved_one_is_kept() -> None:
    events = _read_then_file_read() + [
        item for k in range(8) for item in (
            ModelResponse(tool_calls=(ToolCall(call_id=f"s{k}", name="shell", arguments="{}"),)),
            ToolResult(call_id=f"s{k}", content="\n".join(f"line {j} of step {k}" for j in range(150))))]
    result = build(events, "anthropic", window=4_000, reserve=500)
    kept = {f.id for f in result.manifest.fragments}
    assert "e3" not in kept and "e4" in kept  # the result's group went; the file is still there
    assert request_text(result).count("return x * 29") == 1


def test_a_cut_conversation_copy_does_not_replace_the_whole_retrieved_one() -> None:
    """The twin was cut to 88 tokens (7 of 60 lines) and the evidence, kept whole, was dropped as
    its duplicate: a larger window showed less of the text."""
    text = "\n".join(f"l{i}: fact {i} w_{i}" for i in range(60))[:1020]
    events: list[AnyEvent] = [UserInput("Look at the logs"),
                              ModelResponse(tool_calls=(ToolCall(call_id="c1", name="fetch"),)),
                              ToolResult(call_id="c1", content=text)]
    for k in range(6):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"d{k}", name="other"),)),
                   ToolResult(call_id=f"d{k}", content=" ".join(f"filler{k}_{j}" for j in range(60)))]
    events += [EvidenceRetrieved(content=text, source_ref="doc://x"), UserInput("continue")]
    for window in range(2_500, 3_400, 25):
        result = build(events, "anthropic", window=window, reserve=200)
        lines = {f.id: f for f in result.manifest.fragments}
        if "e3" in lines and lines["e3"].truncated:
            assert "e16" in lines and not lines["e16"].truncated, window


def test_a_less_trusted_conversation_copy_does_not_replace_a_more_trusted_retrieved_one() -> None:
    fact = "The refund window is 14 days."
    events: list[AnyEvent] = [UserInput("refunds?"),
                              ModelResponse(tool_calls=(ToolCall(call_id="c1", name="fetch"),)),
                              ToolResult(call_id="c1", content=fact, origin="external"),
                              MemoryRecalled(memory_id="m", content=fact, source_ref="memory://m",
                                             origin="workspace")]
    result = build(events, "anthropic", window=16_000, reserve=1_000)
    assert {"e3", "e4"} <= {f.id for f in result.manifest.fragments}
    assert result.manifest.excluded_items == ()


LONG_SOURCE = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(400))  # over LAZY_TEXT_CHARS


def _long_read_then_file_read(origin: Literal["workspace", "external"] = "workspace") -> list[AnyEvent]:
    return [UserInput("look at a.py"),
            ModelResponse(tool_calls=(ToolCall(call_id="c1", name="read_file",
                                               arguments='{"path": "a.py"}'),)),
            ToolResult(call_id="c1", content=LONG_SOURCE, origin=origin),
            FileRead(path="a.py", content=LONG_SOURCE, revision="r1"),
            UserInput("now fix it")]


def test_a_file_read_identical_to_a_long_kept_result_is_sent_once() -> None:
    """Only texts up to LAZY_TEXT_CHARS were compared: a 12,580-character file went out twice. A
    long result is compared by its content hash, with nothing loaded."""
    assert len(LONG_SOURCE) > LAZY_TEXT_CHARS
    result = build(_long_read_then_file_read(), "anthropic", window=128_000, reserve=1_000)
    assert request_text(result).count("return x + 399") == 1
    assert [(e.id, e.reason, e.replaced_by) for e in result.manifest.excluded_items] == [
        ("e4", "duplicate", "e3")]
    other = [*_long_read_then_file_read()[:3],
             FileRead(path="a.py", content=LONG_SOURCE + "\n", revision="r1")]  # not the same text
    assert build(other, "anthropic", window=128_000, reserve=1_000).manifest.excluded_items == ()
    external = build(_long_read_then_file_read("external"), "anthropic", window=128_000, reserve=1_000)
    assert external.manifest.excluded_items == ()  # a less trusted copy does not stand in (DESIGN 7)


def test_a_live_run_finds_the_long_twin_its_replay_finds(sqlite_url: str) -> None:
    """A live run holds a long result's text lazily (its log position), a replay's fold inline:
    both find the same twin."""
    with open_store(sqlite_url) as store:
        run = store.run("r")
        run.append(*_long_read_then_file_read())
        built = run.preview("anthropic", window=128_000)
        assert built.body_bytes.decode().count("return x + 399") == 1
        assert built.manifest.excluded["duplicate"] == 1


def test_a_copy_of_a_copy_the_conversation_holds_names_the_fragment_in_the_request() -> None:
    """The seed (5.2): the same fact in a user input, a memory and a retrieved page is sent once,
    and the manifest records what replaced what. The page lost to the (more trusted) memory, and
    the memory to the user input: the page's line named the memory, which is not in the request
    either, with no word of it, so ``why`` and an auditor read that the model saw the memory's copy."""
    fact = "The API rate limit is 100 requests per minute per key."
    events: list[AnyEvent] = [UserInput(fact),
                              MemoryRecalled(memory_id="m1", content=fact, source_ref="memory://m1"),
                              EvidenceRetrieved(content=fact, source_ref="https://docs/x", source_kind="web"),
                              UserInput("ok?")]
    result = build(events, "anthropic", window=16_000, reserve=1_000)
    assert request_text(result).count("100 requests per minute") == 1
    kept = {f.id for f in result.manifest.fragments}
    lines = {e.id: e for e in result.manifest.excluded_items}
    assert set(lines) == {"e2", "e3"}
    assert all(line.reason == "duplicate" and line.replaced_by in kept for line in lines.values())
    assert lines["e3"].replaced_by == "e1"
    assert "e2" in lines["e3"].detail  # the copy it lost to first is still named


def test_a_copy_whose_kept_copy_is_left_out_for_room_says_so() -> None:
    """The page lost to the memory of the same text before selection, and the memory then did not
    fit: the page's line named the memory with no word that the model saw neither."""
    fact = "The API rate limit is 100 requests per minute per key. " * 150
    events: list[AnyEvent] = [UserInput("q"), MemoryRecalled(memory_id="m1", content=fact, source_ref="memory://m1"),
                              EvidenceRetrieved(content=fact, source_ref="https://docs/x", source_kind="web")]
    for k in range(30):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"d{k}", name="other"),)),
                   ToolResult(call_id=f"d{k}", content=" ".join(f"filler{k}_{j}" for j in range(60)))]
    events.append(UserInput("go"))
    result = build(events, "openai-chat", window=2_000, reserve=200)
    lines = {e.id: e for e in result.manifest.excluded_items}
    assert lines["e2"].reason == "low_priority"
    assert (lines["e3"].reason, lines["e3"].replaced_by) == ("duplicate", "e2")
    assert lines["e3"].detail.startswith("the copy e2 is not in this request either: low_priority")
    wide = build(events, "openai-chat", window=16_000, reserve=200)  # e2 sent: the line as it was
    assert [(e.id, e.reason, e.replaced_by, e.detail) for e in wide.manifest.excluded_items
            if e.id in ("e2", "e3")] == [("e3", "duplicate", "e2", "")]
