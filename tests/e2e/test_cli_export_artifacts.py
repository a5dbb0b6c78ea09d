"""A run moves to another store: ``events --json --with-artifacts`` then ``import``.

Why: an export cites its large payloads and media by hash, as the store keeps them, so it
imported only back into the store it came from ("refers to artifact ..., which this store does
not hold"): a run could not be handed to a colleague's SQLite file or moved to PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from tests.cli_runner import cf
from tests.integration.test_media_build import png

BIG = "\n".join(f"line {i}: " + "payload " * 20 for i in range(3_000))


def _record(db: Path) -> None:
    with open_store(f"sqlite:///{db}") as store:
        shot = store.attach_image(png((64, 48), 3))
        run = store.run("r1")
        run.append(RunStarted(agent="a", model="gpt-4o"),
                   UserInput(content=(shot,)), UserInput("Read the log."),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cat"),)),
                   ToolResult(call_id="c1", content=BIG))
        run.build("anthropic", window=64_000)


def test_an_export_with_its_artifacts_imports_into_another_store_as_the_same_run(tmp_path: Path) -> None:
    _record(tmp_path / "a.db")
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    export = cf("--store", source, "events", "r1", "--json", "--with-artifacts", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    lines = [json.loads(x) for x in export.stdout.splitlines()]
    carried = [x["artifact"] for x in lines if list(x) == ["artifact"]]
    assert sorted(a["media_type"] for a in carried) == ["image/png", "text/plain; charset=utf-8"]
    (tmp_path / "r1.jsonl").write_text(export.stdout)

    plain = cf("--store", source, "events", "r1", "--json", cwd=tmp_path)
    (tmp_path / "plain.jsonl").write_text(plain.stdout)
    refused = cf("--store", target, "import", "plain.jsonl", "--run", "r1", cwd=tmp_path)
    assert refused.returncode == 2 and "'events --json --with-artifacts' carries them" in refused.stderr
    # refused before the file was made: an empty store left behind passed for one recorded into
    assert not (tmp_path / "b.db").exists()
    (tmp_path / "empty.db").touch()  # an empty file is no store yet either: left as it is
    refused = cf("--store", f"sqlite:///{tmp_path / 'empty.db'}", "import", "plain.jsonl", "--run", "r1",
                 cwd=tmp_path)
    assert refused.returncode == 2 and (tmp_path / "empty.db").stat().st_size == 0

    moved = cf("--store", target, "import", "r1.jsonl", "--run", "r1", cwd=tmp_path)
    assert moved.returncode == 0, moved.stderr
    other = cf("--store", f"sqlite:///{tmp_path / 'c.db'}", "import", "r1.jsonl", "--run", "r1", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    # a store that exists is asked what it holds: the plain export imports where its artifacts are
    assert cf("--store", target, "import", "plain.jsonl", "--run", "again", cwd=tmp_path).returncode == 0
    refused = cf("--store", f"sqlite:///{tmp_path / 'c.db'}", "import", "plain.jsonl", "--run", "r1",
                 cwd=tmp_path)
    assert refused.returncode == 2 and "RunExistsError" in refused.stderr
    # the same log, position for position, hash for hash, and the same requests from it
    assert cf("--store", target, "events", "r1", "--json", cwd=tmp_path).stdout == plain.stdout
    assert cf("--store", target, "replay", "r1", "--turn", "2", "--verify", cwd=tmp_path).returncode == 0
    with open_store(source) as a, open_store(target) as b:
        assert b.run("r1").verify().ok
        for provider in ("anthropic", "openai-chat", "gemini"):
            assert (a.run("r1").build(provider, record=False).body_bytes
                    == b.run("r1").build(provider, record=False).body_bytes)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda a: a.update(data=a["data"][:-8] + "AAAAAAA="), "its data does not match its hash and size"),
    (lambda a: a.update(data="not base64!"), "not valid base64"),
    (lambda a: a.pop("size"), "exactly data, hash, media_type and size"),
])
def test_a_carried_artifact_that_does_not_match_its_hash_is_refused(
        tmp_path: Path, edit: Callable[[dict[str, Any]], object], message: str) -> None:
    _record(tmp_path / "a.db")
    export = cf("--store", f"sqlite:///{tmp_path / 'a.db'}", "events", "r1", "--json", "--with-artifacts",
                cwd=tmp_path).stdout.splitlines()
    first = json.loads(export[0])
    edit(first["artifact"])
    (tmp_path / "r1.jsonl").write_text("\n".join([json.dumps(first), *export[1:]]) + "\n")
    out = cf("--store", f"sqlite:///{tmp_path / 'b.db'}", "import", "r1.jsonl", "--run", "r1", cwd=tmp_path)
    assert out.returncode == 2 and "ImportFormatError: r1.jsonl:1: " in out.stderr and message in out.stderr
    with open_store(f"sqlite:///{tmp_path / 'b.db'}") as b:
        assert b.runs() == [] and b.events.artifact_count() == 0  # nothing written


def test_with_artifacts_needs_json(tmp_path: Path) -> None:
    _record(tmp_path / "a.db")
    out = cf("--store", f"sqlite:///{tmp_path / 'a.db'}", "events", "r1", "--with-artifacts", cwd=tmp_path)
    assert out.returncode == 2 and "--with-artifacts goes with --json" in out.stderr
