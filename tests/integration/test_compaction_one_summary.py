"""One auto-compaction appends at most one summary (``compaction_ladder.climb``).

Why: the ladder's summary steps keep fewer groups raw, one after the other (three, then one, then
one past the user's latest input). Each step was planned on the state the step before had left,
so when two of them relieved the pressure the build appended two summaries at once, the second
covering the first (a 6k window: positions 149 and 150, covering 1-138 and 1-142): a record in the
log that no build ever showed, and a summary of a summary made in the same breath. A later summary
step that relieves the pressure now replaces the one planned before it in the same compaction.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextfold.api import Store, open_store
from contextfold.compaction_api import build
from contextfold.domain.events import (
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)
from tests.json_strings import joined_strings

LOG = "\n".join(f"{i:04d} INFO rollout step ok" for i in range(150))


@pytest.fixture
def cf_store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def test_one_auto_compaction_appends_one_summary(cf_store: Store) -> None:
    run = cf_store.run("one-summary")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    deploys: list[str] = []
    per_build: list[list[HistoryCompacted]] = []
    for t in range(1, 41):
        if t == 10:
            run.append(UserInput("From now on keep at least two replicas up during every deploy."))
        if t % 3 == 0:  # a failed deploy that left a deployment behind
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"d{t}", name="deploy",
                                                          arguments='{"env": "staging"}'),)),
                       ToolResult(call_id=f"d{t}", content=f"Created deployment dep-{t:04d}\n"
                                  f"ERROR: health check timed out\n{LOG}", is_error=True, exit_code=1))
            deploys += [f"d{t}", f"dep-{t:04d}"]
        else:
            pods = ToolCall(call_id=f"c{t}", name="shell", arguments='{"cmd": "kubectl get pods"}')
            run.append(ModelResponse(text=f"checking {t}", tool_calls=(pods,)),
                       ToolResult(call_id=f"c{t}", content=f"pods {t}\n{LOG}", exit_code=0))
        version = run.version
        text = joined_strings(build(run, "anthropic", window=6_000, reserve=1_000).request)
        per_build.append([r.event for r in run.events()
                          if r.position > version and isinstance(r.event, HistoryCompacted)
                          and r.event.strategy == "summary"])
        assert all(i in text for i in deploys), (t, [i for i in deploys if i not in text])
    assert sum(map(len, per_build)) >= 3  # the run was compacted by summaries, more than once
    assert all(len(appended) <= 1 for appended in per_build), [
        (t, [(s.covers_from, s.covers_to) for s in appended])
        for t, appended in enumerate(per_build, 1) if len(appended) > 1]
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn
