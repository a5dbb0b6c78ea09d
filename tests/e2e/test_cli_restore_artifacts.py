"""A store that lost an artifact its run cites gets it back from an export of that run.

Why: a partial restore or a bad copy of a store keeps the log and loses a blob it cites (a large
tool output, a screenshot). Every command then says which artifact is missing (exit 3), but
nothing brought it back: importing the run's ``events --json --with-artifacts`` export, made
where the blob still is, was refused as a RunExistsError ("pick another --run"), and the only way
was to import a throwaway copy under another name, which stays in the store.
"""

from __future__ import annotations

import json
from pathlib import Path

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.store.backends import ARTIFACTS_TABLE
from tests.cli_runner import cf
from tests.integration.test_media_build import png


def _record(url: str) -> None:
    with contextfold.open_store(url) as store:
        shot = store.attach_image(png((64, 48), 3))
        run = store.run("r")
        run.append(UserInput(content=(shot,)), UserInput("run the tests"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="pytest", arguments="{}"),)),
                   ToolResult(call_id="c1", content="E   assert 1 == 2\n" * 5000, is_error=True, exit_code=1))
        run.build(provider="anthropic", model="claude-sonnet-4-5", window=50_000, reserve=4_000)


def _lose_text_artifacts(url: str) -> None:
    with contextfold.open_store(url) as store:
        b = store.events.backend
        b.execute(f"DELETE FROM {b.table(ARTIFACTS_TABLE)} WHERE media_type = {b.placeholder}",
                  ("text/plain; charset=utf-8",))


def test_an_export_brings_back_the_artifacts_a_run_lost(store_url: str, tmp_path: Path) -> None:
    _record(store_url)
    export = cf("--store", store_url, "events", "r", "--json", "--with-artifacts", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    (tmp_path / "r.jsonl").write_text(export.stdout, encoding="utf-8")
    before = cf("--store", store_url, "events", "r", "--json", cwd=tmp_path).stdout
    _lose_text_artifacts(store_url)
    lost = cf("--store", store_url, "verify", "r", cwd=tmp_path)
    assert lost.returncode == 3
    # the error says how to bring it back, not only which one is missing
    assert "--with-artifacts" in lost.stderr
    assert "--with-artifacts" in cf("--store", store_url, "build", "r", cwd=tmp_path).stderr

    back = cf("--store", store_url, "import", "r.jsonl", "--run", "r", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert back.stdout.splitlines() == [
        "run 'r' holds these events already: restored 1 artifact(s) its log cites that the store had lost"]
    assert cf("--store", store_url, "verify", "r", cwd=tmp_path).returncode == 0
    assert cf("--store", store_url, "replay", "r", "--turn", "2", "--verify", cwd=tmp_path).returncode == 0
    # the log is as it was: nothing appended, no other run made
    assert cf("--store", store_url, "events", "r", "--json", cwd=tmp_path).stdout == before
    with contextfold.open_store(store_url) as store:
        assert [r.run_id for r in store.runs()] == ["r"]

    # with nothing to bring back, a run that exists is refused as before
    again = cf("--store", store_url, "import", "r.jsonl", "--run", "r", cwd=tmp_path)
    assert again.returncode == 2 and "RunExistsError" in again.stderr


def test_only_the_same_log_gets_artifacts_back(store_url: str, tmp_path: Path) -> None:
    """An export of another log under the taken name is refused, and writes nothing."""
    _record(store_url)
    lines = cf("--store", store_url, "events", "r", "--json", "--with-artifacts",
               cwd=tmp_path).stdout.splitlines()
    _lose_text_artifacts(store_url)
    edited = [json.loads(x) for x in lines]
    user = next(x for x in edited if x.get("type") == "user_input" and x["content"][0]["type"] == "text")
    user["content"][0]["text"] = "run the other tests"
    (tmp_path / "other.jsonl").write_text("\n".join(json.dumps(x) for x in edited) + "\n", encoding="utf-8")
    refused = cf("--store", store_url, "import", "other.jsonl", "--run", "r", cwd=tmp_path)
    assert refused.returncode == 2 and "RunExistsError" in refused.stderr
    assert cf("--store", store_url, "verify", "r", cwd=tmp_path).returncode == 3  # still lost



def test_an_export_repairs_an_artifact_whose_stored_bytes_are_damaged(store_url: str, tmp_path: Path) -> None:
    """A row that holds other bytes than its hash says (a bad copy, a disk error) is replaced by the
    carried bytes, which the import checked against that hash; before, the import found the hash
    held and refused the run as existing, and the damage stayed."""
    _record(store_url)
    (tmp_path / "r.jsonl").write_text(cf("--store", store_url, "events", "r", "--json", "--with-artifacts",
                                         cwd=tmp_path).stdout, encoding="utf-8")
    with contextfold.open_store(store_url) as store:
        b = store.events.backend
        b.execute(f"UPDATE {b.table(ARTIFACTS_TABLE)} SET data = {b.placeholder} "
                  f"WHERE media_type = {b.placeholder}", (b"damaged bytes", "text/plain; charset=utf-8"))
    damaged = cf("--store", store_url, "verify", "r", cwd=tmp_path)
    assert damaged.returncode == 3 and "--with-artifacts" in damaged.stderr
    back = cf("--store", store_url, "import", "r.jsonl", "--run", "r", cwd=tmp_path)
    assert back.returncode == 0, back.stderr
    assert "restored 1 artifact(s)" in back.stdout
    assert cf("--store", store_url, "verify", "r", cwd=tmp_path).returncode == 0
    assert cf("--store", store_url, "replay", "r", "--turn", "2", "--verify", cwd=tmp_path).returncode == 0
