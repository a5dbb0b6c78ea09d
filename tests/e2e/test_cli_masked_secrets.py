"""What ``events``, ``show`` and ``why`` show a person masks the secrets the log holds; ``--reveal``
shows them raw; the export (``events --json``) and a medium's bytes stay as logged.

Why: the log keeps raw content (it is the source of truth; the builder redacts before a request),
and ``events``, ``show RUN e3`` and ``why`` printed it as logged: an auditor pasting their output
into an incident ticket pasted the API key a tool result held. The secrets here are shapes the
builder's rules know (``tests/unit/test_redact.py``'s): an Anthropic key, a GitHub token in a
URL's user info, an AWS access key id.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.events import (
    EvidenceRetrieved,
    ModelResponse,
    ToolCall,
    ToolResult,
    UserInput,
    canonical_json,
)
from tests.cli_runner import cf

ANTHROPIC = "sk-ant-api03-Rk8fJq2LmZx9WvT4pN7bYc3DhG5sK1aE6uI0oP_QwErTyU-AsDfGhJkL"
GITHUB = "ghp_4fT9kLm2Qx7Rv1Zp8Wb3Nc6Yd0Hs5Jg2Ka9E"
AWS = "AKIAZ7Q3B4N5K6L7M8P9"
SECRETS = (ANTHROPIC, GITHUB, AWS)
ENV = f"HOME=/root\nANTHROPIC_API_KEY={ANTHROPIC}\naws_access_key_id={AWS}\n"
LATE = "x" * 60 + f" x-api-key: {ANTHROPIC}"
"""A key where the events line (90 characters) cuts it: masked before the cut, no head of it shows."""
BIG = "\n".join(f"line {i}: " + "payload " * 20 for i in range(3_000)) + f"\ntoken={GITHUB}\n"
"""A tool output large enough to be stored as an artifact, a token at its end."""


def _leaked(text: str) -> list[str]:
    """The secrets (or a 16-character head of one) ``text`` shows."""
    return [s for s in SECRETS if s[:16] in text]


@pytest.fixture
def leak(store_url: str) -> str:
    with open_store(store_url) as store:
        run = store.run("leak")
        run.append(UserInput("deploy the app"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="env"),
                                             ToolCall(call_id="c2", name="cat"),
                                             ToolCall(call_id="c3", name="logs"))),
                   ToolResult(call_id="c1", content=ENV),
                   ToolResult(call_id="c2", content=LATE),
                   ToolResult(call_id="c3", content=BIG),
                   EvidenceRetrieved(content="the runbook",
                                     source_ref=f"https://deploy:{GITHUB}@git.example.com/runbook.md"))
        run.build(window=64_000)
    return store_url


def test_events_lines_are_masked_and_reveal_shows_them_raw(leak: str, tmp_path: Path) -> None:
    shown = cf("--store", leak, "events", "leak", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert _leaked(shown.stdout) == [], shown.stdout
    assert "ANTHROPIC_API_KEY=[REDACTED:anthropic_api_key]" in shown.stdout
    assert "x-api-key: [REDACTED:ant" in shown.stdout  # the cut line: its placeholder, cut
    assert "https://deploy:[REDACTED:github_token]@git.example.com" in shown.stdout
    raw = cf("--store", leak, "events", "leak", "--reveal", cwd=tmp_path)
    assert raw.returncode == 0 and f"ANTHROPIC_API_KEY={ANTHROPIC[:40]}" in raw.stdout
    assert f"deploy:{GITHUB}@" in raw.stdout


def test_the_events_export_stays_faithful(leak: str, tmp_path: Path) -> None:
    """``events --json`` is what another store imports, its builds replaying to their hashes: raw."""
    exported = cf("--store", leak, "events", "leak", "--json", "--with-artifacts", cwd=tmp_path)
    with open_store(leak) as store:
        logged = [canonical_json(r.event).decode() for r in store.events.read("leak")]
    # after the artifact's line; each line as logged, its time (recorded_at) beside its fields
    assert [re.sub(r',"recorded_at":"[^"]*"}$', "}", line)
            for line in exported.stdout.splitlines()[-len(logged):]] == logged
    (tmp_path / "leak.jsonl").write_text(exported.stdout, encoding="utf-8")
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    assert cf("--store", copy, "import", str(tmp_path / "leak.jsonl"), "--run", "leak", cwd=tmp_path
              ).returncode == 0
    assert cf("--store", copy, "replay", "leak", "--turn", "2", "--verify", cwd=tmp_path).returncode == 0


def test_show_masks_text_printed_or_written_and_reveal_shows_it_raw(leak: str, tmp_path: Path) -> None:
    store = ("--store", leak)
    with open_store(leak) as s:
        (big,) = [r.event for r in s.events.read("leak")
                  if isinstance(r.event, ToolResult) and r.event.artifact is not None]
    assert big.artifact is not None
    for ref in (("leak", "e3"), ("leak", "3"), ("event://leak/3",), ("leak", "events://leak/3-6"),
                (f"artifact:{big.artifact.hash}",)):
        shown = cf(*store, "show", *ref, cwd=tmp_path)
        assert shown.returncode == 0, (ref, shown.stderr)
        assert _leaked(shown.stdout) == [] and "[REDACTED:" in shown.stdout, (ref, shown.stdout[-300:])
        written = tmp_path / "out.txt"
        assert cf(*store, "show", *ref, "--out", str(written), cwd=tmp_path).returncode == 0
        assert _leaked(written.read_text(encoding="utf-8")) == [], ref
        raw = cf(*store, "show", *ref, "--reveal", cwd=tmp_path)
        assert raw.returncode == 0 and _leaked(raw.stdout), ref
        assert cf(*store, "show", *ref, "--reveal", "--out", str(written), cwd=tmp_path).returncode == 0
        assert _leaked(written.read_text(encoding="utf-8")), ref
    as_stored = tmp_path / "big.txt"  # --reveal --out: the artifact's bytes as stored
    assert cf(*store, "show", f"artifact:{big.artifact.hash}", "--reveal", "--out", str(as_stored),
              cwd=tmp_path).returncode == 0
    assert as_stored.read_text(encoding="utf-8") == BIG


def _raw_record(url: str) -> None:
    """A second record of turn 2 whose manifest holds the evidence's URL raw, as a record an older
    contextfold wrote before source refs were redacted (or a hand-made one an events file carried)."""
    with open_store(url) as store:
        run = store.run("leak")
        (first,) = run.records(2)
        manifest = json.loads(json.dumps(first.manifest).replace(
            "deploy:[REDACTED:github_token]@", f"deploy:{GITHUB}@"))
        run.append(first.model_copy(update={"manifest": manifest}))


def test_why_masks_what_a_record_holds_in_text_and_json(leak: str, tmp_path: Path) -> None:
    """Today's builder records the source ref redacted already: ``why`` shows it so, with
    ``--reveal`` too (the record is all it reads). A record that holds it raw is masked."""
    store = ("--store", leak)
    recorded = cf(*store, "why", "leak", "--turn", "2", "e6", "--reveal", cwd=tmp_path)
    assert recorded.returncode == 0 and _leaked(recorded.stdout) == [], recorded.stdout
    _raw_record(leak)
    for args in (("why", "leak", "--turn", "2", "--record", "last", "e6"),
                 ("why", "leak", "--turn", "2", "--record", "last", "e6", "--json"),
                 ("why", "leak", "--turn", "2", "--record", "last", "runbook")):
        shown = cf(*store, *args, cwd=tmp_path)
        assert shown.returncode == 0, (args, shown.stderr)
        assert _leaked(shown.stdout) == [] and "[REDACTED:github_token]" in shown.stdout, (args, shown.stdout)
        raw = cf(*store, *args, "--reveal", cwd=tmp_path)
        assert raw.returncode == 0 and f"deploy:{GITHUB}@" in raw.stdout, (args, raw.stdout)
    data = json.loads(cf(*store, "why", "leak", "--turn", "2", "--record", "last", "e6", "--json",
                         cwd=tmp_path).stdout)
    assert data["matches"][0]["source_ref"] == "https://deploy:[REDACTED:github_token]@git.example.com/runbook.md"


def test_the_help_says_what_is_masked_and_how_to_reveal_it(tmp_path: Path) -> None:
    for command in ("events", "show", "why"):
        shown = cf(command, "--help", cwd=tmp_path).stdout
        assert "--reveal" in shown and "[REDACTED:<rule>]" in " ".join(shown.split()), command
