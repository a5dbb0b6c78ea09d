"""``scripts/count_build_work.py --bytecodes`` names each function of its table so that a reader
can tell which: a method by its class (``code.co_qualname``), and a dataclass's generated
``__init__`` (compiled from a string: file ``<string>``, qualname ``__create_fn__.<locals>.__init__``)
by the class it builds and that class's module.

Why: the table printed ``<string>:2:__init__`` for every dataclass's constructor, a dozen lines
alike with no way to tell a ``FragmentEntry`` from a ``MediaCost``; a method was named without its
class (``__init__``, ``tokens``). The naming is a function of a code object, tested here under
any Python; the counting itself needs 3.12's ``sys.monitoring``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "code_labels.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_labels", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("code_labels", module)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int


@dataclasses.dataclass
class Line:
    a: Point

    def length(self) -> int:
        return self.a.x


def test_a_dataclass_init_is_named_by_its_class_and_a_method_by_its_qualname() -> None:
    label = _script().code_label
    here = f"tests/unit/{Path(__file__).name}"
    point, line = label(Point.__init__.__code__), label(Line.__init__.__code__)
    assert point.endswith(":Point.__init__") and line.endswith(":Line.__init__"), (point, line)
    assert point.startswith(f"{here}:") and line.startswith(f"{here}:")
    assert label(Line.length.__code__) == f"{here}:{Line.length.__code__.co_firstlineno}:Line.length"
