"""`contextfold compact` and `contextfold show` end to end (subprocess, real SQLite file)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from tests.cli_runner import cf

NOISE = "\n".join(f"{i:04d} INFO compiling module_{i}.rs" for i in range(150))


def _record(db: Path) -> None:
    with open_store(f"sqlite:///{db}") as store:
        run = store.run("r1")
        run.append(PolicySet(text="Never force-push."), UserInput("Make the build pass."))
        for t in range(1, 9):
            failed = t == 4
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="cargo"),)),
                       ToolResult(call_id=f"c{t}", content=NOISE + ("\nerror[E0308]: mismatched types"
                                                                   if failed else ""),
                                  is_error=failed, exit_code=101 if failed else 0))


def test_compact_dry_run_then_mask_then_summary_and_show(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _record(db)
    store = f"sqlite:///{db}"
    version = len(json.loads("[" + ",".join(cf("--store", store, "events", "r1", "--json",
                                                  cwd=tmp_path).stdout.split("\n")[:-1]) + "]"))
    dry = cf("--store", store, "compact", "r1", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "would append mask covering events 1-" in dry.stdout and "saved" in dry.stdout
    with open_store(store) as s:
        assert s.run("r1").version == version  # nothing written

    mask = cf("--store", store, "compact", "r1", "--strategy", "mask", "--json", cwd=tmp_path)
    assert mask.returncode == 0, mask.stderr
    data = json.loads(mask.stdout)
    (pos,) = data["positions"]
    stubs = data["events"][0]["summary"]["tool_calls_and_results"]
    failed = next(line for line in stubs if "call c4 " in line)
    assert "error, exit code 101" in failed
    ref = failed.split("raw: ")[1]
    shown = cf("--store", store, "show", "r1", ref, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "error[E0308]: mismatched types" in shown.stdout and "exit_code=101" in shown.stdout

    summary = cf("--store", store, "compact", "r1", "--strategy", "summary", "--keep-recent", "1",
                 cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    assert "appended summary covering events 1-" in summary.stdout
    with open_store(store) as s:
        run = s.run("r1")
        assert run.version == pos + 1
        built = run.build("anthropic", window=4_000, reserve=500)
    body = json.dumps(built.request)
    assert "Never force-push." in body and "call c4 (cargo) failed" in body and "exit_code=101" in body
    match = re.search(r"events://r1/\d+-\d+", body)
    assert match is not None
    events_ref = match.group(0)
    shown = cf("--store", store, "show", "r1", events_ref, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.count("--- event ") > 10
    # the ref names its run: as the summary says ("read back with `contextfold show`"), it is enough
    alone = cf("--store", store, "show", events_ref, cwd=tmp_path)
    assert alone.returncode == 0 and alone.stdout == shown.stdout, alone.stderr
    # `why` names what the request holds in a compacted event's place, as `diff` does: the summary
    # (it named the first compaction covering the position, the mask, which the request lacks)
    summary_id = f"e{pos + 1}"
    assert summary_id in {f.id for f in built.manifest.fragments}
    why = cf("--store", store, "why", "r1", "--turn", str(built.manifest.turn), "e3", cwd=tmp_path)
    assert why.returncode == 1, why.stderr
    assert f"e3 was compacted: summarized: {summary_id} covers events 1-" in why.stdout, why.stdout


def test_show_rejects_unknown_refs_with_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _record(db)
    out = cf("--store", f"sqlite:///{db}", "show", "r1", "http://nope", cwd=tmp_path)
    assert out.returncode == 2 and "unknown ref" in out.stderr
    out = cf("--store", f"sqlite:///{db}", "show", "r1", "event://other/1", cwd=tmp_path)
    assert out.returncode == 2 and "names run 'other'" in out.stderr
    out = cf("--store", f"sqlite:///{db}", "show", "7", cwd=tmp_path)  # a bare position names no run
    assert out.returncode == 2 and "'7' names no run: give the run too (show RUN 7)" in out.stderr
    out = cf("--store", f"sqlite:///{db}", "show", "event://other/1", cwd=tmp_path)
    assert out.returncode == 2 and "RunNotFoundError: run 'other' not found" in out.stderr, out.stderr
    out = cf("--store", f"sqlite:///{db}", "show", "r1", "999", cwd=tmp_path)
    assert out.returncode == 2
    # past SQLite's 64-bit integers: not found, not the driver's OverflowError
    out = cf("--store", f"sqlite:///{db}", "show", "r1", "99999999999999999999", cwd=tmp_path)
    assert out.returncode == 2 and "NotFoundError: run 'r1' has no events" in out.stderr, out.stderr


def test_compact_with_a_window_reports_pressure(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _record(db)
    out = cf("--store", f"sqlite:///{db}", "compact", "r1", "--strategy", "summary", "--window", "3000",
             "--reserve", "500", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "budget pressure soft -> none" in out.stdout or "budget pressure hard -> none" in out.stdout


def test_show_in_an_imported_copy_resolves_the_refs_its_log_cites_under_the_old_name(tmp_path: Path) -> None:
    """A run exported with ``events --json`` and imported under a new name keeps its records and
    compactions verbatim: its mask stubs and summaries (and so its requests) cite ``event://OLD/N``,
    and ``show COPY event://OLD/9`` was refused: "names run 'OLD', not 'COPY'"."""
    store = f"sqlite:///{tmp_path / 's.db'}"

    def run_cf(*args: str) -> str:
        out = cf("--store", store, *args, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return out.stdout

    # the reproduction: a demo run (it records a build), masked, exported, imported as 'copy'
    run_cf("demo", "--run", "orig")
    run_cf("compact", "orig", "--keep-recent", "1")
    (tmp_path / "o.jsonl").write_text(run_cf("events", "orig", "--json"))
    run_cf("import", "o.jsonl", "--run", "copy")
    assert run_cf("show", "copy", "event://orig/9") == run_cf("show", "orig", "event://orig/9")
    assert "exit_code=1" in run_cf("show", "copy", "event://orig/9")
    # a run compacted with a summary and never built: only its compaction names the old name
    _record(tmp_path / "s.db")
    run_cf("compact", "r1", "--strategy", "summary", "--keep-recent", "1")
    (tmp_path / "r1.jsonl").write_text(run_cf("events", "r1", "--json"))
    run_cf("import", "r1.jsonl", "--run", "r1-copy")
    with open_store(store) as s:
        body = json.dumps(s.run("r1-copy").build("anthropic", window=4_000, reserve=500).request)
    cited = set(re.findall(r"(?:events?|call)://r1/[^\s\"\\,;)\]]+", body))
    assert any(ref.startswith("event://r1/") for ref in cited), body  # the summary's lines
    for ref in sorted(cited):
        assert run_cf("show", "r1-copy", ref) == run_cf("show", "r1", ref), ref
    # a name the run's log does not use is still another run's
    for run, ref in (("copy", "event://r1/9"), ("r1-copy", "event://orig/9"), ("orig", "event://copy/9"),
                     ("copy", "event://other/9")):
        out = cf("--store", store, "show", run, ref, cwd=tmp_path)
        named = ref.split("/")[2]
        assert out.returncode == 2 and f"names run '{named}', not '{run}'" in out.stderr, out.stderr


def test_show_an_artifact_ref_needs_no_run(tmp_path: Path) -> None:
    """An artifact belongs to the store (content-addressed): ``show artifact:HASH`` reads it."""
    db = tmp_path / "s.db"
    big = "\n".join(f"line {i}: " + "payload " * 20 for i in range(3_000))
    with open_store(f"sqlite:///{db}") as store:
        run = store.run("r1")
        run.append(UserInput("Read the log."),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cat"),)),
                   ToolResult(call_id="c1", content=big))
        (result,) = [r.event for r in store.events.iter_events("r1") if isinstance(r.event, ToolResult)]
    assert result.artifact is not None  # stored as an artifact, the event keeps its ref
    out = cf("--store", f"sqlite:///{db}", "show", f"artifact:{result.artifact.hash}", cwd=tmp_path)
    assert out.returncode == 0 and out.stdout == big + "\n", out.stderr


def test_show_names_an_events_media_and_writes_an_image_artifact_as_stored(tmp_path: Path) -> None:
    """``show`` of a masked screenshot printed an empty result: no image and no ref to it, so the
    stub's raw ref led nowhere; ``show artifact:HASH`` of the PNG printed its bytes decoded with
    U+FFFD replacements (54,521 bytes for a 30,173-byte file): piped, it is its bytes as stored
    (``show artifact:H > shot.png``), as is ``--out FILE``'s (on a terminal one line naming it).
    A short hash or a ref of no known kind was told to give the run too, which did not help."""
    from tests.integration.test_media_build import png

    db = tmp_path / "s.db"
    store = f"sqlite:///{db}"
    image = png((64, 48), seed=3)
    with open_store(store) as s:
        block = s.attach_image(image)
        run = s.run("r1")
        run.append(UserInput("take a screenshot"),
                   ModelResponse(tool_calls=(ToolCall(call_id="t1", name="shot"),)),
                   ToolResult(call_id="t1", content="", blocks=(block,)), UserInput("ok"))
    assert block.artifact is not None
    shown = cf("--store", store, "show", "r1", "3", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"[image image/png: artifact:{block.artifact.hash} ({len(image)} bytes)]" in shown.stdout
    raw = subprocess.run([sys.executable, "-m", "contextfold", "--store", store, "show",
                          f"artifact:{block.artifact.hash}"], cwd=tmp_path, capture_output=True, check=True)
    assert raw.stdout == image  # piped: as stored
    written = tmp_path / "shot.png"  # its bytes as stored: --out (test_cli_show_media)
    assert cf("--store", store, "show", f"artifact:{block.artifact.hash}", "--out", str(written),
              cwd=tmp_path).returncode == 0
    assert written.read_bytes() == image
    short = cf("--store", store, "show", "r1", f"artifact:{block.artifact.hash[:8]}", cwd=tmp_path)
    assert short.returncode == 2 and "64 hex digits" in short.stderr, short.stderr
    unknown = cf("--store", store, "show", "no-such-kind:1", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown ref 'no-such-kind:1'" in unknown.stderr, unknown.stderr


def test_compact_records_the_loss_of_a_call_no_build_recorded_yet(tmp_path: Path) -> None:
    """A run that moved past an unanswered call (a freshly imported trace, never built) had
    "nothing to compact" until a build recorded the call's loss; ``compact`` now records it
    with the compaction and says so."""
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    with open_store(url) as s:
        run = s.run("r1")
        run.append(PolicySet(text="P"), UserInput("deploy"),
                   ModelResponse(tool_calls=(ToolCall(call_id="lost\x1b[2J1", name="deploy"),)),
                   UserInput("is it done?"))
        for t in range(1, 7):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="cargo"),)),
                       ToolResult(call_id=f"c{t}", content=NOISE))
    dry = cf("--store", url, "compact", "r1", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "would append mask covering events 1-" in dry.stdout, dry.stdout
    assert "would append tool_result_lost for call lost\\x1b[2J1, which the compaction covers" in dry.stdout
    out = cf("--store", url, "compact", "r1", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["recovery"] == ["tool_result_lost:lost\x1b[2J1"] and data["positions"] == [18]  # 17: the loss
    with open_store(url) as s:
        assert [r.event.type for r in s.run("r1").events()[-2:]] == ["tool_result_lost", "history_compacted"]


def test_why_and_diff_name_the_summary_that_took_a_lost_answer_with_its_call(tmp_path: Path) -> None:
    """A summary hides a recovery answer logged after its cover with its call's group; ``why`` of
    that answer said "not part of the projection" and ``diff`` "no longer in the projection", with
    no replacement, while the call itself was "compacted"."""
    from tests.unit.test_audit_diff_compaction import _lost_then_summarized

    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as s:
        before, after, lost = _lost_then_summarized(s.run("r1"))
    summary = next(f.id for f in after.fragments if f.source_ref.startswith("events://"))
    assert before.turn == after.turn  # the same turn built again after the summary: its last record
    why = cf("--store", url, "why", "r1", "--turn", str(after.turn), f"e{lost}", "--record", "last",
             cwd=tmp_path)
    assert why.returncode == 1, why.stderr
    assert (f"e{lost} was compacted: summarized: {summary} covers events 1-" in why.stdout
            and "(with the call at event 3 it answers)" in why.stdout), why.stdout
    diff = cf("--store", url, "diff", "r1", str(before.turn), str(after.turn), "--record-b", "last",
              "--json", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    left = {x["id"]: x for x in json.loads(diff.stdout)["left"]}
    assert left[f"e{lost}"]["reason"] == "compacted" and left[f"e{lost}"]["replaced_by"] == summary


def test_show_opens_a_call_ref_whose_call_id_holds_a_slash_or_an_at(tmp_path: Path) -> None:
    """OpenAI call ids are free-form: a build cites ``call://RUN/fs/read-1@3`` or
    ``call://RUN/call/5@x@3``, and ``show`` refused them ("unknown ref") or looked for run
    ``RUN/fs``. The position follows the last ``@``; the run and the call id are told apart by
    the calls the log holds at that position (and, with no RUN given, the runs the store holds)."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        for run_id, cid in (("r0", "call/5@x"), ("r1", "fs/read-1"), ("a/b", "c/d@e")):
            s.run(run_id).append(UserInput("go"),
                                 ModelResponse(tool_calls=(ToolCall(call_id=cid, name="read"),)),
                                 ToolResult(call_id=cid, content=f"body of {cid}"))
    for run_id, cid in (("r0", "call/5@x"), ("r1", "fs/read-1"), ("a/b", "c/d@e")):
        ref = f"call://{run_id}/{cid}@2"
        for args in (("show", run_id, ref), ("show", ref)):
            out = cf("--store", store, *args, cwd=tmp_path)
            assert out.returncode == 0, (args, out.stderr)
            assert f"result of call {cid} " in out.stdout and f"body of {cid}" in out.stdout
    out = cf("--store", store, "show", "r1", "call://r1/fs/read-2@2", cwd=tmp_path)
    assert out.returncode == 2 and "no answered call" in out.stderr, out.stderr
    out = cf("--store", store, "show", "r1", "call://r0/fs/read-1@2", cwd=tmp_path)
    assert out.returncode == 2 and "names run" in out.stderr, out.stderr
