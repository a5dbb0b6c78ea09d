"""A ``data:`` URL is one whatever the case of its scheme and its ``;base64`` marker, and a
medium's type is shown to the model and in the manifest as the request names it.

Found by the hostile-input hunt: RFC 3986 section 3.1 makes a scheme case-insensitive (and the
WHATWG data: URL processor reads ``;base64`` so too), but every check spelled ``data:`` and
``;base64`` in lower case. ``DATA:image/png;BASE64,...`` was taken for a remote URL: it was not
stored as an artifact, and Anthropic got its whole payload as an image URL it cannot fetch.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from contextfold.api import Store, open_store
from contextfold.domain.event_values import base64_data_url, is_base64_data_url, is_data_url
from contextfold.domain.events import DocumentBlock, ImageBlock, RunStarted, TextBlock, UserInput
from contextfold.importers._common import media_block
from tests.integration.test_media_build import pdf, png

SPELLINGS = ["data:{t};base64,", "DATA:{t};BASE64,", "Data:{t};Base64,", "dAtA:{t};bAsE64,"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


@pytest.mark.parametrize("head", SPELLINGS)
def test_a_data_url_in_any_case_is_stored_as_its_bytes_and_sent_as_base64(store: Store, head: str) -> None:
    shot, spec = png((40, 30), 1), pdf(1)
    run = store.run("r")
    run.append(RunStarted(model="claude-sonnet-4-5"), UserInput(content=(
        TextBlock(text="look"),
        ImageBlock(url=head.format(t="image/png") + base64.b64encode(shot).decode(), media_type="image/png"),
        DocumentBlock(url=head.format(t="application/pdf") + base64.b64encode(spec).decode(),
                      media_type="application/pdf"))))
    image, document = [b for r in run.events() if isinstance(r.event, UserInput)
                       for b in r.event.content if not isinstance(b, TextBlock)]
    assert image.url is None and image.artifact is not None and image.artifact.size == len(shot)
    assert document.url is None and document.artifact is not None and document.artifact.size == len(spec)
    built = run.build("anthropic", window=50_000, reserve=1_000, record=False)
    parts = built.request["messages"][0]["content"]
    assert [p["source"]["type"] for p in parts if p["type"] in ("image", "document")] == ["base64", "base64"]


@pytest.mark.parametrize("head", SPELLINGS)
def test_the_data_url_helpers_read_any_case(head: str) -> None:
    url = head.format(t="image/png") + "iVBORw0KGgo="
    assert is_data_url(url) and base64_data_url(url) == ("image/png", "iVBORw0KGgo=")
    assert media_block("image", (), url=url).media_type == "image/png"  # type: ignore[union-attr]


def test_what_is_no_base64_data_url_stays_none() -> None:
    assert not is_data_url("https://data:x@example.com/a.png") and not is_data_url(None)
    assert base64_data_url("data:text/plain,hello") is None  # a data: URL, of text
    assert base64_data_url("data:text/plain;charset=utf-8;base64x,aGk=") is None
    assert base64_data_url("https://example.com/a;base64,x") is None
    assert base64_data_url("data:;base64,aGk=") == ("", "aGk=")  # no type declared


def test_the_manifest_names_a_medium_by_the_type_the_request_names(store: Store) -> None:
    """The log keeps a type as it came (``Image/PNG; name=a``); the manifest's media line and the
    runtime's repeat line name the type the build compares and names to the provider."""
    shot = base64.b64encode(png((40, 30), 2)).decode()
    url = "https://example.com/a.png"
    run = store.run("types")
    run.append(RunStarted(model="gpt-4o"), UserInput(content=(
        TextBlock(text="look"), ImageBlock(url=url, media_type="Image/PNG; name=a"))))
    run.append(UserInput(content=(TextBlock(text="again"),
                                  ImageBlock(url=url, media_type="Image/PNG; name=a"))))
    run.append(UserInput(content=(TextBlock(text="inline"),
                                  ImageBlock(url="data:IMAGE/PNG;base64," + shot, media_type="IMAGE/PNG"))))
    built = run.build("openai-chat", window=50_000, reserve=1_000, record=False)
    assert [m.media_type for f in built.manifest.fragments for m in f.media] == ["image/png"] * 3
    texts = [p["text"] for msg in built.request["messages"] if isinstance(msg["content"], list)
             for p in msg["content"] if p["type"] == "text"]
    assert any("(image/png) is the same as" in t for t in texts), texts


def test_a_summary_cites_a_medium_by_its_bare_type() -> None:
    """A compaction summary's media line showed ``type not shown`` for a type with parameters."""
    from contextfold.projections.summary_text import media_refs

    blocks = [ImageBlock(url="https://example.com/a.png", media_type="Image/PNG; name=a"),
              ImageBlock(url="DATA:image/png;base64,iVBORw0KGgo=", media_type="IMAGE/PNG")]
    assert media_refs(blocks, "event://r/2") == [("https://example.com/a.png", "image/png"),
                                                 ("event://r/2", "image/png")]


def test_a_document_whose_data_url_header_is_long_is_stored_as_its_bytes(store: Store) -> None:
    """The document path read ``;base64`` in the URL's first 200 characters only (not to copy a
    long payload): a header with a long ``name=`` parameter was taken for a text URL and kept
    inline, where an image's and the media rules (``base64_data_url``) read the whole header."""
    spec = pdf(1)
    head = f"data:application/pdf;name={'report-' * 40}.pdf;base64,"
    assert len(head) > 200
    run = store.run("r")
    run.append(RunStarted(model="claude-sonnet-4-5"), UserInput(content=(
        TextBlock(text="read"), DocumentBlock(url=head + base64.b64encode(spec).decode(),
                                              media_type="application/pdf"))))
    document = next(b for r in run.events() if isinstance(r.event, UserInput)
                    for b in r.event.content if isinstance(b, DocumentBlock))
    assert document.url is None and document.artifact is not None and document.artifact.size == len(spec)


@pytest.mark.parametrize("url", ["data:text/plain,hello", "data:application/pdf;base64x,aGk=",
                                 "https://example.com/a;base64,x", "data:application/pdf;base64", "x" * 300])
def test_is_base64_data_url_agrees_with_base64_data_url(url: str) -> None:
    assert is_base64_data_url(url) is (base64_data_url(url) is not None)
    assert is_base64_data_url(url + ",aGk=") is (base64_data_url(url + ",aGk=") is not None)
