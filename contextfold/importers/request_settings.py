"""What a recorded request set that bounded the model's tool use, and an import leaves out.

Why: a request body in a trace (OpenAI Chat or Responses, Anthropic, Gemini) may carry
request-level settings that change what the model could do: a forced tool (``tool_choice``
naming one, Anthropic's ``{"type": "tool"}``, Gemini's ``allowedFunctionNames``), tools offered
but not to be called (``"none"``), a call required (``"required"``/``"any"``/``ANY``), or one call
at a time (``parallel_tool_calls: false``, ``disable_parallel_tool_use``). The log has no place
for them (DESIGN.md's events: a run's tools, not the choice among them), and a build sends none,
so the request a replay or an audit shows of an imported run is one the model did not see: a
call it was forced to make reads as its own choice, a single call as its preference. The import
says so, once per source, naming the settings (:func:`dropped_settings`), instead of dropping
them silently. Settings at their API's default (``auto``, parallel calls allowed) change nothing
and are not named.

Pure: a parsed source's value in, notes out.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dropped_settings"]

_SHOWN = 80
"""How many characters of one setting's JSON a note shows."""


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def _openai(body: dict[str, Any]) -> list[str]:
    """Chat Completions and Responses: ``tool_choice`` (and Chat's legacy ``function_call``)
    other than ``auto``, ``parallel_tool_calls`` false, Responses' ``max_tool_calls``."""
    out = [f"{key}={_shown(body[key])}" for key in ("tool_choice", "function_call")
           if key in body and body[key] not in ("auto", None)]
    if body.get("parallel_tool_calls") is False:
        out.append("parallel_tool_calls=false")
    if body.get("max_tool_calls") is not None:
        out.append(f"max_tool_calls={_shown(body['max_tool_calls'])}")
    return out


def _anthropic(body: dict[str, Any]) -> list[str]:
    """``tool_choice`` other than ``{"type": "auto"}`` (a forced tool, ``any``, ``none``, or
    ``disable_parallel_tool_use``)."""
    choice = body.get("tool_choice")
    if choice is None or choice == {"type": "auto"}:
        return []
    return [f"tool_choice={_shown(choice)}"]


def _gemini(body: dict[str, Any]) -> list[str]:
    """``toolConfig`` (REST) or ``tool_config`` (SDK) whose function calling config is not the
    default: a mode other than ``AUTO``, or allowed function names."""
    for key in ("toolConfig", "tool_config"):
        config = body.get(key)
        if not isinstance(config, dict):
            continue
        calling = config.get("functionCallingConfig", config.get("function_calling_config"))
        if not isinstance(calling, dict):
            continue
        mode = calling.get("mode")
        allowed = calling.get("allowedFunctionNames", calling.get("allowed_function_names"))
        if (isinstance(mode, str) and mode.upper() != "AUTO") or allowed:
            return [f"{key}={_shown(config)}"]
    return []


_BY_FORMAT = {"openai-chat": _openai, "openai-responses": _openai, "anthropic": _anthropic,
              "gemini": _gemini}


def _bodies(value: Any) -> list[dict[str, Any]]:
    """The request bodies of a source: the object itself, or each object of a list (the records
    of a multi-run file; a message or an item has none of the keys looked at)."""
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    return []


def dropped_settings(value: Any, format: str, source: str) -> list[str]:
    """A note naming the request-level settings of ``value`` (a parsed source of ``format``) that
    bounded the model's tool use and that the import leaves out; none when there are none."""
    settings = _BY_FORMAT.get(format)
    if settings is None:
        return []
    found: dict[str, int] = {}
    bodies = 0
    for body in _bodies(value):
        named = settings(body)
        bodies += bool(named)
        for setting in named:
            found[setting] = found.get(setting, 0) + 1
    if not found:
        return []
    shown = ", ".join(found) if len(found) <= 4 else f"{', '.join(list(found)[:4])} and {len(found) - 4} more"
    where = f"{bodies} request(s) of {source}" if bodies > 1 else f"the request of {source}"
    return [f"note: {where} set {shown}: a log has no place for these, so the import leaves them "
            "out, and a build or replay of the run sends none: its requests do not show what bound "
            "the model's tool use"]
