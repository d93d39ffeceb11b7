"""Where a copy job's files live: a URL or path resolved to a pyarrow file system.

Copy jobs move bytes in Python (``pyarrow.fs``) on Spark executors, so a :class:`Location` is pickled
into each task: it carries the file system (credentials included, as pyarrow pickles them) and never
shows a secret in ``repr``/``str``. Schemes:

- none or ``file://``: the local disk (relative paths against ``base_dir``, else the working directory);
- ``s3://``, ``s3a://``: ``S3FileSystem`` configured by friendly option keys (:data:`S3_OPTIONS`); without
  keys pyarrow reads the usual ``AWS_*`` variables and ``~/.aws`` files;
- ``gs://``, ``gcs://``: ``GcsFileSystem(**options)``; ``hdfs://``, ``viewfs://``, ``abfs://``, ``abfss://``:
  ``FileSystem.from_uri`` with the options as URI query parameters (pyarrow rejects the ones it lacks);
- anything else: fsspec's implementation of the scheme, if fsspec is installed.

Configured in a copy job as::

    target { url = "s3://lake/raw/orders", options { endpoint = "http://127.0.0.1:9000", region = us-east-1 } }
"""

from __future__ import annotations

import importlib
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import unquote, urlencode, urlsplit

import pyarrow.fs as pafs

from engine.copy.errors import FileSystemConfigError
from engine.platform.gcpause import gc_paused
from engine.storage.arrow import ArrowFs

__all__ = [
    "S3_OPTIONS",
    "FileSystemConfigError",
    "Listed",
    "Location",
    "ensure_parent",
    "list_files",
    "missing",
    "resolve",
]

S3_OPTIONS: dict[str, str] = {
    "endpoint": "URL of an S3-compatible server, e.g. http://127.0.0.1:9000 (default: AWS)",
    "region": "the bucket's region, e.g. us-east-1",
    "access_key": "access key id (default: AWS_ACCESS_KEY_ID, ~/.aws)",
    "secret_key": "secret access key (default: AWS_SECRET_ACCESS_KEY, ~/.aws)",
    "session_token": "session token of temporary credentials",
    "anonymous": "true: connect without credentials",
    "path_style": "true (the default): address buckets as endpoint/bucket; false: as bucket.endpoint",
    "force_virtual_addressing": "pyarrow's name for the opposite of path_style",
    "role_arn": "assume this role for temporary credentials",
    "session_name": "the assumed role's session name",
    "external_id": "external id the role requires",
    "request_timeout": "seconds a request may take",
    "connect_timeout": "seconds connecting may take",
}
"""The option keys of ``s3://`` locations, each with what it means."""

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$", re.DOTALL)
_S3 = ("s3", "s3a", "s3n")
_GCS = ("gs", "gcs")
_FROM_URI = ("hdfs", "viewfs", "abfs", "abfss")
_OBJECT_STORES = ("s3", "gcs")  # pyarrow type names of stores without real directories
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Location:
    """A directory or file on a file system, ready to ship to executors (picklable)."""

    url: str
    """The URL as configured, passwords masked: for messages."""
    fs: pafs.FileSystem = field(hash=False)  # pyarrow file systems compare but do not hash
    path: str
    """The path within ``fs``: no scheme, no trailing slash (``bucket/key`` on object stores)."""
    local: bool
    """A local disk path: os-level attributes (chmod, chown, utime) apply."""
    prefix: str = ""
    """What :meth:`display` puts before a path (``s3://``, ``hdfs://namenode:8020``; empty when local)."""

    def join(self, *parts: str) -> str:
        """The path within ``fs`` of ``parts`` below this location; ``..`` is refused (a part may not escape)."""
        segments = [s for part in parts for s in part.split("/") if s not in ("", ".")]
        if ".." in segments:
            raise ValueError(f"path parts {parts!r} below {self.url} contain `..`")
        if not segments:
            return self.path
        return "/".join([self.path.rstrip("/"), *segments])

    def display(self, path: str) -> str:
        """``path`` (within ``fs``) as a full URL for messages: ``s3://bucket/key`` or the local path."""
        return path if self.local else self.prefix + path

    @property
    def files(self) -> ArrowFs:
        """The commit steps' :class:`~engine.storage.filesystem.FileSystem` of this location."""
        return ArrowFs(self.fs, local=self.local)

    @property
    def object_store(self) -> bool:
        """Directories are only key prefixes here: nothing to create, nothing to set permissions on."""
        return str(self.fs.type_name) in _OBJECT_STORES

    def __repr__(self) -> str:
        return f"Location({self.url!r}, fs={self.fs.type_name}, path={self.path!r})"

    __str__ = __repr__


def resolve(url: str, options: Mapping[str, Any] | None = None, *, base_dir: str | None = None) -> Location:
    """The :class:`Location` of ``url`` (a path or ``scheme://...``), its file system built from ``options``."""
    opts = dict(options or {})
    shown = _mask(url)
    found = _URL.match(url)
    scheme = found.group(1).lower() if found else ""
    rest = found.group(2) if found else url
    if scheme in ("", "file"):
        return _local(shown, rest if not scheme else _file_url_path(url, shown), opts, base_dir)
    if scheme in _S3:
        return _s3(shown, scheme, rest, opts)
    if scheme in _GCS:
        return _gcs(shown, scheme, rest, opts)
    if scheme in _FROM_URI:
        return _from_uri(url, shown, scheme, opts)
    return _fsspec(url, shown, scheme, opts)


class Listed(NamedTuple):
    """A listed file: its path within the file system, size and modification time (ns)."""

    path: str
    size: int
    mtime_ns: int


_FILE = pafs.FileType.File


def list_files(loc: Location, root: str, *, ordered: bool = True) -> list[Listed]:
    """Every file below ``root`` (a directory path within ``loc.fs``), recursively, sorted by path
    unless not ``ordered``; none if ``root`` does not exist. One listing call: on object stores
    that is a paged listing of the prefix; on a local disk ``os.scandir`` (directory symlinks are
    not followed)."""
    if loc.local:
        found: list[Listed] = []
        if os.path.isdir(root):
            with gc_paused():  # a local scan is mostly CPU: objects per file, none cyclic
                _scan(root.rstrip("/") or "/", found)
                if ordered:
                    found.sort()
        elif os.path.lexists(root):
            raise NotADirectoryError(f"cannot list {root}: not a directory")
        return found
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    infos = loc.fs.get_file_info(selector)  # the wait on the store, with the collector on
    with gc_paused():
        files = [Listed(str(i.path), int(i.size or 0), int(i.mtime_ns or 0)) for i in infos if i.type == _FILE]
        if ordered:
            files.sort()
        return files


def _scan(directory: str, out: list[Listed]) -> None:
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _scan(entry.path, out)
            elif entry.is_file():
                st = entry.stat()
                out.append(Listed(entry.path, st.st_size, st.st_mtime_ns))


def missing(loc: Location, path: str) -> bool:
    """Whether nothing (neither file nor directory) is at ``path`` within ``loc.fs``."""
    return bool(loc.fs.get_file_info(path).type == pafs.FileType.NotFound)


def ensure_parent(loc: Location, path: str, known: set[str]) -> list[str]:
    """Create the missing parent directories of ``path``; return those created, outermost first.

    ``known`` holds directories known to exist (updated here), so files in one directory cost one check.
    Object stores have no directories: nothing is created there. Two tasks racing may both report a
    directory as created (creating an existing directory is no error)."""
    if loc.object_store:
        return []
    absent: list[str] = []
    parent = posixpath.dirname(path)
    while parent and parent not in known:
        kind = loc.fs.get_file_info(parent).type
        if kind == pafs.FileType.Directory:
            break
        if kind == pafs.FileType.File:
            raise NotADirectoryError(f"cannot create a directory at {loc.display(parent)}: a file is there")
        absent.append(parent)
        up = posixpath.dirname(parent)
        parent = "" if up == parent else up
    if parent:
        known.add(parent)
    for directory in reversed(absent):
        loc.fs.create_dir(directory, recursive=False)
        known.add(directory)
    return absent[::-1]


def _mask(url: str) -> str:
    """``url`` with a password in its user info replaced by ``***``."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://[^/@:]*):[^/@]*@", r"\1:***@", url)


def _local(shown: str, path: str, opts: dict[str, Any], base_dir: str | None) -> Location:
    if opts:
        raise FileSystemConfigError(f"local path {shown} takes no options (got {sorted(opts)})", url=shown)
    path = os.path.expanduser(path)
    full = os.path.abspath(os.path.join(base_dir or os.getcwd(), path))
    return Location(shown, pafs.LocalFileSystem(), full, True)


def _file_url_path(url: str, shown: str) -> str:
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise FileSystemConfigError(f"file URL {shown} names host `{parts.netloc}`: only local files", url=shown)
    return unquote(parts.path)


def _bucket_path(shown: str, scheme: str, rest: str) -> str:
    """``bucket/key`` of ``scheme://bucket/key`` (keys may hold ``?`` and ``#``: no URL parsing)."""
    bucket, _, key = rest.partition("/")
    if "@" in bucket:
        raise FileSystemConfigError(f"{shown}: put credentials in the options, not in the URL", url=shown)
    if not bucket:
        raise FileSystemConfigError(f"{shown} names no bucket ({scheme}://bucket/key)", url=shown)
    return "/".join([bucket, *(s for s in key.split("/") if s)])


def _s3(shown: str, scheme: str, rest: str, opts: dict[str, Any]) -> Location:
    path = _bucket_path(shown, scheme, rest)
    fs = pafs.S3FileSystem(**_s3_kwargs(opts, shown))
    return Location(shown, fs, path, False, f"{scheme}://")


def _s3_kwargs(opts: Mapping[str, Any], shown: str = "s3") -> dict[str, Any]:
    """``S3FileSystem`` keyword arguments for the friendly option keys of :data:`S3_OPTIONS`."""
    unknown = sorted(set(opts) - set(S3_OPTIONS))
    if unknown:
        allowed = ", ".join(sorted(S3_OPTIONS))
        raise FileSystemConfigError(
            f"unknown S3 option `{unknown[0]}` for {shown}; allowed: {allowed}", url=shown, option=unknown[0]
        )
    kw: dict[str, Any] = {}
    for key in ("region", "access_key", "secret_key", "session_token", "role_arn", "session_name", "external_id"):
        if opts.get(key) is not None:
            kw[key] = str(opts[key])
    for key in ("request_timeout", "connect_timeout"):
        if opts.get(key) is not None:
            kw[key] = _number(opts[key], key, shown)
    if opts.get("anonymous") is not None:
        kw["anonymous"] = _flag(opts["anonymous"], "anonymous", shown)
    if opts.get("path_style") is not None:
        kw["force_virtual_addressing"] = not _flag(opts["path_style"], "path_style", shown)
    if opts.get("force_virtual_addressing") is not None:
        kw["force_virtual_addressing"] = _flag(opts["force_virtual_addressing"], "force_virtual_addressing", shown)
    if opts.get("endpoint"):
        kw.update(_endpoint(str(opts["endpoint"]), shown))
    if ("access_key" in kw) != ("secret_key" in kw):
        raise FileSystemConfigError(f"{shown}: give access_key and secret_key together", url=shown)
    return kw


def _endpoint(endpoint: str, shown: str) -> dict[str, str]:
    """``http://host:port`` -> ``endpoint_override=host:port, scheme=http`` (no scheme: https)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise FileSystemConfigError(
            f"S3 endpoint `{endpoint}` for {shown} is not http(s)://host[:port]", url=shown, option="endpoint"
        )
    return {"endpoint_override": parts.netloc, "scheme": parts.scheme}


def _flag(value: Any, key: str, shown: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in _TRUE + _FALSE:
        return str(value).strip().lower() in _TRUE
    raise FileSystemConfigError(f"option `{key}` for {shown} is not true/false: {value!r}", url=shown, option=key)


def _number(value: Any, key: str, shown: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise FileSystemConfigError(
            f"option `{key}` for {shown} is not a number: {value!r}", url=shown, option=key
        ) from exc


def _gcs(shown: str, scheme: str, rest: str, opts: dict[str, Any]) -> Location:
    path = _bucket_path(shown, scheme, rest)
    try:
        fs = pafs.GcsFileSystem(**opts)
    except TypeError as exc:
        raise FileSystemConfigError(f"bad GCS options for {shown}: {exc}", url=shown) from exc
    return Location(shown, fs, path, False, f"{scheme}://")


def _from_uri(url: str, shown: str, scheme: str, opts: dict[str, Any]) -> Location:
    query = urlencode({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in opts.items()})
    if query:
        url = f"{url}{'&' if '?' in url else '?'}{query}"
    try:
        fs, path = pafs.FileSystem.from_uri(url)
    except ValueError as exc:  # pyarrow's ArrowInvalid: an unknown query parameter, a malformed URI
        raise FileSystemConfigError(f"cannot open {shown}: {exc}", url=shown) from exc
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    prefix = f"{scheme}://{netloc}" if scheme in ("hdfs", "viewfs") else f"{scheme}://"
    return Location(shown, fs, str(path).rstrip("/") or "/", False, prefix)


def _fsspec(url: str, shown: str, scheme: str, opts: dict[str, Any]) -> Location:
    try:
        fsspec: Any = importlib.import_module("fsspec")  # optional: not every deployment has it
    except ImportError as exc:
        raise FileSystemConfigError(
            f"no file system for scheme `{scheme}` ({shown}): pyarrow knows file, "
            f"{', '.join(_S3 + _GCS + _FROM_URI)}; other schemes need the fsspec package",
            url=shown,
        ) from exc
    try:
        impl = fsspec.filesystem(scheme, **opts)
    except (ValueError, TypeError, ImportError) as exc:
        raise FileSystemConfigError(f"cannot open {shown} through fsspec: {exc}", url=shown) from exc
    path = str(impl._strip_protocol(url)).rstrip("/") or "/"
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(impl))
    return Location(shown, fs, path, False, f"{scheme}://")
