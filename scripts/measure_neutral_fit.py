#!/usr/bin/env python
"""Print how often a neutral build, rendered later for a provider, holds more than its budget.

A ``neutral`` build is the provider-neutral conversation (``BuildResult.conversation``), which a
caller may render for any provider afterwards (``contextfold.render_request``). This script
builds neutral at tight windows on every turn of the tau-bench gpt-4o airline runs and of random
runs (the runtime of ``tests/integration/test_random_runs.py``, on a SQLite store in a temporary
folder), renders each conversation for the four providers, and prices what each is sent as that
provider's build prices it (``tests/integration/neutral_prices.provider_price``). A count over
the budget means a caller who rendered the conversation for that provider sent more than the
window minus the reserve.

Usage: ``.venv/bin/python scripts/measure_neutral_fit.py [--tau-runs 30] [--seeds 6]
[--steps 150]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from contextfold.api import open_store, render_request  # noqa: E402
from contextfold.domain.errors import ContextfoldError  # noqa: E402
from contextfold.domain.events import ModelResponse  # noqa: E402
from contextfold.domain.log import RecordedEvent  # noqa: E402
from contextfold.domain.manifest import BuildConfig  # noqa: E402
from contextfold.importers import iter_runs  # noqa: E402
from contextfold.projections.builder import BuildResult, build_context  # noqa: E402
from contextfold.projections.fold import fold_event, new_state  # noqa: E402
from contextfold.projections.state import RunState  # noqa: E402
from tests.integration.neutral_prices import LoadText, provider_price  # noqa: E402

__all__ = ["main"]

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini")
TAU_WINDOWS = (2_500, 4_000, 8_000)
RANDOM_WINDOWS = (1_500, 4_000, 16_000)
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))


class Tally:
    def __init__(self) -> None:
        self.builds = 0
        self.over: dict[str, list[int]] = defaultdict(list)
        self.margin: dict[str, list[int]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.refused: dict[int, int] = defaultdict(int)
        """Neutral builds refused, by window (required content over the budget)."""
        self.windows: dict[int, int] = defaultdict(int)
        self.checked: dict[str, list[int]] = defaultdict(list)
        """Per provider, where its own build at the same window selected the same fragments
        and tools (so prices the same conversation): its ``selected_tokens`` less ours."""

    def add(self, state: RunState, built: BuildResult, load_text: LoadText) -> None:
        self.builds += 1
        self.windows[built.manifest.window_tokens] += 1
        budget = built.manifest.budget_tokens
        for provider in PROVIDERS:
            try:
                render_request(built.conversation, provider, built.manifest.reserved_output_tokens)
            except ContextfoldError as exc:
                self.errors[f"{provider}: {type(exc).__name__}"] += 1
                continue
            price = provider_price(state, built, provider, load_text)
            self._check(state, built, provider, price, load_text)
            self.margin[provider].append(price - built.manifest.selected_tokens)
            if price > budget:
                self.over[provider].append(price - budget)

    def _check(
        self, state: RunState, built: BuildResult, provider: str, price: int, load_text: LoadText
    ) -> None:
        """The price against a build for ``provider`` that selected the same (a check of the
        script's own sum: every difference should be 0)."""
        try:
            own = build_context(
                state,
                built.manifest.config.model_copy(
                    update={
                        "provider": provider,
                        "window": 10 * built.manifest.window_tokens,
                        "reserve": 9 * built.manifest.window_tokens + built.manifest.reserved_output_tokens,
                    }
                ),
                load_text=load_text,
            )
        except ContextfoldError:
            return
        a, b = own.manifest, built.manifest
        if built.conversation.tools and (
            [(f.id, f.truncated, f.original_tokens) for f in a.fragments]
            == [(f.id, f.truncated, f.original_tokens) for f in b.fragments]
            and [t.name for t in a.tools] == [t.name for t in b.tools]
            and not a.truncations
        ):
            self.checked[provider].append(a.selected_tokens - a.tool_tokens - (price - b.tool_tokens))

    def report(self, label: str) -> None:
        print(
            f"{label}: {self.builds} neutral builds; by window: "
            + ", ".join(f"{w}: {n} built, {self.refused[w]} refused" for w, n in sorted(self.windows.items()))
        )
        for provider in PROVIDERS:
            over, margin = self.over[provider], self.margin[provider]
            if not margin:
                continue
            text = (
                f"over in {len(over):>4} ({100 * len(over) / len(margin):5.1f}%), by median "
                f"{statistics.median(over):.0f} max {max(over)}"
                if over
                else "over in    0"
            )
            print(
                f"  {provider:<17} {text};  provider price - neutral's: median "
                f"{statistics.median(margin):.0f}, max {max(margin)}, min {min(margin)}"
            )
        for provider, diffs in self.checked.items():
            print(
                f"  check {provider}: {len(diffs)} builds of its own selected the same; their price less "
                f"ours (tools aside): {sorted(set(diffs))[:8]}"
            )
        for what, n in sorted(self.errors.items()):
            print(f"  render refused ({what}): {n}")


def _tau(n: int) -> Iterator[tuple[str, list[object]]]:
    path = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    for i, (suffix, events) in enumerate(
        iter_runs(path.read_bytes(), format="openai-chat", source=str(path))
    ):
        if i >= n:
            break
        yield f"tau-{suffix or i}", list(events)


def measure_tau(n: int) -> Tally:
    tally = Tally()
    for run_id, events in _tau(n):
        state = new_state(run_id)
        for pos, event in enumerate(events, start=1):
            if isinstance(event, ModelResponse) and pos > 1:
                for window in TAU_WINDOWS:
                    try:
                        built = build_context(state, BuildConfig(window=window))
                    except ContextfoldError:
                        tally.refused[window] += 1
                        continue
                    tally.add(state, built, None)
            fold_event(state, RecordedEvent(run_id, pos, event, ""))  # type: ignore[arg-type]
    return tally


def measure_random(seeds: int, steps: int) -> Tally:
    from tests.integration.test_random_runs import Agent

    tally = Tally()
    with tempfile.TemporaryDirectory() as folder:
        store = open_store(f"sqlite:///{folder}/runs.db")
        try:
            for seed in range(seeds):
                run = store.run(f"random-{seed}")
                agent = Agent(run, seed)
                for step in range(steps):
                    agent.step()
                    if step % 5 != 4:
                        continue
                    state = run.state()
                    for window in RANDOM_WINDOWS:
                        try:
                            built = build_context(
                                state, BuildConfig(window=window), load_text=store.cited_text
                            )
                        except ContextfoldError:
                            tally.refused[window] += 1
                            continue
                        tally.add(state, built, store.cited_text)
        finally:
            store.close()
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tau-runs", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args(argv)
    print(f"tau-bench windows {TAU_WINDOWS}, random-run windows {RANDOM_WINDOWS}; default reserves")
    measure_tau(args.tau_runs).report(f"tau-bench gpt-4o airline, {args.tau_runs} runs")
    measure_random(args.seeds, args.steps).report(f"random runs, {args.seeds} seeds x {args.steps} steps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
