"""How ``scripts/count_build_work.py --bytecodes`` names a code object in its table.

Why a module of its own: the naming is a pure function of a code object, tested under any
Python (``tests/unit/test_count_build_work_names.py``) without the benchmark's peers
(``bench_build`` imports LangChain and AutoGen, which only the ``bench`` extra installs).
"""

from __future__ import annotations

import gc
import inspect
import sys
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

__all__ = ["code_label"]

_REPO = str(Path(__file__).resolve().parents[1]) + "/"


def code_label(code: CodeType) -> str:
    """``file:line:qualname`` of ``code`` for the table: a method with its class (``co_qualname``),
    and a dataclass's generated ``__init__``, compiled from a string (``<string>``, qualname
    ``__create_fn__.<locals>.__init__``), by the function that holds it: ``dataclasses`` names it
    after its class (``FragmentEntry.__init__``), in its class's module. Why: the table printed
    ``<string>:2:__init__`` for every dataclass's constructor alike."""
    where, line, name = code.co_filename, code.co_firstlineno, code.co_qualname
    if where.startswith("<"):
        held = [f for f in gc.get_referrers(code) if isinstance(f, FunctionType) and f.__code__ is code]
        if held:
            name = held[0].__qualname__
            module = sys.modules.get(held[0].__module__)
            where = getattr(module, "__file__", None) or held[0].__module__
            owner = _defined(module, name.rpartition(".")[0])
            line = inspect.getsourcelines(owner)[1] if owner is not None else line
    return f"{where.replace(_REPO, '')}:{line}:{name}"


def _defined(module: ModuleType | None, qualname: str) -> type | None:
    """The class ``qualname`` names in ``module`` (its source line), or None."""
    found: Any = module
    for part in qualname.split(".") if qualname else ():
        found = getattr(found, part, None)
    try:
        return found if isinstance(found, type) and inspect.getsourcelines(found) else None
    except (OSError, TypeError):
        return None
