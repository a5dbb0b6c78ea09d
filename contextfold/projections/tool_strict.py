"""Whether a tool registered strict can be declared strict: where the provider's strict mode
refuses its schema, it is declared non-strict and the manifest says so.

Why: ``ToolSpec.strict`` is the runtime's choice, sent as it was made (``render``). But strict
tool use takes only a subset of JSON Schema, and a request declaring a tool strict with a schema
outside it is refused whole, turn after turn:

- OpenAI (Chat Completions and Responses), "Structured Outputs" with ``strict: true``: every
  object must say ``additionalProperties: false`` and list every one of its properties in
  ``required`` (400 "Invalid schema for function 'search': In context=(), 'additionalProperties'
  is required to be supplied and to be false" / "'required' is required to be supplied and to be
  an array including every key in properties. Missing 'limit'"), and the keywords the guide lists
  as not supported (:data:`OPENAI_UNSUPPORTED`) are refused where they stand.
- Anthropic, strict tool use: every object must say ``additionalProperties: false`` (its SDK's
  ``lib._parse._transform.transform_schema``, which makes a schema one the API takes, sets it on
  every object; optional properties are allowed). Its other limits (numeric bounds, most string
  formats) the SDK moves into the description rather than naming as refused; they are not
  checked here.

MCP servers and pydantic models publish schemas with optional parameters and open objects, and
the SDK request types take any dict as the schema, so nothing said so before the provider did.

Making the schema fit (closing its objects, requiring what is optional) would change what the
model may send, so it is never done. The tool is still offered, declared non-strict (the model
can call it; the provider does not hold its arguments to the schema, as for any non-strict tool)
and the manifest's repairs say ``tool_strict_off:<name> (<provider>'s strict mode refuses its
schema: <why>; declared non-strict)``, as a cut description is said (``tool_descriptions``). The
protocol check refuses a body that declares such a tool strict (``render.tool_checks``).
"""

from __future__ import annotations

from collections.abc import Mapping

from contextfold.domain.events import ToolSpec
from contextfold.projections.render.strict_mode import STRICT_PROVIDERS, strict_refusal
from contextfold.projections.render.tool_schemas import sent_schema
from contextfold.projections.spec_memo import SpecAccount

__all__ = ["loosened_tools"]


_LOOSENED: dict[tuple[int, str], tuple[ToolSpec, str | None, ToolSpec | None]] = {}
"""(id(spec), provider) -> (the spec, why its strict mode refuses it, its non-strict copy): a run's
specs are the same objects build after build, so each is checked once and its copy is the same
object (the renders keyed on it hold)."""
_LOOSENED_LIMIT = 20_000
_LOOSENED_HELD = SpecAccount(_LOOSENED, _LOOSENED_LIMIT)


def _loosened(spec: ToolSpec, provider: str) -> tuple[str, ToolSpec] | None:
    key = (id(spec), provider)
    hit = _LOOSENED.get(key)
    if hit is None or hit[0] is not spec:
        _LOOSENED_HELD.admit(spec)  # its copy shares its schema
        why = strict_refusal(provider, sent_schema(spec.parameters))
        hit = _LOOSENED[key] = (spec, why, None if why is None else spec.model_copy(update={"strict": False}))
    return None if hit[1] is None or hit[2] is None else (hit[1], hit[2])


def loosened_tools(provider: str, registry: Mapping[str, ToolSpec]) -> dict[str, tuple[ToolSpec, str]]:
    """name -> (the spec a request for ``provider`` declares, the manifest's repair) for each tool
    of ``registry`` registered strict whose schema ``provider``'s strict mode refuses."""
    if provider not in STRICT_PROVIDERS:
        return {}
    out = {}
    for name, spec in registry.items():
        if spec.strict:
            found = _loosened(spec, provider)
            if found is not None:
                why, copy = found
                out[name] = (copy, f"tool_strict_off:{name} ({provider}'s strict mode refuses its schema: "
                                   f"{why}; declared non-strict)")
    return out
