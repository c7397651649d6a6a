"""The live all-types workload, through the real daemon into Parquet, read by pyarrow and Spark.

tests/live/test_all_types.py checks the decoder against what SELECT shows for every column type
MariaDB has. Here the same workload (same tables, same statements, same SELECTed expectations)
runs on the ``binlog_row_metadata=FULL`` server, ``replicator run --stop-at-end`` replicates it
into a landing zone, and every table directory is read back with ``pyarrow.dataset`` and with
``spark.read.parquet`` (no options). Each landed row must be the workload's change, in order,
with every column equal to what the type tables of docs/type-mapping.md ("Arrow/Parquet types"
and "What Spark shows") promise for the SELECTed value. The expectations are written out here,
not taken from the product's converters.

The workload runs a second time into a landing zone on an S3 API server (moto's, started by
the tests): that landing zone is read back from the server through the committed-files
readers (``landed.committed``: the manifests, then each file over pyarrow's S3 filesystem;
Spark's own S3 reader needs hadoop-aws, which this machine has not) and checked as strictly,
value by value and type by type.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from replicator.binlog.values import InvalidTemporal
from replicator.landed.committed import committed_files, file_schema, read_file
from replicator.storage import ObjectStoreOptions, Store, open_store
from tests.harness.mariadb import MariaDBServer, mariadbd_version
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.live.test_all_types import (
    DB,
    TABLE_BY_NAME,
    TABLES,
    Change,
    Col,
    Table,
    _create_sql,
    _run_statements,
    canonical,
    short,
)
from tests.typed import of_type

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession

pytestmark = [pytest.mark.live, pytest.mark.spark]

SERVER_ID = 4391
OP = {"INSERT": "c", "UPDATE": "u", "DELETE": "d"}
METADATA_COLUMNS = ("_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos")


# ------------------------------------------------------------- the documented type mapping

_INT_BITS = {"BOOL": 8, "TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 32, "INT": 32, "BIGINT": 64}
_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)")
_BIT = re.compile(r"BIT\((\d+)\)")


def _base(c: Col) -> str:
    return re.split(r"[ (]", c.ddl, maxsplit=1)[0]


def _unsigned(c: Col) -> bool:
    return "UNSIGNED" in c.ddl or "ZEROFILL" in c.ddl


def _decimal_digits(c: Col) -> tuple[int, int]:
    match = _DECIMAL.fullmatch(c.ddl)
    assert match is not None, c.ddl
    return int(match.group(1)), int(match.group(2))


def _bit_width(c: Col) -> int:
    match = _BIT.fullmatch(c.ddl)
    assert match is not None, c.ddl
    return int(match.group(1))


def arrow_type(c: Col) -> pa.DataType:
    """docs/type-mapping.md "Arrow/Parquet types" for the column's DDL."""
    if c.kind == "int":
        if _base(c) == "YEAR":
            return pa.int16()
        bits = _INT_BITS[_base(c)]
        return pa.type_for_alias(f"{'u' if _unsigned(c) else ''}int{bits}")
    if c.kind == "decimal":
        precision, scale = _decimal_digits(c)
        return pa.decimal128(precision, scale) if precision <= 38 else pa.string()
    if c.kind == "bit":
        return pa.uint64() if _bit_width(c) == 64 else pa.int64()
    return {
        "float": pa.float32(),
        "double": pa.float64(),
        "date": pa.date32(),
        "datetime": pa.timestamp("us"),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "time": pa.duration("us"),
        "text": pa.string(),
        "bytes": pa.binary(),
        "geometry": pa.binary(),
        "inet4": pa.string(),  # MariaDB INET4/INET6/UUID land as the text SELECT prints
        "binary16": pa.string(),
    }[c.kind]


_SPARK_TYPE = {
    pa.int8(): "tinyint",
    pa.int16(): "smallint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.uint8(): "smallint",
    pa.uint16(): "int",
    pa.uint32(): "bigint",
    pa.uint64(): "decimal(20,0)",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.date32(): "date",
    pa.timestamp("us"): "timestamp_ntz",
    pa.timestamp("us", tz="UTC"): "timestamp",
    pa.duration("us"): "bigint",
    pa.string(): "string",
    pa.binary(): "binary",
}


def spark_type(c: Col) -> str:
    """docs/type-mapping.md "What Spark shows", Spark 3.5 column."""
    arrow = arrow_type(c)
    if pa.types.is_decimal(arrow):
        return f"decimal({arrow.precision},{arrow.scale})"
    return _SPARK_TYPE[arrow]


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _microseconds(value: timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


# decoder form (the bytes CAST(v AS BINARY(n)) shows) -> the text SELECT prints, for MariaDB's
# INET4/INET6/UUID values; asked of the server by the landing fixture (never our formatter)
TEXT_FORMS: dict[tuple[str, bytes], str] = {}  # (type, bytes): '::' and the nil UUID share them


def _text_forms(server: MariaDBServer) -> dict[tuple[str, bytes], str]:
    out = {}
    for c in TABLE_BY_NAME["fixed_binary"].columns:
        size = 4 if c.ddl == "INET4" else 16
        for value in c.values:
            if value == "NULL":
                continue
            ((raw, text),) = server.query(
                f"SELECT CAST(CAST({value} AS {c.ddl}) AS BINARY({size})), "
                f"CAST(CAST({value} AS {c.ddl}) AS CHAR)"
            )
            out[c.ddl, bytes(raw)] = str(text)
    return out


def arrow_value(c: Col, value: object) -> object:
    """What pyarrow's ``to_pylist()`` must show for a SELECTed (decoder-form) value."""
    if value is None or isinstance(value, InvalidTemporal):  # zero/invalid dates are null
        return None
    if c.kind in ("inet4", "binary16"):
        return TEXT_FORMS[c.ddl, of_type(bytes, value)]
    if c.kind == "geometry":  # WKB alone (sink.geometry_srid is off here)
        return bytes(of_type(bytes, value))
    if c.kind == "float":
        return _float32(of_type(float, value))
    if c.kind == "decimal" and _decimal_digits(c)[0] > 38:
        return format(of_type(Decimal, value), "f")  # exact digits, no exponent
    return value  # int, Decimal, float, date, naive/UTC datetime, timedelta, str, bytes


def spark_value(c: Col, value: object) -> object:
    """What PySpark's ``collect()`` must show (driver TZ=UTC), bytearray taken as bytes."""
    shown = arrow_value(c, value)
    if shown is None:
        return None
    if arrow_type(c) == pa.uint64():
        return Decimal(of_type(int, shown))
    if c.kind == "timestamp":
        return of_type(datetime, shown).astimezone(UTC).replace(tzinfo=None)
    if c.kind == "time":
        return _microseconds(of_type(timedelta, shown))
    return shown


def _collected(value: object) -> object:
    return bytes(value) if isinstance(value, bytearray) else value


def spark_canonical(value: object) -> object:
    """``canonical``, but a Decimal by its value: PySpark hands decimals over as Java's
    ``BigDecimal.toEngineeringString()``, so DECIMAL(38,38) -1E-38 arrives as
    ``Decimal('-1.0E-38')`` (exponent -39) even from ``SELECT CAST(... AS DECIMAL(38,38))``.
    The scale is checked through the column's Spark type instead."""
    if isinstance(value, Decimal):
        return ("Decimal", str(value.normalize()))
    return canonical(value)


# --------------------------------------------------------------------------- the landing


@dataclass(frozen=True, slots=True, repr=False)
class Landing:
    root: Path
    expected: list[Change]
    run: subprocess.CompletedProcess[str]
    seconds: float

    def __repr__(self) -> str:  # the images hold 20 MiB values
        return f"Landing({self.root}, {len(self.expected)} changes, exit {self.run.returncode})"

    def table_dir(self, table: str) -> Path:
        return self.root / DB / table

    def changes(self, table: str) -> list[Change]:
        return [c for c in self.expected if c.table == table]


def _config(server: MariaDBServer, start: str, sink: str, path: Path) -> Path:
    path.write_text(
        "service:\n  http_port: 0\n"  # any free port: other tests run daemons too
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: repl\n"
        f"  password: replpass\n  server_id: {SERVER_ID}\n"
        f"start:\n  gtid: '{start}'\n"
        f"sink:\n{sink}"
        f"filters:\n  include: ['{DB}.*']\n"
    )
    return path


def _land(
    server: MariaDBServer, work: Path, sink: str, env: dict[str, str]
) -> tuple[list[Change], subprocess.CompletedProcess[str], float]:
    """The workload on a fresh database, replicated by ``replicator run --stop-at-end``."""
    if mariadbd_version() < (10, 10):
        pytest.skip("INET4 needs MariaDB 10.10+")
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
    server.execute(f"CREATE DATABASE {DB}")
    for table in TABLES:
        server.execute(_create_sql(table), database=DB)
    start = server.binlog_status().gtid_binlog_pos
    expected = _run_statements(server)
    TEXT_FORMS.update(_text_forms(server))
    config = _config(server, start, sink, work / "replicator.yaml")
    began = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "replicator.cli", "run", "--config", str(config), "--stop-at-end"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )
    return expected, run, time.monotonic() - began


@pytest.fixture(scope="module")
def landing(
    mariadb_full_metadata: MariaDBServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Landing]:
    server = mariadb_full_metadata
    work = tmp_path_factory.mktemp("all_types_landing")
    expected, run, seconds = _land(server, work, f"  root: {work / 'landing'}\n", {})
    yield Landing(work / "landing", expected, run, seconds)
    server.execute(f"DROP DATABASE IF EXISTS {DB}")


@dataclass(frozen=True, slots=True, repr=False)
class S3Landing:
    store: Store
    expected: list[Change]
    run: subprocess.CompletedProcess[str]

    def __repr__(self) -> str:
        return f"S3Landing({self.store}, {len(self.expected)} changes)"

    def changes(self, table: str) -> list[Change]:
        return [c for c in self.expected if c.table == table]


@pytest.fixture(scope="module")
def s3_landing(
    mariadb_full_metadata: MariaDBServer,
    s3_server: S3Server,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[S3Landing]:
    server = mariadb_full_metadata
    work = tmp_path_factory.mktemp("all_types_s3_landing")
    url = f"s3://{s3_server.bucket('all-types-landing')}/zone"
    expected, run, _ = _land(server, work, s3_server.sink_yaml(url), s3_server.env())
    store = open_store(
        url,
        ObjectStoreOptions(
            endpoint=s3_server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
        ),
    )
    yield S3Landing(store, expected, run)
    server.execute(f"DROP DATABASE IF EXISTS {DB}")


@dataclass(frozen=True, slots=True, repr=False)
class Read:
    """One reader's view of one table directory: column types and rows by `_seq`."""

    types: dict[str, object]
    rows: list[dict[str, object]]

    def __repr__(self) -> str:
        return f"Read({len(self.types)} columns, {len(self.rows)} rows)"


def _seq(row: dict[str, object]) -> int:
    value = row["_seq"]
    assert isinstance(value, int)
    return value


@pytest.fixture(scope="module")
def arrow_read(landing: Landing) -> dict[str, Read]:
    out = {}
    for table in TABLES:
        directory = landing.table_dir(table.name)
        if not directory.is_dir():
            continue
        data = ds.dataset(directory, format="parquet").to_table()
        rows = sorted(data.to_pylist(), key=_seq)
        out[table.name] = Read({f.name: f.type for f in data.schema}, rows)
    return out


@pytest.fixture(scope="module")
def spark_read(landing: Landing, spark: SparkSession) -> dict[str, Read]:
    out = {}
    for table in TABLES:
        directory = landing.table_dir(table.name)
        if not directory.is_dir():
            continue
        frame = spark.read.parquet(str(directory))
        collected: list[Row] = frame.collect()  # sorted here: no shuffle of 20 MiB rows
        rows = sorted(
            ({k: _collected(v) for k, v in r.asDict().items()} for r in collected), key=_seq
        )
        out[table.name] = Read(
            {f.name: f.dataType.simpleString() for f in frame.schema.fields}, rows
        )
    return out


@pytest.fixture(scope="module")
def s3_read(s3_landing: S3Landing) -> dict[str, Read]:
    """Each table's committed files, found by the manifests and read from the S3 server."""
    out = {}
    for table, files in committed_files(s3_landing.store).items():
        schemas = {file_schema(f).remove_metadata().to_string() for f in files}
        assert len(schemas) == 1, f"{table}: {len(files)} files with {len(schemas)} schemas"
        data = pa.concat_tables([read_file(f) for f in files])
        rows = sorted(data.to_pylist(), key=_seq)
        out[table.partition(".")[2]] = Read({f.name: f.type for f in data.schema}, rows)
    return out


def _tables() -> list[Any]:
    return [pytest.param(t.name, id=t.name) for t in TABLES]


# --------------------------------------------------------------------------------- tests


def test_daemon_lands_every_table_in_stream_order(
    landing: Landing, arrow_read: dict[str, Read]
) -> None:
    landed = [
        (table, row["_seq"], row["_op"], row["id"])
        for table, read in arrow_read.items()
        for row in read.rows
    ]
    landed.sort(key=lambda r: (r[1], r[0]))
    seqs = [seq for _, seq, _, _ in landed]

    assert landing.run.returncode == 0, landing.run.stderr[-3000:]
    assert sorted(p.name for p in (landing.root / DB).iterdir()) == sorted(t.name for t in TABLES)
    assert sorted(arrow_read) == sorted(t.name for t in TABLES)
    assert len(set(seqs)) == len(seqs)  # strictly increasing over the whole stream
    assert [(t, op, i) for t, _, op, i in landed] == [
        (c.table, OP[c.kind.name], c.row_id) for c in landing.expected
    ]


@pytest.mark.parametrize("table", _tables())
def test_every_column_in_both_readers_with_the_documented_type(
    landing: Landing, arrow_read: dict[str, Read], spark_read: dict[str, Read], table: str
) -> None:
    spec = TABLE_BY_NAME[table]
    files = sorted(landing.table_dir(table).glob("*.parquet"))
    schemas = {pq.read_schema(f).remove_metadata().to_string() for f in files}
    arrow_types = arrow_read[table].types
    spark_types = spark_read[table].types
    id_and_columns = [("id", pa.int32(), "int")] + [
        (c.name, arrow_type(c), spark_type(c)) for c in spec.columns
    ]
    wrong_arrow = [
        f"{name}: {arrow_types.get(name)} (docs: {want})"
        for name, want, _ in id_and_columns
        if arrow_types.get(name) != want
    ]
    wrong_spark = [
        f"{name}: {spark_types.get(name)} (docs: {want})"
        for name, _, want in id_and_columns
        if spark_types.get(name) != want
    ]

    assert files != []
    assert len(schemas) == 1, f"{len(files)} files with {len(schemas)} schemas"
    assert set(spec.names) | set(METADATA_COLUMNS) <= set(arrow_types)
    assert set(spec.names) | set(METADATA_COLUMNS) <= set(spark_types)
    assert wrong_arrow == []
    assert wrong_spark == []


def _mismatches(
    spec: Table,
    changes: list[Change],
    rows: list[dict[str, object]],
    expect: Callable[[Col, object], object],
    same: Callable[[object], object],
) -> list[str]:
    out = []
    for change, row in zip(changes, rows, strict=True):
        image = change.before if change.after is None else change.after
        assert image is not None
        for index, c in enumerate(spec.columns, start=1):
            want, got = expect(c, image[index]), row.get(c.name)
            if same(want) != same(got):
                out.append(
                    f"{change.kind.name} id={change.row_id} {c.name} ({c.ddl[:40]}): "
                    f"expected {short(want)}, landed {short(got)}"
                )
    return out


def _shape(rows: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(row["_op"], row["id"]) for row in rows]


def _expected_shape(changes: list[Change]) -> list[tuple[object, object]]:
    return [(OP[c.kind.name], c.row_id) for c in changes]


@pytest.mark.parametrize("table", _tables())
def test_pyarrow_reads_back_the_workload(
    landing: Landing, arrow_read: dict[str, Read], table: str
) -> None:
    changes = landing.changes(table)
    rows = arrow_read[table].rows

    assert len(changes) == 3 * TABLE_BY_NAME[table].rows
    assert _shape(rows) == _expected_shape(changes)
    assert _mismatches(TABLE_BY_NAME[table], changes, rows, arrow_value, canonical) == []


@pytest.mark.parametrize("table", _tables())
def test_spark_reads_back_the_workload(
    landing: Landing, spark_read: dict[str, Read], table: str
) -> None:
    changes = landing.changes(table)
    rows = spark_read[table].rows

    assert len(changes) == 3 * TABLE_BY_NAME[table].rows
    assert _shape(rows) == _expected_shape(changes)
    assert _mismatches(TABLE_BY_NAME[table], changes, rows, spark_value, spark_canonical) == []


def test_daemon_lands_every_table_in_stream_order_on_s3(
    s3_landing: S3Landing, s3_read: dict[str, Read]
) -> None:
    landed = [
        (table, row["_seq"], row["_op"], row["id"])
        for table, read in s3_read.items()
        for row in read.rows
    ]
    landed.sort(key=lambda r: (r[1], r[0]))
    seqs = [seq for _, seq, _, _ in landed]
    keys = s3_landing.store.list(DB)
    committed = {f.key for files in committed_files(s3_landing.store).values() for f in files}

    assert s3_landing.run.returncode == 0, s3_landing.run.stderr[-3000:]
    assert sorted(s3_read) == sorted(t.name for t in TABLES)
    assert len(set(seqs)) == len(seqs)
    assert [(t, op, i) for t, _, op, i in landed] == [
        (c.table, OP[c.kind.name], c.row_id) for c in s3_landing.expected
    ]
    assert set(keys) == committed  # in the bucket: the committed data files, nothing else


@pytest.mark.parametrize("table", _tables())
def test_the_s3_landing_zone_reads_back_the_workload(
    s3_landing: S3Landing, s3_read: dict[str, Read], table: str
) -> None:
    spec = TABLE_BY_NAME[table]
    changes = s3_landing.changes(table)
    read = s3_read[table]
    id_and_columns = [("id", pa.int32())] + [(c.name, arrow_type(c)) for c in spec.columns]
    wrong_arrow = [
        f"{name}: {read.types.get(name)} (docs: {want})"
        for name, want in id_and_columns
        if read.types.get(name) != want
    ]

    assert set(spec.names) | set(METADATA_COLUMNS) <= set(read.types)
    assert wrong_arrow == []
    assert len(changes) == 3 * spec.rows
    assert _shape(read.rows) == _expected_shape(changes)
    assert _mismatches(spec, changes, read.rows, arrow_value, canonical) == []
