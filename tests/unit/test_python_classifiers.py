"""The Python versions pyproject.toml names agree with the floor it requires.

Why: ``requires-python`` says which interpreters pip lets install contextfold; the trove classifiers
are what an index shows a user before they install (and what tools that list supported versions
read). They drifted apart silently before: the package said 3.11+ and named no version at all. The
minor versions named must start at the floor and run without a gap to the newest one the whole
suite has passed on (3.13.0, with 3.12.1 between), so a later release is added there on purpose.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEWEST_TESTED = (3, 13)


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def _floor() -> tuple[int, int]:
    spec = _project()["requires-python"]
    assert isinstance(spec, str)
    match = re.fullmatch(r">=\s*(\d+)\.(\d+)", spec.strip())
    assert match, f"requires-python is not a plain floor: {spec!r}"
    return int(match[1]), int(match[2])


def test_classifiers_name_every_minor_version_from_the_floor_to_the_newest_tested() -> None:
    classifiers = _project().get("classifiers", [])
    assert isinstance(classifiers, list)
    named = sorted((int(m[1]), int(m[2])) for c in classifiers
                   if (m := re.fullmatch(r"Programming Language :: Python :: (\d+)\.(\d+)", c)))
    major, minor = _floor()
    assert named == [(major, m) for m in range(minor, NEWEST_TESTED[1] + 1)], named
    assert "Programming Language :: Python :: 3 :: Only" in classifiers
