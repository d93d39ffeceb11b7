"""The age v1 file format (https://age-encryption.org/v1), binary form, streaming both ways.

Recipients are X25519 keys (``age1...``) or one passphrase (scrypt). Nothing holds a whole file:
the payload is STREAM-encrypted in 64 KiB chunks and read/written a buffer at a time. Keys and
passphrases never appear in an error message.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.hmac import HMAC
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from engine.copy import TransformError, chunk_stream, read_chunks
from engine.spec.agekeys import (
    DEFAULT_WORK_FACTOR,
    MAX_WORK_FACTOR,
    generate_identity,
    parse_identity,
    parse_recipient,
)

__all__ = [
    "decrypt_chunks",
    "decrypting",
    "encrypt_chunks",
    "encrypting",
    "generate_identity",
    "parse_identity",
    "parse_recipient",
]

INTRO = b"age-encryption.org/v1\n"
_ARMOR = b"-----BEGIN AGE ENCRYPTED FILE-----"
_X25519_INFO = b"age-encryption.org/v1/X25519"
_SCRYPT_SALT = b"age-encryption.org/v1/scrypt"
_CHUNK = 64 * 1024
_TAG = 16
_SEALED_CHUNK = _CHUNK + _TAG
_ZERO_NONCE = bytes(12)
_MAX_HEADER = 1 << 20
# -- primitives ---------------------------------------------------------------------------------


def _hkdf(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(ikm)


def _mac(file_key: bytes, header: bytes) -> bytes:
    mac = HMAC(_hkdf(file_key, b"", b"header"), hashes.SHA256())
    mac.update(header)
    return mac.finalize()


def _scrypt_key(passphrase: str, salt: bytes, work_factor: int) -> bytes:
    kdf = Scrypt(salt=_SCRYPT_SALT + salt, length=32, n=1 << work_factor, r=8, p=1)
    return kdf.derive(passphrase.encode())


def _b64(data: bytes) -> bytes:
    return base64.b64encode(data).rstrip(b"=")


def _unb64(text: bytes, what: str) -> bytes:
    """Canonical unpadded base64 (as age requires), else a TransformError naming ``what``."""
    try:
        data = base64.b64decode(text + b"=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        data = None
    if data is None or b"=" in text or _b64(data) != text:
        raise TransformError(f"malformed age header: {what} is not canonical base64")
    return data


def _nonce(counter: int, last: bool) -> bytes:
    return counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


# -- encryption ---------------------------------------------------------------------------------


def encrypting(
    stream: BinaryIO,
    recipients: Sequence[str],
    passphrase: str | None = None,
    *,
    work_factor: int = DEFAULT_WORK_FACTOR,
    buffer_size: int = 1 << 20,
) -> BinaryIO:
    """``stream`` age-encrypted to ``recipients`` (``age1...``) or to ``passphrase`` (not both)."""
    chunks = encrypt_chunks(read_chunks(stream, buffer_size), recipients, passphrase, work_factor=work_factor)
    return chunk_stream(chunks, buffer_size)


def encrypt_chunks(
    chunks: Iterator[bytes],
    recipients: Sequence[str],
    passphrase: str | None = None,
    *,
    work_factor: int = DEFAULT_WORK_FACTOR,
) -> Iterator[bytes]:
    """The age encryption of the bytes of ``chunks``, as chunks (header first)."""
    if bool(recipients) == (passphrase is not None):
        raise ValueError("age encrypts to X25519 recipients or to one passphrase (alone), exactly one of them")
    keys = [parse_recipient(r) for r in recipients]
    file_key = os.urandom(16)
    stanzas = [_x25519_stanza(file_key, key) for key in keys]
    if passphrase is not None:
        stanzas.append(_scrypt_stanza(file_key, passphrase, work_factor))
    return _sealed(file_key, stanzas, chunks)


def _sealed(file_key: bytes, stanzas: list[bytes], chunks: Iterator[bytes]) -> Iterator[bytes]:
    header = INTRO + b"".join(stanzas) + b"---"
    nonce = os.urandom(16)
    yield header + b" " + _b64(_mac(file_key, header)) + b"\n" + nonce
    aead = ChaCha20Poly1305(_hkdf(file_key, nonce, b"payload"))
    pending, counter = bytearray(), 0
    for chunk in chunks:
        pending += chunk
        # A chunk is the last one only once the input has ended: keep 1..64 KiB back until then.
        whole = (len(pending) - 1) // _CHUNK
        if whole > 0:
            view = memoryview(pending)
            sealed = [
                aead.encrypt(_nonce(counter + i, False), view[i * _CHUNK : (i + 1) * _CHUNK], None)
                for i in range(whole)
            ]
            view.release()
            del pending[: whole * _CHUNK]
            counter += whole
            yield b"".join(sealed)
    yield aead.encrypt(_nonce(counter, True), bytes(pending), None)


def _stanza(args: list[bytes], body: bytes) -> bytes:
    text = _b64(body)
    lines = [text[i : i + 64] for i in range(0, len(text), 64)]
    if len(text) % 64 == 0:
        lines.append(b"")  # a body always ends with a line shorter than 64 columns
    return b"-> " + b" ".join(args) + b"\n" + b"".join(line + b"\n" for line in lines)


def _x25519_stanza(file_key: bytes, recipient: X25519PublicKey) -> bytes:
    ephemeral = X25519PrivateKey.generate()
    share = ephemeral.public_key().public_bytes_raw()
    salt = share + recipient.public_bytes_raw()
    wrap_key = _hkdf(ephemeral.exchange(recipient), salt, _X25519_INFO)
    return _stanza([b"X25519", _b64(share)], ChaCha20Poly1305(wrap_key).encrypt(_ZERO_NONCE, file_key, None))


def _scrypt_stanza(file_key: bytes, passphrase: str, work_factor: int) -> bytes:
    if not 1 <= work_factor <= MAX_WORK_FACTOR:
        raise ValueError(f"scrypt work factor must be 1..{MAX_WORK_FACTOR}, got {work_factor}")
    salt = os.urandom(16)
    wrap_key = _scrypt_key(passphrase, salt, work_factor)
    body = ChaCha20Poly1305(wrap_key).encrypt(_ZERO_NONCE, file_key, None)
    return _stanza([b"scrypt", _b64(salt), str(work_factor).encode()], body)


# -- decryption ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Stanza:
    args: list[bytes]
    body: bytes


def decrypting(
    stream: BinaryIO,
    identities: Sequence[str],
    passphrase: str | None = None,
    *,
    max_work_factor: int = MAX_WORK_FACTOR,
    buffer_size: int = 1 << 20,
) -> BinaryIO:
    """The plaintext of the age file ``stream``, with X25519 ``identities`` and/or a ``passphrase``."""
    chunks = decrypt_chunks(read_chunks(stream, buffer_size), identities, passphrase, max_work_factor=max_work_factor)
    return chunk_stream(chunks, buffer_size)


def decrypt_chunks(
    chunks: Iterator[bytes],
    identities: Sequence[str],
    passphrase: str | None = None,
    *,
    max_work_factor: int = MAX_WORK_FACTOR,
) -> Iterator[bytes]:
    """The plaintext of the age file read from ``chunks``, as chunks; authenticated before it is
    yielded (a tampered or truncated file raises :class:`TransformError` at the bad chunk)."""
    keys = []
    for i, identity in enumerate(identities):
        try:
            keys.append(parse_identity(identity))
        except ValueError as exc:
            raise ValueError(f"identities[{i}]: {exc}") from None
    return _opened(chunks, keys, passphrase, max_work_factor)


def _opened(
    chunks: Iterator[bytes], keys: list[X25519PrivateKey], passphrase: str | None, max_work_factor: int
) -> Iterator[bytes]:
    header, rest = _split_header(chunks)
    stanzas, mac_input, mac = _parse_header(header)
    file_key = _file_key(stanzas, keys, passphrase, max_work_factor)
    if not hmac.compare_digest(_mac(file_key, mac_input), mac):
        raise TransformError("age header MAC mismatch: the header was modified")
    yield from _payload(file_key, rest, chunks)


def _split_header(chunks: Iterator[bytes]) -> tuple[bytes, bytearray]:
    """(the header up to its final newline, the bytes read past it)."""
    buf = bytearray()
    while True:
        _check_start(buf)
        footer = buf.find(b"\n--- ")
        end = buf.find(b"\n", footer + 1) if footer >= 0 else -1
        if end >= 0:
            return bytes(buf[: end + 1]), buf[end + 1 :]
        if len(buf) > _MAX_HEADER:
            raise TransformError(f"malformed age header: no end ('--- ' line) within {_MAX_HEADER} bytes")
        if not _pull(buf, chunks):
            raise TransformError("truncated age file: the input ends inside the header" if buf else "empty input")


def _check_start(buf: bytearray) -> None:
    n = min(len(buf), len(INTRO))
    if buf[:n] == INTRO[:n]:
        return
    if buf.lstrip().startswith(_ARMOR[:10]):
        raise TransformError("an ASCII-armored age file (-----BEGIN AGE ENCRYPTED FILE-----): only binary age is read")
    if buf.startswith(b"age-encryption.org/"):
        raise TransformError("an unsupported age format version (only age-encryption.org/v1 is read)")
    raise TransformError("not an age file: it does not start with 'age-encryption.org/v1'")


_ARG = re.compile(rb"[\x21-\x7e]+")


def _parse_header(header: bytes) -> tuple[list[_Stanza], bytes, bytes]:
    """(stanzas, the bytes the MAC covers, the MAC)."""
    lines = header.split(b"\n")[1:-1]  # after the version line; before the final newline
    footer = lines.pop()
    stanzas, i = [], 0
    while i < len(lines):
        if not lines[i].startswith(b"-> "):
            raise TransformError(f"malformed age header: expected a stanza ('-> '), got line {i + 2}")
        args = lines[i][3:].split(b" ")
        if not all(_ARG.fullmatch(a) for a in args):
            raise TransformError(f"malformed age header: bad stanza arguments on line {i + 2}")
        body, i = _stanza_body(lines, i + 1)
        stanzas.append(_Stanza(args, body))
    if not stanzas:
        raise TransformError("malformed age header: no recipient stanza")
    mac = _unb64(footer[4:], "the header MAC")
    if len(mac) != 32:
        raise TransformError("malformed age header: the MAC is not 32 bytes")
    return stanzas, header[: len(header) - len(footer) - 1 + 3], mac


def _stanza_body(lines: list[bytes], i: int) -> tuple[bytes, int]:
    """(the decoded body starting at ``lines[i]``, the index after it)."""
    start = i
    while i < len(lines) and len(lines[i]) == 64:
        i += 1
    if i == len(lines) or len(lines[i]) > 64:
        raise TransformError(f"malformed age header: a stanza body on line {start + 2} does not end properly")
    return _unb64(b"".join(lines[start : i + 1]), f"the stanza body on line {start + 2}"), i + 1


def _file_key(stanzas: list[_Stanza], keys: list[X25519PrivateKey], passphrase: str | None, max_wf: int) -> bytes:
    if any(s.args[0] == b"scrypt" for s in stanzas):
        if len(stanzas) != 1:
            raise TransformError("malformed age header: an scrypt stanza must be the only one")
        if passphrase is None:
            raise TransformError("the file is encrypted with a passphrase, and none was given")
        return _scrypt_file_key(stanzas[0], passphrase, max_wf)
    x25519 = [s for s in stanzas if s.args[0] == b"X25519"]
    if not keys:
        raise TransformError("the file is encrypted to recipients (age1...), and no identity was given")
    for stanza in x25519:
        for key in keys:
            file_key = _x25519_file_key(stanza, key)
            if file_key is not None:
                return file_key
    raise TransformError("no identity matches any recipient of the file (wrong key?)")


def _x25519_file_key(stanza: _Stanza, key: X25519PrivateKey) -> bytes | None:
    """The file key if ``key`` is the stanza's recipient, else None."""
    if len(stanza.args) != 2 or len(stanza.body) != 32:
        raise TransformError("malformed age header: bad X25519 stanza")
    share = _unb64(stanza.args[1], "an X25519 share")
    if len(share) != 32:
        raise TransformError("malformed age header: an X25519 share is not 32 bytes")
    try:
        shared = key.exchange(X25519PublicKey.from_public_bytes(share))
    except ValueError:
        shared = bytes(32)
    if shared == bytes(32):
        raise TransformError("malformed age header: an X25519 share is a low-order point")
    wrap_key = _hkdf(shared, share + key.public_key().public_bytes_raw(), _X25519_INFO)
    try:
        return ChaCha20Poly1305(wrap_key).decrypt(_ZERO_NONCE, stanza.body, None)
    except InvalidTag:
        return None


_WORK_FACTOR = re.compile(rb"[1-9][0-9]?")


def _scrypt_file_key(stanza: _Stanza, passphrase: str, max_wf: int) -> bytes:
    if len(stanza.args) != 3 or len(stanza.body) != 32 or not _WORK_FACTOR.fullmatch(stanza.args[2]):
        raise TransformError("malformed age header: bad scrypt stanza")
    salt = _unb64(stanza.args[1], "the scrypt salt")
    work_factor = int(stanza.args[2])
    if len(salt) != 16:
        raise TransformError("malformed age header: the scrypt salt is not 16 bytes")
    if work_factor > max_wf:
        raise TransformError(f"the scrypt work factor {work_factor} exceeds the limit {max_wf}")
    try:
        return ChaCha20Poly1305(_scrypt_key(passphrase, salt, work_factor)).decrypt(_ZERO_NONCE, stanza.body, None)
    except InvalidTag:
        raise TransformError("the passphrase does not decrypt the file (wrong passphrase?)") from None


def _payload(file_key: bytes, buf: bytearray, chunks: Iterator[bytes]) -> Iterator[bytes]:
    ended = False
    while len(buf) < 16 and not ended:
        ended = not _pull(buf, chunks)
    if len(buf) < 16:
        raise TransformError("truncated age file: the payload nonce is missing")
    aead = ChaCha20Poly1305(_hkdf(file_key, bytes(buf[:16]), b"payload"))
    del buf[:16]
    counter = 0
    while True:
        # A sealed chunk is the last one only if nothing follows it: look one byte past it.
        while len(buf) <= _SEALED_CHUNK and not ended:
            ended = not _pull(buf, chunks)
        whole = (len(buf) - 1) // _SEALED_CHUNK
        if whole > 0:
            yield _open(aead, buf, counter, whole)
            del buf[: whole * _SEALED_CHUNK]
            counter += whole
            continue
        if len(buf) < _TAG or (len(buf) == _TAG and counter > 0):
            raise TransformError(f"truncated age file: the payload ends inside chunk {counter}")
        last = _open(aead, buf, counter, 0)
        if last:
            yield last
        return


def _pull(buf: bytearray, chunks: Iterator[bytes]) -> bool:
    chunk = next(chunks, None)
    if chunk is None:
        return False
    buf += chunk
    return True


def _open(aead: ChaCha20Poly1305, buf: bytearray, counter: int, whole: int) -> bytes:
    """``whole`` full sealed chunks of ``buf`` opened, or (0) all of ``buf`` as the last chunk."""
    view = memoryview(buf)
    try:
        if whole == 0:
            return aead.decrypt(_nonce(counter, True), view, None)
        parts = [
            aead.decrypt(_nonce(counter + i, False), view[i * _SEALED_CHUNK : (i + 1) * _SEALED_CHUNK], None)
            for i in range(whole)
        ]
        return b"".join(parts)
    except InvalidTag:
        raise TransformError(
            f"age payload authentication failed near chunk {counter}: the file is truncated or was modified"
        ) from None
    finally:
        view.release()
