"""What a provider response reads to, and what goes back to it, is what the model said, in its order.

Each test reads a response shaped as the official SDK types hold it (the REST JSON and the SDK
object read the same: ``test_read_response``) and checks what is recorded or rendered.
"""

from __future__ import annotations

import copy
from typing import Any

import contextfold
from tests.unit.test_read_response import GEMINI, sdk_object


def _gemini_without_ids(response_id: str | None, path: str) -> dict[str, Any]:
    body = copy.deepcopy(GEMINI)
    for part in body["candidates"][0]["content"]["parts"][1:]:
        del part["functionCall"]["id"]
    body["candidates"][0]["content"]["parts"][1]["functionCall"]["args"] = {"path": path}
    if response_id is None:
        del body["responseId"]
    else:
        body["responseId"] = response_id
    return body


def test_gemini_calls_without_ids_of_two_responses_have_two_ids() -> None:
    """Gemini before 3 names no call: every live response's calls were ``gemini-0-<part>``, so the
    second response's calls took the first's ids. They are named after the ``responseId``; a
    response without one after what it says; either way the same on a re-read."""
    first, second = _gemini_without_ids("resp-A", "a.py"), _gemini_without_ids("resp-B", "a.py")
    ids = [[c.call_id for c in contextfold.read_response("gemini", body).calls] for body in (first, second)]
    assert ids == [["gemini-resp-A-1", "gemini-resp-A-2"], ["gemini-resp-B-1", "gemini-resp-B-2"]]
    assert [c.call_id for c in contextfold.read_response("gemini", sdk_object("gemini", second)).calls] == ids[1]
    anonymous = [_gemini_without_ids(None, path) for path in ("a.py", "c.py")]
    read = [[c.call_id for c in contextfold.read_response("gemini", body).calls] for body in anonymous]
    assert read[0] != read[1] and not set(read[0]) & set(read[1])
    assert read[0] == [c.call_id for c in contextfold.read_response("gemini", anonymous[0]).calls]
    assert all(i.startswith("gemini-r") for i in read[0])
