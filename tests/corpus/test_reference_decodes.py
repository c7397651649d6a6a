"""A second oracle: our row values against ``mariadb-binlog -vv`` output for the same file.

``_reference-decodes/`` in the corpus holds ``mariadb-binlog -vv --base64-output=decode-rows``
output (MariaDB 10.11 client, TZ=UTC) for many corpus binlogs. Every ``### INSERT INTO`` /
``### UPDATE`` / ``### DELETE FROM`` block is parsed into one row change (before image from
``### WHERE``, after image from ``### SET``) and compared, in order and value by value, with
what ``read_binlog_file`` yields for the source binlog.

The comparison renders *our* value the way the client prints it, following
``log_event_print_value`` and ``my_b_write_quoted`` in MariaDB sql/log_event_client.cc: integers
signed with the unsigned reading in parentheses when negative, DOUBLE ``%.20g``, FLOAT
``%-20g``, ENUM as its index, SET and BIT as ``b'...'`` bit strings, DATE as ``'YYYY:MM:DD'``,
TIMESTAMP as epoch seconds, strings quoted byte for byte with bytes below 0x20 as ``\\xNN`` and
every other byte raw. Since DOUBLE/FLOAT are printed by the same C format we render with, the
printed precision is the tolerance: the rendered text must match exactly. Each value's type
comment (type name, metadata, nullability) is checked against our TABLE_MAP column too.

Where the client stopped (JSON, VECTOR, TRANSACTION_PAYLOAD, ... : no ``# End of log file``),
only the printed prefix is compared.
"""

from __future__ import annotations

import calendar
import codecs
import gzip
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest

from replicator.binlog.charsets import MYSQL_LATIN1_TABLE
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.events import Event, RowsEvent, RowsKind, TransactionPayloadEvent
from replicator.binlog.schema import ColumnDef
from replicator.binlog.values import ABSENT, InvalidTemporal
from replicator.source.binlog_file import read_binlog_file

from .util import CORPUS_DIR, corpus_file

# Collection needs the file names; the test itself gets the folder from the corpus_dir fixture.
_REFERENCE_DIR = CORPUS_DIR / "_reference-decodes"
_SUFFIXES = (".mariadb-binlog-vv.txt", ".mariadb-binlog-vv.txt.gz")

# Reference file name -> reason, for files where our decoder disagrees with the reference.
KNOWN_BUGS: dict[str, str] = {}

_T = TypeVar("_T")


def _reference_params() -> list[object]:
    if not _REFERENCE_DIR.is_dir():
        reason = f"no reference decodes at {_REFERENCE_DIR} (scripts/fetch-corpus --mirror)"
        return [pytest.param(None, id="corpus-absent", marks=pytest.mark.skip(reason=reason))]
    names = sorted(p.name for p in _REFERENCE_DIR.iterdir() if p.name.endswith(_SUFFIXES))
    return [
        pytest.param(
            name,
            id=_stem(name),
            marks=[pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[name])]
            if name in KNOWN_BUGS
            else [],
        )
        for name in names
    ]


def _stem(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    raise ValueError(name)


# ----------------------------------------------------------------------- reference parsing


@dataclass(frozen=True, slots=True)
class RefValue:
    text: bytes  # the value exactly as printed (quotes and escapes included)
    type: str  # type name from the comment: "INT", "VARSTRING(150)", ...
    meta: int
    nullable: bool
    is_null: bool


@dataclass(frozen=True, slots=True)
class RefChange:
    line: int
    op: str  # INSERT / UPDATE / DELETE
    table: bytes  # `schema`.`table`
    before: dict[int, RefValue] | None  # 1-based column number -> value
    after: dict[int, RefValue] | None


@dataclass(frozen=True, slots=True)
class Reference:
    changes: list[RefChange]
    complete: bool  # the client reached "# End of log file"


_HEADER = re.compile(rb"### (INSERT INTO|UPDATE|DELETE FROM) (`.*`\.`.*`)", re.DOTALL)
_VALUE = re.compile(
    rb"###   @(\d+)=(.*) /\* (.+?) meta=(\d+) nullable=([01]) is_null=([01]) \*/", re.DOTALL
)
_OPS = {b"INSERT INTO": "INSERT", b"UPDATE": "UPDATE", b"DELETE FROM": "DELETE"}
_SECTIONS = {
    "INSERT": (b"### SET",),
    "UPDATE": (b"### WHERE", b"### SET"),
    "DELETE": (b"### WHERE",),
}


def parse_reference(data: bytes) -> Reference:
    """Row changes of a ``mariadb-binlog -vv`` output, read as bytes (values may be any bytes).

    Every ``###`` line must belong to a block; anything unexpected raises."""
    lines = data.split(b"\n")
    changes: list[RefChange] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith(b"###"):
            index += 1
            continue
        header = _HEADER.fullmatch(line)
        if header is None:
            raise AssertionError(f"line {index + 1}: unexpected {line[:80]!r}")
        op = _OPS[header[1]]
        start = index + 1
        index += 1
        images: list[dict[int, RefValue]] = []
        for section in _SECTIONS[op]:
            if index >= len(lines) or lines[index] != section:
                break  # the output stopped inside this block
            index += 1
            image: dict[int, RefValue] = {}
            while index < len(lines) and (value := _VALUE.fullmatch(lines[index])):
                column = int(value[1])
                if column in image:
                    raise AssertionError(f"line {index + 1}: @{column} printed twice")
                image[column] = RefValue(
                    text=value[2],
                    type=value[3].decode(),
                    meta=int(value[4]),
                    nullable=value[5] == b"1",
                    is_null=value[6] == b"1",
                )
                index += 1
            images.append(image)
        before = images[0] if op != "INSERT" and images else None
        after = images[-1] if op != "DELETE" and len(images) == len(_SECTIONS[op]) else None
        changes.append(RefChange(start, op, header[2], before, after))
    complete = b"# End of log file" in lines
    return Reference(changes, complete)


# --------------------------------------------------------------------------- our decoder


@dataclass(frozen=True, slots=True)
class OurChange:
    event: RowsEvent
    op: str
    before: tuple[object, ...] | None
    after: tuple[object, ...] | None


def _rows_events(events: Iterable[Event]) -> Iterator[RowsEvent]:
    for event in events:
        if isinstance(event, TransactionPayloadEvent):
            yield from _rows_events(event.events)
        elif isinstance(event, RowsEvent):
            yield event


def our_changes(path: Path) -> Iterator[OurChange]:
    for event in _rows_events(read_binlog_file(path)):
        if event.kind is RowsKind.INSERT:
            for row in event.rows:
                yield OurChange(event, "INSERT", None, row)
        elif event.kind is RowsKind.DELETE:
            for row in event.rows:
                yield OurChange(event, "DELETE", row, None)
        else:
            for before, after in zip(event.rows, event.after, strict=True):
                yield OurChange(event, "UPDATE", before, after)


# ----------------------------------------------------------------------------- normalizer


class Unrenderable(Exception):
    """Our value cannot be printed the way mariadb-binlog prints this column type."""


_BLOB_LABELS = {
    1: "TINYBLOB/TINYTEXT",
    2: "BLOB/TEXT",
    3: "MEDIUMBLOB/MEDIUMTEXT",
    4: "LONGBLOB/LONGTEXT",
}
_INT_TYPES: dict[int, tuple[str, int]] = {
    T.TINY: ("TINYINT", 8), T.SHORT: ("SHORTINT", 16), T.INT24: ("MEDIUMINT", 24),
    T.LONG: ("INT", 32), T.LONGLONG: ("LONGINT", 64)}  # fmt: skip
_SIMPLE_LABELS: dict[int, str] = {T.FLOAT: "FLOAT", T.DOUBLE: "DOUBLE", T.TIMESTAMP: "TIMESTAMP",
                  T.DATETIME: "DATETIME", T.TIME: "TIME", T.NEWDATE: "DATE", T.DATE: "DATE",
                  T.YEAR: "YEAR", T.GEOMETRY: "GEOMETRY"}  # fmt: skip
_LATIN1_ENCODING = codecs.charmap_build(MYSQL_LATIN1_TABLE)


def effective_type(col: ColumnDef) -> tuple[int, int]:
    """(type, length) the client prints by: STRING metadata may name ENUM/SET or a long CHAR."""
    if col.type != T.STRING:
        return col.type, 0
    if col.meta < 256:
        return T.STRING, col.meta
    byte0, byte1 = col.meta >> 8, col.meta & 0xFF
    if byte0 & 0x30 != 0x30:
        return byte0 | 0x30, byte1 | (((byte0 & 0x30) ^ 0x30) << 4)
    return byte0, byte1


def type_label(col: ColumnDef) -> str:
    """The type name ``log_event_print_value`` puts in the comment for this column."""
    kind, length = effective_type(col)
    meta = col.meta
    if kind in _INT_TYPES:
        return _INT_TYPES[kind][0]
    if kind in _SIMPLE_LABELS:
        return _SIMPLE_LABELS[kind]
    if kind == T.NEWDECIMAL:
        return f"DECIMAL({meta >> 8},{meta & 0xFF})"
    if kind == T.BIT:
        return f"BIT({(meta >> 8) * 8 + (meta & 0xFF)})"
    if kind in (T.TIMESTAMP2, T.DATETIME2, T.TIME2):
        return f"{T(kind).name.removesuffix('2')}({meta})"
    if kind == T.ENUM:
        return "ENUM(1 byte)" if meta & 0xFF == 1 else "ENUM(2 bytes)"
    if kind == T.SET:
        return f"SET({meta & 0xFF} bytes)"
    if kind in (T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _BLOB_LABELS.get(meta, f"BLOB packlen {meta}")
    if kind in (T.VARCHAR, T.VAR_STRING):
        return f"VARSTRING({meta})"
    if kind == T.STRING:
        return f"STRING({length})"
    return f"type {kind} (not printable by mariadb-binlog)"


def _quoted(data: bytes) -> bytes:
    """``my_b_write_quoted``: bytes below 0x20 as \\xNN, every other byte as is."""
    out = bytearray(b"'")
    for byte in data:
        if byte > 0x1F:
            out.append(byte)
        else:
            out += b"\\x%02x" % byte
    out += b"'"
    return bytes(out)


def _text_bytes(value: object, col: ColumnDef) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise Unrenderable(f"{type(value).__name__} for a string column")
    if col.charset is None or col.charset == "binary":
        raise Unrenderable(f"str for a column with charset {col.charset!r}")
    if codecs.lookup(col.charset).name == "cp1252":  # MySQL latin1, see charsets.py
        return codecs.charmap_encode(value, "strict", _LATIN1_ENCODING)[0]
    return value.encode(col.charset)


def _need(value: object, *kinds: type) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise Unrenderable(f"{type(value).__name__} {value!r}")


def _as(value: object, kind: type[_T]) -> _T:
    """``value``, which must be a ``kind`` (else Unrenderable), typed as one."""
    _need(value, kind)
    assert isinstance(value, kind)
    return value


def _signed_text(value: object, bits: int) -> bytes:
    """Signed, plus ``(unsigned)`` when negative: accepts our value read either way."""
    _need(value, int)
    assert isinstance(value, int)
    if not -(1 << (bits - 1)) <= value < 1 << bits:
        raise Unrenderable(f"{value} does not fit {bits} bits")
    signed = value - (1 << bits) if value >= 1 << (bits - 1) else value
    text = str(signed)
    if signed < 0:
        text += f" ({signed & ((1 << bits) - 1)})"
    return text.encode()


def _bits(mask: int, nbits: int) -> bytes:
    if not 0 <= mask < 1 << nbits:
        raise Unrenderable(f"{mask:#x} does not fit {nbits} bits")
    return b"b'" + format(mask, f"0{nbits}b").encode() + b"'"


def _fraction(micro: int, fsp: int) -> str:
    return f".{micro // 10 ** (6 - fsp):0{fsp}d}" if fsp else ""


def _datetime_text(value: object, fsp: int) -> bytes:
    if isinstance(value, InvalidTemporal):
        return f"'{value.text}'".encode()
    _need(value, datetime)
    assert isinstance(value, datetime)
    if value.tzinfo is not None:
        raise Unrenderable(f"aware datetime {value!r} for DATETIME")
    text = value.strftime("%Y-%m-%d %H:%M:%S").rjust(19, "0")
    return f"'{text}{_fraction(value.microsecond, fsp)}'".encode()


def _timestamp_text(value: object, fsp: int) -> bytes:
    if isinstance(value, InvalidTemporal):
        if value.text.strip("0-:. "):
            raise Unrenderable(f"InvalidTemporal {value.text!r} for TIMESTAMP")
        return f"0{_fraction(0, fsp)}".encode()
    _need(value, datetime)
    assert isinstance(value, datetime)
    if value.utcoffset() != timedelta(0):
        raise Unrenderable(f"TIMESTAMP not in UTC: {value!r}")
    seconds = calendar.timegm(value.utctimetuple())
    if fsp == 0 and value.microsecond:
        raise Unrenderable(f"fraction in a TIMESTAMP(0): {value!r}")
    return f"{seconds}{_fraction(value.microsecond, fsp)}".encode()


def _time_text(value: object, fsp: int) -> bytes:
    _need(value, timedelta)
    assert isinstance(value, timedelta)
    micro = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micro < 0 else ""
    seconds, micro = divmod(abs(micro), 1_000_000)
    if fsp == 0 and micro:
        raise Unrenderable(f"fraction in a TIME(0): {value!r}")
    hours, rest = divmod(seconds, 3600)
    text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}{_fraction(micro, fsp)}"
    return f"'{text}'".encode()


def _date_text(value: object) -> bytes:
    if isinstance(value, InvalidTemporal):
        return f"'{value.text.replace('-', ':')}'".encode()
    _need(value, date)
    if isinstance(value, datetime):
        raise Unrenderable(f"datetime {value!r} for DATE")
    assert isinstance(value, date)
    return f"'{value.year:04d}:{value.month:02d}:{value.day:02d}'".encode()


def _enum_index(value: object, col: ColumnDef) -> int:
    if isinstance(value, str):
        labels = col.enum_values
        if labels is None:
            raise Unrenderable(f"ENUM label {value!r} without known labels")
        if value in labels:
            return labels.index(value) + 1
        if value == "":
            return 0
        raise Unrenderable(f"ENUM label {value!r} not in {labels}")
    _need(value, int)
    assert isinstance(value, int)
    return value


def _set_mask(value: object, col: ColumnDef) -> int:
    if isinstance(value, str):
        members = col.set_values
        if members is None:
            raise Unrenderable(f"SET labels {value!r} without known members")
        mask = 0
        for name in value.split(",") if value else ():
            if name not in members:
                raise Unrenderable(f"SET member {name!r} not in {members}")
            mask |= 1 << members.index(name)
        return mask
    _need(value, int)
    assert isinstance(value, int)
    return value


def render(value: object, col: ColumnDef) -> bytes:
    """Our (non-NULL) value as ``log_event_print_value`` prints this column."""
    kind, _ = effective_type(col)
    meta = col.meta
    if kind in _INT_TYPES:
        return _signed_text(value, _INT_TYPES[kind][1])
    if kind == T.YEAR:
        return b"%04d" % (_as(value, int) or 1900)  # the client prints a stored 0 as 0 + 1900
    if kind == T.NEWDECIMAL:
        _need(value, Decimal)
        return format(value, "f").encode()
    if kind == T.DOUBLE:
        return b"%.20g" % _as(value, float)
    if kind == T.FLOAT:
        return b"%-20g" % _as(value, float)
    if kind == T.BIT:
        return _bits(_as(value, int), (meta >> 8) * 8 + (meta & 0xFF))
    if kind == T.ENUM:
        return str(_enum_index(value, col)).encode()
    if kind == T.SET:
        size = meta & 0xFF
        mask = _set_mask(value, col)
        if not 0 <= mask < 1 << (8 * size):
            raise Unrenderable(f"SET mask {mask:#x} exceeds {size} bytes")
        stored = mask.to_bytes(size, "little")  # printed in storage byte order
        return _bits(int.from_bytes(stored, "big"), 8 * size)
    if kind in (T.TIMESTAMP, T.DATETIME, T.TIME) and meta:
        raise Unrenderable("MariaDB hires temporal: mariadb-binlog does not decode it")
    if kind == T.TIMESTAMP:
        return _timestamp_text(value, 0)
    if kind == T.TIMESTAMP2:
        return _timestamp_text(value, meta)
    if kind == T.DATETIME:
        return _datetime_text(value, 0)
    if kind == T.DATETIME2:
        return _datetime_text(value, meta)
    if kind == T.TIME:
        return _time_text(value, 0)
    if kind == T.TIME2:
        return _time_text(value, meta)
    if kind in (T.DATE, T.NEWDATE):
        return _date_text(value)
    if kind == T.STRING and col.charset == "binary" and isinstance(value, bytes):
        return _quoted(value.rstrip(b"\x00"))  # we restore BINARY(n) padding the server strips
    if kind in (T.VARCHAR, T.VAR_STRING, T.STRING, T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _quoted(_text_bytes(value, col))
    raise Unrenderable(f"no rendering for column type {kind}")


# ----------------------------------------------------------------------------- comparison


@dataclass(slots=True)
class Tally:
    changes: int = 0
    values: int = 0


def _compare_image(
    where: str,
    ours: tuple[object, ...],
    ref: dict[int, RefValue],
    columns: tuple[ColumnDef, ...],
    *,
    tally: Tally,
    partial: bool,
) -> list[str]:
    problems: list[str] = []
    present = {i + 1 for i, v in enumerate(ours) if v is not ABSENT}
    if len(ours) != len(columns):
        problems.append(f"{where}: {len(ours)} values for {len(columns)} columns")
    missing = sorted(set(ref) - present)
    extra = sorted(present - set(ref))
    if missing:
        problems.append(f"{where}: reference shows {missing}, ours ABSENT/missing")
    if extra and not partial:
        problems.append(f"{where}: ours has {extra}, reference does not print them")
    for number, printed in sorted(ref.items()):
        if number not in present or number > len(columns):
            continue
        tally.values += 1
        col, value = columns[number - 1], ours[number - 1]
        at = f"{where} @{number} [{printed.type} meta={printed.meta}]"
        described = (type_label(col), col.meta, col.nullable)
        if described != (printed.type, printed.meta, printed.nullable):
            problems.append(f"{at}: our column is {described}")
        if value is None or printed.is_null:
            if not (value is None and printed.is_null and printed.text == b"NULL"):
                problems.append(f"{at}: ours {value!r}, reference {printed.text!r}")
            continue
        try:
            rendered = render(value, col)
        except (Unrenderable, UnicodeEncodeError) as exc:
            problems.append(f"{at}: ours {value!r} unrenderable ({exc}), ref {printed.text!r}")
            continue
        if rendered != printed.text:
            problems.append(f"{at}: ours {value!r} -> {rendered!r}, reference {printed.text!r}")
    return problems


def compare(reference: Reference, ours: Iterable[OurChange]) -> tuple[Tally, list[str]]:
    """Walk both change lists in order; return counts and every disagreement."""
    tally = Tally()
    problems: list[str] = []
    ours_iter = iter(ours)
    last = len(reference.changes) - 1
    for number, ref in enumerate(reference.changes):
        mine = next(ours_iter, None)
        where = f"change {number + 1} (reference line {ref.line}"
        if mine is None:
            problems.append(f"{where}): our decoder has no more row changes")
            break
        event, table = mine.event, mine.event.table
        where += f", our event at {event.position})"
        # Only the block the client stopped in may be partial.
        partial = not reference.complete and number == last
        tally.changes += 1
        name = f"`{table.schema}`.`{table.table}`".encode()
        if (mine.op, name) != (ref.op, ref.table):
            problems.append(f"{where}: ours {mine.op} {name!r}, reference {ref.op} {ref.table!r}")
            continue
        for side, our_image, ref_image in (
            ("before", mine.before, ref.before),
            ("after", mine.after, ref.after),
        ):
            if ref_image is None:
                if our_image is not None and not partial:
                    problems.append(f"{where} {side}: reference has no image")
                continue
            if our_image is None:
                problems.append(f"{where} {side}: ours has no image")
                continue
            problems += _compare_image(
                f"{where} {side}", our_image, ref_image, table.columns, tally=tally, partial=partial
            )
    if reference.complete:
        rest = sum(1 for _ in ours_iter)
        if rest:
            problems.append(f"{rest} more row changes in ours than in the complete reference")
    return tally, problems


# ---------------------------------------------------------------------------------- tests


def _sources(corpus: Path) -> dict[str, list[Path]]:
    """Flattened name (``<folder>_<file>``) -> corpus binlogs with that name."""
    found: dict[str, list[Path]] = {}
    for path in sorted(corpus.rglob("*")):
        relative = path.relative_to(corpus)
        if path.is_file() and relative.parts[0] != "_reference-decodes":
            found.setdefault("_".join(relative.parts), []).append(path)
    return found


def _binlog_path(source: Path, tmp_path: Path) -> Path:
    if source.suffix != ".gz":
        return source
    plain = tmp_path / source.stem
    with gzip.open(source) as packed, plain.open("wb") as out:
        shutil.copyfileobj(packed, out)
    return plain


def _read_reference(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


@pytest.mark.parametrize("ref_name", _reference_params())
def test_reference_decode(
    corpus_dir: Path,
    ref_name: str,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    stem = _stem(ref_name)
    candidates = _sources(corpus_dir).get(stem, [])
    if not candidates:
        pytest.skip(f"no source binlog for {ref_name} in the corpus")
    assert len(candidates) == 1, f"{ref_name} maps to several binlogs: {candidates}"
    reference = parse_reference(_read_reference(corpus_dir / "_reference-decodes" / ref_name))
    binlog = _binlog_path(candidates[0], tmp_path)

    tally, problems = compare(reference, our_changes(binlog))

    stopped = "" if reference.complete else " (mariadb-binlog stopped; prefix only)"
    summary = f"{stem}: {tally.changes} changes, {tally.values} values compared{stopped}"
    print(summary)
    record_property("changes_compared", tally.changes)
    record_property("values_compared", tally.values)
    shown = "\n".join(problems[:40])
    more = f"\n... and {len(problems) - 40} more" if len(problems) > 40 else ""
    assert not problems, f"{summary}; {len(problems)} mismatches:\n{shown}{more}"
    assert tally.changes > 0
    assert tally.changes == len(reference.changes)


def test_every_reference_has_a_source(corpus_dir: Path) -> None:
    """A reference whose binlog cannot be found would otherwise only ever skip."""
    sources = _sources(corpus_dir)
    references = sorted(corpus_file(corpus_dir, "_reference-decodes").iterdir())
    assert references
    orphans = [p.name for p in references if len(sources.get(_stem(p.name), [])) != 1]
    assert orphans == []


# ------------------------------------------------------------------ the normalizer itself


def _col(kind: int, meta: int = 0, **extra: object) -> ColumnDef:
    return ColumnDef(index=0, type=kind, meta=meta, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("col", "value", "printed"),
    [
        (_col(T.LONG), -3, b"-3 (4294967293)"),
        (_col(T.LONG, unsigned=True), 4294967293, b"-3 (4294967293)"),
        (_col(T.LONGLONG), 2**64 - 1, b"-1 (18446744073709551615)"),
        (_col(T.INT24), 8388608, b"-8388608 (8388608)"),
        (_col(T.DOUBLE, 8), 0.1, b"0.10000000000000000555"),
        (_col(T.FLOAT, 4), 1.5, b"1.5                 "),
        (_col(T.NEWDECIMAL, 10 << 8 | 2), Decimal("250.00"), b"250.00"),
        (_col(T.BIT, 3), 4, b"b'100'"),
        (_col(T.BIT, 1 << 8), 32, b"b'00100000'"),
        (_col(T.STRING, 0xF701, enum_values=("a", "b")), "b", b"2"),
        (_col(T.SET, 0xF802, set_values=tuple("abcdefghi")), "a,i", b"b'0000000100000001'"),
        (_col(T.NEWDATE), date(2005, 5, 24), b"'2005:05:24'"),
        (_col(T.DATE), InvalidTemporal("0000-00-00"), b"'0000:00:00'"),
        (_col(T.TIME2), -timedelta(hours=507, minutes=48, seconds=27), b"'-507:48:27'"),
        (_col(T.DATETIME2, 3), datetime(2001, 2, 3, 4, 5, 6, 789000), b"'2001-02-03 04:05:06.789'"),
        (_col(T.TIMESTAMP2, 2), datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC), b"1.50"),
        (_col(T.TIMESTAMP), InvalidTemporal("0000-00-00 00:00:00"), b"0"),
        (_col(T.YEAR), 0, b"1900"),
        (_col(T.VARCHAR, 30, charset="cp1252"), "\x81é'\\\n", b"'\x81\xe9'\\\\x0a'"),
        (_col(T.BLOB, 2), b"\x00\xff", b"'\\x00\xff'"),
        (_col(T.STRING, 0xFE04, charset="binary"), b"ab\x00\x00", b"'ab'"),
    ],
)
def test_render_matches_client_format(col: ColumnDef, value: object, printed: bytes) -> None:
    assert render(value, col) == printed


# ------------------------------------------------- the comparison catches disagreements

_ENUM_SET_REF = "rust_mysql_common_mysql-enum-string-set.000001.mariadb-binlog-vv.txt"
_FIRST_F5 = b"###   @5='0123456789' /* BLOB/TEXT meta=2 nullable=1 is_null=0 */\n"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (b"@3=1 /* ENUM", b"@3=3 /* ENUM", "'var1' -> b'1', reference b'3'"),
        (b"@4=b'00000101'", b"@4=b'00000100'", "@4 [SET(1 bytes) meta=63489]"),
        (b"@1='field1'", b"@1='field2'", "@1 [STRING(512) meta=56832]"),
        (b"meta=1200 nullable=1", b"meta=1201 nullable=1", "our column is ('VARSTRING(1200)'"),
        (b"@5='0123456789' /* BLOB/TEXT meta=2 nullable=1 is_null=0",
         b"@5=NULL /* BLOB/TEXT meta=2 nullable=1 is_null=1", "reference b'NULL'"),
        (_FIRST_F5, b"", "ours has [5], reference does not print them"),
        (_FIRST_F5, _FIRST_F5 + _FIRST_F5.replace(b"@5", b"@6"), "reference shows [6]"),
        (b"### INSERT INTO `mysql`.`t`", b"### INSERT INTO `mysql`.`u`", "reference INSERT"),
        (b"### INSERT INTO `mysql`.`t`\n### SET", b"### DELETE FROM `mysql`.`t`\n### WHERE",
         "ours INSERT b'`mysql`.`t`', reference DELETE"),
    ],
)  # fmt: skip
def test_comparison_reports_disagreement(
    corpus_dir: Path, old: bytes, new: bytes, expected: str
) -> None:
    """Each edit of a matching reference must surface as a mismatch naming the culprit."""
    data = corpus_file(corpus_dir, f"_reference-decodes/{_ENUM_SET_REF}").read_bytes()
    assert old in data
    binlog = _sources(corpus_dir)[_stem(_ENUM_SET_REF)][0]
    assert compare(parse_reference(data), our_changes(binlog))[1] == []

    _, problems = compare(parse_reference(data.replace(old, new, 1)), our_changes(binlog))

    assert any(expected in problem for problem in problems), problems


def test_comparison_reports_count_disagreement(corpus_dir: Path) -> None:
    data = corpus_file(corpus_dir, f"_reference-decodes/{_ENUM_SET_REF}").read_bytes()
    binlog = _sources(corpus_dir)[_stem(_ENUM_SET_REF)][0]
    changes = parse_reference(data).changes
    assert len(changes) == 3

    fewer = compare(Reference(changes[:-1], complete=True), our_changes(binlog))[1]
    prefix = compare(Reference(changes[:-1], complete=False), our_changes(binlog))[1]
    more = compare(Reference([*changes, changes[-1]], complete=True), our_changes(binlog))[1]

    assert fewer == ["1 more row changes in ours than in the complete reference"]
    assert prefix == []
    assert len(more) == 1
    assert "our decoder has no more row changes" in more[0]
