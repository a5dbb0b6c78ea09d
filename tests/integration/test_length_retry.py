"""A provider refuses a request as too long; the runtime builds the turn again, smaller, and sends
that. The turn then holds two ``context_built`` records, and the second is what the model saw:
``replay`` (API and ``replay --verify``) checks the one asked for, the first by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.api import Run, open_store
from contextfold.cli import main
from contextfold.domain.errors import InvalidInputError, RecordNotFoundError
from contextfold.domain.events import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput

PROVIDER_LIMIT = 9_000
"""The input the fake provider takes: a request over it is refused, as a provider refuses one
past its context window (our 20,000-token window was declared too large)."""


def _run_to_a_refusal(run: Run) -> int:
    """An agent loop until the provider refuses a request: it then builds the turn again with a
    window the provider takes. Returns the turn."""
    run.append(RunStarted(model="gpt-4o", encoding="cl100k_base"), UserInput("Summarise the build logs"))
    for i in range(8):
        built = run.build("openai-chat", window=20_000, reserve=2_000)
        if built.manifest.selected_tokens > PROVIDER_LIMIT:  # refused: "maximum context length"
            retry = run.build("openai-chat", window=PROVIDER_LIMIT + 2_000, reserve=2_000)
            assert retry.manifest.turn == built.manifest.turn
            assert retry.manifest.selected_tokens <= PROVIDER_LIMIT
            return retry.manifest.turn
        log = "\n".join(f"{i}:{k} INFO compiled unit {k} in {k % 7} ms" for k in range(300))
        call = ToolCall(call_id=f"c{i}", name="cat")
        run.append(ModelResponse(text=f"reading log {i}", tool_calls=(call,)),
                   ToolResult(call_id=call.call_id, content=log))
    raise AssertionError("the provider never refused")


def test_replay_checks_the_retried_request_the_model_saw(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        run = store.run("r")
        turn = _run_to_a_refusal(run)
        first, sent = run.records(turn)
        assert first.request_hash != sent.request_hash
        assert run.replay(turn).recorded == first  # the default stays the first record
        for which in ("last", 2):
            report = run.replay(turn, record=which)
            assert report.ok, report.differences
            assert report.recorded == sent and (report.record, report.records) == (2, 2)
            assert report.rebuilt.request_hash == sent.request_hash
        with pytest.raises(RecordNotFoundError, match="no record 3"):
            run.replay(turn, record=3)
        for bad in (0, "second", True):
            with pytest.raises(InvalidInputError, match="record is 'first', 'last' or a 1-based index"):
                run.replay(turn, record=bad)  # type: ignore[arg-type]


def test_replay_verify_record_last_on_the_command_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with open_store(url) as store:
        turn = _run_to_a_refusal(store.run("r"))
        sent = store.run("r").records(turn)[1]
    capsys.readouterr()
    assert main(["--store", url, "replay", "r", "--turn", str(turn), "--verify", "--record", "last"]) == 0
    out = capsys.readouterr().out
    assert f"matches its record 2 of 2 (request {sent.request_hash[:16]}" in out
    assert main(["--store", url, "replay", "r", "--turn", str(turn), "--verify", "--record", "3"]) == 2
    assert ("has 2 context_built records, so there is no record 3: ask for first, last or a number from 1 "
            "to 2") in capsys.readouterr().err
    # without --verify the request shown is the first record's: --record would be ignored
    assert main(["--store", url, "replay", "r", "--turn", str(turn), "--record", "last"]) == 2
    assert "--record picks the record replay --verify checks" in capsys.readouterr().err


def test_audit_turn_checks_the_record_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with open_store(url) as store:
        turn = _run_to_a_refusal(store.run("r"))
        first, sent = store.run("r").records(turn)
    capsys.readouterr()
    assert main(["--store", url, "audit", "r", "--turn", str(turn), "--record", "last"]) == 0
    out = capsys.readouterr().out
    assert (f"request: re-derived {sent.request_hash[:16]} matches the recorded {sent.request_hash[:16]} "
            f"(record 2 of the turn's 2 records: --record picks another)") in out
    assert f"window {PROVIDER_LIMIT + 2_000}" in out  # the table is the retried request's
    assert main(["--store", url, "audit", "r", "--turn", str(turn), "--json"]) == 0
    assert f'"request_hash": {{"recorded": "{first.request_hash}"' in capsys.readouterr().out
    assert main(["--store", url, "audit", "r", "--turn", str(turn), "--record", "3"]) == 2
    assert ("has 2 context_built records, so there is no record 3: ask for first, last or a number from 1 "
            "to 2") in capsys.readouterr().err
    assert main(["--store", url, "audit", "r", "--record", "last"]) == 2  # the summary covers every turn
    assert "--record applies to one turn: add --turn N" in capsys.readouterr().err
