"""Handing a run over as evidence: the audit names the head of its hash chain, so the receiver can
tell that the log they imported is the very log the sender audited.

Why: ``verify`` and ``audit`` said "hash chain intact" and nothing more. An export
(``events --json --with-artifacts``) carries no chain hashes, and its import chains the events
anew, so an export edited on the way (a hand-off note, a dropped-for-room tool result that no
recorded build hashes) imported as a run whose chain was intact too. The chain of a run holds its
id and every event in order: the same run id imported from the same export ends at the same head,
and any edit ends elsewhere. The sender gives the head with the file; the receiver compares.
"""

from __future__ import annotations

import json
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import HandOff, ModelResponse, ToolCall, ToolResult, UserInput
from tests.cli_runner import cf


def _sender(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sender.db'}"
    with open_store(url) as store:
        run = store.run("incident-7")
        run.append(UserInput("Clean up stale rows"))
        run.build("anthropic", window=8_000, reserve=1_000)
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sql", arguments="{}"),)),
                   ToolResult(call_id="c1", content="DELETE 40"),
                   HandOff(from_agent="a", to_agent="b", note="over to b"))
        run.build("openai-chat", window=8_000, reserve=1_000)
    return url


def _head(url: str, cwd: Path) -> str:
    out = cf("--store", url, "audit", "incident-7", "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    head = json.loads(out.stdout)["integrity"]["head"]
    assert isinstance(head, str) and len(head) == 64
    return head


def _import(tmp_path: Path, name: str, export: str) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(export, encoding="utf-8")
    url = f"sqlite:///{tmp_path / f'{name}.db'}"
    done = cf("--store", url, "import", str(path), "--run", "incident-7", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return url


def test_an_export_imported_elsewhere_ends_at_the_head_the_sender_audited(tmp_path: Path) -> None:
    sender = _sender(tmp_path)
    head = _head(sender, tmp_path)
    summary = cf("--store", sender, "audit", "incident-7", cwd=tmp_path).stdout
    assert f"head {head}" in summary, summary  # the text says it too, whole, to compare
    turn = cf("--store", sender, "audit", "incident-7", "--turn", "2", cwd=tmp_path)
    assert f"head {head}" in turn.stdout, turn.stdout
    export = cf("--store", sender, "events", "incident-7", "--json", "--with-artifacts", cwd=tmp_path).stdout

    receiver = _import(tmp_path, "receiver", export)
    assert _head(receiver, tmp_path) == head
    replay = cf("--store", receiver, "replay", "incident-7", "--turn", "2", "--verify", cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr

    edited = export.replace('"note":"over to b"', '"note":"nothing happened"')
    assert edited != export
    tampered = _import(tmp_path, "tampered", edited)
    assert cf("--store", tampered, "verify", "incident-7", cwd=tmp_path).returncode == 0  # a chain of its own
    assert _head(tampered, tmp_path) != head  # ... that does not end where the sender's did
