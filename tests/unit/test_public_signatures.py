"""The public API's methods say what they take and return, for a caller's type checker."""

from __future__ import annotations

import inspect

from contextfold import Run
from contextfold.compaction_api import compact


def test_run_compact_takes_the_options_compact_takes_and_says_what_it_returns() -> None:
    """``Run.compact`` forwarded ``**options: Any`` and returned ``Any``: a caller's ``mypy --strict``
    saw neither ``keep_recent`` nor the ``CompactionReport`` it gets back."""
    method = inspect.signature(Run.compact)
    function = inspect.signature(compact)
    assert list(method.parameters)[1:] == list(function.parameters)[1:]
    for name in list(function.parameters)[1:]:
        ours, theirs = method.parameters[name], function.parameters[name]
        assert (ours.kind, ours.default) == (theirs.kind, theirs.default), name
    assert method.return_annotation == "CompactionReport"
