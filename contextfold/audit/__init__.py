"""Audit what the model saw: per-turn audit data, the HTML report, manifest diffs.

``diff``, ``effects`` (the turns before and after each compaction) and ``report`` are pure;
``data`` folds a run's events (handed in by the caller) into the per-turn view, rebuilding turns
that have no record.
"""

__all__: list[str] = []
