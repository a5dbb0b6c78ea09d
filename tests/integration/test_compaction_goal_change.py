"""A summary is shown against the goal, policies and plan in force at the build, not at its fold
(``fold_compaction.refresh_summaries``).

Why: a summary's text leaves out what the request shows raw beside it (the goal in force, a
policy in force; ``summary_shown``), and that text was fixed when the compaction was folded. On a
deploy agent's run whose goal changed after a summary, every later request stated the new goal
only: the summary still left out the goal the summarized history worked towards and cited its
"goal set at event N" line "in force when summarized", so the old goal's words were in no request
until the next summary quoted it again (at a 6k window, turns 40 to 49 of 60). A superseded policy
went the same way. An older goal or policy, shown nowhere else, is quoted (the seed, 5.3: a
summary keeps its goal; ``summary_shown``'s own rule).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextfold.api import Store, open_store
from contextfold.compaction_api import build
from contextfold.domain.events import GoalSet, HistoryCompacted, PolicySet, UserInput
from tests.integration.test_compaction_past_input import _agent_turn
from tests.json_strings import joined_strings

OLD = "Roll out release 7 to the staging cluster with every health check green"
NEW = "Roll back staging to release 6 and keep it there"
OLD_POLICY = "Never touch prod."
NEW_POLICY = "Prod deploys need the on-call engineer's approval."


@pytest.fixture
def cf_store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def test_a_summary_quotes_the_goal_it_left_out_once_a_newer_one_is_set(cf_store: Store) -> None:
    run = cf_store.run("goal-change")
    run.append(PolicySet(text=OLD_POLICY, source_ref="policy://deploy"),
               GoalSet(goal=OLD, success_contract=("staging healthy",)),
               UserInput("Roll out release 7 to staging."))
    changed_with_summary = 0
    for t in range(1, 61):
        if t == 40:
            run.append(GoalSet(goal=NEW), PolicySet(text=NEW_POLICY, source_ref="policy://deploy"))
        _agent_turn(run, t)
        text = " ".join(joined_strings(build(run, "anthropic", window=6_000, reserve=1_000).request).split())
        summarized = any(isinstance(r.event, HistoryCompacted) and r.event.strategy == "summary"
                         for r in run.events())
        if t < 40:  # the goal and policy in force: said once, where the request states them
            assert text.count(OLD) == 1 and text.count(OLD_POLICY) == 1, t
            continue
        assert text.count(NEW) == 1 and NEW_POLICY in text, t
        if summarized:  # the old goal and policy, quoted by the summary of the history under them
            changed_with_summary += 1
            assert OLD in text and OLD_POLICY in text, t
            assert "staging healthy" in text, t  # the old goal's contract
            assert "goal set at event 2 (the current goal" not in text, t
    assert changed_with_summary == 21  # a summary was shown from the goal change on
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn
