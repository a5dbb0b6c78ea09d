"""A run moves to another store: ``events --json --with-artifacts`` then ``import``.

Why: an export cites its large payloads and media by hash, as the store keeps them, so it
imported only back into the store it came from ("refers to artifact ..., which this store does
not hold"): a run could not be handed to a colleague's SQLite file or moved to PostgreSQL.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
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



def test_carried_media_are_what_their_bytes_prove(tmp_path: Path) -> None:
    """An export whose image cites bytes that are no image is refused, naming the event; a PNG it
    declares image/jpeg 999999x1 is recorded and sent as the PNG it is (Anthropic rejects a
    declared type that does not match the data)."""
    _record(tmp_path / "a.db")
    lines = [json.loads(x) for x in cf("--store", f"sqlite:///{tmp_path / 'a.db'}", "events", "r1", "--json",
                                       "--with-artifacts", cwd=tmp_path).stdout.splitlines()]
    png = next(x["artifact"] for x in lines
               if list(x) == ["artifact"] and x["artifact"]["media_type"] == "image/png")
    junk = b"this is not an image at all" * 10
    store = f"sqlite:///{tmp_path / 'b.db'}"

    def imported(run: str, carried: dict[str, Any], size: tuple[int, int],
                 ) -> subprocess.CompletedProcess[str]:
        """``carried`` declared as is, cited by an image block of ``size`` under that type."""
        ref = {k: carried[k] for k in ("hash", "media_type", "size")}
        block = {"type": "image", "artifact": ref, "media_type": carried["media_type"],
                 "width": size[0], "height": size[1], "detail": "auto", "url": None}
        (tmp_path / f"{run}.jsonl").write_text("\n".join(json.dumps(x) for x in (
            {"artifact": carried}, {"type": "user_input", "v": 1, "content": [block]})) + "\n")
        return cf("--store", store, "import", f"{run}.jsonl", "--run", run, cwd=tmp_path)

    out = imported("j", {"data": base64.b64encode(junk).decode(), "hash": blake3.blake3(junk).hexdigest(),
                         "media_type": "image/png", "size": len(junk)}, (64, 64))
    assert out.returncode == 2 and "event 0 (user_input) cites artifact:" in out.stderr
    assert "the bytes are of no known type" in out.stderr
    out = imported("p", {**png, "media_type": "image/jpeg"}, (999_999, 1))
    assert out.returncode == 0, out.stderr
    built = cf("--store", store, "build", "p", "--provider", "anthropic", "--model", "claude-sonnet-4-5",
               cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    sources = [b["source"] for m in json.loads(built.stdout)["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "image"]
    assert [s["media_type"] for s in sources] == ["image/png"]
    assert base64.b64decode(sources[0]["data"]) == base64.b64decode(png["data"])
