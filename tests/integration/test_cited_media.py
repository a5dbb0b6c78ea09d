"""Media an appended event cites by artifact are checked as ``attach_image``/``attach_document``
check them, on every backend: the type the bytes prove replaces the declared one, dimensions and
pages come from the bytes, and bytes that are no image or no PDF are refused, naming the event.

Why: an image or document block that already cited an artifact was taken as declared, so an events
export imported with ``--with-artifacts`` (or a ref put together by hand) carried bytes that are no
image as ``image/png 64x64``, or a PNG as ``image/jpeg 999999x1``, into the request (Anthropic
rejects one whose declared type does not match the data)."""

from __future__ import annotations

import blake3
import pytest

from contextfold.domain.errors import UnsupportedMediaError
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    DocumentBlock,
    ImageBlock,
    ModelResponse,
    TextBlock,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.store.event_store import EventStore
from tests.unit.test_media import image_bytes, minimal_pdf

JUNK = b"this is not an image at all" * 10


def _ref(data: bytes, media_type: str) -> ArtifactRef:
    return ArtifactRef(hash=blake3.blake3(data).hexdigest(), size=len(data), media_type=media_type)


def _image(data: bytes, media_type: str, width: int, height: int) -> UserInput:
    return UserInput(content=(TextBlock(text="what is in this picture?"),
                              ImageBlock(artifact=_ref(data, media_type), media_type=media_type,
                                         width=width, height=height)))


def _blocks(store: EventStore, run: str) -> list[ImageBlock | DocumentBlock]:
    out: list[ImageBlock | DocumentBlock] = []
    for r in store.read(run):
        blocks = r.event.content if isinstance(r.event, UserInput) else getattr(r.event, "blocks", None) or ()
        out += [b for b in blocks if isinstance(b, ImageBlock | DocumentBlock)]
    return out


@pytest.mark.parametrize("carried", [False, True], ids=["stored", "carried"])
def test_a_cited_image_is_what_its_bytes_prove(store: EventStore, carried: bool) -> None:
    png = image_bytes("PNG", (3, 2))
    events: list[AnyEvent] = [_image(png, "image/jpeg", 999_999, 1)]
    if carried:  # an import of an export made with --with-artifacts
        store.append_new_runs([("r", events)], artifacts=[(png, "image/jpeg")])
    else:
        store.put_artifact(png, "image/jpeg")
        store.append("r", events)
    [block] = _blocks(store, "r")
    assert isinstance(block, ImageBlock) and block.artifact is not None
    assert (block.media_type, block.width, block.height) == ("image/png", 3, 2)
    assert block.artifact.media_type == "image/png" and block.artifact.hash == _ref(png, "x").hash
    assert store.verify("r").ok


@pytest.mark.parametrize("carried", [False, True], ids=["stored", "carried"])
def test_cited_bytes_that_are_no_image_or_no_pdf_are_refused_naming_the_event(
        store: EventStore, carried: bool) -> None:
    cases: list[AnyEvent] = [
        _image(JUNK, "image/png", 64, 64),
        UserInput(content=(DocumentBlock(artifact=_ref(JUNK, "application/pdf"), pages=3),)),
    ]
    for bad in cases:
        events: list[AnyEvent] = [UserInput("first"), bad]
        with pytest.raises(UnsupportedMediaError, match=r"event 1 \(user_input\).*artifact:"):
            if carried:
                store.append_new_runs([("r", events)], artifacts=[(JUNK, "image/png")])
            else:
                store.put_artifact(JUNK, "image/png")
                store.append("r", events)
        assert store.version("r") == 0


def test_a_cited_pdf_gets_its_type_and_pages_and_a_text_document_stays_as_it_came(store: EventStore) -> None:
    pdf, text = minimal_pdf(2), b"plain notes, not a PDF"
    store.put_artifact(pdf, "text/plain")
    store.put_artifact(text, "text/plain")
    shot = image_bytes("GIF", (5, 4))
    store.put_artifact(shot, "image/png")
    store.append("r", [
        UserInput(content=(DocumentBlock(artifact=_ref(pdf, "text/plain"), media_type="text/plain", pages=9),
                           DocumentBlock(artifact=_ref(text, "text/plain"), media_type="text/plain"))),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="shot"),)),
        ToolResult(call_id="c1", content="screenshot", blocks=(
            ImageBlock(artifact=_ref(shot, "image/png"), media_type="image/png"),)),
    ])
    pdf_block, text_block, image_block = _blocks(store, "r")
    assert isinstance(pdf_block, DocumentBlock)
    assert (pdf_block.media_type, pdf_block.pages) == ("application/pdf", 2)
    assert text_block == DocumentBlock(artifact=_ref(text, "text/plain"), media_type="text/plain")
    assert isinstance(image_block, ImageBlock)
    assert (image_block.media_type, image_block.width, image_block.height) == ("image/gif", 5, 4)
