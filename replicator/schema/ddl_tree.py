"""One column definition of a logged DDL statement, read with sqlglot's syntax tree.

``ddl`` reads a statement's structure itself and hands each column definition (the text after
the column's name, up to the next ``,`` or ``)``) to ``read_column``, which parses it into an
``exp.ColumnDef`` and takes the type, attributes, default and position from that tree. sqlglot's
MySQL dialect (as of sqlglot 30) is extended where it reads a definition otherwise than the
servers do (MySQL 8.4 ``sql/sql_yacc.yy`` ``field_def``/``type``; MariaDB 11 ``sql_yacc.yy``
``field_spec``): ``INT8``, ``REAL`` and ``LONG`` are ``BIGINT``, ``DOUBLE`` and ``MEDIUMTEXT``
there; ``NATIONAL``/``LONG`` spellings, ``MIDDLEINT``, ``INT3``, the geometry types and ``INET4``/
``INET6`` are types; ``VISIBLE``, ``PERSISTENT``, ``COLUMN_FORMAT``, ``STORAGE``, ``SRID``,
``COMPRESSED``, ``*ENGINE_ATTRIBUTE``, ``SERIAL DEFAULT VALUE``, ``[NOT] ENFORCED``, a late
``UNSIGNED``/``SIGNED``, ``CHAR(n) BYTE`` and ``FIRST``/``AFTER`` are attributes. A default or
generation expression is kept as written (the tree would print it anew), so its text is taken
from the statement. A constant default the server converts by the kind of literal it is (a
number for an ENUM or SET column, one other than a plain integer for a text column, a string
for a BIT column; ``_as_stored``) is kept as an ``expression``, so the rows it fills are
unknown; ``TIMESTAMP NULL`` without a DEFAULT defaults to NULL. Anything the tree holds that is
not listed here is refused (``UnreadableColumn``), never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.mysql import MySQLParser
from sqlglot.tokens import TokenType  # type: ignore[attr-defined]

from .model import NO_DEFAULT, ColumnDefault

__all__ = ["ColumnSpec", "TypeSpec", "UnreadableColumn", "read_column", "read_default", "sized"]


class UnreadableColumn(ValueError):
    """A column definition read otherwise than exactly (``ddl`` raises it as ``DdlError``)."""


@dataclass(slots=True)
class TypeSpec:
    data_type: str
    unsigned: bool = False
    zerofill: bool = False
    width: int | None = None  # integer display width as written
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    labels: tuple[str, ...] | None = None
    charset: str | None = None  # as written (CHARACTER SET / NATIONAL / ASCII / UNICODE)
    text_size: int | None = None  # TEXT(M): M characters
    collation: str | None = None
    binary_collation: bool = False  # the BINARY attribute of a text type


@dataclass(slots=True)
class ColumnSpec:
    """One column definition as written, before the table gives it a charset and an id."""

    name: str
    type: TypeSpec
    nullable: bool = True
    default: ColumnDefault = NO_DEFAULT
    generated: str | None = None
    auto_increment: bool = False
    invisible: bool = False
    primary: bool = False
    position: tuple[str, str | None] | None = None  # ("first", None) / ("after", name)


# -- the dialect -------------------------------------------------------------------------

_T = TokenType


class _Tokenizer(MySQL.Tokenizer):
    KEYWORDS: ClassVar[dict[str, TokenType]] = {
        **MySQL.Tokenizer.KEYWORDS,
        "INT3": _T.MEDIUMINT, "MIDDLEINT": _T.MEDIUMINT, "INT8": _T.BIGINT, "REAL": _T.DOUBLE,
        "LONG": _T.MEDIUMTEXT, "LONG VARCHAR": _T.MEDIUMTEXT, "LONG CHAR VARYING": _T.MEDIUMTEXT,
        "LONG VARBINARY": _T.MEDIUMBLOB, "NATIONAL CHAR": _T.NCHAR, "NATIONAL CHARACTER": _T.NCHAR,
        "NATIONAL VARCHAR": _T.NVARCHAR, "NATIONAL CHAR VARYING": _T.NVARCHAR,
        "NATIONAL CHARACTER VARYING": _T.NVARCHAR, "NCHAR VARCHAR": _T.NVARCHAR,
        "NCHAR VARYING": _T.NVARCHAR,
    }  # fmt: skip


def _marker(word: str) -> Callable[[Any], exp.Expr]:
    return lambda parser: exp.Var(this=word)


def _option(word: str) -> Callable[[Any], exp.Expr]:
    """``WORD [=] value``: read and kept as a marker (no effect on the column)."""

    def parse(parser: Any) -> exp.Expr:
        parser._match(_T.EQ)
        parser._advance()
        return exp.Var(this=word)

    return parse


def _as_written(parse: Callable[[Any], exp.Expr | None]) -> Callable[[Any], exp.Expr | None]:
    """Keep the statement text a constraint's value was read from (``meta["text"]``)."""

    def wrapped(parser: Any) -> exp.Expr | None:
        first = parser._curr
        found = parse(parser)
        if found is not None and first is not None:
            found.meta["text"] = parser.sql[first.start : parser._prev.end + 1]
        return found

    return wrapped


def _after(parser: Any) -> exp.Expr:
    name = parser._parse_id_var(any_token=True)
    if name is None:
        parser.raise_error("expected a column name")
    return exp.Var(this="AFTER", expressions=[name])


def _not(parser: Any) -> exp.Expr | None:
    if parser._match_text_seq("ENFORCED"):
        return exp.Var(this="NOT ENFORCED")
    return MySQLParser.CONSTRAINT_PARSERS["NOT"](parser)  # type: ignore[no-any-return]


def _serial(parser: Any) -> exp.Expr | None:
    return exp.Var(this="SERIAL") if parser._match_text_seq("DEFAULT", "VALUE") else None


class _Parser(MySQLParser):
    # FLOAT UNSIGNED (deprecated, still read): UDOUBLE here, told apart by its word (_type)
    SIGNED_TO_UNSIGNED_TYPE_TOKEN: ClassVar[dict[TokenType, TokenType]] = {
        **MySQLParser.SIGNED_TO_UNSIGNED_TYPE_TOKEN,
        _T.FLOAT: _T.UDOUBLE,
    }
    CONSTRAINT_PARSERS: ClassVar[dict[str, Callable[[Any], exp.Expr | None]]] = {
        **MySQLParser.CONSTRAINT_PARSERS,
        "DEFAULT": _as_written(MySQLParser.CONSTRAINT_PARSERS["DEFAULT"]),
        "NOT": _not,
        "SERIAL": _serial,
        "AFTER": _after,
        **{word: _marker(word) for word in (
            "FIRST", "VISIBLE", "PERSISTENT", "VIRTUAL", "STORED", "SIGNED", "UNSIGNED", "BYTE",
            "ENFORCED",
        )},
        **{word: _option(word) for word in (
            "COLUMN_FORMAT", "STORAGE", "SRID", "REF_SYSTEM_ID", "ENGINE_ATTRIBUTE",
            "SECONDARY_ENGINE_ATTRIBUTE",
        )},
        "COMPRESSED": lambda parser: exp.Var(this="COMPRESSED") if not parser._match(_T.EQ)
        else _option("COMPRESSED")(parser),
    }  # fmt: skip


class _Dialect(MySQL):
    SUPPORTS_USER_DEFINED_TYPES = True  # POINT, INET6, ...: read by name below
    Tokenizer = _Tokenizer
    Parser = _Parser


class _AnsiTokenizer(_Tokenizer):
    QUOTES: ClassVar[list[tuple[str, str] | str]] = ["'"]
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ["`", '"']


class _AnsiDialect(_Dialect):
    """sql_mode ANSI_QUOTES: "x" is an identifier."""

    Tokenizer = _AnsiTokenizer


_DIALECTS = {False: _Dialect(), True: _AnsiDialect()}

# -- the tree ----------------------------------------------------------------------------

_D = exp.DataType.Type
_INTS = {
    _D.TINYINT: "tinyint", _D.UTINYINT: "tinyint", _D.SMALLINT: "smallint",
    _D.USMALLINT: "smallint", _D.MEDIUMINT: "mediumint", _D.UMEDIUMINT: "mediumint",
    _D.INT: "int", _D.UINT: "int", _D.BIGINT: "bigint", _D.UBIGINT: "bigint",
}  # fmt: skip
_UNSIGNED = frozenset(
    {_D.UTINYINT, _D.USMALLINT, _D.UMEDIUMINT, _D.UINT, _D.UBIGINT, _D.UDECIMAL, _D.UDOUBLE}
)
_SIMPLE = {
    _D.DATE: "date", _D.JSON: "json", _D.GEOMETRY: "geometry", _D.UUID: "uuid",
    _D.TINYBLOB: "tinyblob", _D.MEDIUMBLOB: "mediumblob", _D.LONGBLOB: "longblob",
    _D.TINYTEXT: "tinytext", _D.MEDIUMTEXT: "mediumtext", _D.LONGTEXT: "longtext",
}  # fmt: skip
# types the tree holds by name only (user-defined to sqlglot)
_NAMED = frozenset(
    {"POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
     "GEOMETRYCOLLECTION", "GEOMCOLLECTION", "INET4", "INET6"}
)  # fmt: skip
_BLOB_BY_SIZE = ((255, "tiny"), (65535, ""), (16777215, "medium"), (4294967295, "long"))
TEMPORAL_FUNCTIONS = frozenset(
    {"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_DATE", "CURDATE",
     "CURRENT_TIME", "CURTIME", "UTC_TIMESTAMP", "UTC_DATE", "UTC_TIME", "SYSDATE"}
)  # fmt: skip


def sized(base: str, size: int) -> str:
    """The BLOB or TEXT type that holds ``size`` bytes."""
    for limit, prefix in _BLOB_BY_SIZE:
        if size <= limit:
            return prefix + base
    return "long" + base


def _numbers(kind: exp.DataType) -> list[int]:
    out = []
    for param in kind.expressions:
        value = param.this if isinstance(param, exp.DataTypeParam) else None
        if not isinstance(value, exp.Literal) or value.is_string or not value.this.isdigit():
            raise UnreadableColumn(f"cannot read the type {kind.sql('mysql')!r}")
        out.append(int(value.this))
    return out


def _type(kind: exp.DataType, *, float_word: bool) -> TypeSpec:
    """``float_word``: the type is written FLOAT (sqlglot reads FLOAT UNSIGNED as UDOUBLE)."""
    base = _D.FLOAT if float_word else kind.this
    if base == _D.USERDEFINED:
        name = str(kind.args.get("kind") or "")
        if name.upper() not in _NAMED:
            raise UnreadableColumn(f"unknown data type {name!r}")
        return TypeSpec(name.lower())
    if base in (_D.ENUM, _D.SET):
        labels = kind.expressions
        if not labels or not all(isinstance(x, exp.Literal) and x.is_string for x in labels):
            raise UnreadableColumn(f"cannot read the labels of {kind.sql('mysql')!r}")
        # the server drops trailing spaces from the labels (MySQL and MariaDB alike)
        return TypeSpec(base.name.lower(), labels=tuple(x.this.rstrip(" ") for x in labels))
    args = _numbers(kind)
    first = args[0] if args else None
    unsigned = kind.this in _UNSIGNED
    if base in _INTS:
        return TypeSpec(_INTS[base], width=first, unsigned=unsigned)
    if base in (_D.BOOLEAN, _D.SERIAL, _D.YEAR) and len(args) > (base == _D.YEAR):
        raise UnreadableColumn(f"cannot read the type {kind.sql('mysql')!r}")
    if base == _D.BOOLEAN:
        return TypeSpec("tinyint", width=1)
    if base == _D.SERIAL:
        return TypeSpec("bigint", unsigned=True)
    if base in (_D.DECIMAL, _D.UDECIMAL):
        args = args or [10]
        scale = args[1] if len(args) > 1 else 0
        return TypeSpec("decimal", unsigned=unsigned, precision=args[0], scale=scale)
    if base in (_D.FLOAT, _D.DOUBLE, _D.UDOUBLE):
        data_type = "float" if base == _D.FLOAT else "double"
        if base == _D.FLOAT and len(args) == 1:
            data_type, args = ("float" if args[0] <= 24 else "double"), []
        found = TypeSpec(data_type, unsigned=unsigned)
        if len(args) == 2:
            found.precision, found.scale = args
        return found
    if base == _D.BIT:
        return TypeSpec("bit", length=first or 1)
    if base in (_D.TIME, _D.DATETIME, _D.TIMESTAMPTZ):
        return TypeSpec(
            "timestamp" if base == _D.TIMESTAMPTZ else base.name.lower(), fsp=first or 0
        )
    if base == _D.YEAR:
        return TypeSpec("year")
    if base in (_D.CHAR, _D.NCHAR, _D.VARCHAR, _D.NVARCHAR, _D.BINARY, _D.VARBINARY):
        name = base.name.lower().removeprefix("n")
        if name.startswith("var") and first is None:
            raise UnreadableColumn(f"{name.upper()} needs a length")
        found = TypeSpec(name, length=1 if first is None else first)
        found.charset = "utf8" if base in (_D.NCHAR, _D.NVARCHAR) else None
        return found
    if base == _D.BLOB:
        return TypeSpec("blob" if first is None else sized("blob", first))
    if base == _D.TEXT:
        return TypeSpec("text", text_size=first)
    if base == _D.VECTOR:
        return TypeSpec("vector", length=first)
    if base in _SIMPLE and not args:
        return TypeSpec(_SIMPLE[base])
    raise UnreadableColumn(f"unknown data type {kind.sql('mysql')!r}")


def _value(node: exp.Expr, text: str) -> ColumnDefault:
    """A DEFAULT: a constant's value, or an expression as written (``text``)."""
    if isinstance(node, exp.Null):
        return ColumnDefault("null")
    if isinstance(node, exp.Boolean):
        return ColumnDefault("value", "1" if node.this else "0")
    if isinstance(node, exp.Introducer) and isinstance(node.expression, exp.Literal):
        node = node.expression  # _charset 'string'
        if not node.is_string:
            raise UnreadableColumn(f"cannot read the default {text!r}")
    if isinstance(node, exp.Cast) and _first_word(text) in _TYPED_LITERALS:
        node = node.this  # DATE '...', TIME '...', TIMESTAMP '...'
    if (isinstance(node, exp.Literal) and node.is_string) or isinstance(node, exp.National):
        return ColumnDefault("value", node.this)
    if isinstance(node, (exp.Literal, exp.Neg)):
        negative = False
        while isinstance(node, exp.Neg):
            node, negative = node.this, not negative
        if isinstance(node, exp.Literal) and not node.is_string:
            return ColumnDefault("value", ("-" if negative else "") + node.this)
    elif isinstance(node, exp.HexString):
        digits = node.this.lower()
        return ColumnDefault("value", digits.zfill(len(digits) + len(digits) % 2), hex=True)
    elif isinstance(node, exp.BitString):
        width = (len(node.this) + 7) // 8 * 2
        return ColumnDefault("value", format(int(node.this or "0", 2), f"0{width}x"), hex=True)
    elif isinstance(node, exp.Paren):
        return ColumnDefault("expression", text)
    elif isinstance(node, (exp.Func, exp.Column)):  # a function: name(...), or a bare word
        word, call = (text.split("(", 1)[0].strip(), True) if text.endswith(")") else (text, False)
        if word.upper() in TEMPORAL_FUNCTIONS:
            return ColumnDefault("expression", text.lower())
        if call and word.isidentifier() and isinstance(node, exp.Func):
            return ColumnDefault("expression", text)
    raise UnreadableColumn(f"cannot read the default {text!r}")


_TYPED_LITERALS = frozenset({"DATE", "TIME", "TIMESTAMP"})


def _first_word(text: str) -> str:
    found = re.match(r"[A-Za-z_]+", text)
    return "" if found is None else found.group().upper()


def _default(node: exp.Expr, found: TypeSpec) -> ColumnDefault:
    """The value of a ``DefaultColumnConstraint`` read by this module's dialect (a COLLATE
    after it, which sqlglot reads as part of the value, is the column's: ``found``)."""
    text, value = node.meta.get("text"), node.this
    if not isinstance(text, str) or not isinstance(value, exp.Expr):
        raise UnreadableColumn("cannot read the default")
    if isinstance(value, exp.Collate):
        collate = re.search(r"\s+COLLATE\s+\S+$", text, re.IGNORECASE)
        if collate is None or not isinstance(value.this, exp.Expr):
            raise UnreadableColumn(f"cannot read the default {text!r}")
        found.collation = _word(value.expression)
        value, text = value.this, text[: collate.start()]
    return _as_stored(_value(value, text), value, found)


# types whose value is text: a number given for one is stored as the server prints it
_STRING_TYPES = frozenset(
    {"char", "varchar", "binary", "varbinary", "tinytext", "text", "mediumtext", "longtext",
     "tinyblob", "blob", "mediumblob", "longblob", "json", "uuid", "inet4", "inet6"}
)  # fmt: skip
_PLAIN_INTEGER = re.compile(r"0|-?[1-9][0-9]*")


def _as_stored(default: ColumnDefault, node: exp.Expr, found: TypeSpec) -> ColumnDefault:
    """A constant DEFAULT the server converts by the kind of literal it is, not by its text,
    is kept as an ``expression`` (its fill is unknown): a number for an ENUM or SET (an index
    or a bit mask), a number other than a plain integer for a text type (1e2 is stored as
    '100', -0 as '0'), a string for a BIT (its bytes: '5' is b'00110101')."""
    if default.kind != "value" or default.hex:
        return default
    number = isinstance(node, (exp.Boolean, exp.Neg)) or (
        isinstance(node, exp.Literal) and not node.is_string
    )
    kind = found.data_type
    if number and (
        kind in ("enum", "set")
        or (kind in _STRING_TYPES and not _PLAIN_INTEGER.fullmatch(default.text or ""))
    ):
        return ColumnDefault("expression", default.text)
    if not number and kind == "bit":
        return ColumnDefault("expression", default.text)
    return default


def read_default(text: str, *, ansi_quotes: bool = False) -> ColumnDefault:
    """A ``DEFAULT`` value (``text``: what follows the word) as a column definition has it."""
    found = read_column("?", f"INT DEFAULT {text}", in_alter=False, ansi_quotes=ansi_quotes)
    if found.type.collation is not None:
        raise UnreadableColumn(f"cannot read the default {text!r}")
    return found.default


_IGNORED = (
    exp.UniqueColumnConstraint, exp.CommentColumnConstraint, exp.OnUpdateColumnConstraint,
    exp.Reference, exp.CheckColumnConstraint,
)  # fmt: skip


def read_column(
    name: str, definition: str, *, in_alter: bool, ansi_quotes: bool = False
) -> ColumnSpec:
    """The column ``name`` defined by ``definition`` (the text after its name; ``in_alter``:
    FIRST/AFTER may end it). Raises ``UnreadableColumn``."""
    dialect = _DIALECTS[ansi_quotes]
    text = f"_ {definition}"
    try:
        tokens = dialect.tokenize(text)
        tree = dialect.parser().parse_into(exp.ColumnDef, tokens, text)[0]
    except (ParseError, TokenError) as exc:
        errors = getattr(exc, "errors", None) or [{}]
        near = (errors[0].get("highlight", "") + errors[0].get("end_context", ""))[:40]
        where = f" near {near!r}" if near else f": {exc}"
        raise UnreadableColumn(f"cannot read the definition of column {name!r}{where}") from exc
    if not isinstance(tree, exp.ColumnDef) or not isinstance(tree.kind, exp.DataType):
        raise UnreadableColumn(f"cannot read the definition of column {name!r}")
    spec = ColumnSpec(name, _type(tree.kind, float_word=tokens[1].token_type == _T.FLOAT))
    if tree.kind.this == _D.SERIAL:
        spec.nullable, spec.auto_increment = False, True
    null_written = False
    for constraint in tree.constraints:
        kind = constraint.args.get("kind")
        _attribute(spec, kind, in_alter)
        if isinstance(kind, exp.ComputedColumnConstraint):
            spec.generated = _generation(dialect, definition)
        null_written |= isinstance(kind, exp.NotNullColumnConstraint) and spec.nullable
    # TIMESTAMP NULL defaults to NULL whatever explicit_defaults_for_timestamp is (without
    # NULL, OFF makes it NOT NULL with another default: ``history.fill_of``)
    timestamp_null = spec.type.data_type == "timestamp" and null_written and spec.nullable
    if timestamp_null and spec.default.kind == "none" and not spec.primary:
        spec.default = ColumnDefault("null")
    return spec


def _attribute(spec: ColumnSpec, kind: exp.Expr | None, in_alter: bool) -> None:
    found = spec.type
    if isinstance(kind, exp.NotNullColumnConstraint):
        spec.nullable = bool(kind.args.get("allow_null"))
    elif isinstance(kind, exp.DefaultColumnConstraint):
        spec.default = _default(kind, found)
    elif isinstance(kind, exp.AutoIncrementColumnConstraint):
        spec.auto_increment = True
    elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
        spec.primary = True
    elif isinstance(kind, exp.CharacterSetColumnConstraint):
        found.charset = _word(kind)
    elif isinstance(kind, exp.CollateColumnConstraint):
        found.collation = _word(kind)
    elif isinstance(kind, exp.BinaryColumnConstraint):
        found.binary_collation = True
    elif isinstance(kind, exp.ZeroFillColumnConstraint):
        found.zerofill = found.unsigned = True
    elif isinstance(kind, exp.InvisibleColumnConstraint):
        spec.invisible = True
    elif isinstance(kind, exp.ComputedColumnConstraint):
        pass  # its text: _generation
    elif isinstance(kind, exp.GeneratedAsRowColumnConstraint):
        raise UnreadableColumn("system-versioned tables are not supported")
    elif isinstance(kind, _IGNORED):
        pass
    elif isinstance(kind, exp.Var):
        _marker_attribute(spec, kind, in_alter)
    else:
        what = "?" if kind is None else kind.sql("mysql")
        raise UnreadableColumn(f"cannot read {what!r} in the definition of column {spec.name!r}")


def _word(kind: exp.Expr) -> str:
    """The name a CHARACTER SET or COLLATE attribute gives (a word, a quoted name or a string)."""
    named = kind if isinstance(kind, exp.Var) else kind.this
    if not isinstance(named, (exp.Var, exp.Identifier, exp.Column, exp.Literal)) or not named.name:
        raise UnreadableColumn(f"cannot read {kind.sql('mysql')!r}")
    return named.name.lower()


# attributes read (_Parser) that change nothing the catalog holds
_NO_EFFECT = frozenset(
    {"PERSISTENT", "VIRTUAL", "STORED", "SIGNED", "ENFORCED", "NOT ENFORCED", "COLUMN_FORMAT",
     "STORAGE", "SRID", "REF_SYSTEM_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE",
     "COMPRESSED"}
)  # fmt: skip


def _marker_attribute(spec: ColumnSpec, kind: exp.Var, in_alter: bool) -> None:
    word = kind.name
    if word in _NO_EFFECT:
        pass
    elif word == "UNSIGNED":
        spec.type.unsigned = True
    elif word == "VISIBLE":
        spec.invisible = False
    elif word == "SERIAL":
        spec.nullable, spec.auto_increment = False, True
    elif word == "BYTE" and spec.type.data_type == "char":
        spec.type.data_type, spec.type.charset = "binary", None
    elif word in ("FIRST", "AFTER") and in_alter:
        after = kind.expressions[0].name if kind.expressions else None
        spec.position = ("first", None) if word == "FIRST" else ("after", after)
    else:
        raise UnreadableColumn(f"{word} in the definition of column {spec.name!r}")


def _generation(dialect: MySQL, definition: str) -> str:
    """The generation expression as written: the text in the parentheses after AS."""
    tokens = dialect.tokenize(definition)
    depth, opened = 0, -1
    for i, token in enumerate(tokens):
        if token.token_type == _T.L_PAREN:
            depth += 1
            if depth == 1 and i > 0 and tokens[i - 1].token_type == _T.ALIAS:
                opened = i
        elif token.token_type == _T.R_PAREN:
            depth -= 1
            if depth == 0 and opened >= 0:
                return definition[tokens[opened].end + 1 : token.start].strip()
    raise UnreadableColumn("expected a generation expression")
