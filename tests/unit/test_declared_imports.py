"""Every package the contextfold package imports is declared in pyproject.toml.

Why: a module imported only because another dependency happens to pull it in (typing_extensions
through pydantic, psycopg_pool through psycopg[pool]) breaks, or breaks at a version nobody chose,
when that dependency stops pulling it in or pulls an older one. Each is declared with its own floor.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "contextfold"
NOT_THE_PACKAGES = {"dev", "bench"}
"""Extras for working on contextfold, not for using it: the package may not import from them."""


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra, listed in project["optional-dependencies"].items():
        if extra not in NOT_THE_PACKAGES:
            requirements += listed
    return {_normalized(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in requirements}


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"contextfold", "__future__"}


def test_every_imported_package_is_declared() -> None:
    providers = importlib.metadata.packages_distributions()
    undeclared = {}
    for name in sorted(_imported_top_levels()):
        distributions = {_normalized(d) for d in providers.get(name, [])}
        assert distributions, f"{name} is imported but installed by no distribution here"
        if not distributions & _declared():
            undeclared[name] = sorted(distributions)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
