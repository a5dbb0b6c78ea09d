"""For each registered tool, the turn of the newest user input relevant to it (its recency).

Why: tools are layer 2, the start of every provider's cached prefix (DESIGN.md section 4), and a
build exposes the tools relevant to the goal, the plan and the *newest* input. Each short reply
("yes", "my reservation id is ...") matches other tools, so on tau-bench's airline traces the
declared set swung turn to turn (5, 8, 1, 9, 2 tools) and 293 of 531 turns restarted the cache.
A tool relevant to an earlier input fills a spare slot of the cap (``tool_exposure`` rule 5,
``recent``), most recent first, LRU-style; this module says which tools and how recent.

"Relevant to an input" is: the input's text shares a term with the tool's BM25 document. Under
the Lucene idf every term's weight is positive, so that is exactly a BM25 score above 0, whatever
the registry's idf: an input is looked at once, when it appears, and its answer never changes
while the registry stays. Inputs are scored by their text alone (the goal and the current plan
steps are in the current query anyway). Every user input counts, a hand-off's task too, shown
or hidden by a summary, as :func:`tool_query.newest_user_item` counts them.

A tool's recency is the *turn* of that input: the first build that saw it, one more than the
model responses before it (each response is one timeline item, a tool group or a reply). Two
inputs of one turn reached the model together: the tools they match are equally recent (ties
by name, in the exposure). Derived from the log alone, so a replay of any turn finds what the
live build found.

A registered tool the run *calls* is relevant to the input of the turn it was called in: its
recency is at least that turn (the build the call answered, one more than the responses before
it), so in an agent run of one task the tools called last are the most recent, as in an LRU.
Why: a called tool is declared with the groups that call it, so while they are kept it needs no
slot; but a small window cuts old groups, and a tool no input's words matched then left the list
(moving the cached prefix) although the conversation was plainly using it. As recent, it holds its
slot whether or not its calls are kept. The names the inputs' words matched are kept apart
(:func:`input_matches`): the fallback (``tool_exposure`` rule 7) waits for those only, or a
coding agent's first ``read_file`` call on "Login is broken, fix it" turned the first registered
tools, declared for "yes", into that one tool. What made a tool's turn its recency (an input of
that turn, a call in it, or both: :func:`recency_causes`) is kept too: the manifest, ``why`` and
``diff`` say which (:func:`recency_phrase`), or a tool the user never asked for read as "relevant
to the user's input".

Kept on ``state.memo`` with the count of timeline items it has looked at, as
``newest_user_item`` is: items are only ever added (a mask or a compaction replaces one in
place, at its position), so each build looks at the inputs added since. A registration (a new
tool, a changed schema, a replace) starts the walk over: a tool registered after an input that
named it is relevant to that input.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal, TypeAlias

from contextfold.domain.events import TextBlock, ToolSpec
from contextfold.projections.state import MessageItem, RunState
from contextfold.projections.timeline_items import ToolGroup
from contextfold.projections.tool_relevance import matching_tools

__all__ = ["RecencyCause", "input_matches", "recency_causes", "recency_phrase", "tool_recency"]

_MEMO = "tool-recency"

RecencyCause: TypeAlias = Literal["input", "call", "input and call"]


def _input_text(state: RunState, item: MessageItem) -> str:
    fragment = state.entries[item.fragment_id].fragment
    return "\n".join(b.text for b in fragment.content if isinstance(b, TextBlock))


def tool_recency(state: RunState) -> dict[str, int]:
    """Registered tool name -> the newest turn whose user input shares a term with the tool's
    BM25 document or in which the tool was called; a tool neither matched nor called is absent
    (see the module)."""
    return _walk(state)[0]


def input_matches(state: RunState) -> frozenset[str]:
    """The registered tools some user input's text shares a term with (calls aside)."""
    return _walk(state)[1]


def recency_causes(state: RunState) -> dict[str, RecencyCause]:
    """Registered tool name -> what made its :func:`tool_recency` turn: a user input of that turn
    shares a term with it (``input``), the run called it in that turn (``call``), or both."""
    return _walk(state)[2]


def recency_phrase(state: RunState, name: str, turn: int) -> str:
    """Why tool ``name`` is recent from ``turn``, in words: "relevant to the user's input of turn
    N", "called at turn N" or both (a turn not its recency's is said as an input's)."""
    cause = recency_causes(state).get(name) if tool_recency(state).get(name) == turn else None
    if cause == "call":
        return f"called at turn {turn}"
    if cause == "input and call":
        return f"relevant to the user's input of turn {turn} and called at turn {turn}"
    return f"relevant to the user's input of turn {turn}"


def _walk(state: RunState) -> tuple[dict[str, int], frozenset[str], dict[str, RecencyCause]]:
    specs: Sequence[ToolSpec] = tuple(state.tools.values())
    key = tuple(map(id, specs))
    hit = state.memo.get(_MEMO)
    items = state.items
    if isinstance(hit, tuple) and hit[0] == key and hit[2] <= len(items):
        _, _, seen, responses, recency, matched, causes = hit  # (the specs are held: their ids stay theirs)
    else:
        seen, responses, recency, matched, causes = 0, 0, {}, frozenset(), {}
    if seen == len(items):
        return recency, matched, causes
    recency, found, causes = dict(recency), set(matched), dict(causes)

    def note(name: str, turn: int, cause: RecencyCause) -> None:
        before = causes.get(name) if recency.get(name) == turn else None  # the same turn's other cause
        causes[name] = cause if before in (None, cause) else "input and call"
        recency[name] = turn
    new = list(itertools.islice(reversed(items), len(items) - seen))
    for pos in reversed(new):  # the oldest first: a newer input's turn overwrites an older one's
        item = items[pos]
        if isinstance(item, ToolGroup):
            responses += 1  # this response is the answer to the build of turn ``responses``
            for call in item.calls:
                if call.name in state.tools:
                    note(call.name, responses, "call")
        elif isinstance(item, MessageItem) and item.role == "assistant":
            responses += 1
        elif isinstance(item, MessageItem) and item.role == "user":
            for name in matching_tools(specs, _input_text(state, item)) if specs else ():
                note(name, responses + 1, "input")
                found.add(name)
    matched = frozenset(found)
    state.memo[_MEMO] = (key, specs, len(items), responses, recency, matched, causes)
    return recency, matched, causes
