"""A seeded sample workload: a small shop whose orders keep coming, for the demo and tests.

``Workload.prepare()`` creates a database (``shop`` by default) with four tables, customers,
products, orders and order_items, whose columns cover the types a replica must get right:
signed and unsigned integers up to BIGINT UNSIGNED near 2**64, DECIMAL, FLOAT/DOUBLE, utf8mb4
text with accents, CJK and emoji, ascii CHAR, DATE, DATETIME(6), TIMESTAMP(6), TIME (negative
and above 24 hours), YEAR, ENUM, SET, JSON, BLOB/VARBINARY and BIT. It seeds a catalogue and
some customers. ``run()`` (or ``start()`` in a thread) then commits a stream of transactions
at ``rate`` per second: new orders (one order, its lines and the stock of each product, in one
transaction), payments, shipments and deliveries (UPDATE, some multi-row), cancellations and
purges (DELETE), price changes (one UPDATE over several rows), new and changed customers,
primary-key changes (a customer renumbered together with its orders; an order line moved to
another line number), a few transactions rolled back on purpose, and now and then a DDL
(``ALTER TABLE ... ADD COLUMN``; each of four columns once, later inserts fill them).

Deterministic: given the seed and the database's starting state, the statements and values
are the same every time (the timestamps come from a simulated clock, not ``NOW()``); only
where a run stops depends on time. There are no foreign keys: InnoDB's cascaded changes are
not written to the binary log, and this workload is also the yardstick for what a replica
must see. ``stats()`` counts what was committed, by table, from the server's affected-row
counts, so a caller can check a replica, a landing zone or ``SELECT COUNT(*)`` against it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ..errors import ConfigError

__all__ = ["TABLES", "TableCounts", "Workload", "WorkloadStats"]

TABLES = ("customers", "products", "orders", "order_items")

# Primary key numbering of each table starts here (recognisable in the landing zone).
_FIRST_CUSTOMER = 1
_FIRST_PRODUCT = 100
_FIRST_ORDER = 10_000
_SEED_CUSTOMERS = 40
_SEED_PRODUCTS = 24
_MIN_CUSTOMERS = 20  # customers are deleted only above this many
_CLOCK_START = dt.datetime(2025, 1, 6, 9, 0, 0)
_CENT = Decimal("0.01")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_MAX_LINE_NO = 250  # order_items.line_no is TINYINT UNSIGNED

_INSERTED, _UPDATED, _DELETED = 0, 1, 2

_CREATE_TABLES: dict[str, str] = {
    "customers": """
        CREATE TABLE {db}.customers (
          id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
          email VARCHAR(191) CHARACTER SET ascii NOT NULL,
          full_name VARCHAR(120) NOT NULL,
          country CHAR(2) CHARACTER SET ascii NOT NULL,
          tier ENUM('bronze','silver','gold','platinum') NOT NULL DEFAULT 'bronze',
          interests SET('books','music','garden','sports','travel','cooking','games')
            NOT NULL DEFAULT '',
          birth_date DATE NULL,
          member_since YEAR NOT NULL,
          support_time TIME(3) NOT NULL DEFAULT '00:00:00',
          external_ref BIGINT UNSIGNED NULL,
          flags BIT(8) NOT NULL DEFAULT b'0',
          preferences JSON NULL,
          avatar BLOB NULL,
          created_at DATETIME(6) NOT NULL,
          updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    "products": """
        CREATE TABLE {db}.products (
          id INT UNSIGNED NOT NULL PRIMARY KEY,
          sku CHAR(10) CHARACTER SET ascii NOT NULL,
          name VARCHAR(200) NOT NULL,
          description TEXT NULL,
          price DECIMAL(10,2) NOT NULL,
          cost DECIMAL(14,4) NOT NULL,
          weight_kg FLOAT NULL,
          rating DOUBLE NULL,
          stock INT NOT NULL,
          barcode BIGINT UNSIGNED NOT NULL,
          active TINYINT(1) NOT NULL DEFAULT 1,
          cutoff_offset TIME NULL,
          released DATE NULL,
          attributes JSON NULL,
          thumbnail VARBINARY(64) NULL,
          updated_at DATETIME(6) NOT NULL
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    "orders": """
        CREATE TABLE {db}.orders (
          id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
          customer_id BIGINT UNSIGNED NOT NULL,
          status ENUM('new','paid','shipped','delivered','cancelled') NOT NULL DEFAULT 'new',
          tags SET('gift','express','fragile','eco') NOT NULL DEFAULT '',
          currency CHAR(3) CHARACTER SET ascii NOT NULL,
          total DECIMAL(12,2) NOT NULL,
          item_count SMALLINT UNSIGNED NOT NULL,
          note VARCHAR(500) NULL,
          placed_at DATETIME(6) NOT NULL,
          paid_at TIMESTAMP(6) NULL DEFAULT NULL,
          ship_date DATE NULL,
          delivery_slot TIME NULL,
          updated_at DATETIME(6) NOT NULL,
          KEY customer (customer_id)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
    "order_items": """
        CREATE TABLE {db}.order_items (
          order_id BIGINT UNSIGNED NOT NULL,
          line_no TINYINT UNSIGNED NOT NULL,
          product_id INT UNSIGNED NOT NULL,
          quantity SMALLINT UNSIGNED NOT NULL,
          unit_price DECIMAL(10,2) NOT NULL,
          discount DECIMAL(5,4) NOT NULL DEFAULT 0,
          gift_wrap BIT(1) NOT NULL DEFAULT b'0',
          options JSON NULL,
          PRIMARY KEY (order_id, line_no)
        ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
}

# The DDL the workload runs now and then, each once, in this order: (table, column, type).
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("customers", "loyalty_points", "INT UNSIGNED NOT NULL DEFAULT 0"),
    ("products", "origin", "VARCHAR(80) NULL"),
    ("orders", "gift_message", "VARCHAR(200) NULL"),
    ("order_items", "returned_qty", "SMALLINT UNSIGNED NULL"),
)

_FIRST_NAMES = (
    "Zoë", "José", "Åsa", "Łukasz", "Søren", "Ярослава", "美咲", "Chloé", "Mateus", "Aoife",
    "Nguyễn", "Ömer", "Björk", "François", "Anaïs", "Jürgen", "Dvořák", "Siobhán", "Ngozi", "Ana",
)  # fmt: skip
_LAST_NAMES = (
    "Müller", "García", "Østergård", "Kowalczyk", "佐藤", "Šimek", "O'Brien", "Nilsson",
    "Ibáñez", "Коваленко", "Smith", "Lê", "Yılmaz", "Þórsdóttir", "Rossi", "Dubois",  # noqa: RUF001
)  # fmt: skip
_COUNTRIES = ("DE", "FR", "SE", "PL", "JP", "BR", "VN", "TR", "IE", "US", "UA", "IS", "ES", "CZ")
_LANGUAGES = ("de", "fr", "sv", "pl", "ja", "pt", "vi", "tr", "en", "uk", "is", "es", "cs")
_INTERESTS = ("books", "music", "garden", "sports", "travel", "cooking", "games")
_TIERS = ("bronze", "silver", "gold", "platinum")
_ORDER_TAGS = ("gift", "express", "fragile", "eco")
_CURRENCIES = ("EUR", "EUR", "EUR", "SEK", "PLN", "JPY", "USD")
_NOTES = (
    "Bitte an der Hintertür abgeben",
    "Livrer après 18 h, merci !",
    "置き配でお願いします",
    "Gift 🎁 — don't include the invoice",
    "Ring twice; the dog is friendly 🐕",
    "Позвонить за час до доставки",
)
_GIFT_MESSAGES = (
    "Alles Gute! 🎉",
    "Joyeux anniversaire 🎂",
    "おめでとう！",  # noqa: RUF001 - a real Japanese full-width mark
    "Happy holidays ❄️",
)
_ORIGINS = ("España", "Ísland", "日本", "Česko", "Türkiye", "Sverige", "Việt Nam", "Ελλάδα")
_CATALOGUE = (
    "Crème brûlée kit", "Smørrebrød board", "Matcha 抹茶 200 g", "Пельмени, frozen 1 kg",
    "Café ☕ espresso beans", "Pão de queijo mix", "Łosoś wędzony 150 g", "Bánh mì baguette",
    "Kürtőskalács", "Jamón ibérico 100 g", "Ramen 🍜 box", "Glühwein spice",
    "Çay glass set", "Skyr, 500 g", "Kimchi 김치 jar", "Fondue Moitié-Moitié",
    "Tteokbokki 떡볶이", "Baklava ×12", "Knäckebröd", "Halloumi 🧀",  # noqa: RUF001
    "Mole poblano paste", "Rooibos tea", "Pierogi ruskie", "Açaí bowl kit",
)  # fmt: skip
_ADJECTIVES = ("Organic", "Spicy", "Smoked", "Frozen", "Artisan", "Hausgemacht", "Épicé", "特製")
_NOUNS = ("noodles", "honey", "salsa", "chocolate 🍫", "granola", "ajvar", "miso", "pesto")


@dataclass(frozen=True, slots=True)
class TableCounts:
    """Rows of one table: present when the workload started, then committed changes."""

    initial: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    @property
    def expected_rows(self) -> int:
        """What ``SELECT COUNT(*)`` must say now."""
        return self.initial + self.inserted - self.deleted

    @property
    def changed(self) -> int:
        """Row changes the binary log holds for this table (one per row and statement)."""
        return self.inserted + self.updated + self.deleted


@dataclass(frozen=True, slots=True)
class WorkloadStats:
    """What the workload has committed so far (rolled-back work is not counted)."""

    transactions: int = 0  # committed DML transactions; each changed at least one row
    rolled_back: int = 0
    ddl: int = 0  # CREATE DATABASE / CREATE TABLE / ALTER TABLE statements
    tables: Mapping[str, TableCounts] = field(default_factory=dict)
    # committed transactions by kind: new_order, pay_orders, renumber_customer (a primary-key
    # update), move_order_line (one on a composite key), seed_products, ...
    operations: Mapping[str, int] = field(default_factory=dict)

    @property
    def rows_changed(self) -> int:
        return sum(counts.changed for counts in self.tables.values())

    @property
    def binlog_transactions(self) -> int:
        """Event groups (GTIDs) this workload wrote to the binary log: transactions + DDL."""
        return self.transactions + self.ddl


@dataclass(slots=True)
class _Product:
    price: Decimal
    stock: int


@dataclass(slots=True)
class _Order:
    customer_id: int
    status: str
    lines: dict[int, tuple[int, int]]  # line_no -> (product_id, quantity)


class _Tx:
    """One transaction being built: statements run now, state changes wait for COMMIT."""

    __slots__ = ("counts", "cur", "effects")

    def __init__(self, cur: Any) -> None:
        self.cur = cur
        self.counts: dict[str, list[int]] = {}
        self.effects: list[Callable[[], None]] = []

    def run(self, table: str, kind: int, sql: str, params: Any = None) -> int:
        affected = int(self.cur.execute(sql, params))
        self.counts.setdefault(table, [0, 0, 0])[kind] += affected
        return affected

    def then(self, effect: Callable[[], None]) -> None:
        self.effects.append(effect)


def _time_text(value: dt.timedelta) -> str:
    """A TIME literal with sign and hours above 24 (pymysql mangles negative timedeltas)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{text}.{fraction:06d}" if fraction else text


def _cents(value: Decimal) -> Decimal:
    return value.quantize(_CENT, rounding=ROUND_HALF_UP)


class Workload:
    """The shop workload on one connection. ``prepare()``, then ``run()`` or ``start()``.

    ``connect`` returns a new pymysql connection to the server (as an account that may create
    the database, e.g. ``MariaDBServer.connect``). ``rate`` is transactions per second (None:
    as fast as the server takes them). ``on_error`` is called in the thread with the exception
    that ended a ``start()``-ed run (it is also kept in ``error``).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        database: str = "shop",
        seed: int = 42,
        rate: float | None = 5.0,
        rollback_probability: float = 0.03,
        ddl_probability: float = 1 / 150,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if not _IDENTIFIER.match(database):
            raise ConfigError(
                f"workload database {database!r} is not a plain identifier",
                hint="use letters, digits and underscores, e.g. shop",
            )
        if rate is not None and rate <= 0:
            raise ConfigError(f"workload rate {rate} must be positive", hint="e.g. 5 (per second)")
        self.database = database
        self.seed = seed
        self.rate = rate
        self._connect = connect
        self._on_error = on_error
        self._rollback_probability = rollback_probability
        self._ddl_probability = ddl_probability
        self._rng = random.Random(seed)
        self._conn: Any = None
        self._db = f"`{database}`"
        # the mirror of the database the next statement is computed from
        self._customers: dict[int, int] = {}  # id -> number of its orders
        self._products: dict[int, _Product] = {}
        self._orders: dict[int, _Order] = {}
        self._next_customer = _FIRST_CUSTOMER
        self._next_product = _FIRST_PRODUCT
        self._next_order = _FIRST_ORDER
        self._columns: set[tuple[str, str]] = set()  # added columns present
        self._clock = _CLOCK_START
        # what was committed (read by other threads through stats())
        self._lock = threading.Lock()
        self._transactions = 0
        self._rolled_back = 0
        self._ddl = 0
        self._counts: dict[str, list[int]] = {table: [0, 0, 0] for table in TABLES}
        self._initial: dict[str, int] = dict.fromkeys(TABLES, 0)
        self._operations: dict[str, int] = {}
        self._prepared = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # ------------------------------------------------------------------ public

    def prepare(self) -> None:
        """Create the database and tables that are missing, seed them, load their state."""
        if self._prepared:
            return
        conn = self._connection()
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (self.database,),
            )
            existing = {str(row[0]) for row in cur.fetchall()}
            cur.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                (self.database,),
            )
            if cur.fetchone() is None:
                cur.execute(f"CREATE DATABASE {self._db} CHARACTER SET utf8mb4")
                self._ddl += 1
            for table in TABLES:
                if table not in existing:
                    cur.execute(_CREATE_TABLES[table].format(db=self._db))
                    self._ddl += 1
        conn.commit()
        self._load_state()
        self._initial = {
            "customers": len(self._customers),
            "products": len(self._products),
            "orders": len(self._orders),
            "order_items": sum(len(order.lines) for order in self._orders.values()),
        }
        if not self._products:
            self._transact(self._seed_products)
        if not self._customers:
            self._transact(self._seed_customers)
        self._prepared = True

    def run(
        self,
        *,
        duration: float | None = None,
        max_steps: int | None = None,
        stop: threading.Event | None = None,
    ) -> WorkloadStats:
        """Run until ``duration`` seconds passed, ``max_steps`` steps (transactions, rolled
        back or not, and DDL) ran, or ``stop``/``self.stop()`` is set; return the stats."""
        self.prepare()
        started = time.monotonic()
        paced_from, paced_steps = started, 0
        steps = 0
        try:
            while max_steps is None or steps < max_steps:
                if self._stop.is_set() or (stop is not None and stop.is_set()):
                    break
                if duration is not None and time.monotonic() - started >= duration:
                    break
                if self.rate is not None:
                    due = paced_from + paced_steps / self.rate
                    delay = due - time.monotonic()
                    if delay < -1.0:  # fell behind (a slow server): do not burst to catch up
                        paced_from, paced_steps, delay = time.monotonic(), 0, 0.0
                    if delay > 0 and self._wait(delay, stop):
                        break
                    paced_steps += 1
                self._step()
                steps += 1
        finally:
            self.close()
        return self.stats()

    def start(self, *, duration: float | None = None, max_steps: int | None = None) -> None:
        """Run in a daemon thread; ``stop()`` ends it. Call ``prepare()`` first to see
        schema errors here rather than in ``error`` later."""
        if self._thread is not None:
            raise RuntimeError("the workload was already started")
        self._thread = threading.Thread(
            target=self._run_in_thread,
            kwargs={"duration": duration, "max_steps": max_steps},
            name=f"workload-{self.database}",
            daemon=True,
        )
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> WorkloadStats:
        """Ask the thread to stop after its current transaction, wait for it, return the stats.

        An error that ended the thread early is in ``error`` (not raised here)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        return self.stats()

    def join(self, timeout: float | None = None) -> WorkloadStats:
        """Wait for a ``start()``-ed run to end by itself (duration or max_steps)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.stats()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The exception that ended a ``start()``-ed run, if any."""
        return self._error

    def stats(self) -> WorkloadStats:
        """A snapshot of what has been committed so far; safe from any thread."""
        with self._lock:
            tables = {
                table: TableCounts(self._initial[table], *self._counts[table]) for table in TABLES
            }
            return WorkloadStats(
                self._transactions,
                self._rolled_back,
                self._ddl,
                tables,
                dict(sorted(self._operations.items())),
            )

    def close(self) -> None:
        """Close the workload's connection (an open transaction is rolled back)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # ------------------------------------------------------------------ the loop

    def _run_in_thread(self, **kwargs: Any) -> None:
        try:
            self.run(**kwargs)
        except BaseException as exc:
            self._error = exc
            if self._on_error is not None:
                self._on_error(exc)

    def _wait(self, seconds: float, stop: threading.Event | None) -> bool:
        """Sleep, waking early for a stop; True when stopped."""
        if stop is None:
            return self._stop.wait(seconds)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._stop.wait(min(left, 0.05)) or stop.is_set():
                return True
        return stop.is_set()

    def _step(self) -> None:
        """One tick of the simulated clock: a DDL now and then, else one transaction."""
        rng = self._rng
        self._clock += dt.timedelta(microseconds=rng.randrange(100_000, 3_000_000))
        pending = [added for added in _ADDED_COLUMNS if added[:2] not in self._columns]
        if pending and rng.random() < self._ddl_probability:
            self._add_column(*pending[0])
            return
        rollback = rng.random() < self._rollback_probability
        operation = self._pick_operation()
        self._transact(operation, rollback=rollback)

    def _pick_operation(self) -> Callable[[_Tx], bool]:
        operations: tuple[tuple[Callable[[_Tx], bool], int], ...] = (
            (self._new_order, 30),
            (self._pay_orders, 14),
            (self._ship_orders, 10),
            (self._deliver_orders, 8),
            (self._new_customers, 8),
            (self._update_customer, 7),
            (self._reprice_products, 5),
            (self._cancel_order, 5),
            (self._restock_product, 4),
            (self._purge_orders, 3),
            (self._delete_customer, 2),
            (self._new_product, 2),
            (self._renumber_customer, 2),
            (self._move_order_line, 1),
        )
        functions = [function for function, _ in operations]
        weights = [weight for _, weight in operations]
        return self._rng.choices(functions, weights)[0]

    def _transact(self, operation: Callable[[_Tx], bool], *, rollback: bool = False) -> None:
        """Run ``operation`` in one transaction; fall back to a new order when it has nothing
        to work on. Commit (and apply its state changes) or roll back."""
        conn = self._connection()
        with conn.cursor() as cur:
            tx = _Tx(cur)
            name = operation.__name__.lstrip("_")
            try:
                if not operation(tx):
                    name = "new_order"
                    self._new_order(tx)
            except BaseException:
                with contextlib.suppress(Exception):
                    conn.rollback()
                raise
        if rollback:
            conn.rollback()
            with self._lock:
                self._rolled_back += 1
            return
        conn.commit()
        for effect in tx.effects:
            effect()
        with self._lock:
            if any(any(kinds) for kinds in tx.counts.values()):
                self._transactions += 1
                self._operations[name] = self._operations.get(name, 0) + 1
            for table, kinds in tx.counts.items():
                totals = self._counts[table]
                for kind, count in enumerate(kinds):
                    totals[kind] += count

    def _add_column(self, table: str, column: str, definition: str) -> None:
        conn = self._connection()
        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE {self._db}.{table} ADD COLUMN {column} {definition}")
        self._columns.add((table, column))
        with self._lock:
            self._ddl += 1

    # ------------------------------------------------------------------ operations

    def _insert(self, tx: _Tx, table: str, rows: list[dict[str, Any]]) -> None:
        columns = list(rows[0])
        values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(rows))
        params = [row[column] for row in rows for column in columns]
        tx.run(
            table,
            _INSERTED,
            f"INSERT INTO {self._db}.{table} ({', '.join(columns)}) VALUES {values}",
            params,
        )

    def _seed_products(self, tx: _Tx) -> bool:
        rows = [
            self._product_row(self._next_product + i, name) for i, name in enumerate(_CATALOGUE)
        ]
        self._insert(tx, "products", rows)
        self._remember_products(tx, rows)
        return True

    def _seed_customers(self, tx: _Tx) -> bool:
        rows = [self._customer_row(self._next_customer + i) for i in range(_SEED_CUSTOMERS)]
        for start in range(0, len(rows), 10):
            self._insert(tx, "customers", rows[start : start + 10])
        self._remember_customers(tx, rows)
        return True

    def _customer_row(self, customer_id: int) -> dict[str, Any]:
        rng = self._rng
        first, last = rng.choice(_FIRST_NAMES), rng.choice(_LAST_NAMES)
        external_ref = rng.choice(
            (None, rng.randrange(2**32), rng.randrange(2**63, 2**64), 2**64 - 1)
        )
        born = dt.date(1950, 1, 1) + dt.timedelta(days=rng.randrange(0, 20_000))
        row: dict[str, Any] = {
            "id": customer_id,
            "email": f"customer{customer_id}@example.{rng.choice(('com', 'de', 'jp', 'se'))}",
            "full_name": f"{first} {last}",
            "country": rng.choice(_COUNTRIES),
            "tier": rng.choice(_TIERS),
            "interests": ",".join(sorted(rng.sample(_INTERESTS, rng.randrange(0, 4)))),
            "birth_date": rng.choice((None, born)),
            "member_since": rng.randrange(1990, 2026),
            "support_time": _time_text(
                dt.timedelta(milliseconds=rng.randrange(0, 200 * 3_600_000))
            ),
            "external_ref": external_ref,
            "flags": rng.randrange(256),
            "preferences": self._preferences(),
            "avatar": rng.choice((None, rng.randbytes(rng.randrange(1, 200)))),
            "created_at": self._clock,
            "updated_at": self._clock,
        }
        if ("customers", "loyalty_points") in self._columns:
            row["loyalty_points"] = rng.randrange(0, 5000)
        return row

    def _preferences(self) -> str | None:
        rng = self._rng
        if rng.random() < 0.15:
            return None
        document = {
            "newsletter": rng.random() < 0.5,
            "language": rng.choice(_LANGUAGES),
            "sizes": sorted(rng.sample(("XS", "S", "M", "L", "XL"), rng.randrange(0, 3))),
            "score": rng.choice((0, 2**53 + 1, -(2**63), 2**64 - 1)),
            "ratio": rng.choice((None, 0.1, 1e-7, 12.5)),
            "nickname": rng.choice(("", "Zoë 🌻", "山田", None)),
        }
        return json.dumps(document, ensure_ascii=False, sort_keys=True)

    def _remember_customers(self, tx: _Tx, rows: list[dict[str, Any]]) -> None:
        def effect() -> None:
            for row in rows:
                self._customers[int(row["id"])] = 0
            self._next_customer = max(self._next_customer, max(r["id"] for r in rows) + 1)

        tx.then(effect)

    def _product_row(self, product_id: int, name: str) -> dict[str, Any]:
        rng = self._rng
        price = _cents(Decimal(rng.randrange(99, 9_999)) / 100)
        cutoff = dt.timedelta(minutes=rng.randrange(-12 * 60, 12 * 60))
        row: dict[str, Any] = {
            "id": product_id,
            "sku": f"SKU{product_id:07d}",
            "name": name,
            "description": rng.choice(
                (None, f"{name}: handmade in small batches. Ingrédients: 100 % naturel ✓")
            ),
            "price": price,
            "cost": (price * Decimal("0.6123")).quantize(Decimal("0.0001")),
            "weight_kg": rng.choice((None, round(rng.uniform(0.05, 5.0), 3))),
            "rating": rng.choice((None, round(rng.uniform(1.0, 5.0), 6))),
            "stock": rng.randrange(5, 400),
            "barcode": rng.randrange(2**63, 2**64),
            "active": 1,
            "cutoff_offset": rng.choice((None, _time_text(cutoff))),
            "released": dt.date(2015, 1, 1) + dt.timedelta(days=rng.randrange(0, 3650)),
            "attributes": json.dumps(
                {
                    "vegan": rng.random() < 0.3,
                    "allergens": sorted(rng.sample(("gluten", "nuts", "milk", "soy"), 2)),
                    "kcal_per_100g": rng.randrange(20, 700),
                },
                ensure_ascii=False,
                sort_keys=True,
            ),
            "thumbnail": rng.choice((None, rng.randbytes(rng.randrange(8, 64)))),
            "updated_at": self._clock,
        }
        if ("products", "origin") in self._columns:
            row["origin"] = rng.choice(_ORIGINS)
        return row

    def _remember_products(self, tx: _Tx, rows: list[dict[str, Any]]) -> None:
        def effect() -> None:
            for row in rows:
                self._products[int(row["id"])] = _Product(row["price"], int(row["stock"]))
            self._next_product = max(self._next_product, max(r["id"] for r in rows) + 1)

        tx.then(effect)

    def _new_customers(self, tx: _Tx) -> bool:
        count = self._rng.choice((1, 1, 1, 2, 3))
        rows = [self._customer_row(self._next_customer + i) for i in range(count)]
        self._insert(tx, "customers", rows)  # one statement, several rows
        self._remember_customers(tx, rows)
        return True

    def _new_product(self, tx: _Tx) -> bool:
        name = f"{self._rng.choice(_ADJECTIVES)} {self._rng.choice(_NOUNS)}"
        rows = [self._product_row(self._next_product, name)]
        self._insert(tx, "products", rows)
        self._remember_products(tx, rows)
        return True

    def _new_order(self, tx: _Tx) -> bool:
        rng, now = self._rng, self._clock
        if not self._customers or not self._products:
            return False
        customer_id = rng.choice(list(self._customers))
        order_id = self._next_order
        product_ids = rng.sample(list(self._products), min(rng.randint(1, 4), len(self._products)))
        lines: dict[int, tuple[int, int]] = {}
        item_rows: list[dict[str, Any]] = []
        total = Decimal(0)
        for line_no, product_id in enumerate(product_ids, start=1):
            quantity = rng.choice((1, 1, 1, 2, 2, 3, 6, 12))
            discount = rng.choice((Decimal(0), Decimal(0), Decimal("0.05"), Decimal("0.125")))
            price = self._products[product_id].price
            total += _cents(price * quantity * (1 - discount))
            lines[line_no] = (product_id, quantity)
            row: dict[str, Any] = {
                "order_id": order_id,
                "line_no": line_no,
                "product_id": product_id,
                "quantity": quantity,
                "unit_price": price,
                "discount": discount,
                "gift_wrap": int(rng.random() < 0.2),
                "options": rng.choice(
                    (None, json.dumps({"engraving": "für Oma ♥"}, ensure_ascii=False))
                ),
            }
            if ("order_items", "returned_qty") in self._columns:
                row["returned_qty"] = 0
            item_rows.append(row)
        order: dict[str, Any] = {
            "id": order_id,
            "customer_id": customer_id,
            "status": "new",
            "tags": ",".join(sorted(rng.sample(_ORDER_TAGS, rng.randrange(0, 3)))),
            "currency": rng.choice(_CURRENCIES),
            "total": total,
            "item_count": sum(q for _, q in lines.values()),
            "note": rng.choice((None, None, rng.choice(_NOTES))),
            "placed_at": now,
            "updated_at": now,
        }
        if ("orders", "gift_message") in self._columns:
            order["gift_message"] = rng.choice((None, rng.choice(_GIFT_MESSAGES)))
        self._insert(tx, "orders", [order])
        self._insert(tx, "order_items", item_rows)
        stock_after: dict[int, int] = {}
        for product_id, quantity in lines.values():
            stock = self._products[product_id].stock - quantity
            if stock < 0:
                stock += 100 + rng.randrange(0, 100)  # a delivery came in just in time
            stock_after[product_id] = stock
            tx.run(
                "products",
                _UPDATED,
                f"UPDATE {self._db}.products SET stock = %s, updated_at = %s WHERE id = %s",
                (stock, now, product_id),
            )

        def effect() -> None:
            self._orders[order_id] = _Order(customer_id, "new", lines)
            self._customers[customer_id] += 1
            for product_id, stock in stock_after.items():
                self._products[product_id].stock = stock
            self._next_order = max(self._next_order, order_id + 1)

        tx.then(effect)
        return True

    def _orders_in(self, *statuses: str) -> list[int]:
        return [oid for oid, order in self._orders.items() if order.status in statuses]

    def _advance_orders(self, tx: _Tx, source: str, target: str, assignments: str) -> bool:
        """Move one to three orders from ``source`` to ``target`` status in one UPDATE."""
        candidates = self._orders_in(source)
        if not candidates:
            return False
        chosen = self._rng.sample(candidates, min(len(candidates), self._rng.randint(1, 3)))
        marks = ", ".join(["%s"] * len(chosen))
        params: list[Any] = [target, self._clock]
        if target == "paid":
            params.append(self._clock)
        elif target == "shipped":
            ship = self._clock.date() + dt.timedelta(days=self._rng.randrange(1, 4))
            slot = dt.timedelta(hours=self._rng.randrange(8, 20), minutes=self._rng.choice((0, 30)))
            params += [ship, _time_text(slot)]
        tx.run(
            "orders",
            _UPDATED,
            f"UPDATE {self._db}.orders SET status = %s, updated_at = %s{assignments} "
            f"WHERE id IN ({marks})",
            [*params, *chosen],
        )

        def effect() -> None:
            for order_id in chosen:
                self._orders[order_id].status = target

        tx.then(effect)
        return True

    def _pay_orders(self, tx: _Tx) -> bool:
        return self._advance_orders(tx, "new", "paid", ", paid_at = %s")

    def _ship_orders(self, tx: _Tx) -> bool:
        return self._advance_orders(tx, "paid", "shipped", ", ship_date = %s, delivery_slot = %s")

    def _deliver_orders(self, tx: _Tx) -> bool:
        return self._advance_orders(tx, "shipped", "delivered", "")

    def _cancel_order(self, tx: _Tx) -> bool:
        """Delete the lines of an unshipped order, put their stock back, mark it cancelled."""
        candidates = self._orders_in("new", "paid")
        if not candidates:
            return False
        order_id = self._rng.choice(candidates)
        order, now = self._orders[order_id], self._clock
        tx.run(
            "order_items",
            _DELETED,
            f"DELETE FROM {self._db}.order_items WHERE order_id = %s",
            (order_id,),
        )
        stock_after: dict[int, int] = {}
        for product_id, quantity in order.lines.values():
            stock_after[product_id] = self._products[product_id].stock + quantity
            tx.run(
                "products",
                _UPDATED,
                f"UPDATE {self._db}.products SET stock = %s, updated_at = %s WHERE id = %s",
                (stock_after[product_id], now, product_id),
            )
        tx.run(
            "orders",
            _UPDATED,
            f"UPDATE {self._db}.orders SET status = 'cancelled', total = 0, item_count = 0, "
            "updated_at = %s WHERE id = %s",
            (now, order_id),
        )

        def effect() -> None:
            order.status = "cancelled"
            order.lines = {}
            for product_id, stock in stock_after.items():
                self._products[product_id].stock = stock

        tx.then(effect)
        return True

    def _purge_orders(self, tx: _Tx) -> bool:
        """Delete up to four delivered or cancelled orders with their lines."""
        candidates = self._orders_in("delivered", "cancelled")
        if not candidates:
            return False
        chosen = candidates[: self._rng.randint(1, 4)]  # the oldest first
        marks = ", ".join(["%s"] * len(chosen))
        if any(self._orders[order_id].lines for order_id in chosen):
            tx.run(
                "order_items",
                _DELETED,
                f"DELETE FROM {self._db}.order_items WHERE order_id IN ({marks})",
                chosen,
            )
        tx.run("orders", _DELETED, f"DELETE FROM {self._db}.orders WHERE id IN ({marks})", chosen)

        def effect() -> None:
            for order_id in chosen:
                order = self._orders.pop(order_id)
                self._customers[order.customer_id] -= 1

        tx.then(effect)
        return True

    def _update_customer(self, tx: _Tx) -> bool:
        if not self._customers:
            return False
        rng = self._rng
        customer_id = rng.choice(list(self._customers))
        optional: list[tuple[str, Any]] = [
            ("tier", rng.choice(_TIERS)),
            ("interests", ",".join(sorted(rng.sample(_INTERESTS, rng.randrange(0, 4))))),
            ("flags", rng.randrange(256)),
            ("preferences", self._preferences()),
            ("support_time", _time_text(dt.timedelta(seconds=rng.randrange(0, 900_000)))),
        ]
        if ("customers", "loyalty_points") in self._columns:
            optional.append(("loyalty_points", rng.randrange(0, 10_000)))
        chosen = [a for a in optional if rng.random() < 0.5] + [("updated_at", self._clock)]
        sets = ", ".join(f"{column} = %s" for column, _ in chosen)
        tx.run(
            "customers",
            _UPDATED,
            f"UPDATE {self._db}.customers SET {sets} WHERE id = %s",
            [*(value for _, value in chosen), customer_id],
        )
        return True

    def _reprice_products(self, tx: _Tx) -> bool:
        """One UPDATE over two to five products, each with its own new price."""
        rng = self._rng
        chosen = rng.sample(list(self._products), min(len(self._products), rng.randint(2, 5)))
        prices = {
            product_id: max(
                _CENT,
                _cents(self._products[product_id].price * Decimal(rng.randrange(85, 120)) / 100),
            )
            for product_id in chosen
        }
        cases = " ".join(["WHEN %s THEN %s"] * len(chosen))
        params: list[Any] = [x for product_id in chosen for x in (product_id, prices[product_id])]
        marks = ", ".join(["%s"] * len(chosen))
        tx.run(
            "products",
            _UPDATED,
            f"UPDATE {self._db}.products SET price = CASE id {cases} END, updated_at = %s "
            f"WHERE id IN ({marks})",
            [*params, self._clock, *chosen],
        )

        def effect() -> None:
            for product_id, price in prices.items():
                self._products[product_id].price = price

        tx.then(effect)
        return True

    def _restock_product(self, tx: _Tx) -> bool:
        product_id = self._rng.choice(list(self._products))
        stock = self._products[product_id].stock + self._rng.randrange(20, 200)
        tx.run(
            "products",
            _UPDATED,
            f"UPDATE {self._db}.products SET stock = %s, updated_at = %s WHERE id = %s",
            (stock, self._clock, product_id),
        )

        def effect() -> None:
            self._products[product_id].stock = stock

        tx.then(effect)
        return True

    def _delete_customer(self, tx: _Tx) -> bool:
        """Delete a customer without orders (never below a floor of customers)."""
        if len(self._customers) <= _MIN_CUSTOMERS:
            return False
        candidates = [cid for cid, orders in self._customers.items() if orders == 0]
        if not candidates:
            return False
        customer_id = self._rng.choice(candidates)
        tx.run(
            "customers",
            _DELETED,
            f"DELETE FROM {self._db}.customers WHERE id = %s",
            (customer_id,),
        )

        def effect() -> None:
            del self._customers[customer_id]

        tx.then(effect)
        return True

    def _renumber_customer(self, tx: _Tx) -> bool:
        """A primary-key update: a customer gets a new id, and its orders follow."""
        if not self._customers:
            return False
        old_id = self._rng.choice(list(self._customers))
        new_id = self._next_customer
        tx.run(
            "customers",
            _UPDATED,
            f"UPDATE {self._db}.customers SET id = %s, updated_at = %s WHERE id = %s",
            (new_id, self._clock, old_id),
        )
        if self._customers[old_id]:
            tx.run(
                "orders",
                _UPDATED,
                f"UPDATE {self._db}.orders SET customer_id = %s, updated_at = %s "
                "WHERE customer_id = %s",
                (new_id, self._clock, old_id),
            )

        def effect() -> None:
            self._customers[new_id] = self._customers.pop(old_id)
            for order in self._orders.values():
                if order.customer_id == old_id:
                    order.customer_id = new_id
            self._next_customer = new_id + 1

        tx.then(effect)
        return True

    def _move_order_line(self, tx: _Tx) -> bool:
        """A primary-key update on a composite key: an order's last line gets a new number."""
        candidates = [
            oid
            for oid, order in self._orders.items()
            if order.lines and max(order.lines) < _MAX_LINE_NO
        ]
        if not candidates:
            return False
        order_id = self._rng.choice(candidates)
        lines = self._orders[order_id].lines
        old_line = max(lines)
        new_line = old_line + self._rng.randint(1, 5)
        tx.run(
            "order_items",
            _UPDATED,
            f"UPDATE {self._db}.order_items SET line_no = %s WHERE order_id = %s AND line_no = %s",
            (new_line, order_id, old_line),
        )

        def effect() -> None:
            lines[new_line] = lines.pop(old_line)

        tx.then(effect)
        return True

    # ------------------------------------------------------------------ state

    def _connection(self) -> Any:
        if self._conn is None:
            conn = self._connect()
            conn.autocommit(False)
            with conn.cursor() as cur:
                # TIMESTAMP values are written and read in UTC: the data does not depend on
                # the machine's time zone
                cur.execute("SET SESSION time_zone = '+00:00'")
            self._conn = conn
        return self._conn

    def _load_state(self) -> None:
        """Mirror what the tables hold (empty on a fresh database, more when continuing)."""
        conn = self._connection()
        db = self._db
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = %s",
                (self.database,),
            )
            present = {(str(t), str(c)) for t, c in cur.fetchall()}
            self._columns = {added[:2] for added in _ADDED_COLUMNS if added[:2] in present}
            cur.execute(f"SELECT id FROM {db}.customers ORDER BY id")
            self._customers = {int(row[0]): 0 for row in cur.fetchall()}
            cur.execute(f"SELECT id, price, stock FROM {db}.products ORDER BY id")
            self._products = {int(r[0]): _Product(Decimal(r[1]), int(r[2])) for r in _rows(cur)}
            cur.execute(f"SELECT id, customer_id, status FROM {db}.orders ORDER BY id")
            self._orders = {int(r[0]): _Order(int(r[1]), str(r[2]), {}) for r in _rows(cur)}
            cur.execute(
                f"SELECT order_id, line_no, product_id, quantity FROM {db}.order_items "
                "ORDER BY order_id, line_no"
            )
            for order_id, line_no, product_id, quantity in _rows(cur):
                order = self._orders.get(int(order_id))
                if order is not None:
                    order.lines[int(line_no)] = (int(product_id), int(quantity))
            latest: list[dt.datetime] = []
            for table in ("customers", "products", "orders"):
                cur.execute(f"SELECT MAX(updated_at) FROM {db}.{table}")
                row = cur.fetchone()
                if row is not None and isinstance(row[0], dt.datetime):
                    latest.append(row[0])
        conn.commit()
        for order in self._orders.values():
            if order.customer_id in self._customers:
                self._customers[order.customer_id] += 1
        self._next_customer = max(self._customers, default=_FIRST_CUSTOMER - 1) + 1
        self._next_product = max(self._products, default=_FIRST_PRODUCT - 1) + 1
        self._next_order = max(self._orders, default=_FIRST_ORDER - 1) + 1
        self._clock = max([_CLOCK_START, *latest])


def _rows(cur: Any) -> Iterator[tuple[Any, ...]]:
    yield from (tuple(row) for row in cur.fetchall())
