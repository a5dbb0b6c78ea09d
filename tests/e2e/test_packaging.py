"""What the wheel ships: the package's every module, its ``py.typed`` and its sample run, nothing else
(and the licence text beside its metadata).

Why: a user installs contextfold as a dependency, not from this tree. ``py.typed`` is what lets
their type checker read our annotations; ``contextfold demo`` reads the bundled sample run through
``importlib.resources`` (a wheel without it fails the demo, not this tree's tests); and tests,
scripts or docs in the wheel would land in the user's site-packages. Built by pip as a user's
install builds it (an isolated build with the ``[build-system]`` requirements).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _package_files() -> set[str]:
    """The tree's package files, without the bytecode an import leaves beside them."""
    return {p.relative_to(REPO).as_posix() for p in (REPO / "contextfold").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


def test_the_wheel_holds_the_package_its_type_marker_and_sample_and_nothing_else(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path),
                    str(REPO)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("contextfold-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert "contextfold/py.typed" in shipped
    assert any(n.startswith("contextfold/samples/") and n.endswith(".jsonl") for n in shipped)
    tree = _package_files()
    assert shipped == tree, (sorted(shipped - tree), sorted(tree - shipped))
    # the licence the metadata declares (MIT) travels with it: MIT asks for its text in every copy
    licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    assert zipfile.ZipFile(wheel).read(licence).decode() == (REPO / "LICENSE").read_text(encoding="utf-8")
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "contextfold = contextfold.console:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
