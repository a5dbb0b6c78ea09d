"""The package version: the one place it is written (``pyproject.toml`` reads it from here).

Why in the domain: a ``context_built`` record names the contextfold that built it
(``ContextBuilt.builder``, :data:`BUILDER`), so a replay that differs from its record can say
whether the builder changed since; the installed package metadata is not there when the
source tree is used uninstalled, and the projections may read only the domain.
"""

__all__ = ["BUILDER", "__version__"]

__version__ = "0.31.0"

BUILDER = f"contextfold {__version__}"
"""What a ``context_built`` record names as its builder."""
