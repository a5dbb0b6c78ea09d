#!/usr/bin/env python
"""Print how many recorded pydantic-ai requests contextfold reproduces, and why not the rest.

For every model request N of every multi-request cassette in
``../shared/traces/pydantic-ai-cassettes`` (or ``$CONTEXTFOLD_TRACES``): import
the conversation up to N, build request N for its provider with a generous
budget, and compare tool calls, results, ids and order (and texts) with the
recorded request. The logic lives in ``tests/integration/test_cassettes.py``
so the table and the test can never disagree.

Usage: ``.venv/bin/python scripts/check_cassettes.py [--all]`` (``--all`` also
lists the first requests of conversations, which have nothing to rebuild).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.test_cassettes import CASSETTES, classify, run_all  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="also list first requests (n/a)")
    args = parser.parse_args(argv)
    if not CASSETTES.is_dir():
        print(f"cassettes folder {CASSETTES} is absent (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    outcomes = run_all()
    rows = [o for o in outcomes if args.all or o.reproduced is not None]
    width = max(len(o.case.cassette) for o in rows)
    print(f"{'cassette':<{width}}  {'N':>2}  {'provider':<16}  {'mode':<5}  reproduced  reason")
    for o in rows:
        flag = {True: "yes", False: "no", None: "n/a"}[o.reproduced]
        reason = "" if o.reproduced else (o.reason if o.reproduced is None else
                                          f"{classify(o.reason)} | {o.reason}")
        print(f"{o.case.cassette:<{width}}  {o.case.index:>2}  {o.case.provider:<16}  "
              f"{o.mode:<5}  {flag:<10}  {reason[:220]}")
    applicable = [o for o in outcomes if o.reproduced is not None]
    done = [o for o in applicable if o.reproduced]
    cassettes = {o.case.cassette for o in outcomes}
    print()
    print(f"{len(cassettes)} multi-request cassettes, {len(outcomes)} model requests, "
          f"{len(outcomes) - len(applicable)} first requests (nothing earlier to import)")
    print(f"reproduced {len(done)} of {len(applicable)} requests with a history "
          f"({Counter(o.mode for o in done)['chain']} chain, "
          f"{Counter(o.mode for o in done)['body']} body)")
    by_provider = Counter((o.case.provider, bool(o.reproduced)) for o in applicable)
    for provider in sorted({p for p, _ in by_provider}):
        ok = by_provider[(provider, True)]
        total = ok + by_provider[(provider, False)]
        print(f"  {provider:<16} {ok}/{total}")
    for label, n in Counter(classify(o.reason) for o in applicable if not o.reproduced).most_common():
        print(f"  not reproduced ({n}): {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
