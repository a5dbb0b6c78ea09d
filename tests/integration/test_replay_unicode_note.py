"""``replay --verify`` says when a mismatch may come from the Python's Unicode database.

Why: a run built on Python 3.11 (Unicode 14.0) and audited on 3.13 (Unicode 15.1) rebuilds
another request when its text holds a letter or digit Unicode assigned after 14.0 (Kawi, Nag
Mundari, CJK extension H...): ``\\b``, ``\\w`` and ``str.isalnum`` classify it differently, so a
log line ``\\U00011f04error: ...`` is an error line on 3.11 and not on 3.13, and a long log is
cut elsewhere. The same contextfold built both, so the builder note is silent, and the auditor
saw a bare MISMATCH with nothing to tell an altered log from another interpreter. (Measured:
record on 3.11, ``replay --verify`` on 3.12 and 3.13: MISMATCH at the request hash.)

The mismatch is simulated here by a record whose request hash another interpreter made (a real
one needs two Pythons with contextfold installed); what is checked is what the auditor is told.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from contextfold import ModelResponse, ToolCall, ToolResult, UserInput, open_store
from contextfold.api import Run
from contextfold.domain.events import AnyEvent

KAWI = "\U00011f04\U00011f05"
"""KAWI LETTER A, KAWI LETTER AA: assigned in Unicode 15.0 (a letter on 3.12+, unassigned on 3.11)."""


def _record_from_another_python(db: Path, text: str) -> Run:
    """Run "copy": the events of run "orig", and a turn-2 record as another interpreter made it
    (the real record, its request hash changed), as ``events --json`` and import would carry it."""
    store = open_store(f"sqlite:///{db}")
    orig = store.run("orig")
    call = ToolCall(call_id="c1", name="run", arguments="{}")
    events: list[AnyEvent] = [
        UserInput(text), ModelResponse(text="", tool_calls=(call,)),
        ToolResult(call_id="c1", content=f"step 1 ok\n{text}\nexit 1", is_error=True, exit_code=1)]
    orig.append(events)
    orig.build(provider="neutral", window=8_000, reserve=1_000)
    record = orig.records(2)[0]
    other = "f" * 64
    copy = store.run("copy")
    copy.append([*events, record.model_copy(update={
        "request_hash": other, "manifest": {**record.manifest, "request_hash": other}})])
    return copy


def test_a_mismatch_over_late_unicode_letters_names_them(tmp_path: Path) -> None:
    run = _record_from_another_python(tmp_path / "a.db", f"{KAWI}error: the build of {KAWI} failed")
    report = run.replay(2)
    assert not report.ok
    assert report.unicode_note is not None
    assert "U+11F04" in report.unicode_note and "position 1" in report.unicode_note
    assert "8 characters" in report.unicode_note  # four in the input, four in the result

    done = subprocess.run([sys.executable, "-m", "contextfold", "--store", f"sqlite:///{tmp_path / 'a.db'}",
                           "replay", "copy", "--turn", "2", "--verify"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert done.returncode == 1, done.stderr
    assert "MISMATCH at turn 2" in done.stderr
    assert "note: the log holds 8 characters" in done.stderr and "U+11F04" in done.stderr
    assert "Unicode" in done.stderr


def test_a_mismatch_without_them_has_no_unicode_note(tmp_path: Path) -> None:
    run = _record_from_another_python(tmp_path / "b.db", "error: the build of démo failed 🫠")
    report = run.replay(2)
    assert not report.ok
    assert report.unicode_note is None
