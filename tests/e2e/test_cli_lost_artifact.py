"""An artifact the log cites that the store no longer holds (a partial restore, a bad copy) is an
integrity failure wherever the run is read back, on every backend, as ``verify`` says.

Why: ``verify`` exited 3, but ``replay --verify`` and ``audit`` printed a bare
``ArtifactNotFoundError`` and exited 2, the code for a mistyped argument, although the README says
a ``replay --verify`` over a damaged log or artifact is 3. A hash a caller names that the store does
not hold stays ``ArtifactNotFoundError`` (exit 2): that is input, not damage."""

from __future__ import annotations

from pathlib import Path

import pytest

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.errors import ArtifactNotFoundError, IntegrityError
from contextfold.store.backends import ARTIFACTS_TABLE
from tests.cli_runner import cf


def _lost(url: str) -> str:
    """A run whose tool output (an artifact) is gone from the store; returns its hash."""
    with contextfold.open_store(url) as store:
        run = store.run("r")
        run.append(UserInput("run the tests"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="pytest", arguments="{}"),)),
                   ToolResult(call_id="c1", content="E   assert 1 == 2\n" * 5000, is_error=True, exit_code=1))
        run.build(provider="anthropic", model="claude-sonnet-4-5", window=50_000, reserve=4_000)
        ref = run.events()[2].event.artifact  # type: ignore[union-attr]
        assert ref is not None
        b = store.events.backend
        b.execute(f"DELETE FROM {b.table(ARTIFACTS_TABLE)} WHERE hash = {b.placeholder}", (ref.hash,))
        return ref.hash


def test_a_lost_artifact_is_an_integrity_failure_for_every_command(store_url: str, tmp_path: Path) -> None:
    digest = _lost(store_url)
    for command in (["verify", "r"], ["replay", "r", "--turn", "2", "--verify"], ["audit", "r"],
                    ["audit", "r", "--turn", "2"], ["build", "r"],
                    ["events", "r", "--json", "--with-artifacts"]):
        out = cf("--store", store_url, *command, cwd=tmp_path)
        assert out.returncode == 3, (command, out.stdout[-300:], out.stderr)
        assert digest in out.stderr + out.stdout, command
    shown = cf("--store", store_url, "show", "r", f"artifact:{digest}", cwd=tmp_path)
    assert shown.returncode == 2 and "ArtifactNotFoundError" in shown.stderr  # a ref the caller names


def test_the_api_says_so_too(store_url: str) -> None:
    digest = _lost(store_url)
    with contextfold.open_store(store_url) as store:
        with pytest.raises(IntegrityError, match=f"artifact {digest} .*not in the store"):
            store.run("r").replay(turn=2)
        with pytest.raises(IntegrityError, match=digest):
            store.events.cited_artifact(digest)
        with pytest.raises(ArtifactNotFoundError):
            store.artifact(digest)
        with pytest.raises(ArtifactNotFoundError):
            store.artifact_text(digest)
