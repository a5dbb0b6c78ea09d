"""Usage calibration: a high quantile of observed/estimated shrinks later budgets; replay-stable."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from contextfold.api import Run, open_store
from contextfold.domain.events import AnyEvent, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import ContextManifest
from contextfold.projections.calibration import (
    MAX_RATIO,
    MAX_SAMPLES,
    QUANTILE,
    CalibrationSample,
    calibrate,
    calibrated_budget,
    nearest_rank,
)

WINDOW, RESERVE = 3_000, 500


def _turn_events(i: int) -> list[AnyEvent]:
    words = " ".join(f"word{i}_{k}" for k in range(120))
    return [ModelResponse(text=f"step {i}", tool_calls=(ToolCall(call_id=f"c{i}", name="grep"),)),
            ToolResult(call_id=f"c{i}", content=f"result {i}: {words}", exit_code=0),
            UserInput(f"continue with part {i}: {words}")]


def _run(tmp_path: Path, name: str = "r") -> Run:
    store = open_store(f"sqlite:///{tmp_path / 'cal.db'}")
    run = store.run(name)
    run.append(RunStarted(model="claude-x", encoding="cl100k_base"), UserInput("start " + "x " * 50))
    return run


def _drive(run: Run, turns: int, ratio: float | None, *,
           model: str | None = None) -> list[ContextManifest]:
    manifests: list[ContextManifest] = []
    for i in range(1, turns + 1):
        m = run.build(window=WINDOW, reserve=RESERVE).manifest
        manifests.append(m)
        if ratio is not None:
            run.observe_usage(m.turn, math.ceil(m.selected_tokens * ratio), cached_tokens=10,
                              output_tokens=20, model=model)
        run.append(_turn_events(i))
    return manifests


def test_nearest_rank_is_an_observed_value() -> None:
    assert nearest_rank([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9], 0.9) == 1.8
    assert nearest_rank([1.2], QUANTILE) == 1.2
    assert nearest_rank([1.3, 1.1, 1.2], 0.9) == 1.3  # small samples: the max (the safe side)
    with pytest.raises(ValueError):
        nearest_rank([], 0.9)


def test_calibrate_filters_model_and_keeps_newest_samples() -> None:
    old = [CalibrationSample(t, 100, 200, "m", "p") for t in range(1, 11)]
    new = [CalibrationSample(t, 100, 110, "m", "p") for t in range(11, 11 + MAX_SAMPLES)]
    other = [CalibrationSample(999, 100, 500, "other", "p"), CalibrationSample(999, 100, 500, "m", "q"),
             CalibrationSample(999, 100, 500, "m", None)]
    cal = calibrate([*old, *new, *other], "m", 1000, "p")
    assert cal is not None
    assert cal.correction == 1.1 and cal.samples == MAX_SAMPLES
    assert (cal.last_turn, cal.last_estimated, cal.last_observed) == (10 + MAX_SAMPLES, 100, 110)
    assert calibrate(other, "m", 1000, "p") is None
    assert calibrated_budget(1000, cal) == 909
    under = calibrate([CalibrationSample(1, 100, 80, "m", "p")], "m", 1000, "p")
    assert calibrated_budget(1000, under) == 1000  # over-counting never grows the budget
    assert calibrated_budget(1000, None) == 1000


def test_no_observations_change_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path)
    manifests = _drive(run, 4, None)
    for m in manifests:
        assert m.calibration is None
        assert m.budget_tokens == WINDOW - RESERVE
    again = run.build(window=WINDOW, reserve=RESERVE, record=False).manifest
    assert again.calibration is None and again.budget_tokens == WINDOW - RESERVE


def test_usage_15_percent_above_shrinks_later_budgets(tmp_path: Path) -> None:
    run = _run(tmp_path)
    manifests = _drive(run, 6, 1.15)
    first = manifests[0]
    assert first.calibration is None and first.budget_tokens == WINDOW - RESERVE
    uncorrected = run.build(window=WINDOW, reserve=RESERVE, record=False, model="unobserved").manifest
    assert uncorrected.calibration is None and uncorrected.budget_tokens == WINDOW - RESERVE
    later = run.build(window=WINDOW, reserve=RESERVE).manifest
    cal = later.calibration
    assert cal is not None and cal.model == "claude-x"
    assert cal.samples == 6 and 1.14 <= cal.correction <= 1.16
    assert cal.base_budget == WINDOW - RESERVE
    assert later.budget_tokens == math.floor((WINDOW - RESERVE) / cal.correction)
    assert later.budget_tokens < uncorrected.budget_tokens
    assert later.selected_tokens * cal.correction <= WINDOW - RESERVE
    assert later.selected_tokens <= uncorrected.selected_tokens
    assert (cal.last_turn, cal.last_estimated) == (6, manifests[5].selected_tokens)
    assert cal.last_observed == math.ceil(manifests[5].selected_tokens * 1.15)


def test_correction_is_replay_stable(tmp_path: Path) -> None:
    run = _run(tmp_path)
    manifests = _drive(run, 5, 1.15)
    # turn 3 was built after usage of turns 1 and 2 only; the rebuild sees the same
    cal3 = manifests[2].calibration
    assert cal3 is not None and cal3.samples == 2
    for turn in (1, 3, 5):
        report = run.replay(turn)
        assert report.ok, report.differences
        assert report.rebuilt.calibration == manifests[turn - 1].calibration


def test_usage_of_another_model_does_not_correct(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _drive(run, 3, 1.5, model="some-other-model")
    # the manifests recorded model claude-x, but the usage names the model that counted it
    assert run.build(window=WINDOW, reserve=RESERVE, record=False).manifest.calibration is None
    named = run.build(window=WINDOW, reserve=RESERVE, record=False, model="some-other-model").manifest
    assert named.calibration is not None and named.calibration.model == "some-other-model"
    other = run.build(window=WINDOW, reserve=RESERVE, record=False, model="gpt-4o").manifest
    assert other.calibration is None and other.budget_tokens == WINDOW - RESERVE


def test_usage_without_a_model_takes_the_records_model(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _drive(run, 3, 1.5)
    cal = run.build(window=WINDOW, reserve=RESERVE, record=False).manifest.calibration
    assert cal is not None and cal.model == "claude-x"


def test_a_correction_learned_for_one_provider_is_not_applied_to_another(tmp_path: Path) -> None:
    """A run that names no model is built for Anthropic, which counts 3x our estimate, then for
    OpenAI Chat: its samples (model None) matched the OpenAI build's model (None), and its budget
    shrank from 18,000 to 6,000. Samples match on (provider, model)."""
    with open_store(f"sqlite:///{tmp_path / 'cal.db'}") as store:
        run = store.run("r")
        run.append(UserInput("hello " * 50))
        first = run.build("anthropic", window=20_000, reserve=2_000).manifest
        run.observe_usage(first.turn, first.selected_tokens * 3)
        run.append(ModelResponse(text="hi"), UserInput("more"))
        chat = run.build("openai-chat", window=20_000, reserve=2_000, record=False).manifest
        assert chat.calibration is None and chat.budget_tokens == 18_000
        again = run.build("anthropic", window=20_000, reserve=2_000).manifest
        assert again.calibration is not None and again.calibration.correction == 3
        assert again.budget_tokens == 6_000
        assert run.replay(again.turn).ok


def test_observe_usage_rejects_unknown_turn(tmp_path: Path) -> None:
    from contextfold.domain.errors import TurnNotFoundError

    run = _run(tmp_path)
    with pytest.raises(TurnNotFoundError):
        run.observe_usage(7, 100)


@pytest.mark.parametrize("observed", [0, 1])
def test_a_usage_report_of_almost_no_tokens_keeps_the_run_buildable(tmp_path: Path, observed: int) -> None:
    """0 input tokens (a runtime's default for a missing usage), or a few against a large prompt
    (Anthropic's uncached ``input_tokens`` alone), rounded the correction to 0.0: every later
    build of the run raised pydantic's ValidationError, for good (the log is append-only)."""
    run = _run(tmp_path)
    run.append(UserInput("more " * 20_000))
    first = run.build(window=40_000, reserve=RESERVE).manifest
    assert first.selected_tokens > 20_000
    run.observe_usage(first.turn, observed)
    later = run.build(window=40_000, reserve=RESERVE).manifest
    assert later.calibration is not None and later.calibration.last_observed == observed
    assert later.budget_tokens == 40_000 - RESERVE  # below 1 a correction changes nothing
    assert run.replay(later.turn).ok


def test_an_implausible_observation_is_refused_when_recorded(tmp_path: Path) -> None:
    """One observation over what the turn's request could hold (a typo) was recorded and made
    every later build of the model fail until newer samples outranked it."""
    from contextfold.domain.errors import InvalidInputError

    run = _run(tmp_path)
    first = run.build(window=WINDOW, reserve=RESERVE).manifest
    run.build(window=2 * WINDOW, reserve=RESERVE, record=True)  # the turn's largest window counts
    version = run.version
    for typo in (999_999_999_999, int(MAX_RATIO * 2 * WINDOW) + 1):
        with pytest.raises(InvalidInputError, match=f"implausible usage for turn {first.turn}: {typo} "):
            run.observe_usage(first.turn, typo)
    assert run.version == version
    # the bound itself is plausible (forced: it is over 4x the turn's estimate, a run's total)
    run.observe_usage(first.turn, int(MAX_RATIO * 2 * WINDOW), force=True)
    later = run.build(window=WINDOW, reserve=RESERVE).manifest
    assert later.calibration is not None and later.calibration.correction == MAX_RATIO
    assert later.budget_tokens == math.floor((WINDOW - RESERVE) / MAX_RATIO)
    assert run.replay(later.turn).ok


def test_the_correction_is_capped_for_what_the_write_check_cannot_see() -> None:
    """An observation recorded before its turn's build (or by an older version) is not checked."""
    cal = calibrate([CalibrationSample(1, 100, 10**12, "m", "p")], "m", 1000, "p")
    assert cal is not None and cal.correction == MAX_RATIO and cal.last_observed == 10**12
    assert calibrated_budget(1000, cal) == 250


@pytest.mark.parametrize(("provider", "requested", "answered"), [
    # request and response models of the pydantic-ai cassettes (../shared/traces): the response
    # names the snapshot the alias resolved to
    ("openai-chat", "gpt-4o", "gpt-4o-2024-08-06"),
    ("openai-responses", "gpt-5.4", "gpt-5.4-2026-03-05"),
    ("anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"),
    ("anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5@20250929"),  # Vertex AI's spelling
    ("gemini", "gemini-1.5-pro", "gemini-1.5-pro-002"),
])
def test_usage_naming_the_responses_snapshot_calibrates_the_alias(
        tmp_path: Path, provider: str, requested: str, answered: str) -> None:
    """A runtime records ``observe_usage(..., model=response.model)``: the provider's response names
    the dated snapshot (``gpt-4o-2024-08-06``) of the alias the build named (``gpt-4o``). Those
    samples matched no build, so a provider counting 1.5x our estimate never shrank the budget."""
    store = open_store(f"sqlite:///{tmp_path / 'cal.db'}")
    run = store.run("r")
    run.append(RunStarted(model=requested, encoding="cl100k_base"), UserInput("start " + "x " * 50))
    for i in range(1, 4):
        m = run.build(provider, window=WINDOW, reserve=RESERVE).manifest
        assert m.model == requested
        run.observe_usage(m.turn, math.ceil(m.selected_tokens * 1.5), model=answered)
        run.append(_turn_events(i))
    m = run.build(provider, window=WINDOW, reserve=RESERVE, record=False).manifest
    assert m.calibration is not None and m.calibration.model == requested
    assert m.calibration.samples == 3 and m.calibration.correction >= 1.5
    assert m.budget_tokens == calibrated_budget(WINDOW - RESERVE, m.calibration) < WINDOW - RESERVE
    store.close()


@pytest.mark.parametrize("answered", ["gpt-4o-mini", "gpt-4o-mini-2024-07-18", "gpt-4o-audio-preview",
                                      "gpt-4o-2024", "gpt-4o-x-2024-08-06"])
def test_usage_of_another_model_than_a_snapshot_of_the_alias_does_not_correct(
        tmp_path: Path, answered: str) -> None:
    """Only a snapshot suffix (a date, Gemini's -00N) makes the report's model the build's: another
    model of the family, whose name starts with the alias's, counts with its own tokenizer."""
    store = open_store(f"sqlite:///{tmp_path / 'cal.db'}")
    run = store.run("r")
    run.append(RunStarted(model="gpt-4o", encoding="cl100k_base"), UserInput("start " + "x " * 50))
    m = run.build("openai-chat", window=WINDOW, reserve=RESERVE).manifest
    run.observe_usage(m.turn, math.ceil(m.selected_tokens * 1.5), model=answered)
    run.append(_turn_events(1))
    assert run.build("openai-chat", window=WINDOW, reserve=RESERVE, record=False).manifest.calibration is None
    store.close()


def test_usage_naming_a_snapshot_calibrates_a_build_naming_its_alias_after_a_hand_off(tmp_path: Path) -> None:
    """A Claude run handed off to OpenAI: the first OpenAI build names no model (the run's is
    another vendor's), the usage names the snapshot that served it, and the next build names
    ``gpt-4o``: the sample (model ``gpt-4o-2024-08-06``) is that build's model."""
    store = open_store(f"sqlite:///{tmp_path / 'cal.db'}")
    run = store.run("r")
    run.append(RunStarted(model="claude-sonnet-4-5", encoding="cl100k_base"), UserInput("start " + "x " * 50))
    m = run.build("openai-chat", window=WINDOW, reserve=RESERVE).manifest
    assert m.model is None
    run.observe_usage(m.turn, math.ceil(m.selected_tokens * 1.5), model="gpt-4o-2024-08-06")
    run.append(_turn_events(1))
    built = run.build("openai-chat", window=WINDOW, reserve=RESERVE, model="gpt-4o", record=False)
    cal = built.manifest.calibration
    assert cal is not None and cal.model == "gpt-4o" and cal.correction >= 1.5
    # the Claude build of the same run takes none of it
    assert run.build("anthropic", window=WINDOW, reserve=RESERVE, record=False).manifest.calibration is None
    store.close()


def test_a_rise_in_the_providers_count_is_taken_at_the_next_build(tmp_path: Path) -> None:
    """The provider's count per our token rises mid-run (tool output of another kind: code, JSON,
    another script, which the provider's tokenizer splits finer than ours). The p90 of the newest
    50 samples took it only once 6 samples showed it: for 5 more turns each request the build
    said fits was counted past the budget by the provider (here 1.5 / 1.1: 36% over), though
    consecutive requests share most of their content, so the newest ratio predicts the next."""
    run = _run(tmp_path)
    _drive(run, 12, 1.1)
    m = run.build(window=WINDOW, reserve=RESERVE).manifest
    run.observe_usage(m.turn, math.ceil(m.selected_tokens * 1.5))  # the new content's ratio
    run.append(_turn_events(13))
    nxt = run.build(window=WINDOW, reserve=RESERVE).manifest
    assert nxt.calibration is not None and nxt.calibration.samples == 13
    assert nxt.calibration.correction >= 1.5
    assert math.ceil(nxt.selected_tokens * 1.5) <= WINDOW - RESERVE  # the provider's count fits
    assert run.replay(nxt.turn).ok
    # an old outlier still counts only as the quantile says: the newest is what is taken whole
    old = [CalibrationSample(1, 100, 300, "m", "p"), *(CalibrationSample(t, 100, 110, "m", "p")
                                                       for t in range(2, 31))]
    cal = calibrate(old, "m", 1000, "p")
    assert cal is not None and cal.correction == 1.1
