"""The output limit a model takes at most, as its provider documents it.

Why: a build asks for its whole reserve as the reply's limit (``max_tokens`` and its kin), and
the reserve is sized for the window (8,000 from 32k up, a quarter below; a caller may ask for
more, as an extended-thinking budget needs). Models cap their output, older ones below the usual
reserve, newer ones at 32k-128k, and their APIs refuse a larger limit rather than clamp it:
Anthropic "max_tokens: 8000 > 4096, which is the maximum allowed number of output tokens for
claude-3-haiku-20240307", OpenAI "max_tokens is too large: 20000. This model supports at most
16384 completion tokens". No SDK type says so, so such a request validated and failed every
turn. A body for one of these models asks for at most its cap; the reserve the budget kept is
unchanged (the reply fits in less than it).

Only documented caps of released models (Anthropic's models overview, OpenAI's model pages;
gpt-5-chat-latest caps lower than gpt-5 and is not named), matched on their names (a snapshot
date, a Bedrock or Vertex form, a gateway's vendor prefix); a Claude model by its version
(``model_family.claude_version``, the one reader of Claude ids); any other model gets the reserve
as before. Gemini's API is left out: its limit is the model's, so it is not named here.
"""

from __future__ import annotations

import functools
import re

from contextfold.projections.model_family import claude_version

__all__ = ["output_cap"]

_CLAUDE_CAPS: dict[tuple[str, int, int], int] = {
    # Anthropic (docs.anthropic.com, models overview: "Max output"), by ``model_family.claude_version``
    ("haiku", 3, 0): 4096, ("opus", 3, 0): 4096, ("sonnet", 3, 0): 4096,
    ("haiku", 3, 5): 8192, ("sonnet", 3, 5): 8192,
    ("opus", 4, 0): 32000, ("opus", 4, 1): 32000,
    ("sonnet", 3, 7): 64000,  # 128k only under a beta header we never send
    ("sonnet", 4, 0): 64000, ("sonnet", 4, 5): 64000, ("haiku", 4, 5): 64000, ("opus", 4, 5): 64000,
    ("opus", 4, 6): 128000, ("opus", 4, 7): 128000, ("opus", 4, 8): 128000, ("sonnet", 4, 6): 128000,
}
"""(tier, major, minor) -> cap. Read off the version, not the spelling: a gateway's, Vertex's or
Bedrock's id (``us.anthropic.claude-opus-4-1-20250805-v1:0``, which the pattern below did not
strip) gets its model's cap."""

_CAPS: tuple[tuple[re.Pattern[str], int], ...] = tuple((re.compile(pattern), cap) for pattern, cap in (
    # OpenAI (platform.openai.com, models: "Max output tokens")
    (r"gpt-3\.5-turbo(?:-\d{4}|-16k)?", 4096),
    (r"gpt-4-(?:turbo(?:-\d{4}-\d{2}-\d{2}|-preview)?|\d{4}-preview|vision-preview)", 4096),
    (r"gpt-4(?:-\d{4})?", 8192),
    (r"gpt-4o-2024-05-13", 4096),
    (r"(?:gpt-4o(?:-mini)?|chatgpt-4o)(?:-\d{4}-\d{2}-\d{2}|-latest)?", 16384),
    (r"gpt-4\.1(?:-mini|-nano)?(?:-\d{4}-\d{2}-\d{2})?", 32768),
    (r"o1-preview(?:-\d{4}-\d{2}-\d{2})?", 32768),
    (r"o1-mini(?:-\d{4}-\d{2}-\d{2})?", 65536),
    (r"(?:o1|o3|o3-mini|o4-mini)(?:-\d{4}-\d{2}-\d{2})?", 100000),
    (r"gpt-5(?:-mini|-nano)?(?:-\d{4}-\d{2}-\d{2})?", 128000),
))

_FORM = re.compile(r"^(?:.*/)?(?:[a-z]+\.)?(?P<name>[a-z0-9.-]+?)(?:@\d{8}|-v\d+(?::\d+)?)?$")
"""A gateway's vendor prefix (``openai/``), Bedrock's vendor and version (``anthropic.`` ...
``-v1:0``) and Vertex's ``@date`` around a model's own name."""


@functools.lru_cache(maxsize=256)  # a run names one model or two: asked for at every render
def output_cap(model: str | None) -> int | None:
    """The largest output limit ``model``'s API takes, when it is documented and low; else None."""
    if not model:
        return None
    if (version := claude_version(model)) is not None:
        return _CLAUDE_CAPS.get(version)
    form = _FORM.match(model.lower())
    if form is None:
        return None
    name = form["name"]
    for pattern, cap in _CAPS:
        if pattern.fullmatch(name):
            return cap
    return None
