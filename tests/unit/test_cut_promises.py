"""The cut's promises on the texts that broke them: a failing log keeps its tail once any grant
did, a JSON result stays JSON whatever its exit code, no cut leaves a code fence open (files and
logs too), and text that looks like JSON but does not parse keeps words, not a bare marker."""

from __future__ import annotations

import json

import pytest

from contextfold.api import render_request
from contextfold.domain.conversation import DataPart, ToolResults
from contextfold.domain.events import AnyEvent, FileRead, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.code_fences import fence_states
from contextfold.projections.diagnose import lean_log
from contextfold.projections.fold import fold
from contextfold.projections.render.data_blocks import neutralise
from contextfold.projections.truncate import truncate
from tests.counters import cl100k

LOG = "\n".join([*(f"INFO step {i} fine" for i in range(1500)),
                 "Traceback (most recent call last):", '  File "x.py", line 3, in <module>', "    foo()",
                 "ZeroDivisionError: division by zero",
                 *(f"INFO step {i} fine" for i in range(1500, 3000)), "FINAL TAIL LINE"])


def test_a_failing_logs_tail_is_kept_at_every_grant_from_the_first_that_kept_it() -> None:
    """With the richest header first, a grant that fitted it kept no line, while a smaller one
    had kept the last line under a leaner header."""
    kept = [("FINAL TAIL LINE" in lean_log(LOG, 3, grant, cl100k).text, grant) for grant in range(30, 200)]
    first = next(grant for tail, grant in kept if tail)
    assert all(tail for tail, grant in kept if grant >= first)
    assert first < 60  # a lean header with the tail fits long before the richest does
    rich = lean_log(LOG, 3, 199, cl100k).text
    assert "ZeroDivisionError" in rich and "exit code: 3" in rich and rich.endswith("[full log: not stored]")


def _build(events: list[AnyEvent], window: int, provider: str = "neutral") -> BuildResult:
    recorded = [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]
    return build_context(fold(recorded), BuildConfig(provider=provider, window=window, reserve=200),
                         render=render_request)


def _result_text(result: BuildResult) -> str:
    return next(p.text for m in result.conversation.messages if isinstance(m, ToolResults)
                for r in m.results for p in r.content if isinstance(p, DataPart))


@pytest.mark.parametrize("exit_code", [None, 0, 2])
def test_a_json_result_stays_json_whatever_its_exit_code(exit_code: int | None) -> None:
    doc = json.dumps({"items": [{"id": i, "name": f"item {i}", "desc": "x" * 50} for i in range(400)]},
                     indent=2)
    events: list[AnyEvent] = [
        UserInput("list them"),
        ModelResponse(tool_calls=[ToolCall(call_id="c1", name="api", arguments="{}")]),
        ToolResult(call_id="c1", content=doc, exit_code=exit_code, is_error=exit_code == 2)]
    built = _build(events, 1500)
    (cut,) = built.manifest.truncations
    assert cut.strategy == "json"
    json.loads(_result_text(built))


@pytest.mark.parametrize("doc", [json.dumps("\U0001F600abc" * 5000), json.dumps("word " * 5000),
                                 json.dumps("line\n" * 3000),
                                 json.dumps("\U0001F600abc" * 5000, ensure_ascii=False)])
@pytest.mark.parametrize("exit_code", [None, 1])
def test_a_json_document_that_is_one_string_stays_json(doc: str, exit_code: int | None) -> None:
    """A result whose JSON value is a string was cut as words: the kept text ended inside a
    ``\\uXXXX`` escape or held a raw line break and the marker, and no longer parsed."""
    events: list[AnyEvent] = [
        UserInput("fetch it"),
        ModelResponse(tool_calls=[ToolCall(call_id="c1", name="api", arguments="{}")]),
        ToolResult(call_id="c1", content=doc, exit_code=exit_code, is_error=exit_code == 1)]
    for window in (600, 900, 1500):
        built = _build(events, window, "openai-chat")
        (cut,) = built.manifest.truncations
        assert cut.strategy == "json", window
        assert isinstance(json.loads(_result_text(built)), str), window


FENCED = "\n".join(["# Title", *(f"Prose line {i}." for i in range(5)), "```python",
                    *(f"x_{i} = compute({i})" for i in range(1000)), "```",
                    *(f"Prose line {i} after." for i in range(100))])


def _fence_closed(text: str) -> bool:
    return fence_states(text.split("\n"))[-1] is None


def test_a_file_cut_inside_a_fence_closes_it() -> None:
    cut = truncate(FENCED, 400, kind="file", count=cl100k)
    assert cut.truncated and _fence_closed(cut.text)
    events: list[AnyEvent] = [UserInput("read the readme"),
                              FileRead(path="README.md", content=FENCED), UserInput("and?")]
    built = _build(events, 1000)
    (part,) = [p for m in built.conversation.messages for p in getattr(m, "parts", ())
               if isinstance(p, DataPart)]
    assert part.truncated and _fence_closed(part.text)


def test_a_log_cut_inside_a_fence_closes_it() -> None:
    log = "\n".join(["build log", "```", *(f"step {i} ok" for i in range(1000)), "```", "exit 1"])
    cut = lean_log(log, 1, 300, cl100k)
    assert cut.strategy == "lean_log" and _fence_closed(cut.text)
    marker = next(line for line in cut.text.split("\n") if "lines omitted" in line)
    assert cut.text.split("\n")[cut.text.split("\n").index(marker) - 1] == "```"  # closed before it


def test_text_that_looks_like_json_but_does_not_parse_keeps_words() -> None:
    text = '{"results": [' + ", ".join(f'{{"id": {i}, "body": "lorem ipsum dolor"}}' for i in range(3000))
    cut = truncate(text, 500, kind="json", count=cl100k)
    assert cut.strategy == "words"
    assert cl100k(cut.text) <= 500 and len(cut.text) > 500


def test_json_nested_past_the_parser_keeps_a_head_that_is_json() -> None:
    """It kept words too: a run of opening brackets and one of closing ones, not JSON."""
    text = "[" * 3000 + "]" * 3000
    cut = truncate(text, 500, kind="json", count=cl100k)
    assert cut.strategy == "json" and cl100k(cut.text) <= 500 and len(cut.text) > 500
    depth = len(cut.text) - len(cut.text.lstrip("["))
    assert cut.text == "[" * depth + f'"… {len(text) - depth} characters omitted"' + "]" * depth


@pytest.mark.parametrize("first", ["# settings", "[tool.settings]", "{"])
def test_a_file_excerpt_that_looks_like_json_keeps_the_files_line_numbers(first: str) -> None:
    """An excerpt starting with "[" or "{" was tried as JSON, failed to parse and was cut by lines
    numbered from 1: its marker named lines 112–1889 of a read of lines 1001-3000."""
    content = "\n".join([first, *(f'key_{i} = "value number {i}"' for i in range(1, 2000))]) + "\n"
    events: list[AnyEvent] = [UserInput("check the config"),
                              FileRead(path="conf/app.toml", content=content, start_line=1001, end_line=3000)]
    built = _build(events, 1500)
    (cut,) = built.manifest.truncations
    head, tail = cut.kept.removeprefix("lines ").split(", ")
    assert head.startswith("1001-") and tail.endswith("-3000")
    assert f"lines {int(head.split('-')[1]) + 1}–" in _file_text(built)


def _file_text(result: BuildResult) -> str:
    return next(p.text for m in result.conversation.messages for p in getattr(m, "parts", ())
                if isinstance(p, DataPart))


def _api_result(doc: str) -> list[AnyEvent]:
    return [UserInput("fetch it"),
            ModelResponse(tool_calls=[ToolCall(call_id="c1", name="api", arguments="{}")]),
            ToolResult(call_id="c1", content=doc)]


def test_json_whose_compact_form_fits_is_not_marked_truncated() -> None:
    """Shown whole, compacted (strategy "none"), it was marked truncated in its block and the
    manifest: the model was told data was missing when none was. Nor is it among the manifest's
    truncations: auto-compaction read that record as a cut, and masked the result it had sent."""
    pretty = json.dumps({"items": [{"id": i, "name": f"n{i}"} for i in range(150)]}, indent=4)
    built = _build(_api_result(pretty), 2500)
    assert built.manifest.truncations == () and json.loads(_result_text(built)) == json.loads(pretty)
    (part,) = [p for m in built.conversation.messages if isinstance(m, ToolResults)
               for r in m.results for p in r.content if isinstance(p, DataPart)]
    assert not part.truncated
    (line,) = [f for f in built.manifest.fragments if f.kind == "tool_result"]
    assert not line.truncated and "nothing omitted" in line.selection_reason
    assert line.original_tokens is not None and line.tokens < line.original_tokens


def test_a_json_document_that_is_one_string_records_the_characters_it_kept() -> None:
    """Its head was shown, but the record said "marker only"."""
    built = _build(_api_result(json.dumps("word " * 30000)), 2500)
    (cut,) = built.manifest.truncations
    kept = len(json.loads(_result_text(built)).split("…")[0])
    assert cut.strategy == "json" and cut.kept == f"chars 1-{kept}"


def test_a_cut_that_makes_a_role_line_is_fitted_by_its_neutralised_count() -> None:
    """The text needed no neutralising, but its cut's tail line started at "system: beta", which
    the renderer marks "[data] ": the block shown was 2 tokens over its manifest line."""
    events = _api_result(" ".join(["alpha system: beta"] * 6000))
    built = _build(events, 713, "openai-chat")
    (cut,) = built.manifest.truncations
    shown = neutralise(_result_text(built))
    (line,) = [f for f in built.manifest.fragments if f.id == cut.id]
    assert cut.strategy == "words" and cl100k(shown) == cut.tokens == line.tokens


def test_a_character_excerpt_cut_inside_a_fence_closes_it() -> None:
    """The words cut ended its head inside a fence and nothing closed it: the rest of the block
    (the tail, a log's "[full log: …]" line) read as code."""
    report = ("Lint report\n```\n" + "const a=1;" * 6000 + "\n```\n"
              + "error: " + " ".join(f'{{"rule":"no-unused","line":{i}}}' for i in range(3000)))
    cut = lean_log(report, 1, 2000, cl100k)
    assert cut.unit == "char" and _fence_closed(cut.text)
    marker = next(line for line in cut.text.split("\n") if "characters omitted" in line)
    assert cut.text.split("\n")[cut.text.split("\n").index(marker) - 1] == "```"  # closed before it


def test_a_toml_excerpt_with_one_long_line_is_cut_as_a_file_whole_lines_first() -> None:
    """A file text starting with "[" went the JSON way and, not parsing, fell back to the text rule
    (words when they keep more characters): the excerpt of lines 1001-1004 was cut by characters
    numbered from 1, where the file rule keeps whole lines, by the file's numbers."""
    content = ('[tool.poetry]\nname = "x"\ndescription = "' + "a very long description " * 200
               + '"\nversion = "1.0"\n')
    events: list[AnyEvent] = [UserInput("check the config"), FileRead(
        path="pyproject.toml", content=content, start_line=1001, end_line=1004)]
    built = _build(events, 500)
    (cut,) = built.manifest.truncations
    assert cut.strategy == "lines" and cut.kept.startswith("lines 1001-")
