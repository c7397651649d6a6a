"""The flagship end-to-end workload: a seeded random OLTP mix over six tables and every type.

Tables (MariaDB): numbers (every integer width signed and unsigned, DECIMAL up to 65 digits,
FLOAT, DOUBLE, BIT, YEAR), temporal (DATE, DATETIME(0/6), TIMESTAMP(3), TIME(6) with negative
and > 24 h values), texts (CHAR, VARCHAR utf8mb4 with emoji, latin1, TEXT, BINARY, VARBINARY,
BLOB, ENUM, SET, JSON), oddities (GEOMETRY, INET6, UUID), order_lines (a two-column primary
key whose parts get updated) and, created mid-stream, late (a new table).

The mix: multi-row inserts, range updates that change every kind of column, primary-key
updates (single and composite), range deletes, multi-table transactions, rolled-back
transactions, and DDL mid-stream: ``ADD COLUMN`` (at the end, no default, so old rows stay
NULL as the source shows them), ``MODIFY COLUMN`` (widening), and ``CREATE TABLE``.

``expected_rows`` reads every table back with SELECT expressions that show stored values
exactly, and ``canonical`` turns both those and the materialized Parquet values into one
comparable form per column kind.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import pymysql

DB = "flagship"


@dataclass(frozen=True)
class Col:
    name: str
    ddl: str
    kind: str  # how to SELECT it and compare it
    gen: Callable[[random.Random], Any]  # a Python value (or None) for pymysql to escape
    placeholder: str = "%s"


def _maybe(gen: Callable[[random.Random], Any]) -> Callable[[random.Random], Any]:
    return lambda r: None if r.random() < 0.1 else gen(r)


def _int(lo: int, hi: int) -> Callable[[random.Random], Any]:
    return _maybe(lambda r: r.choice((lo, hi, 0, r.randint(lo, hi))))


def _dec(p: int, s: int) -> Callable[[random.Random], Any]:
    def gen(r: random.Random) -> str:
        whole = r.choice(("9" * (p - s), str(r.randint(0, 10 ** min(p - s, 18) - 1)), "0"))
        frac = "".join(r.choice("0123456789") for _ in range(s))
        sign = r.choice(("", "-"))
        return f"{sign}{whole}.{frac}" if s else f"{sign}{whole}"

    return _maybe(gen)


def _float(r: random.Random) -> float:
    return r.choice((0.0, -1.5, 3.25, 1e30, -2.5e-10, r.randint(-1000, 1000) / 4))


def _double(r: random.Random) -> float:
    # values whose shortest text form is exact (the server prints DOUBLE in text)
    return r.choice((0.0, 1.7976931348623157e308, -2.5e-300, r.randint(-(10**9), 10**9) / 8, 0.1))


def _date(r: random.Random) -> str:
    return r.choice(("1000-01-01", "9999-12-31", "1970-01-01", f"20{r.randint(10, 30)}-02-28"))


def _datetime6(r: random.Random) -> str:
    return r.choice((
        "1000-01-01 00:00:00.000000", "9999-12-31 23:59:59.999999",
        f"2024-0{r.randint(1, 9)}-1{r.randint(0, 9)} 1{r.randint(0, 9)}:3{r.randint(0, 9)}:00."
        f"{r.randint(0, 999999):06d}",
    ))  # fmt: skip


def _timestamp3(r: random.Random) -> str:
    return r.choice((
        "1970-01-01 00:00:01.000", "2038-01-19 03:14:07.999",
        f"2025-1{r.randint(0, 2)}-0{r.randint(1, 9)} 0{r.randint(0, 9)}:00:00."
        f"{r.randint(0, 999):03d}",
    ))  # fmt: skip


def _time6(r: random.Random) -> str:
    return r.choice((
        "-838:59:59.000000", "838:59:59.000000", "00:00:00.000000", "-00:00:00.500000",
        f"{r.randint(-200, 200)}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}."
        f"{r.randint(0, 999999):06d}",
    ))  # fmt: skip


def _text(alphabet: str, longest: int) -> Callable[[random.Random], Any]:
    return _maybe(lambda r: "".join(r.choice(alphabet) for _ in range(r.randint(0, longest))))


def _bytes(longest: int, fixed: bool = False) -> Callable[[random.Random], Any]:
    return _maybe(lambda r: r.randbytes(longest if fixed else r.randint(0, longest)))


def _json(r: random.Random) -> str:
    return r.choice((
        '{"a": 1, "b": [true, false, null], "c": "ü😀"}', "[]", "null", "18446744073709551615",
        f'{{"n": {r.randint(-(2**63), 2**63 - 1)}, "d": 1.25}}',
    ))  # fmt: skip


def _point(r: random.Random) -> str:
    return f"POINT({r.randint(-180, 180)} {r.randint(-90, 90)})"


SETS = ("", "x", "x,z", "x,y,z")
ADDRESSES = ("::1", "2001:db8::7", "::ffff:1.2.3.4")


def _uuid(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


UTF8 = "abcXYZ 0123ü€😀\U0010ffff'\"\\"
LATIN1 = "abcxyz äöüß€ŠŽ"

TABLES: dict[str, tuple[Col, ...]] = {
    "numbers": (
        Col("ti", "TINYINT", "int", _int(-128, 127)),
        Col("uti", "TINYINT UNSIGNED", "int", _int(0, 255)),
        Col("si", "SMALLINT", "int", _int(-32768, 32767)),
        Col("usi", "SMALLINT UNSIGNED", "int", _int(0, 65535)),
        Col("mi", "MEDIUMINT", "int", _int(-8388608, 8388607)),
        Col("umi", "MEDIUMINT UNSIGNED", "int", _int(0, 16777215)),
        Col("i", "INT", "int", _int(-(2**31), 2**31 - 1)),
        Col("ui", "INT UNSIGNED", "int", _int(0, 2**32 - 1)),
        Col("bi", "BIGINT", "int", _int(-(2**63), 2**63 - 1)),
        Col("ubi", "BIGINT UNSIGNED", "int", _int(0, 2**64 - 1)),
        Col("d", "DECIMAL(10,2)", "decimal", _dec(10, 2)),
        Col("d0", "DECIMAL(18,0)", "decimal", _dec(18, 0)),
        Col("d38", "DECIMAL(38,10)", "decimal", _dec(38, 10)),
        Col("d65", "DECIMAL(65,30)", "decimal", _dec(65, 30)),
        Col("f", "FLOAT", "float", _maybe(_float)),
        Col("db", "DOUBLE", "double", _maybe(_double)),
        Col("b1", "BIT(1)", "bit", _int(0, 1)),
        Col("b64", "BIT(64)", "bit", _int(0, 2**64 - 1)),
        Col("y", "YEAR", "int", _maybe(lambda r: r.choice((1901, 2155, 2024)))),
    ),
    "temporal": (
        Col("d", "DATE", "date", _maybe(_date)),
        Col("dt0", "DATETIME", "datetime", _maybe(lambda r: _datetime6(r)[:19])),
        Col("dt6", "DATETIME(6)", "datetime", _maybe(_datetime6)),
        Col("ts3", "TIMESTAMP(3) NULL", "timestamp", _maybe(_timestamp3)),
        Col("t6", "TIME(6)", "time", _maybe(_time6)),
        Col("t0", "TIME", "time", _maybe(lambda r: _time6(r).split(".")[0])),
    ),
    "texts": (
        # CHAR drops trailing spaces when read: none in its alphabet
        Col("c", "CHAR(10) CHARACTER SET utf8mb4", "text", _text(UTF8.replace(" ", ""), 10)),
        Col("vc", "VARCHAR(100) CHARACTER SET utf8mb4", "text", _text(UTF8, 100)),
        Col("lat", "VARCHAR(50) CHARACTER SET latin1", "text", _text(LATIN1, 50)),
        Col("tx", "TEXT CHARACTER SET utf8mb4", "text", _text(UTF8, 300)),
        Col("bn", "BINARY(8)", "bytes", _bytes(8, fixed=True)),
        Col("vb", "VARBINARY(100)", "bytes", _bytes(100)),
        Col("bl", "BLOB", "bytes", _bytes(2000)),
        # labels in the BMP: under MINIMAL they come from information_schema, which is utf8mb3
        Col("e", "ENUM('a','b','ü€')", "text", _maybe(lambda r: r.choice(("a", "b", "ü€")))),
        Col("st", "SET('x','y','z')", "text", _maybe(lambda r: r.choice(SETS))),
        Col("js", "JSON", "text", _maybe(_json)),
    ),
    "oddities": (
        Col("g", "GEOMETRY", "geometry", _maybe(_point), "ST_GeomFromText(%s)"),
        Col("ip", "INET6", "textform", _maybe(lambda r: r.choice(ADDRESSES))),
        Col("u", "UUID", "textform", _maybe(_uuid)),
    ),
    "order_lines": (
        Col("sku", "VARCHAR(20)", "text", _text("ABCDEF0123", 20)),
        Col("qty", "INT", "int", _int(-5, 1000)),
        Col("price", "DECIMAL(12,4)", "decimal", _dec(12, 4)),
    ),
}  # fmt: skip
LATE: tuple[Col, ...] = (
    Col("note", "VARCHAR(40)", "text", _text(UTF8, 40)),
    Col("amount", "BIGINT UNSIGNED", "int", _int(0, 2**64 - 1)),
    Col("at", "DATETIME(3)", "datetime", _maybe(lambda r: _datetime6(r)[:23])),
)
ADDED = Col("extra", "VARCHAR(30) CHARACTER SET utf8mb4", "text", _text(UTF8, 30))
KEYS = {"order_lines": ("order_id", "line")}


def ddl(name: str, cols: tuple[Col, ...]) -> str:
    key = (
        "order_id INT NOT NULL, line SMALLINT NOT NULL"
        if name == "order_lines"
        else "id BIGINT NOT NULL"
    )
    pk = ", ".join(KEYS.get(name, ("id",)))
    body = ", ".join(f"`{c.name}` {c.ddl}" for c in cols)
    return f"CREATE TABLE {DB}.{name} ({key}, {body}, PRIMARY KEY ({pk})) DEFAULT CHARSET=utf8mb4"


@dataclass
class Stats:
    row_changes: int = 0
    transactions: int = 0
    rolled_back: int = 0
    pk_updates: int = 0
    ddl: int = 0


class Workload:
    """Writes the mix through one pymysql connection; deterministic for a seed."""

    def __init__(self, conn: pymysql.Connection, seed: int) -> None:
        self.conn = conn
        self.r = random.Random(seed)
        self.cols: dict[str, tuple[Col, ...]] = dict(TABLES)
        self.next_id: dict[str, int] = {}
        self.stats = Stats()

    def _exec(self, sql: str, params: Any = None) -> int:
        with self.conn.cursor() as cur:
            return int(cur.execute(sql, params))

    def setup(self) -> None:
        self._exec(f"CREATE DATABASE {DB}")
        for name, cols in self.cols.items():
            self._exec(ddl(name, cols))
            self.next_id[name] = 1

    def _insert(self, table: str, count: int) -> int:
        cols = self.cols[table]
        names = ", ".join(KEYS.get(table, ("id",)) + tuple(f"`{c.name}`" for c in cols))
        one = (
            "("
            + ", ".join(["%s"] * len(KEYS.get(table, ("id",))) + [c.placeholder for c in cols])
            + ")"
        )
        params: list[Any] = []
        for _ in range(count):
            n = self.next_id[table]
            self.next_id[table] = n + 1
            key = [n // 8 + 1, n % 8] if table == "order_lines" else [n]
            params += key + [c.gen(self.r) for c in cols]
        values = ", ".join([one] * count)
        return self._exec(f"INSERT INTO {DB}.{table} ({names}) VALUES {values}", params)

    def _range(self, table: str, width: int) -> tuple[str, list[int]]:
        top = max(2, self.next_id[table])
        lo = self.r.randint(1, top)
        if table == "order_lines":
            return "order_id BETWEEN %s AND %s", [lo // 8, lo // 8 + max(1, width // 8)]
        return "id BETWEEN %s AND %s", [lo, lo + width]

    def _update(self, table: str, width: int) -> int:
        cols = self.r.sample(self.cols[table], k=self.r.randint(1, len(self.cols[table])))
        sets = ", ".join(f"`{c.name}` = {c.placeholder}" for c in cols)
        where, bounds = self._range(table, width)
        params = [c.gen(self.r) for c in cols] + bounds
        return self._exec(f"UPDATE {DB}.{table} SET {sets} WHERE {where}", params)

    def _update_key(self, table: str) -> int:
        self.stats.pk_updates += 1
        if table == "order_lines":
            order = self.r.randint(1, max(1, self.next_id[table] // 8))
            # renumber a whole order's lines at once: every line's key changes
            return self._exec(
                f"UPDATE {DB}.order_lines SET line = line + 100 WHERE order_id = %s AND line < 100",
                [order],
            )
        old = self.r.randint(1, max(1, self.next_id[table] - 1))
        new = self.next_id[table]
        self.next_id[table] = new + 1
        return self._exec(f"UPDATE {DB}.{table} SET id = %s WHERE id = %s", [new, old])

    def _delete(self, table: str, width: int) -> int:
        where, bounds = self._range(table, width)
        return self._exec(f"DELETE FROM {DB}.{table} WHERE {where}", bounds)

    def _statement(self) -> int:
        table = self.r.choice(list(self.cols))
        kind = self.r.random()
        if kind < 0.4:
            return self._insert(table, self.r.randint(1, 25))
        if kind < 0.75:
            return self._update(table, self.r.randint(0, 30))
        if kind < 0.85:
            return self._update_key(table)
        return self._delete(table, self.r.randint(0, 6))

    def transaction(self) -> None:
        statements = self.r.choice((1, 1, 2, 3))  # several: usually several tables
        rollback = self.r.random() < 0.05
        self.conn.begin()
        changed = 0
        try:
            for _ in range(statements):
                changed += self._statement()
        except pymysql.err.IntegrityError:  # a key clash from a random key update: roll back
            rollback = True
        if rollback:
            self.conn.rollback()
            self.stats.rolled_back += 1
            return
        self.conn.commit()
        self.stats.transactions += 1
        self.stats.row_changes += changed

    def run(self, row_changes: int) -> Stats:
        for name in self.cols:
            for _ in range(20):
                self._insert(name, 25)
                self.stats.row_changes += 25
        steps = [(row_changes // 4, self._add_column), (row_changes // 2, self._modify),
                 (3 * row_changes // 4, self._new_table)]  # fmt: skip
        while self.stats.row_changes < row_changes:
            while steps and self.stats.row_changes >= steps[0][0]:
                steps.pop(0)[1]()
                self.stats.ddl += 1
            self.transaction()
        return self.stats

    def _add_column(self) -> None:
        self._exec(f"ALTER TABLE {DB}.numbers ADD COLUMN `{ADDED.name}` {ADDED.ddl}")
        self.cols["numbers"] = (*self.cols["numbers"], ADDED)

    def _modify(self) -> None:
        self._exec(f"ALTER TABLE {DB}.texts MODIFY COLUMN vc VARCHAR(400) CHARACTER SET utf8mb4")
        self._exec(f"ALTER TABLE {DB}.order_lines MODIFY COLUMN qty BIGINT")

    def _new_table(self) -> None:
        self._exec(ddl("late", LATE))
        self.cols["late"] = LATE
        self.next_id["late"] = 1


# ----------------------------------------------------------------------------- comparing

SELECT_EXPR = {
    "float": "CAST({} AS DOUBLE)",
    "bit": "CAST({} AS UNSIGNED)",
    "date": "CAST({} AS CHAR)",
    "datetime": "CAST({} AS CHAR)",
    "timestamp": "CAST({} AS CHAR)",
    "time": "CAST({} AS CHAR)",
    "geometry": "ST_AsBinary({})",
    "textform": "CAST({} AS CHAR)",  # MariaDB INET6/UUID land as the text SELECT prints
}


def kinds(table: str, cols: dict[str, tuple[Col, ...]]) -> dict[str, str]:
    keys = {"order_id": "int", "line": "int"} if table == "order_lines" else {"id": "int"}
    return {**keys, **{c.name: c.kind for c in cols[table]}}


def expected_rows(
    conn: pymysql.Connection, table: str, cols: dict[str, tuple[Col, ...]]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    kind = kinds(table, cols)
    exprs = ", ".join(
        SELECT_EXPR.get(k, "{}").format(f"`{n}`") + f" AS `{n}`" for n, k in kind.items()
    )
    key = KEYS.get(table, ("id",))
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT {exprs} FROM {DB}.{table}")
        names = [d[0] for d in cur.description]
        out = {}
        for raw in cur.fetchall():
            row = {n: canonical(kind[n], v) for n, v in zip(names, raw, strict=True)}
            out[tuple(row[k] for k in key)] = row
    return out


# normalize() rounds to the context's precision (28 digits by default); DECIMAL(65,30) needs 65.
_EXACT = Context(prec=100)

_DT = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?: (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?)?")
_TIME = re.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def canonical(kind: str, value: Any) -> Any:
    """One comparable form per column kind, from a SELECT value or a Parquet/Spark value."""
    if value is None:
        return None
    if kind in ("int", "bit"):
        return int(value)  # Spark shows BIGINT UNSIGNED as decimal(20,0)
    if kind == "decimal":
        return Decimal(value).normalize(_EXACT)  # DECIMAL(65,30) lands as exact text
    if kind == "float":
        import struct

        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if kind == "double":
        return float(value)
    if kind == "date":
        if isinstance(value, str):
            y, m, d = (int(x) for x in _DT.fullmatch(value).groups()[:3])  # type: ignore[union-attr]
            return dt.date(y, m, d)
        return value
    if kind in ("datetime", "timestamp"):
        if isinstance(value, str):
            g = _DT.fullmatch(value).groups()  # type: ignore[union-attr]
            year, month, day, hour, minute, second = (int(x) for x in g[:6])
            micro = int((g[6] or "0").ljust(6, "0"))
            return dt.datetime(year, month, day, hour, minute, second, micro)
        return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
    if kind == "time":
        if isinstance(value, str):
            sign, hours, minutes, seconds, frac = _TIME.fullmatch(value).groups()  # type: ignore[union-attr]
            micros = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1_000_000 + int(
                (frac or "0").ljust(6, "0")
            )
            return -micros if sign else micros
        if isinstance(value, dt.timedelta):
            return (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
        return int(value)  # Spark: bigint microseconds
    if kind == "textform":
        return str(value)
    if kind in ("bytes", "geometry"):
        return bytes(value)
    if kind == "text":
        return value if isinstance(value, str) else bytes(value).decode()
    raise AssertionError(f"unknown kind {kind}")


def connect(host: str, port: int) -> pymysql.Connection:
    conn = pymysql.connect(host=host, port=port, user="root", password="", charset="utf8mb4",
                           autocommit=False, binary_prefix=True)  # fmt: skip
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES', time_zone = '+00:00'")
    return conn
