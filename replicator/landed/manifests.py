"""The commit records under ``<root>/_manifests/``: their format, read trusting nothing.

A manifest is the commit point of a batch (``sink.landing``): the daemon's recovery builds on
what the manifests say, and every reader goes by them (``committed``). A manifest that is
missing, torn, edited or out of line must stop the daemon and every reader rather than be
skipped: skipping one would orphan committed files (or apply later changes without it), and a
checkpoint that disagrees with them would hand out ``_seq`` numbers (and file names) that are
taken. This module is the one parser of manifests, for the daemon and the readers alike.

``parse_manifest`` checks one file (its name is the batch number in 20 digits; JSON with the
fields of the format and the right types); ``check_chain`` checks the chain they form:

* batch numbers follow each other without a gap;
* ``_seq`` ranges follow each other without a gap or overlap (``first_seq`` is the previous
  ``last_seq + 1``; a batch with no rows has ``last_seq = first_seq - 1``);
* each batch starts where the previous one ended, unless ``checkpoint set`` moved the
  position in between (``start_moved`` in the manifest);
* each file entry's ``_seq`` range lies within its batch's, and no path is named twice;
* a file entry's ``bytes`` and ``sha256`` (``sink.digest``), and the manifest's pin of its
  schema history (``schema_history_sha256``), when there (manifests written before hashes
  have none), are a size and a hash;
* every manifest carries the same landing zone id (``sink.identity``) from the first one that
  carries one on (the manifests written before ids existed come first, without one);
* each manifest pins the one before it by the SHA-256 of its bytes (``previous_sha256``; null
  for the first batch), from the first manifest that has the key on: a manifest edited in
  place, however consistently, breaks the link of the next one, and the newest is pinned by
  the checkpoint (``manifest_sha256``), so an edit of any of them stops the daemon and every
  reader that reads the manifest after it.

A manifest also carries the batch's lifecycle records (``schema_changes``: what each DDL
statement did to a replicated table, numbered in the ``_seq`` order of the row changes;
``Record``) and says whether the batch re-lands transactions after ``checkpoint set`` moved the
stream back (``replay``, ``start_moved``); ``lineage`` turns those into tables.

Every failure is an ``IntegrityError`` (exit 4) naming the file and what is wrong; nothing is
deleted or rewritten here. This module needs pyarrow only, not Spark.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import IntegrityError
from ..storage import LocalStore, Store
from .compacted import Holding, Piece, check_holding
from .contract import (
    DIGEST_KEY,
    HELD_DIGESTS_KEY,
    HISTORY_DIGEST_KEY,
    LANDING_ID_KEY,
    LIFECYCLE_OPS,
    MANIFESTS,
    PREVIOUS_DIGEST_KEY,
    RECORD_SCHEMA_KEY,
    SNAPSHOT_RESET,
    is_digest,
    is_landing_id,
)

if TYPE_CHECKING:  # pyarrow is imported to read a record's schema: listing the chain needs none
    import pyarrow as pa

__all__ = [
    "GLOB_CHARS",
    "MANIFESTS",
    "PROOF_KEY",
    "CommittedFile",
    "Manifest",
    "Record",
    "check_chain",
    "check_link",
    "manifest_files",
    "manifest_key",
    "manifest_keys",
    "parse_manifest",
    "read_chain",
    "spark_uri",
    "valid_proof",
]

_NAME = re.compile(r"\d{20}\.json")
_TEMP = re.compile(r"\.\d{20}\.json\.tmp")
PROOF_KEY = "source"  # the proof of the last transaction landed (source.proof)


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
        """Where the record came from: its GTID, else its binlog file and position with the
        table and op (one position holds a statement's records of several tables, and every
        snapshot's ``truncate`` read at that point); None for a snapshot's ``truncate``
        (``SNAPSHOT_RESET``), which no replay lands again."""
        if self.statement == SNAPSHOT_RESET:
            return None
        if self.gtid is not None:
            return ("gtid", self.gtid)
        if self.file is not None and self.position is not None:
            return ("position", self.file, self.position, self.table, self.op)
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
    """One checked commit record: ``data`` is the JSON document as written; ``files`` its
    data files where they are now (``parse_manifest``), ``records`` its lifecycle records in
    ``_seq`` order."""

    path: Path | str  # a local path, or an object store's URL
    data: dict[str, Any] = field(repr=False, compare=False)
    files: tuple[CommittedFile, ...] = ()
    records: tuple[Record, ...] = ()
    sha256: str | None = None  # of the file's bytes as read (what the next manifest pins)

    @property
    def batch(self) -> int:
        return int(self.data["batch"])

    @property
    def first_seq(self) -> int:
        return int(self.data["first_seq"])

    @property
    def last_seq(self) -> int:
        return int(self.data["last_seq"])

    @property
    def landing_id(self) -> str | None:
        """The landing zone's id (``sink.identity``); None in manifests written before ids."""
        value = self.data.get(LANDING_ID_KEY)
        return None if value is None else str(value)

    @property
    def history_pin(self) -> str | None:
        """The sha256 of the schema history file this batch names; None in manifests written
        before pins (and when it names none)."""
        value = self.data.get(HISTORY_DIGEST_KEY)
        return None if value is None else str(value)

    @property
    def linked(self) -> bool:
        """Written with its link to the manifest before it (``previous_sha256``, null for
        the first batch); manifests written before links have no such key."""
        return PREVIOUS_DIGEST_KEY in self.data

    @property
    def previous_pin(self) -> str | None:
        """The sha256 of the manifest of the batch before (None: the first, or unlinked)."""
        value = self.data.get(PREVIOUS_DIGEST_KEY)
        return None if value is None else str(value)

    @property
    def held_pins(self) -> dict[str, str]:
        """The sha256 of each held XA file this batch names (``xa_pending``), by name; none
        in manifests written before pins."""
        return {str(k): str(v) for k, v in self.data.get(HELD_DIGESTS_KEY, {}).items()}

    @property
    def entries(self) -> list[dict[str, Any]]:
        """The file entries as written (``path`` relative to the root, ``table``, ``rows``,
        ``first_seq``, ``last_seq``, ``bytes``, ``sha256``)."""
        entries: list[dict[str, Any]] = self.data["files"]
        return entries

    @property
    def replay(self) -> bool:
        """The batch re-lands transactions after ``checkpoint set`` moved the stream back."""
        return self.data.get("replay") is True

    @property
    def start_moved(self) -> bool:
        """The first batch after ``checkpoint set``."""
        return self.data.get("start_moved") is True

    @property
    def rereads(self) -> bool:
        """The batch may hold transactions an earlier batch holds too (a replay)."""
        return self.replay or self.start_moved

    @property
    def mark(self) -> str:
        """What tells this commit from another batch of the same number, as a short digest of
        its ``_seq`` range and stream positions: a landing zone restored from an older backup
        lands its later batches again under the same numbers, and an output that applied the
        first ones must not take the new ones for them. A batch landed again over the same
        range and positions has the same mark (the same transactions, the same ``_seq``)."""
        span = [self.data.get(k) for k in ("first_seq", "last_seq", "start", "end")]
        text = json.dumps(span, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def touches(self, table: str) -> bool:
        """The batch has files or lifecycle records of ``table``."""
        return any(f.table == table for f in self.files) or any(
            table in (r.table, r.to) for r in self.records
        )


def valid_proof(value: object) -> bool:
    """The shape of a manifest's ``source`` field (None allowed: nothing to prove)."""
    if value is None:
        return True
    if not isinstance(value, dict):
        return False
    gtid, before, events = value.get("gtid"), value.get("before"), value.get("events")
    return (
        (gtid is None or isinstance(gtid, str))
        and (before is None or (isinstance(before, dict) and isinstance(before.get("file"), str)))
        and is_digest(value.get("digest"))
        and isinstance(events, int)
        and not isinstance(events, bool)
        and events >= 0
    )


def _bad(path: Path | str, problem: str) -> IntegrityError:
    return IntegrityError(
        f"manifest {path} {problem}",
        hint="the manifests are the landing zone's commit records: restore this one from a "
        "backup (or put back what was moved); nothing was changed in the landing zone",
    )


def _int(data: dict[str, Any], key: str, path: Path | str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(path, f"has no integer {key!r}")
    return value


def _position(data: dict[str, Any], key: str, path: Path | str, *, optional: bool) -> None:
    value = data.get(key)
    if value is None and optional:
        return
    if not isinstance(value, dict) or not isinstance(value.get("file", ""), str):
        raise _bad(path, f"has no valid {key!r} position")
    position = value.get("position", 4)
    if not isinstance(position, int) or isinstance(position, bool) or position < 0:
        raise _bad(path, f"has no valid {key!r} position")


def parse_manifest(
    path: Path | str, raw: bytes, store: Store, moved: Mapping[str, Holding] | None = None
) -> Manifest:
    """One manifest's content, checked (not its place in the chain: ``check_chain``). Its
    files are located in ``store``, each at the compaction output ``moved`` says holds it
    now (``compacted.holders``; the entry must be as that output's record says:
    ``compacted.check_holding``), else at its own path."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _bad(path, f"is not valid JSON (torn or edited?): {exc}") from None
    if not isinstance(data, dict):
        raise _bad(path, "is not a JSON object")
    batch = _int(data, "batch", path)
    if str(path).rpartition("/")[2] != f"{batch:020d}.json":
        raise _bad(path, f"says it is batch {batch}, which does not match its name")
    first, last = _int(data, "first_seq", path), _int(data, "last_seq", path)
    if first < 1 or last < first - 1:
        raise _bad(path, f"has an impossible _seq range {first}..{last}")
    for key in ("rows", "transactions"):
        if _int(data, key, path) < 0:
            raise _bad(path, f"has a negative {key!r}")
    _position(data, "start", path, optional=True)
    _position(data, "end", path, optional=False)
    if not isinstance(data.get("committed_at"), str):
        raise _bad(path, "has no 'committed_at' time")
    files = data.get("files")
    if not isinstance(files, list):
        raise _bad(path, "has no 'files' list")
    for entry in files:
        _check_file_entry(entry, first, last, path)
    history = data.get("schema_history")
    if history is not None and (not isinstance(history, str) or ".." in history.split("/")):
        raise _bad(path, f"names an invalid schema history {history!r}")
    pin = data.get(HISTORY_DIGEST_KEY)
    if pin is not None and (history is None or not is_digest(pin)):
        raise _bad(path, f"has an invalid {HISTORY_DIGEST_KEY!r} {pin!r}")
    records = data.get("schema_changes", [])
    if not isinstance(records, list):
        raise _bad(path, "has an invalid 'schema_changes' list")
    for record in records:
        if not isinstance(record, dict) or not isinstance(record.get("table"), str):
            raise _bad(path, "has a schema change record without its table")
        at = _int(record, "seq", path)
        if not first <= at <= last:
            raise _bad(path, f"has a schema change at _seq {at}, outside {first}..{last}")
    try:
        lifecycle = tuple(sorted((_record(item, batch) for item in records), key=_by_seq))
    except (ValueError, KeyError, TypeError) as exc:
        raise _bad(path, f"has an invalid schema change record: {exc}") from exc
    pending = data.get("xa_pending", [])
    if not isinstance(pending, list) or not all(isinstance(p, str) for p in pending):
        raise _bad(path, "has an invalid 'xa_pending' list")
    pins = data.get(HELD_DIGESTS_KEY, {})
    if (
        not isinstance(pins, dict)
        or not set(pins) <= set(pending)
        or not all(is_digest(pin) for pin in pins.values())
    ):
        raise _bad(path, f"has an invalid {HELD_DIGESTS_KEY!r}")
    if not valid_proof(data.get(PROOF_KEY)):  # the source proof (source.continuity)
        raise _bad(path, f"has an invalid {PROOF_KEY!r} proof")
    landing_id = data.get(LANDING_ID_KEY)
    if landing_id is not None and not is_landing_id(landing_id):
        raise _bad(path, f"has an invalid landing zone id {landing_id!r}")
    link = data.get(PREVIOUS_DIGEST_KEY)
    if link is not None and not is_digest(link):
        raise _bad(path, f"has an invalid {PREVIOUS_DIGEST_KEY!r} {link!r}")
    files = tuple(_file(item, batch, store, moved or {}, path) for item in files)
    return Manifest(path, data, files, lifecycle, hashlib.sha256(raw).hexdigest())


def _check_file_entry(entry: object, first: int, last: int, path: Path | str) -> None:
    if not isinstance(entry, dict):
        raise _bad(path, "lists a file that is not an object")
    name = entry.get("path")
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name.split("/"):
        raise _bad(path, f"lists an invalid file path {name!r}")
    if not isinstance(entry.get("table"), str):
        raise _bad(path, f"lists {name} without its table")
    lo, hi = _int(entry, "first_seq", path), _int(entry, "last_seq", path)
    if not first <= lo <= hi <= last:
        raise _bad(path, f"lists {name} with _seq {lo}..{hi}, outside the batch's {first}..{last}")
    if _int(entry, "rows", path) < 0:
        raise _bad(path, f"lists {name} with a negative row count")
    if "bytes" in entry and _int(entry, "bytes", path) < 0:
        raise _bad(path, f"lists {name} with a negative size")
    if DIGEST_KEY in entry and not is_digest(entry[DIGEST_KEY]):
        raise _bad(path, f"lists {name} with an invalid {DIGEST_KEY!r} {entry[DIGEST_KEY]!r}")


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
    import pyarrow as pa  # noqa: PLC0415 - see the imports

    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"record schema {text!r}")
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))
    except (pa.ArrowException, ValueError) as exc:
        raise ValueError(f"record schema: {exc}") from exc


def _by_seq(record: Record) -> int:
    return record.seq


def _where(store: Store, key: str) -> Path | str:
    """A file's path (a directory's) or URL (an object store's)."""
    return store.path(key) if isinstance(store, LocalStore) else store.uri(key)


def _file(
    item: dict[str, Any],
    batch: int,
    store: Store,
    moved: Mapping[str, Holding],
    manifest: Path | str,
) -> CommittedFile:
    held = moved.get(str(item["path"]))
    key = str(item["path"]) if held is None else held.path
    if held is not None:  # first_seq and last_seq: checked by ``_check_file_entry``
        entry = Piece(
            str(item["path"]),
            str(item["table"]),
            int(item["rows"]),
            int(item["first_seq"]),
            int(item["last_seq"]),
        )
        check_holding(store, held, entry, batch, manifest)
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


def manifest_key(batch: int) -> str:
    """The key of batch ``batch``'s manifest."""
    return f"{MANIFESTS}/{batch:020d}.json"


def manifest_keys(store: Store) -> tuple[list[str], list[str]]:
    """(manifests, temp files of manifests never committed) under ``_manifests/``, as keys.
    Anything else there is refused: it is not ours, and guessing what it is risks data.

    On an object store a listing may lag behind a completed upload, so the batches after
    the last one listed are looked up by name too (a read of one key is not stale): a
    lagging listing must not hide the newest commit from recovery, which would take its
    files for leftovers."""
    committed: list[str] = []
    temps: list[str] = []
    strangers: list[str] = []
    for key in store.list(MANIFESTS):
        name = key.rpartition("/")[2]
        if key.count("/") == 1 and _NAME.fullmatch(name):
            committed.append(key)
        elif key.count("/") == 1 and _TEMP.fullmatch(name):
            temps.append(key)
        else:
            strangers.append(key[len(MANIFESTS) + 1 :])
    if strangers:
        shown = ", ".join(repr(s) for s in sorted(strangers)[:5])
        raise IntegrityError(
            f"{store.uri(MANIFESTS)} holds files that are not commit records: {shown}",
            hint="move them out of _manifests/ (only <20-digit batch>.json files belong there); "
            "if one is a renamed manifest, restore its original name",
        )
    committed.sort()
    if not store.renames:
        last = int(committed[-1].rpartition("/")[2][:20]) if committed else 0
        while store.exists(manifest_key(last + 1)):
            last += 1
            committed.append(manifest_key(last))
    return committed, temps


def manifest_files(root: Path) -> tuple[list[Path], list[Path]]:
    """``manifest_keys`` of a local landing zone, as paths."""
    committed, temps = manifest_keys(LocalStore(root))
    return [root / key for key in committed], [root / key for key in temps]


def read_chain(root: Path | Store) -> list[Manifest]:
    """Every manifest of the landing zone at ``root``, checked one by one and as a chain, in
    batch order; their files as the manifests name them (not through compaction records, and
    not looked at: the daemon's recovery and ``verify`` do that)."""
    store = root if isinstance(root, Store) else LocalStore(root)
    keys, _ = manifest_keys(store)
    manifests = []
    reads = store.read_each(keys)
    for key in keys:
        path = store.path(key) if isinstance(store, LocalStore) else store.uri(key)
        try:
            raw = next(reads)
        except OSError as exc:
            raise _bad(path, f"cannot be read: {exc.strerror or exc}") from exc
        manifests.append(parse_manifest(path, raw, store))
    check_chain(manifests)
    return manifests


def check_link(previous: Manifest, manifest: Manifest) -> None:
    """``manifest`` pins ``previous`` (the batch before it) as it is; a manifest after a
    linked one is linked too (a link removed is an edit like any other)."""
    pin = manifest.previous_pin
    if pin is None and not previous.linked:
        return  # both written before links
    if pin is not None and previous.sha256 is not None and pin == previous.sha256:
        return
    if pin is None:
        problem = f"has no link to batch {previous.batch}'s manifest, which was written with links"
    else:
        problem = (
            f"pins batch {previous.batch}'s manifest {previous.path} at sha256 {pin}, but it "
            f"has {previous.sha256}"
        )
    raise IntegrityError(
        f"manifest {manifest.path} {problem}: one of the two was edited after its commit",
        hint="restore the manifests from a backup; nothing was changed in the landing zone",
    )


def check_chain(manifests: Iterable[Manifest]) -> None:
    """Batch numbers, ``_seq`` ranges and positions must follow on without gaps."""
    previous: Manifest | None = None
    seen_paths: dict[str, int] = {}
    for manifest in manifests:
        if previous is not None:
            if manifest.batch != previous.batch + 1:
                raise IntegrityError(
                    f"batch {previous.batch + 1} is missing: its manifest is not in "
                    f"{str(manifest.path).rpartition('/')[0]} (batch {previous.batch} is "
                    f"followed by {manifest.batch})",
                    hint="restore the missing manifest from a backup; its files are still in "
                    "the landing zone and nothing was changed",
                )
            if manifest.first_seq != previous.last_seq + 1:
                raise IntegrityError(
                    f"manifest {manifest.path} starts at _seq {manifest.first_seq}, but batch "
                    f"{previous.batch} ended at {previous.last_seq}",
                    hint="the manifests do not come from one writer: restore them from a "
                    "backup; two processes must never write one landing zone",
                )
            if previous.landing_id is not None and manifest.landing_id != previous.landing_id:
                raise IntegrityError(
                    f"manifest {manifest.path} belongs to landing zone "
                    f"{manifest.landing_id or '(none: written before ids)'}, batch "
                    f"{previous.batch} to landing zone {previous.landing_id}",
                    hint="the manifests come from two landing zones: restore them from a "
                    "backup; two landing zones must never share a directory",
                )
            moved = bool(manifest.data.get("start_moved", False))
            if not moved and manifest.data.get("start") != previous.data.get("end"):
                raise IntegrityError(
                    f"manifest {manifest.path} starts at {manifest.data.get('start')}, but batch "
                    f"{previous.batch} ended at {previous.data.get('end')}",
                    hint="the manifests do not come from one writer: restore them from a backup",
                )
            check_link(previous, manifest)  # last: what is out of line is named first
        for entry in manifest.entries:
            other = seen_paths.setdefault(str(entry["path"]), manifest.batch)
            if other != manifest.batch:
                raise IntegrityError(
                    f"{entry['path']} is named by the manifests of batches {other} and "
                    f"{manifest.batch}",
                    hint="one of them is not a commit record of this landing zone: restore the "
                    "manifests from a backup",
                )
        previous = manifest
