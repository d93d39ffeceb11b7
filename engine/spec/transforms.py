"""The byte transforms of a copy job, as config: a chain applied in order to each file's bytes.

```
transforms = [
  { type = decrypt, identities = [${AGE_KEY}] }
  { type = gunzip }
  { type = untar, into = stem }
]
```

Secrets (age identities, passphrases) are :class:`~pydantic.SecretStr`: they never appear in a
repr, a log line or a validation error. Validate a chain through :data:`TransformConf` (or
:func:`parse_chain`), which hides them before anything can fail. No pyspark here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from engine.errors import ConfigError
from engine.spec.agekeys import DEFAULT_WORK_FACTOR, MAX_WORK_FACTOR, parse_identity, parse_recipient

__all__ = [
    "DecryptConf",
    "EncryptConf",
    "GunzipConf",
    "GzipConf",
    "TransformChain",
    "TransformConf",
    "UntarConf",
    "UnzipConf",
    "check_chain",
    "parse_chain",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class GunzipConf(_Strict):
    """Decompress gzip (every member of a multi-member file); drops ``.gz`` (``.tgz`` becomes ``.tar``)."""

    type: Literal["gunzip"]
    """Selects this transform."""


class GzipConf(_Strict):
    """Compress with gzip; adds ``.gz``. The output is deterministic (no name, mtime 0 in the header)."""

    type: Literal["gzip"]
    """Selects this transform."""
    level: int = Field(default=6, ge=1, le=9)
    """Compression level: 1 fastest, 9 smallest."""


def _recipient(text: str) -> str:
    if _looks_secret(text):
        raise ValueError("a secret key where a recipient belongs: give its public key (age1..., `age-keygen -y`)")
    try:
        parse_recipient(text)
    except ValueError as exc:
        shown = f"{text!r}: " if text.strip().lower().startswith("age1") else ""  # never echo what may be secret
        raise ValueError(f"{shown}{exc} (expected age1 and 58 more characters)") from None
    return text.strip()


def _looks_secret(value: Any) -> bool:
    return isinstance(value, str) and value.strip().upper().startswith("AGE-SECRET-KEY-")


def _identity(secret: SecretStr) -> SecretStr:
    parse_identity(secret.get_secret_value())  # its ValueError never holds the key
    return secret


Recipient = Annotated[str, AfterValidator(_recipient)]
Identity = Annotated[SecretStr, AfterValidator(_identity)]


class EncryptConf(_Strict):
    """Encrypt with age (https://age-encryption.org) to X25519 recipients or to one passphrase;
    adds ``.age``. age allows a passphrase only as the sole recipient: set one of the two."""

    type: Literal["encrypt"]
    """Selects this transform."""
    recipients: list[Recipient] = Field(default_factory=list)
    """Public keys ``age1...`` (``age-keygen`` prints one); any of their identities decrypts."""
    passphrase: SecretStr | None = Field(default=None, validate_default=True)
    """A passphrase (scrypt), instead of recipients."""
    work_factor: int = Field(default=DEFAULT_WORK_FACTOR, ge=10, le=MAX_WORK_FACTOR)
    """log2 of scrypt's N with a passphrase: 18 takes about a second and 256 MiB to derive the key."""

    @field_validator("passphrase")
    @classmethod
    def _one_kind(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None and not value.get_secret_value():
            raise ValueError("the passphrase is empty")
        if "recipients" in info.data and bool(info.data["recipients"]) == (value is not None):
            raise ValueError("set exactly one of `recipients` and `passphrase` (age allows a passphrase only alone)")
        return value


class DecryptConf(_Strict):
    """Decrypt age files (binary, not armored); drops ``.age``. A file for another key fails."""

    type: Literal["decrypt"]
    """Selects this transform."""
    identities: list[Identity] = Field(default_factory=list)
    """Secret keys ``AGE-SECRET-KEY-1...``; the first that matches a recipient of the file is used."""
    passphrase: SecretStr | None = Field(default=None, validate_default=True)
    """The passphrase of passphrase-encrypted files."""

    @field_validator("passphrase")
    @classmethod
    def _some_key(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is not None and not value.get_secret_value():
            raise ValueError("the passphrase is empty")
        if "identities" in info.data and not info.data["identities"] and value is None:
            raise ValueError("set `identities`, `passphrase` or both")
        return value


Into = Literal["stem", "parent"]


class UntarConf(_Strict):
    """Unpack a tar archive (plain, or gzip, bzip2, xz compressed): one file per regular member.
    Directories are implied; links and devices are skipped; a member path that is absolute or has
    ``..`` fails the file."""

    type: Literal["untar"]
    """Selects this transform."""
    into: Into = "stem"
    """``stem``: the members go under a directory named after the archive without its archive
    extensions (``logs.tar.gz`` -> ``logs/``); ``parent``: directly beside where the archive was."""


class UnzipConf(_Strict):
    """Unpack a zip archive: one file per regular member (as :class:`UntarConf`)."""

    type: Literal["unzip"]
    """Selects this transform."""
    into: Into = "stem"
    """``stem``: under a directory named after the archive without ``.zip``; ``parent``: beside it."""


_HIDDEN = "AGE-SECRET-KEY-1(hidden)"


def _hide_secrets(data: Any) -> Any:
    """Secret fields as SecretStr before any validation can fail: a ValidationError shows its input."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    if "passphrase" in data:
        data["passphrase"] = _secret(data["passphrase"])
    if isinstance(identities := data.get("identities"), (list, tuple)):
        data["identities"] = [_secret(v) for v in identities]
    elif identities is not None:
        data["identities"] = _secret(identities)
    if isinstance(recipients := data.get("recipients"), (list, tuple)):  # a secret key given by mistake
        data["recipients"] = [_HIDDEN if _looks_secret(v) else v for v in recipients]
    return data


def _secret(value: Any) -> Any:
    return SecretStr(value) if isinstance(value, str) else value


TransformConf = Annotated[
    GunzipConf | GzipConf | EncryptConf | DecryptConf | UntarConf | UnzipConf,
    Field(discriminator="type"),
    BeforeValidator(_hide_secrets),
]
"""One step of a transform chain, chosen by its ``type``."""

_UNPACK = (UntarConf, UnzipConf)
_OPAQUE = (GzipConf, EncryptConf)


def _problem(chain: Sequence[TransformConf]) -> tuple[int, str] | None:
    """(index, what is wrong) of the first step that cannot run where it is, or None."""
    unpacked: int | None = None
    opaque: int | None = None
    for i, step in enumerate(chain):
        if isinstance(step, _UNPACK):
            if unpacked is not None:
                return i, f"a chain unpacks at most once (transforms[{unpacked}] is {chain[unpacked].type})"
            if opaque is not None:
                what = "compressed" if isinstance(chain[opaque], GzipConf) else "encrypted"
                return i, f"{step.type} after {chain[opaque].type} (transforms[{opaque}]) would unpack {what} bytes"
            unpacked = i
        elif isinstance(step, _OPAQUE):
            opaque = i
    return None


def check_chain(chain: Sequence[TransformConf], *, key: str = "transforms", file: str | None = None) -> None:
    """A :class:`ConfigError` at ``<key>[i]`` if a step of ``chain`` cannot run where it is: a chain
    unpacks at most once, and never after ``gzip`` or ``encrypt``."""
    problem = _problem(chain)
    if problem is not None:
        raise ConfigError(f"transforms[{problem[0]}]: {problem[1]}", key=f"{key}[{problem[0]}]", file=file)


def _checked(chain: list[TransformConf]) -> list[TransformConf]:
    problem = _problem(chain)
    if problem is not None:
        raise ValueError(f"transforms[{problem[0]}]: {problem[1]}")
    return chain


TransformChain = Annotated[list[TransformConf], AfterValidator(_checked)]
"""A checked chain of transforms, for a config field (``transforms: TransformChain = []``)."""

_CHAIN: TypeAdapter[list[TransformConf]] = TypeAdapter(
    list[TransformConf], config=ConfigDict(hide_input_in_errors=True)
)
_TAGS = {"gunzip", "gzip", "encrypt", "decrypt", "untar", "unzip"}


def parse_chain(data: Any, *, key: str = "transforms", file: str | None = None) -> tuple[TransformConf, ...]:
    """The checked chain of ``data`` (a list of mappings); a :class:`ConfigError` with the key path
    (``transforms[2].recipients[0]``) otherwise."""
    try:
        chain = _CHAIN.validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(_message(err), key=_key(key, err["loc"]), file=file) from None
    check_chain(chain, key=key, file=file)
    return tuple(chain)


def _message(err: Any) -> str:
    if err["type"] == "value_error":
        return str(err["ctx"]["error"])
    return str(err["msg"])


def _key(key: str, loc: tuple[Any, ...]) -> str:
    parts = [key]
    for n, item in enumerate(loc):
        if n == 1 and item in _TAGS:  # the union member pydantic puts after the list index
            continue
        parts.append(f"[{item}]" if isinstance(item, int) else f".{item}")
    return "".join(parts)
