"""A regular expression compiled on its first use, not when its module is imported.

Why: importing the builder compiled ~200 patterns, ~60 ms of a new process's CPU, and a build
uses fewer than half of them: the rest serve content a run may never hold (an AWS secret's
assignment, a placeholder value beside a secret's name, a JSON text nested past the parser's
depth, a test runner's verdict line). Each process that builds paid for all of them (a worker
per job, ``contextfold build``, a cron audit). A pattern here is the same ``re`` pattern, of the
same source and flags, compiled the first time a method is called: it matches exactly what
``re.compile(source, flags)`` does. Only for patterns off the hot path: each call goes through
one more Python call (bind :attr:`LazyPattern.compiled`'s method in a loop that matches per
token).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["LazyPattern"]


class LazyPattern:
    """``re.compile(source, flags)``, made when first used (:attr:`compiled`); the methods of
    :class:`re.Pattern` a caller uses here, with the same arguments and results."""

    __slots__ = ("_compiled", "flags_given", "pattern")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.pattern = source
        """The source, as :attr:`re.Pattern.pattern`."""
        self.flags_given = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now if it was not). Two threads may both compile it;
        either result is the same pattern."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags_given)
        return compiled

    @property
    def is_compiled(self) -> bool:
        return self._compiled is not None

    @property
    def flags(self) -> int:
        """As :attr:`re.Pattern.flags` (which adds the flags the source sets inline)."""
        return self.compiled.flags

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        return self.compiled.findall(string, pos, endpos)

    def sub(self, repl: str | Callable[[re.Match[str]], str], string: str, count: int = 0) -> str:
        return self.compiled.sub(repl, string, count)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags_given!r})"
