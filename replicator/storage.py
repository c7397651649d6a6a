"""Where a landing zone lives: a local directory, or a bucket of an object store.

Everything the landing zone writes or reads goes through a ``Store`` by *key*: a relative,
``/``-separated name such as ``_manifests/00000000000000000001.json`` or
``shop/orders/part-00000000000000000001.parquet``. Two kinds exist:

``LocalStore`` (``sink.root`` a path)
    POSIX files. ``write`` replaces a file atomically and durably (hidden temp name, fsync,
    ``rename(2)``, fsync of the directory); data files are written under a hidden staged name
    and ``publish``-ed by a rename once their batch's manifest is durable.

``ObjectStore`` (``sink.root`` an URL: ``s3://bucket/prefix``, ``gs://``, ``abfs://``,
``hdfs://``)
    pyarrow's filesystems. An object appears whole when its upload completes or not at all, so
    ``write`` is one PUT and a data file is written straight under its final name
    (``renames`` is False: nothing is staged, ``publish`` has nothing to do). What makes a
    file committed is only that a manifest names it; readers go by the manifests.

Errors are ``OSError`` as the filesystem raised them (the callers turn them into
``SinkError``/``IntegrityError`` naming what they were doing). ``location`` is the root as the
user wrote it, without credentials, for messages: a store never prints a secret.

The few small objects two writers must not race on (leases, commit records) are written with
``create`` and ``replace``: conditional PUTs on ``s3://`` (``conditional_s3``: pyarrow cannot
send ``If-None-Match``/``If-Match``), a look then a write where a store has none
(``conditional`` says why).

This module imports nothing of ours but ``errors``, ``durable`` and (for ``s3://`` only)
``conditional_s3``: the daemon's sink and the Spark side (``spark/``) both use it. It imports
``pyarrow.fs`` only where a filesystem is made or asked, so that a command that only names
paths (``replicator --help``, ``status`` on a local landing zone) does not load pyarrow.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import posixpath
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

from .durable import fsync_dir
from .errors import ConfigError

__all__ = [
    "LocalStore",
    "ObjectStore",
    "ObjectStoreOptions",
    "Output",
    "Store",
    "is_url",
    "carries_credentials",
    "local_output",
    "open_store",
    "redact_url",
]

_FILE_BUFFER = 1 << 20
SYNC_WORKERS = 16  # folders fsync'd at once (LocalStore.sync)
READ_AHEAD = 16  # reads in flight at once (ObjectStore.each): each a round trip
_T = TypeVar("_T")


def is_url(root: str) -> bool:
    """``sink.root`` names an object store (``scheme://...``; ``file://`` is a local path)."""
    scheme = urlsplit(root).scheme
    return len(scheme) > 1 and "://" in root and scheme != "file"


def redact_url(root: str) -> str:
    """``root`` without user, password, query or fragment (where credentials could hide).
    Parsed by hand, not by ``urlsplit``: a secret with a ``/`` in it (as AWS secret keys
    have) ends the netloc early and would come out in the path, or as a "port"."""
    if not is_url(root):
        return root
    scheme, _, rest = root.partition("://")
    rest = rest.rpartition("@")[2]
    return f"{scheme}://{rest.partition('?')[0].partition('#')[0]}"


def carries_credentials(url: str) -> bool:
    """``url`` has a user or password (anything before an ``@``), a query or a fragment."""
    rest = url.partition("://")[2]
    return any(c in rest for c in "@?#")


def _check_key(key: str) -> str:
    if not key or key.startswith("/") or ".." in key.split("/") or "\\" in key:
        raise ValueError(f"not a landing zone key: {key!r}")
    return key


class Output(ABC):
    """A file being written: ``write`` bytes, then ``close`` (durable and visible under its
    key; returns its size) or ``abort`` (nothing left behind that a reader could take for
    data)."""

    name: str  # where it goes, for messages

    @abstractmethod
    def write(self, data: bytes | memoryview) -> int: ...

    @abstractmethod
    def close(self) -> int: ...

    @abstractmethod
    def abort(self) -> None: ...

    @property
    @abstractmethod
    def stream(self) -> Any:
        """What ``pyarrow.parquet.ParquetWriter`` writes to."""


class Store(ABC):
    """A landing zone's files by key (module docstring)."""

    location: str
    renames: bool  # True: stage under a hidden name, then rename into place (POSIX)

    @abstractmethod
    def read(self, key: str) -> bytes:
        """The whole file (``FileNotFoundError`` when there is none)."""

    def each(self, work: Callable[[str], _T], keys: Sequence[str]) -> Iterator[_T]:
        """``work(key)`` for each key, in order; one that fails raises when its turn comes
        (the results before it were yielded). ``work`` reads the store: an object store runs
        several at once."""
        for key in keys:
            yield work(key)

    def read_each(self, keys: Sequence[str]) -> Iterator[bytes]:
        """``read`` of each key, in order (``each``)."""
        return self.each(self.read, keys)

    @abstractmethod
    def exists(self, key: str) -> bool: ...

    @abstractmethod
    def size(self, key: str) -> int:
        """Bytes in the file (``FileNotFoundError`` when there is none)."""

    @abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Replace the file atomically and durably: a reader sees the old or the new content."""

    @abstractmethod
    def list(self, prefix: str = "") -> list[str]:
        """Keys of every file under the folder ``prefix`` (recursive, sorted; none when it
        does not exist)."""

    @abstractmethod
    def list_sizes(self, prefix: str = "") -> dict[str, int]:
        """``list`` with each file's size in bytes, as the listing gives it (one listing of
        an object store; no request per file)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the file; one that is not there is fine."""

    @abstractmethod
    def open_output(self, key: str) -> Output:
        """Write a new file at ``key`` (replacing one that is there when it closes)."""

    @abstractmethod
    def staged(self, key: str) -> str:
        """Where a data file whose final key is ``key`` is written before its commit."""

    @abstractmethod
    def publish(self, staged: str, key: str) -> None:
        """Make a staged file visible under its final key, durably."""

    @abstractmethod
    def sync(self, folders: set[str]) -> None:
        """Make new, renamed and removed entries of these folders durable."""

    def published_at(self, key: str) -> float | None:
        """When ``key`` became visible under its name, where a rename publishes it (maybe
        long after it was written): None where keys are written in place, or it is gone."""
        return None

    @abstractmethod
    def filesystem(self) -> tuple[Any, str]:
        """(``pyarrow.fs.FileSystem``, the root's path in it), for readers of the files."""

    @abstractmethod
    def uri(self, key: str) -> str:
        """The file's address for other readers (a path, or the store's URL)."""

    def ensure(self) -> None:
        """Make the root exist (a local directory; object stores need nothing)."""
        return None

    # -- conditional writes, for the objects two writers must not race on (leases, commit
    # records). Atomic only where ``conditional()`` says so; elsewhere a look, then a write.

    def conditional(self) -> str | None:
        """None when ``create`` and ``replace`` are atomic here; else why they are not."""
        return "a local directory is guarded by flock(2), not by conditional writes"

    def create(self, key: str, data: bytes) -> str | None:
        """Write ``key`` only when it does not exist (``FileExistsError`` when it does);
        returns the version tag ``replace`` takes (None where there are none)."""
        if self.exists(key):
            raise FileExistsError(f"{self.uri(key)} exists")
        self.write(key, data)
        return None

    def read_tagged(self, key: str) -> tuple[bytes, str | None]:
        """``read``, with the version tag ``replace`` takes (None where there are none)."""
        return self.read(key), None

    def replace(self, key: str, data: bytes, tag: str | None) -> str | None:
        """Replace ``key`` only while it is still the version ``tag`` (``FileExistsError``
        when it changed or is gone); returns the new tag. Without tags: a plain ``write``."""
        self.write(key, data)
        return None

    def __str__(self) -> str:
        return self.location  # never with credentials (redact_url)


class _LocalOutput(Output):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self._file: IO[bytes] | None = open(path, "wb", buffering=_FILE_BUFFER)  # noqa: SIM115

    @property
    def stream(self) -> Any:
        return self._file

    def write(self, data: bytes | memoryview) -> int:
        assert self._file is not None
        return self._file.write(data)

    def close(self) -> int:
        handle, self._file = self._file, None
        if handle is None:
            raise ValueError(f"{self.path} is closed already")
        try:
            handle.flush()
            os.fsync(handle.fileno())
            return os.fstat(handle.fileno()).st_size
        finally:
            handle.close()

    def abort(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)


class LocalStore(Store):
    """A landing zone in a local (or mounted) directory."""

    renames = True

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.location = str(root)
        self._base = str(self.root)

    def path(self, key: str) -> Path:
        return self.root / _check_key(key)

    def _os_path(self, key: str) -> str:
        """``path`` as a string, for the calls that only hand it to the OS: a ``Path`` costs
        more to make than the stat or read it is made for, and a start reads every
        manifest and stats every file."""
        return f"{self._base}/{_check_key(key)}"

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def read(self, key: str) -> bytes:
        with open(self._os_path(key), "rb") as handle:
            return handle.read()

    def exists(self, key: str) -> bool:
        return os.path.exists(self._os_path(key))

    def size(self, key: str) -> int:
        return os.stat(self._os_path(key)).st_size

    def write(self, key: str, data: bytes) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        fsync_dir(path.parent)

    def list(self, prefix: str = "") -> list[str]:
        base = self.path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        keys: list[str] = []
        for folder, _, names in os.walk(base):
            rel = Path(folder).relative_to(self.root).as_posix()
            keys.extend(name if rel == "." else f"{rel}/{name}" for name in names)
        return sorted(keys)

    def list_sizes(self, prefix: str = "") -> dict[str, int]:
        sizes: dict[str, int] = {}
        for key in self.list(prefix):
            with contextlib.suppress(FileNotFoundError):  # gone since the listing
                sizes[key] = os.stat(f"{self._base}/{key}").st_size
        return sizes

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def open_output(self, key: str) -> Output:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        return _LocalOutput(path)

    def staged(self, key: str) -> str:
        folder, name = posixpath.split(key)
        return posixpath.join(folder, f".{name}.tmp")

    def publish(self, staged: str, key: str) -> None:
        os.replace(self.path(staged), self.path(key))

    def published_at(self, key: str) -> float | None:
        # a rename changes the inode's ctime, not its mtime: when the name came
        try:
            return os.stat(self._os_path(key)).st_ctime
        except FileNotFoundError:
            return None

    def sync(self, folders: set[str]) -> None:
        """Several at once: a batch spread over many tables has a folder per table, and each
        fsync mostly waits on the disk (see ``sink.landing._close_all``)."""
        paths = [self.path(folder) if folder else self.root for folder in sorted(folders)]
        if len(paths) < 2:
            for path in paths:
                fsync_dir(path)
            return
        with ThreadPoolExecutor(min(SYNC_WORKERS, len(paths))) as pool:
            list(pool.map(fsync_dir, paths))

    def filesystem(self) -> tuple[Any, str]:
        import pyarrow.fs as pafs  # noqa: PLC0415 - see the module's last paragraph

        return pafs.LocalFileSystem(), str(self.root.absolute())

    def uri(self, key: str) -> str:
        return str(self.path(key))


@dataclass(frozen=True, slots=True)
class ObjectStoreOptions:
    """How to reach an object store beyond its URL. Credentials come from the usual chains
    (environment, profile, instance role) unless given here; none of these is ever shown.
    Without an endpoint, ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` names one, as for
    the AWS SDKs."""

    endpoint: str | None = None  # S3-compatible stores: http(s)://host:port
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None

    def s3_arguments(self) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            if parts.scheme in ("http", "https"):
                args["scheme"] = parts.scheme
                args["endpoint_override"] = parts.netloc + parts.path.rstrip("/")
            else:
                args["endpoint_override"] = self.endpoint
            # S3-compatible servers rarely serve virtual-host-style bucket names
            args["force_virtual_addressing"] = False
        if self.region:
            args["region"] = self.region
        if self.access_key:
            args["access_key"] = self.access_key
            args["secret_key"] = self.secret_key or ""
            if self.session_token:
                args["session_token"] = self.session_token
        return args


class _ObjectOutput(Output):
    def __init__(self, stream: Any, delete: Any, name: str) -> None:
        self._stream = stream
        self._delete = delete
        self.name = name

    @property
    def stream(self) -> Any:
        return self._stream

    def write(self, data: bytes | memoryview) -> int:
        return int(self._stream.write(data))

    def close(self) -> int:
        size = int(self._stream.tell())
        self._stream.close()  # the upload completes: the object appears whole
        return size

    def abort(self) -> None:
        # pyarrow's streams cannot abandon an upload: closing completes it, and the partial
        # object is deleted at once (or, if that fails too, by the next recovery: no
        # manifest names it)
        with contextlib.suppress(Exception):
            if not self._stream.closed:
                self._stream.close()
        with contextlib.suppress(Exception):
            self._delete()


class ObjectStore(Store):
    """A landing zone under ``scheme://bucket/prefix`` (module docstring)."""

    renames = False

    def __init__(self, url: str, options: ObjectStoreOptions | None = None) -> None:
        import pyarrow.fs as pafs  # noqa: PLC0415

        self.location = redact_url(url)
        options = options or ObjectStoreOptions()
        if not options.endpoint:  # the AWS SDKs' variables (pyarrow's client does not read them)
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            if endpoint:
                options = replace(options, endpoint=endpoint)
        if carries_credentials(url):
            raise ConfigError(
                f"sink.root {self.location}: credentials or options in the URL are not read",
                hint="give credentials through the environment, a profile or the instance "
                "role, and the endpoint as sink.object_store.endpoint",
            )
        if options.endpoint and carries_credentials(options.endpoint):
            raise ConfigError(
                f"object store endpoint {redact_url(options.endpoint)}: credentials or options "
                "in the URL are not read",
                hint="give credentials as sink.object_store.access_key_env/secret_key_env",
            )
        parts = urlsplit(url)
        try:
            if parts.scheme == "s3":
                bucket_path = f"{parts.netloc}{parts.path}"
                self.fs = pafs.S3FileSystem(**options.s3_arguments())
                base = bucket_path
            else:
                self.fs, base = pafs.FileSystem.from_uri(url)
        except (OSError, ValueError, TypeError) as exc:  # pyarrow.ArrowInvalid is a ValueError
            raise ConfigError(
                f"sink.root {self.location} cannot be opened: {_quiet(exc, options)}",
                hint="sink.root takes a local path or s3://bucket/prefix (gs://, abfs://, "
                "hdfs:// as pyarrow reaches them)",
            ) from None
        self.base = base.strip("/")
        if not self.base:
            raise ConfigError(
                f"sink.root {self.location} names no bucket",
                hint="write s3://bucket/prefix",
            )
        # conditional_s3.ConditionalS3, made on first use (a closure: vars() shows no secret)
        self._connect_conditional = (
            (lambda: _conditional_s3(self.base.split("/", 1)[0], options))
            if parts.scheme == "s3"
            else None
        )
        self._client: Any = None  # that client, for reads (no probe: reading needs no writes)
        self._conditional: Any = None
        self._conditional_missing: str | None = None

    def ensure(self) -> None:
        """The bucket must exist (a prefix needs nothing): a missing one is named, with how
        to make it, instead of failing later on the first write as "access denied"."""
        import pyarrow.fs as pafs  # noqa: PLC0415

        bucket = self.base.split("/", 1)[0]
        try:
            found = self.fs.get_file_info(bucket)
        except OSError:
            return  # no right to look at the bucket itself: the first write tells
        if found.type == pafs.FileType.NotFound:
            scheme = urlsplit(self.location).scheme
            make = f"aws s3 mb s3://{bucket}" if scheme == "s3" else "the store's own tools"
            raise ConfigError(
                f"sink.root {self.location}: the bucket {bucket!r} does not exist",
                hint=f"create it ({make}; add --endpoint-url for an S3-compatible store), or "
                "correct the bucket name in sink.root",
            )

    # -- conditional writes (``conditional_s3``) --------------------------------------------

    def _conditional_client(self) -> Any:
        if self._conditional is None and self._conditional_missing is None:
            if self._connect_conditional is None:
                self._conditional_missing = (
                    f"pyarrow offers no conditional writes for {urlsplit(self.location).scheme}://"
                )
                return None
            client = self._s3_client()
            probe = f"_state/.conditional-write-probe-{uuid.uuid4().hex}"
            supported = client.probe(self._object_key(probe))
            if supported:
                self._conditional = client
            else:
                self._conditional_missing = (
                    "the store accepted a second If-None-Match: * PUT of one key, so it ignores "
                    "conditional writes"
                )
        return self._conditional

    def _s3_client(self) -> Any:
        if self._client is None and self._connect_conditional is not None:
            self._client = self._connect_conditional()
        return self._client

    def _object_key(self, key: str) -> str:
        return self._at(key).split("/", 1)[1]

    def conditional(self) -> str | None:
        self._conditional_client()
        return self._conditional_missing

    def create(self, key: str, data: bytes) -> str | None:
        client = self._conditional_client()
        if client is None:
            return super().create(key, data)
        return str(client.create(self._object_key(key), data))

    def read_tagged(self, key: str) -> tuple[bytes, str | None]:
        client = self._conditional_client()
        if client is None:
            return super().read_tagged(key)
        data, tag = client.read(self._object_key(key))
        return data, str(tag)

    def replace(self, key: str, data: bytes, tag: str | None) -> str | None:
        client = self._conditional_client()
        if client is None or tag is None:
            return super().replace(key, data, tag)
        return str(client.replace(self._object_key(key), data, tag))

    def _at(self, key: str) -> str:
        return f"{self.base}/{_check_key(key)}"

    def read(self, key: str) -> bytes:
        # One GET on S3: pyarrow's input stream asks the size first (HEAD), then the bytes
        # (a ranged GET), so an object replaced in between (the checkpoint, the lease) reads
        # as the new version cut at the old one's length.
        client = self._s3_client()
        if client is not None:
            return bytes(client.read(self._object_key(key))[0])
        with self.fs.open_input_stream(self._at(key)) as handle:
            return bytes(handle.read())

    def each(self, work: Callable[[str], _T], keys: Sequence[str]) -> Iterator[_T]:
        """As ``Store.each``, with up to ``READ_AHEAD`` keys in work at once: each read is a
        round trip of its own (a chain of manifests is thousands of them)."""
        if len(keys) < 2:
            yield from super().each(work, keys)
            return
        self._s3_client()  # made once, before the threads share it
        with ThreadPoolExecutor(READ_AHEAD) as pool:
            pending: deque[Future[_T]] = deque()
            ahead = iter(keys)
            try:
                for key in itertools.islice(ahead, READ_AHEAD):
                    pending.append(pool.submit(work, key))
                while pending:
                    done = pending.popleft().result()
                    following = next(ahead, None)
                    if following is not None:
                        pending.append(pool.submit(work, following))
                    yield done
            finally:
                for future in pending:
                    future.cancel()

    def exists(self, key: str) -> bool:
        import pyarrow.fs as pafs  # noqa: PLC0415

        info = self.fs.get_file_info(self._at(key))
        return bool(info.type == pafs.FileType.File)

    def size(self, key: str) -> int:
        import pyarrow.fs as pafs  # noqa: PLC0415

        info = self.fs.get_file_info(self._at(key))
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(2, "No such object", self.uri(key))
        return int(info.size)

    def write(self, key: str, data: bytes) -> None:
        with self.fs.open_output_stream(self._at(key)) as handle:
            handle.write(data)

    def list(self, prefix: str = "") -> list[str]:
        return sorted(self.list_sizes(prefix))

    def list_sizes(self, prefix: str = "") -> dict[str, int]:
        import pyarrow.fs as pafs  # noqa: PLC0415

        base = self._at(prefix) if prefix else self.base
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        cut = len(self.base) + 1
        return {
            info.path[cut:]: int(info.size)
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        }

    def delete(self, key: str) -> None:
        client = self._s3_client()
        with contextlib.suppress(FileNotFoundError):
            if client is not None:  # one request; the filesystem adds a HEAD and a folder marker
                client.delete(self._object_key(key))
            else:
                self.fs.delete_file(self._at(key))

    def open_output(self, key: str) -> Output:
        path = self._at(key)
        stream = self.fs.open_output_stream(path)
        return _ObjectOutput(stream, lambda: self.delete(key), self.uri(key))

    def staged(self, key: str) -> str:
        return key

    def publish(self, staged: str, key: str) -> None:
        if staged != key:
            raise ValueError(f"an object store stages nothing: {staged!r} is not {key!r}")

    def sync(self, folders: set[str]) -> None:
        return None  # a completed upload is durable

    def filesystem(self) -> tuple[Any, str]:
        return self.fs, self.base

    def uri(self, key: str) -> str:
        scheme = urlsplit(self.location).scheme
        return f"{scheme}://{self._at(key)}"


def _conditional_s3(bucket: str, options: ObjectStoreOptions) -> Any:
    from .conditional_s3 import ConditionalS3  # noqa: PLC0415 - s3:// only (imports boto3)

    try:
        return ConditionalS3(
            bucket,
            endpoint=options.endpoint,
            region=options.region,
            access_key=options.access_key,
            secret_key=options.secret_key,
            session_token=options.session_token,
        )
    except Exception as exc:  # a profile or an endpoint botocore cannot use
        raise OSError(
            f"no S3 client for bucket {bucket}: {type(exc).__name__}: {_quiet(exc, options)}"
        ) from None


def local_output(path: Path) -> Output:
    """A new local file at ``path`` written as ``LocalStore`` writes data files (buffered;
    fsync'd by ``close``)."""
    return _LocalOutput(path)


def _quiet(exc: BaseException, options: ObjectStoreOptions) -> str:
    """An error's text with any configured secret blotted out."""
    text = str(exc)
    for secret in (options.secret_key, options.session_token, options.access_key):
        if secret:
            text = text.replace(secret, "********")
    return text


def open_store(
    root: str | Path, options: ObjectStoreOptions | Mapping[str, Any] | None = None
) -> Store:
    """The store ``sink.root`` names: an object store for a URL, else a local directory."""
    text = str(root)
    if is_url(text):
        if isinstance(options, Mapping):
            options = ObjectStoreOptions(**options)
        return ObjectStore(text, options)
    if text.startswith("file://"):
        text = urlsplit(text).path
    return LocalStore(Path(text))
