"""`contextfold audit / why / usage` end to end on a real SQLite file.

The tests call ``contextfold.cli.main`` in-process (same parser, handlers and exit
codes; ``tests.cli_runner``) to keep the suite fast.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.events import ContextBuilt, ModelResponse
from contextfold.domain.manifest import ContextManifest
from contextfold.projections.builder import canonical_hash
from tests.cli_runner import cf as run_cli

RUN = "demo-fix-invoice"
CLI = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def cf() -> CLI:
    """The command, ``cli.main`` in-process (``tests.cli_runner``)."""
    return run_cli


def test_audit_html_with_json_keeps_stdout_json(tmp_path: Path, cf: CLI) -> None:
    """``audit --html PATH --json``: stdout is the audit JSON (a --json output is data); the
    "wrote PATH" line went before it, so ``json.loads`` of stdout failed. It goes to stderr."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    out = cf("audit", RUN, "--html", "r.html", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["run_id"] == RUN
    assert out.stderr.startswith("wrote r.html: 6 turns, integrity ok")
    assert (tmp_path / "r.html").read_text().count('<details class="turn"') == 6
    alone = cf("audit", RUN, "--html", "r.html", cwd=tmp_path)  # without --json: stdout, as before
    assert alone.stdout.startswith("wrote r.html: 6 turns") and not alone.stderr


def _recorded(tmp_path: Path, run_id: str, turn: int) -> ContextManifest:
    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        return ContextManifest.model_validate(store.run(run_id).records(turn)[0].manifest)


def test_audit_html_json_and_turn_check(tmp_path: Path, cf: CLI) -> None:
    assert cf("demo", cwd=tmp_path).returncode == 0
    out = cf("audit", RUN, "--html", "report.html", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "report.html").read_text()
    assert html.count('<details class="turn"') == 6 and 'data-ok="true"' in html
    assert "http://" not in html and "https://" not in html.replace("https://wiki.internal", "")

    summary = json.loads(cf("audit", RUN, "--json", cwd=tmp_path).stdout)
    assert summary["integrity"]["ok"] is True
    assert [t["turn"] for t in summary["turns"]] == [1, 2, 3, 4, 5, 6]
    recorded = _recorded(tmp_path, RUN, 6)
    assert summary["summary"]["tool_schema_tokens"]["latest"] == recorded.tool_tokens
    assert summary["summary"]["retrieval_answer"].startswith(("yes", "no"))
    text = cf("audit", RUN, cwd=tmp_path).stdout
    assert "tool schemas:" in text and "retrieval vs history:" in text and "integrity: ok" in text

    turn = cf("audit", RUN, "--turn", "6", cwd=tmp_path)
    assert turn.returncode == 0, turn.stderr
    assert f"matches the recorded {recorded.request_hash[:16]}" in turn.stdout
    assert "builder config: unchanged" in turn.stdout
    assert "content not shown" in turn.stdout and "FIN-12" not in turn.stdout  # no content by default
    data = json.loads(cf("audit", RUN, "--turn", "6", "--json", cwd=tmp_path).stdout)
    assert data["ok"] is True and data["manifest"]["request_hash"] == recorded.request_hash
    assert "request" not in data
    data = json.loads(cf("audit", RUN, "--turn", "6", "--json", "--content", cwd=tmp_path).stdout)
    assert canonical_hash(data["request"]) == recorded.request_hash  # exactly what the model saw


def test_audit_turn_detects_a_tampered_event(tmp_path: Path, cf: CLI) -> None:
    cf("demo", cwd=tmp_path)
    db = sqlite3.connect(tmp_path / "contextfold.db")
    state = db.execute("SELECT state FROM contextfold_events WHERE originator_version = 9").fetchone()[0]
    assert b"FAILED" in state
    db.execute("UPDATE contextfold_events SET state = ? WHERE originator_version = 9",
               (state.replace(b"FAILED", b"PASSED"),))
    db.commit()
    db.close()
    out = cf("audit", RUN, "--turn", "6", cwd=tmp_path)
    assert out.returncode == 3
    assert "integrity: FAILED at position 9" in out.stdout
    assert "stored event at position 9 was altered" in out.stderr
    assert "request hash mismatch" in out.stderr  # the altered content reached the re-derived request
    report = cf("audit", RUN, "--html", "r.html", cwd=tmp_path)
    assert report.returncode == 3 and 'data-ok="false"' in (tmp_path / "r.html").read_text()


def test_audit_turn_reports_a_changed_builder_configuration(tmp_path: Path, cf: CLI) -> None:
    """A record written by an older builder whose config had no ``max_tools`` field."""
    cf("demo", cwd=tmp_path)
    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("older")
        run.append([r.event for r in store.run(RUN).events() if not isinstance(r.event, ContextBuilt)])
        m = run.build("anthropic", window=16_000, reserve=2_000, record=False).manifest
        manifest = m.model_dump(mode="json")
        del manifest["config"]["max_tools"]
        manifest["config_hash"] = canonical_hash(manifest["config"])
        run.append(ContextBuilt(turn=m.turn, provider=m.provider, request_hash=m.request_hash,
                                prefix_hash=m.cache_key, config_hash=manifest["config_hash"],
                                manifest=manifest, log_version=m.log_version))
    out = cf("audit", "older", "--turn", str(m.turn), cwd=tmp_path)
    assert out.returncode == 1
    assert "builder config: CHANGED" in out.stdout
    assert "builder configuration changed" in out.stderr
    assert "max_tools: recorded '<absent>' -> now 12" in out.stderr
    assert "integrity: ok" in out.stdout


def test_why_gives_the_manifest_reason(tmp_path: Path, cf: CLI) -> None:
    cf("demo", cwd=tmp_path)
    out = cf("why", RUN, "--turn", "6", "invoicing/invoice.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    recorded = _recorded(tmp_path, RUN, 6)
    old = next(e for e in recorded.excluded_items if "invoice.py" in e.source_ref)
    new = next(f for f in recorded.fragments if "invoice.py" in f.source_ref)
    assert out.stdout.startswith("turn 6 (recorded manifest, request ")
    assert f"DROPPED {old.id} " in out.stdout
    assert f": {old.reason} -> replaced by {old.replaced_by}" in out.stdout
    # an exposed tool has no source: no empty slot where it would be
    tool = cf("why", RUN, "--turn", "6", "run_tests", cwd=tmp_path).stdout
    assert "KEPT    run_tests (tool_spec, 70 tokens): tool exposed: pinned" in tool, tool
    assert f"KEPT    {new.id} " in out.stdout and new.selection_reason in out.stdout

    # a build under a small budget drops fragments for budget; why repeats the manifest's reason and detail
    dump = cf("events", RUN, "--json", cwd=tmp_path).stdout
    lines = [ln for ln in dump.splitlines() if '"context_built"' not in ln]
    (tmp_path / "ev.jsonl").write_text("\n".join(lines) + "\n")
    assert cf("import", "ev.jsonl", "--run", "small", "--format", "events", cwd=tmp_path).returncode == 0
    built = cf("build", "small", "--window", "1600", "--reserve", "200", "--json", cwd=tmp_path)
    manifest = ContextManifest.model_validate(json.loads(built.stdout)["manifest"])
    dropped = [e for e in manifest.excluded_items if e.reason in ("over_budget", "low_priority")]
    assert dropped, manifest.excluded
    target = dropped[0]
    why = cf("why", "small", "--turn", str(manifest.turn), target.id, "--json", cwd=tmp_path)
    match = json.loads(why.stdout)["matches"]
    assert match == [{"id": target.id, "verdict": "dropped", "kind": target.kind,
                      "source_ref": target.source_ref, "tokens": target.tokens, "reason": target.reason,
                      "replaced_by": target.replaced_by, "detail": target.detail}]
    text = cf("why", "small", "--turn", str(manifest.turn), target.id, cwd=tmp_path).stdout
    assert f"DROPPED {target.id}" in text and f"{target.reason} ({target.detail})" in text

    missing = cf("why", RUN, "--turn", "2", "e20", cwd=tmp_path)
    assert missing.returncode == 1 and "did not exist yet" in missing.stdout
    # past the log's end: not "logged at position 999, after turn 6's build"
    for query in ("e999", f"event://{RUN}/999", "e999.c1"):
        missing = cf("why", RUN, "--turn", "6", query, cwd=tmp_path)
        assert missing.returncode == 1 and "logged" not in missing.stdout, missing.stdout
        assert f"{query}: run {RUN!r} has no position 999 (its log holds positions 1..25)" in missing.stdout


def test_usage_is_recorded_and_calibrates_the_next_build(tmp_path: Path, cf: CLI) -> None:
    cf("demo", cwd=tmp_path)
    est = _recorded(tmp_path, RUN, 6).selected_tokens
    observed = round(est * 1.15)
    out = cf("usage", RUN, "--turn", "6", "--input-tokens", str(observed), "--cached-tokens", "100",
             "--output-tokens", "50", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"estimate {est}" in out.stdout
    events = cf("events", RUN, "--json", cwd=tmp_path).stdout.splitlines()
    usage = json.loads(events[-1])
    assert usage["type"] == "usage_observed" and usage["input_tokens"] == observed
    assert (usage["cached_tokens"], usage["output_tokens"]) == (100, 50)
    nxt = json.loads(cf("manifest", RUN, "--provider", "anthropic", "--window", "16000", "--reserve", "2000",
                        "--json", cwd=tmp_path).stdout)
    assert nxt["calibration"]["last_observed"] == observed
    assert nxt["budget_tokens"] == int(14_000 / nxt["calibration"]["correction"])
    bad = cf("usage", RUN, "--turn", "99", "--input-tokens", "1", cwd=tmp_path)
    assert bad.returncode == 2 and "TurnNotFoundError" in bad.stderr
    # Anthropic's input_tokens alone (the demo's turn 6 is an anthropic request): recorded, and said
    bare = cf("usage", RUN, "--turn", "6", "--input-tokens", "12", cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    assert bare.stderr.startswith("WARNING: usage for turn 6: 12 input tokens, under half the ")
    assert "Anthropic's input_tokens excludes the cache" in bare.stderr and bare.stderr.count("\n") == 1
    assert "recorded usage_observed" in bare.stdout


def test_a_flag_given_alone_replaces_only_that_field_of_the_recorded_config(tmp_path: Path, cf: CLI) -> None:
    """``audit --turn 3 --window 20000`` on the demo (turn 3 has no record): the recorded config is
    anthropic with a reserve of 2000; giving the window alone used to rebuild as neutral with 8000."""
    assert cf("demo", cwd=tmp_path).returncode == 0

    def audited(*flags: str) -> tuple[str, int, int]:
        out = cf("audit", RUN, "--turn", "3", "--json", *flags, cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.startswith("NOT CHECKED: "), out.stderr  # no record
        m = json.loads(out.stdout)["manifest"]
        return m["provider"], m["window_tokens"], m["reserved_output_tokens"]

    provider, window, reserve = audited()
    assert (provider, reserve) == ("anthropic", 2000)
    assert audited("--window", "20000") == ("anthropic", 20000, 2000)
    assert audited("--provider", "gemini") == ("gemini", window, 2000)
    # a window the recorded reserve does not fit in: named as such, with the window's default reserve
    out = cf("audit", RUN, "--turn", "3", "--window", "1500", cwd=tmp_path)
    assert out.returncode == 2 and ("InvalidInputError: --window 1500 leaves no budget with the nearest "
                                    "record's reserve 2000: pass --reserve too (the default for that "
                                    "window is 375)") in out.stderr, out.stderr
    assert audited("--window", "1500", "--reserve", "375")[1:] == (1500, 375)


def test_audit_sets_the_turns_before_and_after_each_compaction_side_by_side(tmp_path: Path, cf: CLI) -> None:
    """Text, JSON and the HTML report answer how cost, repeated calls and failures changed around
    a compaction (the numbers: tests/unit/test_audit_compaction_effects.py)."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    # (a mask at the widest legal cut: at --window 1500 it relieves nothing, the demo's results it
    # would stub are left out either way, and a step that relieves nothing is not recorded)
    assert cf("compact", RUN, cwd=tmp_path).returncode == 0
    text = cf("audit", RUN, cwd=tmp_path).stdout
    assert "around compactions (5 turns each side" in text
    assert "(mask): turns 2-6 -> no turn: tokens per request" in text  # nothing built after it yet
    assert "; compactions: 1" in text  # logged after the last turn's record: counted all the same
    data = json.loads(cf("audit", RUN, "--json", cwd=tmp_path).stdout)
    assert data["summary"]["compactions"] == 1
    [effect] = data["compaction_effects"]
    assert effect["strategies"] == ["mask"] and effect["before"]["turns"] == [2, 3, 4, 5, 6]
    assert effect["after"] == {"turns": [], "mean_selected_tokens": None, "calls": 0, "repeated_calls": 0,
                               "results": 0, "failed_results": 0}
    assert cf("audit", RUN, "--html", "r.html", cwd=tmp_path).returncode == 0
    html = (tmp_path / "r.html").read_text()
    assert '<dt>compactions</dt><dd>1<ul id="compaction-effects" data-count="1">' in html


def test_audit_names_the_turn_a_compaction_changed_when_it_is_built_again(tmp_path: Path, cf: CLI) -> None:
    """Compact, then build the same turn again (the request did not fit): the audit read only each
    turn's first record, built before the compaction, and said "-> no turn" though the rebuild
    is the very request the compaction changed."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    assert cf("compact", RUN, cwd=tmp_path).returncode == 0
    rebuilt = cf("build", RUN, "--provider", "anthropic", "--json", cwd=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    tokens = json.loads(rebuilt.stdout)["manifest"]["selected_tokens"]
    [effect] = json.loads(cf("audit", RUN, "--json", cwd=tmp_path).stdout)["compaction_effects"]
    assert effect["before"]["turns"] == [2, 3, 4, 5, 6] and effect["after"]["turns"] == [6]
    before = effect["before"]["mean_selected_tokens"]
    assert effect["after"]["mean_selected_tokens"] == tokens < before  # the mask made it smaller
    text = cf("audit", RUN, cwd=tmp_path).stdout
    assert f"(mask): turns 2-6 -> turn 6: tokens per request {before:g} -> {tokens:g}; " in text, text


def test_a_turn_without_a_record_that_cannot_be_built_says_so(tmp_path: Path, cf: CLI) -> None:
    """``audit --turn N`` (and ``why``, ``manifest --turn``) of a turn whose live build failed printed
    only the budget error, as if the audit itself had failed; it now adds that the turn has no
    record and with which settings it was rebuilt."""
    from contextfold.domain.errors import RequiredContextExceedsBudgetError
    from contextfold.domain.events import ModelResponse, PolicySet, UserInput

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("r")
        run.append(PolicySet(text="Be brief."), UserInput("hi"))
        run.build(window=2_000, reserve=500)
        run.append(ModelResponse(text="hello"), PolicySet(text="rule " * 3_000), UserInput("next"))
        with pytest.raises(RequiredContextExceedsBudgetError):
            run.build(window=2_000, reserve=500)
        run.append(ModelResponse(text="ok"))
    for command in (("audit", "r", "--turn", "2"), ("why", "r", "--turn", "2", "e5")):
        out = cf(*command, cwd=tmp_path)
        assert out.returncode == 2
        assert "RequiredContextExceedsBudgetError" in out.stderr
        assert ("  turn 2 has no context_built record (its live build failed, or never ran): this is the "
                "turn rebuilt from the log for neutral with window 2000 and reserve 500") in out.stderr
    assert cf("audit", "r", cwd=tmp_path).returncode == 0  # the run's audit lists it and goes on


def test_a_record_holding_no_valid_manifest_is_a_typed_integrity_error_in_every_command(
        tmp_path: Path, cf: CLI) -> None:
    """A context_built record appended by hand (or imported from an events file) with a manifest
    that is not one: ``audit RUN`` died with pydantic's traceback and exit 1, the code of "a check
    found a difference", where ``manifest --turn``, ``why`` and ``replay`` said IntegrityError (3)."""
    from contextfold.audit.data import audit_run
    from contextfold.domain.errors import IntegrityError
    from contextfold.domain.events import ModelResponse, UserInput

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("r")
        run.append(UserInput("hi"))
        run.build(window=4_000)
        run.append(ContextBuilt(turn=1, provider="anthropic", request_hash="h", prefix_hash="p",
                                config_hash="c", manifest={"x": 1}, log_version=1))  # a second record
        run.append(ModelResponse(text="hello"), UserInput("again"))
        run.append(ContextBuilt(turn=2, provider="anthropic", request_hash="h", prefix_hash="p",
                                config_hash="c", manifest={"x": 1}, log_version=5))
        with pytest.raises(IntegrityError, match=re.escape(
                "run 'r' turn 2: its context_built record at position 6 holds no valid manifest "
                "(23 error(s), the first at request_id: Field required)")):
            audit_run(run)
    for command in (("audit", "r"), ("audit", "r", "--json"), ("audit", "r", "--html", "r.html"),
                    ("manifest", "r", "--turn", "2")):
        out = cf(*command, cwd=tmp_path)
        assert out.returncode == 3, (command, out.stderr)
        assert len(out.stderr.splitlines()) == 1 and "INTEGRITY" in out.stderr.upper(), out.stderr
        assert "run 'r' turn 2: its" in out.stderr and "context_built record" in out.stderr
    assert cf("audit", "r", "--turn", "1", cwd=tmp_path).returncode == 0  # the turn's first record is sound


def test_a_turn_not_answered_yet_that_cannot_be_previewed_says_with_which_settings(
        tmp_path: Path, cf: CLI) -> None:
    """``diff RUN 1 N`` previews turn N (not answered yet) under turn 1's recorded settings, which
    may be too small for it while ``manifest RUN`` (the nearest record's) fits: the budget error
    alone did not say it was the preview nor with which window."""
    from contextfold.domain.events import ModelResponse, PolicySet, UserInput

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("r")
        run.append(UserInput("hi"))
        run.build(window=2_000, reserve=500)
        run.append(ModelResponse(text="hello"), PolicySet(text="rule " * 3_000), UserInput("next"))
    for command in (("diff", "r", "1", "2"), ("manifest", "r", "--turn", "2", "--window", "2000"),
                    ("why", "r", "--turn", "2", "e1")):
        out = cf(*command, cwd=tmp_path)
        assert out.returncode == 2, command
        assert "RequiredContextExceedsBudgetError" in out.stderr
        assert ("  turn 2 is not answered yet and has no context_built record: this is the next request "
                "previewed for neutral with window 2000 and reserve 500") in out.stderr, out.stderr


def test_flags_for_one_turn_without_a_turn_are_a_usage_error(tmp_path: Path, cf: CLI) -> None:
    """``audit RUN --content`` printed the run's summary, which holds no content, and exited 0:
    the flag was ignored without a word (so was ``--excluded``)."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    cases = ((["--content"], "--content applies"), (["--excluded", "all"], "--excluded applies"),
             (["--content", "--excluded", "3", "--html", "r.html"], "--content and --excluded apply"))
    for flags, named in cases:
        out = cf("audit", RUN, *flags, cwd=tmp_path)
        assert out.returncode == 2 and f"{named} to one turn: add --turn N" in out.stderr, out.stderr
        assert out.stdout == "" and not (tmp_path / "r.html").exists()
    listed = cf("audit", RUN, "--turn", "6", "--excluded", "all", "--content", cwd=tmp_path)
    assert listed.returncode == 0 and "request body (" in listed.stdout, listed.stderr


def test_why_a_tool_was_not_exposed(tmp_path: Path, cf: CLI) -> None:
    """A manifest lists the tools a request declares, not those it left out: ``why`` said a tool the
    policy denied, or one no relevance ranked in, "was not part of the projection at that turn"."""
    from contextfold.domain.events import ModelResponse, PolicySet, ToolSpec, ToolsRegistered, UserInput
    from contextfold.domain.manifest import BuildConfig

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        run = store.run("tools")
        run.append(PolicySet(text="careful", pinned_tools=("deploy",), denied_tools=("drop_db",)),
                   ToolsRegistered(tools=(ToolSpec(name="deploy", description="deploy a release"),
                                          ToolSpec(name="drop_db", description="drop the database"),
                                          ToolSpec(name="weather", description="forecast by city"),
                                          ToolSpec(name="backup", description="back up the database"))),
                   UserInput("drop the old database tables"))
        run.build(config=BuildConfig(provider="openai-chat", max_tools=1))  # recorded: turn 1; ranked
        # (three permitted tools over a cap of one): weather is left out for its relevance
        run.append(ModelResponse(text="done"), UserInput("and the weather?"))  # turn 2: no record
    denied = cf("why", "tools", "--turn", "1", "drop_db", cwd=tmp_path)
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout.splitlines()[1] == ("  NOT EXPOSED drop_db: tool 'drop_db' (registered) is never "
                                             "exposed: the run's policy denies it (denied_tools)")
    unranked = json.loads(cf("why", "tools", "--turn", "1", "weather", "--json", cwd=tmp_path).stdout)
    assert unranked["matches"] == [{"id": "weather", "verdict": "not exposed", "kind": "tool_spec",
                                    "reason": "tool 'weather' (registered) is neither pinned nor called by "
                                    "the kept history, and shares no term with the turn's goal, ready plan "
                                    "steps and latest input (BM25 score 0), nor with any earlier user "
                                    "input"}]
    previewed = cf("why", "tools", "--turn", "2", "weather", cwd=tmp_path)  # default max_tools: all
    assert previewed.returncode == 0 and "KEPT    weather (tool_spec, " in previewed.stdout, previewed.stdout
    unknown = cf("why", "tools", "--turn", "1", "nope", cwd=tmp_path)
    assert unknown.returncode == 1 and "nothing in turn 1's manifest matches 'nope'" in unknown.stdout


def test_settings_beside_a_recorded_turn_are_refused_not_ignored(tmp_path: Path, cf: CLI) -> None:
    """``manifest RUN --turn 6 --record first --window 5000`` showed the record (its help said the
    flags were then ignored), and ``audit RUN --turn 6 --window 5000`` re-derived the recorded
    turn with the record's window: each printed something other than what was asked, exit 0."""
    assert cf("demo", cwd=tmp_path).returncode == 0
    window = str(_recorded(tmp_path, RUN, 6).window_tokens)
    shown = cf("manifest", RUN, "--turn", "6", "--record", "first", "--window", "5000", cwd=tmp_path)
    assert shown.returncode == 2 and shown.stdout == ""
    assert "--record shows a record as it was recorded, with its own settings: --window" in shown.stderr
    audited = cf("audit", RUN, "--turn", "6", "--window", "5000", cwd=tmp_path)
    assert audited.returncode == 2 and audited.stdout == ""
    assert (f"turn 6 has a context_built record, and a rebuild reproduces it with that record's settings "
            f"(window {window}): window 5000 given beside the turn would be ignored") in audited.stderr
    same = cf("audit", RUN, "--turn", "6", "--window", window, cwd=tmp_path)  # the record's own: fine
    assert same.returncode == 0 and "matches the recorded" in same.stdout, same.stderr
    assert cf("manifest", RUN, "--turn", "6", "--record", "first", cwd=tmp_path).returncode == 0
    # why read the record and ignored them, even an invalid one, exit 0
    why = cf("why", RUN, "--turn", "6", "e9", "--window", "5000", "--provider", "gemini", cwd=tmp_path)
    assert why.returncode == 2 and why.stdout == ""
    assert (f"turn 6 has a context_built record, and a rebuild reproduces it with that record's settings "
            f"(provider 'anthropic', window {window}): provider 'gemini', window 5000 given beside the turn "
            "would be ignored") in why.stderr
    why = cf("why", RUN, "--turn", "6", "e9", "--window", "-5", cwd=tmp_path)
    assert why.returncode == 2 and "invalid build config: window" in why.stderr, why.stderr
    why = cf("why", RUN, "--turn", "6", "e9", "--window", window, "--provider", "anthropic", cwd=tmp_path)
    assert why.returncode == 0 and "KEPT" in why.stdout, why.stderr


def test_why_names_the_summary_that_took_a_mask_stub_by_its_id_or_source(tmp_path: Path, cf: CLI) -> None:
    """A stub (``e13.c1``, standing for ``event://r1/4``) that a later summary covering events 1-8
    took out was "not part of the projection" for ``why``, asked by its id or its source."""
    from tests.unit.test_audit_diff_compaction import _mask_then_summary

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        masked, summarized = _mask_then_summary(store.run("r1"))
    stub = next(f for f in masked.fragments if "." in f.id and f.source_ref.startswith("event://"))
    summary = next(f for f in summarized.fragments if f.source_ref.startswith("events://"))
    for query in (stub.id, stub.source_ref, "e" + stub.source_ref.rsplit("/", 1)[1]):
        out = cf("why", "r1", "--turn", str(summarized.turn), query, cwd=tmp_path)
        assert out.returncode == 1, out.stderr  # not in the manifest, and told why
        assert f"{query} was compacted: summarized: {summary.id} covers events 1-8" in out.stdout, out.stdout
    # a ref names its position, not every position it is a prefix of (event://r1/1 of /11, /12...)
    out = cf("why", "r1", "--turn", str(summarized.turn), "event://r1/1", cwd=tmp_path)
    policy = next(f for f in summarized.fragments if f.id == "e1")
    kept = f"  KEPT    e1 (policy, {policy.tokens} tokens, runtime://policy): {policy.selection_reason}"
    assert out.returncode == 0 and out.stdout.splitlines()[1:] == [kept], out.stdout
    assert "e11" not in out.stdout and "e12" not in out.stdout
    missing = cf("why", "r1", "--turn", str(summarized.turn), stub.id.split(".")[0] + ".c9", cwd=tmp_path)
    assert missing.returncode == 1 and "nothing in turn" in missing.stdout, missing.stdout


def test_why_names_the_summary_that_took_a_call_asked_by_its_id_or_ref(tmp_path: Path, cf: CLI) -> None:
    """``why RUN c0``: the call a summary stands for was "not part of the projection at that
    turn", though the summary names it (``call c0 (read_file)``) and the call's own result, asked
    by its event, was said to be compacted. A call id is what a user reads in a summary, a stub and
    a manifest's source refs (``call://r1/c0@3``), and the runtime's logs."""
    from tests.unit.test_audit_diff_compaction import _mask_then_summary

    with open_store(f"sqlite:///{tmp_path / 'contextfold.db'}") as store:
        masked, summarized = _mask_then_summary(store.run("r1"))
        head = next(r.position for r in store.run("r1").events()
                    if isinstance(r.event, ModelResponse) and r.event.tool_calls
                    and r.event.tool_calls[0].call_id == "c0")
    summary = next(f for f in summarized.fragments if f.source_ref.startswith("events://"))
    for query in ("c0", f"call://r1/c0@{head}"):
        out = cf("why", "r1", "--turn", str(summarized.turn), query, cwd=tmp_path)
        assert out.returncode == 1, out.stderr
        assert f"{query} was compacted: summarized: {summary.id} covers events 1-" in out.stdout, out.stdout
        assert "not part of the projection" not in out.stdout
    # before the summary, a mask's stub stood in for its result: said as for the result's event
    stub = next(f for f in masked.fragments if f.source_ref == f"event://r1/{head + 1}")
    out = cf("why", "r1", "--turn", str(masked.turn), "c0", cwd=tmp_path)
    said = f"c0 was compacted: masked: the stub {stub.id} stands in for event {head + 1}"
    assert said in out.stdout, out.stdout
    # an id the run never used is still "nothing matches"
    out = cf("why", "r1", "--turn", str(summarized.turn), "c99", cwd=tmp_path)
    assert out.returncode == 1 and "nothing in turn" in out.stdout, out.stdout
