"""A user input marked required is a constraint that must survive every build: never cut."""

from __future__ import annotations

import pytest

from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.domain.events import AnyEvent, UserInput
from tests.unit.test_builder import build, request_text

RULES = "\n".join(f"Rule {i}: never touch the file legacy_{i}.py without a ticket." for i in range(1, 801))


def test_a_required_constraint_input_over_the_budget_is_the_typed_error_not_a_silent_cut() -> None:
    """610 of its 800 rules were cut away (the manifest said "truncated"), where a policy of the
    same size raised the error the seed asks for ("required fragment over budget: explicit error")."""
    events: list[AnyEvent] = [UserInput(RULES, required=True), UserInput("go")]
    with pytest.raises(RequiredContextExceedsBudgetError) as info:
        build(events, "openai-chat", window=3_000, reserve=500)
    sizes = dict(info.value.required)
    assert sizes["e1"] > 10_000  # its whole size: nothing of it is given up
    roomy = build(events, "openai-chat", window=20_000, reserve=500)
    line = next(f for f in roomy.manifest.fragments if f.id == "e1")
    assert line.required and not line.truncated and "Rule 400:" in request_text(roomy)


def test_the_current_input_marked_required_is_never_cut_over_the_budget_the_typed_error() -> None:
    """A current input marked required was cut (a 5,001-token one went out as 2,980 tokens) where
    the README says a user input marked required is never cut, over the budget the typed error."""
    with pytest.raises(RequiredContextExceedsBudgetError) as info:
        build([UserInput(RULES, required=True)], "openai-chat", window=3_000, reserve=500)
    assert dict(info.value.required)["e1"] > 10_000
    roomy = build([UserInput(RULES, required=True)], "openai-chat", window=20_000, reserve=500)
    line = next(f for f in roomy.manifest.fragments if f.id == "e1")
    assert line.required and not line.truncated and "Rule 400:" in request_text(roomy)


def test_an_unmarked_current_input_is_cut_before_anything_of_it_is_lost() -> None:
    result = build([UserInput(RULES)], "openai-chat", window=3_000, reserve=500)
    line = next(f for f in result.manifest.fragments if f.id == "e1")
    assert line.truncated and "Rule 1:" in request_text(result) and "Rule 800:" in request_text(result)
