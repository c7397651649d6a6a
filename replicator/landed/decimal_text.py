"""A DECIMAL shown as text: the scale every schema version's values are written at.

Spark's decimals stop at 38 digits. The landing zone writes a DECIMAL(p > 38) as the exact
text of its digits, with exactly its scale's decimals and no exponent (``sink.arrow_types``;
the field's ``FIELD_TYPE_KEY`` says ``DECIMAL(40,4)``), and both outputs show a column whose
versions together need more than 38 digits as such text (``spark.schema.widen``,
``delta.changes.widen``). An ALTER TABLE that changes a DECIMAL's scale rewrites every stored
value at the new scale, and that is what the source's ``SELECT`` shows: so both outputs write
the values of every version at the scale of the column's newest version, older ones padded
with zeros (``1.50`` of a DECIMAL(10,2) reads ``1.5000`` once the column is DECIMAL(40,4)).
With each version at its own scale, a key would be two keys across the ALTER (``'1.50'`` and
``'1.5000'``): an update after it would add a second row, a delete leave the old one.

* ``text_scales``: the columns shown as text whose newest version is a DECIMAL, with its
  scale (None: the newest files do not say the source type).
* ``rescaled``: whether one version's values of such a column are to be written at another
  scale (integers are decimals of scale 0). A newest scale below the version's (an ALTER
  that rounded the values, which the binlog does not show: the daemon stops at one), or one
  not known where the version holds decimals, stops with an IntegrityError naming the table
  and column.
* ``text_pattern``, ``not_decimal_text``, ``zeros``: the landing zone's text of a DECIMAL is
  checked before it is padded; text of another form stops rather than be padded wrong.

Both readers take their rules from here: the Spark reader (``spark.changes``) on a version's
file schema, the Delta reader (``delta.changes``) on its aligned fields (output types, the
source types kept). The two agree: a decimal type is a decimal whatever its width, and
BIGINT UNSIGNED (``uint64``, which both show as decimal(20,0)) one of scale 0. Pure pyarrow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa

from ..errors import IntegrityError
from .columns import find_field
from .contract import FIELD_TYPE_KEY

__all__ = [
    "FOREIGN_FILES_HINT",
    "decimal_scale",
    "not_decimal_text",
    "refused_text",
    "rescaled",
    "text_pattern",
    "text_scales",
    "zeros",
]

FOREIGN_FILES_HINT = "the files were not written by replicator, or were changed by hand"
# ``sink.arrow_types.mysql_type_label`` of a DECIMAL column
_DECIMAL_LABEL = re.compile(r"DECIMAL\((\d+),(\d+)\)(?: UNSIGNED)?")


def decimal_scale(field: pa.Field) -> int | None:
    """The scale of a column the source holds as a DECIMAL: its decimal type's (BIGINT
    UNSIGNED, shown as decimal(20,0): 0), or for the landing zone's text of a DECIMAL past
    38 digits its source type's (``FIELD_TYPE_KEY``); None for any other column."""
    if pa.types.is_decimal(field.type):
        return int(field.type.scale)
    if field.type == pa.uint64():
        return 0
    label = (field.metadata or {}).get(FIELD_TYPE_KEY)
    found = None if label is None else _DECIMAL_LABEL.fullmatch(label.decode("utf-8", "replace"))
    return None if found is None else int(found[2])


def _integral(field: pa.Field) -> bool:
    """Values read as integers (``uint64`` is read as a decimal; TIME as bigint
    microseconds, the NULL type as int: as both outputs show them)."""
    kind = field.type
    return bool(
        (pa.types.is_integer(kind) and kind != pa.uint64())
        or pa.types.is_duration(kind)
        or pa.types.is_null(kind)
    )


def text_scales(names: Iterable[str], newest: pa.Schema) -> tuple[tuple[str, int | None], ...]:
    """Of the columns ``names`` (those shown as text), the ones whose newest version
    (``newest``: its fields, with their source types) is a DECIMAL, with its scale: the
    scale every version's decimals are written at; None for a column whose newest fields do
    not say their source type (files of older writers)."""
    found: list[tuple[str, int | None]] = []
    for name in names:
        now = find_field(newest, name)
        if now is None:
            continue
        scale = decimal_scale(now)
        if scale is not None or FIELD_TYPE_KEY not in (now.metadata or {}):
            found.append((name, scale))
    return tuple(found)


def rescaled(table: str, column: str, field: pa.Field, scale: int | None) -> int | None:
    """The scale of a version's values of ``column`` (``field``: that version's, with its
    source type) when they are to be written at ``scale``, the newest version's
    (``text_scales``); None when they are written as they are: not decimals (text of
    another source type is shown as it is), integers while the newest scale is unknown,
    or decimals of that scale already. A newest scale below the version's, or unknown
    while the version holds decimals, raises IntegrityError."""
    integral = _integral(field)
    own = 0 if integral else decimal_scale(field)
    if own is None or (integral and scale is None):
        return None
    where = f"table {table}, column {column}"
    if scale is None:
        raise IntegrityError(
            f"{where}: older files hold it as DECIMAL with {own} decimals, but its newest "
            "files do not say its source type: the scale it is shown at now is unknown",
            hint=FOREIGN_FILES_HINT,
        )
    if own > scale:
        raise IntegrityError(
            f"{where}: its newest version has {scale} decimals, an older one {own}: the "
            "ALTER rounded the stored values, which the binlog does not show",
            hint="read the table again (replicator snapshot) and materialize with --full-refresh",
        )
    return None if own == scale else own


def zeros(own: int, scale: int) -> str:
    """What the text of a decimal with ``own`` decimals (an integer: 0) needs appended to
    have ``scale`` decimals (``scale`` > ``own``)."""
    return ("" if own else ".") + "0" * (scale - own)


def text_pattern(scale: int) -> str:
    """The landing zone's text of a DECIMAL with ``scale`` decimals: ``-123.4500``, exactly
    ``scale`` decimals (``sink.arrow_types``); a regular expression Arrow's (RE2) and Java's
    read alike (``\\z``: Java's ``$`` would let a trailing line break through)."""
    return r"^-?[0-9]+" + (rf"\.[0-9]{{{scale}}}" if scale else "") + r"\z"


def refused_text(scale: int) -> str:
    """What follows a value ``text_pattern(scale)`` refuses in the error's message (the
    Spark reader builds the message in the job, around the value)."""
    return f" is not the text of a DECIMAL with {scale} decimals"


def not_decimal_text(table: str, column: str, value: str, scale: int) -> IntegrityError:
    """The error for a ``value`` of ``column`` that ``text_pattern(scale)`` refuses."""
    return IntegrityError(
        f"table {table}, column {column}: {value!r}{refused_text(scale)}",
        hint=FOREIGN_FILES_HINT,
    )
