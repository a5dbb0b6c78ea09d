#!/usr/bin/env python
"""Print how our token estimate of each recorded request compares with its provider's count.

For every request of ``../shared/traces/pydantic-ai-cassettes`` (or ``$CONTEXTFOLD_TRACES``)
whose response reports usage: import the request's history, build it for its provider and model
(1M window, every tool allowed) and divide the provider's input tokens by our estimate
(``selected_tokens``). ``raw`` compares the recorded request with ours; ``adjusted`` adds to the
provider's count what our request sends beyond the recorded one (data blocks, declarations of
tools the body did not declare), counted with the build's encoding. Below 1: we over-estimate
(budgets smaller than they need be); above 1: the request may hold more than its budget. The
logic lives in ``tests/integration/cassette_usage.py``, which ``test_estimates.py`` asserts on.

Usage: ``.venv/bin/python scripts/measure_estimates.py [--requests]`` (``--requests`` lists each
request too). Set ``TIKTOKEN_CACHE_DIR`` to a folder holding o200k_base to count OpenAI's models
with it (the manifest's encoding column says which counted).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.cassette_usage import Measured, measure_all, ratios  # noqa: E402
from tests.integration.test_cassettes import CASSETTES  # noqa: E402

__all__ = ["main"]


def _row(label: str, rows: list[Measured]) -> str:
    raw = ratios([m.raw for m in rows])
    adj = ratios([m.adjusted for m in rows])
    encodings = ",".join(sorted({m.manifest.encoding for m in rows}))
    share = statistics.median(m.manifest.overhead_tokens / m.estimate for m in rows)
    tools = statistics.median(m.manifest.tool_tokens / m.estimate for m in rows)
    return (f"{label:<18} {len(rows):>3}  {raw[0]:5.2f} {raw[1]:5.2f} {raw[2]:5.2f}   "
            f"{adj[0]:5.2f} {adj[1]:5.2f} {adj[2]:5.2f}   {share:8.2f} {tools:6.2f}  {encodings}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", action="store_true", help="list each request too")
    args = parser.parse_args(argv)
    if not CASSETTES.is_dir():
        print(f"cassettes folder {CASSETTES} is absent (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    measured = measure_all()
    kept = [m for m in measured if m.excluded is None]
    if args.requests:
        for m in measured:
            print(f"{m.cassette[-60:]:<60} {m.index:>2} {m.provider:<16} {m.model:<24} "
                  f"observed {m.observed:>6} ours {m.estimate:>6} added {m.added:>5} "
                  f"raw {m.raw:5.2f} adjusted {m.adjusted:5.2f}  {m.excluded or ''}")
        print()
    print("provider/ours: median p10 p90 (raw: the recorded request; adjusted: plus what ours adds)")
    print(f"{'provider':<18} {'n':>3}  {'raw':^17}   {'adjusted':^17}   overhead  tools  encoding")
    for provider in sorted({m.provider for m in kept}):
        print(_row(provider, [m for m in kept if m.provider == provider]))
    for model in sorted({m.model for m in kept if m.provider == "openai-chat"}):
        print(_row(f"  chat {model}", [m for m in kept if m.provider == "openai-chat" and m.model == model]))
    print(_row("all", kept))
    left = Counter(m.excluded for m in measured if m.excluded is not None)
    print(f"\n{len(measured)} requests with usage; left out: "
          + (", ".join(f"{n} ({why})" for why, n in left.most_common()) or "none"))
    print("overhead, tools: median share of our estimate that is framing (manifest overhead_tokens) "
          "and tool declarations (tool_tokens)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
