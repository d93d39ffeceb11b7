"""Byte transforms of copy jobs, checked against independent readers and writers: Python's gzip,
tarfile and zipfile modules, the gzip CLI, and pyrage (the Rust age implementation). No Spark."""

from __future__ import annotations

import gzip
import io
import logging
import random
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Sequence
from typing import Any

import pyrage
import pytest
from pydantic import BaseModel, ValidationError

from engine.copy import age_encryption
from engine.copy.transforms import Output, TransformError, is_identity, outputs, renamed
from engine.errors import ConfigError
from engine.spec.transforms import DecryptConf, EncryptConf, TransformChain, TransformConf, parse_chain

MiB = 1 << 20
SECRET, PUBLIC = age_encryption.generate_identity()
OTHER_SECRET, OTHER_PUBLIC = age_encryption.generate_identity()


# -- helpers ------------------------------------------------------------------------------------


def noise(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def text(n: int, seed: int = 0) -> bytes:
    """Compressible bytes: random words."""
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghij,;\n", k=rng.randint(1, 12))) for _ in range(500)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b" "
    return bytes(out[:n])


def chain(*steps: dict[str, Any]) -> tuple[TransformConf, ...]:
    return parse_chain(list(steps))


class Pipe(io.RawIOBase):
    """A non-seekable source that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._data) - self.consumed)
        buffer[:n] = self._data[self.consumed : self.consumed + n]
        self.consumed += n
        return n


def run(name: str, data: bytes, steps: Sequence[TransformConf], **kw: Any) -> list[tuple[str, bytes, Output]]:
    """Every output of ``data`` through ``steps``, each read to its end before the next."""
    return [(o.name, o.stream.read(), o) for o in outputs(name, Pipe(data), steps, **kw)]  # type: ignore[arg-type]


def one(name: str, data: bytes, steps: Sequence[TransformConf], **kw: Any) -> tuple[str, bytes]:
    (out_name, out, _), *rest = run(name, data, steps, **kw)
    assert not rest
    return out_name, out


GZIP = chain({"type": "gzip"})
GUNZIP = chain({"type": "gunzip"})
ENCRYPT = chain({"type": "encrypt", "recipients": [PUBLIC]})
DECRYPT = chain({"type": "decrypt", "identities": [SECRET]})
SIZES = [0, 1, 65535, 65536, 65537, 3 * 65536, 3 * MiB + 7]


# -- gzip ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"x", id="one-byte"),
        pytest.param(noise(5 * MiB + 3), id="random-5MiB"),
        pytest.param(text(6 * MiB), id="text-6MiB"),
    ],
)
def test_gzip_round_trips_with_python_gzip_and_the_cli(data: bytes) -> None:
    name, packed = one("a.csv", data, GZIP)
    assert name == "a.csv.gz"
    assert gzip.decompress(packed) == data
    assert subprocess.run(["gzip", "-dc"], input=packed, capture_output=True, check=True).stdout == data
    assert one("a.csv.gz", gzip.compress(data), GUNZIP) == ("a.csv", data)
    cli = subprocess.run(["gzip", "-c"], input=data, capture_output=True, check=True).stdout
    assert one("a.csv.gz", cli, GUNZIP, buffer_size=4096) == ("a.csv", data)


def test_gzip_is_deterministic_with_no_name_and_mtime_zero() -> None:
    data = text(2 * MiB)
    first, second = one("a", data, GZIP)[1], one("a", data, GZIP)[1]
    assert first == second
    assert first[3] == 0  # FLG: no FNAME, no comment, no extra
    assert first[4:8] == bytes(4)  # MTIME
    level9 = one("a", data, chain({"type": "gzip", "level": 9}))[1]
    assert gzip.decompress(level9) == data


def test_gunzip_reads_every_member_and_zero_padding() -> None:
    packed = gzip.compress(b"first\n") + gzip.compress(b"second\n") + bytes(100)
    assert one("a.gz", packed, GUNZIP)[1] == b"first\nsecond\n"


def test_gunzip_pulls_input_as_output_is_read() -> None:
    data = text(16 * MiB)
    source = Pipe(gzip.compress(data, compresslevel=1))
    (out,) = outputs("a.gz", source, GUNZIP)  # type: ignore[arg-type]
    assert out.stream.read(MiB) == data[:MiB]
    assert source.consumed <= 2 * MiB
    assert out.stream.read() == data[MiB:]


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1 :]


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda d: _flip(d, len(d) // 2), id="byte-flipped-in-the-middle"),
        pytest.param(lambda d: _flip(d, len(d) - 6), id="crc-flipped"),
        pytest.param(lambda d: d[: len(d) // 2], id="truncated-in-the-middle"),
        pytest.param(lambda d: d[:-4], id="truncated-trailer"),
        pytest.param(lambda d: d + b"garbage", id="trailing-garbage"),
        pytest.param(lambda d: b"", id="empty"),
        pytest.param(lambda d: b"not gzip at all", id="not-gzip"),
    ],
)
def test_corrupt_gzip_raises_a_transform_error(corrupt: Any) -> None:
    packed = corrupt(gzip.compress(noise(3 * MiB)))
    with pytest.raises(TransformError, match="gzip") as info:
        one("a.gz", packed, GUNZIP)
    assert "Error -3" not in str(info.value)


# -- age ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_age_x25519_round_trips_with_pyrage(size: int) -> None:
    data = noise(size, seed=size)
    name, sealed = one("a.csv", data, ENCRYPT)
    assert name == "a.csv.age"
    assert pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(SECRET)]) == data
    theirs = pyrage.encrypt(data, [pyrage.x25519.Recipient.from_str(PUBLIC)])
    assert one("a.csv.age", theirs, DECRYPT) == ("a.csv", data)
    assert one("a.csv.age", theirs, DECRYPT, buffer_size=1000) == ("a.csv", data)


@pytest.mark.parametrize("size", [0, 1, 65536, 65537, 3 * MiB])
def test_age_passphrase_is_read_by_pyrage(size: int) -> None:
    data = noise(size, seed=size)
    sealed = age_encryption.encrypting(io.BytesIO(data), [], "correct horse", work_factor=10).read()
    assert pyrage.passphrase.decrypt(sealed, "correct horse") == data


@pytest.mark.parametrize("size", [0, 65537])
def test_age_passphrase_from_pyrage_is_read(size: int) -> None:
    data = noise(size, seed=size)
    theirs = pyrage.passphrase.encrypt(data, "correct horse")
    assert one("x.age", theirs, chain({"type": "decrypt", "passphrase": "correct horse"}))[1] == data


def test_age_to_several_recipients_is_read_with_any_identity() -> None:
    sealed = one("a", b"shared", chain({"type": "encrypt", "recipients": [OTHER_PUBLIC, PUBLIC]}))[1]
    for secret in (SECRET, OTHER_SECRET):
        assert pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(secret)]) == b"shared"
    assert one("a.age", sealed, chain({"type": "decrypt", "identities": [OTHER_SECRET]}))[1] == b"shared"


def test_age_keys_agree_with_pyrage() -> None:
    assert str(pyrage.x25519.Identity.from_str(SECRET).to_public()) == PUBLIC
    theirs = pyrage.x25519.Identity.generate()
    assert age_encryption.parse_recipient(str(theirs.to_public())) is not None
    assert age_encryption.parse_identity(str(theirs)) is not None


def test_a_wrong_identity_fails_without_printing_any_key() -> None:
    sealed = one("a", noise(1000), ENCRYPT)[1]
    with pytest.raises(TransformError, match="no identity matches") as info:
        one("a.age", sealed, chain({"type": "decrypt", "identities": [OTHER_SECRET]}))
    assert OTHER_SECRET not in str(info.value) and SECRET not in str(info.value)


def test_a_wrong_passphrase_fails_without_printing_it() -> None:
    sealed = age_encryption.encrypting(io.BytesIO(b"x"), [], "right one", work_factor=10).read()
    with pytest.raises(TransformError, match="passphrase") as info:
        age_encryption.decrypting(io.BytesIO(sealed), [], "wrong one").read()
    assert "wrong one" not in str(info.value)
    with pytest.raises(TransformError, match="none was given"):
        age_encryption.decrypting(io.BytesIO(sealed), [SECRET]).read()


def _payload_start(sealed: bytes) -> int:
    """Where the first sealed chunk starts: after the header line ``--- <mac>`` and the 16-byte nonce."""
    return sealed.index(b"\n", sealed.index(b"\n---") + 1) + 1 + 16


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d: d[:-1], id="last-byte-cut"),
        pytest.param(lambda d: d[: len(d) // 2], id="cut-in-a-chunk"),
        pytest.param(lambda d: d[: _payload_start(d) + 4 * 65552], id="cut-at-a-chunk-boundary"),
        pytest.param(lambda d: d[: _payload_start(d) + 3 * 65552] + d[-116:], id="a-chunk-dropped"),
        pytest.param(lambda d: _flip(d, len(d) // 2), id="payload-byte-flipped"),
        pytest.param(lambda d: _flip(d, 30), id="header-byte-flipped"),
        pytest.param(lambda d: d + b"\0" * 17, id="bytes-appended"),
        pytest.param(lambda d: d[: d.index(b"\n---") + 60], id="cut-in-the-nonce"),
        pytest.param(lambda d: d[:40], id="cut-in-the-header"),
    ],
)
def test_damaged_age_files_raise_a_transform_error(damage: Any) -> None:
    sealed = pyrage.encrypt(noise(4 * 65536 + 100), [pyrage.x25519.Recipient.from_str(PUBLIC)])
    with pytest.raises(TransformError):
        one("a.age", damage(sealed), DECRYPT)


def test_armored_and_foreign_input_is_refused_clearly() -> None:
    armored = (
        b"-----BEGIN AGE ENCRYPTED FILE-----\nYWdlLWVuY3J5cHRpb24ub3JnL3YxCg==\n-----END AGE ENCRYPTED FILE-----\n"
    )
    with pytest.raises(TransformError, match="armored"):
        one("a.age", armored, DECRYPT)
    with pytest.raises(TransformError, match="not an age file"):
        one("a.age", b"PK\x03\x04 something else", DECRYPT)


def test_age_streams_without_reading_the_whole_input() -> None:
    data = noise(30 * MiB)
    source = Pipe(pyrage.encrypt(data, [pyrage.x25519.Recipient.from_str(PUBLIC)]))
    (out,) = outputs("a.age", source, DECRYPT)  # type: ignore[arg-type]
    assert out.stream.read(MiB) == data[:MiB]
    assert source.consumed <= 3 * MiB
    assert out.stream.read() == data[MiB:]


def test_bad_recipients_and_identities_are_value_errors() -> None:
    with pytest.raises(ValueError, match="checksum"):
        age_encryption.parse_recipient(PUBLIC[:-1] + ("q" if PUBLIC[-1] != "q" else "p"))
    with pytest.raises(ValueError, match="identity") as info:
        age_encryption.parse_identity(SECRET[:-2])
    assert SECRET[:-2] not in str(info.value)


# -- tar ----------------------------------------------------------------------------------------

BIG = noise(3 * MiB + 5, seed=7)
MEMBERS = {"a.csv": b"a,b\n1,2\n", "data/x/y.txt": b"why\n", "data/empty": b"", "data/big.bin": BIG}


def _tar(mode: str = "w", members: dict[str, bytes] = MEMBERS, extra: Sequence[tarfile.TarInfo] = ()) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        for directory in ("data", "data/x"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o640, 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
        for info in extra:
            archive.addfile(info)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "mode", "steps"),
    [
        pytest.param("logs.tar", "w", [{"type": "untar"}], id="tar"),
        pytest.param("logs.tgz", "w:gz", [{"type": "untar"}], id="tgz"),
        pytest.param("logs.tar.gz", "w:gz", [{"type": "untar"}], id="tar.gz"),
        pytest.param("logs.tar.bz2", "w:bz2", [{"type": "untar"}], id="tar.bz2"),
        pytest.param("logs.tar.xz", "w:xz", [{"type": "untar"}], id="tar.xz"),
        pytest.param("logs.tgz", "w:gz", [{"type": "gunzip"}, {"type": "untar"}], id="gunzip-then-untar"),
    ],
)
def test_untar_yields_each_regular_member_under_the_stem(name: str, mode: str, steps: list[dict[str, Any]]) -> None:
    found = run(name, _tar(mode), chain(*steps))
    assert [(n, d) for n, d, _ in found] == [(f"logs/{k}", v) for k, v in MEMBERS.items()]
    assert {(o.mode, o.mtime) for _, _, o in found} == {(0o640, 1_700_000_000.0)}


def test_untar_into_parent_and_small_buffers() -> None:
    found = run("logs.tar", _tar(), chain({"type": "untar", "into": "parent"}), buffer_size=1000)
    assert {n: d for n, d, _ in found} == MEMBERS


def test_untar_then_gzip_compresses_each_member() -> None:
    found = run("logs.tar", _tar(), chain({"type": "untar"}, {"type": "gzip"}))
    assert {n: gzip.decompress(d) for n, d, _ in found} == {f"logs/{k}.gz": v for k, v in MEMBERS.items()}


def test_untar_skips_links_and_devices_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    link = tarfile.TarInfo("data/link")
    link.type, link.linkname = tarfile.SYMTYPE, "../../etc/passwd"
    hard = tarfile.TarInfo("data/hard")
    hard.type, hard.linkname = tarfile.LNKTYPE, "a.csv"
    fifo = tarfile.TarInfo("data/fifo")
    fifo.type = tarfile.FIFOTYPE
    with caplog.at_level(logging.INFO, logger="engine.copy.transforms"):
        found = run("logs.tar", _tar(extra=[link, hard, fifo]), chain({"type": "untar"}))
    assert [n for n, _, _ in found] == [f"logs/{k}" for k in MEMBERS]
    assert "data/link" in caplog.text and "symlink" in caplog.text and "hard link" in caplog.text


@pytest.mark.parametrize("evil", ["../evil", "data/../../evil", "/etc/passwd", "a/..\\..\\evil"])
def test_untar_refuses_a_member_that_could_escape(evil: str) -> None:
    with pytest.raises(TransformError, match="unsafe path") as info:
        run("logs.tar", _tar(members={"ok.txt": b"ok", evil: b"evil"}), chain({"type": "untar"}))
    assert repr(evil) in str(info.value)


@pytest.mark.parametrize(
    ("mode", "cut"),
    [
        pytest.param("w", lambda d: d[: 512 * 3 + 100], id="in-member-data"),
        pytest.param("w", lambda d: d[: 512 * 4], id="at-a-header"),
        pytest.param("w", lambda d: d[: len(d) // 2], id="in-the-big-member"),
        pytest.param("w:gz", lambda d: d[: len(d) // 2], id="gzipped"),
        pytest.param("w:gz", lambda d: _flip(d, len(d) - 6), id="gzip-crc"),
        pytest.param("w:bz2", lambda d: d[: len(d) - 20], id="bzip2"),
        pytest.param("w", lambda d: noise(5000), id="not-a-tar"),
    ],
)
def test_a_truncated_or_corrupt_tar_raises_a_transform_error(mode: str, cut: Any) -> None:
    with pytest.raises(TransformError):
        run("logs.tar", cut(_tar(mode)), chain({"type": "untar"}))


# -- zip ----------------------------------------------------------------------------------------


def _zip(members: dict[str, bytes] = MEMBERS, symlink: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("data/", b"")
        for i, (name, data) in enumerate(members.items()):
            info = zipfile.ZipInfo(name, date_time=(2023, 11, 14, 22, 13, 20))
            info.create_system, info.external_attr = 3, (0o640 if i == 1 else stat.S_IFREG | 0o640) << 16
            info.compress_type = zipfile.ZIP_DEFLATED if i % 2 else zipfile.ZIP_STORED
            archive.writestr(info, data)
        if symlink:
            info = zipfile.ZipInfo("data/link")
            info.create_system, info.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "../../etc/passwd")
    return buffer.getvalue()


def test_unzip_from_a_seekable_and_a_non_seekable_stream() -> None:
    data = _zip(symlink=True)
    steps = chain({"type": "unzip"})
    seekable = [(o.name, o.stream.read(), o.mode, o.mtime) for o in outputs("logs.zip", io.BytesIO(data), steps)]
    piped = [(n, d, o.mode, o.mtime) for n, d, o in run("logs.zip", data, steps)]
    assert seekable == piped == [(f"logs/{k}", v, 0o640, 1_700_000_000.0) for k, v in MEMBERS.items()]


def test_unzip_into_parent_then_gzip() -> None:
    found = run("logs.zip", _zip(), chain({"type": "unzip", "into": "parent"}, {"type": "gzip"}))
    assert {n: gzip.decompress(d) for n, d, _ in found} == {f"{k}.gz": v for k, v in MEMBERS.items()}


def test_decrypt_then_unzip_spools_the_plaintext() -> None:
    sealed = one("logs.zip", _zip(), ENCRYPT)[1]
    found = run("logs.zip.age", sealed, chain({"type": "decrypt", "identities": [SECRET]}, {"type": "unzip"}))
    assert {n: d for n, d, _ in found} == {f"logs/{k}": v for k, v in MEMBERS.items()}


def test_a_bad_zip_raises_a_transform_error() -> None:
    with pytest.raises(TransformError, match="not a zip archive"):
        run("logs.zip", noise(10_000), chain({"type": "unzip"}))
    with pytest.raises(TransformError, match="not a zip archive"):
        run("logs.zip", _zip()[:-30], chain({"type": "unzip"}))
    data = _zip(members={"big.bin": BIG})
    with pytest.raises(TransformError, match=r"big\.bin"):
        run("logs.zip", _flip(data, len(data) // 2), chain({"type": "unzip"}))
    with pytest.raises(TransformError, match="unsafe path"):
        run("logs.zip", _zip(members={"../evil": b"x"}), chain({"type": "unzip"}))


# -- chains and names ---------------------------------------------------------------------------


def test_decrypt_then_gunzip_an_encrypted_gzip_file() -> None:
    data = text(3 * MiB)
    sealed = pyrage.encrypt(gzip.compress(data), [pyrage.x25519.Recipient.from_str(PUBLIC)])
    steps = chain({"type": "decrypt", "identities": [SECRET]}, {"type": "gunzip"})
    assert one("orders.csv.gz.age", sealed, steps) == ("orders.csv", data)


def test_gzip_then_encrypt_is_read_by_pyrage_and_gzip() -> None:
    data = text(2 * MiB)
    name, sealed = one("orders.csv", data, chain({"type": "gzip"}, {"type": "encrypt", "recipients": [PUBLIC]}))
    assert name == "orders.csv.gz.age"
    assert gzip.decompress(pyrage.decrypt(sealed, [pyrage.x25519.Identity.from_str(SECRET)])) == data


def test_no_transforms_is_the_identity() -> None:
    source = io.BytesIO(b"as is")
    (out,) = outputs("a.csv", source, ())
    assert is_identity(()) and not is_identity(GZIP)
    assert (out.name, out.stream, out.mode) == ("a.csv", source, None)


@pytest.mark.parametrize(
    ("name", "steps", "expected"),
    [
        ("a.csv", [], "a.csv"),
        ("a.csv.gz", [{"type": "gunzip"}], "a.csv"),
        ("A.CSV.GZ", [{"type": "gunzip"}], "A.CSV"),
        ("a.tgz", [{"type": "gunzip"}], "a.tar"),
        ("a.csv", [{"type": "gunzip"}], "a.csv"),
        ("a.csv", [{"type": "gzip"}], "a.csv.gz"),
        ("a.csv.age", [{"type": "decrypt", "identities": [SECRET]}], "a.csv"),
        ("a.csv", [{"type": "encrypt", "recipients": [PUBLIC]}], "a.csv.age"),
        ("a.csv.gz.age", [{"type": "decrypt", "identities": [SECRET]}, {"type": "gunzip"}], "a.csv"),
        ("logs.tar", [{"type": "untar"}], "logs"),
        ("logs.tar.gz", [{"type": "untar"}], "logs"),
        ("logs.tgz", [{"type": "gunzip"}, {"type": "untar"}], "logs"),
        ("logs.tar.xz", [{"type": "untar", "into": "parent"}], ""),
        ("logs.tar.gz.age", [{"type": "decrypt", "identities": [SECRET]}, {"type": "untar"}], "logs"),
        ("logs.zip", [{"type": "unzip"}, {"type": "gzip"}], "logs"),
        ("logs.bin", [{"type": "unzip"}], "logs.bin"),
        (".zip", [{"type": "unzip"}], ".zip"),
    ],
)
def test_renamed(name: str, steps: list[dict[str, Any]], expected: str) -> None:
    assert renamed(name, chain(*steps)) == expected


# -- config -------------------------------------------------------------------------------------


def test_a_bad_recipient_names_its_index() -> None:
    with pytest.raises(ConfigError, match="not an age X25519 recipient") as info:
        parse_chain([{"type": "gunzip"}, {"type": "encrypt", "recipients": [PUBLIC, "age1nope"]}])
    assert info.value.key == "transforms[1].recipients[1]"
    assert "age1nope" in str(info.value)


@pytest.mark.parametrize(
    ("steps", "match"),
    [
        pytest.param(
            [{"type": "untar"}, {"type": "gzip"}, {"type": "unzip"}], "unpacks at most once", id="two-unpacks"
        ),
        pytest.param([{"type": "gzip"}, {"type": "gunzip"}, {"type": "untar"}], "compressed", id="untar-after-gzip"),
    ],
)
def test_a_chain_that_cannot_run_names_the_step(steps: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        parse_chain(steps, key="job.copy.transforms")
    assert info.value.key == "job.copy.transforms[2]"
    assert "transforms[2]" in str(info.value)


class _Job(BaseModel):
    transforms: TransformChain = []


def test_a_config_field_checks_the_chain() -> None:
    with pytest.raises(ValidationError, match=r"transforms\[1\]: a chain unpacks at most once"):
        _Job.model_validate({"transforms": [{"type": "unzip"}, {"type": "untar"}]})


@pytest.mark.parametrize(
    ("step", "match"),
    [
        pytest.param({"type": "encrypt"}, "exactly one", id="encrypt-to-nobody"),
        pytest.param({"type": "encrypt", "recipients": [PUBLIC], "passphrase": "pw"}, "exactly one", id="both"),
        pytest.param({"type": "decrypt"}, "identities", id="decrypt-without-keys"),
        pytest.param({"type": "decrypt", "passphrase": ""}, "empty", id="empty-passphrase"),
        pytest.param({"type": "gzip", "level": 0}, "greater than or equal to 1", id="gzip-level"),
        pytest.param({"type": "gunzip", "level": 1}, "unknown key|Extra inputs", id="unknown-key"),
        pytest.param({"type": "untar", "into": "elsewhere"}, "stem", id="untar-into"),
        pytest.param({"type": "rot13"}, "gunzip", id="unknown-type"),
    ],
)
def test_bad_steps_are_config_errors(step: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        parse_chain([{"type": "gunzip"}, step])
    assert info.value.key is not None and info.value.key.startswith("transforms[1]")


@pytest.mark.parametrize(
    "step",
    [
        pytest.param({"type": "decrypt", "identities": [SECRET]}, id="valid"),
        pytest.param({"type": "decrypt", "identities": [SECRET[:-3]]}, id="bad-identity"),
        pytest.param({"type": "decrypt", "identities": SECRET}, id="not-a-list"),
        pytest.param({"type": "decrypt", "identities": [SECRET], "passphrase": "s3cret!", "x": 1}, id="unknown-key"),
        pytest.param({"type": "decrpyt", "identities": [SECRET], "passphrase": "s3cret!"}, id="unknown-type"),
        pytest.param({"type": "encrypt", "recipients": [PUBLIC], "passphrase": "s3cret!"}, id="encrypt-both"),
        pytest.param({"type": "encrypt", "recipients": [SECRET]}, id="secret-as-recipient"),
    ],
)
def test_secrets_never_show(step: dict[str, Any]) -> None:
    shown: list[str] = []
    try:
        shown += [repr(c) + str(c) for c in parse_chain([step])]
    except ConfigError as exc:
        shown.append(str(exc))
    try:
        shown.append(repr(_Job.model_validate({"transforms": [step]})))
    except ValidationError as exc:
        shown += [str(exc), repr(exc)]
    for secret in (SECRET, SECRET[:-3], "s3cret!"):
        assert all(secret not in s for s in shown)
    assert "**********" in repr(DecryptConf(type="decrypt", identities=[SECRET], passphrase="pw"))  # type: ignore[list-item, arg-type]
    assert "pw'" not in repr(EncryptConf(type="encrypt", passphrase="pw"))  # type: ignore[arg-type]
