"""Rules of the codebase that a reader relies on: the public API and the import direction."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import contextfold
import contextfold.domain.errors as errors

PACKAGE = Path(contextfold.__file__).resolve().parent

PUBLIC = {
    # the Python API of DESIGN.md section 10
    "open_store", "Store", "Run", "ReplayReport", "BuildResult", "BuildConfig", "ContextManifest",
    "ContextFragment",
    # the process-wide memo ceiling (a long-lived process's memory: ``projections.memo_budget``)
    "memo_ceiling", "memo_report", "set_memo_ceiling", "MemoCeilingWarning",
    # a provider's requests not checked against its SDK's types (missing, or older than its floor)
    "SdkCheckSkippedWarning",
    # a provider's response, as its SDK returns it, read into the events to append
    "read_response", "ProviderReply",
    # a streamed response, chunk by chunk, read into the same reply
    "read_stream", "StreamReader",
    # the event vocabulary (DESIGN.md section 2)
    "AnyEvent", "ArtifactRef", "CompactionSummary", "ContextBuilt", "DocumentBlock", "EvidenceRetrieved",
    "FileRead", "GoalSet", "HandOff", "HistoryCompacted", "ImageBlock", "InstructionSet", "MemoryRecalled",
    "ModelResponse", "PlanStep", "PlanUpdated", "PolicySet", "RunStarted", "RuntimeNote", "TextBlock",
    "ToolCall", "ToolCallCancelled", "ToolResult", "ToolResultLost", "ToolSpec", "ToolsRegistered",
    "UsageObserved", "UsageWarning", "UserInput",
}


def test_public_api_is_exactly_the_documented_names_and_every_error() -> None:
    error_names = {name for name, obj in vars(errors).items()
                   if inspect.isclass(obj) and issubclass(obj, errors.ContextfoldError)}
    assert set(contextfold.__all__) == PUBLIC | error_names
    assert len(contextfold.__all__) == len(set(contextfold.__all__))
    for name in contextfold.__all__:
        assert getattr(contextfold, name) is not None


@pytest.mark.parametrize("package", ["contextfold", "contextfold.projections.render"])
def test_the_lazy_exports_are_the_names_imported_for_type_checkers(package: str) -> None:
    """``contextfold/__init__.py`` (and ``projections/render/__init__.py``) imports its public names
    under ``TYPE_CHECKING`` (for mypy and editors) and resolves them at run time from ``_EXPORTS``:
    the two must name the same modules, and every name must resolve."""
    module = importlib.import_module(package)
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {node.module: tuple(a.name for a in node.names)
                for node in guarded.body if isinstance(node, ast.ImportFrom)}
    assert imported == module._EXPORTS
    assert sorted(module._MODULE_OF) == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is getattr(importlib.import_module(module._MODULE_OF[name]), name)


def test_every_error_hangs_under_the_single_root_and_is_in_the_tree() -> None:
    doc = errors.__doc__ or ""
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ContextfoldError)
        assert name in doc, f"{name} missing from the tree in errors.py's docstring"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def _layer_imports(layer: str) -> dict[str, set[str]]:
    return {str(p.relative_to(PACKAGE)): {m for m in _imports(p) if m.startswith("contextfold")}
            for p in (PACKAGE / layer).rglob("*.py")}


def test_domain_imports_only_the_domain() -> None:
    for module, imports in _layer_imports("domain").items():
        bad = {m for m in imports if not m.startswith("contextfold.domain")}
        assert not bad, f"{module} imports {bad}"


def test_projections_import_only_domain_and_projections() -> None:
    for module, imports in _layer_imports("projections").items():
        bad = {m for m in imports if not m.startswith(("contextfold.domain", "contextfold.projections"))}
        assert not bad, f"{module} imports {bad}"


def test_store_imports_only_the_domain_and_itself() -> None:
    for module, imports in _layer_imports("store").items():
        bad = {m for m in imports if not m.startswith(("contextfold.domain", "contextfold.store"))}
        assert not bad, f"{module} imports {bad}"


def test_pure_layers_do_no_io() -> None:
    forbidden = {"sqlite3", "psycopg", "socket", "urllib.request", "http.client", "requests", "httpx",
                 "subprocess", "eventsourcing.sqlite", "eventsourcing.postgres"}
    for layer in ("domain", "projections"):
        for p in (PACKAGE / layer).rglob("*.py"):
            bad = _imports(p) & forbidden
            assert not bad, f"{p.relative_to(PACKAGE)} imports {bad}"
            assert "open(" not in p.read_text().replace("_open(", ""), f"{p} opens files"


def test_every_package_module_declares_all() -> None:
    for p in PACKAGE.rglob("*.py"):
        if p.name == "__main__.py":
            continue
        tree = ast.parse(p.read_text())
        names = {t.id for node in tree.body if isinstance(node, ast.Assign | ast.AnnAssign)
                 for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                 if isinstance(t, ast.Name)}
        if p.name == "__init__.py" and "__all__" not in names and len(tree.body) <= 1:
            continue  # a package marker holding only its docstring
        assert "__all__" in names, f"{p.relative_to(PACKAGE)} has no __all__"


def test_the_version_is_written_once_and_the_installed_metadata_agrees() -> None:
    from importlib.metadata import version

    from contextfold.domain.version import BUILDER, __version__

    assert version("contextfold") == __version__
    assert BUILDER.split() == ["contextfold", __version__]
    assert 'dynamic = ["version"]' in (PACKAGE.parent / "pyproject.toml").read_text()
