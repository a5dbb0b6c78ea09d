"""The tool names a request shows: the logged name wherever the provider takes it.

Why: a model sometimes calls a tool that no runtime registered, under a name some APIs refuse:
gpt-4o's ``multi_tool_use.parallel``, ``functions.search``, a name with a space or one thousands
of characters long. The runtime logs the call as the model made it and answers it with an
error. The next request must show that call again, and its tool must be declared, so the
builder declares it (``declared_unregistered_tool``). If the name is one the provider refuses,
its request is refused whole: every later request of the run too, by a name the model made up
once. A name over 128 characters fitted no tool schema at all, so every build of the run failed.

So, like a call id (``call_ids``), an unregistered tool whose name the build's provider refuses
is shown under an alias in that request: its declaration, the calls and their answers alike
(manifest repair ``renamed_unregistered_tool:<name>-><alias>``). The alias is a pure function of
the name: ``<the name with other characters as "_", shortened>_<8 hex digits of its blake3>``,
which every provider takes. A replay, a rebuild and a later turn show the same alias.

A registered tool keeps its name: the runtime dispatches the model's calls by that name, so it
is never renamed. Where the provider refuses it, it is not offered to that provider
(``tool_candidates.refused_tools``, as a refused schema): its calls are shown as the
runtime's notes, and the manifest's repairs say why. A tool the run's policy does not permit is
not declared under any name.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping
from typing import Any

import blake3

from contextfold.domain.conversation import AssistantMessage, Conversation, Message, ToolResults

__all__ = ["MAX_SPEC_NAME", "TOOL_NAME_RULES", "every_provider_takes", "refuses_tool_name", "renamed_note",
           "renamed_to", "renamed_tools", "shown_names", "tool_name_alias"]

TOOL_NAME_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "openai-chat": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), "letters, digits, _ and -, at most 64"),
    "openai-responses": (re.compile(r"[a-zA-Z0-9_-]{1,64}"), "letters, digits, _ and -, at most 64"),
    "anthropic": (re.compile(r"[a-zA-Z0-9_-]{1,128}"), "letters, digits, _ and -, at most 128"),
    "gemini": (re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}"),
               "a letter or _ first, then letters, digits, _ . : and -, at most 128"),
}
"""The tool names each API takes (OpenAI: the SDK's ``FunctionDefinition.name``; Anthropic: its
400 "tools.N.custom.name: String should match pattern"; Gemini: the SDK's
``FunctionDeclaration.name``). A runtime names MCP tools ``server.tool`` or ``server/tool``; the
request would be refused whole, so the build says which name and what the provider takes."""

MAX_SPEC_NAME = 128
"""The longest name a ``ToolSpec`` holds (what the neutral request declares)."""

_EVERY_PROVIDER = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,63}")
"""Names that every provider above takes: what an alias is."""
_OTHER = re.compile(r"[^A-Za-z0-9_-]+")
_STEM = 40
"""Characters of the name kept in its alias (then ``_`` and 8 hex digits: 49 at most)."""


def every_provider_takes(name: str) -> bool:
    """Whether no provider refuses ``name``: a request shows it as it is, never under an alias."""
    return _EVERY_PROVIDER.fullmatch(name) is not None


def shown_names(name: str) -> tuple[str, ...]:
    """The names a request may show the tool ``name`` by: itself, and its alias where some
    provider refuses it (what a call and its result's runtime line are priced by, the longer)."""
    return (name,) if every_provider_takes(name) else (name, tool_name_alias(name))


def refuses_tool_name(provider: str, name: str) -> bool:
    """Whether a request for ``provider`` cannot declare a tool named ``name``."""
    rule = TOOL_NAME_RULES.get(provider)
    if rule is None:  # neutral: any name a ToolSpec holds
        return len(name) > MAX_SPEC_NAME
    return rule[0].fullmatch(name) is None


def tool_name_alias(name: str, taken: Container[str] = ()) -> str:
    """The name every provider takes that a request shows for the unregistered tool ``name``:
    the same for the same name, and none of ``taken`` (the run's other names)."""
    stem = _OTHER.sub("_", name)[:_STEM].strip("_-") or "tool"
    if not (stem[0].isascii() and (stem[0].isalpha() or stem[0] == "_")):
        stem = "t_" + stem[:_STEM - 2]
    digest = blake3.blake3(name.encode("utf-8", "surrogatepass")).hexdigest()
    # 8 hex digits; more in the (unseen) case of a clash with another name of the run
    alias = next((f"{stem}_{digest[:width]}" for width in (8, 12, 16, 20, 23)
                  if f"{stem}_{digest[:width]}" not in taken), f"{stem}_{digest[:23]}")
    assert _EVERY_PROVIDER.fullmatch(alias), alias  # the stem is made to fit
    return alias


_RENAMED = "renamed_unregistered_tool:"
"""The manifest repair that names a made-up tool name and its alias."""


def renamed_note(name: str, alias: str) -> str:
    """The repair note for ``name`` shown as ``alias``: the name clipped (a model may have made
    it up thousands of characters long), the alias whole."""
    shown = name if len(name) <= 80 else f"{name[:60]}… ({len(name)} characters)"
    return f"{_RENAMED}{shown}->{alias}"


def renamed_to(repairs: Iterable[str], alias: str) -> bool:
    """Whether a build's ``repairs`` show some made-up name as ``alias`` (:func:`renamed_note`)."""
    return any(note.startswith(_RENAMED) and note.endswith(f"->{alias}") for note in repairs)


def renamed_tools(conversation: Conversation, renamed: Mapping[str, str],
                  memo: dict[Any, Any]) -> Conversation:
    """``conversation`` with the calls of the tools in ``renamed``, and their answers, naming each
    by its alias. A message with none is kept as it is; one with some is made once per message
    and renaming (kept in ``memo``, the run's), so later builds render it from their memos."""
    key = tuple(sorted(renamed.items()))
    messages = []
    for message in conversation.messages:
        if isinstance(message, AssistantMessage):
            names = [call.name for call in message.tool_calls]
        elif isinstance(message, ToolResults):
            names = [result.name for result in message.results]
        else:
            names = []
        if renamed.keys().isdisjoint(names):
            messages.append(message)
            continue
        hit = memo.get(id(message))
        if hit is None or hit[0] is not message or hit[1] != key:
            if len(memo) >= 4096:
                memo.clear()
            if isinstance(message, AssistantMessage):
                shown: Message = message.model_copy(update={"tool_calls": tuple(
                    call.model_copy(update={"name": renamed.get(call.name, call.name)})
                    for call in message.tool_calls)})
            else:
                assert isinstance(message, ToolResults)
                shown = message.model_copy(update={"results": tuple(
                    result.model_copy(update={"name": renamed.get(result.name, result.name)})
                    for result in message.results)})
            hit = memo[id(message)] = (message, key, shown)
        messages.append(hit[2])
    return conversation.model_copy(update={"messages": tuple(messages)})
