"""A tool call's arguments reach the log as the trace spelled their numbers.

Found by the hostile-input hunt: three importers (Anthropic ``tool_use.input``, Gemini
``functionCall.args``, an OpenAI Responses item's ``action``/``input`` object) read the call's
input as a parsed object and wrote it back with ``json.dumps``: ``1e400`` became ``Infinity``
(not JSON), a decimal longer than a double holds was rounded (``0.10000000000000000001`` became
``0.1``), so the call in the log was not the call the model made. Arguments the trace holds as a
JSON string were, and are, kept as given.
"""

from __future__ import annotations

import json
import math

from contextfold.domain.events import ModelResponse
from contextfold.importers import parse
from contextfold.importers._json import load

# the trace's spelling: a number past a double's range, one longer than a double holds, plain ones
RAW = '{"big": 1e400, "long": 0.10000000000000000001, "plain": 1.5, "n": 7, "s": "\\u00e9"}'
KEPT = '{"big":1e400,"long":0.10000000000000000001,"plain":1.5,"n":7,"s":"\u00e9"}'


def _calls(trace: str, format: str) -> list[str]:
    events = parse(trace.encode(), format=format)
    return [c.arguments for e in events if isinstance(e, ModelResponse) for c in e.tool_calls]


def test_anthropic_tool_use_input_keeps_its_numbers() -> None:
    trace = ('{"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": ['
             '{"type": "tool_use", "id": "t1", "name": "f", "input": ' + RAW + '},'
             '{"type": "tool_use", "id": "t2", "name": "g", "input": "{\\"x\\": 1E5}"}]}]}')
    assert _calls(trace, "anthropic") == [KEPT, '{"x": 1E5}']


def test_gemini_function_call_args_keep_their_numbers() -> None:
    trace = ('{"contents": [{"role": "user", "parts": [{"text": "go"}]}, {"role": "model", "parts": ['
             '{"functionCall": {"id": "c1", "name": "f", "args": ' + RAW + '}},'
             '{"functionCall": {"id": "c2", "name": "g", "args": "{\\"x\\": 1E5}"}}]}]}')
    # args a trace holds as JSON text are kept as given, as the other importers keep them
    assert _calls(trace, "gemini") == [KEPT, '{"x": 1E5}']


def test_openai_responses_object_arguments_keep_their_numbers() -> None:
    trace = ('{"input": [{"role": "user", "content": "go"},'
             '{"type": "computer_call", "call_id": "c1", "action": ' + RAW + '},'
             '{"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{\\"x\\": 1E5}"}]}')
    assert _calls(trace, "openai-responses") == [KEPT, '{"x": 1E5}']


def test_openai_chat_parsed_arguments_keep_their_numbers() -> None:
    trace = ('[{"role": "user", "content": "go"}, {"role": "assistant", "content": null, "tool_calls": ['
             '{"id": "c1", "type": "function", "function": {"name": "f", "arguments": ' + RAW + '}}]}]')
    assert _calls(trace, "openai-chat") == [KEPT]


def test_a_number_spelled_otherwise_but_held_exactly_is_written_as_before() -> None:
    """Only a number ``json.dumps`` would write as another is kept as spelled: ``1E5``, ``1.50`` and
    ``1e-7`` are written ``100000.0``, ``1.5`` and ``1e-07``, as before: the same numbers."""
    trace = ('{"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": ['
             '{"type": "tool_use", "id": "t1", "name": "f", '
             '"input": {"a": 1E5, "b": 1.50, "c": [-0.0], "d": 1e-7, "e": 0.30, "f": 123.456e-5}}]}]}')
    assert _calls(trace, "anthropic") == [
        '{"a":100000.0,"b":1.5,"c":[-0.0],"d":1e-07,"e":0.3,"f":0.00123456}']


def test_the_parsed_value_still_reads_as_the_float_it_is() -> None:
    """The rest of an import (settings, schemas, tool outputs) sees the same float as before."""
    value = load(RAW.encode(), "t.json").value
    assert math.isinf(value["big"]) and value["long"] == 0.1 and type(value["plain"]) is float
    assert json.loads(KEPT)["long"] == value["long"]
