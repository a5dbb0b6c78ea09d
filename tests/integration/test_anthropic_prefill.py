"""Claude Opus and Sonnet 4.6 and later refuse a request that ends with an assistant message:

    400 This model does not support assistant message prefill. The conversation must end with a
    user message.

A run whose last event is the model's own answer (a build right after it, or a loop that asks the
model to go on after a reply cut off at its output limit) builds exactly that request. For those
models the build is a ``RenderError`` naming the rule, before anything is sent or recorded; older
models keep the prefill they accept.
"""

from __future__ import annotations

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import RenderError
from contextfold.domain.events import ModelResponse, UserInput
from contextfold.projections.render.protocol import refuses_prefill


@pytest.mark.parametrize(("model", "refused"), [
    ("claude-opus-4-6", True), ("claude-sonnet-4-6", True), ("claude-opus-4-7", True),
    ("claude-opus-5", True), ("claude-sonnet-4-6-20260301", True),
    ("anthropic.claude-opus-4-6-v1:0", True), ("claude-opus-4-6@20260205", True),
    ("claude-sonnet-4-5", False), ("claude-haiku-4-5-20251001", False),
    ("claude-opus-4-20250514", False), ("claude-opus-4-1-20250805", False),
    ("claude-3-5-sonnet-20241022", False), ("gpt-4o", False), (None, False),
])
def test_which_models_refuse_a_prefill(model: str | None, refused: bool) -> None:
    assert refuses_prefill(model) is refused


def test_a_run_ending_with_the_models_answer_is_refused_for_models_without_prefill(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        run = store.run("answered")
        run.append(UserInput("Summarise the failing test."), ModelResponse(text="The fixture is stale."))
        version = run.version
        with pytest.raises(RenderError, match="does not support assistant message prefill") as info:
            run.build("anthropic", model="claude-opus-4-6")
        assert "append the next user input" in str(info.value)
        assert run.version == version  # nothing recorded
        older = run.build("anthropic", model="claude-sonnet-4-5")  # a prefill, which it accepts
        assert older.request["messages"][-1]["role"] == "assistant"
        assert run.build("openai-chat", model="gpt-4o").request["messages"][-1]["role"] == "assistant"
        run.append(UserInput("Now fix it."))
        newer = run.build("anthropic", model="claude-opus-4-6")
        assert newer.request["messages"][-1]["role"] == "user"
