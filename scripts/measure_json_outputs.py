"""How long ``contextfold schema NAME`` takes, and validating each ``--json`` output against it.

Why: the schemas are the contract scripts build on, and the tests validate every command's output
against them (``tests/e2e/test_json_outputs.py``); this says what that costs. Each ``schema NAME``
runs as a user runs it, a new process, beside ``contextfold --help`` (the start-up every command
pays) as the ratio's base; each validation (jsonschema's Draft 2020-12 validator, built once per
schema as a script would) beside the command that printed the output, run in-process.

    .venv/bin/python scripts/measure_json_outputs.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema

from contextfold.cli import SCHEMAS, main

RUN = "demo-fix-invoice"
COMMANDS: dict[str, tuple[str, ...]] = {
    "runs": ("runs", "--json"),
    "verify": ("verify", RUN, "--json"),
    "manifest": ("manifest", RUN, "--turn", "6", "--json"),
    "audit": ("audit", RUN, "--json"),
    "audit-turn": ("audit", RUN, "--turn", "6", "--json"),
    "why": ("why", RUN, "--turn", "6", "e9", "--json"),
    "why-turns": ("why", RUN, "e9", "--json"),
    "diff": ("diff", RUN, "5", "6", "--json"),
    "replay-verify": ("replay", RUN, "--turn", "6", "--verify", "--json"),
    "compact": ("compact", RUN, "--dry-run", "--json"),
}


def _process_seconds(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "contextfold", *args], check=True, capture_output=True)
    return time.perf_counter() - start


def _in_process(*args: str) -> tuple[float, str]:
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        main(list(args))
    return time.perf_counter() - start, out.getvalue()


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    help_s = statistics.median(_process_seconds("--help") for _ in range(repeat))
    print(f"contextfold --help (start-up): {help_s * 1000:.0f} ms")
    for name in sorted(SCHEMAS):
        s = statistics.median(_process_seconds("schema", name) for _ in range(repeat))
        print(f"contextfold schema {name:<14} {s * 1000:6.0f} ms  ({s / help_s:.2f}x --help)")
    with tempfile.TemporaryDirectory() as where:
        store = f"sqlite:///{Path(where) / 'm.db'}"
        with contextlib.redirect_stdout(io.StringIO()):
            main(["--store", store, "demo"])
        for name, args in COMMANDS.items():
            schema = SCHEMAS[name]()
            validator = jsonschema.Draft202012Validator(schema)
            command, text = _in_process("--store", store, *args)
            data = json.loads(text)
            runs = []
            for _ in range(repeat):
                start = time.perf_counter()
                validator.validate(data)
                runs.append(time.perf_counter() - start)
            v = statistics.median(runs)
            print(f"validate {name:<14} {v * 1000:7.2f} ms for {len(text):>7} bytes "
                  f"({v / command:.3f}x the command's {command * 1000:.0f} ms in-process)")


if __name__ == "__main__":
    main_()
