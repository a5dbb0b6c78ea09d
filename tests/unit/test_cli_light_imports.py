"""A command pays for the modules it uses, not for every command's.

``contextfold --help`` took ~0.45 s of CPU (the interpreter alone: ~0.03 s) because ``cli``
imported every command's module to read its flags, and with them the builder, the renderers,
the pydantic models, eventsourcing and tiktoken. Each case runs the command in a new
interpreter (the modules a process loaded cannot be unloaded) and lists the heavy modules it
loaded.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from contextfold.cli import main

RENDERERS = tuple(f"contextfold.projections.render.{name}" for name in (
    "anthropic", "openai_chat", "openai_responses", "gemini", "validate", "data_blocks"))
"""The provider renderers and the request check: what the package ``projections.render`` loaded
when any of its modules was imported (a runtime line's wording, the protocol's tool name rules)."""


HEAVY = ("contextfold.api", "contextfold.projections.builder", "contextfold.projections.render",
         "contextfold.domain.manifest", "tiktoken", "eventsourcing", "pydantic", "anthropic", "openai",
         "contextfold.importers", *RENDERERS)

_CHILD = """
import contextlib, io, json, sys
from contextfold.console import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
heavy = sorted({h for h in json.loads(sys.argv[2]) for m in sys.modules if m == h or m.startswith(h + ".")})
print(json.dumps({"code": code, "heavy": heavy}))
"""


def _loaded(argv: list[str], watched: tuple[str, ...] = HEAVY) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(argv), json.dumps(watched)],
                         capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.splitlines()[-1])
    return got["code"], got["heavy"]


@pytest.mark.parametrize("argv", [["--help"], ["build", "--help"], ["audit", "--help"], ["why", "--help"],
                                  ["import", "--help"], ["runs", "--bogus"]])
def test_help_and_usage_errors_import_no_command(argv: list[str]) -> None:
    code, heavy = _loaded(argv)
    assert code in (0, 2)
    assert heavy == []


BUILDER = ("contextfold.api", "contextfold.projections.builder", "contextfold.projections.render", "tiktoken",
           "anthropic", "openai", "contextfold.importers")
"""What a command that builds nothing must not load: the run handle (``api.Run``), the builder,
the renderers, the tokenizer, the provider SDKs; nor one that imports nothing, the importers
(which load the renderers: ~0.15 s of CPU)."""


@pytest.mark.parametrize("argv", [["runs"], ["runs", "--json", "demo"], ["verify", "demo-fix-invoice"],
                                  ["events", "demo-fix-invoice"], ["events", "demo-fix-invoice", "--json"],
                                  ["events", "demo-fix-invoice", "--json", "--with-artifacts"],
                                  ["verify", "no-such-run"]])
def test_store_commands_load_the_store_not_the_builder(tmp_path: Path, argv: list[str]) -> None:
    """``runs``, ``verify`` and ``events`` read the log: the store and the event models, no builder.
    ``events --with-artifacts`` writes the export's artifact lines, which only the importer reads:
    it loaded every importer (and through them the renderers) to get the line's format."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    code, heavy = _loaded(["--store", url, *argv])
    assert code == (2 if argv[-1] == "no-such-run" else 0)
    assert [h for h in heavy if h in BUILDER] == []
    assert "eventsourcing" in heavy  # it did open the store


MANIFEST = ("contextfold.domain.manifest", "contextfold.domain.fragments")
"""The build's models: a manifest's and a fragment's (14 pydantic models, ~20 ms of CPU to define)."""


@pytest.mark.parametrize("argv", [["runs"], ["verify", "demo-fix-invoice"], ["events", "demo-fix-invoice"],
                                  ["events", "demo-fix-invoice", "--json", "--with-artifacts"]])
def test_store_commands_define_no_manifest_model(tmp_path: Path, argv: list[str]) -> None:
    """A command that reads the log defines no build model: the store imported
    :mod:`contextfold.domain.manifest` (and through it the fragments') for ``manifest_encoding``,
    a two-line read of one key of a record's manifest (``store.run_heads``)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    code, heavy = _loaded(["--store", url, *argv], MANIFEST)
    assert code == 0
    assert heavy == []


_BUILT_CHILD = """
import contextlib, io, json, sys
from contextfold.console import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(json.loads(sys.argv[1]))
from contextfold.domain.events import EVENT_ADAPTER
from contextfold.domain.release_versions import EVENT_CLASSES
built = [c.__name__ for c in EVENT_CLASSES if c.__pydantic_complete__]
print(json.dumps({"code": code, "built": built, "union": EVENT_ADAPTER.pydantic_complete}))
"""


def test_runs_builds_no_event_model(tmp_path: Path) -> None:
    """``runs`` lists rows and parses no event: it built every event class's validator and the
    union's (~20 ms of CPU) because a class was built when defined. ``events`` still parses."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    got = {}
    for name, argv in (("runs", ["runs"]), ("events", ["events", "demo-fix-invoice"])):
        out = subprocess.run([sys.executable, "-c", _BUILT_CHILD, json.dumps(["--store", url, *argv])],
                             capture_output=True, text=True, check=True)
        got[name] = json.loads(out.stdout.splitlines()[-1])
    assert got["runs"] == {"code": 0, "built": [], "union": False}
    assert got["events"]["code"] == 0 and got["events"]["union"] is True


def test_schema_loads_the_models_only(tmp_path: Path) -> None:
    code, heavy = _loaded(["schema", "events"])
    assert code == 0
    assert heavy == ["pydantic"]


def test_the_flags_restated_for_the_parser_match_the_models() -> None:
    from contextfold.cli_args import PROVIDER_CHOICES
    from contextfold.domain.manifest import BUILD_PROVIDERS

    assert PROVIDER_CHOICES == BUILD_PROVIDERS


def test_every_command_handler_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A handler named by a string (imported when its command runs) that does not exist failed
    only when that command ran: each one is resolved here."""
    import importlib

    from contextfold.cli import COMMANDS

    for name, (_, handler, _) in COMMANDS.items():
        module, attr = getattr(handler, "module", None), getattr(handler, "name", None)
        if module is not None and attr is not None:
            assert callable(getattr(importlib.import_module(module), attr)), name
    assert main(["--store", f"sqlite:///{tmp_path / 'x.db'}", "demo"]) == 0
    assert "next request (anthropic" in capsys.readouterr().out


SDKS = ("anthropic", "openai")

_SHOWS_NO_BODY = [
    ["demo"],
    ["manifest", "demo-fix-invoice", "--provider", "anthropic"],
    ["manifest", "demo-fix-invoice", "--provider", "openai-chat", "--json"],
    ["manifest", "demo-fix-invoice", "--turn", "3"],
    ["audit", "demo-fix-invoice"],
    ["audit", "demo-fix-invoice", "--json"],
    ["audit", "demo-fix-invoice", "--turn", "6"],
    ["audit", "demo-fix-invoice", "--turn", "3", "--json"],
    ["replay", "demo-fix-invoice", "--turn", "6", "--verify"],
    ["why", "demo-fix-invoice", "--turn", "3", "e9"],
    ["diff", "demo-fix-invoice", "5", "6"],
]
"""Commands that show a manifest, a table, a summary or a verdict, never a request body."""

_SHOWS_A_BODY = [
    ["build", "demo-fix-invoice", "--provider", "anthropic"],
    ["build", "demo-fix-invoice", "--provider", "anthropic", "--json"],
    ["replay", "demo-fix-invoice", "--turn", "6"],
    ["audit", "demo-fix-invoice", "--turn", "6", "--content"],
]
"""Commands that print (or write) the request body: it is checked against the SDK's types."""


@pytest.mark.parametrize("argv", _SHOWS_NO_BODY + _SHOWS_A_BODY)
def test_only_a_command_that_shows_a_request_body_imports_the_sdk(tmp_path: Path, argv: list[str]) -> None:
    """Importing the anthropic SDK for the request check was ~1-1.3 s of CPU of ``manifest``,
    ``audit``, ``why``, ``diff`` and ``demo``, which show no body: the check is kept where the body
    is output (``build``, ``replay`` without ``--verify``, ``audit --turn N --content``). The demo
    run's turn 6 is recorded for anthropic (turns 1-5 are rebuilt with its settings)."""
    from contextfold.projections.render import sdk_available

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    if argv != ["demo"]:
        assert main(["--store", url, "demo"]) == 0
    code, heavy = _loaded(["--store", url, *argv])
    unchecked = argv[:2] == ["audit", "demo-fix-invoice"] and argv[2:4] == ["--turn", "3"]
    assert code == (2 if unchecked else 0)  # turn 3 has no record to check: exit 2, shown all the same
    assert "tiktoken" in heavy  # it did build
    if argv in _SHOWS_A_BODY:
        assert ("anthropic" in heavy) is sdk_available("anthropic")
    else:
        assert [h for h in heavy if h in SDKS] == []


def test_import_loads_the_importers_not_the_builder(tmp_path: Path) -> None:
    """``import`` parses a file and appends its events: it loaded the run handle, the builder and
    tiktoken (~0.3 s of CPU) because the progress bar's module named the store's type through
    :mod:`contextfold.api`; and every renderer (~0.07 s) because the importers word a call's
    runtime line (``render.runtime_lines``) and the import checks tool names against the
    protocol's rules (``render.protocol``), and the package imported all its renderers first."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    export = tmp_path / "demo.jsonl"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["--store", url, "events", "demo-fix-invoice", "--json"]) == 0
    export.write_text(out.getvalue(), encoding="utf-8")
    code, heavy = _loaded(["--store", f"sqlite:///{tmp_path / 'copy.db'}", "import", str(export),
                           "--run", "copy"])
    assert code == 0
    assert "contextfold.importers" in heavy  # it did parse the file
    assert [h for h in heavy if h in ("contextfold.api", "contextfold.projections.builder", "tiktoken",
                                      "anthropic", "openai", *RENDERERS)] == []


def test_usage_records_a_report_without_the_builder(tmp_path: Path) -> None:
    """``usage`` (which a runtime may call after every model response) checks the report against
    the turn's recorded estimates and appends it: it loaded the audit, the builder and the
    renderers (~0.2 s of CPU) because its handler lived in ``cli_audit``; and tiktoken (~0.1 s),
    which counts nothing here, because ``projections.calibration`` imported the fold's state to
    name its type."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    code, heavy = _loaded(["--store", url, "usage", "demo-fix-invoice", "--turn", "6",
                           "--input-tokens", "3100"])
    assert code == 0
    assert [h for h in heavy if h in ("contextfold.projections.builder", "contextfold.projections.render",
                                      *RENDERERS, "anthropic", "openai", "tiktoken")] == []
    assert "eventsourcing" in heavy  # it did open the store


@pytest.mark.parametrize("argv", [["show", "event://demo-fix-invoice/9"], ["show", "demo-fix-invoice", "3-5"],
                                  ["show", "call://demo-fix-invoice/call_06@22"]])
def test_show_reads_the_log_without_the_builder(tmp_path: Path, argv: list[str]) -> None:
    """``show`` prints what a ref cites, read back from the log: it loaded compaction, the summary's
    wording, the builder and tiktoken (~0.2 s of CPU) because it shared ``compact``'s module and
    ``show_refs`` imported them at its top. A call's ref folds the run (to find its answer)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    code, heavy = _loaded(["--store", url, *argv])
    assert code == 0
    builder = ("contextfold.projections.builder", *RENDERERS[:-1], "anthropic", "openai")
    folds = ("tiktoken", "contextfold.projections.render", RENDERERS[-1])  # the data blocks' wording
    assert [h for h in heavy if h in (builder if argv[1].startswith("call://") else builder + folds)] == []


@pytest.mark.parametrize("argv", [["compact", "demo-fix-invoice", "--dry-run"],
                                  ["compact", "demo-fix-invoice"],
                                  ["compact", "demo-fix-invoice", "--window", "6000", "--dry-run"]])
def test_compact_without_a_window_loads_no_builder(tmp_path: Path, argv: list[str]) -> None:
    """``compact`` without a window plans one cut and builds nothing: it loaded the builder, its
    selection and layout (~34 modules) because the compaction ladder imported ``build_context`` at
    its top. With a window it climbs the ladder by trial builds, which do load it."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["--store", url, "demo"]) == 0
    code, heavy = _loaded(["--store", url, *argv])
    assert code == 0
    assert "tiktoken" in heavy  # it did count the tokens it replaces
    assert ("contextfold.projections.builder" in heavy) is ("--window" in argv)
