"""A request's text is measured as its provider's SDK sends it, beside its media, for the size limit.

Anthropic refuses a request over 32 MB, Gemini one over 20 MB, text and inline media's base64
together; the oldest media past that become notes. The text was reckoned at 4 bytes a selected
token, which is wrong both ways: indented text is ~50 bytes a token, and Gemini's SDK sends a CJK
character as a 6-byte ``\\uXXXX`` escape (a request the API refuses went out); random CJK is ~1.3
bytes a token in the UTF-8 Anthropic's SDK sends (a screenshot that fitted was left out).

Each case checks first that the old reckoning was wrong for it (so a case that no longer tests the
defect fails, rather than passing for nothing), then the request as the SDK serialises it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Store, open_store
from contextfold.domain.events import ImageBlock, TextBlock, UserInput
from contextfold.projections.builder import BuildResult
from contextfold.projections.media_limits import base64_length
from contextfold.projections.render import validate_sdk_types
from tests.integration.test_media_provider_rules import stored_png

MB = 1024 * 1024
OLD_BYTES_PER_TOKEN = 4


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


def anthropic_bytes(request: dict[str, Any]) -> int:
    """The body as Anthropic's SDK sends it (``anthropic._utils._json.openapi_dumps``)."""
    return len(json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode())


def gemini_bytes(request: dict[str, Any]) -> int:
    """The body as google-genai sends it (``json.dumps(http_request.data)``)."""
    return len(json.dumps(request).encode())


def _indented(size: int) -> str:
    """~``size`` characters of deeply indented lines: ~50 bytes a token."""
    lines = [" " * (4 * (i % 50)) + f"k{i}:\n" for i in range(size // 100)]
    return "".join(lines)


def _random_cjk(count: int) -> str:
    """``count`` random CJK ideographs: ~2.4 tokens each, 3 bytes of UTF-8."""
    pick = random.Random(7).randrange
    return "".join(chr(pick(0x4E00, 0x9FFF)) for _ in range(count))


def _common_cjk(count: int) -> str:
    """~``count`` characters of common Chinese: ~1 token each, 6 bytes as a ``\\uXXXX`` escape."""
    sentence = "中文文本测试数据，这是一个很长的句子。"
    return sentence * (count // len(sentence))


def _run(store: Store, name: str, text: str, side: int, count: int) -> list[ImageBlock]:
    run = store.run(name)
    shots = [store.attach_image(stored_png(side, side, seed=i)) for i in range(count)]
    run.append(UserInput(content=(TextBlock(text=text),)))
    for i, shot in enumerate(shots):
        run.append(UserInput(content=(TextBlock(text=f"screen {i}"), shot)))
    return shots


def _media_bytes(shots: list[ImageBlock]) -> int:
    return sum(base64_length(s.artifact.size) for s in shots if s.artifact is not None)


def _sent(built: BuildResult) -> list[bool]:
    return [m.not_attached is None for f in built.manifest.fragments for m in f.media]


def _old_guess(built: BuildResult) -> int:
    return OLD_BYTES_PER_TOKEN * built.manifest.selected_tokens


def run_preview(store: Store, name: str, provider: str, model: str) -> BuildResult:
    return store.run(name).preview(provider, model=model, window=1_000_000, reserve=4_000)


Case = tuple[str, str, int, Callable[[dict[str, Any]], int], Callable[[], str], tuple[int, int]]
"""provider, model, its limit, its SDK's serialisation, the text (made when run), images (side, count)"""
CASES: dict[str, Case] = {
    "anthropic-indented": ("anthropic", "claude-sonnet-4-5", 32 * MB, anthropic_bytes,
                           lambda: _indented(2_000_000), (1078, 7)),
    "gemini-cjk": ("gemini", "gemini-2.5-pro", 20 * MB, gemini_bytes,
                   lambda: _common_cjk(200_000), (1290, 3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_larger_than_4_bytes_a_token_leaves_the_oldest_medium_out(store: Store, case: str) -> None:
    provider, model, limit, measure, text, (side, count) = CASES[case]
    shots = _run(store, "big-text", text(), side, count)
    built = run_preview(store, "big-text", provider, model)
    assert validate_sdk_types(provider, built.request)
    sent_text = measure(built.request) - sum(base64_length(s.artifact.size) for s, sent in
                                             zip(shots, _sent(built), strict=True) if sent and s.artifact)
    # the defect's case: the old reckoning took every medium, and the request was over the limit
    assert _old_guess(built) + _media_bytes(shots) <= limit < sent_text + _media_bytes(shots)
    assert measure(built.request) <= limit
    assert _sent(built) == [False] + [True] * (count - 1)  # the oldest only
    assert '"screen 0' in json.dumps(built.request)


def test_text_smaller_than_4_bytes_a_token_leaves_no_medium_out(store: Store) -> None:
    shots = _run(store, "cjk", _random_cjk(160_000), 1078, 7)
    built = run_preview(store, "cjk", "anthropic", "claude-sonnet-4-5")
    assert validate_sdk_types("anthropic", built.request)
    # the defect's case: the old reckoning left a medium out of a request that takes them all
    assert _old_guess(built) + _media_bytes(shots) > 32 * MB
    assert _sent(built) == [True] * 7
    assert anthropic_bytes(built.request) <= 32 * MB
