"""What a provider's build prices the conversation of a neutral build at: what a caller who
renders that conversation for the provider later (``contextfold.render_request``) sends, as our
estimate for that provider counts it. Shared by ``test_neutral_fits_every_provider.py`` and
``scripts/measure_neutral_fit.py``.

The sum: the neutral build's ``selected_tokens``; for each fragment it holds, what the provider's
build charges the fragment's framing and media beyond neutral's (``BuildCtx.overhead``,
``BuildCtx.media`` of a build for the provider and the same model); the provider's tool prompt
when the conversation declares a tool, in place of what the neutral build set aside. Left at
neutral's price: the tools' declarations (neutral's bill is the dearest, ``tool_pricing.tool_bill``)
and a reasoning text the provider is not sent, both only ever lower for a provider; a stub or
summary the build made (not a logged fragment) is framed alike for every provider. Where a
provider's own build selects the same, its ``selected_tokens`` less its tools' is this sum less
the tools' (the script checks it on every such build).
"""

from __future__ import annotations

from collections.abc import Callable

from contextfold.domain.events import ArtifactRef
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.redact import config_policy
from contextfold.projections.state import RunState
from contextfold.projections.tool_candidates import tool_inputs
from contextfold.projections.tool_prompt import tool_prompt_tokens

__all__ = ["LoadText", "build_ctx", "provider_price"]

LoadText = Callable[[ArtifactRef], str] | None


def build_ctx(state: RunState, config: BuildConfig, load_text: LoadText) -> BuildCtx:
    """The per-fragment prices a build of ``state`` for ``config`` charges (``fragment_facts``)."""
    return BuildCtx(
        state,
        config,
        load_text,
        frozenset(),
        state.counter.count,
        policy=config_policy(config) if config.redact else None,
        blocked=tool_inputs(state, config).blocked,
    )


def provider_price(state: RunState, built: BuildResult, provider: str, load_text: LoadText) -> int:
    """What a build for ``provider`` (and the neutral build's model) prices the conversation of
    the neutral build ``built`` of ``state`` at (module docstring)."""
    m = built.manifest
    config = m.config.model_copy(update={"provider": provider})
    mine, neutral = build_ctx(state, config, load_text), build_ctx(state, m.config, load_text)
    total = m.selected_tokens
    for line in m.fragments:
        if line.id not in state.entries:
            continue  # a stub or summary the build made: framed alike for every provider
        total += mine.overhead(line.id) - neutral.overhead(line.id)
        if line.media:
            a, b = mine.media(line.id), neutral.media(line.id)
            total += (a.tokens if a is not None else 0) - (b.tokens if b is not None else 0)
    # the prompt a provider adds once the request declares a tool, in place of what the neutral
    # build set aside (whenever a tool may be declared: ``builder``), which a request that
    # declares none is not sent
    ours = tool_prompt_tokens("neutral", neutral.model)
    set_aside = (
        ours if built.conversation.tools or m.layer_tokens.get("tools", 0) - m.tool_tokens >= ours else 0
    )
    return total - set_aside + (tool_prompt_tokens(provider, mine.model) if built.conversation.tools else 0)
