"""The audit reads a run's records in one pass, sharing excluded lines between turns
(``contextfold.audit.records``): what it reads equals each record validated on its own."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from contextfold.api import Run, open_store
from contextfold.audit.data import Integrity, audit_run, collect
from contextfold.audit.records import ManifestReader, read_records
from contextfold.audit.report import prefix_pairs_text, render_report
from contextfold.cli_audit import _summary_text  # what `contextfold audit RUN` prints
from contextfold.domain.events import ContextBuilt, ModelResponse, PolicySet, UserInput
from contextfold.domain.manifest import ContextManifest
from tests.unit.test_audit_report import make_synthetic_run


@pytest.fixture
def run(tmp_path: Path) -> Run:
    r = open_store(f"sqlite:///{tmp_path / 'a.db'}").run("syn")
    make_synthetic_run(r, 40)  # at a 4k window: each record leaves out more of the history
    return r


def _first_records(run: Run) -> dict[int, dict[str, Any]]:
    first: dict[int, dict[str, Any]] = {}
    for rec in run.events():
        if isinstance(rec.event, ContextBuilt):
            first.setdefault(rec.event.turn, rec.event.manifest)
    return first


def test_each_turns_manifest_is_its_first_record_validated_alone(run: Run) -> None:
    audit = audit_run(run)
    first = _first_records(run)
    assert [t.turn for t in audit.turns] == sorted(first)
    for t in audit.turns:
        assert t.manifest == ContextManifest.model_validate(first[t.turn])
    assert len(audit.turns[-1].manifest.excluded_items) > 20  # the case the sharing is for


def test_consecutive_turns_hold_one_object_per_unchanged_excluded_line(run: Run) -> None:
    """A long run's records repeat nearly all of the one before: the audit held every line of
    every record as its own object (6.2 GB at 1,666 turns); a line equal to the previous turn's
    line of the same id is now that object."""
    audit = audit_run(run)
    shared = 0
    for before, after in zip(audit.turns, audit.turns[1:], strict=False):
        held = {e.id: e for e in before.manifest.excluded_items}
        for e in after.manifest.excluded_items:
            if e.id in held and held[e.id] == e:
                assert held[e.id] is e
                shared += 1
    assert shared > 100


def test_the_pure_collect_reads_the_records_as_the_store_path_does(run: Run) -> None:
    """``collect`` given whole events (no records read beforehand) reads them itself."""
    whole = collect(run.events(), run_id=run.run_id, integrity=Integrity(ok=True, events=run.version),
                    rebuild=None)
    assert whole.turns == audit_run(run, rebuild_missing=False).turns


def test_a_changed_line_is_validated_again_and_an_invalid_one_raises(run: Run) -> None:
    records = list(_first_records(run).values())
    reader = ManifestReader()
    reader.read(records[-2])
    last = records[-1]
    changed = [{**line, "detail": "edited"} if i == 0 else line
               for i, line in enumerate(last["excluded_items"])]
    got = reader.read({**last, "excluded_items": changed})
    assert got == ContextManifest.model_validate({**last, "excluded_items": changed})
    assert got.excluded_items[0].detail == "edited"
    broken = [{**line, "tokens": "many"} if i == 1 else line for i, line in enumerate(last["excluded_items"])]
    with pytest.raises(ValidationError):
        reader.read({**last, "excluded_items": broken})


def test_slimmed_records_keep_what_the_fold_reads(run: Run) -> None:
    events, recorded = read_records(run.events(), slim=True)
    builds = [r for r in events if isinstance(r.event, ContextBuilt)]
    assert builds and all(isinstance(r.event, ContextBuilt) and r.event.manifest == {} for r in builds)
    assert sum(recorded.counts.values()) == len(builds)
    assert set(recorded.estimates) == {r.position for r in builds}


def test_a_run_built_alternately_for_two_providers_reuses_each_ones_prefix(tmp_path: Path) -> None:
    """The cache key names the provider that renders the prefix, and the audit compared each turn
    with the turn before: a run built for Anthropic and OpenAI in turn showed "prefix changed" at
    every turn though each provider's prefix never changed."""
    run = open_store(f"sqlite:///{tmp_path / 'alt.db'}").run("alt")
    run.append(PolicySet(text="Be careful."), UserInput("go"))
    for i in range(6):
        run.build(provider=("anthropic", "openai-chat")[i % 2], window=8_000, reserve=1_000)
        run.append(ModelResponse(text=f"step {i}"), UserInput(f"next {i}"))
    audit = audit_run(run)
    assert [t.prefix_changed for t in audit.turns] == [None, None, False, False, False, False]
    assert audit.summary.prefix_reused == 4 and audit.summary.prefix_changed_turns == ()
    # out of the 4 turns with an earlier turn of their provider, not of turns - 1 (5): a reader
    # took "4 of 5 turns re-used the previous prefix" for a cache miss that never happened
    assert audit.summary.prefix_compared == 4
    assert "prefix stability: 4 of 4 turns re-used the previous prefix" in _summary_text(audit)
    assert 'data-reused="4">4 of 4 turns re-used' in render_report(audit)
    # which pairs: each turn against its provider's latest earlier turn, the one two before here
    assert audit.summary.prefix_pairs == ((1, 3), (2, 4), (3, 5), (4, 6))
    assert ("prefix stability: 4 of 4 turns re-used the previous prefix (compared turns 3-6 with 1-4: "
            "each turn's cache key with its provider's latest earlier turn's)\n") in _summary_text(audit)
    assert ("re-used the previous stable prefix</span> (compared turns 3-6 with 1-4: each turn's cache "
            "key with its provider's latest earlier turn's)") in html.unescape(render_report(audit))


@pytest.mark.parametrize(("pairs", "text"), [
    ((), "no turn had an earlier turn built for its provider to compare with"),
    (((1, 2),), "compared turn 2 with 1"),
    (((1, 2), (2, 3), (3, 4)), "compared turns 2-4 with 1-3"),
    (((1, 2), (2, 3), (1, 4), (4, 5), (3, 6)), "compared turns 2-3 with 1-2, 4 with 1, 5 with 4, 6 with 3"),
    (tuple((t, t + 2) for t in range(1, 30, 2)) + tuple((t, t + 1) for t in range(40, 60)),
     "compared turns 3 with 1, 5 with 3, 7 with 5, 9 with 7, 11 with 9, 13 with 11, 15 with 13, 17 with 15, "
     "19 with 17, 21 with 19 and 25 more pairs (audit --json lists every one)"),
])
def test_the_prefix_pairs_are_said_in_ranges(pairs: tuple[tuple[int, int], ...], text: str) -> None:
    assert prefix_pairs_text(pairs).startswith(text)
