"""The README's Python example runs as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = README.read_text()
    marker = text.index("<!-- readme-example")
    block = re.search(r"```python\n(.*?)```", text[marker:], flags=re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "runs.db").exists()


def test_readme_quick_start_names_the_two_scripts() -> None:
    text = README.read_text()
    assert "./scripts/demo" in text and "./scripts/test" in text
    ci = (README.parent / ".ci" / "run").read_text()
    assert "./scripts/test" in ci
