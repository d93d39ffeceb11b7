"""The hash Python gives a string when ``PYTHONHASHSEED=0``, computed whatever the process's seed.

A JDBC source reading a ``query`` names its dataset by ``hash(query)`` (its URN keys the stored
watermark). That was stable only because ``spark-submit`` exports ``PYTHONHASHSEED=0``; any other
process (the ``engine`` command, the flow service, a notebook, a test) hashes with a random seed, so
it would name another dataset: a checkpoint refused, or a run with no watermark that reads the whole
table again. The URNs already stored are seed-0 hashes, so the value is kept and its computation made
the process's own: SipHash-1-3 (CPython 3.11's string hash) keyed with zeros, over the string's
internal representation (Latin-1, UTF-16 or UTF-32 code units, as its widest character needs).
"""

from __future__ import annotations

import struct

_MASK = (1 << 64) - 1
_INIT = (0x736F6D6570736575, 0x646F72616E646F6D, 0x6C7967656E657261, 0x7465646279746573)


def seed0_str_hash(text: str) -> int:
    """``hash(text)`` as a CPython 3.11 process started with ``PYTHONHASHSEED=0`` computes it."""
    if not text:
        return 0
    widest = max(map(ord, text))
    units = "latin-1" if widest < 0x100 else "utf-16-le" if widest < 0x10000 else "utf-32-le"
    value = _siphash13(text.encode(units))
    if value >= 1 << 63:
        value -= 1 << 64
    return -2 if value == -1 else value  # -1 is CPython's error value: hash() never returns it


def _rotl(x: int, bits: int) -> int:
    return ((x << bits) | (x >> (64 - bits))) & _MASK


def _siphash13(data: bytes) -> int:
    """SipHash-1-3 of ``data`` with a zero key (one compression round a word, three to finish)."""
    v0, v1, v2, v3 = _INIT

    def sip_round() -> None:
        nonlocal v0, v1, v2, v3
        v0 = (v0 + v1) & _MASK
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _MASK
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _MASK
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _MASK
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)

    whole = len(data) - len(data) % 8
    for (word,) in struct.iter_unpack("<Q", data[:whole]):
        v3 ^= word
        sip_round()
        v0 ^= word
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    sip_round()
    v0 ^= last
    v2 ^= 0xFF
    for _ in range(3):
        sip_round()
    return v0 ^ v1 ^ v2 ^ v3
