"""A partial re-read at a new revision keeps the rest of the older read, marked stale: through the
Python API over a real store, for OpenAI chat and Anthropic requests."""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.api import open_store
from contextfold.audit.diff import diff_manifests
from contextfold.domain.events import FileRead, UserInput
from tests.json_strings import joined_strings

R1 = "".join(f"line {n} as at r1\n" for n in range(1, 41))
R2_10_20 = "".join(f"line {n} as at r2\n" for n in range(10, 21))
R2_WHOLE = "".join(f"line {n} as at r2\n" for n in range(1, 43))


def _shown(request: dict[str, Any]) -> str:
    return joined_strings(request)


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
def test_a_partial_re_read_at_a_new_revision_keeps_the_rest_of_the_older_read_marked_stale(
        store_url: str, provider: str) -> None:
    """Read a.py whole at r1, edit it, read lines 10-20 at r2: the request showed lines 10-20 and
    nothing else of a.py. Now lines 1-9 and 21-40 are shown from r1 under a stale note, lines 10-20
    from r2 only, and the manifest says what became of the r1 read."""
    with open_store(store_url) as store:
        run = store.run(f"stale-{provider}")
        run.append(UserInput("fix a.py"), FileRead(path="a.py", content=R1, revision="r1"))
        before = run.build(provider, window=20_000, reserve=1_000)  # logged at position 3
        run.append(FileRead(path="a.py", content=R2_10_20, revision="r2", start_line=10, end_line=20))
        built = run.build(provider, window=20_000, reserve=1_000)
    shown = _shown(built.request)
    for n in (*range(1, 10), *range(21, 41)):
        assert f"line {n} as at r1\n" in shown
    for n in range(10, 21):
        assert f"line {n} as at r2\n" in shown
        assert f"line {n} as at r1" not in shown  # never two versions of one line
    assert ("[stale: a.py as read at revision r1 (event 2). Read again since: lines 10-20 at revision r2 "
            "(event 4). Those lines are left out here; the rest may be out of date.]") in shown
    assert "[lines 10-20 left out: read again at revision r2]" in shown
    assert shown.index("line 40 as at r1") < shown.index("line 10 as at r2")  # the newer read below
    manifest = built.manifest
    kept = {f.id: f for f in manifest.fragments}
    assert kept["e4.c1"].source_ref == "file://a.py@r1"
    assert kept["e4.c1"].selection_reason.endswith(
        "; stale rest of e2 (a.py at revision r1): its lines no newer read covers, marked stale "
        "(lines 10-20 superseded by e4 at revision r2)")
    assert kept["e4"].source_ref == "file://a.py@r2#L10-L20"
    [old] = [e for e in manifest.excluded_items if e.id == "e2"]
    assert (old.reason, old.replaced_by) == ("superseded", "e4")
    assert old.detail == "its lines no newer read covers are kept, marked stale, as e4.c1"
    diff = diff_manifests(before.manifest, manifest)
    assert [(e["id"], e["reason"], e["replaced_by"]) for e in diff["left"]] == [("e2", "superseded", "e4")]
    entered = {e["id"]: e["reason"] for e in diff["entered"]}
    assert entered.keys() == {"e4", "e4.c1"} and "stale rest of e2" in entered["e4.c1"]


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
def test_a_whole_file_re_read_at_a_new_revision_still_supersedes_the_older_read_whole(
        store_url: str, provider: str) -> None:
    with open_store(store_url) as store:
        run = store.run(f"whole-{provider}")
        run.append(UserInput("fix a.py"), FileRead(path="a.py", content=R1, revision="r1"),
                   FileRead(path="a.py", content=R2_WHOLE, revision="r2"))
        built = run.build(provider, window=20_000, reserve=1_000)
    shown = _shown(built.request)
    assert "as at r1" not in shown and "stale" not in shown
    assert all(f"line {n} as at r2\n" in shown for n in range(1, 43))
    assert [f.id for f in built.manifest.fragments if f.kind == "evidence"] == ["e3"]
    [old] = [e for e in built.manifest.excluded_items if e.id == "e2"]
    assert (old.reason, old.replaced_by, old.detail) == ("superseded", "e3", "")
