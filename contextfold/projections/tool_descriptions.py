"""The tool description a request declares: the registered one, cut where the provider bounds it.

Why: OpenAI Chat Completions refuses a request whose ``tools[i].function.description`` is over
1,024 characters, whole: 400 "Invalid 'tools[2].function.description': string too long. Expected
a string with maximum length 1024, but got a string with length 4394 instead." (code
``string_above_max_length``; reported against OpenHands' browser tool, OpenHands#4838, Sentry's
MCP server, getsentry/sentry-mcp#106, and open_deep_research#80). Anthropic, Gemini and OpenAI
Responses take such descriptions (MCP servers publish them, and Codex sends its long tool
descriptions through Responses), so a run that starts on Claude with an MCP toolkit and hands off
or falls back to a Chat Completions model got a request refused at every turn, with nothing in
the build or the check to say why. No SDK type bounds the string.

So a build for such a provider declares the description cut to fit: at the last whitespace
before the limit (else at a grapheme boundary, ``graphemes.floor_boundary``), with ``…`` marking
the cut, counted in UTF-16 code units as well as code points (what a JavaScript server would
count; never more than the code points), so it fits whichever the API counts. The tool is still
offered (the model keeps the tool, its name and schema; only the description's tail is not
shown), its price is that of the description sent, and the manifest's repairs say
``tool_description_cut:<name> (<provider> takes at most N characters of a tool's description: M cut
to K)``. The cut is a pure function of the description, so every build shows the same bytes (the
cached prefix holds). The protocol check refuses a body given to it with a longer one
(``render.tool_checks``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from contextfold.domain.events import ToolSpec
from contextfold.projections.graphemes import floor_boundary
from contextfold.projections.spec_memo import SpecAccount

__all__ = ["CUT_MARK", "MAX_DESCRIPTION", "cut_description", "cut_descriptions", "too_long", "utf16_length"]

MAX_DESCRIPTION: dict[str, int] = {"openai-chat": 1024}
"""provider -> the most characters of a tool's description one of its requests may declare, for
the providers that bound it (the module docstring)."""

CUT_MARK = "…"
"""What ends a cut description: the model reads that the text goes on."""

_WORD_REACH = 4
"""A cut falls at the last whitespace in the final quarter of what fits; a description without one
there (a long URL, a run of CJK text) is cut at a grapheme boundary instead."""

_CUTS: dict[int, tuple[ToolSpec, str, ToolSpec]] = {}
"""id(spec) -> (the spec, the provider, its cut copy): a run's specs are the same objects build
after build, so each is cut once and its copy is the same object (the renders keyed on it hold)."""
_CUTS_LIMIT = 20_000
_CUTS_HELD = SpecAccount(_CUTS, _CUTS_LIMIT)


def utf16_length(text: str) -> int:
    """``text``'s length in UTF-16 code units: a character outside the BMP counts two."""
    return len(text.encode("utf-16-le")) // 2


def too_long(text: str, limit: int) -> bool:
    """Whether ``text`` is over ``limit`` characters in code points or UTF-16 units (read only
    when it could be: a text of at most half the limit is never over it)."""
    return len(text) > limit or (2 * len(text) > limit and utf16_length(text) > limit)


def cut_description(text: str, limit: int) -> str:
    """``text`` when it is at most ``limit`` characters (code points and UTF-16 units), else its
    head cut at a boundary and marked with :data:`CUT_MARK`, at most ``limit`` of either."""
    if not too_long(text, limit):
        return text
    room = limit - len(CUT_MARK)
    end = min(len(text), room)
    while utf16_length(text[:end]) > room:  # a character outside the BMP counts two units
        end -= max(1, (utf16_length(text[:end]) - room) // 2)
    end = floor_boundary(text, end)
    space = max((text.rfind(c, 0, end + 1) for c in " \t\n"), default=-1)
    if space >= end - end // _WORD_REACH:
        end = floor_boundary(text, space)
    return text[:end].rstrip() + CUT_MARK


def _cut_spec(spec: ToolSpec, provider: str, limit: int) -> ToolSpec:
    hit = _CUTS.get(id(spec))
    if hit is None or hit[0] is not spec or hit[1] != provider:
        cut = spec.model_copy(update={"description": cut_description(spec.description, limit)})
        _CUTS_HELD.admit(spec, sys.getsizeof(cut.description))  # the copy shares the schema
        hit = _CUTS[id(spec)] = (spec, provider, cut)
    return hit[2]


def cut_descriptions(provider: str, registry: Mapping[str, ToolSpec]) -> dict[str, tuple[ToolSpec, str]]:
    """name -> (the spec a request for ``provider`` declares, the manifest's repair) for each tool
    of ``registry`` whose description is longer than ``provider`` takes; empty for the others."""
    limit = MAX_DESCRIPTION.get(provider)
    if limit is None:
        return {}
    out = {}
    for name, spec in registry.items():
        if too_long(spec.description, limit):
            cut = _cut_spec(spec, provider, limit)
            out[name] = (cut, f"tool_description_cut:{name} ({provider} takes at most {limit} characters "
                              f"of a tool's description: {len(spec.description)} cut to "
                              f"{len(cut.description)})")
    return out
