"""Schema versions matched by column id, and the fills of added columns, through the real
writer (``ColumnDef.column_id``/``fill`` -> Parquet field metadata) and materialize:

* a renamed column (also a renamed key column) carries its values; a column dropped and
  added again under the same name does not (it has a new id) and holds its fill;
* ADD COLUMN with a constant default: older rows hold it exactly, for every type the sink
  converts (checked against a row written after the ALTER with the same values), in keyed
  and keyless tables (a delete of an older row matches its filled image);
* an expression default: unknown, so exit 4 (CLI) or, with ``--allow-unknown``, null listed
  in ``_absent``; a later full row image makes it known.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession

from replicator.binlog.constants import ColumnType as CT
from replicator.errors import IntegrityError
from replicator.spark.cli import materialize as command
from replicator.spark.materialize import MaterializeOptions, materialize
from tests.spark.test_lifecycle import check, outputs
from tests.spark.zone import Ddl, Zone, col, int_col, table, text_col

pytestmark = pytest.mark.spark


def fill(text: str | None = None, kind: str = "value", *, hexed: bool = False) -> str:
    """A column's fill as the schema history writes it (``sink.fill`` converts it)."""
    return json.dumps({"kind": kind, "text": text, "hex": hexed})


def test_renamed_columns_carry_their_values(spark: SparkSession, tmp_path: Path) -> None:
    v1 = table("d.p", int_col(0, "id", column_id=1), text_col(1, "name", column_id=2), key=[0])
    # CHANGE id ident, CHANGE name title: the same ids
    v2 = table("d.p", int_col(0, "ident", column_id=1), text_col(1, "title", column_id=2), key=[0])
    # DROP title, ADD title DEFAULT 'none': a new column under the old name
    v3 = table(
        "d.p",
        int_col(0, "ident", column_id=1),
        text_col(1, "title", column_id=3, fill=fill("none")),
        key=[0],
    )
    l1 = table("d.l", int_col(0, "a", column_id=1), text_col(1, "b", column_id=2))
    l2 = table("d.l", int_col(0, "a", column_id=1), text_col(1, "bee", column_id=2))
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit(
        [(v1, "c", (1, "a")), (v1, "c", (2, "b")), (l1, "c", (1, "x")), (l1, "c", (1, "x"))]
    )
    zone.commit(
        [
            Ddl("alter", "d.p", statement="ALTER TABLE p CHANGE id ident INT, CHANGE name title"),
            (v2, "u", (2, "B"), (2, "b")),
            (v2, "u", (30, "c"), (1, "a")),  # a key change across the rename
            Ddl("alter", "d.l", statement="ALTER TABLE l RENAME COLUMN b TO bee"),
            (l2, "d", (1, "x")),  # matches a row written before the rename
        ]
    )
    results = check(spark, zone, out, reference=False)
    assert outputs(spark, out)["d.p"] == [{"ident": 2, "title": "B"}, {"ident": 30, "title": "c"}]
    assert outputs(spark, out)["d.l"] == [{"a": 1, "bee": "x"}]
    assert results["d.l"].unmatched == 0

    zone.commit([Ddl("alter", "d.p"), (v3, "c", (4, "d"))])
    check(spark, zone, out, reference=False)
    assert outputs(spark, out)["d.p"] == [
        {"ident": 2, "title": "none"},  # not "B": that column was dropped
        {"ident": 30, "title": "none"},
        {"ident": 4, "title": "d"},
    ]


# (type, meta, extra ColumnDef fields, the default as the history writes it, hex, the value)
FILLED: list[tuple[int, int, dict[str, Any], str | None, bool, object]] = [
    (CT.TINY, 0, {}, "-5", False, -5),
    (CT.LONG, 0, {"unsigned": True}, "4294967295", False, 2**32 - 1),
    (CT.LONGLONG, 0, {"unsigned": True}, "18446744073709551615", False, 2**64 - 1),
    (CT.YEAR, 0, {}, "2024", False, 2024),
    (CT.FLOAT, 4, {}, "1.5", False, 1.5),
    (CT.DOUBLE, 8, {}, "0.1", False, 0.1),
    (CT.NEWDECIMAL, 10 << 8 | 2, {}, "12.5", False, Decimal("12.50")),
    (
        CT.NEWDECIMAL,
        38 << 8 | 10,
        {},
        "-12345678901234567.5",
        False,
        Decimal("-12345678901234567.5"),
    ),
    (CT.NEWDECIMAL, 65 << 8 | 4, {}, "-1.5", False, Decimal("-1.5000")),  # text: p > 38
    (CT.DATE, 0, {}, "1000-01-01", False, dt.date(1000, 1, 1)),
    (
        CT.DATETIME2,
        6,
        {},
        "2024-02-29 10:11:12.5",
        False,
        dt.datetime(2024, 2, 29, 10, 11, 12, 500000),
    ),
    (CT.TIME2, 6, {}, "-838:59:59", False, -dt.timedelta(hours=838, minutes=59, seconds=59)),
    (CT.VARCHAR, 400, {"charset": "utf-8"}, "héllo 😀", False, "héllo 😀"),
    (CT.VARCHAR, 255, {}, "00ff10", True, b"\x00\xff\x10"),
    (CT.STRING, CT.STRING << 8 | 4, {"charset": "binary"}, "ab", False, b"ab\x00\x00"),
    (CT.ENUM, CT.ENUM << 8 | 1, {"enum_values": ("a", "b")}, "b", False, "b"),
    (CT.SET, CT.SET << 8 | 1, {"set_values": ("a", "b", "c")}, "a,c", False, "a,c"),
    (CT.BIT, 3, {}, "05", True, 5),
    (CT.JSON, 4, {}, '{"a": [1, 2]}', False, '{"a": [1, 2]}'),
    (CT.LONG, 0, {}, None, False, None),  # DEFAULT NULL
]


def test_constant_defaults_fill_older_rows_exactly(spark: SparkSession, tmp_path: Path) -> None:
    v1 = table("d.f", int_col(0, "id", column_id=1), key=[0])
    added = [
        col(i + 1, type_, f"c{i}", meta, column_id=100 + i, fill=fill(text, hexed=hexed), **extra)
        if text is not None
        else col(i + 1, type_, f"c{i}", meta, column_id=100 + i, fill=fill(kind="null"), **extra)
        for i, (type_, meta, extra, text, hexed, _) in enumerate(FILLED)
    ]
    implicit = [  # NOT NULL without DEFAULT: the server's implicit default
        col(len(FILLED) + 1, CT.LONG, "zero", column_id=200, fill=fill(kind="implicit")),
        col(
            len(FILLED) + 2,
            CT.VARCHAR,
            "blank",
            40,
            charset="utf-8",
            column_id=201,
            fill=fill(kind="implicit"),
        ),
    ]
    v2 = table("d.f", int_col(0, "id", column_id=1), *added, *implicit, key=[0])
    values = (*(value for *_, value in FILLED), 0, "")
    zone = Zone(tmp_path / "landing")
    zone.commit([(v1, "c", (1,))])
    zone.commit([Ddl("alter", "d.f"), (v2, "c", (2, *values))])
    out = tmp_path / "out"
    materialize(spark, zone.root, out)

    rows = {r["id"]: r.asDict() for r in spark.read.parquet(str(out / "d" / "f")).collect()}
    old, new = rows[1], rows[2]
    assert {k: v for k, v in old.items() if k != "id"} == {
        k: v for k, v in new.items() if k != "id"
    }
    assert (old["c0"], old["c2"], old["c8"], old["c11"], old["c13"]) == (
        -5,
        Decimal(2**64 - 1),
        "-1.5000",  # DECIMAL(65,4): exact text
        -3020399000000,  # TIME: microseconds
        bytearray(b"\x00\xff\x10"),
    )


def test_constant_default_in_a_keyless_table(spark: SparkSession, tmp_path: Path) -> None:
    l1 = table("d.l", int_col(0, "a", column_id=1))
    l2 = table("d.l", int_col(0, "a", column_id=1), int_col(1, "q", column_id=2, fill=fill("7")))
    zone = Zone(tmp_path / "landing")
    zone.commit([(l1, "c", (1,)), (l1, "c", (1,)), (l1, "c", (2,))])
    zone.commit([Ddl("alter", "d.l"), (l2, "d", (1, 7)), (l2, "u", (2, 8), (2, 7))])
    out = tmp_path / "out"
    result = materialize(spark, zone.root, out)[0]
    assert outputs(spark, out)["d.l"] == [{"a": 1, "q": 7}, {"a": 2, "q": 8}]
    assert result.unmatched == 0


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(command, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_expression_default_is_unknown(spark: SparkSession, tmp_path: Path) -> None:
    k1 = table("d.k", int_col(0, "id", column_id=1), key=[0])
    k2 = table(
        "d.k",
        int_col(0, "id", column_id=1),
        int_col(1, "r", column_id=2, fill=fill("(rand() * 10)", kind="expression")),
        key=[0],
    )
    zone = Zone(tmp_path / "landing")
    zone.commit([(k1, "c", (1,)), (k1, "c", (2,))])
    zone.commit([Ddl("alter", "d.k"), (k2, "u", (2, 5), (2, 3)), (k2, "c", (3, 6))])

    code, stdout, stderr = run("--landing", str(zone.root), "--out", str(tmp_path / "strict"))
    assert (code, stdout) == (4, "")
    assert 'table d.k: the row with key {"id":1} has columns no row image carried: r' in stderr
    assert "expression default" in stderr

    out = tmp_path / "lenient"
    code, _, stderr = run("--landing", str(zone.root), "--out", str(out), "--allow-unknown")
    assert (code, stderr) == (0, "")
    assert outputs(spark, out)["d.k"] == [
        {"id": 1, "r": None, "_absent": ["r"]},
        {"id": 2, "r": 5, "_absent": []},  # the update's full image makes it known
        {"id": 3, "r": 6, "_absent": []},
    ]

    l1 = table("d.l", int_col(0, "a", column_id=1))
    l2 = table(
        "d.l",
        int_col(0, "a", column_id=1),
        int_col(1, "r", column_id=2, fill=fill("uuid_short()", kind="expression")),
    )
    keyless = Zone(tmp_path / "keyless")
    keyless.commit([(l1, "c", (1,)), (l1, "c", (2,)), (l1, "d", (2,))])
    keyless.commit([Ddl("alter", "d.l"), (l2, "c", (3, 9))])
    with pytest.raises(
        IntegrityError, match="a row holds columns whose value is not in the binlog: r"
    ):
        materialize(spark, keyless.root, tmp_path / "keyless-strict")
    out = tmp_path / "keyless-lenient"
    materialize(spark, keyless.root, out, options=MaterializeOptions(allow_unknown=True))
    assert outputs(spark, out)["d.l"] == [
        {"a": 1, "r": None, "_absent": ["r"]},
        {"a": 3, "r": 9, "_absent": []},
    ]
