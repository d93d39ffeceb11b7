"""Encrypted config values: ``ENC(<token>)``, decrypted at run time with the deployment's master key.

A value written ``ENC(...)`` anywhere in a run's composed config (a job file, the config tree, an
override) is a Fernet token of the plaintext: AES-128-CBC with an HMAC-SHA256, from the
``cryptography`` package, made with the master key in the file ``ENGINE_MASTER_KEY_FILE`` names.
``mode=new_key`` writes a new key there (readable by its owner only); ``mode=encrypt`` reads a
value on standard input and prints its ``ENC(...)`` form. Neither needs a job or Spark.

A run decrypts every such value before it validates its config (:meth:`Secrets.reveal`). A wrong
key, a tampered or truncated token, or no key at all is a :class:`~engine.errors.ConfigError`
naming the value's key path and the file it is in (a connection file's values are revealed as
that file is read, :meth:`Secrets.reveal_file`), never its plaintext. The plaintexts a run revealed are masked
(:data:`~engine.config.redact.REDACTED`) wherever the run writes text: its log lines, its error
messages and its summary (:meth:`Secrets.mask`, :meth:`Secrets.masking_logs`).
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from engine.config.redact import REDACTED
from engine.errors import ConfigError

__all__ = ["MASTER_KEY_ENV", "Secrets", "encrypt", "key_command", "master_key", "new_key_file"]

log = logging.getLogger(__name__)

MASTER_KEY_ENV = "ENGINE_MASTER_KEY_FILE"
"""The environment variable naming the file that holds the master key (a Fernet key, one line)."""
_ENC = re.compile(r"^ENC\((?P<token>.*)\)$", re.DOTALL)
MIN_MASKED = 4
"""A plaintext shorter than this is not masked (replacing every ``1`` or ``a`` in the output would
garble run ids and messages); the run warns, naming its key."""


def master_key(env: dict[str, str] | None = None) -> Fernet:
    """The master key the file :data:`MASTER_KEY_ENV` names; a :class:`ConfigError` naming the
    variable or the file (never what it holds) when there is none or it is not a key."""
    path = (os.environ if env is None else env).get(MASTER_KEY_ENV)
    if not path:
        raise ConfigError(f"the config holds ENC(...) values but {MASTER_KEY_ENV} is not set (the master key's file)")
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the master key: {MASTER_KEY_ENV}={path}: {exc.strerror}") from None
    try:
        return Fernet(text.encode())
    except ValueError:
        raise ConfigError(f"the file {MASTER_KEY_ENV}={path} holds no master key (mode=new_key writes one)") from None


def new_key_file(path: str) -> None:
    """Write a new master key to ``path``, readable and writable by its owner only; an existing
    file is never overwritten (the values encrypted with it would be lost)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(f"{path} exists: a master key is never overwritten ({MASTER_KEY_ENV})") from None
    except OSError as exc:
        raise ConfigError(f"cannot create the master key file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w") as out:
        out.write(Fernet.generate_key().decode() + "\n")


def encrypt(plaintext: str, key: Fernet) -> str:
    """``plaintext``'s ``ENC(...)`` form under ``key``."""
    return f"ENC({key.encrypt(plaintext.encode()).decode()})"


class Secrets:
    """What one run decrypted: :meth:`reveal` a composed config, then :meth:`mask` any text it
    writes. ``key`` is read once, when the first ``ENC(...)`` value is met."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env
        self._key: Fernet | None = None
        self._plaintexts: set[str] = set()

    @property
    def revealed(self) -> bool:
        return bool(self._plaintexts)

    def reveal(self, data: Any, key: str = "") -> Any:
        """A copy of ``data`` with every ``ENC(...)`` string decrypted; a :class:`ConfigError`
        naming the key path of the first value that does not decrypt."""
        if isinstance(data, dict):
            return {k: self.reveal(v, f"{key}.{k}" if key else str(k)) for k, v in data.items()}
        if isinstance(data, list):
            return [self.reveal(v, f"{key}[{i}]") for i, v in enumerate(data)]
        if isinstance(data, str) and (found := _ENC.match(data.strip())):
            return self._decrypt(found["token"], key)
        return data

    def reveal_file(self, data: dict[str, Any], file: str) -> dict[str, Any]:
        """:meth:`reveal` of what the config file ``file`` holds (a connection's): an error names
        the key in that file and the file."""
        try:
            revealed = self.reveal(data)
        except ConfigError as exc:
            raise exc.in_file(file) from None  # the key's error already hides what it held
        assert isinstance(revealed, dict)
        return revealed

    def _decrypt(self, token: str, key: str) -> str:
        if self._key is None:
            try:
                self._key = master_key(self._env)
            except ConfigError as exc:  # the first ENC(...) value met is the one that needs the key
                raise exc.at(key) from None
        try:
            plaintext = self._key.decrypt(token.strip().encode()).decode()
        except (InvalidToken, UnicodeDecodeError):
            raise ConfigError(
                "cannot decrypt this ENC(...) value: it was encrypted with another master key, "
                f"or it was changed ({MASTER_KEY_ENV})",
                key=key,
            ) from None
        if len(plaintext) >= MIN_MASKED:
            self._plaintexts.add(plaintext)
            self._plaintexts.update(f(plaintext)[1:-1] for f in (repr, json.dumps))  # escaped as printed
        elif plaintext:
            log.warning("%s: a decrypted value of under %d characters is not masked in the output", key, MIN_MASKED)
        return plaintext

    def mask(self, value: Any) -> Any:
        """``value`` (a text, or dicts and lists of them) with every revealed plaintext replaced."""
        if not self._plaintexts:
            return value
        if isinstance(value, str):
            for plaintext in sorted(self._plaintexts, key=len, reverse=True):  # a secret inside another
                value = value.replace(plaintext, REDACTED)
            return value
        if isinstance(value, dict):
            return {k: self.mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.mask(v) for v in value]
        return value

    @contextmanager
    def masking_logs(self) -> Iterator[None]:
        """While inside, every handler of the root logger masks the revealed plaintexts."""
        masking = _MaskingFilter(self)
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(masking)
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(masking)


class _MaskingFilter(logging.Filter):
    def __init__(self, secrets: Secrets) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets.revealed:
            return True
        try:
            text = record.getMessage()
        except Exception:  # a bad format: the handler reports it (logging's handleError), not the run
            return True
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        masked = self.secrets.mask(text)
        if masked != text:
            record.msg, record.args = masked, None
        if record.exc_text:
            record.exc_text = self.secrets.mask(record.exc_text)
        return True


def key_command(argv: list[str]) -> int | None:
    """``mode=new_key`` or ``mode=encrypt`` in ``argv``: run it and return its exit code (0, or 2
    with one message on stderr); ``None`` for any other command line."""
    if "mode=new_key" in argv:
        action = _new_key
    elif "mode=encrypt" in argv:
        action = _encrypt_stdin
    else:
        return None
    try:
        action()
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    return 0


def _new_key() -> None:
    path = os.environ.get(MASTER_KEY_ENV)
    if not path:
        raise ConfigError(f"set {MASTER_KEY_ENV} to the file the new master key goes to")
    new_key_file(path)
    print(f"a new master key is in {path} (keep it out of version control; back it up)", file=sys.stderr)


def _encrypt_stdin() -> None:
    """The value is read on standard input, not from the command line (which the shell's history
    and ``ps`` show); one trailing newline is not part of it."""
    key = master_key()
    value = getpass.getpass("the value to encrypt: ") if sys.stdin.isatty() else sys.stdin.read()
    value = value.removesuffix("\n").removesuffix("\r")
    if not value:
        raise ConfigError("nothing to encrypt: give the value on standard input")
    print(encrypt(value, key), flush=True)
