"""Which provider a model name belongs to, so a hand-off does not send one provider another's model.

Why: a run records its model once (``RunStarted.model``), and a build names it in the body when
the caller gives none. Built for another provider (DESIGN 10: a hand-off, a fallback), the body
said ``"model": "gpt-4.1"`` to Anthropic or ``"claude-sonnet-4-5"`` to OpenAI; the SDK types
take any string, so the request validated, and the provider answered 404 or 400. Such a body now
names no model, as one for a run that recorded none: the caller's ``model=`` says which.

Only names whose family is certain are judged; any other name (a local or fine-tuned model, a
gateway's alias) is sent as it was. A name routed by a gateway (``anthropic/claude-3.5-sonnet``
through an OpenAI-compatible API) carries a ``/`` and is sent to the OpenAI APIs as it was:
those gateways speak their format for every vendor's models. Anthropic's API serves only Claude.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

__all__ = ["OPENAI_CHAT_AUDIO_FORMATS", "ClaudeVersion", "chat_audio_model", "claude_version", "model_family",
           "not_a_reasoning_model", "run_model_for"]

OPENAI_CHAT_AUDIO_FORMATS: dict[str, str] = {
    "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mp3": "mp3", "audio/mpeg": "mp3",
}
"""Media types a Chat Completions ``input_audio`` part carries, with its ``format``. The SDK's
``ChatCompletionContentPartInputAudioParam``: base64 ``data`` and ``format`` "wav" or "mp3", inline
only, and only to an audio model (:func:`chat_audio_model`). (Responses' user content takes no
audio part: there audio stays a note.) Here, beside the models, because the renderer, the limits
(``media_limits``) and the prices (``media_cost``) all read it, and this module imports none."""

_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic", re.compile(r"claude", re.IGNORECASE)),
    ("openai", re.compile(r"(?:^|/)(?:gpt-|chatgpt-|o[134](?:$|-)|codex-)", re.IGNORECASE)),
    ("gemini", re.compile(r"(?:^|/)(?:models/)?gemini-", re.IGNORECASE)),
)

_NOT_REASONING = re.compile(r"(?:^|/)(?:gpt-4o|gpt-4\.1|gpt-3\.5|gpt-4(?:$|-)|chatgpt-4o)", re.IGNORECASE)
"""OpenAI models that are certainly not reasoning models: GPT-4o, GPT-4.1, GPT-3.5, GPT-4 (and
its dated and turbo variants), ChatGPT-4o. Source: OpenAI's model pages
(platform.openai.com/docs/models), where reasoning models are the o-series, ``gpt-5`` and
``codex-``/``computer-use`` models; the Responses API refuses reasoning input items for any
other model with 400 "Reasoning input items can only be provided to a reasoning or computer use
model". Only names certain not to reason are listed: a new or unknown name still gets its run's
reasoning (what it refuses is a loud 400; what a reasoning model misses is silent)."""

_CHAT_AUDIO = re.compile(
    r"(?:^|/)(?:gpt-4o(?:-mini)?-audio-preview|gpt-audio(?:-mini)?)(?:-\d{4}-\d{2}-\d{2})?$", re.IGNORECASE)
"""OpenAI's audio models, which Chat Completions sends ``input_audio`` parts to: gpt-4o-audio-preview,
gpt-4o-mini-audio-preview, gpt-audio, gpt-audio-mini and their dated snapshots (platform.openai.com
/docs/models, /docs/guides/audio: "audio inputs ... with the gpt-4o-audio-preview model"), under a
gateway's vendor prefix too. Chat Completions refuses the request of any other model that carries
one (400 "This model does not support audio input"); realtime, transcription and speech models are
other APIs'."""

_FAMILY_OF_PROVIDER = {"anthropic": "anthropic", "openai-chat": "openai", "openai-responses": "openai",
                       "gemini": "gemini"}


@functools.lru_cache(maxsize=256)  # a run names one model or two: asked for at every build
def model_family(model: str) -> str | None:
    """``"anthropic"``, ``"openai"`` or ``"gemini"`` for a name that is certainly that vendor's
    model, else None."""
    for family, pattern in _FAMILIES:
        if pattern.search(model):
            return family
    return None


def run_model_for(provider: str, model: str | None) -> str | None:
    """The run's recorded ``model`` as the body for ``provider`` may name it: None when it is
    certainly another vendor's (module docstring)."""
    if model is None:
        return None
    family = model_family(model)
    wanted = _FAMILY_OF_PROVIDER.get(provider)
    if family is None or wanted is None or family == wanted:
        return model
    if wanted == "openai" and "/" in model:  # a gateway's route: its OpenAI-format API takes it
        return model
    return None


@functools.lru_cache(maxsize=256)
def not_a_reasoning_model(model: str | None) -> bool:
    """Whether ``model`` is certainly not a reasoning model (:data:`_NOT_REASONING`): a request
    for it must not carry reasoning items. False for None and for any name not known."""
    return model is not None and _NOT_REASONING.search(model) is not None


@functools.lru_cache(maxsize=256)
def chat_audio_model(model: str | None) -> bool:
    """Whether ``model`` is one of OpenAI's audio models (:data:`_CHAT_AUDIO`), which a Chat
    Completions request may send audio to. False for None and for any other name: audio it cannot
    take is a note, where a part it refuses fails the whole request."""
    return model is not None and _CHAT_AUDIO.search(model) is not None


class ClaudeVersion(NamedTuple):
    """A Claude model's tier and version: ``claude-sonnet-4-5-20250929`` is ("sonnet", 4, 5)."""

    tier: str
    major: int
    minor: int


_CLAUDE_NEW = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:[-.](\d)(?!\d))?", re.IGNORECASE)
"""``claude-opus-4-6``, ``claude-sonnet-4-20250514`` (no minor: a date is none), OpenRouter's
``claude-sonnet-4.5``."""
_CLAUDE_OLD = re.compile(r"claude-(\d+)(?:[-.](\d))?-(opus|sonnet|haiku)", re.IGNORECASE)
"""``claude-3-7-sonnet-20250219``, ``claude-3-5-haiku-latest``, ``claude-3-opus-20240229``,
OpenRouter's ``claude-3.5-sonnet``."""


@functools.lru_cache(maxsize=256)  # a run names one model or two: asked for at every build and render
def claude_version(model: str | None) -> ClaudeVersion | None:
    """The Claude tier and version ``model`` names, wherever the id sits in a gateway's spelling
    (``anthropic/claude-sonnet-4.5``, Vertex's ``claude-sonnet-4-5@20250929``, Bedrock's
    ``us.anthropic.claude-sonnet-4-5-20250929-v1:0``), in any case; None for any other name.

    Why one reader: the assistant-prefill rule (``render.protocol``), the tool-use system prompt
    (``tool_prompt``) and the output cap (``render.output_caps``) each parsed the id their own way
    and disagreed on these spellings: OpenRouter's ``claude-opus-4.6`` was 4.0 to the prefill
    rule (a prefill Claude 4.6 refuses was sent) and a cross-region Bedrock id had no output cap."""
    if not model:
        return None
    if (m := _CLAUDE_NEW.search(model)) is not None:
        return ClaudeVersion(m[1].lower(), int(m[2]), int(m[3] or 0))
    if (m := _CLAUDE_OLD.search(model)) is not None:
        return ClaudeVersion(m[3].lower(), int(m[1]), int(m[2] or 0))
    return None
