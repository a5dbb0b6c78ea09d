"""A SWE-agent run rebuilt from the log against what SWE-agent itself sent to the model.

One trace (``replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source``)
stores with each step the exact message list SWE-agent sent the model next
(``trajectory[i].messages``). The run is imported, and after each step the next OpenAI chat
request is built from the store alone, as a resumed runtime would, with a window that holds the
whole run. SWE-agent's history processor shows old observations as ``Old environment output:
(N lines omitted)``; every other message it sent must be in ours, in its order: the same roles,
the same call ids, names and arguments, the same assistant texts, and each observation's text
(ours inside its ``<data source=... trust=...>`` block).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, ToolResult
from contextfold.importers import parse
from tests.conftest import TRACES

pytestmark = pytest.mark.traces

TRAJ = (TRACES / "swe-agent-demos" / "trajectories" / "demonstrations"
        / "replay__marshmallow-code__marshmallow-1867__function_calling_replace_from_source"
        / "marshmallow-code__marshmallow-1867.traj")
_ELIDED = re.compile(r"Old environment output: \(\d+ lines omitted\)")


def _listed(value: Any) -> list[Any]:
    """SWE-agent stores some of these messages' lists as the Python repr of the list."""
    return list(ast.literal_eval(value) if isinstance(value, str) else value or [])


def _their_calls(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    calls = _listed(message.get("tool_calls"))
    return [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [])


@pytest.mark.skipif(not TRAJ.is_file(), reason=f"{TRAJ} is absent (set CONTEXTFOLD_TRACES)")
def test_each_request_rebuilt_from_the_store_holds_what_swe_agent_sent(tmp_path: Path) -> None:
    doc = json.loads(TRAJ.read_bytes())
    events = parse(TRAJ.read_bytes(), format="swe-agent", source=TRAJ.name)
    first_step = next(i for i, e in enumerate(events) if isinstance(e, ModelResponse))
    compared = elided = 0
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        run = store.run("swe")
        run.append(events[:first_step])
        for n, step in enumerate(doc["trajectory"]):
            response, result = events[first_step + 2 * n: first_step + 2 * n + 2]
            assert isinstance(response, ModelResponse) and isinstance(result, ToolResult)
            run.append([response, result])
            ours = run.build("openai-chat", window=128_000, reserve=8_000, record=False).request["messages"]
            theirs = step["messages"]
            assert [m["role"] for m in ours] == [m["role"] for m in theirs], f"step {n}"
            for mine, sent in zip(ours, theirs, strict=True):
                if sent["role"] == "assistant":
                    calls = [(c["id"], c["function"]["name"], c["function"]["arguments"])
                             for c in mine.get("tool_calls") or ()]
                    assert calls == _their_calls(sent), f"step {n}"
                    assert (mine["content"] or "") == _text(sent["content"]), f"step {n}"
                elif sent["role"] == "tool":
                    assert [mine["tool_call_id"]] == _listed(sent["tool_call_ids"]), f"step {n}"
                    if _ELIDED.fullmatch(_text(sent["content"])):
                        elided += 1
                        continue
                    assert _text(sent["content"]) in _text(mine["content"]), f"step {n}"
                else:
                    assert _text(sent["content"]) in _text(mine["content"]), f"step {n}"
                compared += 1
    assert len(doc["trajectory"]) == 13 and compared > 100 and elided > 0
