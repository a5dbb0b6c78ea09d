"""What one image costs at OpenAI, per model: the model decides the rule, not the API.

Why a module of its own: OpenAI prices an image by one of two rules, and by numbers that differ
per model by a factor of 33 (platform.openai.com/docs/guides/images-vision, "Calculating costs").
A builder that priced every model as GPT-4o charged 765 tokens for a 1024x1024 screenshot that
gpt-4o-mini counts as 25,501 and gpt-4.1-nano as 2,520: the request it called within budget was
not, and the "safe" step to ``detail: low`` freed 680 tokens that a patch-priced model never gives
back (it ignores ``detail``).

- Tile rules (:attr:`OpenAIImageRule.tile` > 0): ``detail: low`` costs ``base``; ``high`` (and
  ``auto``, which may be high) scales the image to fit in 2048x2048, then so that its shortest side
  is 768 px (never up), and costs ``base + tile`` per 512-px tile. gpt-4o / gpt-4.1 / gpt-4.5 (and
  gpt-4-turbo, chatgpt-4o-latest): 85 + 170; gpt-4o-mini: 2833 + 5667; o1 / o1-pro / o3 / o3-pro:
  75 + 150; gpt-5 / gpt-5-chat-latest: 70 + 140.
- Patch rules (:attr:`OpenAIImageRule.hundredths` > 0): the 32x32-px patches that cover the image,
  the image scaled down first so that no more than its budget (1536) cover it, times a multiplier;
  ``detail`` has no effect. gpt-4.1-mini 1.62, gpt-4.1-nano 2.46, o4-mini 1.72, gpt-5-mini 1.62,
  gpt-5-nano 2.46, codex-mini-latest 1.72 (o4-mini's).

Later models, each from the source named (the guide's table has not kept up with them, and the
measured multipliers are below the documented ones where both exist, so the dearer is kept):

- gpt-5.1: gpt-5's 70 + 140 (docs.rs ``vision-squeezer``'s model table, "Legacy GPT-5/5.1 high
  detail: 70 base tokens + 140 per 512x512 tile"; community.openai.com "API AI computer vision
  pricing: models compared visually" names gpt-5.2 as the first to change the rule).
- gpt-5.2 to gpt-5.5: patches x 1.2 (community.openai.com "Introducing GPT-5.4 mini and nano":
  measured 1.2x for gpt-5.2, gpt-5.3-codex and gpt-5.4; github.com/vybestack/llxprt-code#3477:
  "GPT-5.2 and later bill image input ... 1.2 x patches"), with a budget of 2500 patches: the
  guide's sizing table gives the larger models 2,500 patches at ``high`` (github.com/Prism-Shadow
  /agenthub#194, quoting it for gpt-5.4 and gpt-5.5). Where gpt-5.2's budget is 1536 (llxprt's
  reading) this over-counts a large image by at most 1,156 tokens: room unused, never a refusal.
- gpt-5.4-mini: x1.62 (the guide as quoted in community.openai.com "gpt-5.4-mini 66k prompt
  tokens for a 1920x1080 png": "a 1,536-patch budget and a 1.62x multiplier"; measured 1.2);
  gpt-5.4-nano: x2.46, the dearest documented small-model multiplier (measured 1.2, the guide's
  figure not quoted anywhere we found): an over-count, never an under-count.

Names: a whole model name, its dated snapshot (``gpt-4.1-mini-2025-04-14``) and a gateway's
prefix (``openai/``, ``azure/``). A gpt-5 family's ``-chat-latest``, ``-codex``, ``-codex-max``
and ``-pro`` variants share their base's rule (as gpt-5-chat-latest, o1-pro and o3-pro do in the
guide, and gpt-5.3-codex measured as gpt-5.4); ``-mini`` and ``-nano`` never do (gpt-4o-mini is
not gpt-4o, nor gpt-5.1 gpt-5).

Measured, not only published: one 128x64 image sent to gpt-4o-mini-2024-07-18 was 8,512 prompt
tokens at high and 2,845 at low (2833 + 5667 and 2833, plus the message's text); to o4-mini and
gpt-4.1-mini the same at either detail (community.openai.com, "Vision: more than one way to send
a request").

A model this table does not name (a new one, a fine-tuned one, a gateway's alias, none at all) is
priced by the dearest of the rules (``media_cost.image_cost``): an over-count leaves room
unused, an under-count is a request the provider refuses as too long.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

__all__ = [
    "GPT_4O_IMAGE_RULE",
    "OPENAI_IMAGE_RULES",
    "OPENAI_MAX_PATCHES",
    "OpenAIImageRule",
    "openai_image_rule",
    "patch_count",
    "tile_count",
]

OPENAI_MAX_PATCHES = 1536
_PATCH_SIDE = 32
_TILE_SIDE = 512
_MAX_TILES = 8
"""The most 512-px tiles a high-detail image takes: 2048x768 after both scalings (4 x 2)."""


@dataclass(frozen=True, slots=True)
class OpenAIImageRule:
    """One model family's image price (module docstring): a tile rule or a patch rule."""

    name: str
    """The rule's numbers, as the manifest names it (``openai-tiles:2833+5667``,
    ``openai-patches:x1.62``): several model families share one rule, and the numbers say what
    was charged where a family's name would send the reader to this table."""
    base: int = 0
    tile: int = 0
    hundredths: int = 0
    """A patch rule's multiplier in hundredths (162 for 1.62): integer arithmetic, so that a
    product such as 25 x 1.72 is 43, not the 44 a float's ceiling made of 43.000000000000004."""
    budget: int = 0
    """A patch rule's most patches an image is scaled to (0: :data:`OPENAI_MAX_PATCHES`)."""

    @property
    def patches(self) -> bool:
        return self.hundredths > 0

    @property
    def max_patches(self) -> int:
        return self.budget or OPENAI_MAX_PATCHES

    def tokens(self, width: int, height: int, detail: str) -> int:
        """The price of a ``width`` x ``height`` image at ``detail`` (``auto`` priced as high)."""
        if self.patches:
            return self._times(patch_count(width, height, self.max_patches))
        if detail == "low":
            return self.base
        return self.base + self.tile * tile_count(width, height)

    def largest(self, detail: str) -> int:
        """The price of the dearest image at ``detail``: for an image of unknown size."""
        if self.patches:
            return self._times(self.max_patches)
        return self.base if detail == "low" else self.base + self.tile * _MAX_TILES

    def _times(self, patches: int) -> int:
        return -(-patches * self.hundredths // 100)


_GPT_4O = OpenAIImageRule("85+170", base=85, tile=170)
_GPT_4O_MINI = OpenAIImageRule("2833+5667", base=2833, tile=5667)
_O_SERIES = OpenAIImageRule("75+150", base=75, tile=150)
_GPT_5 = OpenAIImageRule("70+140", base=70, tile=140)
_MINI_162 = OpenAIImageRule("x1.62", hundredths=162)
_NANO_246 = OpenAIImageRule("x2.46", hundredths=246)
_O4_MINI_172 = OpenAIImageRule("x1.72", hundredths=172)
_GPT_5_2 = OpenAIImageRule("x1.2@2500", hundredths=120, budget=2500)

GPT_4O_IMAGE_RULE = _GPT_4O
"""The rule of the guide's worked examples (gpt-4o, gpt-4.1, gpt-4.5)."""

OPENAI_IMAGE_RULES: tuple[OpenAIImageRule, ...] = (
    _GPT_4O, _GPT_4O_MINI, _O_SERIES, _GPT_5, _MINI_162, _NANO_246, _O4_MINI_172, _GPT_5_2)

_SNAPSHOT = r"(?:-\d{4}-\d{2}-\d{2})?"
_VARIANT = r"(?:-chat-latest|-codex(?:-max)?|-pro)?"
"""The gpt-5 families' variants that keep their base's rule (module docstring)."""
_BY_NAME: tuple[tuple[re.Pattern[str], OpenAIImageRule], ...] = tuple(
    (re.compile(rf"(?:{names}){_SNAPSHOT}", re.IGNORECASE), rule) for names, rule in (
        (r"gpt-4o-mini", _GPT_4O_MINI),
        (r"gpt-4o|chatgpt-4o-latest|gpt-4\.1|gpt-4\.5-preview|gpt-4\.5|gpt-4-turbo", _GPT_4O),
        (r"o1|o1-pro|o3|o3-pro", _O_SERIES),
        (rf"gpt-5(?:\.1)?{_VARIANT}", _GPT_5),
        (rf"gpt-5\.[2-5]{_VARIANT}", _GPT_5_2),
        (r"gpt-4\.1-mini|gpt-5-mini|gpt-5\.4-mini", _MINI_162),
        (r"gpt-4\.1-nano|gpt-5-nano|gpt-5\.4-nano", _NANO_246),
        (r"o4-mini|codex-mini-latest", _O4_MINI_172),
    ))
"""Whole model names (a dated snapshot and a gpt-5 family's variants too), so ``gpt-4o-mini`` is
never read as ``gpt-4o`` nor ``gpt-5.4-mini`` as ``gpt-5.4``: a name not listed is priced as
unknown (the dearest rule)."""


@functools.lru_cache(maxsize=256)  # a run names one model or two: asked for at every build
def openai_image_rule(model: str | None) -> OpenAIImageRule | None:
    """The image rule of ``model`` (a gateway's ``openai/`` prefix aside), None when the table does
    not name it: then every rule may apply, and the dearest is charged."""
    if model is None:
        return None
    name = model.rsplit("/", 1)[-1]
    for pattern, rule in _BY_NAME:
        if pattern.fullmatch(name):
            return rule
    return None


def tile_count(width: int, height: int) -> int:
    """512-px tiles of a high-detail image: fitted in 2048x2048, shortest side to 768 (never up)."""
    w, h = float(width), float(height)
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return math.ceil(w / _TILE_SIDE) * math.ceil(h / _TILE_SIDE)


def patch_count(width: int, height: int, budget: int = OPENAI_MAX_PATCHES) -> int:
    """32-px patches covering the image, scaled down first when more than ``budget`` (1536) would
    (OpenAI's steps: ``r = sqrt(32^2 * budget / (w * h))``, then ``r`` shrunk so that one side is
    a whole number of patches; 1800x2400 -> 1056x1408 -> 33 x 44 = 1452)."""
    raw = math.ceil(width / _PATCH_SIDE) * math.ceil(height / _PATCH_SIDE)
    if raw <= budget:
        return raw
    r = math.sqrt(_PATCH_SIDE * _PATCH_SIDE * budget / (width * height))
    across, down = width * r / _PATCH_SIDE, height * r / _PATCH_SIDE
    r *= min(math.floor(across) / across if across >= 1 else 1.0,
             math.floor(down) / down if down >= 1 else 1.0)
    # The side scaled to a whole number of patches must not gain one from a float's last bit.
    across, down = width * r / _PATCH_SIDE - 1e-9, height * r / _PATCH_SIDE - 1e-9
    return min(budget, max(1, math.ceil(across)) * max(1, math.ceil(down)))
