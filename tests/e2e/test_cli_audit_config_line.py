"""The audit's "builder config" lines say what changed and against what.

Why: the summary said "builder config: changed at turns 3" (the turn's settings differ from the
turn before: a hand-off to another provider) and ``audit --turn 3`` said "builder config:
unchanged" (its record's settings, re-derived by this builder): two answers to what reads as one
question, and neither said which setting.
"""

from __future__ import annotations

from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import HandOff, ModelResponse, UserInput
from tests.cli_runner import cf


def test_the_summary_names_the_settings_and_the_turn_check_says_against_what(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as store:
        run = store.run("r")
        run.append(UserInput("Plan the migration"))
        run.build("anthropic", window=8_000, reserve=1_000)
        run.append(ModelResponse(text="Plan: ..."), UserInput("Go on"))
        run.build("anthropic", window=8_000, reserve=1_000)
        run.append(ModelResponse(text="Step 1 done"), HandOff(from_agent="a", to_agent="b"),
                   UserInput("Next"))
        run.build("openai-chat", window=8_000, reserve=1_000)
    summary = cf("--store", url, "audit", "r", cwd=tmp_path)
    line = next(x for x in summary.stdout.splitlines() if x.startswith("builder config:"))
    assert line == ("builder config: changed from the turn before at turn 3 (provider; diff r 2 3 shows "
                    "how)"), line
    turn = cf("--store", url, "audit", "r", "--turn", "3", cwd=tmp_path)
    assert "builder config: unchanged since the record" in turn.stdout, turn.stdout
