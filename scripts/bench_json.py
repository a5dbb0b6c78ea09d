"""Canonical JSON on real data: ``canonical_utf8`` beside ``json.dumps`` and the reused C encoder.

    .venv/bin/python scripts/bench_json.py [--runs 200] [--repeat 5]

Why: the canonical JSON of a value (sorted keys, compact, UTF-8) is written for every event the
store appends (its hash chain), every fragment's content hash, every new message of a request
and every new manifest line of a context-built record. ``contextfold.domain.canonical``
writes it with orjson where orjson's bytes are provably json.dumps's, after a walk over the
value; this measures that walk plus orjson against what a user would write (``json.dumps(obj,
sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()``) and against the reused
C encoder the project used before (``canonical_dumps(obj).encode()``).

Data (``$CONTEXTFOLD_TRACES``, as in ``bench_build.py``): ``events``, the ``model_dump`` of every
event of the first ``--runs`` tau-bench runs and of the synthetic 10,000-message run;
``messages``, the neutral and OpenAI message dicts of that run's request at its last turn (128k
budget); ``lines``, that request's manifest lines (selected and excluded). Every value is
checked byte for byte against json.dumps first. Reported: total time per data set (best of
``--repeat``), per item, and the ratio to each alternative.

``--deep`` measures the cut of big nested JSON tool results instead (``truncate``, kind
``json``, cut to 20,000 tokens, then to 21,000 as at the next build; CPU seconds, best of
``--repeat``, the text counted beforehand as the fold counts it): ``ast-10k``, an AST dump of
10,000 levels of 33 members (6.6 MB, deeper than the parser: ``json_deep``), ``wide-5k``, 5,000
levels of 100 members (4.4 MB, likewise), ``wide-900``, 900 levels of 300 members (2.8 MB,
parsed and shrunk: ``json_shrink``), and ``wide-mid-80``, 80 levels of 2,000 members with the
child between the middle two (2.8 MB: one knob step takes a render from the grant's size to
half the document, the probes ``json_pieces.JsonPieces.tokens_within`` stops). With
``--base REV`` the same cuts are made by the package at ``REV`` too (unpacked as ``bench_ab``
does), in the same process, and the ratio reported.

    .venv/bin/python scripts/bench_json.py --deep [--base main] [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import bench_build as bb  # noqa: E402  (the workloads: tau-bench runs, the synthetic 10k run)

from contextfold.api import render_request  # noqa: E402
from contextfold.domain.canonical import canonical_dumps, canonical_utf8  # noqa: E402
from contextfold.domain.events import RunStarted  # noqa: E402
from contextfold.domain.log import RecordedEvent  # noqa: E402
from contextfold.domain.manifest import BuildConfig  # noqa: E402
from contextfold.projections.builder import build_context  # noqa: E402
from contextfold.projections.fold import fold  # noqa: E402
from contextfold.projections.request_json import conversation_json  # noqa: E402


def plain_dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def c_encoder(obj: Any) -> bytes:
    return canonical_dumps(obj).encode()


METHODS: dict[str, Callable[[Any], bytes]] = {
    "json.dumps": plain_dumps, "C encoder (before)": c_encoder, "canonical_utf8": canonical_utf8}


def data_sets(runs: int) -> dict[str, list[Any]]:
    with bb.TAU.open() as fh:
        tau = json.load(fh)[:runs]
    syn_events = bb.to_events(bb.synth_history())
    events: list[Any] = []
    for run_events in [bb.to_events(run["traj"]) for run in tau] + [syn_events]:
        events += [e.model_dump(mode="json") for e in run_events]
    recorded = [RecordedEvent("synthetic-10k", i, e, "")
                for i, e in enumerate([RunStarted(agent="bench", model="gpt-4o"), *syn_events], 1)]
    state = fold(recorded)
    window = bb.BUDGET_B + bb.RESERVE
    neutral = build_context(state, BuildConfig(provider="neutral", window=window, reserve=bb.RESERVE))
    openai = build_context(state, BuildConfig(provider="openai-chat", window=window, reserve=bb.RESERVE),
                           render=render_request)
    messages = list(conversation_json(neutral.conversation)["messages"]) + list(openai.request["messages"])
    manifest = neutral.manifest
    lines = [line.model_dump(mode="json") for line in (*manifest.fragments, *manifest.excluded_items)]
    return {"events": events, "messages": messages, "lines": lines}


def best(fn: Callable[[Any], bytes], items: list[Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        times.append(time.perf_counter() - t0)
    return min(times)


def deep_documents() -> dict[str, str]:
    """The ``--deep`` documents (module docstring), compact as an API writes them."""
    kinds = ["BinaryExpression", "CallExpression", "Identifier", "MemberExpression", "Literal"]

    def ast(levels: int, members: int) -> str:
        rng = random.Random(1)
        parts = []
        for i in range(levels):
            fields = ",".join(f'"f{j}":"{rng.choice(kinds)}_{rng.randrange(1000)}"' if j % 2
                              else f'"n{j}":{rng.randrange(100_000)}' for j in range(members))
            parts.append(f'{{"type":"{rng.choice(kinds)}","loc":{{"line":{i},"col":{rng.randrange(80)}}},'
                         f'{fields},"body":')
        return "".join(parts) + "null" + "}" * levels

    def wide(levels: int, members: int) -> str:
        level = "{" + ",".join(f'"m{j}":{j}' for j in range(members)) + ',"c":'
        return level * levels + "1" + "}" * levels

    def wide_mid(levels: int, members: int) -> str:
        half = members // 2
        parts = []
        for i in range(levels):
            fields = [f'"k{j}":"L{i}v{j}"' for j in range(members)]
            parts.append("{" + ",".join(fields[:half]) + ',"child":')
        closes = ["," + ",".join(f'"k{j}":"L{i}v{j}"' for j in range(half, members)) + "}"
                  for i in reversed(range(levels))]
        return "".join(parts) + "null" + "".join(closes)

    return {"ast-10k": ast(10_000, 33), "wide-5k": wide(5_000, 100), "wide-900": wide(900, 300),
            "wide-mid-80": wide_mid(80, 2_000)}


def deep_cuts(package: str, docs: dict[str, str], repeat: int) -> dict[str, tuple[float, float]]:
    """Per document: the CPU seconds of its first cut and of its cut at the next build."""
    truncate_module = importlib.import_module(f"{package}.projections.truncate")
    counter = importlib.import_module(f"{package}.projections.tokens").get_counter("cl100k_base")
    out: dict[str, tuple[float, float]] = {}
    for name, text in docs.items():
        counter.count(text)  # counted at fold time in a build, not by the cut
        firsts: list[float] = []
        agains: list[float] = []
        for _ in range(repeat):
            truncate_module._PROBES.clear()
            for budget, times in ((20_000, firsts), (21_000, agains)):
                t0 = time.process_time()
                truncate_module.truncate(text, budget, kind="json", count=counter.count,
                                         line_splitting=counter.line_splitting)
                times.append(time.process_time() - t0)
        out[name] = (min(firsts), min(agains))
    return out


def deep_main(base: str | None, repeat: int) -> int:
    docs = deep_documents()
    sides = {"working tree": "contextfold"}
    if base is not None:
        import bench_ab  # (its unpacking only when asked)

        commit = bench_ab.unpack_base(base, Path(tempfile.mkdtemp()))
        sides = {f"{base} ({commit[:10]})": "contextfold_base", **sides}
    got = {side: deep_cuts(package, docs, repeat) for side, package in sides.items()}
    print("| document | MB | " + " | ".join(f"{side}: first cut, next build" for side in got) + " |")
    print("|---|---|" + "---|" * len(got))
    for name, text in docs.items():
        cells = [f"{first:.2f} s, {again:.2f} s" for first, again in (got[side][name] for side in got)]
        print(f"| {name} | {len(text) / 1e6:.1f} | " + " | ".join(cells) + " |")
    if base is not None:
        old, new = got.values()
        for name in docs:
            again = (f"{old[name][1] / new[name][1]:.1f}x" if new[name][1] >= 0.005
                     else f"{old[name][1]:.2f} s -> under 5 ms")
            print(f"{name}: first cut {old[name][0] / new[name][0]:.1f}x faster, next build {again}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--runs", type=int, default=200, help="tau-bench runs whose events are dumped")
    ap.add_argument("--repeat", type=int, default=5, help="timed passes per method (best reported)")
    ap.add_argument("--deep", action="store_true", help="time the cut of big nested JSON instead")
    ap.add_argument("--base", help="with --deep: the commit whose cuts are timed beside")
    args = ap.parse_args()
    if args.deep:
        return deep_main(args.base, args.repeat)
    print("preparing the data (folding and building the synthetic run) ...", file=sys.stderr)
    sets = data_sets(args.runs)
    print("| data | items | KB/item | json.dumps | C encoder (before) | canonical_utf8 | ratio to "
          "json.dumps | ratio to before |")
    print("|---|---|---|---|---|---|---|---|")
    for name, items in sets.items():
        for item in items:
            if canonical_utf8(item) != plain_dumps(item):
                raise SystemExit(f"{name}: canonical_utf8 differs from json.dumps")
        size = sum(len(plain_dumps(i)) for i in items) / len(items) / 1024
        t = {m: best(fn, items, args.repeat) for m, fn in METHODS.items()}
        per = {m: v / len(items) * 1e6 for m, v in t.items()}
        print(f"| {name} | {len(items):,} | {size:.2f} | {per['json.dumps']:.2f} us | "
              f"{per['C encoder (before)']:.2f} us | {per['canonical_utf8']:.2f} us | "
              f"{t['json.dumps'] / t['canonical_utf8']:.2f}x | "
              f"{t['C encoder (before)'] / t['canonical_utf8']:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
