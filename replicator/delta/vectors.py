"""Deletion vectors: an incremental run that marks replaced rows deleted, not rewriting files.

Copy-on-write rewrites every file that holds a touched key; a batch whose keys are spread
evenly over a table touches nearly every file, and so costs a whole rewrite. With deletion
vectors (``materialize --format delta``'s default for the tables it builds:
``materialize._wants_vectors``) a keyed table's batch is applied as Spark and Databricks apply
one to a table with deletion vectors on:

* every touched row's file keeps its data and gets a *deletion vector* (the positions of its
  rows that no longer count: the old vector's and this batch's), in one vector file per
  commit (``deletion_vector_<uuid>.bin``);
* the new versions of the touched keys still alive, and new keys, go to new files;
* one commit replaces each touched file's ``add`` by the same file with its new vector, adds
  the new files and records the batch's app transaction.

delta-rs 1.6 reads such tables (``DeltaTable.scan``, MERGE, DELETE, optimize, vacuum,
checkpoints) but writes no vectors (delta-rs issue #4512) and its commit API takes no
``deletionVector``, so this module writes the vectors and the commit itself, in the formats
of the Delta protocol: a vector is a ``RoaringBitmapArray`` (a magic number, then portable
32-bit Roaring bitmaps from ``pyroaring``, each after its high half) in a file of format
version 1 whose entries are a big-endian size, the vector and its big-endian CRC-32; the
commit is the next ``_delta_log/<version>.json``, created only if absent (a hard link
locally; a conditional PUT on an object store), so that a concurrent commit makes this one
fail instead of being overwritten.

The removal of a file with a vector must name that vector (the protocol identifies a file
by its path and its vector), which delta-rs does not expose: ``live_files`` replays the log
itself (the last checkpoint, then the commits after it). Only vectors stored in files
(storage type ``u``) are read; any other stops the run with a clear error.

Tables with deletion vectors need readers of protocol 3/7 with the ``deletionVectors``
feature: Spark with delta-spark 2.4+, Databricks, DuckDB's delta extension, Trino, Polars,
delta-rs's ``DeltaTable.scan``. ``DeltaTable.to_pyarrow_table`` and ``to_pyarrow_dataset``
refuse them (``--no-deletion-vectors`` is for their users). ``materialize --optimize``
rewrites the files without their deleted rows (its Z-order reads through the vectors).
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow.parquet as pq

from ..errors import IntegrityError
from ..storage import LocalStore, Store

__all__ = [
    "FEATURE",
    "LogFile",
    "added",
    "commit",
    "decode",
    "deleted_rows",
    "encode",
    "live_files",
    "removal",
    "vacuum_vectors",
    "with_vector",
    "write_vectors",
]

FEATURE = "deletionVectors"
_MAGIC = 1681511377  # a RoaringBitmapArray's first four bytes (little-endian)
_FILE_VERSION = 1  # a vector file's first byte
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_COMMIT = re.compile(r"(\d{20})\.json")
_VECTOR_FILE = re.compile(r"(?:[^/]+/)?deletion_vector_[0-9a-f-]{36}\.bin")


# ------------------------------------------------------------------------------ vectors


def encode(deleted: npt.NDArray[np.int64]) -> bytes:
    """The vector of the row positions ``deleted`` (a file's rows, from 0)."""
    from pyroaring import BitMap  # noqa: PLC0415 - optional dependency

    if len(deleted) and (int(deleted.min()) < 0 or int(deleted.max()) >= 1 << 32):
        raise ValueError("a deletion vector holds row positions from 0 to 2**32 - 1")
    bitmap = BitMap(deleted.astype(np.uint32, copy=False))
    return struct.pack("<iqi", _MAGIC, 1, 0) + bitmap.serialize()


def decode(data: bytes, where: str) -> npt.NDArray[np.int64]:
    """The row positions of a vector (``encode``'s format, any number of 32-bit halves)."""
    from pyroaring import BitMap  # noqa: PLC0415 - optional dependency

    if len(data) < 12 or struct.unpack_from("<i", data)[0] != _MAGIC:
        raise IntegrityError(f"{where}: not a deletion vector (no RoaringBitmapArray magic)")
    (count,) = struct.unpack_from("<q", data, 4)
    parts: list[npt.NDArray[np.int64]] = []
    at = 12
    try:
        for _ in range(count):
            (high,) = struct.unpack_from("<i", data, at)
            bitmap = BitMap.deserialize(data[at + 4 :])
            size = len(bitmap.serialize())
            at += 4 + size
            low = np.asarray(bitmap.to_array(), dtype=np.int64)
            parts.append(low + (np.int64(high) << 32))
    except (struct.error, ValueError, OverflowError) as exc:
        raise IntegrityError(f"{where}: a malformed deletion vector ({exc})") from exc
    if at != len(data):
        raise IntegrityError(f"{where}: a deletion vector of {len(data)} bytes holds {at}")
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _z85(raw: bytes) -> str:
    out: list[str] = []
    for i in range(0, len(raw), 4):
        number = int.from_bytes(raw[i : i + 4], "big")
        digits = []
        for _ in range(5):
            number, digit = divmod(number, 85)
            digits.append(_Z85[digit])
        out.extend(reversed(digits))
    return "".join(out)


def _unz85(text: str) -> bytes:
    out = bytearray()
    for i in range(0, len(text), 5):
        number = 0
        for c in text[i : i + 5]:
            number = number * 85 + _Z85_VALUE[c]
        out += number.to_bytes(4, "big")
    return bytes(out)


def vector_file(descriptor: dict[str, Any], where: str) -> str:
    """The path (in the table) of the file a ``u`` descriptor's vector is stored in."""
    if descriptor.get("storageType") != "u":
        raise IntegrityError(
            f"{where}: a deletion vector stored as {descriptor.get('storageType')!r} "
            "(only vectors in files, storage type 'u', are read)"
        )
    text = str(descriptor["pathOrInlineDv"])
    prefix, encoded = text[:-20], text[-20:]
    try:
        name = f"deletion_vector_{uuid.UUID(bytes=_unz85(encoded))}.bin"
    except (KeyError, ValueError) as exc:
        raise IntegrityError(f"{where}: a malformed deletion vector id {text!r}") from exc
    return f"{prefix}/{name}" if prefix else name


def deleted_rows(
    store: Store, rel: str, entry: LogFile, files: dict[str, bytes] | None = None
) -> npt.NDArray[np.int64]:
    """The positions of ``entry``'s deleted rows (none without a vector), its CRC checked.
    ``files``: the vector files already read, by path (one commit writes the vectors of all
    the files it touched into one), filled as they are read."""
    descriptor = entry.vector
    if descriptor is None:
        return np.zeros(0, dtype=np.int64)
    where = f"{rel}/{entry.path}"
    path = f"{rel}/{vector_file(descriptor, where)}"
    read = {} if files is None else files
    if path not in read:
        read[path] = store.read(path)
    blob = read[path]
    offset = int(descriptor.get("offset") or 1)
    size = int(descriptor["sizeInBytes"])
    if not blob or blob[0] != _FILE_VERSION or len(blob) < offset + 8 + size:
        raise IntegrityError(f"{path}: not a deletion vector file of format version 1")
    (stored,) = struct.unpack_from(">i", blob, offset)
    data = blob[offset + 4 : offset + 4 + size]
    (crc,) = struct.unpack_from(">I", blob, offset + 4 + size)
    if stored != size or zlib.crc32(data) != crc:
        raise IntegrityError(f"{path}: the deletion vector of {entry.path} fails its checksum")
    rows = decode(data, path)
    if len(rows) != int(descriptor["cardinality"]):
        raise IntegrityError(
            f"{path}: the deletion vector of {entry.path} holds {len(rows)} rows, "
            f"its descriptor says {descriptor['cardinality']}"
        )
    return rows


def write_vectors(store: Store, rel: str, vectors: Sequence[npt.NDArray[np.int64]]) -> list[Any]:
    """Write ``vectors`` into one new vector file; returns their descriptors, in order."""
    name = uuid.uuid4()
    blob = bytearray([_FILE_VERSION])
    descriptors: list[Any] = []
    for rows in vectors:
        data = encode(rows)
        descriptors.append(
            {
                "storageType": "u",
                "pathOrInlineDv": _z85(name.bytes),
                "offset": len(blob),
                "sizeInBytes": len(data),
                "cardinality": len(rows),
            }
        )
        blob += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    store.write(f"{rel}/deletion_vector_{name}.bin", bytes(blob))
    return descriptors


# ------------------------------------------------------------------------------ the log


@dataclass(frozen=True, slots=True)
class LogFile:
    """A file of the table's current version: its ``add`` action as the log holds it."""

    add: dict[str, Any]

    @property
    def path(self) -> str:
        return str(self.add["path"])

    @property
    def vector(self) -> dict[str, Any] | None:
        found = self.add.get("deletionVector")
        return dict(found) if found else None


def _identity(action: dict[str, Any]) -> tuple[str, str | None]:
    """A file's identity in the log: its path and its vector's unique id."""
    vector = action.get("deletionVector")
    if not vector:
        return str(action["path"]), None
    unique = f"{vector['storageType']}{vector['pathOrInlineDv']}"
    if vector.get("offset") is not None:
        unique += f"@{vector['offset']}"
    return str(action["path"]), unique


def live_files(store: Store, rel: str) -> tuple[int, dict[str, LogFile]]:
    """The table's version and its files by path, replayed from the log: the last
    checkpoint's ``add`` actions, then every commit after it in order."""
    version, files, _ = _replay(store, rel)
    by_path: dict[str, LogFile] = {}
    for (path, _), add in files.items():
        if path in by_path:
            raise IntegrityError(f"{rel}: the Delta log holds {path} twice, with two vectors")
        by_path[path] = LogFile(add)
    return version, by_path


def _replay(
    store: Store, rel: str
) -> tuple[int, dict[tuple[str, str | None], dict[str, Any]], list[dict[str, Any]]]:
    """The version, the ``add`` actions in force (by identity) and the ``remove`` actions
    (tombstones) the checkpoint and the commits after it hold."""
    log = f"{rel}/_delta_log" if rel else "_delta_log"
    files: dict[tuple[str, str | None], dict[str, Any]] = {}
    removed: list[dict[str, Any]] = []
    since = -1
    if store.exists(f"{log}/_last_checkpoint"):
        info = json.loads(store.read(f"{log}/_last_checkpoint"))
        since = int(info["version"])
        parts = info.get("parts")
        names = (
            [f"{since:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]
            if parts
            else [f"{since:020d}.checkpoint.parquet"]
        )
        filesystem, base = store.filesystem()
        for name in names:
            path = f"{base}/{log}/{name}"
            found = pq.read_table(path, columns=["add", "remove"], filesystem=filesystem)
            for add in found.column("add").to_pylist():
                if add:
                    files[_identity(add)] = add
            removed.extend(r for r in found.column("remove").to_pylist() if r)
    version = since
    for key in store.list(log + "/"):
        commit_name = _COMMIT.fullmatch(key.rsplit("/", 1)[-1])
        if commit_name is None or int(commit_name.group(1)) <= since:
            continue
        version = int(commit_name.group(1))
        for line in store.read(key).splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                files[_identity(action["add"])] = action["add"]
            elif "remove" in action:
                files.pop(_identity(action["remove"]), None)
                removed.append(action["remove"])
    if version < 0:
        raise IntegrityError(f"{rel}: no Delta log")
    return version, files, removed


def vacuum_vectors(store: Store, rel: str, retention_hours: float) -> int:
    """Delete the vector files no version within ``retention_hours`` reads (delta-rs's
    vacuum leaves them): those that neither a file in force nor a removal made within the
    retention names. Returns how many were deleted."""
    _, files, removed = _replay(store, rel)
    cutoff = (time.time() - retention_hours * 3600) * 1000
    where = rel or "."
    kept = {
        vector_file(add["deletionVector"], where)
        for add in files.values()
        if add.get("deletionVector")
    }
    kept |= {
        vector_file(r["deletionVector"], where)
        for r in removed
        if r.get("deletionVector") and int(r.get("deletionTimestamp") or 0) >= cutoff
    }
    prefix = f"{rel}/" if rel else ""
    deleted = 0
    for key in store.list(rel):
        name = key[len(prefix) :]
        if _VECTOR_FILE.fullmatch(name) and name not in kept:
            store.delete(key)
            deleted += 1
    return deleted


def _partition_values(add: dict[str, Any]) -> dict[str, Any]:
    # a commit's JSON object, or a checkpoint's map (a list of key and value pairs)
    return dict(add.get("partitionValues") or {})


def removal(entry: LogFile, now: int) -> dict[str, Any]:
    """The action that removes ``entry``'s file, naming its vector (if any)."""
    add = entry.add
    remove: dict[str, Any] = {
        "path": add["path"],
        "deletionTimestamp": now,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": _partition_values(add),
        "size": add["size"],
    }
    if entry.vector is not None:
        remove["deletionVector"] = entry.vector
    return {"remove": remove}


def with_vector(entry: LogFile, vector: dict[str, Any], stored: int) -> dict[str, Any]:
    """The action that adds ``entry``'s file again with the vector ``vector`` (after its
    ``removal``): stats kept, their bounds no longer tight, and its ``stored`` rows as
    ``numRecords`` (which the protocol requires of a file with a vector)."""
    add = entry.add
    again: dict[str, Any] = {
        "path": add["path"],
        "partitionValues": _partition_values(add),
        "size": add["size"],
        "modificationTime": add["modificationTime"],
        "dataChange": True,
        "deletionVector": vector,
    }
    stats = json.loads(add.get("stats") or "{}")
    stats["numRecords"] = stored
    stats["tightBounds"] = False
    again["stats"] = json.dumps(stats, separators=(",", ":"))
    return {"add": again}


def added(action: Any) -> dict[str, Any]:
    """A ``deltalake`` ``AddAction`` (a file ``write_files`` wrote) as a log action."""
    return {
        "add": {
            "path": action.path,
            "partitionValues": dict(action.partition_values),
            "size": action.size,
            "modificationTime": action.modification_time,
            "dataChange": action.data_change,
            "stats": action.stats,
        }
    }


def commit(
    store: Store,
    rel: str,
    version: int,
    actions: Iterable[dict[str, Any]],
    *,
    app: str,
    batch: int,
    info: dict[str, str],
) -> None:
    """Commit ``actions`` as version ``version`` with the app transaction ``app``/``batch``
    and ``info`` in its commit info; ``FileExistsError`` when that version exists."""
    now = int(time.time() * 1000)
    lines = [
        {"commitInfo": {"timestamp": now, "operation": "MERGE", **info}},
        {"txn": {"appId": app, "version": batch, "lastUpdated": now}},
        *actions,
    ]
    data = ("\n".join(json.dumps(a, separators=(",", ":")) for a in lines) + "\n").encode()
    key = f"{rel}/_delta_log/{version:020d}.json"
    if isinstance(store, LocalStore):
        final = store.path(key)
        staged = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
        with open(staged, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(staged, final)  # fails when the version exists: never replaced
        finally:
            staged.unlink()
        directory = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    else:
        store.create(key, data)
