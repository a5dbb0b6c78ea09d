"""``diff``, ``why`` and ``manifest`` over what a turn's records hold, through ``cli.main`` on a
real SQLite file (same parser, handlers and exit codes as the installed command)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from contextfold.api import open_store
from contextfold.audit.data import audit_run
from contextfold.audit.report import render_report
from contextfold.cli import main
from contextfold.domain.events import ContextBuilt, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput

LOG = "\n".join(f"{i:04d} INFO compiling module_{i}.rs with a long line of build noise" for i in range(400))


def _cf(capsys: pytest.CaptureFixture[str], store: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--store", store, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _log_cut_then_whole(tmp_path: Path, *, build_turn_3: bool = True) -> str:
    """A SQLite store holding run ``r1``: a failing build log, cut at turn 2 (window 3,000) and
    whole at turn 3 (window 64,000), each turn with its record (turn 3 without one unless
    ``build_turn_3``); the store's URL."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        run = s.run("r1")
        run.append(UserInput("Make the build pass."),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cargo"),)),
                   ToolResult(call_id="c1", content=LOG, exit_code=1))
        run.build(window=3_000, reserve=500)  # turn 2: the log is cut
        run.append(ModelResponse(text="Reading the log."), UserInput("Go on."))
        if build_turn_3:
            run.build(window=64_000, reserve=1_000)  # turn 3: the log is whole
    return store


def test_diff_shows_a_fragment_whole_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _log_cut_then_whole(tmp_path)
    code, out, _ = _cf(capsys, store, "diff", "r1", "2", "3")
    assert code == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("~ e3"))
    assert "whole again" in line and "truncated at turn 2" in line
    code, out, _ = _cf(capsys, store, "diff", "r1", "3", "2")
    line = next(x for x in out.splitlines() if x.strip().startswith("~ e3"))
    assert "truncated" in line and "whole again" not in line and "already" not in line
    code, out, _ = _cf(capsys, store, "diff", "r1", "2", "3", "--json")
    d = json.loads(out)
    assert [x["id"] for x in d["restored"]] == ["e3"] and d["truncated"] == []
    assert d["restored"][0]["before"] < d["restored"][0]["after"]
    # the two records were built under other settings: the diff says so, not only the log's changes
    assert d["config_changed"] == {"budget_tokens": {"from": 2_500, "to": 63_000},
                                   "reserve": {"from": 500, "to": 1_000},
                                   "window": {"from": 3_000, "to": 64_000}}
    code, out, _ = _cf(capsys, store, "diff", "r1", "2", "3")
    assert out.splitlines()[1] == ("  built differently: reserve 500 -> 1000, window 3000 -> 64000, "
                                   "budget_tokens 2500 -> 63000")


def test_a_turn_without_a_record_is_diffed_under_the_other_turns_settings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Turn 2 was built at a 3,000-token window (the log cut); turn 3 never was. Rebuilt at the
    default 128k window, turn 3 showed the log "whole again": a change of settings the diff
    blamed on the log. It is rebuilt under turn 2's recorded settings. Turn 3 is the turn not yet
    answered, so nothing is recorded for it: its live build's record is to be its first."""
    store = _log_cut_then_whole(tmp_path, build_turn_3=False)
    for a, b in (("2", "3"), ("3", "2")):
        code, out, _ = _cf(capsys, store, "diff", "r1", a, b, "--json")
        d = json.loads(out)
        assert code == 0 and d["config_changed"] == {} and d["restored"] == [], d
        assert "e6" in {x["id"] for x in d["entered" if a == "2" else "left"]}  # the new input
    with open_store(store) as s:
        rebuilt = s.run("r1").records(3)
    assert rebuilt == []


NOISE = "\n".join(f"{i:04d} INFO compiling module_{i}.rs" for i in range(80))


def _two_records(tmp_path: Path) -> tuple[str, list[str]]:
    """Turn 6 built live, then built again after a compaction: two records, two requests."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        run = s.run("r1")
        run.append(PolicySet(text="Never force-push."), UserInput("Make the build pass."))
        for t in range(1, 6):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="cargo"),)),
                       ToolResult(call_id=f"c{t}", content=NOISE, exit_code=0))
        run.build(window=64_000, reserve=1_000)
        run.compact("mask", keep_recent=1)
        run.build(window=64_000, reserve=1_000)
        hashes = [r.request_hash for r in run.records(6)]
    assert len(hashes) == 2 and hashes[0] != hashes[1]
    return store, hashes


def _version(store: str) -> int:
    with open_store(store) as s:
        return s.run("r1").version


def test_diff_two_records_of_one_turn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _two_records(tmp_path)
    code, out, _ = _cf(capsys, store, "diff", "r1", "6", "6")  # the default is still the first record
    assert code == 0 and out.splitlines()[1:] == []
    assert out.startswith("turn 6 (record 1 of 2) -> 6 (record 1 of 2):")
    code, out, _ = _cf(capsys, store, "diff", "r1", "6", "6", "--record-b", "last")
    assert code == 0 and out.startswith("turn 6 (record 1 of 2) -> 6 (record 2 of 2):")
    assert "compacted -> e" in out  # the masked tool results, each replaced by its stub
    code, out, _ = _cf(capsys, store, "diff", "r1", "6", "6", "--record-a", "2", "--record-b", "1", "--json")
    d = json.loads(out)
    assert d["from_record"] == {"record": 2, "records": 2, "rebuild": False}
    assert d["to_record"] == {"record": 1, "records": 2, "rebuild": False}
    assert {x["id"] for x in d["entered"]} == {"e4", "e6", "e8", "e10"}  # back whole from the stubs
    code, out, _ = _cf(capsys, store, "diff", "r1", "5", "6", "--json")
    d = json.loads(out)  # turn 5 had no record: rebuilt (and recorded as a rebuild), as before
    assert d["from_record"] is None and d["to_record"] == {"record": 1, "records": 2, "rebuild": False}


def test_why_and_manifest_read_the_record_asked_for(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store, hashes = _two_records(tmp_path)
    code, out, _ = _cf(capsys, store, "why", "r1", "--turn", "6", "e4")
    assert code == 0 and "record 1 of 2" in out and "KEPT    e4 " in out
    code, out, _ = _cf(capsys, store, "why", "r1", "--turn", "6", "e4", "--record", "last")
    assert code == 1 and "record 2 of 2" in out
    assert "e4 was compacted: masked: the stub e14.c1 stands in for event 4" in out, out
    code, out, _ = _cf(capsys, store, "why", "r1", "--turn", "6", "e14.c1", "--record", "2", "--json")
    data = json.loads(out)
    assert code == 0 and (data["record"], data["records"]) == (2, 2)
    assert [(m["id"], m["verdict"]) for m in data["matches"]] == [("e14.c1", "kept")]

    code, out, err = _cf(capsys, store, "manifest", "r1", "--turn", "6")
    assert code == 0 and out.startswith("turn 6 has 2 context_built records")
    assert f"request {hashes[0][:16]}" in out  # the rebuild reproduces the first
    code, out, _ = _cf(capsys, store, "manifest", "r1", "--turn", "6", "--json")
    assert json.loads(out)["request_hash"] == hashes[0]
    code, out, err = _cf(capsys, store, "manifest", "r1", "--turn", "6", "--record", "last", "--json")
    assert code == 0 and json.loads(out)["request_hash"] == hashes[1] and err == ""
    code, out, _ = _cf(capsys, store, "manifest", "r1", "--turn", "6", "--record", "2")
    assert code == 0 and out.startswith("turn 6: record 2 of 2") and f"request {hashes[1][:16]}" in out
    code, out, _ = _cf(capsys, store, "replay", "r1", "--turn", "6", "--verify")
    assert code == 0 and hashes[0][:16] in out  # replay --verify still checks the first


def test_a_record_that_does_not_exist_is_one_typed_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _two_records(tmp_path)
    version = _version(store)
    for args, message in (
            (("diff", "r1", "6", "6", "--record-b", "3"),
             "RecordNotFoundError: run 'r1' turn 6 has 2 context_built records, so there is no record 3: "
             "ask for first, last or a number from 1 to 2\n"),
            # turn 5 has no record: nor is it rebuilt (a rebuild records itself) before B fails
            (("diff", "r1", "5", "6", "--record-b", "3"),
             "RecordNotFoundError: run 'r1' turn 6 has 2 context_built records, so there is no record 3"),
            (("diff", "r1", "5", "6", "--record-a", "first"),
             "RecordNotFoundError: run 'r1' turn 5 has no context_built record yet, so there is no first "
             "record to read: build the turn to record one (contextfold build r1 --turn 5"),
            (("why", "r1", "--turn", "5", "e4", "--record", "last"), "RecordNotFoundError: run 'r1' turn 5"),
            (("why", "r1", "--turn", "9", "e4", "--record", "last"),
             "TurnNotFoundError: run 'r1' has no turn 9"),
            (("why", "nope", "--turn", "1", "e4", "--record", "1"), "RunNotFoundError: run 'nope' not found"),
            (("manifest", "r1", "--turn", "6", "--record", "5"), "RecordNotFoundError: run 'r1' turn 6"),
            (("manifest", "r1", "--record", "2"), "InvalidInputError: --record picks one of a past turn's")):
        code, out, err = _cf(capsys, store, *args)
        assert code == 2 and out == "", (args, out)
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert _version(store) == version  # no rebuild recorded on the way to an error
    for args in (("diff", "r1", "6", "6", "--record-b", "0"),
                 ("why", "r1", "--turn", "6", "e4", "--record", "x")):
        with pytest.raises(SystemExit) as exc:  # not a choice at all: a usage error
            main(["--store", store, *args])
        assert exc.value.code == 2 and "give first, last or a number from 1" in capsys.readouterr().err


@pytest.mark.parametrize("command, flag", [("diff", "--record-a"), ("diff", "--record-b"),
                                           ("why", "--record"), ("manifest", "--record"),
                                           ("replay", "--record"), ("audit", "--record")])
def test_help_explains_the_record_choice(capsys: pytest.CaptureFixture[str], command: str, flag: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0 and flag in text
    assert "first, last, or K" in text and "RecordNotFoundError" in text


def test_the_audit_report_says_a_turn_has_several_records(tmp_path: Path) -> None:
    store, _ = _two_records(tmp_path)
    with open_store(store) as s:
        html = render_report(audit_run(s.run("r1"), rebuild_missing=False))
    start = html.index('<details class="turn" id="turn-6"')
    summary = html[start:html.index("</summary>", start)]
    assert 'data-records="2">2 records, the first shown' in summary
    assert "data-records=" not in html[:start]  # turns with one record carry no tag


def _table_section(out: str, header: str) -> list[str]:
    lines = out.splitlines()
    start = lines.index(header) + 1
    return [x.split()[0] for x in lines[start:lines.index("", start)]]


def test_a_recorded_manifest_table_lists_layers_and_reasons_as_a_rebuilt_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A record's manifest comes back from JSON with sorted keys: its table must not list the
    layers alphabetically where the rebuilt turn's lists them by layer number."""
    store, _ = _two_records(tmp_path)
    code, rebuilt, _ = _cf(capsys, store, "manifest", "r1", "--turn", "6")
    assert code == 0
    code, recorded, _ = _cf(capsys, store, "manifest", "r1", "--turn", "6", "--record", "first")
    assert code == 0
    layers = _table_section(recorded, "layer          tokens")
    assert layers == _table_section(rebuilt, "layer          tokens")
    assert layers == ["policy", "tools", "goal", "plan", "history", "retrieval", "observations", "input"]
    reasons = [line for line in recorded.splitlines() if line.startswith("excluded: ")]
    assert reasons == [line for line in rebuilt.splitlines() if line.startswith("excluded: ")]
    assert [kv.split("=")[0] for kv in reasons[0].removeprefix("excluded: ").split(", ")] == [
        "duplicate", "superseded", "low_priority", "over_budget", "stale"]


def test_audit_of_a_turn_says_which_record_it_checked(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    store, _ = _two_records(tmp_path)
    code, out, err = _cf(capsys, store, "audit", "r1", "--turn", "6")
    line = next(x for x in out.splitlines() if x.startswith("request: "))
    assert "the first of the turn's 2 records" in line, (code, out, err)


def test_usage_and_diff_check_turns_without_folding_the_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn check counts the run's model responses in the store: ``usage`` and ``diff`` folded
    the whole log for it (~5 s on a 10,000-event run, its tokenization) before doing their work."""
    store = _log_cut_then_whole(tmp_path)

    def no_fold(*_: object, **__: object) -> None:
        raise AssertionError("the whole run was folded")

    monkeypatch.setattr("contextfold.projections.fold.fold", no_fold)  # Run.state imports it when it runs
    code, out, _ = _cf(capsys, store, "usage", "r1", "--turn", "2", "--input-tokens", "900")
    assert code == 0 and "turn 2 input 900 (estimate" in out
    code, out, _ = _cf(capsys, store, "diff", "r1", "2", "3")
    assert code == 0 and out.startswith("turn 2 -> 3:")
    code, _, err = _cf(capsys, store, "diff", "r1", "2", "4")
    assert code == 2 and "turn 4" in err and "1..3" in err
    code, _, err = _cf(capsys, store, "usage", "r1", "--turn", "9", "--input-tokens", "900")
    assert code == 2 and "turn 9" in err
    code, _, err = _cf(capsys, store, "usage", "nope", "--turn", "1", "--input-tokens", "900")
    assert code == 2 and "nope" in err


def test_a_look_at_a_past_turn_without_a_record_writes_nothing_and_takes_the_runs_settings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``manifest RUN --turn 3`` (a look, "nothing is written") appended a rebuild record of turn 3
    built under the defaults (neutral, window 128000) instead of the run's recorded settings, and
    said nothing; ``replay --turn 2`` recorded one the same way, which ``replay --verify`` then
    called a match "with its record" as if a model had been sent it."""
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    assert main(["--store", store, "demo"]) == 0  # turn 6 recorded: anthropic, window 16000, reserve 2000
    run = "demo-fix-invoice"

    def records(turn: int) -> list[ContextBuilt]:
        with open_store(store) as s:
            return s.run(run).records(turn)

    code, out, err = _cf(capsys, store, "manifest", run, "--turn", "3")
    assert code == 0 and err == "", err
    assert out.startswith("turn 3 has no context_built record: rebuilt from the log with anthropic, window "
                          "16000, reserve 2000 (the nearest record's); nothing was written"), out
    assert "provider anthropic" in out and "window 16000  reserved 2000" in out
    code, out, err = _cf(capsys, store, "manifest", run, "--turn", "3", "--window", "20000", "--json")
    manifest = json.loads(out)
    assert code == 0 and (manifest["provider"], manifest["window_tokens"]) == ("anthropic", 20_000)
    assert "(the nearest record's, --window as given)" in err
    code, out, err = _cf(capsys, store, "manifest", run, "--turn", "3", "--window", "0")
    assert code == 2 and out == "" and "InvalidInputError: invalid build config: window" in err, err
    assert records(3) == []

    code, out, err = _cf(capsys, store, "replay", run, "--turn", "2", "--verify")
    assert code == 2 and out == ""
    assert "turn 2 has no context_built record yet, so there is no first record" in err
    assert records(2) == []  # --verify never records what it would then check against
    code, out, err = _cf(capsys, store, "replay", run, "--turn", "2")
    assert code == 0 and json.loads(out)["max_tokens"] == 2_000  # the run's anthropic request
    assert err == ("note: turn 2 had no context_built record: this rebuild, with anthropic, window 16000, "
                   "reserve 2000 (the nearest record's), is recorded as its first, marked as a rebuild "
                   "(replay --verify checks against it)\n")
    [made] = records(2)
    assert made.rebuild and made.manifest["config"]["provider"] == "anthropic"
    code, out, _ = _cf(capsys, store, "replay", run, "--turn", "2", "--verify")
    assert code == 0 and out.startswith("ok: turn 2 rebuilt from the log matches its first record, a "
                                         "rebuild (no live build of the turn was recorded"), out
    code, out, _ = _cf(capsys, store, "replay", run, "--turn", "6", "--verify")
    assert code == 0 and out.startswith("ok: turn 6 rebuilt from the log matches its record (request ")


def test_a_rebuild_of_a_turn_another_worker_records_meanwhile_records_it_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay RUN --turn N`` (or ``build RUN --turn N``) on two workers at once: each saw no
    record of the turn, and each appended its rebuild, so the turn held two (of two providers when
    the flags differed). Here the other worker records the turn between this one's check and its
    rebuild: this one then reproduces that record, or refuses flags that differ from it (exit 2),
    and appends nothing."""
    from contextfold import rebuild_api
    from contextfold.domain.manifest import BuildConfig

    store = f"sqlite:///{tmp_path / 'demo.db'}"
    assert main(["--store", store, "demo"]) == 0  # turn 6 recorded: anthropic, window 16000, reserve 2000
    run_id = "demo-fix-invoice"

    def other_worker_first(real: Any) -> Any:
        first: set[int] = set()  # once a turn: rebuild_api's own calls of rebuild go through it too

        def rebuild(run: Any, turn: int, *args: Any, **kwargs: Any) -> Any:
            if turn in first:
                return real(run, turn, *args, **kwargs)
            first.add(turn)
            with open_store(store) as other:
                real(other.run(run_id), turn, BuildConfig(
                    provider="openai-chat" if turn == 2 else "anthropic", window=16_000, reserve=2_000),
                    record=True)
            return real(run, turn, *args, **kwargs)
        return rebuild

    monkeypatch.setattr("contextfold.cli_build.rebuild", other_worker_first(rebuild_api.rebuild))
    # Run.build's (it imports rebuild_api's when it runs)
    monkeypatch.setattr("contextfold.rebuild_api.rebuild", other_worker_first(rebuild_api.rebuild))
    code, out, err = _cf(capsys, store, "build", run_id, "--turn", "2", "--provider", "anthropic")
    assert code == 2 and out == "" and "InvalidInputError: turn 2 has a context_built record" in err, err
    code, out, err = _cf(capsys, store, "replay", run_id, "--turn", "3")
    assert code == 0 and json.loads(out)["max_tokens"] == 2_000, err
    with open_store(store) as s:
        assert [(r.rebuild, r.provider) for r in s.run(run_id).records(2)] == [(True, "openai-chat")]
        assert [(r.rebuild, r.provider) for r in s.run(run_id).records(3)] == [(True, "anthropic")]


def test_a_replay_whose_turn_another_worker_recorded_meanwhile_says_the_record_is_that_workers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay RUN --turn N`` that lost the turn's record to another worker said its own rebuild
    "is recorded as its first, marked as a rebuild", though nothing of it was recorded: the turn's
    record is the other worker's (here a rebuild for the same settings, then for another provider)."""
    from contextfold import rebuild_api
    from contextfold.domain.manifest import BuildConfig

    store = f"sqlite:///{tmp_path / 'demo.db'}"
    assert main(["--store", store, "demo"]) == 0  # turn 6 recorded: anthropic, window 16000, reserve 2000
    run_id = "demo-fix-invoice"
    real = rebuild_api.rebuild

    def other_worker_first(run: Any, turn: int, *args: Any, **kwargs: Any) -> Any:
        with open_store(store) as other:
            real(other.run(run_id), turn, BuildConfig(provider="openai-chat" if turn == 4 else "anthropic",
                                                      window=16_000, reserve=2_000), record=True)
        return real(run, turn, *args, **kwargs)

    monkeypatch.setattr("contextfold.cli_build.rebuild", other_worker_first)
    code, out, err = _cf(capsys, store, "replay", run_id, "--turn", "3")
    with open_store(store) as s:
        assert len(s.run(run_id).records(3)) == 1  # the other worker's only
    assert code == 0 and json.loads(out)["max_tokens"] == 2_000, err
    assert err == ("note: turn 3 had no context_built record when this rebuild, with anthropic, window "
                   "16000, reserve 2000 (the nearest record's), began; another worker recorded the turn "
                   "meanwhile (a rebuild, for anthropic), so this rebuild was not recorded: the turn's first"
                   " record is that worker's, and the request shown reproduces it (replay --verify checks "
                   "against it); this rebuild's request is the same\n"), err
    code, out, err = _cf(capsys, store, "replay", run_id, "--turn", "4")
    with open_store(store) as s:
        [theirs] = s.run(run_id).records(4)
    assert code == 0 and "messages" in json.loads(out), err  # the openai-chat request of that record
    assert theirs.provider == "openai-chat" and "is recorded as its first" not in err
    assert ("(a rebuild, for openai-chat), so this rebuild was not recorded: the turn's first record is "
            "that worker's") in err
    assert "this rebuild's request differs from it (request " in err
    assert f", the record's {theirs.request_hash[:16]})\n" in err


def test_the_build_a_missing_record_suggests_runs_as_printed_on_the_store_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The hint of a turn without a record names the ``build`` that records one. Given ``--store``,
    it names that store too: printed without it, the command ran on the default store (or
    ``$CONTEXTFOLD_STORE``), where the run is not, and failed with RunNotFoundError."""
    (tmp_path / "my runs").mkdir()
    store, _ = _two_records(tmp_path / "my runs")
    monkeypatch.delenv("CONTEXTFOLD_STORE", raising=False)
    monkeypatch.chdir(tmp_path)  # the default store (./runs.db) is not this one
    code, _, err = _cf(capsys, store, "diff", "r1", "5", "6", "--record-a", "first")
    assert code == 2 and f"--store '{store}'" in err, err
    suggested = re.search(r"\(contextfold (.*?); in Python", err)
    assert suggested is not None, err
    capsys.readouterr()
    assert main(shlex.split(suggested.group(1))) == 0, capsys.readouterr().err
    code, out, err = _cf(capsys, store, "diff", "r1", "5", "6", "--record-a", "first")
    assert code == 0 and out.startswith("turn 5 -> 6 (record 1 of 2)"), err
    # from $CONTEXTFOLD_STORE: the command as printed, in the same shell, finds the store already
    monkeypatch.setenv("CONTEXTFOLD_STORE", store)
    capsys.readouterr()
    assert main(["diff", "r1", "4", "6", "--record-a", "first"]) == 2
    err = capsys.readouterr().err
    assert "(contextfold build r1 --turn 4; in Python Run.build(turn=4))" in err, err


@pytest.mark.postgres
def test_a_suggested_store_never_shows_its_password(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A password in ``--store`` is masked in the suggested command, as wherever else a store URL
    is shown (an error line is often logged): that command then needs it put back, or
    ``PGPASSWORD``. The test server trusts local connections, so the password is not checked."""
    url = urlparse(pg_url)
    store = url._replace(netloc=f"{url.username}:s3cret@{url.hostname}:{url.port or 5432}").geturl()
    with open_store(store) as s:
        s.run("r1").append(UserInput("Make the build pass."), ModelResponse(text="Looking."),
                           UserInput("Go on."))
    code, _, err = _cf(capsys, store, "why", "r1", "--turn", "1", "e1", "--record", "first")
    assert code == 2 and "s3cret" not in err, err
    masked = url._replace(netloc=f"{url.username}:***@{url.hostname}:{url.port or 5432}").geturl()
    assert f"--store {shlex.quote(masked)};" in err, err
