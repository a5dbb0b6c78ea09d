"""What a build's tools are ranked against: the goal, the current plan steps and the newest user
input (:func:`tool_query`), and that input (:func:`newest_user_item`, kept on the state).

Apart from :mod:`~contextfold.projections.tool_candidates` (which re-exports both) because the
query is the run's, not the build's: it changes only with a new goal, plan step or input, and
``tool_recency`` counts the inputs as :func:`newest_user_item` does.
"""

from __future__ import annotations

import itertools

from contextfold.domain.events import TextBlock
from contextfold.projections.plan_view import current_steps
from contextfold.projections.state import MessageItem, RunState

__all__ = ["newest_user_item", "tool_query"]


def tool_query(state: RunState) -> str:
    """What tools are ranked against: the goal, the current plan steps and the newest user input
    (a hand-off's task is one: the request's current input), shown or hidden by a summary.

    Why hidden ones too: an agent run whose task is its only input is summarized with the input
    covered (``plan_compactions``), and ranked against the latest *visible* input the query was
    then empty: the tool the task needs left the request and the first registered tools filled
    the cap. The summary carries the task on (its goal, the user's quoted words), so the tools
    are ranked against it as before. A newer input, shown, is the newest either way."""
    parts: list[str] = []
    if state.goal is not None:
        parts.append(state.goal.goal)
    if state.plan is not None:
        parts += [s.title for s in current_steps(state.plan)]
    newest = newest_user_item(state)
    if newest is not None:
        f = state.entries[newest.fragment_id].fragment
        parts += [b.text for b in f.content if isinstance(b, TextBlock)]
    return "\n".join(parts)


def newest_user_item(state: RunState) -> MessageItem | None:
    """The newest user input of the run (a user's or a hand-off's task), whether a summary hides
    it or not; None when there is none.

    Kept on the state with the count of timeline items it has looked at: items are only ever
    added (a mask replaces one in place, at its own position), so each build looks at the ones
    added since, not back through a long agent run's tool groups to its one task."""
    hit = state.memo.get("newest-user")
    seen, found = hit if isinstance(hit, tuple) else (0, None)
    items = state.items
    if len(items) != seen:
        if len(items) < seen:  # (another state's answer: not reached, a state's items only grow)
            seen, found = 0, None
        for pos in itertools.islice(reversed(items), len(items) - seen):  # the newest first
            item = items[pos]
            if isinstance(item, MessageItem) and item.role == "user":
                found = pos
                break
        state.memo["newest-user"] = (len(items), found)
    if found is None:
        return None
    item = state.items[found]
    return item if isinstance(item, MessageItem) else None
