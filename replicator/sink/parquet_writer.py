"""Write the row changes of one table version into one Parquet file, column by column.

``ParquetTableWriter`` turns runs (``changes.Run``: one block of row images each,
``binlog.block``) into Arrow record batches, column by column: the native buffers of consecutive
runs are joined by the core into one array (``pa.Array.from_buffers``), the lists of values of
consecutive runs become one array (built by the core for plain types, else one
``pa.array(values, type)`` call), a column missing from the images becomes nulls; the metadata
columns are made once per run and spread over its rows. Converted batches are buffered and
written as row groups of ``row_group_rows`` rows, or sooner once they hold ``row_group_bytes``
(large BLOBs); a batch whose text or binary column would pass Arrow's 2 GiB per-array limit is
split. ``close()`` writes the rest, closes the file and fsyncs it; the file's SHA-256 is
computed from the bytes on their way to it (``digest.HashingStream``: nothing is read back) and
returned with its size for the manifest. Making the file visible (rename) and durable in its
directory is the commit protocol's job.

Values land as the decoder produced them (docs/type-mapping.md), with these conversions:

* ``InvalidTemporal`` (zero or invalid dates) -> null, counted in ``invalid_temporals``; a
  real date of year 0 (``epoch`` set) lands exactly in DATE and DATETIME columns.
* ``ABSENT`` (a column missing from a partial row image) -> null, and the column's name goes
  into the row's ``_absent`` list (empty for a full image). A writer opened without
  ``with_absent`` refuses such rows (IntegrityError) rather than make them look like NULLs.
  In ``_before`` absent columns are null and not listed.
* ``Decimal`` of a DECIMAL(p > 38) column -> its exact text (``arrow_types``).
* ``UnappliedJsonDiffs`` -> IntegrityError: the new document is not in the binlog.
* A value the column's Arrow type cannot hold exactly (an integer out of range, a decimal
  with too many digits, a value of the wrong kind) -> IntegrityError naming the column and
  the binlog position. Nothing is ever wrapped, rounded or dropped.

Row identity, for whoever turns the changes back into a table (``replicator.spark``):

* The schema metadata key ``replicator.primary_key`` holds the primary key's column names as a
  JSON list in key order, ``[]`` when the table has none, or none is known (TABLE_MAP without
  PRIMARY KEY metadata and no schema lookup), or a key column is filtered out: then the whole
  row is the identity. Files written before this key existed lack it (identity unknown).
* With ``with_before_key`` every file gets a ``_before_key`` column: a struct of the identity
  columns (the key, or every column when there is no key) taken from the update's before
  image. It is set for ``u`` rows and null for the others; null too for an update whose before
  image was not handed over or lacks a key column. It is what lets a reader apply an UPDATE
  that changes the primary key (the old key's row must go) and an UPDATE of a table without
  a key (the old row must go) when ``_before`` is not kept, and it names the row of a partial
  (MINIMAL) after image that leaves the unchanged key columns out. Its invalid dates are
  nulls like everywhere, but not counted again.

The conversion is optimistic. A column of a plain type (integers, floats, text, bytes, dates,
timestamps, durations) is first built by the native core (``binlog/_rowcore_c/buffers.c``, when
it is built) straight from its list of values into Arrow buffers; it gives up on anything that
is not plainly a value of the column's type (None aside), and the column is then converted by
pyarrow, as every other column is. pyarrow rejects every marker object, so a column is
converted as it is and only scanned value by value when that fails. A failed ``write()``
leaves the file as it was; a disk error (OSError) removes the partial file and raises
SinkError naming the path and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from itertools import accumulate
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..binlog import native
from ..binlog.block import VARIABLE, NativeBuffers, NativeKind, Vector, value_width
from ..binlog.constants import ColumnType
from ..binlog.json_diff import UnappliedJsonDiffs
from ..binlog.runs import RowOrigins
from ..binlog.schema import ColumnDef
from ..binlog.values import ABSENT, Geometry, InvalidTemporal
from ..errors import ConfigError, IntegrityError, InternalError, SinkError
from ..storage import Output, local_output
from . import native_arrow
from .arrow_types import (
    ABSENT_TYPE,
    BEFORE_FIELD,
    GEOMETRY_SRID,
    METADATA_FIELDS,
    arrow_field,
    arrow_schema,
)
from .changes import Run, TableVersion
from .digest import HashingStream
from .parquet_options import writer_options

__all__ = [
    "BEFORE_KEY_FIELD",
    "PRIMARY_KEY_KEY",
    "ParquetTableWriter",
    "WrittenFile",
    "file_schema",
    "identity",
]

BEFORE_KEY_FIELD = "_before_key"
PRIMARY_KEY_KEY = b"replicator.primary_key"

_OPS = frozenset({"c", "u", "d", "r"})
# pyarrow raises ArrowInvalid (a ValueError), ArrowTypeError (a TypeError) or OverflowError
# for a value its target type cannot hold.
_CONVERSION_ERRORS = (ValueError, TypeError, OverflowError)
_JSON_DIFF_HINT = (
    "the source logged a JSON column as a diff (binlog_row_value_options=PARTIAL_JSON) "
    "without its before image: set binlog_row_image=FULL or binlog_row_value_options='' on "
    "the source, then replay from before this position"
)


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A closed, fsynced file: where it is and what it holds."""

    path: Path | str  # a local path, or an object store's URL
    rows: int
    bytes: int
    first_seq: int | None  # None for a file without rows
    last_seq: int | None
    invalid_temporals: int  # zero/invalid dates written as null
    sha256: str = ""  # the content hash (``digest``), computed as the bytes were written


class _Absent(Enum):
    """What a column conversion does with ABSENT."""

    TRACK = "track"  # null, and the row index is recorded for ``_absent``
    NULL = "null"  # null (the ``_before`` image)
    REFUSE = "refuse"  # IntegrityError (no ``_absent`` column in this file)


@dataclass(frozen=True, slots=True)
class _ColumnPlan:
    """Everything one column's conversion needs, resolved once per column definition
    (``_plan`` is cached: a batch spread over many tables opens a writer per table)."""

    name: str
    type: pa.DataType
    prepare: Callable[[Sequence[object]], Sequence[object]] | None
    native: tuple[int, int] | None = None  # (kind, byte width) for the native core


def _decimal_text(values: Sequence[object]) -> list[object]:
    return [format(v, "f") if type(v) is Decimal else v for v in values]


def identity(version: TableVersion) -> tuple[tuple[int, ...], bool]:
    """Positions (in ``version.columns``) of the columns that identify a row, and whether
    they are the primary key (else: every column). ``primary_key`` holds the TABLE_MAP's
    column ordinals, which survive a column filter as ``ColumnDef.index``."""
    where = {col.index: pos for pos, col in enumerate(version.columns)}
    if version.primary_key and all(i in where for i in version.primary_key):
        return tuple(where[i] for i in version.primary_key), True
    return tuple(range(len(version.columns))), False


@functools.lru_cache(maxsize=65536)
def _plan(col: ColumnDef, geometry_srid: bool) -> _ColumnPlan:
    field = arrow_field(col, geometry_srid=geometry_srid)
    if col.type == ColumnType.NEWDECIMAL and pa.types.is_string(field.type):
        return _ColumnPlan(field.name, field.type, _decimal_text)
    if field.type == GEOMETRY_SRID:
        return _ColumnPlan(field.name, field.type, _geometry_srid)
    return _ColumnPlan(field.name, field.type, None, native_arrow.arrow_kind(field.type))


def _geometry_srid(values: Sequence[object]) -> list[object]:
    """GEOMETRY values (``Geometry``: WKB with its SRID) as ``struct<wkb, srid>`` items."""
    return [{"wkb": bytes(v), "srid": v.srid} if isinstance(v, Geometry) else v for v in values]


def _native_list(values: list[object], plan: _ColumnPlan) -> pa.Array | None:
    """A list of values as an Arrow array built by the native core in one pass; None when
    the core is not there, has no kind for the type, or leaves the column to pyarrow."""
    if plan.native is None or not native.available():
        return None
    found = native_arrow.arrow_columns(values, 0, ((0, *plan.native),))[0]
    return None if found is None else _from_buffers(plan.type, len(values), found)


def _from_buffers(type_: pa.DataType, n: int, found: native_arrow.ArrowBuffers) -> pa.Array:
    validity, data, offsets, nulls = found
    buffers = [None if validity is None else pa.py_buffer(validity)]
    if offsets is not None:
        buffers.append(pa.py_buffer(offsets))
    buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(type_, n, buffers, null_count=nulls)


_SIGNED = {1: pa.int8(), 2: pa.int16(), 4: pa.int32(), 8: pa.int64()}
_UNSIGNED = {1: pa.uint8(), 2: pa.uint16(), 4: pa.uint32(), 8: pa.uint64()}
_NATIVE_TYPES = {
    "date32": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "timestamp_utc": pa.timestamp("us", tz="UTC"),
    "duration": pa.duration("us"),
    "utf8": pa.string(),
    "binary": pa.binary(),
}


def native_type(kind: NativeKind) -> pa.DataType:
    """The Arrow type whose buffers a ``NativeKind``'s buffers are."""
    name, first, second = kind
    if name == "int":
        return (_SIGNED if second else _UNSIGNED)[first]
    if name == "float":
        return pa.float32() if first == 4 else pa.float64()
    if name == "decimal128":
        return pa.decimal128(first, second)
    return _NATIVE_TYPES[name]


# the metadata columns runs of several transactions give per rows event (``Run.origins``), in
# the order of METADATA_FIELDS
_ORIGINS = (None, None, "gtid", "ts", "server_id", None, "binlog_pos")
# up to this many rows a write's metadata columns are spread in Python: each Arrow call
# costs microseconds, and a source whose transactions change a row or two of many tables
# makes one write of a few rows per table and transaction
_SPREAD_IN_PYTHON = 64


class _Rows:
    """The rows of a list of runs: where each run starts, and where a row came from."""

    def __init__(self, runs: Sequence[Run]) -> None:
        self.runs = runs
        self.starts = list(accumulate((run.block.count for run in runs), initial=0))
        self.count = self.starts[-1]
        self._counts: np.ndarray[Any, Any] | None = None
        self.origins = any(run.origins is not None for run in runs)
        self._event_count_array: np.ndarray[Any, Any] | None = None

    def where(self, row: int) -> str:
        k = bisect_right(self.starts, row) - 1
        run = self.runs[k]
        at = row - self.starts[k]
        position = run.binlog_pos if run.origins is None else run.origins.position_of(at)
        return f"{run.binlog_file}:{position} (_seq {run.seq + at})"

    def spread_origins(self, values: Sequence[object], type_: pa.DataType, which: str) -> pa.Array:
        """A metadata column that runs of several transactions (``Run.origins``) give per
        rows event: theirs spread over each event's rows, the other runs' values over theirs
        (one event each), in one run-end decode."""
        if not self.origins:
            return self.spread(values, type_)
        runs, pieces, k = self.runs, [], 0
        while k < len(runs):
            origins = runs[k].origins
            if origins is not None:
                pieces.append(_per_event(origins, which, type_))
                k += 1
                continue
            end = k + 1
            while end < len(runs) and runs[end].origins is None:
                end += 1
            pieces.append(pa.array(values[k:end], type_))
            k = end
        per_event = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
        counts = self._event_counts()
        if len(counts) == self.count:  # a row an event (one-row transactions): as they are
            return per_event
        return _repeated(per_event, counts)

    def _event_counts(self) -> np.ndarray[Any, Any]:
        """How many rows each event has: a run with origins has one event per rows event,
        any other run is one."""
        if self._event_count_array is None:
            parts: list[np.ndarray[Any, Any]] = []
            for run in self.runs:
                origins = run.origins
                if origins is None:
                    parts.append(np.array([run.block.count], np.int32))
                else:
                    parts.append(np.diff(np.frombuffer(origins.ends, np.int32), prepend=0))
            self._event_count_array = np.concatenate(parts)
        return self._event_count_array

    def spread(self, values: Sequence[object], type_: pa.DataType) -> pa.Array:
        """One value per run, repeated over the run's rows (run-end decoded in Arrow; no run
        is empty, ``write`` leaves those out)."""
        if len(self.runs) == 1:
            return pa.repeat(pa.scalar(values[0], type_), self.count)
        if self.count == len(self.runs):  # a row a run (one-row transactions): as they are
            return pa.array(values, type_)
        if self.count <= _SPREAD_IN_PYTHON:  # a few rows: a list is quicker than Arrow's calls
            counts = [run.block.count for run in self.runs]
            return pa.array(
                [v for v, n in zip(values, counts, strict=True) for _ in range(n)], type_
            )
        if self._counts is None:  # each run's rows, made once per conversion
            self._counts = np.array([run.block.count for run in self.runs], np.int64)
        return _repeated(pa.array(values, type_), self._counts)

    def numbers(self) -> pa.Array:
        """``_seq``: each run's numbers from its ``seq``, one per row."""
        if self.count == 0:
            return pa.array([], pa.int64())
        if self.count == len(self.runs):  # a row a run
            return pa.array([run.seq for run in self.runs], pa.int64())
        if self.count <= _SPREAD_IN_PYTHON:
            return pa.array(
                [n for run in self.runs for n in range(run.seq, run.seq + run.block.count)],
                pa.int64(),
            )
        numbers = [
            np.arange(run.seq, run.seq + run.block.count, dtype=np.int64) for run in self.runs
        ]
        return _from_numpy(np.concatenate(numbers), pa.int64())


def _repeated(values: pa.Array, counts: np.ndarray[Any, Any]) -> pa.Array:
    """Each of ``values`` repeated its count of times (a run-end decode, in numpy: Arrow's
    compute module, which has one, takes a tenth of a second to import). For the types of the
    metadata columns and ``_before``'s mask: fixed-width values, booleans and text."""
    n = int(counts.sum())
    type_, length, offset = values.type, len(values), values.offset
    validity = None
    if values.null_count:
        bits = np.unpackbits(np.frombuffer(values.buffers()[0], np.uint8), bitorder="little")
        validity = pa.py_buffer(
            np.packbits(np.repeat(bits[offset : offset + length], counts), bitorder="little")
        )
    data = values.buffers()[-1]
    if pa.types.is_boolean(type_):
        bits = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")
        packed = np.packbits(np.repeat(bits[offset : offset + length], counts), bitorder="little")
        return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(packed)])
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        offsets = np.frombuffer(values.buffers()[1], np.int32, length + 1, offset * 4)
        raw = data.to_pybytes()
        bounds = offsets.tolist()
        # each value's bytes repeated by bytes' own repetition: a few values (runs, events)
        # of many rows each
        text = b"".join(
            raw[bounds[i] : bounds[i + 1]] * count for i, count in enumerate(counts.tolist())
        )
        ends = np.cumsum(np.repeat(np.diff(offsets), counts), dtype=np.int32)
        out_offsets = np.concatenate([np.zeros(1, np.int32), ends])
        buffers = [validity, pa.py_buffer(out_offsets), pa.py_buffer(text)]
        return pa.Array.from_buffers(type_, n, buffers)
    width = type_.bit_width // 8
    fixed = np.frombuffer(data, np.dtype(f"V{width}"), length, offset * width)
    return pa.Array.from_buffers(type_, n, [validity, pa.py_buffer(np.repeat(fixed, counts))])


def _from_numpy(values: np.ndarray[Any, Any], type_: pa.DataType) -> pa.Array:
    """A numpy array of fixed-width values without nulls as an Arrow array of ``type_``, on
    the same memory. (``pa.array`` of a numpy array imports ``numpy.ma``, and ``to_numpy``
    pandas' date helpers: tens of milliseconds at a daemon's first write.)"""
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)], null_count=0)


def _per_event(origins: RowOrigins, which: str, type_: pa.DataType) -> pa.Array:
    """One metadata column of a run's events from their origins (``binlog.runs``): ``which``
    is ``gtid``, ``ts``, ``server_id`` or ``binlog_pos``."""
    events = origins.events
    if which == "gtid":
        validity = None if origins.gtid_validity is None else pa.py_buffer(origins.gtid_validity)
        buffers = [validity, pa.py_buffer(origins.gtid_offsets), pa.py_buffer(origins.gtid_text)]
        return pa.Array.from_buffers(type_, events, buffers, null_count=origins.gtid_nulls)
    data = {
        "ts": origins.timestamps,
        "server_id": origins.server_ids,
        "binlog_pos": origins.positions,
    }[which]
    return pa.Array.from_buffers(type_, events, [None, pa.py_buffer(data)], null_count=0)


class ParquetTableWriter:
    """Appends row changes of one table version to one Parquet file.

    ``write()`` converts and buffers; every ``row_group_rows`` rows become one row group
    (fewer when the buffer reaches ``row_group_bytes``).
    ``close()`` returns a ``WrittenFile`` once the file is complete and fsynced; ``abort()``
    (or leaving a ``with`` block by an exception) closes and deletes it.
    """

    def __init__(
        self,
        path: Path | Output,
        version: TableVersion,
        *,
        with_before: bool,
        with_absent: bool = False,
        with_before_key: bool = False,
        row_group_rows: int = 128_000,
        row_group_bytes: int = 128 << 20,
        compression: str = "zstd",
        geometry_srid: bool = False,
    ) -> None:
        if row_group_rows < 1:
            raise InternalError(f"row_group_rows must be positive, not {row_group_rows}")
        _check_compression(compression)
        self.path: Path | str = path if isinstance(path, Path) else path.name
        self.version = version
        self.with_before = with_before
        self.with_absent = with_absent
        self.row_group_rows = row_group_rows
        self.row_group_bytes = row_group_bytes
        self.with_before_key = with_before_key
        self._plans = tuple(_plan(col, geometry_srid) for col in version.columns)
        self._key, _ = identity(version)
        self.schema = file_schema(
            version,
            with_before=with_before,
            with_absent=with_absent,
            with_before_key=with_before_key,
            geometry_srid=geometry_srid,
        )
        self._before_type = self.schema.field(BEFORE_FIELD).type if with_before else None
        self._before_key_type = (
            self.schema.field(BEFORE_KEY_FIELD).type if with_before_key else None
        )
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._rows = 0
        self._first_seq: int | None = None
        self._last_seq: int | None = None
        self._invalid_temporals = 0
        self._done = False
        self._file: Output | None = None
        self._hashing: HashingStream | None = None
        self._sink: Any = None
        self._writer: Any = None
        try:
            # a local path, or a store's output (a data file straight into an object store);
            # every byte is hashed on its way there (the manifest records it: ``digest``)
            self._file = local_output(path) if isinstance(path, Path) else path
            self._hashing = HashingStream(self._file.stream)
            self._sink = self._hashing.arrow_sink()
            self._writer = pq.ParquetWriter(self._sink, self.schema, **writer_options(compression))
        except OSError as exc:
            self._fail(exc, "create")
        except BaseException:  # e.g. an unknown compression: leave no file behind
            self.abort()
            raise

    # ------------------------------------------------------------------ public API

    @property
    def rows(self) -> int:
        """Rows accepted so far (written or buffered)."""
        return self._rows

    @property
    def invalid_temporals(self) -> int:
        """Zero/invalid dates written as null so far."""
        return self._invalid_temporals

    def write(self, runs: Sequence[Run]) -> None:
        """Convert ``runs`` (in ``_seq`` order, continuing the previous call) and append
        them. Raises IntegrityError for a value that cannot be written exactly, SinkError
        for a disk error (the file is then removed)."""
        self._check_open()
        runs = [run for run in runs if run.block.count]
        if not runs:
            return
        converted = self._convert_fitting(runs)
        for batch, invalid in converted:
            self._invalid_temporals += invalid
            self._pending.append(batch)
            self._pending_rows += batch.num_rows
            self._pending_bytes += batch.nbytes
            self._rows += batch.num_rows
        if self._first_seq is None:
            self._first_seq = runs[0].seq
        self._last_seq = runs[-1].last_seq
        if self._pending_bytes >= self.row_group_bytes:
            self._flush(final=True)  # large values: a smaller row group rather than GiBs held
        elif self._pending_rows >= self.row_group_rows:
            self._flush(final=False)

    def close(self) -> WrittenFile:
        """Write what is buffered, close the file and fsync it."""
        self._check_open()
        try:
            self._flush(final=True)
            self._writer.close()
            self._sink.close()  # the rest of its buffer through the hash
            assert self._file is not None and self._hashing is not None
            size = self._file.close()  # fsync'd (local) or uploaded whole (object store)
        except OSError as exc:
            self._fail(exc, "write")
        self._done = True
        if size != self._hashing.size:  # the hash would not be the stored file's
            self._file.abort()
            raise SinkError(
                f"{self.path}: {size} bytes were stored, {self._hashing.size} written",
                hint="the landing zone's storage lost or added bytes: check it; the batch is "
                "replayed from the last checkpoint on restart",
            )
        return WrittenFile(
            self.path,
            self._rows,
            size,
            self._first_seq,
            self._last_seq,
            self._invalid_temporals,
            self._hashing.hexdigest(),
        )

    def abort(self) -> None:
        """Close and delete the file; safe to call more than once and after errors."""
        if self._done:
            return
        self._done = True
        self._pending.clear()
        for part in (self._writer, self._sink):
            if part is not None:
                with contextlib.suppress(Exception):  # the file is deleted anyway
                    part.close()
        if self._file is not None:  # closed and deleted (also on a read-only directory)
            self._file.abort()

    def __enter__(self) -> ParquetTableWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()

    # ------------------------------------------------------------------ file

    def _check_open(self) -> None:
        if self._done:
            raise InternalError(f"{self.path}: the writer is already closed")

    def _flush(self, *, final: bool) -> None:
        if not self._pending_rows:
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        whole = (
            self._pending_rows
            if final
            else (self._pending_rows // self.row_group_rows * self.row_group_rows)
        )
        try:
            self._writer.write_table(table.slice(0, whole), row_group_size=self.row_group_rows)
        except OSError as exc:
            self._fail(exc, "write")
        rest = table.slice(whole)
        self._pending = rest.to_batches() if rest.num_rows else []
        self._pending_rows = rest.num_rows
        self._pending_bytes = rest.nbytes if rest.num_rows else 0

    def _fail(self, exc: OSError, doing: str) -> NoReturn:
        self.abort()
        directory = (
            self.path.parent if isinstance(self.path, Path) else self.path.rpartition("/")[0]
        )
        code = exc.errno
        if code in (errno.ENOSPC, errno.EDQUOT):
            hint = (
                f"free space on the filesystem holding {directory} (or raise its quota), "
                "then restart: the batch is written again from the checkpoint"
            )
        elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
            hint = (
                f"make {directory} writable for the user running replicator "
                f"(uid {os.getuid()}), then restart"
            )
        elif code in (errno.ENOENT, errno.ENOTDIR):
            hint = f"check that the landing zone directory {directory} exists and is a directory"
        elif code in (errno.EMFILE, errno.ENFILE):
            hint = "raise the open-files limit (ulimit -n) of the replicator process"
        else:
            hint = f"check the filesystem holding {directory}, then restart"
        reason = exc.strerror or str(exc)
        raise SinkError(f"cannot {doing} {self.path}: {reason}", hint=hint) from exc

    # ------------------------------------------------------------------ conversion

    def _convert_fitting(self, runs: list[Run]) -> list[tuple[pa.RecordBatch, int]]:
        """Convert ``runs`` into as many record batches as it takes to keep every binary or
        string column under Arrow's 2 GiB per array (a few LONGBLOBs can pass it): the runs
        are halved, and a single run's rows."""
        try:
            return [self._convert(runs)]
        except _TooLarge:
            if len(runs) == 1 and runs[0].block.count == 1:
                raise SinkError(
                    f"table {self.version.name}: a row over 2 GiB at {_Rows(runs).where(0)}",
                    hint="a single row's values exceed what one Parquet row group column "
                    "can hold; leave the column or table out of replication",
                ) from None
        if len(runs) == 1:
            run, middle = runs[0], runs[0].block.count // 2
            count, origins = run.block.count, run.origins
            first = run._replace(
                block=run.block.slice(0, middle),
                origins=None if origins is None else origins.slice(0, middle),
            )
            second = run._replace(
                seq=run.seq + middle,
                block=run.block.slice(middle, count),
                origins=None if origins is None else origins.slice(middle, count),
            )
            halves = ([first], [second])
        else:
            middle = len(runs) // 2
            halves = (runs[:middle], runs[middle:])
        return self._convert_fitting(halves[0]) + self._convert_fitting(halves[1])

    def _convert(self, runs: list[Run]) -> tuple[pa.RecordBatch, int]:
        rows = _Rows(runs)
        width = len(self._plans)
        images = [run.block.values for run in runs]
        for start, values in zip(rows.starts, images, strict=False):
            found = len(values)
            if found != width:
                raise InternalError(
                    f"table {self.version.name}: row image of {found} values for {width} "
                    f"columns at {rows.where(start)}"
                )
        invalid = 0
        absent_rows: dict[int, list[int]] = {}
        mode = _Absent.TRACK if self.with_absent else _Absent.REFUSE
        arrays: list[pa.Array] = []
        for index, plan in enumerate(self._plans):
            absent: list[int] = []
            vectors = [values[index] for values in images]
            array, bad = self._vectors(index, plan, vectors, rows, mode, absent)
            invalid += bad
            if absent:
                absent_rows[index] = absent
            arrays.append(array)
        metadata = self._metadata(rows)
        arrays.extend(metadata)
        if self._before_type is not None:
            before, bad = self._before(rows)
            invalid += bad
            arrays.append(before)
        if self.with_absent:
            arrays.append(self._absent(rows.count, absent_rows))
        if self._before_key_type is not None:
            arrays.append(self._before_key(rows))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema), invalid

    def _vectors(
        self,
        index: int,
        plan: _ColumnPlan,
        vectors: Sequence[Vector | None],
        rows: _Rows,
        mode: _Absent,
        absent_rows: list[int],
    ) -> tuple[pa.Array, int]:
        """One column of ``rows`` (the vectors of each run) as one array: runs of native
        buffers joined by the core, runs of values converted, absent runs null."""
        first = type(vectors[0])
        if first is tuple and set(map(type, vectors)) == {tuple}:  # all buffers: at once
            kind = rows.runs[0].block.natives[index]
            parts = cast(list[NativeBuffers], vectors)
            return self._native(plan, kind, parts, rows.count), 0
        pieces: list[pa.Array] = []
        invalid = 0
        k, total = 0, len(vectors)
        while k < total:
            form = type(vectors[k])
            end = k + 1
            while end < total and type(vectors[end]) is form:
                end += 1
            start, count = rows.starts[k], rows.starts[end] - rows.starts[k]
            if form is tuple:
                kind = rows.runs[k].block.natives[index]
                parts = cast(list[NativeBuffers], vectors[k:end])
                pieces.append(self._native(plan, kind, parts, count))
            elif form is list:
                values: list[object] = []
                for vector in vectors[k:end]:
                    values.extend(cast(list[object], vector))
                array, bad = self._column(plan, values, rows, start, mode, absent_rows)
                invalid += bad
                pieces.append(array)
            else:  # the column is not in these images
                if mode is _Absent.REFUSE:
                    self._refuse_absent(plan, rows, start)
                if mode is _Absent.TRACK:
                    absent_rows.extend(range(start, start + count))
                pieces.append(pa.nulls(count, plan.type))
            k = end
        return (pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)), invalid

    def _native(
        self, plan: _ColumnPlan, kind: NativeKind | None, parts: list[NativeBuffers], count: int
    ) -> pa.Array:
        """Native buffers of consecutive runs joined into one array of the column's type."""
        if kind is None or native_type(kind) != plan.type:
            raise InternalError(
                f"table {self.version.name}: column `{plan.name}` was decoded into {kind} "
                f"buffers, which do not make {plan.type}"
            )
        found = native_arrow.concat_columns(parts, value_width(kind), kind[0] in VARIABLE)
        if found is None:  # past 2 GiB of text
            raise _TooLarge
        return _from_buffers(plan.type, count, found)

    def _refuse_absent(self, plan: _ColumnPlan, rows: _Rows, row: int) -> NoReturn:
        raise IntegrityError(
            f"table {self.version.name}: column `{plan.name}` is missing from "
            f"the row image at {rows.where(row)}",
            hint="the source logs partial row images (binlog_row_image=MINIMAL "
            "or NOBLOB): set binlog_row_image=FULL on the source, or enable "
            "absent-column tracking (_absent) for this table",
        )

    def _column(
        self,
        plan: _ColumnPlan,
        values: list[object],
        rows: _Rows,
        offset: int,
        mode: _Absent,
        absent_rows: list[int],
    ) -> tuple[pa.Array, int]:
        """Values of one column (rows ``offset`` on) to Arrow: natively or at once when no
        marker is in them, else scanned and converted again."""
        if plan.prepare is not None:
            values = list(plan.prepare(values))
        else:
            built = _native_list(values, plan)
            if built is not None:
                return built, 0
        try:
            return _fitting(pa.array(values, type=plan.type)), 0
        except _CONVERSION_ERRORS:
            pass
        cleaned = list(values)
        invalid = 0
        exact: dict[int, int] = {}  # row -> epoch value of a year-0 date (InvalidTemporal)
        epoch_type = _EPOCH_STORAGE.get(plan.type)
        for i, value in enumerate(cleaned):
            if value is ABSENT:
                if mode is _Absent.REFUSE:
                    self._refuse_absent(plan, rows, offset + i)
                if mode is _Absent.TRACK:
                    absent_rows.append(offset + i)
                cleaned[i] = None
            elif type(value) is InvalidTemporal:
                if value.epoch is not None and epoch_type is not None:
                    exact[i] = value.epoch
                else:
                    invalid += 1
                cleaned[i] = None
            elif type(value) is UnappliedJsonDiffs:
                raise IntegrityError(
                    f"table {self.version.name}: column `{plan.name}` holds JSON diffs that "
                    f"cannot be applied at {rows.where(offset + i)}",
                    hint=_JSON_DIFF_HINT,
                )
        try:
            array = _fitting(pa.array(cleaned, type=plan.type))
        except _CONVERSION_ERRORS as exc:
            self._misfit(plan, cleaned, rows, offset, exc)
        if exact:
            assert epoch_type is not None
            array = _with_epochs(array, epoch_type, exact)
        return array, invalid

    def _misfit(
        self,
        plan: _ColumnPlan,
        values: list[object],
        rows: _Rows,
        offset: int,
        exc: BaseException,
    ) -> NoReturn:
        """Name the first value that does not fit the column's Arrow type."""
        for i, value in enumerate(values):
            try:
                pa.array([value], type=plan.type)
            except _CONVERSION_ERRORS as err:
                shown = repr(value)
                shown = shown if len(shown) <= 80 else shown[:77] + "..."
                raise IntegrityError(
                    f"table {self.version.name}: column `{plan.name}` value {shown} does not "
                    f"fit {plan.type} at {rows.where(offset + i)}: {err}",
                    hint="the decoded value disagrees with the column definition "
                    "(signedness, precision, type); report it with the binlog position",
                ) from err
        raise IntegrityError(  # pragma: no cover - every value fits alone but not together
            f"table {self.version.name}: column `{plan.name}` cannot be converted: {exc}"
        ) from exc

    def _metadata(self, rows: _Rows) -> list[pa.Array]:
        """The metadata columns: each run's values once, spread over its rows."""
        runs = rows.runs
        per_run = (
            [run.op for run in runs],
            None,
            [run.gtid for run in runs],
            [run.ts for run in runs],
            [run.server_id for run in runs],
            [run.binlog_file for run in runs],
            [run.binlog_pos for run in runs],
        )
        arrays: list[pa.Array] = []
        for field, values, origin in zip(METADATA_FIELDS, per_run, _ORIGINS, strict=True):
            if values is None:  # _seq
                arrays.append(rows.numbers())
            elif origin is not None:
                arrays.append(rows.spread_origins(values, field.type, origin))
            else:
                arrays.append(rows.spread(values, field.type))
        self._check_metadata(arrays, runs)
        return arrays

    def _check_metadata(self, arrays: list[pa.Array], runs: Sequence[Run]) -> None:
        ops = {run.op for run in runs}
        if not _OPS.issuperset(ops):
            raise InternalError(f"unknown _op in {sorted(ops - _OPS, key=str)}")
        self._check_order(arrays[1])
        for field, array in zip(METADATA_FIELDS, arrays, strict=True):
            if not field.nullable and array.null_count:
                raise InternalError(f"{field.name} is null in a row change")

    def _check_order(self, seq: pa.Array) -> None:
        numbers = np.frombuffer(seq.buffers()[1], np.int64, len(seq), seq.offset * 8)
        ordered = bool(np.all(numbers[1:] > numbers[:-1]))
        if not ordered or (self._last_seq is not None and numbers[0] <= self._last_seq):
            raise InternalError(
                f"table {self.version.name}: _seq is not strictly increasing in {self.path}"
            )

    def _before(self, rows: _Rows) -> tuple[pa.Array, int]:
        """``_before``: each update's before image (null for the other rows)."""
        assert self._before_type is not None
        updates = [run.block.before is not None for run in rows.runs]
        if not any(updates):
            return pa.nulls(rows.count, self._before_type), 0
        children: list[pa.Array] = []
        invalid = 0
        for index, plan in enumerate(self._plans):
            vectors = [
                None if before is None else before[index]
                for before in (run.block.before for run in rows.runs)
            ]
            array, bad = self._vectors(index, plan, vectors, rows, _Absent.NULL, [])
            children.append(array)
            invalid += bad
        struct = pa.StructArray.from_arrays(
            children,
            fields=list(self._before_type),
            mask=rows.spread([not u for u in updates], pa.bool_()),
        )
        return struct, invalid

    def _before_key(self, rows: _Rows) -> pa.Array:
        """``_before_key``: the identity columns of each update's before image; null for the
        other rows, and for an update whose before image lacks a key column."""
        assert self._before_key_type is not None
        key = self._key
        keyed = [
            run.block.before is not None and all(run.block.before[p] is not None for p in key)
            for run in rows.runs
        ]
        if not any(keyed):
            return pa.nulls(rows.count, self._before_key_type)
        children: list[pa.Array] = []
        for p in key:
            vectors = [
                run.block.before[p] if k and run.block.before is not None else None
                for run, k in zip(rows.runs, keyed, strict=True)
            ]
            array, _ = self._vectors(p, self._plans[p], vectors, rows, _Absent.NULL, [])
            children.append(array)
        # the validity bitmap made here: from_arrays(mask=...) inverts the mask with
        # pyarrow.compute, whose import (tens of milliseconds) the daemon otherwise avoids
        valid = np.repeat(np.array(keyed, np.bool_), [run.block.count for run in rows.runs])
        validity = None if all(keyed) else pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.StructArray.from_buffers(
            self._before_key_type, rows.count, [validity], children=children
        )

    def _absent(self, n: int, absent_rows: dict[int, list[int]]) -> pa.Array:
        if not absent_rows:
            offsets = _from_numpy(np.zeros(n + 1, np.int32), pa.int32())
            return pa.ListArray.from_arrays(offsets, pa.array([], pa.string()))
        names: list[list[str]] = [[] for _ in range(n)]
        for index, rows in absent_rows.items():
            name = self._plans[index].name
            for row in rows:
                names[row].append(name)
        return pa.array(names, ABSENT_TYPE)


class _TooLarge(Exception):
    """A column of one batch passed Arrow's 2 GiB array limit (pa.array chunked it)."""


# date32 and naive timestamp[us] are stored as days / microseconds since 1970-01-01: the
# epoch values of year-0 dates (which Python's date cannot hold) go in as those
_EPOCH_STORAGE = {pa.date32(): pa.int32(), pa.timestamp("us"): pa.int64()}


def _with_epochs(array: pa.Array, storage: pa.DataType, exact: dict[int, int]) -> pa.Array:
    """``array`` with the rows of ``exact`` set to those epoch values (they were null)."""
    raw = array.view(storage).to_pylist()
    for i, epoch in exact.items():
        raw[i] = epoch
    return pa.array(raw, type=storage).view(array.type)


def _fitting(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        raise _TooLarge
    return array


@functools.lru_cache(maxsize=16384)  # per table version: every batch opens its files again
def file_schema(
    version: TableVersion,
    *,
    with_before: bool,
    with_absent: bool,
    with_before_key: bool,
    geometry_srid: bool = False,
) -> pa.Schema:
    """The schema of a file of ``version`` (what ``ParquetTableWriter`` writes), with its
    primary key metadata and ``_before_key`` field; also for a table without rows yet (a
    lifecycle record carries it: ``pipeline.lifecycle``)."""
    plans = [_plan(col, geometry_srid) for col in version.columns]
    key, keyed = identity(version)
    return _with_identity(
        arrow_schema(
            version, with_before=with_before, with_absent=with_absent, geometry_srid=geometry_srid
        ),
        version,
        [plans[pos] for pos in key] if keyed else [],
        [plans[pos] for pos in key] if with_before_key else None,
    )


def _with_identity(
    schema: pa.Schema,
    version: TableVersion,
    key: list[_ColumnPlan],
    before_key: list[_ColumnPlan] | None,
) -> pa.Schema:
    """``schema`` with the ``replicator.primary_key`` metadata and, when ``before_key`` is
    given, the ``_before_key`` field (see the module doc)."""
    metadata = dict(schema.metadata or {})
    metadata[PRIMARY_KEY_KEY] = json.dumps([plan.name for plan in key]).encode("utf-8")
    if before_key is not None:
        clash = [n for n in schema.names if n.lower() == BEFORE_KEY_FIELD]
        if clash:
            raise SinkError(
                f"table {version.name}: column `{clash[0]}` has the name of a landing-zone "
                "metadata column",
                hint="rename the column or leave the table out of replication",
            )
        fields = [schema.field(plan.name) for plan in before_key]
        schema = schema.append(pa.field(BEFORE_KEY_FIELD, pa.struct(fields)))
    return schema.with_metadata(metadata)


def _check_compression(name: str) -> None:
    try:
        available = name.lower() == "none" or pa.Codec.is_available(name)
    except ValueError:
        available = False
    if not available:
        raise ConfigError(
            f"unknown Parquet compression {name!r}",
            hint="use zstd, snappy, gzip, lz4, brotli or none",
        )
