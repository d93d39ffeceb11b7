"""Whole small objects in one directory, on a local disk or an object store.

The run lease (:mod:`engine.commit.lease`) is built on these five operations, so it holds wherever
they are atomic: :meth:`Blobs.create` succeeds for exactly one of several writers of the same name
(``O_EXCL`` on a disk; a conditional put, ``If-None-Match: *``, on S3, GCS and Azure, through
obstore), and :meth:`Blobs.write` replaces a whole object at once (rename on a disk; a put is
atomic on object stores).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.storage.options import CREDENTIALS_FROM, local_path, store_options


class Blobs(ABC):
    """Named objects directly under one location (``where``: for messages)."""

    where: str

    @abstractmethod
    def names(self) -> list[str]:
        """The names of the objects here (none when the location does not exist)."""

    @abstractmethod
    def read(self, name: str) -> bytes | None:
        """The object's bytes, ``None`` when it does not exist."""

    @abstractmethod
    def create(self, name: str, data: bytes) -> bool:
        """Create ``name`` unless it exists: True for exactly one of several writers racing."""

    @abstractmethod
    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` as a whole (readers see the old or the new bytes)."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Delete ``name``; nothing if it is gone."""

    def tidy(self, levels: int) -> None:
        """Remove this directory and up to ``levels - 1`` parents if they are empty (a disk's)."""


def blobs(location: str, options: Mapping[str, str] | None = None, *, via: str = CREDENTIALS_FROM) -> Blobs:
    """The :class:`Blobs` of ``location``: a local path (or ``file:`` URL), else an object store URL
    (``s3a://bucket/prefix``) reached with ``options`` (obstore's keys; default: the environment's
    settings), which came from ``via`` (for messages)."""
    local = local_path(location)
    if local is not None:
        return LocalBlobs(Path(local))
    return StoreBlobs(location, store_options(location) if options is None else options, via=via)


class LocalBlobs(Blobs):
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.where = str(directory)

    def names(self) -> list[str]:
        try:  # (another process may remove the directory meanwhile: tidy)
            return sorted(p.name for p in self.dir.iterdir() if p.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read(self, name: str) -> bytes | None:
        try:
            return (self.dir / name).read_bytes()
        except FileNotFoundError:
            return None

    def create(self, name: str, data: bytes) -> bool:
        for _ in range(100):  # another process may remove the empty directory meanwhile (tidy)
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, FileNotFoundError):  # made, or a parent removed, by others meanwhile
                continue
            try:
                fd = os.open(self.dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                break
            except FileExistsError:
                return False
            except FileNotFoundError:
                continue
        else:
            raise FileNotFoundError(f"cannot create {self.dir / name}: its directory keeps disappearing")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return True

    def write(self, name: str, data: bytes) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.dir / name)

    def delete(self, name: str) -> None:
        (self.dir / name).unlink(missing_ok=True)

    def tidy(self, levels: int) -> None:
        d = self.dir
        for _ in range(levels):
            try:
                d.rmdir()
            except OSError:
                return
            d = d.parent


class StoreBlobs(Blobs):
    """An object store prefix through obstore (the Rust ``object_store`` delta-rs uses too). A
    missing bucket, refused credentials or an unreachable endpoint is a :class:`ConfigError`
    naming the location, the endpoint and where the credentials came from."""

    def __init__(self, url: str, options: Mapping[str, str], *, via: str = CREDENTIALS_FROM) -> None:
        from obstore.store import from_url

        self.where = url.rstrip("/")
        self._via = via
        self._endpoint = options.get("aws_endpoint") or "the provider's default endpoint"
        config = {k: v for k, v in options.items() if k != "aws_allow_http"}
        client: dict[str, Any] = {"allow_http": True} if options.get("aws_allow_http") == "true" else {}
        try:
            self._store = from_url(self.where, config=config or None, client_options=client or None)  # type: ignore[call-overload,arg-type]
        except Exception as exc:  # an unknown scheme or option: obstore says which
            raise ConfigError(f"cannot open {self.where}: {exc}") from None

    def _failed(self, exc: Exception) -> Exception:
        from obstore.exceptions import BaseError, PermissionDeniedError, UnauthenticatedError

        text = str(exc)
        bucket = self.where.split("://", 1)[1].split("/", 1)[0]
        if "NoSuchBucket" in text:
            reason = f"bucket `{bucket}` does not exist at {self._endpoint}"
        elif isinstance(exc, (PermissionDeniedError, UnauthenticatedError)) or any(
            code in text for code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403 Forbidden")
        ):
            reason = f"access to bucket `{bucket}` at {self._endpoint} was refused: check the credentials"
        elif "error sending request" in text or "Connect" in text or "dns error" in text:
            reason = f"cannot reach {self._endpoint}"
        elif isinstance(exc, BaseError):
            reason = text.splitlines()[0][:300]
        else:
            return exc
        return ConfigError(f"{self.where}: {reason} (credentials and endpoint: {self._via})")

    def names(self) -> list[str]:
        import obstore

        found = []
        try:
            for page in obstore.list(self._store):
                found += [str(meta["path"]) for meta in page]
        except Exception as exc:
            raise self._failed(exc) from None
        return sorted(n for n in found if "/" not in n)

    def read(self, name: str) -> bytes | None:
        import obstore

        try:
            return bytes(obstore.get(self._store, name).bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._failed(exc) from None

    def create(self, name: str, data: bytes) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            obstore.put(self._store, name, data, mode="create")
        except (AlreadyExistsError, PreconditionError):
            return False
        except Exception as exc:
            raise self._failed(exc) from None
        return True

    def write(self, name: str, data: bytes) -> None:
        import obstore

        try:
            obstore.put(self._store, name, data)
        except Exception as exc:
            raise self._failed(exc) from None

    def delete(self, name: str) -> None:
        import obstore

        try:
            obstore.delete(self._store, name)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._failed(exc) from None
