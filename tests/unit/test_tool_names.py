"""The alias an unregistered tool is shown under where its provider refuses its name."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextfold.projections.render.protocol import refused_tool_names
from contextfold.projections.tool_names import MAX_SPEC_NAME, refuses_tool_name, tool_name_alias

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini")


@given(st.text(max_size=300))
def test_every_provider_takes_the_alias_and_it_is_the_same_for_the_same_name(name: str) -> None:
    alias = tool_name_alias(name)
    assert refused_tool_names([alias]) == {}  # the request check's own rules, for every provider
    assert not any(refuses_tool_name(p, alias) for p in (*PROVIDERS, "neutral"))
    assert alias == tool_name_alias(name)


def test_the_alias_reads_like_the_name_and_avoids_the_runs_other_names() -> None:
    assert tool_name_alias("multi_tool_use.parallel") == "multi_tool_use_parallel_28646f31"
    assert tool_name_alias("9lives").startswith("t_9lives_")  # Gemini: a letter or _ first
    assert len(tool_name_alias("x" * 5_000)) <= 64
    taken = {tool_name_alias("a.b")}
    other = tool_name_alias("a.b", taken)
    assert other not in taken and other.startswith("a_b_") and other == tool_name_alias("a.b", taken)
    assert tool_name_alias("a.b") != tool_name_alias("a b")  # one stem, two names: the digest differs


def test_which_names_a_provider_refuses() -> None:
    assert [p for p in PROVIDERS if refuses_tool_name(p, "functions.search")] == ["openai-chat",
                                                                                  "openai-responses",
                                                                                  "anthropic"]
    assert [p for p in PROVIDERS if refuses_tool_name(p, "x" * 100)] == ["openai-chat", "openai-responses"]
    assert not refuses_tool_name("neutral", "a b") and not refuses_tool_name("neutral", "x" * MAX_SPEC_NAME)
    assert refuses_tool_name("neutral", "x" * (MAX_SPEC_NAME + 1))  # no ToolSpec holds it
