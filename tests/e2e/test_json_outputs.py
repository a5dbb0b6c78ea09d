"""Every ``--json`` output is a contract: ``contextfold schema NAME`` prints its JSON Schema, the
real command's output on a recorded run validates against it, and the schema's shape is pinned.

Why: scripts build on these outputs (CI gates on ``replay --verify``, dashboards read ``runs
--json``, incident tooling ``audit --json`` and ``why --json``), and as ad-hoc dicts a field could
vanish in a release with no test failing. A change of shape now fails
``test_each_schema_keeps_its_shape`` until its pin is changed with it: a deliberate act, said in
the changelog. The commands run in-process (``tests.cli_runner``) on SQLite, and on PostgreSQL for
those that read the store differently there (the listing, the chain, the records).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import blake3
import jsonschema
import pytest

from contextfold.cli import SCHEMAS, build_parser
from tests.cli_runner import cf
from tests.schema_shapes import shape

RUN = "demo-fix-invoice"

OUTPUTS: dict[str, tuple[str, ...]] = {
    "runs": ("runs", "--json"),
    "verify": ("verify", RUN, "--json"),
    "usage": ("usage", RUN, "--turn", "6", "--input-tokens", "3000", "--cached-tokens", "1000", "--json"),
    "build": ("build", RUN, "--provider", "anthropic", "--json"),
    "compact": ("compact", RUN, "--dry-run", "--keep-recent", "1", "--json"),
    "manifest": ("manifest", RUN, "--turn", "6", "--json"),
    "audit": ("audit", RUN, "--json"),
    "audit-turn": ("audit", RUN, "--turn", "6", "--json", "--content"),
    "why": ("why", RUN, "--turn", "6", "--record", "last", "e11", "--json"),
    "why-turns": ("why", RUN, "e9", "--json"),
    "diff": ("diff", RUN, "5", "6", "--record-b", "last", "--json"),
    "replay-verify": ("replay", RUN, "--turn", "6", "--verify", "--json"),
}
"""Each schema's command, on the run :func:`_recorded` makes (``events``: its own test)."""

ON_POSTGRES = {"runs", "verify", "audit", "audit-turn", "why-turns", "replay-verify"}
"""The outputs whose reads the store answers differently on PostgreSQL (listing, chain, records)."""

SHAPES = {
    "audit": "a1f85e4544e84c89785fa7ab8e1d99daacca082f52a7fa816546a97fc4960fda",
    "audit-turn": "b1fbfffc99acfde646511d59b7b93fdf213eb9d289bf5b6453e93d1db11fa60a",
    "build": "23c0f44b2b5d9e4ef0f846f580d048877f8eaa4a16c4f10a464582ee0debf541",
    "compact": "a8358e09d3df5618b9931a270db77faa9de5f1a212c2562a687ff2f17e7de8c2",
    "diff": "4ae5c2dc3cdae426873b2f040c87fee0dee7068f5d82b9d9ebee72b8db83d6c7",
    "events": "13b4b20a655eb40367ee91755a745015f6ee5fd7ccff320d54be5cfec936b21e",
    "manifest": "33b6cf95bf7d7916b9527a5ad81904c992eafcb9f8f7caf3a920551cfdecf061",
    "replay-verify": "52f8f376d04accbfe4316603d24b3ab7e9ddae21f13cf38356a806deec2fa7da",
    "runs": "8d50ca3d6b0912db56599b74367b931f605bc2da9c8317281d044e7ee8c0fd8e",
    "usage": "03ae97c63cc15d991725600da7076fe5c5605927bc6b8e0c3583c015af1cbdd0",
    "verify": "93214f2d49e4fa375a0afedd659859adf91eab9a641b6f6a1ea3eb68592ca0e3",
    "why": "8e73630e26d664b5110fb4b606e26de10fcb9ff634b4798b8698b7cad3f73c7e",
    "why-turns": "01bcae1ec90a85e5a4c0c1e6fc83622f54e51b9725bd62d8b168b4c48a7edefb",
}
"""blake3 of each schema's JSON, its descriptions left out (a reworded docstring is no change of
shape; ``tests/e2e/test_user_types.py`` pins the manifest's models so too)."""


def _ok(*args: str, cwd: Path, codes: tuple[int, ...] = (0,)) -> str:
    out = cf(*args, cwd=cwd)
    assert out.returncode in codes, (args, out.returncode, out.stderr)
    return out.stdout


def _schema(name: str, cwd: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(_ok("schema", name, cwd=cwd))
    return schema


def _recorded(url: str, cwd: Path) -> None:
    """The demo run (turn 6 recorded), its old tool results masked (a compaction), turn 6 built
    again at a small window (its last record: fragments dropped, superseded): every output has
    something in its lists."""
    _ok("--store", url, "demo", "--run", RUN, cwd=cwd)
    _ok("--store", url, "compact", RUN, "--keep-recent", "1", cwd=cwd)
    _ok("--store", url, "build", RUN, "--provider", "anthropic", "--window", "5000", "--reserve", "1000",
        cwd=cwd)


def _validate(name: str, text: str, cwd: Path) -> None:
    jsonschema.Draft202012Validator(_schema(name, cwd)).validate(json.loads(text))


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_each_json_output_validates_against_its_printed_schema(name: str, sqlite_url: str,
                                                               tmp_path: Path) -> None:
    _recorded(sqlite_url, tmp_path)
    _validate(name, _ok("--store", sqlite_url, *OUTPUTS[name], cwd=tmp_path), tmp_path)


@pytest.mark.postgres
@pytest.mark.parametrize("name", sorted(ON_POSTGRES))
def test_the_store_dependent_outputs_validate_on_postgres(name: str, pg_url: str, tmp_path: Path) -> None:
    _recorded(pg_url, tmp_path)
    _validate(name, _ok("--store", pg_url, *OUTPUTS[name], cwd=tmp_path), tmp_path)


def test_the_outputs_other_branches_of_a_command_print_validate_too(sqlite_url: str, tmp_path: Path) -> None:
    """A turn with no record (``check.recorded`` false, exit 2), a match found by words
    (``matched``), nothing matched (exit 1), a dropped fragment, a tool not exposed, a run listing
    that is empty, a chain that is broken (exit 3): each validates against the same schema."""
    _recorded(sqlite_url, tmp_path)
    store = ("--store", sqlite_url)
    cases = {
        ("audit-turn", 2): ("audit", RUN, "--turn", "3", "--json"),
        ("why", 0): ("why", RUN, "--turn", "6", "--record", "last", "rounding", "--json"),
        ("why", 1): ("why", RUN, "--turn", "6", "no-such-words-anywhere", "--json"),
        ("why-turns", 1): ("why", RUN, "no-such-source", "--json"),
        ("diff", 0): ("diff", RUN, "2", "6", "--json"),
        ("runs", 0): ("runs", "no-such-prefix-", "--json"),
        ("usage", 0): ("usage", RUN, "--turn", "2", "--input-tokens", "2000", "--json"),
    }
    for (name, code), args in cases.items():
        _validate(name, _ok(*store, *args, cwd=tmp_path, codes=(code,)), tmp_path)
    found = json.loads(_ok(*store, "why", RUN, "--turn", "6", "--record", "last", "e6", "--json",
                           cwd=tmp_path))
    assert [m["verdict"] for m in found["matches"]] == ["dropped"] and "replaced_by" in found["matches"][0]


def test_a_broken_chain_is_still_the_verify_schema_and_exit_3(sqlite_url: str, tmp_path: Path) -> None:
    import contextlib
    import sqlite3

    _recorded(sqlite_url, tmp_path)
    with contextlib.closing(sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))) as db:
        state = db.execute("SELECT state FROM contextfold_events WHERE originator_version = 9").fetchone()[0]
        db.execute("UPDATE contextfold_events SET state = ? WHERE originator_version = 9",
                   (state.replace(b"FAILED", b"PASSED"),))
        db.commit()
    text = _ok("--store", sqlite_url, "verify", RUN, "--json", cwd=tmp_path, codes=(3,))
    _validate("verify", text, tmp_path)
    shown = json.loads(text)
    assert (shown["ok"], shown["first_bad_position"], shown["head"]) == (False, 9, None)


def test_each_schema_keeps_its_shape(tmp_path: Path) -> None:
    shapes = {name: blake3.blake3(json.dumps(shape(_schema(name, tmp_path)), sort_keys=True).encode()
                                  ).hexdigest() for name in sorted(SCHEMAS)}
    assert shapes == SHAPES


def _json_commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name for name, p in sub.choices.items()
            if any("--json" in a.option_strings for a in p._actions)}


def test_every_command_with_json_has_a_schema_listed_in_its_help(tmp_path: Path) -> None:
    """A command given ``--json`` later gets a schema with it, or this fails."""
    commands = {args[0] for args in OUTPUTS.values()} | {"events"}
    assert _json_commands() == commands
    assert set(OUTPUTS) | {"events"} == set(SCHEMAS)
    shown = _ok("schema", "--help", cwd=tmp_path)
    assert all(f"\n  {name} " in shown for name in SCHEMAS), shown


def test_each_event_line_of_the_export_validates_against_the_events_schema(sqlite_url: str,
                                                                            tmp_path: Path) -> None:
    """``events --json`` lines carry their time (``recorded_at``) beside the event's fields: the
    schema printed for them takes it (every event type forbids fields it does not have)."""
    _recorded(sqlite_url, tmp_path)
    validator = jsonschema.Draft202012Validator(_schema("events", tmp_path))
    lines = [json.loads(line) for line in
             _ok("--store", sqlite_url, "events", RUN, "--json", cwd=tmp_path).splitlines()]
    assert lines and all("recorded_at" in line for line in lines)
    for line in lines:
        validator.validate(line)
