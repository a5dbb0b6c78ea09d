"""ContextManifest: what one request contained, what was left out, and why.

Hashes, refs, sizes and reasons, never content: a manifest can be stored in
the log (``ContextBuilt``), diffed, and shown in audits without carrying the
data it describes. ``BuildConfig`` is everything a build depends on besides
the log, so a replay with the recorded config is byte-identical.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from contextfold.domain.checked import Integer, checked
from contextfold.domain.errors import IntegrityError, InvalidInputError, quoted
from contextfold.domain.excluded_lines import ExcludedLines
from contextfold.domain.fragments import FragmentKind, Trust
from contextfold.domain.items import Items
from contextfold.domain.record_head import manifest_encoding

__all__ = [
    "BUILD_PROVIDERS",
    "DEFAULT_LAYER_SHARES",
    "DEFAULT_RESERVE",
    "LAYER_NAMES",
    "BuildConfig",
    "Calibration",
    "ContextManifest",
    "ExcludedFragment",
    "ExcludedLines",
    "ExclusionReason",
    "ManifestFragment",
    "ManifestTool",
    "MediaCostRecord",
    "RedactionRecord",
    "TruncationRecord",
    "checked_config",
    "config_of",
    "default_reserve",
    "manifest_encoding",
    "manifest_json_depth",
    "recorded_config",
    "schema_json_depth",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


BUILD_PROVIDERS: tuple[str, ...] = ("neutral", "openai-chat", "openai-responses", "anthropic", "gemini")
"""What a build's ``provider`` may name: the provider-neutral conversation, or one API's body."""

LAYER_NAMES: dict[int, str] = {
    1: "policy", 2: "tools", 3: "goal", 4: "plan", 5: "history",
    6: "retrieval", 7: "observations", 8: "input",
}
"""The seed's eight semantic layers by number."""

DEFAULT_LAYER_SHARES: dict[str, float] = {
    "policy": 0.10,
    "tools": 0.10,
    "goal": 0.05,
    "plan": 0.05,
    "recent": 0.25,
    "retrieval": 0.15,
    "history": 0.25,
    "input": 0.05,
}
"""Reserve shares of the budget: policy+protocol, tool schemas, goal+contract,
plan, recent tool pairs (and the latest observations), retrieval+memory, older
history, current input. A share a layer does not use flows to the others."""

ExclusionReason: TypeAlias = Literal["duplicate", "superseded", "low_priority", "over_budget", "stale"]


DEFAULT_RESERVE = 8_000
"""The reserve of a build that names none, for a window of 32,000 tokens or more."""


def default_reserve(window: int) -> int:
    """The reserve of a build that names none: 8,000 tokens (a long reply with its tool calls),
    or a quarter of a window under 32,000.

    Why not 8,000 for every window: a small model's window (8k, 16k) then left the request
    nothing, or half of it, and ``build --window 8000`` failed with "window 8000 minus reserve
    8000 leaves no budget". A rendered request asks for at most the reserve as its output
    (``max_tokens``), so the request and the reply still fit the window together."""
    return min(DEFAULT_RESERVE, window // 4)


class BuildConfig(_Frozen):
    """Inputs of a build besides the log. Its canonical hash goes in the manifest."""

    provider: str = "neutral"
    model: str | None = None
    window: Integer = Field(default=128_000, gt=0)
    reserve: Integer = Field(default=DEFAULT_RESERVE, ge=0)
    """Output, tool-call and safety reserve: budget = window - reserve. Not given (or None):
    :func:`default_reserve` of the window, 8,000 from a window of 32,000 up."""
    layer_shares: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(
        default_factory=lambda: dict(DEFAULT_LAYER_SHARES))
    """Each layer's share of the budget: finite and >= 0 (a NaN was recorded as bare NaN, not
    JSON, and the record no longer replayed once exported and imported)."""
    recent_groups: Integer = Field(default=3, ge=1)
    """The newest N tool groups compete in the 'recent' layer, older ones in 'history'."""
    max_tools: Integer = Field(default=12, ge=0)
    in_flight: Literal["wait", "cancel"] = "cancel"
    """Calls still open at build time: 'wait' fails with PendingToolCallsError,
    'cancel' appends cancellation events."""
    redact: bool = True
    """Replace credentials with ``[REDACTED:rule]`` (``projections.redact``)."""
    redact_kinds: Items[FragmentKind] = Items(("tool_result", "evidence", "memory", "instruction",
                                               "history"))
    """Fragment kinds redaction applies to (user input is the user's own words: add it here to
    redact it too)."""
    redact_disabled_rules: Items[str] = Items()
    redact_allow: Items[str] = Items()
    """Regexes; a detected value that fully matches one is kept."""
    redact_deny: dict[str, str] = Field(default_factory=dict)
    """Extra rules: name -> regex (the whole match, or group 1), reported as ``custom:<name>``."""
    redact_examples: bool = False
    """Also redact vendor-documented example keys (``AKIAIOSFODNN7EXAMPLE``)."""

    @model_validator(mode="before")
    @classmethod
    def _reserve_for_the_window(cls, data: Any) -> Any:
        """A config that names no reserve gets :func:`default_reserve` of its window (an
        invalid window is left for the field's own check to report)."""
        if isinstance(data, dict) and data.get("reserve") is None:
            window = data.get("window", cls.model_fields["window"].default)
            if type(window) is int and window > 0:
                return {**data, "reserve": default_reserve(window)}
            return {k: v for k, v in data.items() if k != "reserve"}
        return data


def checked_config(**fields: Any) -> BuildConfig:
    """``BuildConfig(**fields)`` for values a caller passed in (a CLI flag, an API keyword): an
    invalid one (a window of 0, a negative reserve, an unknown field) is an
    :class:`~contextfold.domain.errors.InvalidInputError`, not a pydantic traceback.

    So is a provider no build renders. ``provider`` stays a ``str`` on the model, so a record
    of any builder reads back; a mistyped one (``"openai"``) made the whole build, then failed
    at its render with a ``RenderError`` whose list left out ``neutral``."""
    provider = fields.get("provider", "neutral")
    if not isinstance(provider, str) or provider not in BUILD_PROVIDERS:
        raise InvalidInputError(f"invalid build config: provider: expected one of "
                                f"{', '.join(BUILD_PROVIDERS)}, got {quoted(provider)}")
    return _known_layers(_sized(checked(BuildConfig, "build config", **fields)))


MAX_WINDOW = 1_000_000_000
"""The largest window (and reserve) a new build takes, in tokens: 100 times the largest model
windows (~10M). Why a bound: a mistyped ``--window`` of 400 digits ended in an OverflowError
traceback where the budget is scaled by a float (``calibration``), and one of 1e20 was recorded
as a build's window. Checked where a caller makes a config, as the layers are: a record an older
build wrote with a larger one still reads back."""


def _sized(config: BuildConfig) -> BuildConfig:
    """``config``, or an InvalidInputError for a window or reserve over :data:`MAX_WINDOW`."""
    for name in ("window", "reserve"):
        value = getattr(config, name)
        if value > MAX_WINDOW:
            shown = str(value) if len(str(value)) <= 30 else f"a {len(str(value))}-digit number"
            raise InvalidInputError(f"invalid build config: {name}: at most {MAX_WINDOW} tokens (a model's "
                                    f"window is at most ~10M), got {shown}")
    return config


def _known_layers(config: BuildConfig) -> BuildConfig:
    """``config`` for a new build, or an InvalidInputError for a share of a layer no build
    reserves for: a misspelt one ('retreival') was taken and ignored, and the layer meant kept
    its default share. (Few-shot examples are instructions, ``InstructionSet``: they share the
    policy layer's reserve.) Checked where a caller makes a config, not on the model: a record
    an older builder wrote with such a share still reads back, replays and audits."""
    unknown = sorted(set(config.layer_shares) - set(DEFAULT_LAYER_SHARES))
    if unknown:
        raise InvalidInputError(f"invalid build config: no layer named {', '.join(map(repr, unknown))}: "
                                f"the layers with a share are {', '.join(DEFAULT_LAYER_SHARES)}")
    return config


def recorded_config(manifest: Mapping[str, Any], run_id: str, turn: int) -> BuildConfig:
    """The config the build of run ``run_id``'s turn ``turn`` used, read from its first
    ``context_built`` record's ``manifest["config"]`` alone (a long run's manifests hold ~10,000
    lines, which a rebuild does not need validated). :class:`~contextfold.domain.errors.IntegrityError`
    when the record holds none that validates: a record not made by a builder."""
    try:
        return BuildConfig.model_validate(manifest["config"])
    except (KeyError, ValidationError) as exc:
        raise IntegrityError(f"run {run_id!r} turn {turn}: its first context_built record holds no "
                             "valid build config to rebuild it with") from exc


def config_of(config: BuildConfig | None, /, **given: Any) -> BuildConfig:
    """The config of an API call that takes ``config=`` or the settings one by one (``None``: a
    setting not given, its default applies).

    ``config`` with a setting beside it is :class:`~contextfold.domain.errors.InvalidInputError`:
    the setting was ignored, so ``run.build("anthropic", config=BuildConfig(max_tools=20))``
    made a provider-neutral request for a 128k window, and said nothing."""
    named = [name for name, value in given.items() if value is not None]
    if config is None:
        return checked_config(**{name: given[name] for name in named})
    if not isinstance(config, BuildConfig):
        raise InvalidInputError(f"config must be a BuildConfig, got {type(config).__name__}")
    if named:
        raise InvalidInputError(
            f"config= holds every build setting, so {', '.join(named)} beside it would be ignored: set "
            f"{'it' if len(named) == 1 else 'them'} in the config (config.model_copy(update={{...}})) or "
            "leave config out")
    if config.provider not in BUILD_PROVIDERS:  # as checked_config says it, before any work
        raise InvalidInputError(f"invalid build config: provider: expected one of "
                                f"{', '.join(BUILD_PROVIDERS)}, got {quoted(config.provider)}")
    _known_layers(_sized(config))
    return config


class RedactionRecord(_Frozen):
    """One secret replaced in a fragment: where and by which rule, never the value.

    ``start``/``end`` are character offsets in the fragment's full unredacted
    text (the artifact text when the payload is one), before any truncation. A model
    reply's text is followed by each of its calls' arguments, each after a line break."""

    fragment_id: str
    rule: str
    start: int
    end: int


class MediaCostRecord(_Frozen):
    """One image or document of a fragment: the price the build used and the rule behind it.

    ``rule`` names the provider formula (``projections.media_cost``: e.g.
    ``openai-tiles:85+170``, ``openai-patches:x1.62`` (OpenAI's by the model built for),
    ``anthropic-pixels``, ``gemini-tiles``, ``*-pdf-pages``);
    ``reduced_from`` is the full price when the build sent a cheaper rendition
    (``detail: low``); ``shown_in`` names the fragment that carries the same
    bytes when this occurrence was replaced by a reference (dedupe); ``not_attached`` the note
    sent instead of a medium the provider refuses (``tokens`` then 0, the note being priced as
    text, also when only the whole request told: more than 20 images for Anthropic, a request's
    count or size limit).
    """

    kind: Literal["image", "document"]
    media_type: str
    ref: str
    """``sha:<blake3>`` of the artifact, or the (shortened) URL."""
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    tokens: int
    rule: str
    reduced_from: int | None = None
    shown_in: str | None = None
    not_attached: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """The note the request carries in the medium's place when its provider refuses it as it is
    (a type it does not take, over a size limit: ``projections.media_limits``). Absent (and not
    in the JSON) for a medium that was sent."""


class ManifestFragment(_Frozen):
    id: str
    kind: FragmentKind
    layer: int
    source_ref: str
    trust: Trust
    tokens: int
    required: bool
    truncated: bool
    selection_reason: str
    content_hash: str
    original_tokens: int | None = None
    media: Items[MediaCostRecord] = Items()
    """Per image/document: estimated cost for the target provider and the rule that priced it."""
    reasoning: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """For a model response that carried provider reasoning: whether it was sent (verbatim, its
    tokens counted in ``tokens``) or left out (another provider made it: a hand-off), how many
    pieces and how many tokens. Absent (and not in the JSON) for every other fragment."""


class ExcludedFragment(_Frozen):
    id: str
    kind: FragmentKind
    source_ref: str
    tokens: int
    reason: ExclusionReason
    replaced_by: str | None = None
    detail: str = ""


class ManifestTool(_Frozen):
    name: str
    tokens: int
    reason: str


class TruncationRecord(_Frozen):
    """A fragment's text cut to its grant (``projections.truncation_result.Truncation``): its
    sizes and kept ranges are those of the text that was cut, the redacted one when the fragment
    had secrets; its lines are the logged lines (a redaction keeps line breaks), its characters
    the redacted text's (the redaction records say what each placeholder replaced)."""

    id: str
    strategy: str
    original_tokens: int
    tokens: int
    original_chars: int
    kept: str
    """Human summary of the kept ranges, e.g. ``lines 1-40, 1980-2000``."""


class Calibration(_Frozen):
    """The per-model token correction a build applied (``projections.calibration``).

    ``correction`` is a high quantile of observed/estimated input tokens over
    earlier turns of this run that have both a build record and a provider
    usage report, or the newest such ratio (``last_*``) when higher; the build's
    budget is ``floor((window - reserve) / correction)`` when it is above 1, so
    ``selected_tokens * correction`` stays within the window. ``last_*`` is the
    newest observation it learned from, for audits.
    """

    model: str | None
    quantile: float
    samples: int = Field(ge=1)
    correction: float = Field(gt=0)
    base_budget: int
    """``window - reserve`` before the correction."""
    last_turn: int
    last_estimated: int
    last_observed: int


class ContextManifest(_Frozen):
    """What one request contains and why (``BuildResult.manifest``, the ``context_built`` record):
    the budget (``window_tokens - reserved_output_tokens = budget_tokens``), the tokens selected
    per layer, each selected fragment with its reason, the excluded ones by reason (duplicate,
    superseded, low_priority, over_budget, stale), the tools exposed, truncations, redactions and
    repairs, and the hashes a replay checks (``cache_key`` of the stable prefix, ``request_hash``
    of the body, ``config_hash`` of the build settings): hashes, refs, sizes and reasons, not the
    content itself.
    ``contextfold schema manifest`` prints its JSON Schema."""

    # Its list fields are ``Items[...]`` (``domain.items``), as the events' are: a tuple when read,
    # and to a type checker any sequence when given, so a user's ``mypy --strict`` takes
    # ``ContextManifest(fragments=[...])`` without pydantic's plugin. (A comment, not the
    # docstring: that is the schema's description, which stays as it was, as do the JSON and
    # hashes of the tuples these fields are at run time.)
    request_id: str
    run_id: str
    turn: int
    log_version: int
    provider: str
    model: str | None
    encoding: str
    window_tokens: int
    reserved_output_tokens: int
    budget_tokens: int
    selected_tokens: int
    overhead_tokens: int
    """Per-message and per-tool framing counted on top of fragment contents; with it, what the
    request pays once (the reply's priming, the opening note set aside, and for Anthropic the
    tool-use system prompt, also in ``layer_tokens["tools"]``)."""
    layer_tokens: dict[str, int]
    """Tokens per layer, framing included: ``tools`` holds the schemas (``tool_tokens``) and the
    provider's tool-use system prompt (``projections.tool_prompt``)."""
    fragments: Items[ManifestFragment]
    excluded: dict[str, int]
    excluded_items: ExcludedLines
    """A tuple of :class:`ExcludedFragment` to read, validate and serialize; held in chunks that
    the manifests of a run's builds share (see :mod:`~contextfold.domain.excluded_lines`)."""
    tools: Items[ManifestTool]
    tool_tokens: int
    truncations: Items[TruncationRecord] = Items()
    redactions: Items[RedactionRecord] = Items()
    repairs: Items[str] = Items()
    """Recovery events this build appended (e.g. ``tool_result_lost:call_7``)."""
    cache_key: str
    request_hash: str
    config_hash: str
    config: BuildConfig
    calibration: Calibration | None = None
    """None when the run has no usage observations for this model yet: nothing was corrected."""


@functools.cache
def manifest_json_depth() -> int | None:
    """The deepest nesting any manifest's JSON can have (``{}``/``[]`` count one level), read
    off its serialization schema; None if the schema does not bound it.

    Why: the store checks the depth of every event it appends by reading its JSON, and a long
    run's record is ~2 MB of it; a record whose manifest text the builder vouches for
    (``ContextBuilt.with_manifest_json``) is checked against this bound instead."""
    return schema_json_depth(ContextManifest)


def schema_json_depth(model: type[BaseModel]) -> int | None:
    """The deepest nesting the JSON of ``model``'s dumps can have, read off its serialization
    schema; None where the schema does not bound it (``Any``, a recursive model)."""
    schema = model.model_json_schema(mode="serialization")
    return _schema_depth(schema, schema.get("$defs", {}), frozenset())


def _schema_depth(node: Any, defs: dict[str, Any], seen: frozenset[str]) -> int | None:
    if not isinstance(node, dict):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return None if name in seen or name not in defs else _schema_depth(defs[name], defs, seen | {name})
    depths: list[int | None] = []
    for key in ("anyOf", "oneOf", "allOf"):
        depths += [_schema_depth(member, defs, seen) for member in node.get(key, ())]
    kind = node.get("type")
    if kind in ("object", "array"):  # one level above the deepest member or item
        if kind == "object":
            members = list(node.get("properties", {}).values())
            extra = node.get("additionalProperties", True)
            if extra is not False:
                members.append(extra)  # True or absent: anything, no bound
        else:
            members = list(node.get("prefixItems", ()))
            if "items" in node or not members:
                members.append(node.get("items"))
        inner = [_schema_depth(member, defs, seen) for member in members]
        depths.append(None if None in inner else 1 + max((d for d in inner if d is not None), default=0))
    elif kind in ("string", "number", "integer", "boolean", "null") or "enum" in node or "const" in node:
        depths.append(0)
    if not depths or None in depths:
        return None  # no type said (``Any``), or a member without a bound
    return max(d for d in depths if d is not None)
