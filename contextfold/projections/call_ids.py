"""The id a request shows for a tool call: the logged id wherever the provider takes it.

Why: a run's call ids come from whichever model (or runtime) issued them, and a request goes
to whichever provider the run is built for now (resume, hand-off, a fallback model). Two
providers reject ids that others issue, each with a 400 that arrives after the request was
paid for:

- Anthropic: ``tool_use.id`` must match ``^[a-zA-Z0-9_-]+$`` and be unique in the request
  ("`tool_use` ids must be unique"). Kimi K2 issues ids like ``functions.get_weather:0``, and
  gpt-4o reused ids across turns in 49 of the 200 tau-bench runs.
- OpenAI Chat Completions: ``tool_calls[].id`` of at most 40 characters ("string too long.
  Expected a string with maximum length 40"); Responses-API and Gemini ids are longer.
- OpenAI Responses: its ``input`` is one flat list of items in which a
  ``function_call_output`` finds its ``function_call`` by ``call_id`` alone, so a reused id is
  refused ("Duplicate function_call_output for call_id ... Each function_call must have exactly
  one matching function_call_output"). Chat Completions answers by position and took the
  reused gpt-4o ids of the tau-bench traces. A ``call_id`` is also at most 64 characters
  ("Invalid 'input[N].call_id': string too long. Expected a string with maximum length 64"):
  codex app-server's ``codex_mcp__<server>__<tool>_exec-<uuid>`` ids and bridged ids run past it.
- Gemini: ``functionCall.id`` is documented as "the unique id of the function call", and a
  ``functionResponse`` is "for" the call whose id it carries. A reused id shows two calls (and
  two responses) under one id, so which response answers which call is left to the model; no
  refusal is recorded, but the request would break the API's documented contract.

The other providers took every logged id in the recorded traffic (an OpenAI Responses id of 54
characters went to Anthropic and back unchanged), and a request changes no id a provider takes.

So when a call is folded, :func:`call_alias` decides which providers cannot be shown its logged
id and gives it an alias for those: ``<the id with other characters as "_", shortened>_<log
position of the response>`` (and ``_<n>`` in the rare case that is taken too), unique among
every id the run's requests show. The alias is a pure function of the log up to the call, so a
replay, a rebuild and a later turn show the same id; it carries the position of the response
that issued the call, so an auditor finds the call in the log. Pairing stays on the logged ids
(DESIGN.md section 2: scoped, not global); only a rendered request shows aliases, the call and
its result alike.
"""

from __future__ import annotations

import re

__all__ = ["ALIASED_PROVIDERS", "ANTHROPIC_ID", "MAX_CHAT_ID_LENGTH", "MAX_RESPONSES_ID_LENGTH", "call_alias"]

MAX_CHAT_ID_LENGTH = 40
"""OpenAI Chat Completions' limit on a tool call id."""

MAX_RESPONSES_ID_LENGTH = 64
"""OpenAI Responses' limit on a ``call_id``. An alias is at most :data:`MAX_CHAT_ID_LENGTH`
characters, so one alias serves both OpenAI APIs."""

ALIASED_PROVIDERS = ("anthropic", "openai-responses", "gemini", "openai-chat")
"""The providers that refuse some logged ids (see the module docstring)."""

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
_OTHER = re.compile(r"[^A-Za-z0-9_-]+")


def call_alias(call_id: str, position: int, shown: set[str]) -> tuple[str | None, tuple[str, ...]]:
    """``(alias, providers)`` for ``call_id`` issued at log ``position``: the providers that are
    shown the alias instead of the logged id, or ``(None, ())``. ``shown`` holds every id the
    run's requests show for a call so far (logged or alias) and is updated."""
    providers: tuple[str, ...] = ()
    if call_id in shown:
        providers += ("anthropic", "openai-responses", "gemini")
    elif not ANTHROPIC_ID.fullmatch(call_id):
        providers += ("anthropic",)
    if len(call_id) > MAX_CHAT_ID_LENGTH:
        providers += ("openai-chat",)
        if len(call_id) > MAX_RESPONSES_ID_LENGTH and "openai-responses" not in providers:
            providers += ("openai-responses",)
    shown.add(call_id)  # the providers not listed show it
    if not providers:
        return None, ()
    base = _OTHER.sub("_", call_id).strip("_") or "call"
    n = 1
    while True:
        suffix = f"_{position}" if n == 1 else f"_{position}_{n}"
        alias = base[:MAX_CHAT_ID_LENGTH - len(suffix)] + suffix
        if alias not in shown:
            shown.add(alias)
            return alias, providers
        n += 1

