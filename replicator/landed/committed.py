"""What of the landing zone may be read: the files committed manifests list, nothing else.

A batch is committed when its manifest ``<root>/_manifests/<batch>.json`` exists
(``sink.landing``); its files are renamed into place right after. A reader therefore goes by
the manifests, never by listing directories: a file no manifest names is not data (a crash
left it, or it is still hidden as ``.part-*.tmp``), and a manifest whose files are not all in
place yet, the others still under their hidden staged names, is a commit still being
published by a running daemon. ``read_manifests`` returns the committed batches in order up to
the first such one; later batches wait for the next run, so changes are never applied out of
order. A committed file neither in place nor staged is gone: an IntegrityError, naming the
compaction record that was lost when a compaction output no record names holds its rows
(``compacted.lost_record``). A file must have the size its commit record gives
(``bytes``: the manifest's, or the compaction output's record), checked just before it is read
(``CommittedFile.check_size``: a stat, or a HEAD on an object store; only the files a run
reads): a truncated or replaced file stops the read with an IntegrityError naming it, rather
than failing late in Spark or reading other rows. Hashes are not checked here (Spark reads
the files itself): ``replicator verify --deep`` checks them.

Each manifest is parsed and checked by ``manifests`` (the daemon's own parser: a reader
refuses what the daemon would), and the manifests a run reads are checked as a chain. The
checkpoint is read before them: naming a batch above the newest manifest, it shows that
the newest manifests were removed, and their batches would be read as never committed
(``checkpointed``).

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

import fnmatch
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ConfigError, IntegrityError
from ..storage import LocalStore, Store, is_url, open_store
from .checkpointed import check_pinned, check_reached, checkpoint_pin, newest_batch
from .compacted import Holding, holders, lost_record
from .contract import (
    MANIFESTS,
    PRIMARY_KEY_KEY,
    table_rel,
)
from .manifests import (
    CommittedFile,
    Manifest,
    Record,
    check_chain,
    check_link,
    manifest_key,
    manifest_keys,
    parse_manifest,
    spark_uri,
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


@dataclass(frozen=True, slots=True)
class TableDir:
    """A table directory of the landing zone: ``<root>/<db>/<table>``."""

    name: str  # "db.t"
    rel: Path  # "<db>/<table>" with the landing zone's escaping

    @classmethod
    def named(cls, name: str) -> TableDir:
        """Table ``name`` (as the commit records give it); its directory may not exist."""
        return cls(name, table_rel(name))


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
    published, the others still staged; ``waiting``), unless ``unpublished`` asks for those
    too. A gap in the batch numbers, or a committed file neither in place nor staged (on an
    object store: not in place), is an IntegrityError: a committed batch or file is missing,
    and skipping it would apply later changes without it (``_gone``). So is a checkpoint,
    read before the manifests, naming a batch above the newest manifest (whatever ``after``):
    the newest manifests were removed (``checkpointed``).
    """
    check_landing(root)
    store = root if isinstance(root, Store) else LocalStore(root)
    # first of all: the daemon writes a batch's manifest before the checkpoint naming it
    checkpoint, pin = checkpoint_pin(store)
    for _ in range(_READ_ATTEMPTS):
        moved = holders(store)  # before the manifests: records name committed batches only
        try:
            found = _read_manifests(store, moved, after, unpublished, checkpoint)
            check_pinned(store, pin, checkpoint, found.manifests)  # its batch's, when read
            if after > 0 and found.manifests:
                _check_link_back(store, after, found.manifests[0])
            return found
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
    store: Store, moved: dict[str, Holding], after: int, unpublished: bool, checkpoint: int
) -> Manifests:
    directory = store.uri(MANIFESTS)
    keys, _ = manifest_keys(store)
    check_reached(store, checkpoint, newest_batch(keys))
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
    numbered = [(int(key.rpartition("/")[2][:20]), key) for key in keys]
    numbered = [(number, key) for number, key in numbered if number > after]
    reads = store.read_each([key for _, key in numbered])
    for number, key in numbered:
        if previous is not None and number != previous + 1:
            raise IntegrityError(
                f"committed batch {previous + 1} is missing from {directory} (next is {number})",
                hint="restore the manifest and its files, or rebuild the output with "
                "--full-refresh from what the landing zone holds",
            )
        manifest = _manifest(key, reads, store, moved)
        missing = [f for f in manifest.files if not present(f)]
        # on a directory a file is published by renaming its staged name: one neither in
        # place nor under that name (looked at again after it) is gone, not being published
        gone = [f for f in missing if not store.renames or not _being_published(store, f)]
        if missing and holders(store) != moved:
            raise _Recompacted
        if gone:
            raise _gone(store, number, gone[0])
        if waiting is None and missing:
            waiting = number
            if not unpublished:
                break
        out.append(manifest)
        previous = number
    check_chain(out)
    return Manifests(tuple(out), waiting)


def _check_link_back(store: Store, after: int, first: Manifest) -> None:
    """An incremental read's first manifest (of batch ``after + 1``) links to the manifest
    of batch ``after`` as it is (``manifests.check_link``): an edit of a batch an output
    applied already shows at its next run."""
    key = manifest_key(after)
    try:
        raw = store.read(key)
    except FileNotFoundError:
        return  # a batch before the manifests (never, but not this check's to say)
    check_link(parse_manifest(store.uri(key), raw, store), first)


def _being_published(store: Store, item: CommittedFile) -> bool:
    """On a directory: ``item``, not in place a moment ago, is there under its staged name (a
    commit between its manifest and its rename), or in place now (renamed meanwhile)."""
    return store.exists(store.staged(item.key)) or item.exists()


def _gone(store: Store, number: int, item: CommittedFile) -> IntegrityError:
    """The error for a file of committed batch ``number`` that is gone: naming the lost
    compaction record when a compaction output no record names holds its rows."""
    lost = lost_record(store, item.key, item.first_seq, item.last_seq)
    if lost is not None:
        return lost
    return IntegrityError(
        f"batch {number} is committed but its file {item.path} is gone",
        hint="on an object store a batch's files are in place before its manifest: "
        "restore the file from a backup"
        if not store.renames
        else "on a directory a batch's files are renamed into place right after its "
        "manifest, and are under their hidden staged names until then: restore the file "
        "from a backup (`replicator verify` lists every committed file that is not there)",
    )


def _manifest(
    key: str, reads: Iterator[bytes], store: Store, moved: dict[str, Holding]
) -> Manifest:
    """The manifest at ``key``, its bytes the next of ``reads``."""
    path = store.path(key) if isinstance(store, LocalStore) else store.uri(key)
    try:
        raw = next(reads)
    except OSError as exc:
        raise IntegrityError(
            f"cannot read manifest {path}: {exc.strerror or exc}",
            hint="restore it from a backup",
        ) from exc
    return parse_manifest(path, raw, store, moved)


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
    names; None when the file records none); see ``table_identity``. Keys of the same
    columns in another order are one key (a row is identified by the columns, whatever
    their order; files of a stream read without column names recorded their key in column
    order): the existing output's order stays, else the first file's."""
    keys: dict[frozenset[str], tuple[tuple[str, ...], Path | str]] = {}
    if previous is not None:
        keys[frozenset(previous)] = (previous, Path("(the existing output)"))
    for path, key in keyed:
        if key is None:
            raise ConfigError(
                f"table {table}: {path} does not record the primary key (written by an older "
                "replicator)",
                hint=f"pass --key {table}=col1,col2 (or --key {table}= for none: whole rows)",
            )
        keys.setdefault(frozenset(key), (key, path))
    if len(keys) > 1:
        shown = "; ".join(f"({', '.join(k)}) in {p}" for k, p in keys.values())
        raise ConfigError(
            f"table {table}: the primary key changed: {shown}",
            hint="rows cannot be followed across a primary-key change: pass "
            f"--key {table}=... naming columns every one of these keys has, with "
            "--full-refresh",
        )
    return next(iter(keys.values()))[0] if keys else ()
