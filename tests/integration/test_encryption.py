"""Encryption at rest on SQLite and PostgreSQL: right key, wrong key, no key, raw rows, rotation."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

import pytest

from contextfold.api import Store, open_store
from contextfold.domain.errors import CryptoError, IntegrityError
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.store.backends import ARTIFACTS_TABLE, EVENTS_TABLE
from contextfold.store.crypto import ENVELOPE_MAGIC, Keyring, generate_key, keyring_from

SECRET = "customer 4711 card 4242-4242-4242-4242 PLAINTEXT-MARKER"
BIG = ("log line PLAINTEXT-MARKER\n" * 5000)
LEAKS = (b"PLAINTEXT-MARKER", b"4242-4242-4242-4242", b"customer 4711", b"log line PLAINTEXT",
         b'"type":"user_input"', b'"type":"model_response"', b'"type":"tool_result"')
"""Plaintext the stored bytes must not hold: what ``_fill`` writes, its secrets and its event JSON.

Each is at least 12 bytes. Why: random bytes hold a given n-byte string
at one place with probability 2**-8n, so a short marker is found by chance. ``b"4242"`` was: the
envelope's key id is 16 hex digits (public, in the clear by design), and about one random key
in 5,000 has an id holding "4242" (``CHANCE_KEY``), failing the test though nothing leaked. At
12 bytes the chance in all the ciphertext a test writes (a few KB) is below 2**-80."""
CHANCE_KEY = base64.b64encode((162).to_bytes(32, "big")).decode()
"""A key whose id holds "4242" (``44ff90730264242b``): the case a short marker took for a leak."""


def _fill(url: str, key: str, run: str = "r1") -> None:
    with open_store(url, cipher_key=key) as store:
        r = store.run(run)
        r.append(UserInput(SECRET))
        r.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cat", arguments='{"f": "x"}'),)))
        r.append(ToolResult(call_id="c1", content=BIG))


def _raw(url: str) -> tuple[list[tuple[str, str, bytes]], list[bytes]]:
    with open_store(url) as store:
        b = store.events.backend
        events = [(str(r[0]), str(r[1]), bytes(r[2])) for r in
                  b.query(f"SELECT originator_id, topic, state FROM {b.table(EVENTS_TABLE)}")]
        blobs = [bytes(r[0]) for r in b.query(f"SELECT data FROM {b.table(ARTIFACTS_TABLE)}")]
    return events, blobs


def test_right_key_reads_and_verifies(store_url: str) -> None:
    key = generate_key()
    _fill(store_url, key)
    with open_store(store_url, cipher_key=key) as store:
        run = store.run("r1")
        events = run.events()
        assert events[0].event.text == SECRET  # type: ignore[union-attr]
        assert run.verify().ok
        result = events[2].event
        assert isinstance(result, ToolResult) and result.artifact is not None
        assert store.artifact(result.artifact).decode() == BIG
        assert [i.run_id for i in store.runs()] == ["r1"]
        built = run.build(provider="anthropic", window=200_000, reserve=8_000)
        assert "PLAINTEXT-MARKER" in str(built.request)


def test_a_writer_without_the_key_writes_nothing_in_plain_text_into_an_encrypted_store(
        store_url: str) -> None:
    """A worker whose key was missing from its environment was refused on the encrypted runs but
    wrote a new run's secrets, and its artifact, in plain text beside them."""
    _fill(store_url, generate_key())
    before = _raw(store_url)
    with open_store(store_url) as keyless:
        with pytest.raises(CryptoError, match="is written encrypted and no key is configured"):
            keyless.run("new").append(UserInput("api_key=sk-live-123 PLAINTEXT-MARKER"))
        with pytest.raises(CryptoError, match="is written encrypted"):
            keyless.events.put_artifact(b"PLAINTEXT-MARKER")
    assert _raw(store_url) == before


def test_a_keyless_import_and_a_store_that_saw_it_empty_are_refused_too(store_url: str) -> None:
    """The import path (``append_new_runs``) skipped the check and its plain row then let every
    later keyless writer through; and a keyless store that first saw the store empty kept that
    answer while another process started writing encrypted."""
    key = generate_key()
    with open_store(store_url) as keyless:  # the store is empty: nothing to refuse yet
        keyless.run("first").append(UserInput("plain, before any key"))
        _fill(store_url, key, run="enc")
        with pytest.raises(CryptoError, match="is written encrypted"):
            keyless.events.append_new_runs([("imported", [UserInput("PLAINTEXT-MARKER")])])
    with open_store(store_url) as fresh, pytest.raises(CryptoError, match="is written encrypted"):
        fresh.run("later").append(UserInput("PLAINTEXT-MARKER"))
    assert b"PLAINTEXT-MARKER" not in b"".join(state for _, _, state in _raw(store_url)[0])


def _damaged_artifact(store_url: str) -> str:
    """A filled encrypted store whose one artifact has a flipped ciphertext byte; its key."""
    key = generate_key()
    _fill(store_url, key)
    with open_store(store_url, cipher_key=key) as store:
        b = store.events.backend
        (digest, data), = b.query(f"SELECT hash, data FROM {b.table(ARTIFACTS_TABLE)}")
        damaged = bytearray(bytes(data))
        damaged[-5] ^= 1
        b.execute(f"UPDATE {b.table(ARTIFACTS_TABLE)} SET data = {b.placeholder} WHERE hash = "
                  f"{b.placeholder}", (bytes(damaged), digest))
    return key


def test_verify_names_a_damaged_encrypted_artifact(store_url: str) -> None:
    """Damaged ciphertext failed to decrypt and verify raised CryptoError, naming no event."""
    key = _damaged_artifact(store_url)
    with open_store(store_url, cipher_key=key) as store:
        report = store.run("r1").verify()
    assert not report.ok and report.first_bad_position == 3 and "cannot be read back" in report.reason


def test_audit_of_a_damaged_encrypted_artifact_is_an_integrity_failure(
        store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """With the right key, a changed ciphertext fails its tag: ``audit`` exited 2 with a
    CryptoError ("wrong key or damaged data") where a changed plain artifact exits 3."""
    from contextfold.cli import main

    key = _damaged_artifact(store_url)
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEY", key)
    capsys.readouterr()
    assert main(["audit", "r1", "--store", store_url]) == 3
    err = capsys.readouterr().err
    assert err.startswith("INTEGRITY FAILED: run 'r1'") and "authentication check" in err, err


@pytest.mark.parametrize("key", ["random", "chance"])
def test_ciphertext_is_what_the_database_holds(store_url: str, key: str) -> None:
    """Every row and artifact is an envelope holding none of the plaintext, whatever the key:
    ``chance`` is a key whose id (in the clear) holds "4242", which a 4-byte marker took for the
    card number leaking (about one run in 5,000 with random keys)."""
    cipher_key = generate_key() if key == "random" else CHANCE_KEY
    assert key == "random" or "4242" in Keyring(CHANCE_KEY).current_id
    assert all(len(leak) >= 12 for leak in LEAKS)
    _fill(store_url, cipher_key)
    events, blobs = _raw(store_url)
    assert [(run, topic) for run, topic, _ in events] == [
        ("r1", "user_input@1"), ("r1", "model_response@1"), ("r1", "tool_result@1")]  # queryable
    assert blobs
    for state in [s for _, _, s in events] + blobs:
        assert re.match(rb"cfenc1:[0-9a-f]{16}:", state) and state.startswith(ENVELOPE_MAGIC)
        assert [leak for leak in LEAKS if leak in state] == []
    with open_store(store_url, cipher_key=cipher_key) as store:  # and the key reads it all back
        assert store.run("r1").events()[0].event.text == SECRET  # type: ignore[union-attr]


@pytest.mark.parametrize("how", ["no key", "wrong key", "corrupted row"])
def test_wrong_or_missing_key_is_a_crypto_error_and_damage_an_integrity_error_never_garbage(
        store_url: str, how: str) -> None:
    key = generate_key()
    _fill(store_url, key)
    if how == "corrupted row":
        with open_store(store_url) as store:
            b = store.events.backend
            p = b.placeholder
            [(state,)] = b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} WHERE originator_version = 2")
            damaged = bytes(state)[:-1] + bytes([bytes(state)[-1] ^ 1])
            b.execute(f"UPDATE {b.table(EVENTS_TABLE)} SET state = {p} WHERE originator_version = 2",
                      (damaged,))
    opener: Callable[[], Store] = {"no key": lambda: open_store(store_url, cipher_key=None),
              "wrong key": lambda: open_store(store_url, cipher_key=generate_key()),
              "corrupted row": lambda: open_store(store_url, cipher_key=key)}[how]
    with opener() as store:
        run = store.run("r1")
        if how == "corrupted row":  # the right key (its id is its hash): the bytes were changed
            with pytest.raises(IntegrityError, match=r"position 2: data encrypted with key \w+ fails its "
                               r"authentication check: the stored bytes were changed or damaged"):
                run.events()
            report = run.verify()  # named where, as a changed plain row is
            assert not report.ok and report.first_bad_position == 2 and "authentication" in report.reason
            with pytest.raises(IntegrityError):
                run.build()
            assert store.run("r1").version == 3
            return
        with pytest.raises(CryptoError):
            run.events()
        with pytest.raises(CryptoError):
            run.verify()
        with pytest.raises(CryptoError):
            run.build()
        with pytest.raises(CryptoError):
            store.artifact(store.events.backend.query(
                f"SELECT hash FROM {store.events.backend.table(ARTIFACTS_TABLE)}")[0][0])
        assert store.run("r1").version == 3  # positions and run ids stay readable without the key


def test_rotation_old_rows_readable_new_rows_use_the_new_key(store_url: str) -> None:
    old, new = generate_key(), generate_key()
    _fill(store_url, old)
    with open_store(store_url, cipher_key=new, old_cipher_keys=[old]) as store:
        store.run("r1").append(UserInput("after rotation"))
        texts = [e.event.text for e in store.run("r1").events() if isinstance(e.event, UserInput)]
        assert texts == [SECRET, "after rotation"]
        assert store.run("r1").verify().ok
    events, _ = _raw(store_url)
    ids = [state[len(ENVELOPE_MAGIC):len(ENVELOPE_MAGIC) + 16].decode() for _, _, state in events]
    ring_old, ring_new = Keyring(old), Keyring(new)
    assert ids == [ring_old.current_id] * 3 + [ring_new.current_id]
    retired = open_store(store_url, cipher_key=new)  # old key dropped from the keyring
    try:
        with pytest.raises(CryptoError, match="not in the keyring"):
            retired.run("r1").events()  # old rows unreadable, typed
    finally:
        retired.close()


def test_plain_store_keeps_working_and_can_switch_encryption_on(store_url: str) -> None:
    with open_store(store_url, cipher_key=None) as store:
        store.run("r1").append(UserInput("plain"))
    events, _ = _raw(store_url)
    assert not events[0][2].startswith(ENVELOPE_MAGIC) and b"plain" in events[0][2]
    key = generate_key()
    with open_store(store_url, cipher_key=key) as store:
        store.run("r1").append(UserInput("secret now"))
        assert [e.event.text for e in store.run("r1").events()] == ["plain", "secret now"]  # type: ignore[union-attr]
        assert store.run("r1").verify().ok


def test_an_artifact_whose_bytes_begin_like_an_envelope_is_read_back_as_stored(store_url: str) -> None:
    """A tool may print anything: a plain store's artifact beginning with ``cfenc1:`` was taken
    for an envelope and never read back (a CryptoError without a key, a failed decryption with
    one)."""
    odd = ENVELOPE_MAGIC + b"0123456789abcdef:" + bytes(range(256)) * 8
    text = ENVELOPE_MAGIC + b" just text a tool printed"
    with open_store(store_url, cipher_key=None) as store:
        refs = [store.events.put_artifact(odd), store.events.put_artifact(text, "text/plain")]
        assert [store.artifact(ref) for ref in refs] == [odd, text]
    with open_store(store_url, cipher_key=generate_key()) as keyed:  # encryption switched on later
        assert [keyed.artifact(ref) for ref in refs] == [odd, text]
        sealed = keyed.events.put_artifact(odd + b"sealed")  # and the envelopes it writes still open
        assert keyed.artifact(sealed) == odd + b"sealed"


def test_keyring_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = generate_key(), generate_key()
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEY", a)
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEYS_OLD", b)
    ring = keyring_from()
    assert ring is not None and ring.current_id == Keyring(a).current_id and len(ring.key_ids) == 2
    monkeypatch.delenv("CONTEXTFOLD_CIPHER_KEY")
    with pytest.raises(CryptoError, match=r"^CONTEXTFOLD_CIPHER_KEYS_OLD is set without CONTEXTFOLD_CIPHER_"):
        keyring_from()  # as open_store(old_cipher_keys=...) without cipher_key: never silently plain
    with pytest.raises(CryptoError, match=r"^old keys given without a current key"):
        keyring_from(None, [b])
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEYS_OLD", " , ")  # no key in it: as if unset
    assert keyring_from() is None
    monkeypatch.delenv("CONTEXTFOLD_CIPHER_KEYS_OLD")
    assert keyring_from() is None
    with pytest.raises(CryptoError):
        Keyring("not base64!")
    with pytest.raises(CryptoError):
        Keyring("c2hvcnQ=")  # 5 bytes
    # a key that is no text (a caller's slip) is the same typed error, not a raw AttributeError
    for slip in (123, None):
        with pytest.raises(CryptoError, match=rf"must be base64 text .*not {type(slip).__name__}"):
            Keyring(a, [slip])  # type: ignore[list-item]
    with pytest.raises(CryptoError, match="cipher_key must be base64 text"):
        keyring_from(123)  # type: ignore[arg-type]


def test_a_bad_key_names_which_key_and_a_key_file_newline_is_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a good current key and a bad old one, "cipher key is not valid base64" sent the user to
    the wrong variable; a key read from a file (its trailing newline) was refused the same way."""
    a, b = generate_key(), generate_key()
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEY", a + "\n")
    monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEYS_OLD", f" {b}\n")
    ring = keyring_from()
    assert ring is not None and ring.current_id == Keyring(a).current_id and len(ring.key_ids) == 2
    for current, old, message in (("garbage!", b, "CONTEXTFOLD_CIPHER_KEY is not valid base64"),
                                  (a, f"{b},garbage!",
                                   "CONTEXTFOLD_CIPHER_KEYS_OLD entry 2 is not valid base64"),
                                  (a, "c2hvcnQ=", "CONTEXTFOLD_CIPHER_KEYS_OLD entry decodes to 5 bytes")):
        monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEY", current)
        monkeypatch.setenv("CONTEXTFOLD_CIPHER_KEYS_OLD", old)
        with pytest.raises(CryptoError, match=f"^{message}"):
            keyring_from()
    with pytest.raises(CryptoError, match=r"^old_cipher_keys entry 2 is not valid base64"):
        keyring_from(a, [b, "garbage!"])
    with pytest.raises(CryptoError, match=r"^cipher_key decodes to 5 bytes"):
        keyring_from("c2hvcnQ=")


def test_audit_report_of_an_encrypted_run_shows_no_content_unless_asked(store_url: str) -> None:
    from contextfold.audit.data import audit_run
    from contextfold.audit.report import render_report
    from contextfold.cli_demo import sample_events

    key = generate_key()
    secret_line = "db password is hunter2-Zq9!x and the customer is ACME-4471"
    with open_store(store_url, cipher_key=key) as store:
        run = store.run("enc-audit")
        run.append(sample_events()[:-1])
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="q1", name="read_file", arguments="{}"),)),
                   ToolResult(call_id="q1", content=secret_line, origin="workspace"),
                   UserInput("wrap up"))
        run.build("anthropic", window=16_000, reserve=2_000)
        html = render_report(audit_run(run))
        manifests = [r.event.manifest for r in run.events() if r.event.type == "context_built"]
    contents = [secret_line, "Two rounding failures", "banker's rounding", "wrap up",
                "The invoice totals are off by a cent"]
    for text in contents:
        assert text not in html
        assert all(text not in str(m) for m in manifests)
    assert "enc-audit" in html and "tool_result" in html  # refs, kinds and reasons are there
    rows, _ = _raw(store_url)
    assert all(secret_line.encode() not in state and b"hunter2-Zq9!x" not in state for _, _, state in rows)


def test_large_events_are_compressed_inside_the_envelope(store_url: str) -> None:
    """Compression comes before encryption (ciphertext does not compress); the marker stays hidden."""
    from contextfold.store.compression import COMPRESSED_MAGIC
    from contextfold.store.crypto import open_envelope

    key = generate_key()
    long_input = "".join(f"PLAINTEXT-MARKER note {i}: the same words again\n" for i in range(3000))
    with open_store(store_url, cipher_key=key) as store:
        store.run("r1").append(UserInput(long_input))
    events, _ = _raw(store_url)
    [(_, _, state)] = events
    assert state.startswith(ENVELOPE_MAGIC) and b"PLAINTEXT-MARKER" not in state
    assert len(state) * 5 < len(long_input)
    assert open_envelope(state, keyring_from(key), "test").startswith(COMPRESSED_MAGIC)
    with open_store(store_url, cipher_key=key) as store:
        run = store.run("r1")
        assert [e.event for e in run.events()] == [UserInput(long_input)]
        assert run.verify().ok


def test_delta_frames_are_inside_the_envelope_too(store_url: str) -> None:
    """A run's later large events are deltas of its keyframe (``store.deltas``), encrypted as
    any row: the reader opens the keyframe's envelope to read the delta's."""
    from contextfold.store.crypto import open_envelope
    from contextfold.store.deltas import DELTA_MAGIC

    key = generate_key()
    texts = ["".join(f"PLAINTEXT-MARKER note {i}: the same words again\n" for i in range(3000)) + end
             for end in ("first", "second", "third")]
    with open_store(store_url, cipher_key=key) as store:
        for text in texts:
            store.run("r1").append(UserInput(text))
    events, _ = _raw(store_url)
    assert all(state.startswith(ENVELOPE_MAGIC) and b"PLAINTEXT-MARKER" not in state
               for _, _, state in events)
    assert [open_envelope(state, keyring_from(key), "test")[:7] for _, _, state in events[1:]] == [
        DELTA_MAGIC + b"1:"] * 2
    with open_store(store_url, cipher_key=key) as store:
        run = store.run("r1")
        assert [e.event for e in run.events()] == [UserInput(t) for t in texts]
        assert run.verify().ok
