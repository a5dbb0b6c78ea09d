"""Media intake: real PNG/JPEG/GIF/WebP/PDF bytes, typed errors, nothing stored on error.

Images are written by Pillow; PDFs by Pillow (one page per image) and by hand
(a minimal valid PDF with a page tree). Also the pure media steps of a build:
dedupe by hash and data: URL splitting (``media_plan.finalize_media``).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from contextfold.domain.conversation import Conversation, InstructionPart, MediaPart, UserMessage
from contextfold.domain.errors import InputLimitError, InvalidInputError, UnsupportedMediaError
from contextfold.domain.events import ArtifactRef, ImageBlock, RunStarted, TextBlock, UserInput
from contextfold.projections.media_finish import finalize_media
from contextfold.store.event_store import EventStore
from contextfold.store.media import (
    MediaLimits,
    attach_document,
    attach_image,
    inspect_document,
    sniff_media_type,
)


def image_bytes(fmt: str, size: tuple[int, int] = (640, 480), color: tuple[int, int, int] = (30, 90, 200)
                ) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return buf.getvalue()


def minimal_pdf(pages: int) -> bytes:
    """A hand-written PDF 1.4: catalog, page tree, ``pages`` empty pages, a correct xref."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>",
               "<< /Type /Pages /Kids [" + " ".join(f"{3 + i} 0 R" for i in range(pages))
               + f"] /Count {pages} >>"]
    objects += ["<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"] * pages
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    return EventStore(f"sqlite:///{tmp_path / 'media.db'}")


@pytest.mark.parametrize(("fmt", "media_type"), [
    ("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")])
def test_attach_image_reads_type_and_dimensions_from_the_bytes(store: EventStore, fmt: str,
                                                               media_type: str) -> None:
    data = image_bytes(fmt, (1280, 720))
    block = attach_image(store, data)
    assert (block.media_type, block.width, block.height) == (media_type, 1280, 720)
    assert block.artifact is not None and block.artifact.size == len(data)
    assert block.artifact.media_type == media_type
    assert store.artifact(block.artifact) == data  # blake3-addressed, byte-exact


def test_a_wrong_declared_type_is_replaced_by_the_sniffed_one(store: EventStore) -> None:
    block = attach_image(store, image_bytes("JPEG"), media_type="image/png")
    assert block.media_type == "image/jpeg"


def test_same_bytes_are_stored_once(store: EventStore) -> None:
    data = image_bytes("PNG")
    a, b = attach_image(store, data), attach_image(store, data)
    assert a.artifact == b.artifact and store.artifact_count() == 1


def test_corrupt_png_is_a_typed_error_and_writes_nothing(store: EventStore) -> None:
    good = image_bytes("PNG", (300, 300))
    garbled = good[:60] + bytes(b ^ 0xFF for b in good[60:120]) + good[120:]  # IDAT data/CRC broken
    truncated = good[: len(good) // 2]
    for bad in (garbled, truncated, good[:8] + b"\x00" * 100):
        with pytest.raises(UnsupportedMediaError, match="corrupt image/png"):
            attach_image(store, bad)
    assert store.artifact_count() == 0


def test_a_bad_detail_or_title_is_a_typed_error_and_stores_nothing(store: EventStore) -> None:
    """attach_image(detail="ultra") raised pydantic's ValidationError, after storing the bytes."""
    with pytest.raises(InvalidInputError, match="invalid image: detail: "):
        attach_image(store, image_bytes("PNG"), detail="ultra")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="invalid document: title: "):
        attach_document(store, minimal_pdf(1), title=["not", "text"])  # type: ignore[arg-type]
    assert store.artifact_count() == 0
    block = attach_image(store, image_bytes("PNG"), detail="low")
    assert block.detail == "low" and block.artifact is not None
    assert store.artifact(block.artifact) == image_bytes("PNG")


def test_unknown_type_is_a_typed_error(store: EventStore) -> None:
    with pytest.raises(UnsupportedMediaError, match="not a supported image"):
        attach_image(store, b"BM\x00\x00 a bitmap header, not carried")
    with pytest.raises(UnsupportedMediaError, match="not a PDF"):
        attach_document(store, image_bytes("PNG"))
    assert store.artifact_count() == 0


def test_200_mb_file_is_refused_before_decoding_and_writes_nothing(store: EventStore) -> None:
    huge = b"\x89PNG\r\n\x1a\n" + bytes(200 * 1024 * 1024)
    with pytest.raises(InputLimitError, match="exceeds the limit"):
        attach_image(store, huge)
    with pytest.raises(InputLimitError):
        attach_document(store, b"%PDF-1.7\n" + bytes(200 * 1024 * 1024))
    assert store.artifact_count() == 0
    assert issubclass(InputLimitError, InvalidInputError)


def test_dimension_limit(store: EventStore) -> None:
    with pytest.raises(InputLimitError, match="px per side"):
        attach_image(store, image_bytes("PNG", (1200, 10)), limits=MediaLimits(max_image_side=1000))
    assert store.artifact_count() == 0


def test_pdf_page_count_handwritten_and_pillow(store: EventStore) -> None:
    block = attach_document(store, minimal_pdf(3), title="spec")
    assert (block.media_type, block.pages, block.title) == ("application/pdf", 3, "spec")
    frames = [Image.new("RGB", (200, 260), (i * 40, 0, 0)) for i in range(5)]
    buf = io.BytesIO()
    frames[0].save(buf, "PDF", save_all=True, append_images=frames[1:])
    assert inspect_document(buf.getvalue()).pages == 5


def test_corrupt_pdf(store: EventStore) -> None:
    with pytest.raises(UnsupportedMediaError):
        attach_document(store, b"%PDF-1.4\n this is not a pdf body at all")
    assert store.artifact_count() == 0


def test_sniff() -> None:
    assert sniff_media_type(image_bytes("GIF")) == "image/gif"
    assert sniff_media_type(minimal_pdf(1)) == "application/pdf"
    assert sniff_media_type(b"hello") is None


def _data_url(data: bytes, media_type: str = "image/*") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_append_turns_data_urls_into_artifacts(store: EventStore) -> None:
    png = image_bytes("PNG", (800, 600))
    event = UserInput(content=(TextBlock(text="look"), ImageBlock(url=_data_url(png), media_type="image/*")))
    recorded = store.append("r1", [RunStarted(), event])
    block = recorded[1].event.content[1]  # type: ignore[union-attr]
    assert isinstance(block, ImageBlock) and block.url is None and block.artifact is not None
    assert (block.media_type, block.width, block.height) == ("image/png", 800, 600)
    assert store.artifact(block.artifact) == png
    # read back from the store, the same
    assert store.read("r1")[1].event == recorded[1].event


def test_an_append_with_one_corrupt_image_writes_nothing(store: EventStore) -> None:
    good = ImageBlock(url=_data_url(image_bytes("PNG")), media_type="image/png")
    bad = ImageBlock(url=_data_url(image_bytes("PNG")[:50]), media_type="image/png")
    with pytest.raises(UnsupportedMediaError):
        store.append("r2", [RunStarted(), UserInput(content=(good,)), UserInput(content=(bad,))])
    assert store.artifact_count() == 0 and store.version("r2") == 0


def test_finalize_media_dedupes_by_hash_and_splits_data_urls() -> None:
    png = image_bytes("PNG")
    url = _data_url(png, "image/png")
    parts = (MediaPart(kind="image", media_type="image/png", url=url, fragment_id="e2"),)
    again = (MediaPart(kind="image", media_type="image/png", url=url, fragment_id="e5"),)
    conv = Conversation(messages=(UserMessage(parts=parts), UserMessage(parts=again)))
    done = finalize_media(conv, reduced=frozenset({"e2"}), load_bytes=None)
    first = done.conversation.messages[0].parts[0]  # type: ignore[union-attr]
    second = done.conversation.messages[1].parts[0]  # type: ignore[union-attr]
    assert isinstance(first, MediaPart) and first.url is None and first.detail == "low"
    assert base64.b64decode(first.data_base64 or "") == png
    assert isinstance(second, InstructionPart) and "shown above (from e2)" in second.text
    assert list(done.shown_in) == ["e5"]


@pytest.mark.parametrize(("provider", "kept"), [("anthropic", 6), ("gemini", 4), ("openai-chat", 8)])
def test_finalize_media_keeps_a_request_within_its_providers_size_the_newest_first(provider: str,
                                                                                  kept: int) -> None:
    """Eight 3.5 MB images (4.7 MB of base64 each): Anthropic takes 32 MB a request, Gemini 20 MB,
    OpenAI 50 MB of images; with 1 MB of text beside them the oldest past that are notes."""
    parts = [MediaPart(kind="image", media_type="image/png", fragment_id=f"e{i}", artifact=ArtifactRef(
        hash=f"{i:064x}", size=3_500_000, media_type="image/png")) for i in range(8)]
    conv = Conversation(messages=tuple(UserMessage(parts=(p,)) for p in parts))
    done = finalize_media(conv, reduced=frozenset(), load_bytes=None, provider=provider, text_bytes=1_000_000)
    sent = [m.parts[0].unsent is None for m in done.conversation.messages]  # type: ignore[union-attr]
    assert sent == [False] * (8 - kept) + [True] * kept
    assert sorted(done.unsent) == [f"e{i}" for i in range(8 - kept)]


def _documents(sizes_and_types: list[tuple[int, str]]) -> Conversation:
    parts = [MediaPart(kind="document", media_type=kind, fragment_id=f"e{i}", artifact=ArtifactRef(
        hash=f"{i:064x}", size=size, media_type=kind)) for i, (size, kind) in enumerate(sizes_and_types)]
    return Conversation(messages=tuple(UserMessage(parts=(p,)) for p in parts))


@pytest.mark.parametrize(("provider", "kept"), [("openai-chat", 2), ("openai-responses", 2), ("anthropic", 2),
                                                ("gemini", 1)])
def test_finalize_media_keeps_a_request_within_its_providers_file_content_the_newest_first(provider: str,
                                                                                         kept: int) -> None:
    """Three 12 MB PDFs (16 MB of base64 each): OpenAI takes 32 MB of file inputs in a request (Chat
    Completions and Responses alike: platform.openai.com/docs/guides/pdf-files), as Anthropic takes
    32 MB of request and Gemini 20 MB; the oldest past that is a note."""
    conv = _documents([(12_000_000, "application/pdf")] * 3)
    done = finalize_media(conv, reduced=frozenset(), load_bytes=None, provider=provider)
    sent = [m.parts[0].unsent is None for m in done.conversation.messages]  # type: ignore[union-attr]
    assert sent == [False] * (3 - kept) + [True] * kept
    if provider.startswith("openai"):
        [note] = done.unsent["e0"].values()
        assert "past OpenAI's 32 MB of file inputs in a request (12000000 bytes" in note


def test_openai_file_content_counts_the_documents_sent_as_files_only() -> None:
    """A Word file is a Responses file input, and a note in a Chat Completions request (which takes
    PDFs only): there it takes nothing of the 32 MB, and both PDFs before it are sent."""
    conv = _documents([(12_000_000, "application/pdf")] * 2 + [(
        12_000_000, "application/vnd.openxmlformats-officedocument.wordprocessingml.document")])
    chat = finalize_media(conv, reduced=frozenset(), load_bytes=None, provider="openai-chat")
    assert chat.unsent == {}
    responses = finalize_media(conv, reduced=frozenset(), load_bytes=None, provider="openai-responses")
    assert list(responses.unsent) == ["e0"]
