"""Usage calibration: learn how far our token estimate is from the provider's count.

tiktoken's count is an estimate for models whose tokenizer differs (Claude,
Gemini, a newer OpenAI encoding): a request we think fits can overflow the
window. Providers report the real input size (``usage_observed`` events), so
the builder can learn a per-model correction from the run's own log:

- a *sample* is a turn that has both a ``context_built`` record (estimate =
  the manifest's ``selected_tokens``) and a ``usage_observed`` event
  (observed = ``input_tokens``, which must count cached prompt tokens too —
  OpenAI's ``prompt_tokens``; for Anthropic pass input + cache read + cache
  creation tokens). The record is the turn's newest one logged before the report
  (:mod:`~contextfold.projections.usage_pairs`, the rule the audit pairs by too),
  not a retry built after it: a request refused for length is reported, then
  built again smaller, and the refused count over the retry's estimate read 1.2
  as 2.1;
- only samples of the provider and model being built for count (the provider
  of the turn's ``context_built`` record; the model the usage event names, else
  the record's; a snapshot of the build's model is the build's model), and only
  the newest :data:`MAX_SAMPLES`, so a provider-side tokenizer change is learned
  within a bounded number of turns. Why the
  provider too: a run that names no model has samples of model None for every
  provider it is built for, and Claude's count of a request (3x ours, say) cut
  the next OpenAI Chat build's budget to a third. Why the usage's model first:
  it names the model that counted the tokens, which the caller knows and the
  record (what the build named, if anything) may not. Why a snapshot is the build's model:
  a provider's response names the dated snapshot an alias resolved to (a request for
  ``gpt-4o`` is answered by ``gpt-4o-2024-08-06``, ``claude-sonnet-4-5`` by
  ``claude-sonnet-4-5-20250929``: the pydantic-ai cassettes), so a runtime passing the
  response's model to ``observe_usage`` had samples no build took, and its budget was never
  corrected (:func:`same_model`);
- the correction is the :data:`QUANTILE` (p90, nearest-rank: an actual
  observed ratio, no interpolation) of observed/estimated. A high quantile,
  not the mean: the point is to stop overflows, and a mean would let every
  other request overflow when the ratio varies. Nearest-rank on a small sample
  is the maximum, which is the safe side;
- or the newest sample's ratio, when higher. Why: consecutive requests share most of
  their content, so the last ratio predicts the next request's best; when the provider's
  count per our token rises (tool output of a kind its tokenizer splits finer than ours:
  code, JSON, another script) the p90 of 50 samples took it only once 6 of them showed it,
  and for those turns every request the build said fits was counted past the budget;
- it is applied only when above 1 (budget = floor((window - reserve) /
  correction)); a ratio below 1 means we over-count, which is harmless, so
  the budget never grows beyond what the configuration says;
- an implausible observation is refused when it is recorded
  (:func:`check_observation`, called by ``Run.observe_usage``): input tokens over
  :data:`MAX_RATIO` times the window of the turn's largest recorded build. A build
  never selects more than its window by our estimate, and no tokenizer counts
  :data:`MAX_RATIO` times more than ours, so such a number is a typo (zeros too
  many), another request's usage or a run's total. One of them, recorded, made every
  later build of the model fail ("shrunk to 0 by the usage calibration") until
  enough newer samples outranked it. Over :data:`MAX_RATIO` times the turn's largest
  recorded estimate is refused too unless forced (a run's total: the function's docstring);
- the correction is capped at :data:`MAX_RATIO`, for what the check cannot see: an
  observation recorded before its turn's build, or by an older contextfold. The
  budget then never shrinks below ``(window - reserve) / MAX_RATIO``. A wrong
  observation is corrected by recording the turn's usage again: the newest counts.

Replay stability: everything comes from the folded state (``usage`` and
``builds`` as of the state's version), so a rebuild of turn N sees exactly
the observations that were in the log when turn N was built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextfold.domain.checked import checked
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import AnyEvent, ContextBuilt, UsageObserved
from contextfold.domain.manifest import BuildConfig, Calibration
from contextfold.projections.model_family import run_model_for
from contextfold.projections.usage_pairs import reported_record

if TYPE_CHECKING:  # only named: importing the fold's state loads tiktoken (~0.1 s of CPU), which a
    # process recording a usage report (``Run.observe_usage``, ``contextfold usage``) never uses
    from contextfold.projections.state import RunState

__all__ = [
    "ESTIMATE_KEYS",
    "MAX_RATIO",
    "MAX_SAMPLES",
    "MIN_CACHED_PROMPT",
    "QUANTILE",
    "CalibrationSample",
    "Estimate",
    "EstimateLookup",
    "calibrate",
    "calibrate_state",
    "calibrated_budget",
    "check_observation",
    "checked_usage",
    "nearest_rank",
    "record_estimate",
    "same_model",
    "samples_from_state",
    "uncached_only",
]

MIN_CACHED_PROMPT = 1024
"""Anthropic caches no prompt shorter than this (its smallest minimum, Sonnet's and Opus's): a
report for a shorter request is its whole count even when it names no cached tokens."""

QUANTILE = 0.9
"""p90 of observed/estimated ratios (nearest-rank)."""
MAX_SAMPLES = 50
"""Only the newest samples count: a provider can change its tokenizer."""
MAX_RATIO = 4.0
"""No provider counts a request at more than 4x our estimate of it (tokenizers differ by tens of
percent): the bound on an observation (x the window) and the cap on the correction."""


@dataclass(frozen=True, slots=True)
class CalibrationSample:
    turn: int
    estimated: int
    observed: int
    model: str | None
    provider: str | None = None
    """The provider the turn was built for (its record's); None for a record that names none,
    which no build's calibration takes."""

    @property
    def ratio(self) -> float:
        return self.observed / self.estimated


Estimate = tuple[int, str | None, str | None]
"""(selected_tokens, model, provider) of a ``context_built`` record's manifest."""
EstimateLookup = Callable[[int], Estimate | None]
"""Log position of a ``context_built`` event -> its :data:`Estimate`."""


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile: the smallest value with at least ``q`` of the data at or below."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


ESTIMATE_KEYS = ("model", "provider", "selected_tokens")
"""The keys of a record's manifest :func:`record_estimate` reads: a store reads a record for it
with these alone (its manifest's list of what was left out is most of a long run's record)."""


def record_estimate(event: AnyEvent | None) -> Estimate | None:
    """(selected_tokens, model, provider) of a ``context_built`` record: what
    :data:`EstimateLookup` returns for one (None for another event, or a record whose model is no
    name). A record appended or imported by hand may not be a builder's: a count that is not a
    number is 0, no sample; a provider that is no name is None, a sample no build takes."""
    if not isinstance(event, ContextBuilt):
        return None
    model = event.manifest.get("model")
    provider = event.manifest.get("provider")
    try:
        tokens = int(event.manifest.get("selected_tokens", 0))
    except (TypeError, ValueError):
        tokens = 0
    if model is not None and not isinstance(model, str):
        return None
    return tokens, model, provider if isinstance(provider, str) else None


_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-\d{3}")
"""What a provider appends to an alias to name the snapshot that served it: OpenAI's date
(``gpt-4o-2024-08-06``), Anthropic's (``claude-sonnet-4-5-20250929``; Vertex AI spells it
``@20250929``), Gemini's version (``gemini-1.5-pro-002``)."""


def same_model(sample: str | None, build: str | None) -> bool:
    """Whether a sample's model is the model a build names: the same name, or one of them the
    other with a snapshot suffix (:data:`_SNAPSHOT_SUFFIX`), as a response names the model that
    served an alias. Another model of the family (``gpt-4o-mini`` for ``gpt-4o``) is not."""
    if sample == build:
        return True
    if sample is None or build is None:
        return False
    alias, snapshot = sorted((sample, build), key=len)
    return snapshot.startswith(alias) and _SNAPSHOT_SUFFIX.fullmatch(snapshot[len(alias):]) is not None


def samples_from_state(state: RunState, estimate_at: EstimateLookup) -> list[CalibrationSample]:
    """Turns of ``state`` with both a build record and a usage report, oldest first."""
    out: list[CalibrationSample] = []
    for turn in sorted(state.usage):
        position = reported_record(turn, state.builds, state.usage_builds)
        if position is None:
            continue
        found = estimate_at(position)
        if found is None:
            continue
        estimated, manifest_model, provider = found
        usage = state.usage[turn]
        if estimated <= 0:
            continue
        out.append(CalibrationSample(turn, estimated, usage.input_tokens,
                                     usage.model if usage.model is not None else manifest_model, provider))
    return out


def calibrate(samples: Sequence[CalibrationSample], model: str | None,
              base_budget: int, provider: str) -> Calibration | None:
    """The correction for ``model`` built for ``provider`` from ``samples``; None when there is
    no sample for the pair."""
    mine = [s for s in samples if s.provider == provider and same_model(s.model, model)][-MAX_SAMPLES:]
    if not mine:
        return None
    # Never 0: a usage report of 0 input tokens (or a few, e.g. Anthropic's uncached input_tokens
    # alone against a 100k prompt) rounded the ratio to 0.0, which no Calibration may hold, and
    # every later build of the run raised pydantic's ValidationError. Below 1 it changes nothing.
    last = mine[-1]
    observed = max(nearest_rank([s.ratio for s in mine], QUANTILE), last.ratio)  # module docstring
    correction = max(round(observed, 4), 0.0001)
    correction = min(correction, MAX_RATIO)  # an implausible sample cannot starve the budget
    return Calibration(model=model, quantile=QUANTILE, samples=len(mine), correction=correction,
                       base_budget=base_budget, last_turn=last.turn, last_estimated=last.estimated,
                       last_observed=last.observed)


def calibrate_state(state: RunState, config: BuildConfig,
                    estimate_at: EstimateLookup) -> Calibration | None:
    """The calibration a build of ``state`` under ``config`` applies (None: no observations)."""
    if not state.usage:
        return None
    # the model the request names, which the manifest records (not another vendor's: model_family)
    return calibrate(samples_from_state(state, estimate_at),
                     config.model or run_model_for(config.provider, state.model),
                     config.window - config.reserve, config.provider)


def calibrated_budget(budget: int, calibration: Calibration | None) -> int:
    """``budget`` shrunk so that ``estimate * correction <= budget`` (never grown)."""
    if calibration is None or calibration.correction <= 1:
        return budget
    return math.floor(budget / calibration.correction)


def checked_usage(turn: int, input_tokens: int, *, cached_tokens: int, output_tokens: int,
                  model: str | None) -> UsageObserved:
    """The ``usage_observed`` event of a provider's report, or InvalidInputError: the counts are
    validated (a count given as text, "1000", was compared as text) and the cached tokens are
    part of the input (Anthropic's ``input_tokens`` alone excludes the cache)."""
    usage = checked(UsageObserved, "usage", turn=turn, input_tokens=input_tokens,
                    cached_tokens=cached_tokens, output_tokens=output_tokens, model=model)
    if usage.cached_tokens > usage.input_tokens:
        raise InvalidInputError(
            f"invalid usage: cached_tokens {usage.cached_tokens} > input_tokens {usage.input_tokens}; "
            "input_tokens is the whole prompt, cached tokens included (Anthropic: input_tokens "
            "+ cache_read_input_tokens + cache_creation_input_tokens)")
    return usage


def check_observation(turn: int, input_tokens: int, windows: Sequence[int],
                      estimates: Sequence[int] = (), *, force: bool = False) -> None:
    """Refuse (:class:`InvalidInputError`) a usage report of ``turn`` that no request of the turn
    could have produced: more than :data:`MAX_RATIO` times the largest of ``windows`` (the
    ``window_tokens`` of the turn's build records), or -- unless ``force`` -- the largest of
    ``estimates`` (their ``selected_tokens``). A turn with no record is not checked here (its
    correction is capped in :func:`calibrate`).

    Why the estimate too: a run's total (pydantic-ai's ``result.usage()``, every request summed)
    passed as a turn's usage is 5-10x the request by the tenth turn, well under 4x the window, and
    its correction (capped at 4) quartered every later budget of the model. Why ``force``: a
    response whose provider-side tools sampled several times reports them summed (Anthropic's web
    search: 16,083 input tokens for a 40-token request; code execution with files: 10x), which the
    caller may mean to calibrate with. Tokenizers alone differ by tens of percent (pydantic-ai's
    cassettes without provider-side tools: 0.3-1.4x our count)."""
    if not windows:
        return
    window = max(windows)
    if input_tokens > MAX_RATIO * window:
        raise InvalidInputError(
            f"implausible usage for turn {turn}: {input_tokens} input tokens, over {MAX_RATIO:g}x the "
            f"{window}-token window its request was built for (a typo, another request's usage or a "
            "run's total?); nothing recorded: pass the provider's input tokens for this turn's request")
    estimate = max(estimates, default=0)
    if not force and estimate > 0 and input_tokens > MAX_RATIO * estimate:
        raise InvalidInputError(
            f"implausible usage for turn {turn}: {input_tokens} input tokens, over {MAX_RATIO:g}x the "
            f"{estimate} tokens its largest recorded request holds by our count (a run's total, e.g. "
            "pydantic-ai's result.usage(), not this request's?); nothing recorded: pass this turn's "
            "request's input tokens (pydantic-ai: the response's usage), or force=True (CLI: --force) "
            "if the provider counted that much (provider-side tools, e.g. web search, report their "
            "requests summed)")


def uncached_only(turn: int, usage: UsageObserved, estimate: int, provider: str | None) -> str | None:
    """What to warn of (a :class:`~contextfold.usage_api.UsageWarning`) when ``usage`` looks
    like Anthropic's ``input_tokens`` alone for the turn's newest record (``estimate`` tokens built
    for ``provider``), or None.

    Why: that field excludes the prompt's cached part, and every Anthropic request the builder
    renders carries cache breakpoints, so from the second request on it is a few tokens
    (pydantic-ai's cassettes: 4-16 for requests of 800-21,000, at most 0.009x our count). The ratio
    is under 1, where the calibration changes nothing: the budget went uncorrected and nothing
    said so. Why under half and only with no cached tokens named: Anthropic's whole counts of the
    same cassettes are 0.75x our count or more (a document-heavy request), and a report naming its
    cached tokens counted them. Not refused: a provider-side compaction can count that little."""
    if (provider != "anthropic" or usage.cached_tokens or estimate < MIN_CACHED_PROMPT
            or 2 * usage.input_tokens >= estimate):
        return None
    return (f"usage for turn {turn}: {usage.input_tokens} input tokens, under half the {estimate} of "
            "its anthropic request by our count, and no cached tokens: Anthropic's input_tokens "
            "excludes the cache; pass input_tokens + cache_read_input_tokens + "
            "cache_creation_input_tokens (and cached_tokens=cache_read_input_tokens), or the "
            "calibration never corrects the budget")
