"""Whether a rendered request is checked against its provider's official SDK types, here and now.

The check (:func:`contextfold.projections.render.validate.validate_sdk_types`) imports the SDK,
~1-1.3 s of CPU for anthropic's, and guards a body that is handed out: the library's
``Run.build`` and ``preview`` (their ``request`` is sent), and a command that prints or writes a
request. A command that shows only what a build selected (``manifest``, ``audit``, ``why``,
``diff``, ``demo``'s manifest) outputs no body to guard, and paid for the import on every run:
the command line turns the check off around such a command (``contextfold.cli``). The protocol
rules are checked either way, and the bytes of a request do not depend on the check (it only
refuses).

A context variable, not a flag of the build: the check sits under every build path (live,
preview, rebuild, an audit's rebuilds) that a command reaches, and a thread or task of a
library user that never turns it off keeps it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["sdk_types_checked", "sdk_types_unchecked"]

_CHECKED: ContextVar[bool] = ContextVar("contextfold_sdk_types_checked", default=True)


def sdk_types_checked() -> bool:
    """Whether requests rendered now are checked against the SDK's types (the default: yes)."""
    return _CHECKED.get()


@contextlib.contextmanager
def sdk_types_unchecked() -> Iterator[None]:
    """Within the block (this thread or task only), requests are rendered and checked against the
    protocol rules, not against the SDK's types: no SDK is imported and no
    ``SdkCheckSkippedWarning`` is said (nothing was to be checked)."""
    token = _CHECKED.set(False)
    try:
        yield
    finally:
        _CHECKED.reset(token)
