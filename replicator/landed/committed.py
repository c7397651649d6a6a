"""What of the landing zone may be read: the files committed manifests list, nothing else.

A batch is committed when its manifest ``<root>/_manifests/<batch>.json`` exists
(``sink.landing``); its files are renamed into place right after. A reader therefore goes by
the manifests, never by listing directories: a file no manifest names is not data (a crash
left it, or it is still hidden as ``.part-*.tmp``), and a manifest whose files are not all in
place yet is a commit still being published by a running daemon. ``read_manifests`` returns
the committed batches in order up to the first such one; later batches wait for the next run,
so changes are never applied out of order. A file must have the size its commit record gives
(``bytes``: the manifest's, or the compaction output's record), checked just before it is read
(``CommittedFile.check_size``: a stat, or a HEAD on an object store; only the files a run
reads): a truncated or replaced file stops the read with an IntegrityError naming it, rather
than failing late in Spark or reading other rows. Hashes are not checked here (Spark reads
the files itself): ``replicator verify --deep`` checks them.

A manifest also carries the batch's lifecycle records (``schema_changes``: what each DDL
statement did to a replicated table, numbered in the ``_seq`` order of the row changes;
``Record``) and says whether the batch re-lands transactions after ``checkpoint set`` moved the
stream back (``replay``, ``start_moved``); ``lineage`` turns those into tables.

Files ``replicator compact`` merged are read from the compaction output that holds them now
(``compacted``): a manifest entry then names a slice of that file (``CommittedFile.within``), and
``compacted.reads`` turns a list of entries into reads that return each row once.

Each manifest names the landing zone it belongs to (``landing_id``, a random id the landing
zone got when it was made; manifests written before ids have none): ``landing_id_of`` checks
that they agree, and ``state`` records the id with each table built from them.

Each file's footer names its table (``replicator.table``), its schema version and its primary
key (``replicator.primary_key``, see ``sink.parquet_writer``): ``table_identity`` turns those
into the columns that identify a row. This module needs pyarrow only, not Spark.

The landing zone may be a directory (a ``Path``) or an object store (an ``s3://`` URL or a
``storage.Store``; ``open_landing``). Manifests, footers and files are read through the
store's pyarrow filesystem; Spark reads an object store's files by ``spark_path`` (``s3a://``
for ``s3://``: Hadoop's S3 connector, docs/spark.md). On an object store a data file is
written under its final name before its manifest, so a directory listing may show files no
manifest names (uncommitted, until the daemon's next recovery deletes them): readers here go
by the manifests only, and a file a manifest names is looked up by name, never by listing.
"""

from __future__ import annotations

import base64
import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ConfigError, IntegrityError
from ..storage import LocalStore, Store, is_url, open_store
from .compacted import Holding, holders
from .contract import (
    LANDING_ID_KEY,
    LIFECYCLE_OPS,
    MANIFESTS,
    PRIMARY_KEY_KEY,
    RECORD_SCHEMA_KEY,
    table_rel,
)

__all__ = [
    "CommittedFile",
    "Manifest",
    "Manifests",
    "Record",
    "TableDir",
    "check_landing",
    "committed_files",
    "file_key",
    "file_schema",
    "key_of",
    "landing_id_of",
    "open_landing",
    "read_file",
    "unreadable",
    "read_manifests",
    "spark_uri",
    "select_tables",
    "table_dirs",
    "table_identity",
]


def open_landing(landing: Path | str | Store) -> Store:
    """The landing zone ``landing`` names: a directory, an object store's URL (credentials
    and endpoint from the environment: ``AWS_*``, ``AWS_ENDPOINT_URL``) or a store."""
    if isinstance(landing, Store):
        return landing
    if isinstance(landing, str) and is_url(landing):
        return open_store(landing)
    return LocalStore(Path(landing))


# what Hadoop's globber (``FileSystem.globStatus``, which ``spark.read`` applies to every path
# holding one of them) reads as a pattern; a backslash before each makes it literal
GLOB_CHARS = frozenset("\\[]{}*?")


def spark_uri(uri: str | Path) -> str:
    """A path or an object store's URL as Spark reads it, taken literally: ``s3://`` is
    ``s3a://`` (Hadoop's connector; the other schemes pyarrow and Hadoop share), and glob
    characters are escaped. ``spark.read`` globs any path holding one of ``GLOB_CHARS``, and
    MySQL allows them in quoted database and table names: unescaped, ``shop[1]/t`` would
    read ``shop1/t``, or nothing and fail. Hadoop's globber unescapes ``\\x`` to ``x``
    (``GlobPattern``), on every filesystem."""
    text = str(uri)
    if text.startswith("s3://"):
        text = "s3a://" + text[len("s3://") :]
    return "".join("\\" + ch if ch in GLOB_CHARS else ch for ch in text)


@dataclass(frozen=True, slots=True)
class CommittedFile:
    """One data file a committed manifest lists."""

    table: str  # "db.t" as the manifest names it
    path: Path | str  # a local path (absolute when the root is), or an object store's URL
    batch: int
    rows: int
    first_seq: int | None
    last_seq: int | None
    key: str = ""  # relative to the landing root, as the manifest names it
    store: Store | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.key.rpartition("/")[2] if self.key else Path(self.path).name

    # a slice of a compaction output (``compacted``): only its rows with ``_seq`` in this
    # range are this entry's; None: the whole file is
    within: tuple[int, int] | None = None
    # the size of the file at ``path`` as its commit record gives it (the manifest's, or the
    # compaction output's); None: not recorded
    bytes: int | None = None

    @property
    def table_dir(self) -> Path:
        """The table's directory relative to the landing root (``<db>/<table>``)."""
        if self.key:
            return Path(*self.key.split("/")[:2])
        path = Path(self.path)
        return Path(path.parent.parent.name, path.parent.name)

    @property
    def spark_path(self) -> str:
        """The file's address for ``spark.read.parquet`` (taken literally: ``spark_uri``)."""
        return spark_uri(self.path)

    def exists(self) -> bool:
        """The file is there (looked up by name: a listing of an object store may lag)."""
        if self.store is None or isinstance(self.path, Path):
            return Path(self.path).is_file()
        return self.store.exists(self.key)

    def check_size(self) -> None:
        """The file has the size its commit record gives (``bytes``), checked before it is
        read: a truncated or replaced file must not reach Spark, which would fail on it late
        or read other rows. Only files about to be read are checked (an incremental run
        costs by its changes, not by the landing zone's size); a file gone meanwhile is left
        to the read (a retention run: see ``_Recompacted``)."""
        if self.bytes is None:
            return
        try:
            if self.store is None or isinstance(self.path, Path):
                size = Path(self.path).stat().st_size
            else:
                size = self.store.size(self.key)
        except FileNotFoundError:
            return
        if size != self.bytes:
            said = "its manifest" if self.within is None else "the compaction record"
            raise IntegrityError(
                f"committed file {self.path} (batch {self.batch}) has {size} bytes, {said} "
                f"says {self.bytes}",
                hint="it was truncated or replaced after its commit: restore it from a backup "
                "(`replicator verify --deep` checks every file of the landing zone)",
            )

    def source(self) -> tuple[Any, Any]:
        """(what pyarrow reads, its filesystem or None) for this file."""
        if self.store is None or isinstance(self.path, Path):
            return self.path, None
        fs, base = self.store.filesystem()
        return f"{base}/{self.key}", fs


@dataclass(frozen=True, slots=True)
class Record:
    """One lifecycle record of a manifest (``schema_changes``): what a DDL statement did to
    a replicated table at ``seq`` (see ``lineage``)."""

    seq: int
    op: str  # create, alter, truncate, drop, rename
    table: str  # db.t
    to: str | None  # rename: the new name
    gtid: str | None
    file: str | None
    position: int | None
    ts: str
    statement: str
    batch: int
    # a create's or alter's schema of the table's files from then on (None: not recorded,
    # e.g. written before records carried it): the columns of a table without rows yet
    schema: pa.Schema | None = None

    @property
    def identity(self) -> tuple[object, ...] | None:
        """Where the statement came from: its GTID, else its binlog file and position."""
        if self.gtid is not None:
            return ("gtid", self.gtid)
        if self.file is not None and self.position is not None:
            return ("position", self.file, self.position)
        return None

    def origin(self) -> str:
        """``batch 3, mysql-bin.000001:345: RENAME TABLE a TO b`` (the statement shortened)."""
        where = f"{self.file}:{self.position}" if self.file is not None else f"GTID {self.gtid}"
        statement = " ".join(self.statement.split())
        if len(statement) > 120:
            statement = statement[:117] + "..."
        return f"batch {self.batch}, {where}: {statement}"

    def describe(self) -> str:
        """``rename of db.a to db.b at _seq 12 (batch 3, mysql-bin.000001:345: RENAME ...)``."""
        what = f"{self.op} of {self.table}" + (f" to {self.to}" if self.to else "")
        return f"{what} at _seq {self.seq} ({self.origin()})"


@dataclass(frozen=True, slots=True)
class Manifest:
    batch: int
    path: Path | str
    last_seq: int
    files: tuple[CommittedFile, ...]
    first_seq: int = 0
    records: tuple[Record, ...] = ()
    replay: bool = False  # re-lands transactions after `checkpoint set` moved the stream back
    start_moved: bool = False  # the first batch after `checkpoint set`
    landing_id: str | None = None  # the landing zone's id; None: written before ids

    @property
    def rereads(self) -> bool:
        """The batch may hold transactions an earlier batch holds too (a replay)."""
        return self.replay or self.start_moved

    def touches(self, table: str) -> bool:
        """The batch has files or lifecycle records of ``table``."""
        return any(f.table == table for f in self.files) or any(
            table in (r.table, r.to) for r in self.records
        )


@dataclass(frozen=True, slots=True)
class TableDir:
    """A table directory of the landing zone: ``<root>/<db>/<table>``."""

    name: str  # "db.t"
    rel: Path  # "<db>/<table>" with the landing zone's escaping

    @classmethod
    def named(cls, name: str) -> TableDir:
        """A table the lifecycle records name (its directory may not exist)."""
        return cls(name, table_rel(name))


def _unsafe(part: str) -> str:
    """Undo ``sink.landing._safe`` (a directory name back to a database or table name)."""
    if part.startswith("%2E"):
        part = "." + part[3:]
    return part.replace("%2F", "/").replace("%00", "\0")


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


def check_landing(root: Path | Store) -> None:
    """ConfigError (exit 2) unless ``root`` is a directory (an object store: anything)."""
    if isinstance(root, Store):
        if isinstance(root, LocalStore):
            check_landing(root.root)
        return
    if not root.is_dir():
        raise ConfigError(
            f"landing zone {root} is not a directory",
            hint="pass --landing the sink.root directory that `replicator run` writes",
        )


def table_dirs(root: Path | Store) -> list[TableDir]:
    """Every table directory of the landing zone (committed files or not), sorted."""
    check_landing(root)
    if isinstance(root, LocalStore):
        root = root.root
    if isinstance(root, Store):  # an object store's "directories" are its keys' prefixes
        names = {
            tuple(key.split("/")[:2])
            for key in root.list()
            if key.count("/") >= 2 and not any(_hidden(p) for p in key.split("/")[:2])
        }
        return [
            TableDir(f"{_unsafe(db)}.{_unsafe(table)}", Path(db, table))
            for db, table in sorted(names)
        ]
    found: list[TableDir] = []
    for db in sorted(root.iterdir()):
        if _hidden(db.name) or not db.is_dir():
            continue
        for table in sorted(db.iterdir()):
            if _hidden(table.name) or not table.is_dir():
                continue
            found.append(
                TableDir(f"{_unsafe(db.name)}.{_unsafe(table.name)}", table.relative_to(root))
            )
    return found


def select_tables(tables: Sequence[TableDir], patterns: Sequence[str] | None) -> list[TableDir]:
    """The tables ``patterns`` (``db.t`` names or globs) select; all when None.

    A pattern that is a table's name selects it (MySQL allows ``[``, ``*``, ``?`` in names, so
    ``shop.t[1]`` is that table, not a glob); a pattern without glob characters that names
    no table is a ConfigError."""
    if not patterns:
        return list(tables)
    names = {t.name for t in tables}
    chosen = [
        t
        for t in tables
        if any(t.name == p if p in names else fnmatch.fnmatchcase(t.name, p) for p in patterns)
    ]
    for pattern in patterns:
        if not any(ch in pattern for ch in "*?[") and pattern not in names:
            raise ConfigError(
                f"table {pattern} is not in the landing zone",
                hint="name tables as database.table, as in the landing zone's directories",
            )
    return chosen


def _record(item: dict[str, Any], batch: int) -> Record:
    op = str(item["op"])
    if op not in LIFECYCLE_OPS or (op == "rename") != (item.get("to") is not None):
        raise ValueError(f"lifecycle record {item!r}")
    return Record(
        seq=int(item["seq"]),
        op=op,
        table=str(item["table"]),
        to=None if item.get("to") is None else str(item["to"]),
        gtid=None if item.get("gtid") is None else str(item["gtid"]),
        file=None if item.get("file") is None else str(item["file"]),
        position=None if item.get("position") is None else int(item["position"]),
        ts=str(item.get("ts", "")),
        statement=str(item.get("statement", "")),
        batch=batch,
        schema=_record_schema(item.get(RECORD_SCHEMA_KEY)),
    )


def _record_schema(text: object) -> pa.Schema | None:
    """A record's ``schema`` (base64 Arrow IPC); ValueError when it is not one."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"record schema {text!r}")
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
    except (pa.ArrowException, ValueError) as exc:
        raise ValueError(f"record schema: {exc}") from exc


def _where(store: Store, key: str) -> Path | str:
    """A file's path (a directory's) or URL (an object store's)."""
    return store.path(key) if isinstance(store, LocalStore) else store.uri(key)


def _file(
    item: dict[str, Any], batch: int, store: Store, moved: dict[str, Holding]
) -> CommittedFile:
    held = moved.get(str(item["path"]))
    key = str(item["path"]) if held is None else held.path
    return CommittedFile(
        table=str(item["table"]),
        path=_where(store, key),
        batch=batch,
        rows=int(item["rows"]),
        first_seq=None if item.get("first_seq") is None else int(item["first_seq"]),
        last_seq=None if item.get("last_seq") is None else int(item["last_seq"]),
        key=key,
        store=store,
        within=None if held is None else held.within,
        bytes=_size(item.get("bytes")) if held is None else held.bytes,
    )


def _size(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _manifest(key: str, store: Store, moved: dict[str, Holding] | None = None) -> Manifest:
    path = _where(store, key)
    try:
        data = json.loads(store.read(key))
        batch = int(data["batch"])
        records = tuple(_record(item, batch) for item in data.get("schema_changes") or ())
        files = tuple(_file(item, batch, store, moved or {}) for item in data["files"])
        manifest = Manifest(
            batch,
            path,
            int(data["last_seq"]),
            files,
            first_seq=int(data.get("first_seq", 0)),
            records=tuple(sorted(records, key=lambda r: r.seq)),
            replay=data.get("replay") is True,
            start_moved=data.get("start_moved") is True,
            landing_id=None if data.get(LANDING_ID_KEY) is None else str(data[LANDING_ID_KEY]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IntegrityError(
            f"cannot read manifest {path}: {exc}",
            hint="a manifest is written atomically, so this one was changed by hand: restore "
            "it from a backup",
        ) from exc
    if manifest.batch != int(key.rpartition("/")[2].partition(".")[0]):
        raise IntegrityError(
            f"manifest {path} is for batch {manifest.batch}",
            hint="manifest files are named after their batch: restore the original file",
        )
    return manifest


def landing_id_of(manifests: Sequence[Manifest]) -> str | None:
    """The id of the landing zone ``manifests`` (in batch order) belong to; None when none
    carries one (written before landing zones had ids). Manifests naming two landing zones,
    or one without an id after one with an id, are an IntegrityError: the directory mixes
    two landing zones."""
    found: Manifest | None = None
    for manifest in manifests:
        if found is not None and manifest.landing_id != found.landing_id:
            raise IntegrityError(
                f"manifest {manifest.path} belongs to landing zone "
                f"{manifest.landing_id or '(none: written before ids)'}, but batch "
                f"{found.batch} to landing zone {found.landing_id}",
                hint="the directory mixes the commit records of two landing zones: restore "
                "the landing zone from one backup",
            )
        if manifest.landing_id is not None:
            found = manifest
    return None if found is None else found.landing_id


@dataclass(frozen=True, slots=True)
class Manifests:
    """Committed batches after some batch, in order, up to the first not yet published."""

    manifests: tuple[Manifest, ...]
    waiting: int | None  # the first committed batch whose files are not all in place

    @property
    def last_batch(self) -> int | None:
        return self.manifests[-1].batch if self.manifests else None


def read_manifests(root: Path | Store, *, after: int = 0, unpublished: bool = False) -> Manifests:
    """Manifests of batches numbered above ``after``, in batch order.

    Stops before the first manifest whose files are not all in place (a commit being
    published; ``waiting``), unless ``unpublished`` asks for those too. A gap in the batch
    numbers is an IntegrityError: a committed batch is missing, and skipping it would apply
    later changes without it.
    """
    check_landing(root)
    store = root if isinstance(root, Store) else LocalStore(root)
    for _ in range(_READ_ATTEMPTS):
        moved = holders(store)  # before the manifests: records name committed batches only
        try:
            return _read_manifests(store, moved, after, unpublished)
        except _Recompacted:
            continue  # a compaction committed meanwhile (and retention removed what it merged)
    raise IntegrityError(
        f"the files of {store.location} kept being compacted while they were read "
        f"({_READ_ATTEMPTS} attempts)",
        hint="give sink.compaction.retention more time than a read takes (a day by default)",
    )


_READ_ATTEMPTS = 5


class _Recompacted(Exception):
    """A committed file is gone because a compaction record committed after the records were
    read superseded it (retention may delete at once when set to 0): read again."""


def _read_manifests(
    store: Store, moved: dict[str, Holding], after: int, unpublished: bool
) -> Manifests:
    directory = store.uri(MANIFESTS)
    numbered: list[tuple[int, str]] = []
    for key in store.list(MANIFESTS):
        name = key[len(MANIFESTS) + 1 :]
        stem, _, suffix = name.partition(".")
        if "/" not in name and suffix == "json" and stem.isdigit():
            numbered.append((int(stem), key))
    numbered.sort()
    if not store.renames:  # a listing may lag: the next batches are looked up by name too
        last = numbered[-1][0] if numbered else after
        while store.exists(f"{MANIFESTS}/{last + 1:020d}.json"):
            last += 1
            numbered.append((last, f"{MANIFESTS}/{last:020d}.json"))
    listed: dict[str, int] | None = None  # key -> size (object stores: one listing)

    def present(item: CommittedFile) -> bool:
        """On a directory: the file is in place (published). On an object store, where a
        committed file is in place before its manifest is, one listing answers for most and
        a file it does not show is looked up by name (a listing may lag)."""
        nonlocal listed
        if store.renames:
            return item.exists()
        if listed is None:
            listed = store.list_sizes()
        return item.key in listed or item.exists()

    out: list[Manifest] = []
    waiting: int | None = None
    previous = after if after > 0 else None
    for number, path in numbered:
        if number <= after:
            continue
        if previous is not None and number != previous + 1:
            raise IntegrityError(
                f"committed batch {previous + 1} is missing from {directory} (next is {number})",
                hint="restore the manifest and its files, or rebuild the output with "
                "--full-refresh from what the landing zone holds",
            )
        manifest = _manifest(path, store, moved)
        missing = next((f for f in manifest.files if not present(f)), None)
        if missing is not None and holders(store) != moved:
            raise _Recompacted
        if missing is not None and not store.renames:
            raise IntegrityError(
                f"batch {number} is committed but its file {missing.path} is gone",
                hint="on an object store a batch's files are in place before its manifest: "
                "restore the file from a backup",
            )
        if waiting is None and missing is not None:
            waiting = number
            if not unpublished:
                break
        out.append(manifest)
        previous = number
    return Manifests(tuple(out), waiting)


def committed_files(
    root: Path | Store, *, after: int = 0, tables: Iterable[str] | None = None
) -> dict[str, list[CommittedFile]]:
    """Committed, published files per table (``db.t``), in ``_seq`` order."""
    wanted = None if tables is None else set(tables)
    out: dict[str, list[CommittedFile]] = {}
    for manifest in read_manifests(root, after=after).manifests:
        for item in manifest.files:
            if wanted is None or item.table in wanted:
                out.setdefault(item.table, []).append(item)
    return out


def file_schema(item: Path | CommittedFile) -> pa.Schema:
    """A file's Arrow schema with its key-value metadata, from the footer only."""
    path, fs = (item, None) if isinstance(item, Path) else item.source()
    shown = item if isinstance(item, Path) else item.path
    try:
        return pq.read_schema(path, filesystem=fs)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(shown, exc, "the footer of ") from exc


def unreadable(path: Path | str, exc: Exception, what: str = "") -> IntegrityError:
    """The error for a committed file (``what``: a part of it) that cannot be read."""
    return IntegrityError(
        f"cannot read {what}committed file {path}: {exc}",
        hint="the file is listed by a manifest, so it was complete when committed: "
        "restore it from a backup",
    )


def read_file(item: CommittedFile, columns: Sequence[str] | None = None) -> pa.Table:
    """A committed file's rows (``columns`` only), through the landing zone's filesystem."""
    item.check_size()
    path, fs = item.source()
    try:
        return pq.read_table(path, columns=columns, filesystem=fs)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(item.path, exc) from exc


def file_key(schema: pa.Schema) -> tuple[str, ...] | None:
    """The primary key a file's footer records; () for none; None when not recorded."""
    raw = (schema.metadata or {}).get(PRIMARY_KEY_KEY)
    if raw is None:
        return None
    return tuple(str(name) for name in json.loads(raw))


def table_identity(
    table: str,
    schemas: Sequence[tuple[Path | str, pa.Schema]],
    *,
    override: Sequence[str] | None = None,
    previous: tuple[str, ...] | None = None,
) -> tuple[str, ...]:
    """The columns that identify a row of ``table``: its primary key, or () for the whole
    row (no primary key). ``override`` (``--key``) wins; otherwise every file must record the
    same key, and agree with ``previous`` (the key the existing output was built with)."""
    if override is not None:
        return tuple(override)
    return key_of(table, [(path, file_key(schema)) for path, schema in schemas], previous=previous)


def key_of(
    table: str,
    keyed: Sequence[tuple[Path | str, tuple[str, ...] | None]],
    *,
    previous: tuple[str, ...] | None = None,
) -> tuple[str, ...]:
    """The key all files record (``keyed``: each file's key, in the newest version's column
    names; None when the file records none); see ``table_identity``."""
    keys: dict[tuple[str, ...], Path | str] = {}
    for path, key in keyed:
        if key is None:
            raise ConfigError(
                f"table {table}: {path} does not record the primary key (written by an older "
                "replicator)",
                hint=f"pass --key {table}=col1,col2 (or --key {table}= for none: whole rows)",
            )
        keys.setdefault(key, path)
    if previous is not None:
        keys.setdefault(previous, Path("(the existing output)"))
    if len(keys) > 1:
        shown = "; ".join(f"({', '.join(k)}) in {p}" for k, p in keys.items())
        raise ConfigError(
            f"table {table}: the primary key changed: {shown}",
            hint="rows cannot be followed across a primary-key change: pass "
            f"--key {table}=... to choose the identity columns, with --full-refresh",
        )
    return next(iter(keys)) if keys else ()
