"""An image a FileRead or an EvidenceRetrieved cites as its own artifact (a screenshot the agent
opened, an image a search returned) is folded, priced and sent as an image.

Why: the fold made every such artifact a document block, whatever its type: an image was priced
as a 1,500-token page by the fold, as a PDF page by each provider (3,888 tokens for Anthropic),
and Anthropic's request carried a note ("not attached, this API takes PDF documents only") in its
place. The same image in a user message is priced by the provider's image rule and sent as an
image; a cited PDF stays a document. The events are logged as before (the fold reads them), so a
log written before folds the same way.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.events import AnyEvent, ArtifactRef, EvidenceRetrieved, FileRead, UserInput
from contextfold.projections.fold import fold
from contextfold.projections.fold_content import IMAGE_TOKENS_DEFAULT, block_tokens
from contextfold.projections.render import validate_sdk_types
from tests.unit.test_fold import Log
from tests.unit.test_media import image_bytes, minimal_pdf

PROVIDERS = [("openai-chat", "gpt-4o"), ("openai-responses", "gpt-4o"), ("anthropic", "claude-sonnet-4-5"),
             ("gemini", "gemini-2.5-flash")]
IMAGE_PARTS = {"openai-chat": '"type": "image_url"', "openai-responses": '"type": "input_image"',
               "anthropic": '"type": "image"', "gemini": '"inlineData"'}


def _cites(ref: ArtifactRef, found: ArtifactRef, pdf: ArtifactRef) -> list[AnyEvent]:
    return [UserInput("what do the screenshots show?"),
            FileRead(path="docs/shot.png", artifact=ref),
            EvidenceRetrieved(source_ref="https://example.com/shot.png", source_kind="web", artifact=found),
            FileRead(path="docs/spec.pdf", artifact=pdf)]


@pytest.mark.parametrize(("provider", "model"), PROVIDERS)
def test_an_image_a_read_or_retrieval_cites_is_priced_and_sent_as_an_image(
        tmp_path: Path, provider: str, model: str) -> None:
    png, other = image_bytes("PNG", (512, 512)), image_bytes("PNG", (300, 200), (10, 200, 10))
    with open_store(f"sqlite:///{tmp_path / 'cited.db'}") as store:
        ref = store.events.put_artifact(png, "image/png")
        found = store.events.put_artifact(other, "image/png")
        pdf = store.events.put_artifact(minimal_pdf(1), "application/pdf")
        run = store.run("r")
        run.append(*_cites(ref, found, pdf))
        built = run.build(provider, model=model, window=200_000, reserve=1_000, record=False)
    assert validate_sdk_types(provider, built.request)
    media = [m for f in built.manifest.fragments for m in f.media]
    images = [m for m in media if m.media_type == "image/png"]
    assert len(images) == 2 and all(m.kind == "image" and m.not_attached is None for m in images), images
    assert not any("pdf-pages" in m.rule for m in images), images  # an image rule, not a page's
    [page] = [m for m in media if m.media_type == "application/pdf"]
    assert page.kind == "document"  # a cited PDF is still a document
    body = json.dumps(built.request)
    assert IMAGE_PARTS[provider] in body
    assert base64.b64encode(png).decode() in body and base64.b64encode(other).decode() in body
    assert "takes PDF documents only" not in body


def test_the_fold_estimates_a_cited_image_as_an_image() -> None:
    ref = ArtifactRef(hash="ab" * 32, size=1_000, media_type="image/png")
    found = ArtifactRef(hash="ef" * 32, size=1_000, media_type="image/jpeg")
    pdf = ArtifactRef(hash="cd" * 32, size=1_000, media_type="application/pdf")
    state = fold(Log().add(*_cites(ref, found, pdf)).records)
    images = [f for f in state.fragments() if f.source_ref.endswith("shot.png")]
    blocks = [b for f in images for b in f.content]
    assert [type(b).__name__ for b in blocks] == ["ImageBlock", "ImageBlock"], blocks
    assert all(block_tokens(state, b) == IMAGE_TOKENS_DEFAULT for b in blocks)  # not a 1,500-token page
