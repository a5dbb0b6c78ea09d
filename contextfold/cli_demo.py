"""``contextfold demo``: the bundled sample agent run recorded, shown, verified, then the steps
later capabilities add (build, manifest: :data:`DEMO_HOOKS`).

Apart from :mod:`contextfold.cli` because it is a command like the others that live in their
own modules (``cli`` registers it and imports this module when it runs), and because it is the
one command that calls into other commands' modules (:data:`DEMO_STEP_MODULES`): held in
``cli``, the hook list and the sample's reading sat among the code every command loads.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING

from contextfold.cli import print_events, store_for

if TYPE_CHECKING:
    from contextfold.domain.events import AnyEvent
    from contextfold.store_api import Store

__all__ = ["DEMO_HOOKS", "DEMO_STEP_MODULES", "SAMPLE", "handle_demo", "sample_events"]


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


SAMPLE = "fix_invoice_rounding.jsonl"


def sample_events() -> list[AnyEvent]:
    from contextfold.domain.events import event_from_json

    text = resources.files("contextfold.samples").joinpath(SAMPLE).read_text("utf-8")
    return [event_from_json(line) for line in text.splitlines() if line.strip()]


def handle_demo(args: argparse.Namespace) -> int:
    from contextfold.cli_new_store import removed_if_unrecorded
    from contextfold.store.backends import display_url
    from contextfold.store.event_reads import check_run_id

    _load_demo_steps()  # the modules that add steps to the demo (DEMO_HOOKS)
    events = sample_events()
    check_run_id(args.run)  # refused before the store is made: a new file would be left empty
    with removed_if_unrecorded(args), store_for(args, create=True) as store:
        run_id = args.run
        if store.events.exists(run_id):
            n = 2
            while store.events.exists(f"{run_id}-{n}"):
                n += 1
            run_id = f"{run_id}-{n}"
        run = store.run(run_id)
        run.append(events, expected_version=0)
        # the URL masked, as runs shows it: a PostgreSQL store's carries its password
        _out(f"recorded the sample agent run as {run_id!r} in {display_url(store.url)}: "
             f"{len(events)} events\n")
        print_events(run.events(), as_json=False)
        report = run.verify()
        _out(f"\nintegrity: {'ok' if report.ok else 'BROKEN'} ({report.events} events, blake3 hash chain)")
        for hook in DEMO_HOOKS:
            hook(store, run_id)
    return 0


DEMO_HOOKS: list[Callable[[Store, str], None]] = []
"""Later capabilities (build, manifest) append steps to the demo here, when their module is
imported (``DEMO_STEP_MODULES``, which ``demo`` imports)."""


DEMO_STEP_MODULES = ("contextfold.cli_build",)
"""The modules that append steps to the demo (:data:`DEMO_HOOKS`) when imported."""


def _load_demo_steps() -> None:
    """Import the modules that add the demo's steps: ``demo`` needs them, and no other command
    imports a command's module but its own."""
    for module in DEMO_STEP_MODULES:
        importlib.import_module(module)
