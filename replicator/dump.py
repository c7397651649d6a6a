"""``replicator dump``: row changes as JSON lines, one change per line.

Values are written losslessly, each JSON type chosen so a consumer cannot silently lose
precision (docs/type-mapping.md, Decoded values and ``dump`` JSON):

* integers as JSON numbers (exact at any width, BIGINT UNSIGNED included);
* FLOAT/DOUBLE as JSON numbers (shortest repr that round-trips);
* DECIMAL as a string of its digits ("-12.3400"), since most JSON readers parse numbers as
  doubles;
* DATE "YYYY-MM-DD", DATETIME "YYYY-MM-DD HH:MM:SS[.ffffff]", TIMESTAMP
  "YYYY-MM-DDTHH:MM:SS[.ffffff]Z" (UTC), TIME "[-]HHH:MM:SS[.ffffff]" as MySQL prints it;
* zero/invalid dates as null (and counted in the summary), never as a made-up date;
* text as strings; binary values (BINARY, VARBINARY, BLOB, GEOMETRY WKB, text of unknown
  charset) as ``{"base64": "..."}``;
* JSON columns as their canonical JSON text (a string); a JSON column logged only as diffs
  without its before image (PARTIAL_JSON with MINIMAL row images) as
  ``{"json_diffs": [{"op": "REPLACE", "path": "$.a", "value": "<json>"}]}``;
* VECTOR as a list of floats;
* SQL NULL as null; columns absent from a partial row image are left out.

The lines are UTF-8. How they are made quickly: orjson writes each row image, from a dict built
by code generated once per table shape and set of columns present, so that most values need no
Python call. orjson writes integers, strings and null itself; in that code a DECIMAL becomes its
digits by one C call (``Decimal.__format__``), and DATE, DATETIME and TIMESTAMP values take
orjson's own text of them (for a DATETIME, its 'T' made a space), far faster than ``isoformat``.
The fields the rows of an event share are encoded once for all of them. What orjson does not
write itself (TIME, binary data, geometry, zero dates, JSON diffs, anything a column's type did
not predict) goes through ``RowChangeFormatter.default``, the per-value formatter. Doubles are
written as Python's ``repr`` prints them, as they always were: orjson prints the same text
except below 1e-4 in magnitude ("0.00001" for 1e-05) and for NaN and the infinities (null), so
those few are written as ``json.dumps`` writes them.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from .binlog import events as ev
from .binlog.constants import ColumnType
from .binlog.errors import IncidentError
from .binlog.json_binary import json_to_text
from .binlog.json_diff import UnappliedJsonDiffs
from .binlog.position import StreamPosition
from .binlog.rows import RowImage
from .binlog.schema import ColumnDef
from .binlog.transaction import Transaction
from .binlog.values import ABSENT, Geometry, InvalidTemporal

# The live source (pymysql, the stream) is imported by ``dump_live``: ``dump --binlog-file``
# reads files and never pays for it.
if TYPE_CHECKING:
    from .config import SourceConfig

# Dates, datetimes and dataclasses go to ``default`` unless converted first: orjson's own form
# of a DATETIME ('T' between date and time), of ``InvalidTemporal`` and of ``UnappliedJsonDiffs``
# (their fields) is not this output's.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
# orjson prints the doubles of these magnitudes exactly as ``repr`` does, and 0.0 and -0.0 too
# (tests/unit/test_dump_format.py checks every exponent)
_FLOAT_LOW = 1e-4
_FLOAT_HIGH = sys.float_info.max
# Shapes and their compiled encoders kept at most (as the parser's table map caches).
_CACHE_LIMIT = 1024

# (row images) -> each image as compact JSON
ImagesEncoder = Callable[[Sequence[RowImage]], list[bytes]]


def format_time(value: dt.timedelta) -> str:
    """A TIME value as MySQL prints it: sign, hours past 24 kept, microseconds when set."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{text}.{frac:06d}" if frac else text


@dataclass(slots=True)
class DumpStats:
    events: int = 0
    row_changes: int = 0
    invalid_temporals: int = 0
    transactions: int = 0


def _datetime_text(value: dt.datetime) -> str:
    # isoformat, not strftime: strftime's %Y does not pad years below 1000 on Linux ('18-04-01')
    if value.tzinfo is None:
        return value.isoformat(" ")
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat() + "Z"


def _float_json(value: float) -> float | orjson.Fragment:
    """A double as orjson writes it where that is Python's form, else Python's form."""
    if _FLOAT_LOW <= value <= _FLOAT_HIGH or -_FLOAT_HIGH <= value <= -_FLOAT_LOW or value == 0:
        return value
    return orjson.Fragment(json.dumps(value))  # 1e-05, NaN, Infinity as before


def _vector_json(value: list[float]) -> list[float | orjson.Fragment]:
    return [_float_json(x) for x in value]


def _column_key(column: ColumnDef) -> str:
    return column.name if column.name is not None else f"@{column.index + 1}"


class _Source:
    """Generated code and the objects it refers to by name (never spelled out in it)."""

    def __init__(self) -> None:
        self.names: dict[str, object] = {}

    def name(self, prefix: str, value: object) -> str:
        found = f"{prefix}{len(self.names)}"
        self.names[found] = value
        return found


_FLOAT_TYPES = frozenset({ColumnType.FLOAT, ColumnType.DOUBLE})
_DATE_TYPES = frozenset({ColumnType.DATE, ColumnType.NEWDATE})
_DATETIME_TYPES = frozenset({ColumnType.DATETIME, ColumnType.DATETIME2})
_TEMPORAL_TYPES = _DATE_TYPES | _DATETIME_TYPES | {ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2}


def _value_code(column: ColumnDef, var: str, src: _Source) -> str:
    """The expression that makes ``var``, a value of ``column``, ready for orjson.

    Only the types below are converted here, each guarded by its exact class (and time zone)
    so that None, the decoder's markers (``InvalidTemporal``) and anything unexpected pass on
    to orjson and ``default``. Other columns' values go to orjson as they are.
    """
    kind = column.type
    if kind in _FLOAT_TYPES:  # FLOAT and DOUBLE are the only columns that decode to floats
        # the test of ``_float_json``, inline: the usual double needs no call
        low, high = src.name("lo", _FLOAT_LOW), src.name("hi", _FLOAT_HIGH)
        neg_low, neg_high = src.name("lo", -_FLOAT_LOW), src.name("hi", -_FLOAT_HIGH)
        fix = src.name("f", _float_json)
        return (
            f"({var} if {var} is None or {low} <= {var} <= {high} "
            f"or {neg_high} <= {var} <= {neg_low} or {var} == 0 else {fix}({var}))"
        )
    if kind == ColumnType.VECTOR:
        return f"({src.name('f', _vector_json)}({var}) if {var}.__class__ is list else {var})"
    if kind == ColumnType.NEWDECIMAL:  # format(value, "f"): digits, never an exponent
        text, spec = src.name("d", Decimal.__format__), src.name("s", "f")
        decimal = src.name("D", Decimal)
        return f"({text}({var}, {spec}) if {var}.__class__ is {decimal} else {var})"
    if kind in _TEMPORAL_TYPES:
        # orjson's own text of a date, and of a datetime but for the 'T' of a naive one, is
        # this output's; much faster than Python's isoformat(). Kept whole as a Fragment, since
        # ``_ORJSON_OPTIONS`` sends dates and datetimes to ``default``.
        fragment, dumps = src.name("F", orjson.Fragment), src.name("dumps", orjson.dumps)
        if kind in _DATE_TYPES:
            date = src.name("D", dt.date)
            return f"({fragment}({dumps}({var})) if {var}.__class__ is {date} else {var})"
        datetime = src.name("D", dt.datetime)
        if kind in _DATETIME_TYPES:  # naive
            t, space = src.name("b", b"T"), src.name("b", b" ")
            return (
                f"({fragment}({dumps}({var}).replace({t}, {space})) "
                f"if {var}.__class__ is {datetime} and {var}.tzinfo is None else {var})"
            )
        utc, z = src.name("utc", dt.UTC), src.name("o", orjson.OPT_UTC_Z)
        return (
            f"({fragment}({dumps}({var}, option={z})) "
            f"if {var}.__class__ is {datetime} and {var}.tzinfo is {utc} else {var})"
        )
    return var


def _compile_images(
    columns: Sequence[ColumnDef], present: Sequence[int], default: Callable[[Any], Any]
) -> ImagesEncoder:
    """The encoder of row images of a table of ``columns``, each as a JSON object of the
    columns ``present`` (the others are absent from the images), keyed by column name.
    ``default`` makes what orjson does not write itself ready for it."""
    src = _Source()
    dumps, options = src.name("dumps", orjson.dumps), src.name("o", _ORJSON_OPTIONS)
    default_name = src.name("default", default)
    shown = set(present)
    variables = [f"v{i}" if i in shown else "_" for i in range(len(columns))]
    members = ", ".join(
        f"{src.name('k', _column_key(columns[i]))}: {_value_code(columns[i], f'v{i}', src)}"
        for i in present
    )
    target = ", ".join(variables) + ("," if len(variables) == 1 else "")
    lines = [
        f"def _factory({', '.join(src.names)}):",
        "    def images(rows):",
        "        return [",
        f"            {dumps}({{{members}}}, default={default_name}, option={options})",
        f"            for ({target}) in rows",
        "        ]",
        "    return images",
    ]
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), "<dump images>", "exec"), namespace)  # made above: names only
    encoder: ImagesEncoder = namespace["_factory"](**src.names)
    return encoder


@dataclass(slots=True)
class RowChangeFormatter:
    """Turns row events into JSON lines, tracking the current GTID."""

    stats: DumpStats = field(default_factory=DumpStats)
    gtid: str | None = None
    # compiled encoders by table shape, then by the columns present (None: all of them)
    _shapes: dict[tuple[ColumnDef, ...], dict[tuple[int, ...] | None, ImagesEncoder]] = field(
        default_factory=dict, init=False, repr=False
    )
    # the same, by the identity of a TABLE_MAP's columns: equal shapes mostly come as one object
    # (the parser caches table maps), and comparing shapes whole at every event costs more
    _seen: dict[int, tuple[tuple[ColumnDef, ...], dict[tuple[int, ...] | None, ImagesEncoder]]] = (
        field(default_factory=dict, init=False, repr=False)
    )

    def default(self, value: object) -> Any:
        """The JSON form of a value orjson does not write itself (orjson calls this)."""
        if isinstance(value, Decimal):
            return format(value, "f")
        if isinstance(value, Geometry):  # WKB with the SRID the server stored
            return {"base64": base64.b64encode(value).decode("ascii"), "srid": value.srid}
        if isinstance(value, (bytes, bytearray, memoryview)):
            return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
        if isinstance(value, dt.datetime):
            return _datetime_text(value)
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, dt.timedelta):
            return format_time(value)
        if isinstance(value, InvalidTemporal):
            if value.epoch is not None:  # a real date of year 0: as SELECT shows it
                return value.text
            self.stats.invalid_temporals += 1
            return None
        if isinstance(value, UnappliedJsonDiffs):
            return {
                "json_diffs": [
                    {"op": d.operation.name, "path": d.path}
                    | ({} if d.value is None else {"value": json_to_text(d.value)})
                    for d in value.diffs
                ]
            }
        raise TypeError(f"no JSON form for {type(value).__name__}")

    def transaction(self, transaction: Transaction) -> bytes:
        """The JSON lines of one whole transaction from the live stream."""
        self.gtid = transaction.gtid
        self.stats.transactions += 1
        self.stats.events += len(transaction.events)
        return b"".join(
            self._rows(event) for event in transaction.events if isinstance(event, ev.RowsEvent)
        )

    def changes(self, event: ev.Event) -> bytes:
        """The JSON lines of one event's row changes (none for other events)."""
        self.stats.events += 1
        if isinstance(event, ev.MysqlGtidEvent):
            self.gtid = event.gtid
            self.stats.transactions += 1
        elif isinstance(event, ev.MariadbGtidEvent):
            self.gtid = str(event.gtid)
            self.stats.transactions += 1
        elif isinstance(event, ev.TransactionPayloadEvent):
            return b"".join(self.changes(inner) for inner in event.events)
        elif isinstance(event, ev.RowsEvent):
            return self._rows(event)
        elif isinstance(event, ev.IncidentEvent):
            _stop_at_incident(event)
        return b""

    def _rows(self, event: ev.RowsEvent) -> bytes:
        rows = event.rows
        if not rows:
            return b""
        table = event.table
        self.stats.row_changes += len(rows)
        # the fields every row of the event shares, as the start of a JSON object
        head = orjson.dumps(
            {
                "database": table.schema,
                "table": table.table,
                "op": event.kind.value,
                "gtid": self.gtid,
                "file": event.file,
                "position": event.position,
                "timestamp": dt.datetime.fromtimestamp(event.header.timestamp, dt.UTC)
                .isoformat()
                .replace("+00:00", "Z"),
                "server_id": event.header.server_id,
            }
        )[:-1]
        images = self._encoder(table.columns, rows[0])(rows)
        if event.kind is ev.RowsKind.UPDATE:
            after = event.after
            afters = self._encoder(table.columns, after[0])(after)
            head += b',"before":'
            images = [b + b',"after":' + a for b, a in zip(images, afters, strict=True)]
            tail = b"}\n"
        elif event.kind is ev.RowsKind.INSERT:
            head += b',"before":null,"after":'
            tail = b"}\n"
        else:
            head += b',"before":'
            tail = b',"after":null}\n'
        # every line is head + image + tail: one join writes them all
        return head + (tail + head).join(images) + tail

    def _encoder(self, columns: tuple[ColumnDef, ...], first: RowImage) -> ImagesEncoder:
        """The encoder of this event's images: one rows event (one side of an update) has one
        set of columns present, so its first image tells which."""
        seen = self._seen.get(id(columns))
        if seen is not None and seen[0] is columns:
            encoders = seen[1]
        else:
            if len(self._shapes) >= _CACHE_LIMIT:
                self._shapes.clear()
            if len(self._seen) >= _CACHE_LIMIT:
                self._seen.clear()
            encoders = self._shapes.setdefault(columns, {})
            self._seen[id(columns)] = (columns, encoders)  # holds ``columns``: its id stays
        present = None
        if ABSENT in first:  # a partial image (binlog_row_image=MINIMAL/NOBLOB)
            present = tuple(i for i, value in enumerate(first) if value is not ABSENT)
        found = encoders.get(present)
        if found is None:
            shown: Sequence[int] = range(len(columns)) if present is None else present
            if columns and columns[-1].long_unique_hash:  # MariaDB's (binlog.tablemap)
                shown = [i for i in shown if not columns[i].long_unique_hash]
            found = encoders[present] = _compile_images(columns, shown, self.default)
        return found


def _stop_at_incident(event: ev.IncidentEvent) -> None:
    """A dump stops where the daemon would: at an incident (the lines before it are out)."""
    stop = IncidentError.of(event)
    if stop is not None:
        raise stop


def json_lines(events: Iterable[ev.Event], formatter: RowChangeFormatter) -> Iterator[bytes]:
    """Compact JSON documents, one per row change and each ending in a newline, as UTF-8;
    the lines of one event come as one piece."""
    for event in events:
        lines = formatter.changes(event)
        if lines:
            yield lines


async def dump_live(
    cfg: SourceConfig,
    start: StreamPosition | None,
    *,
    stop_at_end: bool,
    formatter: RowChangeFormatter,
    out: BinaryIO,
) -> None:
    """Stream row changes of a live server as JSON lines until the end (or forever)."""
    from .source.schema import InformationSchemaLookup  # noqa: PLC0415 - see the imports
    from .source.stream import ReplicaStream  # noqa: PLC0415

    lookup = InformationSchemaLookup(cfg)
    try:
        async with ReplicaStream(
            cfg, start, stop_at_end=stop_at_end, schema_lookup=lookup, buffers=False
        ) as stream:
            async for item in stream:
                if isinstance(item, Transaction):
                    out.write(formatter.transaction(item))
                    out.flush()
                elif isinstance(item, ev.IncidentEvent):
                    _stop_at_incident(item)
    finally:
        lookup.close()
