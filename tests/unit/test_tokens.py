"""Token counting: offline encodings, cache by content hash, special-token text."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.domain.errors import IntegrityError
from contextfold.projections import offline_encodings, tokens
from contextfold.projections.offline_encodings import (
    CL100K_OFFLINE_SHA256,
    encoding_available,
    encoding_for_model,
)
from contextfold.projections.tokens import TokenCounter, content_hash, get_counter


def test_content_hash_is_blake3_of_utf8() -> None:
    import blake3

    assert content_hash("héllo") == blake3.blake3("héllo".encode()).hexdigest()
    assert content_hash(b"abc") == content_hash("abc")
    assert len(content_hash("")) == 64


def test_counts_match_tiktoken_cl100k() -> None:
    counter = TokenCounter("cl100k_base")
    text = "The quick brown fox jumps over the lazy dog. 東京 🙂"
    # The offline file is the official cl100k_base: same ranks, same counts.
    offline = offline_encodings.load_encoding("cl100k_base")
    assert counter.count(text) == len(offline.encode_ordinary(text))
    assert counter.encoding_name == "cl100k_base"
    assert counter.count("") == 0


def test_special_token_strings_are_counted_as_text() -> None:
    counter = TokenCounter()
    text = "before <|endoftext|> middle <|fim_prefix|><|endofprompt|> after"
    n = counter.count(text)
    assert n > 5
    with pytest.raises(ValueError):  # what plain encode() would do
        offline_encodings.load_encoding("cl100k_base").encode(text)


def test_identical_content_is_tokenized_once() -> None:
    counter = TokenCounter()
    texts = ["alpha beta", "gamma", "alpha beta", "gamma", "alpha beta", "delta"]
    counts = [counter.count(t) for t in texts]
    assert counts[0] == counts[2] == counts[4]
    stats = counter.stats()
    assert stats.calls == 3 == counter.calls
    assert stats.hits == 3
    assert stats.size == 3
    counter.clear()
    assert counter.stats().calls == 0 and counter.stats().size == 0



@pytest.mark.parametrize("trailing", ["", "\n"])
def test_a_very_long_text_counted_by_threads_is_counted_as_one_thread_counts_it(
        monkeypatch: pytest.MonkeyPatch, trailing: str) -> None:
    """Past ``_PARALLEL_TEXT`` a multi-line text's chunks are counted by several threads: the
    total is tiktoken's count of the whole text, and the chunks (what truncation reads later)
    are the ones a single thread makes, whatever the number of threads."""
    lines = [f"{i:06d} INFO step {'ok' if i % 7 else 'failed: é 東京 🙂'} {'x' * (i % 90)}"
             for i in range(25_000)]
    lines[1234] = "    indented continuation"
    lines[5000] = ""
    text = "\n".join(lines) + trailing
    assert len(text) >= tokens._PARALLEL_TEXT
    whole = len(offline_encodings.load_encoding("cl100k_base").encode_ordinary(text))
    results = {}
    for workers in (1, 2, 3, 8):
        monkeypatch.setattr(tokens, "_workers", lambda n=workers: n)
        counter = TokenCounter()
        assert counter.count(text) == whole
        blocks = counter.known_blocks(text)
        assert blocks is not None
        results[workers] = (list(blocks[0]), list(blocks[1]))
    assert results[2] == results[3] == results[8] == results[1]
    assert len(results[1][0]) > 1000

    class NoThreads:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(tokens, "ThreadPoolExecutor", NoThreads)  # counted on this thread instead
    counter = TokenCounter()
    assert counter.count(text) == whole
    blocks = counter.known_blocks(text)
    assert blocks is not None and (list(blocks[0]), list(blocks[1])) == results[1]

def test_shared_counter_per_encoding() -> None:
    assert get_counter("cl100k_base") is get_counter("cl100k_base")
    assert get_counter(None) is get_counter("cl100k_base")
    # an encoding that cannot be loaded offline falls back and says so
    c = get_counter("p50k_base")
    assert c.encoding_name == "cl100k_base"


def test_encoding_for_model_offline_choice() -> None:
    assert encoding_for_model(None) == "cl100k_base"
    assert encoding_for_model("no-such-model-xyz") == "cl100k_base"
    assert encoding_for_model("gpt-4") == "cl100k_base"
    expected = "o200k_base" if encoding_available("o200k_base") else "cl100k_base"
    assert encoding_for_model("gpt-4o") == expected
    # text-davinci-003 maps to p50k_base, which we never download
    assert encoding_for_model("text-davinci-003") == "cl100k_base"


def test_o200k_used_only_from_verified_cache(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    offline_encodings._cached_file_ok.cache_clear()
    try:
        assert not encoding_available("o200k_base")
        # a cached file with the wrong content is not trusted (tiktoken would re-download)
        url = offline_encodings.REMOTE_FILES["o200k_base"][0]
        import hashlib

        (tmp_path / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"corrupt")
        offline_encodings._cached_file_ok.cache_clear()
        assert not encoding_available("o200k_base")
        assert encoding_for_model("gpt-4o") == "cl100k_base"
    finally:
        offline_encodings._cached_file_ok.cache_clear()


def test_offline_file_hash_is_verified(monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    real = Path(offline_encodings._offline_module()._get_data_path("cl100k_base.tiktoken"))
    import hashlib

    assert hashlib.sha256(real.read_bytes()).hexdigest() == CL100K_OFFLINE_SHA256
    bad = tmp_path / "cl100k_base.tiktoken"
    bad.write_bytes(b"tampered")

    class FakeModule:
        @staticmethod
        def _get_data_path(name: str) -> str:
            return str(bad)

    monkeypatch.setattr(offline_encodings, "_offline_module", lambda: FakeModule)
    offline_encodings._offline_cl100k_path.cache_clear()
    try:
        with pytest.raises(IntegrityError, match="sha256"):
            offline_encodings._offline_cl100k_path()
    finally:
        monkeypatch.undo()
        offline_encodings._offline_cl100k_path.cache_clear()
        offline_encodings._offline_cl100k_path()


def test_tiktoken_is_not_asked_to_download(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting with the default encoding never reaches tiktoken's network loader."""
    import tiktoken.load

    real_read = tiktoken.load.read_file

    def no_network(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise AssertionError(f"network access attempted: {blobpath}")
        return real_read(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", no_network, raising=True)
    counter = get_counter(encoding_for_model("gpt-3.5-turbo"))
    assert counter.count("offline only") > 0
    assert isinstance(tiktoken.__version__, str)
