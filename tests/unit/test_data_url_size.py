"""A ``data:`` URL's medium is sized by the bytes it decodes to, base64 or not.

Why: the media rules read a provider's size limit (``media_plan.inline_size``) and an audio
clip's longest length (``media_cost``) from those bytes, and both took every payload for base64
(three bytes per four characters): a payload without ``;base64`` (RFC 2397) was counted a quarter
short as plain text, so a medium over a provider's limit could pass as under it, and 2.25 times
over as percent escapes. ``inline_size`` also counted a base64 payload's padding as bytes.
"""

from __future__ import annotations

import base64

from contextfold.domain.event_values import DocumentBlock, ImageBlock, data_url_size
from contextfold.projections.media_cost import _media_size
from contextfold.projections.media_plan import inline_size


def test_a_base64_payload_is_its_decoded_bytes_padding_left_out() -> None:
    for n in (0, 1, 2, 3, 4, 5, 1000, 1001, 1002):
        url = "data:image/png;base64," + base64.b64encode(b"x" * n).decode()
        assert data_url_size(url) == n
        assert data_url_size(url.replace("data:", "DATA:").replace(";base64", ";BASE64")) == n


def test_a_payload_without_base64_is_its_percent_decoded_bytes() -> None:
    assert data_url_size("data:image/svg+xml,%3Csvg%3E" + "a" * 400) == len("<svg>") + 400
    assert data_url_size("data:,hello") == 5
    assert data_url_size("data:text/plain;charset=utf-8,%E2%82%AC") == 3  # the euro sign's UTF-8 bytes
    assert data_url_size("https://example.com/a.png") is None


def test_the_media_rules_size_a_plain_data_url_by_its_bytes() -> None:
    url = "data:image/svg+xml," + "%20" * 300  # 300 bytes, 900 characters
    assert inline_size(ImageBlock(url=url, media_type="image/svg+xml")) == (True, 300)
    assert _media_size(DocumentBlock(type="document", url="data:audio/wav," + "a" * 400,
                                     media_type="audio/wav")) == 400
    padded = "data:image/png;base64," + base64.b64encode(b"y" * 1001).decode()
    assert inline_size(ImageBlock(url=padded, media_type="image/png")) == (True, 1001)
