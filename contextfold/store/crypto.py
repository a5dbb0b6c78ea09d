"""Encryption at rest: AES-GCM envelopes for event payloads and artifacts, with key rotation.

Opt-in. Without a key the store writes exactly what it always wrote (64 hex
chars of chain hash + canonical JSON); with a key every event ``state`` and
every artifact ``data`` becomes an envelope::

    b"cfenc1:" + key_id (16 hex) + b":" + nonce (12) + tag (16) + ciphertext

produced by eventsourcing's ``AESCipher`` (``eventsourcing.cryptography``,
AES-GCM on the ``cryptography`` package). Why these choices:

- **The chain hash goes inside the ciphertext.** The chain is computed over
  the plaintext canonical JSON (so a log verifies the same whether or not it
  is encrypted, and re-encrypting under a new key never changes a hash).
  Left in the clear, a chain hash would let anyone with database access
  confirm a guessed plaintext offline; inside, ``verify`` needs the key,
  which it needs anyway to re-hash the plaintext.
- **Run ids and topics (``type@v``) stay in the clear**, in eventsourcing's
  own columns, so runs can be listed, counted and filtered by event type
  without the key. Artifact rows keep their blake3 hash (of the plaintext,
  it is the content address events refer to) and size in the clear: equal
  artifacts are stored once, at the price of revealing that two are equal.
- **A wrong or missing key is a typed error, never garbage.** GCM's tag
  authenticates every byte; a key id that is not in the keyring, a missing
  key or a damaged envelope raise :class:`CryptoError`, and a failed tag
  under the right key (the key id is the key's hash) raises
  :class:`IntegrityError` (the bytes were changed), before anything is
  parsed, so a read never returns half a run.
- **Rotation by key id.** The keyring has one current key (all new writes)
  and any number of old keys (read only). ``key_id`` is a blake3 digest of
  the key under a fixed label: it names the key without revealing it.
  Rotating: put the old key in ``CONTEXTFOLD_CIPHER_KEYS_OLD``, the new one in
  ``CONTEXTFOLD_CIPHER_KEY``; old rows stay readable, new rows use the new
  key. Rows are immutable (the log is append-only), so retiring an old key
  means copying its runs into a new store (``contextfold`` export/import),
  never rewriting rows in place.
- Plain rows stay readable when a key is configured, so an existing store
  can switch encryption on without a migration; the reverse (an encrypted
  row read without a key) is a :class:`CryptoError`.

Environment: ``CONTEXTFOLD_CIPHER_KEY`` (base64 of 16, 24 or 32 random
bytes; make one with :func:`generate_key`) and ``CONTEXTFOLD_CIPHER_KEYS_OLD``
(comma-separated, same format).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence

import blake3

from contextfold.domain.errors import CryptoError, IntegrityError

__all__ = [
    "ENVELOPE_MAGIC",
    "ENV_KEY",
    "ENV_OLD_KEYS",
    "Keyring",
    "generate_key",
    "is_encrypted",
    "keyring_from",
    "open_envelope",
]

ENVELOPE_MAGIC = b"cfenc1:"
ENV_KEY = "CONTEXTFOLD_CIPHER_KEY"
ENV_OLD_KEYS = "CONTEXTFOLD_CIPHER_KEYS_OLD"
_KEY_ID_LEN = 16
_HEADER_LEN = len(ENVELOPE_MAGIC) + _KEY_ID_LEN + 1


def generate_key(num_bytes: int = 32) -> str:
    """A fresh random AES key, base64-encoded (the format the environment takes)."""
    if num_bytes not in (16, 24, 32):
        raise CryptoError(f"AES keys are 16, 24 or 32 bytes, not {num_bytes}")
    return base64.b64encode(os.urandom(num_bytes)).decode("ascii")


def is_encrypted(data: bytes) -> bool:
    return data[:len(ENVELOPE_MAGIC)] == ENVELOPE_MAGIC


def _key_bytes(key: str | bytes, what: str = "cipher key") -> bytes:
    """The AES key ``key`` (raw bytes, or base64 around which whitespace is ignored: a key read
    from a file ends in a newline). ``what`` names it in errors (never its value): which of
    several keys, or which variable, is wrong."""
    if isinstance(key, bytes) and len(key) in (16, 24, 32):
        return key
    if not isinstance(key, str | bytes):  # (a number, None in a list: a caller's slip)
        raise CryptoError(f"{what} must be base64 text or 16, 24 or 32 raw bytes, "
                          f"not {type(key).__name__}")
    try:
        raw = base64.b64decode(key.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CryptoError(f"{what} is not valid base64") from exc
    if len(raw) not in (16, 24, 32):
        raise CryptoError(f"{what} decodes to {len(raw)} bytes; AES needs 16, 24 or 32")
    return raw


def _key_id(key: bytes) -> str:
    return blake3.blake3(b"contextfold key id\x00" + key).hexdigest()[:_KEY_ID_LEN]


class Keyring:
    """The current key (encrypts) and old keys (decrypt only), each behind eventsourcing's AESCipher."""

    def __init__(self, current: str | bytes, old: Sequence[str | bytes] = (), *,
                 labels: tuple[str, str] = ("cipher key", "old cipher key")) -> None:
        """``labels``: what errors call the current key and the old ones (e.g. the variables)."""
        try:
            from eventsourcing.cryptography import AESCipher
            from eventsourcing.utils import Environment
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise CryptoError(
                "encryption needs the 'cryptography' package: pip install 'contextfold[encryption]'"
            ) from exc
        self._ciphers: dict[str, AESCipher] = {}
        keys = [_key_bytes(current, labels[0]),
                *(_key_bytes(k, f"{labels[1]} {i}" if len(old) > 1 else labels[1])
                  for i, k in enumerate(old, start=1))]
        for key in keys:
            env = Environment(env={AESCipher.CIPHER_KEY: base64.b64encode(key).decode("ascii")})
            self._ciphers.setdefault(_key_id(key), AESCipher(env))
        self.current_id = _key_id(keys[0])

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._ciphers)

    def encrypt(self, plaintext: bytes) -> bytes:
        body = self._ciphers[self.current_id].encrypt(plaintext)
        return ENVELOPE_MAGIC + self.current_id.encode("ascii") + b":" + body

    def decrypt(self, data: bytes) -> bytes:
        if not is_encrypted(data) or data[_HEADER_LEN - 1:_HEADER_LEN] != b":":
            raise CryptoError("not a contextfold cipher envelope")
        key_id = data[len(ENVELOPE_MAGIC):_HEADER_LEN - 1].decode("ascii", "replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CryptoError(
                f"data is encrypted with key {key_id}, which is not in the keyring "
                f"(have {', '.join(self._ciphers)}): set the right {ENV_KEY} or add the old key "
                f"to {ENV_OLD_KEYS}")
        try:
            return cipher.decrypt(data[_HEADER_LEN:])
        except ValueError as exc:
            # The key id is a hash of the key: the right key read bytes that fail their
            # authentication tag, so the stored data was changed or damaged (an integrity
            # failure, exit 3, as a changed plain row is), not a key problem to fix by config.
            raise IntegrityError(f"data encrypted with key {key_id} fails its authentication check: the "
                                 "stored bytes were changed or damaged") from exc


def keyring_from(cipher_key: str | bytes | None = None, old_keys: Sequence[str | bytes] = (),
                 env: Mapping[str, str] | None = None) -> Keyring | None:
    """The keyring from explicit keys, else from the environment, else None (no encryption).

    Old keys without a current key are refused, whether passed or set in ``$CONTEXTFOLD_CIPHER_KEYS_OLD``:
    the variable alone was ignored, so a rotation that dropped the new key by mistake opened the store
    unencrypted (new rows written in plain text, old encrypted rows unreadable) and said nothing."""
    environ = os.environ if env is None else env
    current = cipher_key if cipher_key is not None else environ.get(ENV_KEY) or None
    old = list(old_keys) or [k.strip() for k in environ.get(ENV_OLD_KEYS, "").split(",") if k.strip()]
    if current is None:
        if old_keys:
            raise CryptoError("old keys given without a current key")
        if old:
            raise CryptoError(f"{ENV_OLD_KEYS} is set without {ENV_KEY}: old keys only decrypt; set "
                              f"{ENV_KEY} to the current key (or unset {ENV_OLD_KEYS})")
        return None
    labels = ("cipher_key" if cipher_key is not None else ENV_KEY,
              "old_cipher_keys entry" if old_keys else f"{ENV_OLD_KEYS} entry")
    return Keyring(current, old, labels=labels)


def open_envelope(data: bytes, keyring: Keyring | None, what: str) -> bytes:
    """``data`` as plaintext: decrypted when it is an envelope, unchanged when it is plain."""
    if not is_encrypted(data):
        return data
    if keyring is None:
        raise CryptoError(f"{what} is encrypted and no key is configured (set {ENV_KEY})")
    try:
        return keyring.decrypt(data)
    except IntegrityError as exc:  # named: a run's row, an artifact
        raise IntegrityError(f"{what}: {exc}") from exc.__cause__

