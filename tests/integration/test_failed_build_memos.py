"""A build that fails part-way leaves nothing that changes the next build of the same run.

A runtime keeps one ``Run`` per run for the life of its process, and a build reads long tool
outputs back from the store while it lays the request out (``projections.entries``: a state keeps
only their log positions). A read that failed there (the database gone for a moment) left the
run's memo of laid-out messages half patched: the next build of that ``Run``, patching from it,
sent a request short of kept messages, while a fresh process sent them all. The ground truth is a
handle that never failed: the same request and manifest, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.errors import StoreUnavailableError
from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.projections.builder import BuildResult
from contextfold.projections.entries import LAZY_TEXT_CHARS


def _turn(i: int) -> list[AnyEvent]:
    log = f"line {i} of the worker's log: processed an item in 3 ms, ok\n"
    output = f"output {i}\n" + log * (2 * LAZY_TEXT_CHARS // len(log))  # read back when laid out
    return [UserInput(f"step {i}"),
            ModelResponse(text=f"running step {i}", tool_calls=(
                ToolCall(call_id=f"c{i}", name="sh", arguments=f'{{"step": {i}}}'),)),
            ToolResult(call_id=f"c{i}", content=output),
            ModelResponse(text=f"step {i} done")]


def _build(run: Run) -> BuildResult:
    return run.build("anthropic", window=8_000, reserve=1_000, record=False)


def _reads_failing_at(store: Store, failing: int) -> Callable[[], None]:
    """The store's reads of event texts, the ``failing``-th of them raising as an outage would;
    returns what puts the real reads back."""
    real = store.events.event_text
    reads = [0]

    def read(run_id: str, position: int) -> str:
        reads[0] += 1
        if reads[0] == failing:
            raise StoreUnavailableError("the database did not answer (staged)")
        return real(run_id, position)

    store.events.event_text = read  # type: ignore[method-assign]

    def restore() -> None:
        store.events.event_text = real  # type: ignore[method-assign]
    return restore


@pytest.mark.parametrize("failing", [1, 2, 3])
def test_the_build_after_a_failed_read_sends_what_a_fresh_process_sends(store_url: str, failing: int) -> None:
    with open_store(store_url) as store:
        run = store.run("r")
        for i in range(8):
            run.append(_turn(i))
        _build(run)  # the texts are scanned for secrets now: the next handle reads them in layout
    with open_store(store_url) as store, open_store(store_url) as fresh:
        run = store.run("r")
        restore = _reads_failing_at(store, failing)
        with pytest.raises(StoreUnavailableError):
            _build(run)
        restore()
        after = _build(run)
        want = _build(fresh.run("r"))
        assert len(after.request["messages"]) == len(want.request["messages"])
        assert after.body_bytes == want.body_bytes
        assert after.manifest == want.manifest
