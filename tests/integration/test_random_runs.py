"""Random agent runs through the stored API: what a runtime does, in any order, must leave every
recorded turn replayable and every preview equal to the build that follows it.

Why beside the pure property tests (``tests/unit/test_fold_properties.py``): those fold generated
logs; these go through a real store with what only the API does -- live builds that append
recovery events, previews that must not, compactions and automatic compaction, rebuilds of turns
with and without records, reported usage that later budgets calibrate to, hand-offs, five providers
and several windows. A search of this kind (200 seeds of 250-300 steps on SQLite and PostgreSQL)
found the empty-request message; these seeds keep the promises checked in every run of the suite.
To search wider with the same runtime:
``CONTEXTFOLD_RANDOM_SEEDS=200 CONTEXTFOLD_RANDOM_STEPS=300 pytest tests/integration/test_random_runs.py``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import pytest

from contextfold.api import Run, open_store
from contextfold.domain.errors import InvalidInputError, RenderError, RequiredContextExceedsBudgetError
from contextfold.domain.events import (
    EvidenceRetrieved,
    FileRead,
    GoalSet,
    HandOff,
    MemoryRecalled,
    ModelResponse,
    PlanStep,
    PlanUpdated,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)

PROVIDERS = ("neutral", "openai-chat", "openai-responses", "anthropic", "gemini")
WINDOWS = (1_500, 4_000, 16_000, 128_000)
WORDS = ('alpha', 'beta', 'error:', 'FAILED', 'Traceback', '```python', 'def', 'x():', '```',
         '{"a": [1, {"b": 3}]}', 'é', '日本', '😀', '\n')
ARGUMENTS = ('{}', '{"q": "x"}', '{bad', '[1]', '{"big": "' + "y" * 500 + '"}')
MADE_UP_NAMES = ("unknown", "multi_tool_use.parallel", "x" * 200)
"""Tools a model calls that no runtime registered: one every API takes, one OpenAI and Anthropic
refuse, one too long for any (each shown under an alias where refused: ``tool_names``)."""
STEPS = int(os.environ.get("CONTEXTFOLD_RANDOM_STEPS", "150"))
SEEDS = int(os.environ.get("CONTEXTFOLD_RANDOM_SEEDS", "6"))
T = TypeVar("T")


def _text(rng: random.Random, words: int | None = None) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words or rng.choice((1, 5, 50, 400, 3000))))


def _allowed(action: Callable[[], T]) -> T | None:
    """``action()``, or None for the two refusals a random run may earn: required content over a
    small window, and a request with no message yet (a run of only system content)."""
    try:
        return action()
    except RequiredContextExceedsBudgetError:
        return None
    except RenderError as exc:
        if "at least one" not in str(exc):
            raise
        return None


class Agent:
    """A random runtime driving one run: inputs, responses with parallel and malformed calls,
    results in any order or never, evidence, plans, compactions, builds and previews."""

    def __init__(self, run: Run, seed: int) -> None:
        self.run, self.rng, self.calls = run, random.Random(seed), 0
        self.open: list[str] = []  # calls not answered yet
        self.tools = [f"t{i}" for i in range(self.rng.choice((1, 3, 30)))]
        run.append(PolicySet(text="be careful", pinned_tools=(self.tools[0],),
                             denied_tools=(self.tools[-1],) if self.rng.random() < 0.3 else ()),
                   ToolsRegistered(tools=tuple(ToolSpec(name=t, description=_text(self.rng, 5))
                                               for t in self.tools)))

    def step(self) -> None:
        rng, run, r = self.rng, self.run, self.rng.random()
        if r < 0.15:
            run.append(UserInput(_text(rng), required=rng.random() < 0.2))
        elif r < 0.35:
            calls = []
            for _ in range(rng.choice((0, 1, 1, 2, 3))):
                self.calls += 1
                name = rng.choice([*self.tools, *MADE_UP_NAMES])
                calls.append(ToolCall(call_id=f"c{self.calls}", name=name,
                                      arguments=rng.choice(ARGUMENTS)))
            run.append(ModelResponse(text=_text(rng, 10) if rng.random() < 0.5 else "", tool_calls=calls))
            self.open += [c.call_id for c in calls]
        elif r < 0.55 and self.open:
            call_id = self.open.pop(rng.randrange(len(self.open)))
            run.append(ToolResult(call_id=call_id, content=_text(rng), is_error=rng.random() < 0.2,
                                  exit_code=rng.choice((None, 0, 1))))
        elif r < 0.6:
            run.append(FileRead(path=rng.choice(("a.py", "b.md")), content=_text(rng)))
        elif r < 0.65:
            run.append(EvidenceRetrieved(content=_text(rng), source_ref=f"doc://{rng.randrange(3)}",
                                         semantic_key=rng.choice((None, "k1"))))
        elif r < 0.68:
            status = rng.choice(("ready", "done"))
            run.append(PlanUpdated(steps=(PlanStep(id="s1", title="do", status=status),
                                          PlanStep(id="s2", title="then", depends_on=("s1",)))))
        elif r < 0.7:
            run.append(GoalSet(goal=_text(rng, 8), success_contract=("tests pass",)))
        elif r < 0.72:
            run.append(MemoryRecalled(memory_id=f"m{rng.randrange(3)}", content=_text(rng, 20),
                                      source_ref="mem://x"))
        elif r < 0.76:
            strategy: Literal["mask", "summary"] = rng.choice(("mask", "summary"))
            _allowed(lambda: run.compact(strategy, window=rng.choice((2_000, 8_000, 32_000))))
        elif r < 0.78:
            run.append(HandOff(mode=rng.choice(("hand_off", "resume")), from_agent="a", to_agent="b"))
        elif r < 0.81:  # a past turn rebuilt, and recorded when it has no record
            self.rebuild(rng.randrange(1, run.next_turn() + 1), rng.choice(PROVIDERS))
        else:
            self.build()

    def rebuild(self, turn: int, provider: str) -> None:
        """A past turn rebuilt for ``provider``: a turn with a record is rebuilt with its settings, so
        another provider named beside it is refused (it would be ignored) and nothing is written."""
        records = self.run.records(turn)
        recorded = records[0].manifest["config"]["provider"] if records else None
        if recorded is not None and recorded != provider:
            version = self.run.version
            with pytest.raises(InvalidInputError, match=f"^turn {turn} has a context_built record"):
                self.run.build(provider, turn=turn)
            assert self.run.version == version
            provider = recorded
        _allowed(lambda: self.run.build(provider, turn=turn))

    def build(self) -> None:
        """A build, often after a preview of it: the preview writes nothing, and the build makes
        the same request (or both are refused)."""
        provider, window = self.rng.choice(PROVIDERS), self.rng.choice(WINDOWS)
        kwargs: dict[str, Any] = {"window": window, "auto_compact": self.rng.random() < 0.3}
        if self.rng.random() >= 0.3:
            built = _allowed(lambda: self.run.build(provider, model=self.rng.choice((None, "m1")), **kwargs))
            if built is not None and self.rng.random() < 0.5:  # later budgets calibrate to it
                m = built.manifest
                self.run.observe_usage(m.turn, int(m.selected_tokens * self.rng.uniform(0.7, 1.4)) + 1,
                                       model=m.model)
            return
        version = self.run.version
        seen = _allowed(lambda: self.run.preview(provider, **kwargs))
        assert self.run.version == version
        built = _allowed(lambda: self.run.build(provider, **kwargs))
        assert (seen is None) == (built is None), (provider, kwargs)
        if seen is not None and built is not None:
            assert built.body_bytes == seen.body_bytes, (provider, kwargs)
            assert built.manifest == seen.manifest


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_runs_replay_every_recorded_turn_and_previews_match_builds(store_url: str, seed: int) -> None:
    with open_store(store_url) as store:
        run = store.run(f"random-{seed}")
        agent = Agent(run, seed)
        for _ in range(STEPS):
            agent.step()
        assert run.verify().ok
        records = 0
        for turn in range(1, run.next_turn() + 1):
            if run.records(turn):
                records += 1
                report = run.replay(turn)
                assert report.ok, (turn, report.differences)
            else:  # a past turn rebuilt from the log, or the unanswered one previewed
                version = run.version
                rebuilt = _allowed(lambda: run.build("anthropic", turn=turn, record=False))  # noqa: B023
                assert run.version == version
                if turn == run.next_turn() and rebuilt is not None:
                    assert rebuilt.body_bytes == run.preview("anthropic").body_bytes
        assert records > 0
