"""age X25519 keys (bech32, BIP 173 without its 90-character limit) and scrypt limits: what a copy
job's config needs to check recipients and identities before anything runs. The file format itself
is :mod:`engine.copy.age_encryption`."""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

DEFAULT_WORK_FACTOR = 18
"""log2 of scrypt's N when encrypting with a passphrase (age's default: about a second, 256 MiB)."""
MAX_WORK_FACTOR = 22
"""The largest scrypt work factor a decryption accepts (age's limit; 4 GiB of memory)."""


# -- keys: bech32 (BIP 173, without its 90-character limit) -----------------------------------

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)


def _polymod(values: Sequence[int]) -> int:
    check = 1
    for value in values:
        top = check >> 25
        check = (check & 0x1FFFFFF) << 5 ^ value
        for i, gen in enumerate(_GENERATOR):
            if (top >> i) & 1:
                check ^= gen
    return check


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _regroup(data: Sequence[int] | bytes, source: int, target: int, *, pad: bool) -> list[int] | None:
    """``data`` re-cut from ``source``-bit into ``target``-bit groups; None if the padding is wrong."""
    acc, bits, out, top = 0, 0, [], (1 << target) - 1
    for value in data:
        acc = (acc << source) | value
        bits += source
        while bits >= target:
            bits -= target
            out.append((acc >> bits) & top)
    if pad and bits:
        out.append((acc << (target - bits)) & top)
    elif not pad and (bits >= source or (acc << (target - bits)) & top):
        return None
    return out


def _bech32_encode(hrp: str, data: bytes) -> str:
    groups = _regroup(data, 8, 5, pad=True) or []
    check = _polymod([*_hrp_expand(hrp), *groups, 0, 0, 0, 0, 0, 0]) ^ 1
    groups += [(check >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(_CHARSET[g] for g in groups)


def _bech32_decode(text: str) -> tuple[str, bytes]:
    """(human-readable part in lower case, data); ValueError saying what is wrong, never the text."""
    if text != text.lower() and text != text.upper():
        raise ValueError("mixed upper and lower case")
    text = text.lower()
    hrp, sep, rest = text.rpartition("1")
    if not sep or not hrp:
        raise ValueError("no bech32 separator '1' after a prefix")
    if len(rest) < 6:
        raise ValueError("too short")
    if any(c not in _CHARSET for c in rest):
        raise ValueError("a character outside the bech32 alphabet")
    groups = [_CHARSET.index(c) for c in rest]
    if _polymod([*_hrp_expand(hrp), *groups]) != 1:
        raise ValueError("bad bech32 checksum (a typo?)")
    data = _regroup(groups[:-6], 5, 8, pad=False)
    if data is None:
        raise ValueError("bad bech32 padding")
    return hrp, bytes(data)


def parse_recipient(text: str) -> X25519PublicKey:
    """The X25519 public key of an ``age1...`` recipient; ValueError saying what is wrong."""
    return X25519PublicKey.from_public_bytes(_key_bytes(text, "age", "recipient"))


def parse_identity(text: str) -> X25519PrivateKey:
    """The X25519 private key of an ``AGE-SECRET-KEY-1...`` identity; ValueError without the key."""
    return X25519PrivateKey.from_private_bytes(_key_bytes(text, "age-secret-key-", "identity"))


def _key_bytes(text: str, hrp: str, what: str) -> bytes:
    try:
        found, key = _bech32_decode(text.strip())
    except ValueError as exc:
        raise ValueError(f"not an age X25519 {what}: {exc}") from None
    if found != hrp:
        raise ValueError(
            f"not an age X25519 {what}: it does not start with '{hrp.upper() if what == 'identity' else hrp}1'"
        )
    if len(key) != 32:
        raise ValueError(f"not an age X25519 {what}: the key is {len(key)} bytes, not 32")
    return key


def generate_identity() -> tuple[str, str]:
    """A new X25519 key pair: (secret ``AGE-SECRET-KEY-1...``, public recipient ``age1...``)."""
    key = X25519PrivateKey.generate()
    return _bech32_encode("age-secret-key-", key.private_bytes_raw()).upper(), public_of(key)


def public_of(key: X25519PrivateKey) -> str:
    return _bech32_encode("age", key.public_key().public_bytes_raw())
