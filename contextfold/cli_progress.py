"""Progress bars for the command line's long work (importing, folding a long run, auditing).

Apart from :mod:`contextfold.cli` because every command module draws one and ``cli`` is
full. The domain code takes an ``advance(n)`` callback (``append_new_runs(progress=...)``,
``Run.build(progress=...)``, ...); this module is the only place that draws it.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from contextfold.cli_files import stdout_is_terminal

if TYPE_CHECKING:  # not contextfold.api's: ``import`` draws a bar and loads no builder
    from contextfold.store_api import Store

__all__ = ["fold_bar", "progress_bar"]


def _on_terminal() -> bool:
    """Both streams are a terminal: a person is watching. Output piped or redirected is a
    script's (or a log file's), where a redrawn bar is noise."""
    return stdout_is_terminal() and sys.stderr.isatty()


@contextlib.contextmanager
def progress_bar(total: int | None, label: str, *, quiet: bool = False) -> Iterator[Callable[[int], None]]:
    """An ``advance(n)`` callable for ``total`` steps, drawn as a bar on stderr only on a terminal
    and unless ``quiet`` (``--json``: the output is data). Transient: gone once the work ends,
    or is interrupted, so the command's own output (or its one-line error) stands alone.
    ``total=None`` is work whose steps are not known (parsing one big file): a pulsing bar, redrawn
    by rich's own thread, so the terminal shows work, not a hang."""
    if quiet or (total is not None and total < 2) or not _on_terminal():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)


@contextlib.contextmanager
def fold_bar(store: Store, args: argparse.Namespace, label: str, *,
             folds: int = 1) -> Iterator[Callable[[int], None]]:
    """:func:`progress_bar` over the events of ``args.run`` that the command folds: ``folds``
    times the run's length at most (a command that may fold it twice, or only a prefix, says
    so; the bar then ends early rather than overflow). Quiet with ``--json``."""
    total = store.events.version(args.run) * folds
    with progress_bar(total, label, quiet=bool(getattr(args, "json", False))) as advance:
        yield advance
