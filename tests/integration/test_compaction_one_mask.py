"""One auto-compaction appends no two masks whose covers nest (``compaction_ladder.climb``).

Why: the ladder's mask steps keep fewer groups raw, one after the other (``recent_groups``, then
one). Each step was planned on the state the step before had left, so when both relieved the
pressure the build appended two masks at once, the second's cover holding the first's (a 6k
window: covers 1-108 and 1-115), each stubbing results the other did not: two records where one
mask planned on the state before the first says the same. A later mask step that relieves the
pressure now replaces the masks planned before it in the same compaction, as a summary step
replaces a summary. Two masks of one step, either side of the latest error, stay: a cover is
contiguous and that error's group stays raw between them (``compaction_cuts.mask_covers``).
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


def _nested(masks: list[HistoryCompacted]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """The pairs of ``masks`` whose covers overlap."""
    covers = [(m.covers_from, m.covers_to) for m in masks]
    return [(a, b) for i, a in enumerate(covers) for b in covers[i + 1:] if a[0] <= b[1] and b[0] <= a[1]]


def test_one_auto_compaction_appends_no_nested_masks(cf_store: Store) -> None:
    run = cf_store.run("one-mask")
    run.append(PolicySet(text="Never touch prod."), UserInput("Roll out release 7 to staging."))
    per_build: list[list[HistoryCompacted]] = []
    for t in range(1, 41):
        if t % 3 == 0:  # a failed deploy: the latest error's group is never masked
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"d{t}", name="deploy",
                                                          arguments='{"env": "staging"}'),)),
                       ToolResult(call_id=f"d{t}", content=f"Created deployment dep-{t:04d}\n"
                                  f"ERROR: health check timed out\n{LOG}", is_error=True, exit_code=1))
        else:
            pods = ToolCall(call_id=f"c{t}", name="shell", arguments='{"cmd": "kubectl get pods"}')
            run.append(ModelResponse(text=f"checking {t}", tool_calls=(pods,)),
                       ToolResult(call_id=f"c{t}", content=f"pods {t}\n{LOG}", exit_code=0))
        version = run.version
        text = joined_strings(build(run, "anthropic", window=6_000, reserve=1_000, strategy="mask").request)
        per_build.append([r.event for r in run.events()
                          if r.position > version and isinstance(r.event, HistoryCompacted)])
        assert f"dep-{t - t % 3:04d}" in text or t < 3  # the latest failed deploy's output, raw
    assert sum(map(len, per_build)) >= 10  # the run was masked, build after build
    nested = {t: _nested(masks) for t, masks in enumerate(per_build, 1) if _nested(masks)}
    assert not nested, nested
    for turn in range(2, run.next_turn()):
        assert run.replay(turn).ok, turn
