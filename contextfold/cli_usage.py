"""CLI command ``usage``: record a turn's provider-reported token usage (``Run.observe_usage``).

``usage RUN --turn N --input-tokens X``: later builds calibrate their budget with it. Apart from
:mod:`contextfold.cli_audit` (where it was) because that module imports the audit, the builder and
the renderers, and a runtime may run ``usage`` after every model response: recording a report
checks it against the turn's recorded estimates and appends it, nothing more
(``tests/unit/test_cli_light_imports.py``). Imported when the command runs (``cli.register``).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_files import shown_json
from contextfold.usage_api import UsageWarning

__all__: list[str] = []


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _handle_usage(args: argparse.Namespace) -> int:
    with store_for(args) as store:
        run = store.run(args.run)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UsageWarning)
            rec = run.observe_usage(args.turn, args.input_tokens, cached_tokens=args.cached_tokens,
                                    output_tokens=args.output_tokens, model=args.model, force=args.force)
        records = run.records(args.turn)
    said: list[str] = []
    for w in caught:  # the report is recorded: a warning says what it will not do (calibrate)
        if issubclass(w.category, UsageWarning):
            said.append(str(w.message))
            sys.stderr.write(f"WARNING: {visible(str(w.message))}\n")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    est = int(records[-1].manifest.get("selected_tokens", 0)) if records else None
    if args.json:
        from contextfold.domain.command_outputs import UsageOutput

        shown = UsageOutput(run_id=args.run, turn=args.turn, position=rec.position,
                            input_tokens=args.input_tokens, cached_tokens=args.cached_tokens,
                            output_tokens=args.output_tokens, model=args.model, estimated_tokens=est,
                            ratio=None if est is None else round(args.input_tokens / max(1, est), 6),
                            warnings=tuple(said))
        _out(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)))
        return 0
    line = f"recorded usage_observed at position {rec.position}: turn {args.turn} input {args.input_tokens}"
    if est is not None:
        line += f" (estimate {est}, observed/estimated {args.input_tokens / max(1, est):.3f})"
    else:
        line += " (turn has no build record: it will not calibrate later builds)"
    _out(line)
    return 0
