"""Render a provider-neutral :class:`Conversation` as one provider's request body.

``render(conversation, "anthropic")`` returns the JSON-ready body to send with
the official client (``client.messages.create(**body)``). Each provider has its
own module with an exhaustive ``match`` over message and part kinds; the trust
boundary (data blocks, runtime labels) is shared in :mod:`.data_blocks`.

Every body is checked before it is returned (``validate=True``, the default):
the protocol rules the provider enforces and, when the SDK is installed, the
official SDK request types (:mod:`.validate`). A violation raises
:class:`~contextfold.domain.errors.RenderError` naming the message - a request
that would fail at the provider is never handed out.

The names below are imported on first use (PEP 562), as the package ``contextfold``'s are: a
module of this package that needs none of the renderers (the wording of a runtime line,
:mod:`.runtime_lines`; the protocol's tool name rules, :mod:`.protocol`) is imported without
them. Why: the importers and ``contextfold import`` need only those two, and importing the
package first imported every renderer and the request check (~0.07 s of CPU;
``tests/unit/test_cli_light_imports.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextfold.projections.render.data_blocks import neutralise, render_data
    from contextfold.projections.render.requests import render, render_shared
    from contextfold.projections.render.validate import (
        PROVIDERS,
        Provider,
        SdkCheckSkippedWarning,
        check_protocol,
        parse_provider,
        sdk_available,
        sdk_check_skipped,
        validate_request,
        validate_sdk_types,
    )

_EXPORTS: dict[str, tuple[str, ...]] = {
    "contextfold.projections.render.data_blocks": ("neutralise", "render_data"),
    "contextfold.projections.render.requests": ("render", "render_shared"),
    "contextfold.projections.render.validate": (
        "PROVIDERS", "Provider", "SdkCheckSkippedWarning", "check_protocol", "parse_provider",
        "sdk_available", "sdk_check_skipped", "validate_request", "validate_sdk_types",
    ),
}
"""Each module and the public names it defines: the imports above, for the first use of a name."""

_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "PROVIDERS",
    "Provider",
    "SdkCheckSkippedWarning",
    "check_protocol",
    "neutralise",
    "parse_provider",
    "render",
    "render_data",
    "render_shared",
    "sdk_available",
    "sdk_check_skipped",
    "validate_request",
    "validate_sdk_types",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
