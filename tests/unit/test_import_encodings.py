"""A trace saved as UTF-16 or UTF-32 (with or without a byte order mark) imports as the same
trace saved as UTF-8.

Found by the hostile-input hunt: Windows tools write UTF-16 by default (PowerShell 5's ``>`` and
``Out-File``, Notepad's "Unicode"), and such a file was refused as ``invalid UTF-8 byte 0xff at
byte 0``, which names neither the encoding nor the fix. RFC 8259 asks for UTF-8 between systems
but a mark (or the zero bytes of ASCII in a wide encoding, RFC 4627 section 3) says which one a
file is without guessing, and Python's own ``json.loads`` of bytes reads all five.
"""

from __future__ import annotations

import codecs
import json

import pytest

from contextfold.domain.errors import ImportFormatError
from contextfold.importers import parse
from contextfold.importers._json import load

HISTORY = [
    {"role": "user", "content": "résumé \U0001F600"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a\nb"},
    {"role": "assistant", "content": "done"},
]
TEXT = json.dumps(HISTORY, indent=1, ensure_ascii=False)

ENCODINGS = [
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
    (b"", "utf-16-le"), (b"", "utf-16-be"), (b"", "utf-32-le"), (b"", "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
]


@pytest.mark.parametrize(("bom", "encoding"), ENCODINGS)
def test_a_wide_encoding_imports_as_its_utf8_twin(bom: bytes, encoding: str) -> None:
    assert parse(bom + TEXT.encode(encoding), format="openai-chat") == parse(
        TEXT.encode(), format="openai-chat")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_jsonl_in_a_wide_encoding_keeps_its_line_numbers(encoding: str) -> None:
    doc = load(('{"a": 1}\n\n{"b": 2}\n').encode(encoding), "t.jsonl")
    assert doc.value == [{"a": 1}, {"b": 2}] and doc.lines == (1, 3)


def test_a_broken_utf16_file_is_refused_naming_its_encoding_and_the_fix() -> None:
    data = codecs.BOM_UTF16_LE + '[\n{"role": "user",\n "content": "x"}]'.encode("utf-16-le")
    broken = data[:20] + b"\x00\xdc" + data[20:]  # a low surrogate with no high one before it
    with pytest.raises(ImportFormatError) as e:
        load(broken, "win.json")
    assert e.value.location == "win.json:2"
    assert "UTF-16" in e.value.reason and "byte order mark" in e.value.reason
    assert "UTF-8" in e.value.reason  # the fix: save it as UTF-8


def test_bytes_that_are_not_utf8_still_name_the_byte() -> None:
    with pytest.raises(ImportFormatError) as e:
        load(b'{"a":\n "\xff"}', "t.json")
    assert e.value.location == "t.json:2" and "invalid UTF-8 byte 0xff" in e.value.reason
