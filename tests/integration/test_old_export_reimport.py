"""An export written before audio and video ``data:`` URLs became artifacts (``events --json``
of a log that holds a voice note inline), imported again, is that log: the clip stays inline,
so the builds it recorded replay to their recorded hashes and the copy exports as the original.

Why: the store moves an inline clip into an artifact when it is appended (``store.media``,
``_stored_as_sent``: a new log is smaller so), and an import appends. Moved, the clip changed
what its run's recorded builds had sent: a note standing for it (Anthropic, an API without
audio) names it by its artifact's hash, not by its URL's, and the neutral request cites the
artifact, so ``replay --verify`` of the copy reported a request_hash mismatch on every turn the
clip was in, and the copy's export was no longer the file it came from. An events export is a
log, imported event for event (``importers.events_jsonl``); any other history is not, and its
clips are moved as before (``test_inline_timed_media``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.cli import main
from contextfold.domain.events import DocumentBlock, ModelResponse, UserInput, canonical_json
from contextfold.store.event_store import EventStore
from tests.integration.test_newer_release_log import _write_raw
from tests.unit.test_media_duration import wav

B64 = base64.b64encode(wav(1.5)).decode("ascii")
BUILDS = [("anthropic", "claude-sonnet-4-5"), ("neutral", None), ("openai-chat", "gpt-4o-audio-preview"),
          ("gemini", "gemini-2.5-flash")]


def _old_log(url: str) -> None:
    """A run as a release before the move wrote it: a voice note inline in its event, chained,
    then a build per provider recorded on each of two turns."""
    store = EventStore(url)
    try:
        store.append("r1", [UserInput("Here is a voice note.")])
        old = UserInput(content=(DocumentBlock(url=f"data:audio/wav;base64,{B64}", media_type="audio/wav",
                                               duration_ms=1_500),))
        _write_raw(store, "r1", "user_input@1", canonical_json(old))
    finally:
        store.close()
    with open_store(url) as s:
        run = s.run("r1")
        for provider, model in BUILDS:
            run.build(provider, model=model, window=100_000, reserve=2_000)
        run.append(ModelResponse(text="It is silent."), UserInput("And again?"))
        for provider, model in BUILDS:
            run.build(provider, model=model, window=100_000, reserve=2_000)


def _export(url: str, run_id: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    capsys.readouterr()
    assert main(["--store", url, "events", run_id, "--json", *extra]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("extra", [(), ("--with-artifacts",)], ids=["plain", "with-artifacts"])
def test_an_old_export_imported_again_replays_to_its_recorded_hashes(
        tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...]) -> None:
    old_url = f"sqlite:///{tmp_path / 'old.db'}"
    _old_log(old_url)
    exported = _export(old_url, "r1", capsys, *extra)
    assert f"data:audio/wav;base64,{B64}" in exported  # the old format: the clip inline
    path = tmp_path / "r1.jsonl"
    path.write_text(exported)
    assert main(["--store", store_url, "import", str(path), "--run", "r2"]) == 0, capsys.readouterr().err
    with open_store(store_url) as store:
        run = store.run("r2")
        assert run.verify().ok
        turns = {r.event.turn for r in run.events() if r.event.type == "context_built"}
        assert turns == {1, 2}
        for turn in sorted(turns):
            for k in range(1, len(run.records(turn)) + 1):  # each provider's record of the turn
                report = run.replay(turn, record=k)
                assert report.ok, (turn, k, report.differences)
        assert store.events.artifact_count() == 0  # nothing moved
    copy = _export(store_url, "r2", capsys, *extra)
    assert [json.loads(line) for line in copy.splitlines()] == [
        json.loads(line) for line in exported.splitlines()]
