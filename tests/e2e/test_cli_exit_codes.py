"""The exit codes a script gates on, one test per promise of ``contextfold --help``'s list.

Why: ``audit RUN --turn N`` of a turn with no ``context_built`` record printed the turn
re-derived from the log, said there was nothing to check it against, and exited 0: the code of
"checked, and it matches". A CI step gating on ``audit --turn N`` passed a turn no record vouches
for, where ``replay --turn N --verify`` of the same turn exits 2. Both now say 2; ``--json``'s
``ok`` is false for it, as the exit code says.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_runner import cf

RUN = "demo-fix-invoice"


def test_a_turn_with_no_record_to_check_exits_2_in_every_command_that_checks(sqlite_url: str,
                                                                              tmp_path: Path) -> None:
    store = ("--store", sqlite_url)
    assert cf(*store, "demo", cwd=tmp_path).returncode == 0  # turn 6 recorded, turns 1-5 not
    audited = cf(*store, "audit", RUN, "--turn", "3", cwd=tmp_path)
    assert audited.returncode == 2, audited.stderr
    assert "turn 3 has no context_built record" in audited.stdout  # still shown: the re-derived turn
    assert audited.stderr == (f"NOT CHECKED: run {RUN!r} turn 3 has no context_built record to check the "
                              "re-derived request against (exit 2, as replay --verify)\n")
    as_json = cf(*store, "audit", RUN, "--turn", "3", "--json", cwd=tmp_path)
    assert as_json.returncode == 2
    verdict = json.loads(as_json.stdout)
    assert (verdict["ok"], verdict["check"]["recorded"], verdict["problems"]) == (False, False, [])
    assert cf(*store, "replay", RUN, "--turn", "3", "--verify", cwd=tmp_path).returncode == 2
    assert cf(*store, "replay", RUN, "--turn", "3", "--verify", "--json", cwd=tmp_path).returncode == 2
    # the turn not answered yet (the next request, previewed) has no record either
    assert cf(*store, "audit", RUN, "--turn", "7", cwd=tmp_path).returncode == 2
    # a recorded turn that matches: 0 in both, and ok
    assert cf(*store, "audit", RUN, "--turn", "6", cwd=tmp_path).returncode == 0
    checked = cf(*store, "audit", RUN, "--turn", "6", "--json", cwd=tmp_path)
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True
    assert cf(*store, "replay", RUN, "--turn", "6", "--verify", "--json", cwd=tmp_path).returncode == 0


def test_the_json_of_a_check_exits_as_its_text_does(sqlite_url: str, tmp_path: Path) -> None:
    """``--json`` changes what is printed, never the exit code a gate reads."""
    store = ("--store", sqlite_url)
    assert cf(*store, "demo", cwd=tmp_path).returncode == 0
    pairs = [("verify", RUN), ("why", RUN, "--turn", "6", "no-such-words-here"),
             ("why", RUN, "no-such-source"), ("audit", RUN), ("replay", RUN, "--turn", "6", "--verify"),
             ("runs",)]
    for args in pairs:
        text, data = cf(*store, *args, cwd=tmp_path), cf(*store, *args, "--json", cwd=tmp_path)
        assert text.returncode == data.returncode, (args, text.stderr, data.stderr)
    refused = cf(*store, "replay", RUN, "--turn", "6", "--json", cwd=tmp_path)  # the request is JSON already
    assert refused.returncode == 2 and "--json goes with --verify" in refused.stderr
