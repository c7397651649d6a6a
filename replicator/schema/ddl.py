"""Logged DDL statements applied to a catalog, exactly or not at all.

``apply_ddl`` reads one statement of a QUERY event with the grammar of MySQL 5.7-9.x and
MariaDB 10.x-11.x (``CREATE``/``ALTER``/``DROP``/``RENAME``/``TRUNCATE TABLE``, ``CREATE TABLE
... LIKE``, ``CREATE``/``ALTER``/``DROP DATABASE``) and returns the catalog after it with its
effects, one per table or database it changed. Statements that change no table (views,
routines, triggers, users, grants, indexes, ``ANALYZE``...) have no effects. A statement on a
table that it cannot follow exactly raises ``DdlError`` naming the tables it touches (or
``None`` when it cannot tell), and never guesses.

An ``ALTER TABLE`` that makes the server rewrite stored values the binlog then never shows
(a column type narrowed, made UNSIGNED or NOT NULL outside strict mode or under ALTER IGNORE,
changed across families, rounded to fewer decimals or fractional seconds, made CHAR, its ENUM
or SET labels not kept as spelled: ``_keeps_values``; ALTER IGNORE with a unique key, which
deletes duplicates; ``DROP``/``TRUNCATE``/``EXCHANGE PARTITION``, ``IMPORT TABLESPACE``)
comes with an ``Unrepresentable`` effect: the history still follows it, and the stream stops
when the table is replicated. A ``RENAME TABLE`` onto a name in use renamed a temporary table
(MariaDB logs it, not its CREATE) and raises ``DdlError``.

``dml_tables`` names the tables an ``INSERT``/``UPDATE``/``DELETE``/``REPLACE``/``LOAD DATA``
writes, for statements logged as SQL (``binlog_format`` STATEMENT or MIXED).

Tokens come from sqlglot's MySQL tokenizer (quoting, literals, comments); the statement grammar
on top (tables, keys, table options, ALTER TABLE's clauses, RENAME, partitions) is written here,
after the servers' own: sqlglot's syntax tree (as of sqlglot 30) reads ``RENAME TABLE``, ``ALTER
TABLE ... CONVERT TO CHARACTER SET``, ``ADD (a, b)`` and partition clauses only as opaque
commands, and a whole statement not at all when one part of it is unknown to sqlglot. Each column
definition (type, attributes, default, ``FIRST``/``AFTER``) is read from sqlglot's syntax tree
by ``ddl_tree``. Versioned comments (``/*!50100 ...*/``, MariaDB's ``/*M!100100 ...*/``) are read
as the server reads them.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..binlog.charsets import KNOWN_CHARSETS
from .model import (
    BINARY_TYPES,
    NO_DEFAULT,
    TEXT_TYPES,
    Catalog,
    Column,
    ColumnDefault,
    Database,
    ServerTraits,
    Table,
)

# sqlglot (the tokenizer here, the syntax tree in ``ddl_tree``) is imported at the first
# statement read, not with this module: it takes a tenth of a second, and a stream whose binlog
# holds no DDL never needs it (tests/unit/test_startup.py)
if TYPE_CHECKING:
    from sqlglot.tokens import Tokenizer, TokenType  # type: ignore[attr-defined]

    from .ddl_tree import ColumnSpec as _ColumnSpec
    from .ddl_tree import TypeSpec as _Type

__all__ = [
    "Context",
    "DatabaseAltered",
    "DatabaseCreated",
    "DatabaseDropped",
    "DdlError",
    "Effect",
    "TableAltered",
    "TableCreated",
    "TableDropped",
    "TableRenamed",
    "TableTruncated",
    "Unrepresentable",
    "apply_ddl",
    "apply_ddl_effect",
    "dml_tables",
]

TableName = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Context:
    """What a QUERY event tells besides its statement."""

    default_db: str | None = None  # the session's database (``USE``)
    ansi_quotes: bool = False  # sql_mode ANSI_QUOTES: "x" is an identifier
    server_charset: str | None = None  # character_set_server when the statement ran
    strict: bool = False  # sql_mode STRICT_*: a value that does not fit fails the statement
    # sql_mode NO_BACKSLASH_ESCAPES: a backslash in a string is itself
    no_backslash_escapes: bool = False


class DdlError(Exception):
    """A statement the history cannot follow exactly. ``tables``: the tables it touches (empty:
    none), or None when that cannot be told."""

    def __init__(self, message: str, tables: Sequence[TableName] | None = ()) -> None:
        super().__init__(message)
        self.tables: tuple[TableName, ...] | None = None if tables is None else tuple(tables)


class UnknownTableError(DdlError):
    """A statement on a table the history does not know (``table``): one that changed between
    a stream's start and the moment the history was read from the server, say."""

    def __init__(self, message: str, table: TableName, tables: Sequence[TableName]) -> None:
        super().__init__(message, tables)
        self.table = table


# -- effects -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableCreated:
    table: Table


@dataclass(frozen=True, slots=True)
class TableAltered:
    before: Table
    after: Table


@dataclass(frozen=True, slots=True)
class TableRenamed:
    before: Table
    after: Table


@dataclass(frozen=True, slots=True)
class TableDropped:
    table: Table


@dataclass(frozen=True, slots=True)
class TableTruncated:
    table: Table


@dataclass(frozen=True, slots=True)
class DatabaseCreated:
    database: Database


@dataclass(frozen=True, slots=True)
class DatabaseAltered:
    before: Database
    after: Database


@dataclass(frozen=True, slots=True)
class DatabaseDropped:
    database: Database
    tables: tuple[Table, ...]


@dataclass(frozen=True, slots=True)
class UnknownRenamed:
    """A table whose columns are not known (``Catalog.unknown``) renamed: it stays unknown
    under its new name. No rows of it have landed (they need its columns), so this changes
    only the history."""

    schema: str
    name: str
    to_schema: str
    to_name: str


@dataclass(frozen=True, slots=True)
class Unrepresentable:
    """The statement rewrote rows of ``table`` without logging them."""

    table: Table
    reason: str


Effect = (
    TableCreated
    | TableAltered
    | TableRenamed
    | TableDropped
    | TableTruncated
    | DatabaseCreated
    | DatabaseAltered
    | DatabaseDropped
    | UnknownRenamed
    | Unrepresentable
)


def apply_ddl_effect(catalog: Catalog, effect: Effect) -> Catalog:
    """The catalog after one effect (effects carry whole tables: no parsing)."""
    if isinstance(effect, TableCreated):
        return catalog.with_table(effect.table)
    if isinstance(effect, TableAltered):
        return catalog.with_table(effect.after)
    if isinstance(effect, TableRenamed):
        moved = catalog.without_table(effect.before.schema, effect.before.name)
        return moved.with_table(effect.after)
    if isinstance(effect, TableDropped):
        return catalog.without_table(effect.table.schema, effect.table.name)
    if isinstance(effect, DatabaseCreated):
        return catalog.with_database(effect.database)
    if isinstance(effect, DatabaseAltered):
        return catalog.with_database(effect.after)
    if isinstance(effect, DatabaseDropped):
        return catalog.without_database(effect.database.name)
    if isinstance(effect, UnknownRenamed):
        before, after = (effect.schema, effect.name), (effect.to_schema, effect.to_name)
        return catalog.with_unknown_renamed(before, after)
    return catalog  # truncate, unrepresentable: the columns stay


# -- tokens ------------------------------------------------------------------------------

WORD, IDENT, STRING, NUMBER = "word", "ident", "string", "number"
HEX, BIT, PUNCT, INTRODUCER = "hex", "bit", "punct", "introducer"


@dataclass(frozen=True, slots=True)
class _Lexer:
    """sqlglot's MySQL tokenizer and how ``tokenize`` reads its tokens (``_lexer``)."""

    tokenizer: type[Tokenizer]
    kinds: dict[TokenType, str]  # token kinds by sqlglot token type
    strings: frozenset[TokenType]
    error: type[Exception]


@functools.cache
def _lexer() -> _Lexer:
    """Built at the first statement read (see the imports)."""
    from sqlglot.dialects.mysql import MySQL  # noqa: PLC0415 - see the imports
    from sqlglot.errors import TokenError  # noqa: PLC0415
    from sqlglot.tokens import TokenType  # type: ignore[attr-defined]  # noqa: PLC0415

    class _Tokenizer(MySQL.Tokenizer):
        # sqlglot keeps RENAME/REPLACE/... as one opaque string
        COMMANDS: ClassVar[set[TokenType]] = set()

    punct = {
        TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA, TokenType.DOT, TokenType.EQ,
        TokenType.SEMICOLON, TokenType.DASH, TokenType.PLUS, TokenType.STAR, TokenType.SLASH,
        TokenType.PARAMETER, TokenType.LT, TokenType.GT, TokenType.LTE, TokenType.GTE,
        TokenType.NEQ, TokenType.COLON, TokenType.PIPE, TokenType.AMP, TokenType.CARET,
        TokenType.MOD, TokenType.DPIPE, TokenType.NULLSAFE_EQ,
    }  # fmt: skip
    # strings are told apart in ``tokenize``; anything else is a word
    kinds = {
        TokenType.IDENTIFIER: IDENT, TokenType.NUMBER: NUMBER, TokenType.HEX_STRING: HEX,
        TokenType.BIT_STRING: BIT, TokenType.INTRODUCER: INTRODUCER,
        **dict.fromkeys(punct, PUNCT),
    }  # fmt: skip
    strings = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING})
    return _Lexer(_Tokenizer, kinds, strings, TokenError)


@dataclass(frozen=True, slots=True)
class Tok:
    kind: str
    text: str  # identifiers and strings unquoted; words as written
    start: int  # offsets in the statement as read (for expression text)
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == WORD else ""


_VERSIONED = re.compile(r"/\*(M?)!(\d{5,6})?")


def _server_version(traits: ServerTraits) -> int:
    major, minor, patch = traits.version
    return major * 10000 + minor * 100 + patch


def unwrap_versioned(sql: str, traits: ServerTraits) -> str:
    """``/*!NNNNN text */`` is ``text`` to a server of version NNNNN or later (MariaDB also
    reads ``/*M!NNNNN``); older servers, and MySQL for ``M!``, skip it as a comment."""
    if "/*" not in sql:
        return sql  # (-- and # comments are the tokenizer's)
    out: list[str] = []
    i, n, quote = 0, len(sql), ""
    while i < n:
        ch = sql[i]
        if quote:
            out.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                out.append(sql[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "'\"`":
            quote = ch
            out.append(ch)
            i += 1
            continue
        if ch == "#" or (
            sql.startswith("--", i) and sql[i + 2 : i + 3] in ("", " ", "\t", "\n", "\r")
        ):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end])  # a comment to the end of the line: quotes in it are text
            i = end
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise DdlError("unterminated comment", None)
            found = _VERSIONED.match(sql, i)
            if found is not None:
                mariadb_only, version = found.group(1), found.group(2)
                wanted = (not mariadb_only or traits.flavor == "mariadb") and (
                    version is None or int(version) <= _server_version(traits)
                )
                out.append(" " + sql[found.end() : end] + " " if wanted else " ")
            else:
                out.append(" ")
            i = end + 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def tokenize(sql: str, context: Context, traits: ServerTraits) -> list[Tok]:
    text = unwrap_versioned(sql, traits)
    lexer = _lexer()
    try:
        raw = lexer.tokenizer().tokenize(text)
    except lexer.error as exc:
        raise DdlError(f"cannot read the statement: {exc}", None) from exc
    out: list[Tok] = []
    for tok in raw:
        value = tok.text
        kind = lexer.kinds.get(tok.token_type, WORD)
        if tok.token_type in lexer.strings:
            quoted_dq = text[tok.start : tok.start + 1] == '"'
            kind = IDENT if quoted_dq and context.ansi_quotes else STRING
            if (
                kind == STRING
                and context.no_backslash_escapes
                and "\\" in text[tok.start : tok.end]
            ):
                raise DdlError(
                    "a string with a backslash under sql_mode NO_BACKSLASH_ESCAPES (its value "
                    "is not read exactly here)",
                    None,
                )
        if kind == WORD and " " in value.strip():  # sqlglot joins "PRIMARY KEY", "ORDER BY"
            offset = tok.start
            for part in value.split():
                where = text.find(part, offset, tok.end + 1)
                where = offset if where < 0 else where
                out.append(Tok(WORD, part, where, where + len(part) - 1))
                offset = where + len(part)
            continue
        out.append(Tok(kind, value, tok.start, tok.end))
    return out


class _Parser:
    """A cursor over tokens with the few moves a grammar needs."""

    def __init__(self, tokens: list[Tok], sql: str, ansi_quotes: bool = False) -> None:
        self.tokens = tokens
        self.sql = sql
        self.ansi_quotes = ansi_quotes  # for the text handed to ddl_tree
        self.i = 0

    def peek(self, ahead: int = 0) -> Tok | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def at(self, *words: str) -> bool:
        """The next tokens are these words (or punctuation)."""
        for k, word in enumerate(words):
            tok = self.peek(k)
            if tok is None:
                return False
            if tok.kind == WORD and tok.upper == word:
                continue
            if tok.kind == PUNCT and tok.text == word:
                continue
            return False
        return True

    def at_any(self, *phrases: str) -> bool:
        """The next tokens are one of these phrases (words separated by spaces)."""
        return any(self.at(*phrase.split()) for phrase in phrases)

    def at_word(self, words: Collection[str], *then: str) -> bool:
        """The next token is a word in ``words`` (upper case), and the words ``then`` follow."""
        tok = self.peek()
        return tok is not None and tok.upper in words and self.at(tok.upper, *then)

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def accept_any(self, *phrases: str) -> bool:
        """Accept the first of these phrases (words separated by spaces) that is next."""
        return any(self.accept(*phrase.split()) for phrase in phrases)

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def done(self) -> bool:
        while self.at(";"):
            self.i += 1
        return self.i >= len(self.tokens)

    def next(self) -> Tok:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of statement")
        self.i += 1
        return tok

    def error(self, what: str, tables: Sequence[TableName] | None = None) -> DdlError:
        tok = self.peek()
        near = "the end" if tok is None else repr(self.sql[tok.start : tok.start + 40])
        return DdlError(f"{what} near {near}", tables)

    def name(self) -> str:
        """An identifier: quoted, or a bare word (most keywords are allowed as names)."""
        tok = self.peek()
        if tok is None or tok.kind not in (IDENT, WORD) or (tok.kind == WORD and tok.text in "()"):
            raise self.error("expected a name")
        self.i += 1
        return tok.text

    def kind_at(self, ahead: int = 0) -> str | None:
        tok = self.peek(ahead)
        return None if tok is None else tok.kind

    def is_name(self) -> bool:
        return self.kind_at() in (IDENT, WORD)

    def qualified(self, context: Context) -> TableName:
        first = self.name()
        if self.accept("."):
            return first, self.name()
        if context.default_db is None:
            raise DdlError(f"table {first!r} without a database and no database selected", None)
        return context.default_db, first

    def skip_group(self) -> str:
        """Skip a parenthesised group (the next token is '('); returns its inner text."""
        start = self.next()
        depth = 1
        while depth:
            tok = self.next()
            if tok.kind == PUNCT and tok.text == "(":
                depth += 1
            elif tok.kind == PUNCT and tok.text == ")":
                depth -= 1
        end = self.tokens[self.i - 1]
        return self.sql[start.end + 1 : end.start].strip()

    def skip_until(self, *stops: str) -> None:
        """Skip balanced tokens up to (not including) a stop at depth 0, or the end."""
        while not self.done():
            if self.at("("):
                self.skip_group()
                continue
            if self.at_any(*stops):
                return
            self.i += 1


# -- data types --------------------------------------------------------------------------

_INT_WIDTH = {"tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8), "int": (11, 10),
              "bigint": (20, 20)}  # fmt: skip
_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}
# bytes a TEXT or BLOB type holds
_TEXT_SIZE = {
    "tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295,
    "tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295,
}  # fmt: skip
# the most bytes one character takes (for TEXT(M) and CONVERT TO's TEXT promotion)
_MAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4,
           "utf32": 4, "big5": 2, "sjis": 2, "cp932": 2, "ujis": 3, "eucjpms": 3,
           "euckr": 2, "gb2312": 2, "gbk": 2, "gb18030": 4}  # fmt: skip
_WIDE = frozenset({"utf8mb4", "utf16", "utf16le", "utf32"})  # every character fits
_CHARSET = ("CHARACTER SET", "CHARSET", "CHAR SET")


def _charset_name(parser: _Parser) -> str:
    tok = parser.next()
    if tok.kind not in (WORD, IDENT, STRING):
        raise DdlError(f"expected a character set name, found {tok.text!r}", None)
    return tok.text.lower()


def _charset_value(parser: _Parser) -> str:
    """``[=] name`` of a character set or collation option."""
    parser.accept("=")
    return _charset_name(parser)


@dataclass(slots=True)
class _CharsetOptions:
    """The ``[DEFAULT] CHARACTER SET [=] x`` and ``[DEFAULT] COLLATE [=] y`` options read."""

    charset: str | None = None
    collation: str | None = None

    def read(self, parser: _Parser) -> bool:
        """Read one of the two if it is next (an optional DEFAULT is read either way)."""
        parser.accept("DEFAULT")
        if parser.accept_any(*_CHARSET):
            self.charset = _charset_value(parser)
        elif parser.accept("COLLATE"):
            self.collation = _charset_value(parser)
        else:
            return False
        return True


# -- columns -----------------------------------------------------------------------------


def _column_spec(parser: _Parser, name: str, in_alter: bool) -> _ColumnSpec:
    """The definition of column ``name`` (the next tokens up to a ``,`` or ``)``, or in ALTER
    TABLE a partition clause), read from sqlglot's syntax tree (``ddl_tree``)."""
    from .ddl_tree import UnreadableColumn, read_column  # noqa: PLC0415 - see the imports

    first = parser.i
    parser.skip_until(",", ")", *(("PARTITION BY", "REMOVE PARTITIONING") if in_alter else ()))
    if parser.i == first:
        raise parser.error(f"expected the definition of column {name!r}")
    try:
        text = _text_between(parser, first)
        return read_column(name, text, in_alter=in_alter, ansi_quotes=parser.ansi_quotes)
    except UnreadableColumn as exc:
        raise DdlError(str(exc), None) from exc


def _default(parser: _Parser) -> ColumnDefault:
    """``DEFAULT``'s value (ALTER COLUMN ... SET DEFAULT), read as ``ddl_tree`` reads it."""
    from .ddl_tree import UnreadableColumn, read_default  # noqa: PLC0415 - see the imports

    first = parser.i
    parser.skip_until(",")
    if parser.i == first:
        raise parser.error("expected a default")
    try:
        return read_default(_text_between(parser, first), ansi_quotes=parser.ansi_quotes)
    except UnreadableColumn as exc:
        raise DdlError(str(exc), None) from exc


def _text_between(parser: _Parser, first: int) -> str:
    """The statement text from token ``first`` up to the current token."""
    stop = parser.peek()
    end = len(parser.sql) if stop is None else stop.start
    return parser.sql[parser.tokens[first].start : end].strip()


def _charset_alias(name: str | None, traits: ServerTraits) -> str | None:
    """``utf8`` as the server names it in information_schema."""
    if name is None:
        return None
    name = name.lower()
    if name == "utf8":
        modern = (traits.flavor == "mariadb" and traits.version >= (10, 6, 1)) or (
            traits.flavor == "mysql" and traits.version >= (8, 0, 30)
        )
        return "utf8mb3" if modern else "utf8"
    return name


def _collation_charset(collation: str) -> str | None:
    """The charset a collation name starts with (None for MariaDB's ``uca1400_*``, which
    apply to the charset in force)."""
    if collation == "binary":
        return "binary"
    prefix = collation.split("_", 1)[0]
    return prefix if prefix in KNOWN_CHARSETS else None


def _mysql8(traits: ServerTraits) -> bool:
    """MySQL 8.0.19+, which shows no integer display widths (nor YEAR's)."""
    return traits.flavor == "mysql" and traits.version >= (8, 0, 19)


def _int_column_type(found: _Type, traits: ServerTraits) -> str:
    base = found.data_type
    width: int | None
    if not _mysql8(traits):
        width = found.width or _INT_WIDTH[base][1 if found.unsigned else 0]
    elif found.zerofill or (base == "tinyint" and found.width == 1):
        width = found.width
    else:
        width = None
    text = base if width is None else f"{base}({width})"
    if found.zerofill and _mysql8(traits) and width is None:
        text = f"{base}({_INT_WIDTH[base][1]})"
    return text + (" unsigned" if found.unsigned else "") + (" zerofill" if found.zerofill else "")


def _quote_label(label: str) -> str:
    return "'" + label.replace("'", "''") + "'"


def _column_type(found: _Type, traits: ServerTraits) -> str:
    """COLUMN_TYPE as information_schema prints it."""
    base = found.data_type
    suffix = (" unsigned" if found.unsigned else "") + (" zerofill" if found.zerofill else "")
    if base in _INT_WIDTH:
        return _int_column_type(found, traits)
    if base == "decimal":
        return f"decimal({found.precision},{found.scale}){suffix}"
    if base in ("float", "double"):
        if found.precision is not None:
            return f"{base}({found.precision},{found.scale}){suffix}"
        return base + suffix
    if base in ("char", "varchar", "binary", "varbinary", "bit"):
        return f"{base}({found.length})"
    if base in ("time", "datetime", "timestamp"):
        return f"{base}({found.fsp})" if found.fsp else base
    if base == "year":
        return "year" if _mysql8(traits) else "year(4)"
    if base in ("enum", "set"):
        return f"{base}({','.join(_quote_label(x) for x in found.labels or ())})"
    if base == "vector":
        return f"vector({found.length})"
    if base == "json" and traits.flavor == "mariadb":
        return "longtext"
    return base


@dataclass(frozen=True, slots=True)
class _Defaults:
    """Where a column's character set comes from when it names none."""

    charset: str | None
    collation: str | None


def _make_column(
    spec: _ColumnSpec, column_id: int, defaults: _Defaults, traits: ServerTraits
) -> Column:
    found = spec.type
    data_type = found.data_type
    charset: str | None = None
    collation: str | None = None
    if data_type == "json" and traits.flavor == "mariadb":
        data_type, charset, collation = "longtext", "utf8mb4", "utf8mb4_bin"
    elif data_type in TEXT_TYPES:
        if found.collation is not None and found.charset is None:
            charset = _collation_charset(found.collation) or defaults.charset
            collation = found.collation
        elif found.charset is not None:
            charset, collation = found.charset, found.collation
        else:
            charset, collation = defaults.charset, defaults.collation
        charset = _charset_alias(charset, traits)
        if charset == "binary":  # CHAR(n) CHARACTER SET binary is BINARY(n)
            binary = {"char": "binary", "varchar": "varbinary"}
            data_type = binary.get(data_type, data_type.replace("text", "blob"))
            charset, collation = "binary", None
        elif found.binary_collation and charset is not None:
            collation = f"{charset}_bin"
        if found.text_size is not None and charset != "binary":
            from .ddl_tree import sized  # noqa: PLC0415 - see the imports

            data_type = sized("text", found.text_size * _MAXLEN.get(charset or "", 1))
        if collation is not None and charset == "utf8mb3" and collation.startswith("utf8_"):
            collation = "utf8mb3_" + collation[5:]  # as the server names it then
    if data_type in BINARY_TYPES:
        charset, collation = "binary", None
    found = dataclasses.replace(found, data_type=data_type)
    has_length = data_type in ("char", "varchar", "binary", "varbinary", "bit")
    return Column(
        name=spec.name,
        data_type=data_type,
        column_type=_column_type(found, traits),
        unsigned=found.unsigned,
        length=found.length if has_length else None,
        precision=found.precision if data_type == "decimal" else None,
        scale=found.scale if data_type == "decimal" else None,
        fsp=found.fsp if data_type in ("time", "datetime", "timestamp") else None,
        charset=charset,
        collation=collation,
        labels=found.labels if data_type in ("enum", "set") else None,
        nullable=spec.nullable and not spec.primary,
        default=spec.default,
        generated=spec.generated,
        auto_increment=spec.auto_increment,
        invisible=spec.invisible,
        id=column_id,
    )


# -- statements --------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    """One statement being applied: the catalog as it goes, and the effects so far."""

    catalog: Catalog
    context: Context
    parser: _Parser
    effects: list[Effect]

    @property
    def traits(self) -> ServerTraits:
        return self.catalog.traits

    def table_name(self) -> TableName:
        db, name = self.parser.qualified(self.context)
        return self.catalog.key(db, name)

    def database_name(self, name: str) -> str:
        return name.lower() if self.traits.lower_case_table_names else name

    def add(self, effect: Effect) -> None:
        self.effects.append(effect)
        self.catalog = apply_ddl_effect(self.catalog, effect)

    def database_defaults(self, db: str, table: TableName) -> _Defaults:
        """The default character set of tables created in ``db`` now; a database whose
        charset at this position is unknown (``Database.charset`` None) stops for ``table``.
        Not the session's ``collation_database`` a QUERY event may carry: the server logs it
        only where it differs from the database's, and takes the database's."""
        found = self.catalog.databases.get(db)
        if found is not None and found.charset is None:
            raise DdlError(
                f"the default character set of database {db} at this position is not known "
                "(the schema history was seeded after it changed)",
                [table],
            )
        if found is not None:
            return _Defaults(found.charset, found.collation)
        return _Defaults(self.context.server_charset, None)


def apply_ddl(catalog: Catalog, statement: str, context: Context) -> tuple[Catalog, list[Effect]]:
    """The catalog after ``statement``, with its effects in order (none for a statement that
    changes no table or database). Raises ``DdlError``."""
    tokens = tokenize(statement, context, catalog.traits)
    parser = _Parser(tokens, unwrap_versioned(statement, catalog.traits), context.ansi_quotes)
    run = _Run(catalog, context, parser, [])
    if parser.done():
        return catalog, []
    if parser.accept("CREATE"):
        _create(run)
    elif parser.accept("ALTER"):
        _alter(run)
    elif parser.accept("DROP"):
        _drop(run)
    elif parser.accept("RENAME"):
        if parser.accept_any("TABLE", "TABLES"):
            _rename_tables(run)
    elif parser.accept("TRUNCATE"):
        parser.accept("TABLE")
        name = run.table_name()
        run.add(TableTruncated(_known_or_bare(run.catalog, name)))
        _end(parser)
    elif parser.accept("IMPORT", "TABLE"):
        raise DdlError("IMPORT TABLE creates tables with rows the binlog does not show", None)
    return run.catalog, run.effects


def _end(parser: _Parser) -> None:
    if not parser.done():
        raise parser.error("unexpected text after the statement")


def _known_or_bare(catalog: Catalog, name: TableName) -> Table:
    """The table, or (unknown to the history) a table of that name without columns."""
    found = catalog.table(*name)
    return found if found is not None else Table(name[0], name[1], ())


_NON_TABLE_OBJECTS = frozenset(
    {"VIEW", "TRIGGER", "PROCEDURE", "FUNCTION", "EVENT", "USER", "ROLE", "INDEX", "SERVER",
     "LOGFILE", "TABLESPACE", "SEQUENCE", "SPATIAL", "RESOURCE", "PACKAGE", "SYNONYM",
     "DEFINER", "ALGORITHM", "SQL", "AGGREGATE", "UNIQUE", "FULLTEXT", "UNDO", "INSTANCE",
     "ONLINE_INDEX"}
)  # fmt: skip


def _create(run: _Run) -> None:
    parser = run.parser
    replace = parser.accept("OR", "REPLACE")
    if parser.accept("TEMPORARY"):
        return  # not logged with row events, never replicated
    if parser.accept_any("DATABASE", "SCHEMA"):
        _create_database(run)
        return
    if not parser.accept("TABLE"):
        if parser.at_word(_NON_TABLE_OBJECTS) or parser.at_any("OR", "ONLINE", "OFFLINE"):
            parser.accept_any("ONLINE", "OFFLINE")
            _refuse_functional_key(parser)  # CREATE [UNIQUE] INDEX i ON t ((expr))
            return  # views, routines, users, indexes (also CREATE ONLINE INDEX), ...
        raise parser.error("unknown CREATE statement", None)
    if_not_exists = parser.accept("IF", "NOT", "EXISTS")
    name = run.table_name()
    existing = run.catalog.table(*name)
    exists = existing is not None or run.catalog.is_unknown(*name)
    if exists and if_not_exists and not replace:
        return
    if parser.accept_any("LIKE", "( LIKE"):
        source_name = run.table_name()
        parser.accept(")")
        source = run.catalog.table(*source_name)
        if source is None:
            raise UnknownTableError(
                f"CREATE TABLE ... LIKE {source_name[0]}.{source_name[1]}, a table the schema "
                "history does not know",
                source_name,
                [name, source_name],
            )
        first = run.catalog.next_column_id  # a new table: new column ids
        columns = tuple(
            dataclasses.replace(c, fill=None, id=first + i) for i, c in enumerate(source.columns)
        )
        created = dataclasses.replace(source, schema=name[0], name=name[1], columns=columns)
        run.add(TableCreated(created))
        _end(parser)
        return
    specs: list[_ColumnSpec] = []
    primary: list[str] = []
    if parser.at("("):
        try:
            _definitions(parser, specs, primary)
        except DdlError as exc:
            raise DdlError(str(exc), [name]) from exc
    charset, collation = _table_options(parser, name, in_alter=False)
    if not parser.done():  # [IGNORE | REPLACE] [AS] SELECT ...: rows come from the query
        raise DdlError(
            "CREATE TABLE ... SELECT logged as SQL: its columns and rows are not in the binlog",
            [name],
        )
    if not specs:
        raise DdlError("CREATE TABLE without columns", [name])
    defaults = run.database_defaults(name[0], name)
    if charset is not None or collation is not None:
        # a collation of no charset (MariaDB's uca1400_*) applies to the database's
        charset = charset or _collation_charset(collation or "") or defaults.charset
        defaults = _Defaults(_charset_alias(charset, run.traits), collation)
    first = run.catalog.next_column_id  # ids are unique in the whole catalog, never reused
    columns = tuple(_make_column(s, first + i, defaults, run.traits) for i, s in enumerate(specs))
    key = [s.name for s in specs if s.primary] or primary
    table = Table(
        schema=name[0],
        name=name[1],
        columns=columns,
        primary_key=_key_names(columns, key, name),
        charset=defaults.charset,
        collation=defaults.collation,
    )
    _check_names(table)
    columns = tuple(
        dataclasses.replace(c, nullable=False) if c.name in table.primary_key else c
        for c in columns
    )
    run.add(TableCreated(dataclasses.replace(table, columns=columns)))


def _check_names(table: Table) -> None:
    seen: set[str] = set()
    for column in table.columns:
        folded = column.name.casefold()
        if folded in seen:
            raise DdlError(f"duplicate column {column.name!r}", [(table.schema, table.name)])
        seen.add(folded)


def _key_names(columns: Sequence[Column], key: Sequence[str], name: TableName) -> tuple[str, ...]:
    by_name = {c.name.casefold(): c.name for c in columns}
    out = []
    for part in key:
        found = by_name.get(part.casefold())
        if found is None:
            raise DdlError(f"primary key names unknown column {part!r}", [name])
        out.append(found)
    return tuple(out)


def _definitions(parser: _Parser, specs: list[_ColumnSpec], primary: list[str]) -> None:
    """``( create_definition, ... )``"""
    parser.expect("(")
    while True:
        _definition(parser, specs, primary, in_alter=False)
        if parser.accept(")"):
            return
        parser.expect(",")


_INDEX_WORDS = ("INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK")
_CONSTRAINTS = ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK")  # CONSTRAINT [name] ...


def _definition(
    parser: _Parser, specs: list[_ColumnSpec], primary: list[str], *, in_alter: bool
) -> None:
    """A column, or a key/constraint (only the primary key matters here)."""
    if parser.kind_at() == WORD:
        if parser.accept("CONSTRAINT") and not parser.at_any(*_CONSTRAINTS):
            parser.name()
        if parser.accept("PRIMARY", "KEY"):
            primary[:] = _key_parts(parser)
            parser.skip_until(",", ")")
            return
        if _is_key_definition(parser):
            _refuse_functional_key(parser)
            parser.skip_until(",", ")")
            return
    name = parser.name()
    specs.append(_column_spec(parser, name, in_alter))


_INDEXES = frozenset({"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL"})


def _refuse_functional_key(parser: _Parser) -> None:
    """An index whose key parts start with an expression (MySQL 8.0.13+ ``INDEX ((a + 1))``)
    adds a hidden column to the table's rows, which the history does not hold: refused here,
    naming it, rather than at the table's first rows."""
    if not parser.at_word(_INDEXES):
        return
    for ahead in range(len(parser.tokens) - parser.i - 1):
        tok = parser.peek(ahead)
        if tok is None or tok.text in (",", ")"):
            return
        if tok.text == "(":
            following = parser.peek(ahead + 1)
            if following is not None and following.text == "(":
                raise parser.error(
                    "an index on an expression (a functional key part) adds a hidden column "
                    "to the rows, which is not supported"
                )
            return


def _is_key_definition(parser: _Parser) -> bool:
    """An index or constraint (reserved words, so never a bare column name), or MariaDB's
    ``PERIOD FOR``."""
    return parser.at_word(_INDEX_WORDS) or parser.at("PERIOD", "FOR")


def _key_parts(parser: _Parser) -> list[str]:
    """``[USING BTREE] (col [(len)] [ASC|DESC], ...)``: the column names."""
    if parser.accept("USING"):
        parser.next()
    if parser.is_name() and not parser.at("("):
        parser.name()  # an index name (MariaDB allows one on the primary key)
    parser.expect("(")
    names: list[str] = []
    while True:
        if parser.at("("):
            raise parser.error("a primary key on an expression is not supported")
        names.append(parser.name())
        if parser.at("("):
            parser.skip_group()
        parser.accept_any("ASC", "DESC")
        if parser.accept(")"):
            return names
        parser.expect(",")


# what may follow CREATE TABLE's options: the SELECT that fills it
_SELECT_START = ("IGNORE", "REPLACE", "AS", "SELECT", "(", "WITH", "TABLE", "VALUES")


def _table_options(
    parser: _Parser, name: TableName, *, in_alter: bool
) -> tuple[str | None, str | None]:
    """Table options up to the end, a SELECT or (in ALTER) the next clause: returns the
    default character set and collation when given."""
    found = _CharsetOptions()
    while not parser.done():
        if parser.at("PARTITION", "BY"):
            parser.skip_until(";")
            continue
        if parser.at(","):
            if in_alter:
                break
            parser.i += 1
            continue
        # MySQL 8.0.21+ CREATE ... SELECT is row-logged with START TRANSACTION
        if found.read(parser) or parser.accept("START", "TRANSACTION"):
            continue
        if parser.at("WITH", "SYSTEM", "VERSIONING"):
            raise parser.error("system-versioned tables are not supported", [name])
        if parser.at_any(*_SELECT_START):
            break
        if parser.peek() is None:
            raise parser.error("expected a table option", [name])
        if not parser.at_word(_TABLE_OPTIONS):
            if in_alter:
                break
            raise parser.error("unknown table option", [name])
        parser.i += 1
        parser.accept("DIRECTORY")
        parser.accept("=")
        if parser.at("("):
            parser.skip_group()
        else:
            parser.next()
    return found.charset, found.collation


_TABLE_OPTIONS = frozenset(
    {"ENGINE", "TYPE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM",
     "COMMENT", "COMPRESSION", "CONNECTION", "DATA", "INDEX", "DELAY_KEY_WRITE", "ENCRYPTION",
     "ENCRYPTED", "ENCRYPTION_KEY_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE",
     "SECONDARY_ENGINE_ATTRIBUTE", "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS",
     "PACK_KEYS", "PASSWORD", "ROW_FORMAT", "STATS_AUTO_RECALC", "STATS_PERSISTENT",
     "STATS_SAMPLE_PAGES", "TABLESPACE", "UNION", "PAGE_CHECKSUM", "PAGE_COMPRESSED",
     "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL", "IETF_QUOTES", "SEQUENCE", "AUTOEXTEND_SIZE",
     "STORAGE"}
)  # fmt: skip


def _create_database(run: _Run) -> None:
    parser = run.parser
    if_not_exists = parser.accept("IF", "NOT", "EXISTS")
    name = run.database_name(parser.name())
    charset, collation = _database_options(parser)
    if if_not_exists and name in run.catalog.databases:
        return
    if charset is None and collation is not None:
        charset = _collation_charset(collation)
    charset = _charset_alias(charset or run.context.server_charset, run.traits)
    run.add(DatabaseCreated(Database(name, charset, collation)))


def _database_options(parser: _Parser) -> tuple[str | None, str | None]:
    found = _CharsetOptions()
    while not parser.done():
        if not found.read(parser):
            parser.next()  # COMMENT, ENCRYPTION, READ ONLY, ...: no effect on tables
            parser.accept("=")
    return found.charset, found.collation


def _skip_wait(parser: _Parser) -> None:
    """MariaDB's ``WAIT n`` / ``NOWAIT``."""
    if parser.accept("WAIT"):
        parser.next()
    parser.accept("NOWAIT")


def _drop(run: _Run) -> None:
    parser = run.parser
    if parser.accept_any("DATABASE", "SCHEMA"):
        parser.accept("IF", "EXISTS")
        db_name = run.database_name(parser.name())
        tables = tuple(t for (db, _), t in sorted(run.catalog.tables.items()) if db == db_name)
        database = run.catalog.databases.get(db_name, Database(db_name))
        run.add(DatabaseDropped(database, tables))
        return
    if parser.accept("TEMPORARY"):
        return
    parser.accept_any("ONLINE", "OFFLINE")
    if parser.accept("INDEX"):
        _drop_index(run)
        return
    if not parser.accept_any("TABLE", "TABLES"):
        return  # views, routines, users, ...: no table changes
    parser.accept("IF", "EXISTS")
    while True:
        name = run.table_name()
        run.add(TableDropped(_known_or_bare(run.catalog, name)))
        if not parser.accept(","):
            break
    _skip_wait(parser)
    parser.accept_any("RESTRICT", "CASCADE")
    _end(parser)


def _drop_index(run: _Run) -> None:
    """``DROP INDEX name ON table``: only the index named ``PRIMARY`` (the primary key)
    changes what the history holds."""
    parser = run.parser
    parser.accept("IF", "EXISTS")
    if parser.name().upper() != "PRIMARY":
        return
    parser.expect("ON")
    name = run.table_name()
    before = run.catalog.table(*name)
    if before is None and run.catalog.is_unknown(*name):
        return  # its key is learned with its columns
    if before is None:
        raise UnknownTableError(
            f"DROP INDEX of {name[0]}.{name[1]}, a table the schema history does not know",
            name,
            [name],
        )
    if before.primary_key:
        run.add(TableAltered(before, dataclasses.replace(before, primary_key=())))


def _rename_tables(run: _Run) -> None:
    parser = run.parser
    if_exists = parser.accept("IF", "EXISTS")
    pairs: list[tuple[TableName, TableName]] = []
    while True:
        source = run.table_name()
        _skip_wait(parser)
        parser.expect("TO")
        pairs.append((source, run.table_name()))
        if not parser.accept(","):
            break
    _end(parser)
    named = list(dict.fromkeys(name for pair in pairs for name in pair))
    try:
        for source, target in pairs:
            missing = run.catalog.table(*source) is None and not run.catalog.is_unknown(*source)
            if not (if_exists and missing):  # MariaDB logs the rename of a table it did not have
                _rename(run, source, target)
    except UnknownTableError as exc:  # the statement is refused whole: name all its tables
        raise UnknownTableError(str(exc), exc.table, named) from exc
    except DdlError as exc:
        raise DdlError(str(exc), named) from exc


def _rename(run: _Run, source: TableName, target: TableName) -> None:
    before = run.catalog.table(*source)
    if before is None and run.catalog.is_unknown(*source):
        run.add(UnknownRenamed(*source, *target))
        return
    if before is None:
        raise UnknownTableError(
            f"RENAME of {source[0]}.{source[1]}, a table the schema history does not know",
            source,
            [source, target],
        )
    if target != source and (
        run.catalog.table(*target) is not None or run.catalog.is_unknown(*target)
    ):
        # the server never renames a table over another one; MariaDB logs the rename of a
        # TEMPORARY table (whose CREATE it does not log) like any other, and only that can
        # land on a name in use: which table it moved, and what stands under either name for
        # that session after it, cannot be told here
        raise DdlError(
            f"RENAME of {source[0]}.{source[1]} to {target[0]}.{target[1]}, a table that "
            "exists: the server renames a table only to a free name, so this renamed a "
            "temporary table (MariaDB logs that like any rename), which the schema history "
            "does not follow",
            [source, target],
        )
    run.add(TableRenamed(before, dataclasses.replace(before, schema=target[0], name=target[1])))


# -- ALTER TABLE -------------------------------------------------------------------------


@dataclass(slots=True)
class _Change:
    """CHANGE/MODIFY (``spec``) or RENAME COLUMN (``rename``) of one column."""

    spec: _ColumnSpec | None
    rename: str | None = None


@dataclass(slots=True)
class _Altering:
    """ALTER TABLE's clauses, gathered as they are read and applied at the end as the server
    applies them (``mysql_prepare_alter_table``): DROP, CHANGE, MODIFY, RENAME COLUMN and
    ALTER COLUMN name the table's columns as they were, and each stays where it was; then
    ADD and every clause with FIRST or AFTER place their columns in statement order, AFTER
    naming the columns as they are by then. The table's character set (its options,
    CONVERT TO) is the one every column takes that names none, wherever the option stands
    in the statement, and CONVERT TO takes every text column, new ones too."""

    before: Table
    charset: str | None
    collation: str | None
    next_id: int
    drops: set[str] = dataclasses.field(default_factory=set)  # folded names, as they were
    changes: dict[str, _Change] = dataclasses.field(default_factory=dict)  # folded old name
    alters: dict[str, list[Callable[[Column], Column]]] = dataclasses.field(default_factory=dict)
    # in statement order: ("add", name, spec, if not exists), ("place", old name, None,
    # False) for a CHANGE/MODIFY with FIRST/AFTER, ("modify", old name, None, False) for a
    # CHANGE/MODIFY of a column the statement adds (folded names)
    placed: list[tuple[str, str, _ColumnSpec | None, bool]] = dataclasses.field(
        default_factory=list
    )
    # the primary key as each clause that sets it (or drops it: []) leaves it, in order
    keys: list[list[str]] = dataclasses.field(default_factory=list)
    convert: tuple[str, str | None] | None = None
    added: set[str] = dataclasses.field(default_factory=set)  # folded names ADDed so far
    rename_to: TableName | None = None
    unrepresentable: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, table: Table, next_id: int) -> _Altering:
        return cls(table, table.charset, table.collation, next_id)

    def had(self, name: str) -> bool:
        """Whether the table had column ``name`` before the statement."""
        return any(c.name.casefold() == name.casefold() for c in self.before.columns)

    def has(self, name: str) -> bool:
        """Whether the statement can name column ``name``: the table had it, or a clause
        before added it."""
        return self.had(name) or name.casefold() in self.added

    def result(self, run: _Run, name: TableName) -> tuple[list[Column], list[str]]:
        """The columns and the primary key after the statement."""
        defaults = _Defaults(self.charset, self.collation)
        changes, alters = dict(self.changes), dict(self.alters)
        columns: list[Column] = []
        made: dict[str, Column] = {}  # folded old name -> a column FIRST/AFTER moves
        primary = list(self.before.primary_key)
        for column in self.before.columns:
            folded = column.name.casefold()
            if folded in self.drops:
                primary = [p for p in primary if p.casefold() != folded]
                continue
            change = changes.pop(folded, None)
            new = column
            if change is not None and change.spec is not None:
                new = _make_column(change.spec, column.id, defaults, run.traits)
                new = dataclasses.replace(new, fill=column.fill)
            elif change is not None and change.rename is not None:
                new = dataclasses.replace(column, name=change.rename)
            for alter in alters.pop(folded, []):
                new = alter(new)
            primary = [new.name if p.casefold() == folded else p for p in primary]
            if change is not None and change.spec is not None and change.spec.position:
                made[folded] = new  # where it was until its clause places it
            columns.append(new)
        for old in [*changes, *alters]:
            if not any(kind == "modify" and target == old for kind, target, _, _ in self.placed):
                raise DdlError(
                    f"column {old!r} is not in the schema history's {_qualified(name)}", [name]
                )
        for kind, target, added, if_not_exists in self.placed:
            if added is not None:  # ADD
                if _find(columns, added.name) is not None:
                    if if_not_exists:
                        continue
                    raise DdlError(f"column {added.name!r} exists already", [name])
                column = _make_column(added, self.next_id, defaults, run.traits)
                self.next_id += 1
                _place(columns, column, added.position, name)
            elif kind == "place":
                change = self.changes[target]
                assert change.spec is not None
                column = made[target]
                columns.pop(next(i for i, c in enumerate(columns) if c is column))
                _place(columns, column, change.spec.position, name)
            else:  # a CHANGE/MODIFY of a column added by this statement
                spec = self.changes[target].spec
                assert spec is not None
                i = _index(columns, target, name)
                current = columns.pop(i)
                column = dataclasses.replace(
                    _make_column(spec, current.id, defaults, run.traits), fill=current.fill
                )
                if spec.position is None:
                    columns.insert(i, column)
                else:
                    _place(columns, column, spec.position, name)
        for key in self.keys:  # PRIMARY KEY clauses and columns, in statement order
            primary = key
        if self.convert is not None:
            columns = [_converted(c, *self.convert) for c in columns]
        return columns, primary


def _qualified(name: TableName) -> str:
    return f"{name[0]}.{name[1]}"


def _find(columns: Sequence[Column], name: str) -> int | None:
    folded = name.casefold()
    return next((i for i, c in enumerate(columns) if c.name.casefold() == folded), None)


def _index(columns: Sequence[Column], name: str, table: TableName) -> int:
    found = _find(columns, name)
    if found is None:
        raise DdlError(
            f"column {name!r} is not in the schema history's {_qualified(table)}", [table]
        )
    return found


def _place(
    columns: list[Column],
    column: Column,
    position: tuple[str, str | None] | None,
    table: TableName,
) -> None:
    if position is None:
        columns.append(column)
    elif position[0] == "first":
        columns.insert(0, column)
    else:
        assert position[1] is not None
        columns.insert(_index(columns, position[1], table) + 1, column)


def _alter(run: _Run) -> None:
    parser = run.parser
    parser.accept_any("ONLINE", "OFFLINE")
    # MariaDB's ALTER IGNORE: a value that does not fit is changed, as outside strict mode
    ignore = parser.accept("IGNORE")
    strict = run.context.strict and not ignore
    if parser.accept_any("DATABASE", "SCHEMA"):
        _alter_database(run)
        return
    if not parser.accept("TABLE"):
        return  # views, routines, events, users, ...
    parser.accept("IF", "EXISTS")
    name = run.table_name()
    _skip_wait(parser)
    before = run.catalog.table(*name)
    if before is None and run.catalog.is_unknown(*name):
        _alter_unknown(run, name)
        return
    if before is None:
        raise UnknownTableError(
            f"ALTER TABLE of {name[0]}.{name[1]}, a table the schema history does not know",
            name,
            [name],
        )
    state = _Altering.of(before, run.catalog.next_column_id)
    try:
        while not parser.done():
            _alter_clause(run, state, name)
            # table options and partition clauses follow without a comma
            if not parser.accept(",") and not parser.done() and parser.kind_at() != WORD:
                raise parser.error("cannot read ALTER TABLE clause")
    except DdlError as exc:
        if exc.tables is None or not exc.tables:
            raise DdlError(str(exc), [name]) from exc
        raise
    if ignore and _adds_unique_key(parser.tokens):
        state.unrepresentable.append(
            "ALTER IGNORE with a unique or primary key (rows with a duplicate key are deleted)"
        )
    columns, primary = state.result(run, name)
    primary_key = _key_names(columns, primary, name)
    key = {c.casefold() for c in primary_key}
    table = dataclasses.replace(
        before,
        columns=tuple(
            dataclasses.replace(c, nullable=False) if c.name.casefold() in key else c
            for c in columns
        ),
        primary_key=primary_key,
        charset=state.charset,
        collation=state.collation,
    )
    _check_names(table)
    reasons = state.unrepresentable + _rewrites(before, table, strict)
    if reasons:
        run.add(Unrepresentable(before, "; ".join(reasons)))
    if table != before:
        run.add(TableAltered(before, table))
    if state.rename_to is not None and state.rename_to != name:
        _rename(run, name, state.rename_to)


def _adds_unique_key(tokens: Sequence[Tok]) -> bool:
    """The statement may add a UNIQUE or PRIMARY key (a key, a column attribute, a
    constraint): any ``UNIQUE``, or ``PRIMARY`` that ``DROP`` does not come before."""
    return any(
        tok.upper == "UNIQUE"
        or (tok.upper == "PRIMARY" and (i == 0 or tokens[i - 1].upper != "DROP"))
        for i, tok in enumerate(tokens)
    )


def _alter_unknown(run: _Run, name: TableName) -> None:
    """ALTER TABLE of a table whose columns are not known: the clauses cannot be applied to
    columns the history does not have, so the table stays unknown (its columns after this
    are learned from its next TABLE_MAP); only a rename of the table itself is followed."""
    parser = run.parser
    target: TableName | None = None
    while not parser.done():
        if parser.accept("RENAME"):
            if parser.accept_any("COLUMN", "INDEX", "KEY"):
                parser.skip_until(",")
            else:
                parser.accept_any("TO", "AS")
                target = run.table_name()
        else:
            parser.skip_until(",")
        parser.accept(",")
    if target is not None and target != name:
        run.add(UnknownRenamed(*name, *target))


# ALTER TABLE ... <word> PARTITION clauses that change no row
_PARTITION_MAINTENANCE = frozenset(
    {"COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR", "DISCARD"}
)


# ALTER TABLE clauses that change nothing the history holds (none starts another)
_NO_EFFECT = frozenset(
    {"FORCE", "ENABLE KEYS", "DISABLE KEYS", "WITH VALIDATION", "WITHOUT VALIDATION",
     "DISCARD TABLESPACE"}
)  # fmt: skip


def _alter_clause(run: _Run, state: _Altering, name: TableName) -> None:
    parser = run.parser
    if parser.accept("ADD"):
        _alter_add(run, state, name)
    elif parser.accept("CHANGE"):
        _alter_change(run, state, name, renames=True)
    elif parser.accept("MODIFY"):
        _alter_change(run, state, name, renames=False)
    elif parser.accept("DROP"):
        _alter_drop(run, state, name)
    elif parser.accept("RENAME"):
        _alter_rename(run, state, name)
    elif parser.accept("ALTER"):
        _alter_alter(run, state, name)
    elif parser.accept("CONVERT", "TO"):
        _convert(run, state, name)
    elif parser.at_any("ORDER BY", "REMOVE PARTITIONING", "PARTITION BY"):
        parser.skip_until(",")
    elif parser.accept_any("ALGORITHM", "LOCK"):
        parser.accept("=")
        parser.next()
    elif parser.accept_any(*_NO_EFFECT):
        pass
    elif parser.accept("IMPORT", "TABLESPACE"):
        state.unrepresentable.append("IMPORT TABLESPACE brings in rows the binlog does not show")
    elif parser.at_word({"TRUNCATE", "EXCHANGE"}, "PARTITION"):
        word = parser.next().upper
        parser.skip_until(",")
        state.unrepresentable.append(f"{word} PARTITION changes rows without logging them")
    elif parser.at_any("CONVERT PARTITION", "CONVERT TABLE"):
        raise parser.error("CONVERT PARTITION/TABLE moves rows without logging them", [name])
    elif parser.accept("IMPORT", "PARTITION"):
        reason = "IMPORT PARTITION TABLESPACE brings in rows the binlog does not show"
        state.unrepresentable.append(reason)
        parser.skip_until(",")
    elif parser.at_word(_PARTITION_MAINTENANCE, "PARTITION"):
        parser.skip_until(",")
    else:
        charset, collation = _table_options(parser, name, in_alter=True)
        if charset is not None or collation is not None:
            # a collation of no charset (MariaDB's uca1400_*) applies to the table's
            charset = charset or _collation_charset(collation or "") or state.charset
            state.charset, state.collation = _charset_alias(charset, run.traits), collation
        elif not parser.done() and not parser.at(","):
            raise parser.error("cannot read ALTER TABLE clause", [name])


def _alter_add(run: _Run, state: _Altering, name: TableName) -> None:
    parser = run.parser
    if parser.accept("PARTITION"):
        parser.skip_until(",")
        return
    if parser.at("SYSTEM", "VERSIONING"):
        raise parser.error("system-versioned tables are not supported", [name])
    column_word = parser.accept("COLUMN")
    if_not_exists = parser.accept("IF", "NOT", "EXISTS")
    if parser.accept("("):
        while True:
            _add_column(run, state, name, parser.name(), if_not_exists)
            if parser.accept(")"):
                return
            parser.expect(",")
    if not column_word and (parser.at_any("CONSTRAINT", "PRIMARY") or _is_key_definition(parser)):
        primary: list[str] = []
        _definition(parser, [], primary, in_alter=True)
        if primary:
            state.keys.append(primary)
        return
    _add_column(run, state, name, parser.name(), if_not_exists)


def _add_column(
    run: _Run, state: _Altering, name: TableName, column: str, if_not_exists: bool
) -> None:
    spec = _column_spec(run.parser, column, in_alter=True)
    state.placed.append(("add", column.casefold(), spec, if_not_exists))
    state.added.add(column.casefold())
    if spec.primary:
        state.keys.append([column])


def _alter_change(run: _Run, state: _Altering, name: TableName, *, renames: bool) -> None:
    """``CHANGE [COLUMN] [IF EXISTS] old new definition`` (``renames``), or
    ``MODIFY [COLUMN] [IF EXISTS] column definition``."""
    parser = run.parser
    parser.accept("COLUMN")
    skip = parser.accept("IF", "EXISTS") and not state.has(_peek_name(parser))
    old = parser.name()
    new = parser.name() if renames else old
    spec = _column_spec(parser, "?" if skip else new, in_alter=True)
    if skip:
        return
    _changed(state, old, _Change(spec), name)
    folded = old.casefold()
    if not state.had(old) and folded in state.added:
        state.placed.append(("modify", folded, None, False))
    elif spec.position is not None:
        state.placed.append(("place", folded, None, False))
    if spec.primary:
        state.keys.append([spec.name])


def _changed(state: _Altering, old: str, change: _Change, name: TableName) -> None:
    """Record a CHANGE, MODIFY or RENAME COLUMN of ``old``: one a column, as the server
    takes one (a second would name a column the first changed)."""
    folded = old.casefold()
    if folded in state.changes:
        raise DdlError(f"column {old!r} is changed twice in one ALTER TABLE", [name])
    if not state.has(old):
        raise DdlError(f"column {old!r} is not in the schema history's {_qualified(name)}", [name])
    state.changes[folded] = change


def _peek_name(parser: _Parser) -> str:
    tok = parser.peek()
    return "" if tok is None else tok.text


def _alter_rename(run: _Run, state: _Altering, name: TableName) -> None:
    parser = run.parser
    if parser.accept("COLUMN"):
        old = parser.name()
        parser.expect("TO")
        new = parser.name()
        if not state.had(old):  # a column this statement adds is named as it is added
            raise DdlError(
                f"column {old!r} is not in the schema history's {_qualified(name)}", [name]
            )
        _changed(state, old, _Change(None, rename=new), name)
    elif parser.accept_any("INDEX", "KEY"):
        parser.name()
        parser.expect("TO")
        parser.name()
    else:
        parser.accept_any("TO", "AS")
        state.rename_to = run.table_name()


# DROP <word> name (DROP INDEX i, DROP FOREIGN KEY f, ...); a column may have such a name
_DROP_KEYS = frozenset({"INDEX", "KEY", "FOREIGN", "CHECK", "CONSTRAINT", "PERIOD"})


def _alter_drop(run: _Run, state: _Altering, name: TableName) -> None:
    parser = run.parser
    if parser.accept("PRIMARY", "KEY"):
        state.keys.append([])
        return
    if parser.accept("PARTITION"):
        parser.skip_until(",")
        state.unrepresentable.append("DROP PARTITION deletes rows without logging them")
        return
    if parser.at("SYSTEM", "VERSIONING"):
        raise parser.error("system-versioned tables are not supported", [name])
    if parser.at_word(_DROP_KEYS) and parser.kind_at(1) not in (PUNCT, None):
        word = parser.next().upper
        parser.accept("KEY")
        parser.accept("IF", "EXISTS")
        parser.accept("FOR")  # PERIOD FOR
        if parser.name().upper() == "PRIMARY" and word in ("INDEX", "KEY", "CONSTRAINT"):
            state.keys.append([])  # the primary key, by its index name
        return
    parser.accept("COLUMN")
    if_exists = parser.accept("IF", "EXISTS")
    column = parser.name()
    parser.accept_any("RESTRICT", "CASCADE")
    if if_exists and not state.had(column):
        return
    if not state.had(column):  # the server drops what the table had, nothing added
        raise DdlError(
            f"column {column!r} is not in the schema history's {_qualified(name)}", [name]
        )
    state.drops.add(column.casefold())


def _alter_alter(run: _Run, state: _Altering, name: TableName) -> None:
    parser = run.parser
    if parser.accept_any("INDEX", "KEY"):
        parser.name()
        parser.accept_any("VISIBLE", "INVISIBLE", "IGNORED", "NOT IGNORED")
        return
    if parser.accept_any("CHECK", "CONSTRAINT"):
        parser.name()
        parser.accept("NOT")
        parser.accept("ENFORCED")
        return
    parser.accept("COLUMN")
    parser.accept("IF", "EXISTS")
    column = parser.name()
    change: Callable[[Column], Column]
    if parser.accept("SET", "DEFAULT"):
        change = functools.partial(dataclasses.replace, default=_default(parser))
    elif parser.accept("DROP", "DEFAULT"):
        change = functools.partial(dataclasses.replace, default=NO_DEFAULT)
    elif parser.accept("SET", "VISIBLE"):
        change = functools.partial(dataclasses.replace, invisible=False)
    elif parser.accept("SET", "INVISIBLE"):
        change = functools.partial(dataclasses.replace, invisible=True)
    else:
        raise parser.error("cannot read ALTER COLUMN", [name])
    state.alters.setdefault(column.casefold(), []).append(change)


def _convert(run: _Run, state: _Altering, name: TableName) -> None:
    """CONVERT TO CHARACTER SET: every text column takes it; a TEXT column grows to the type
    that holds as many characters in the new set."""
    parser = run.parser
    if not parser.accept_any(*_CHARSET):
        raise parser.error("expected CHARACTER SET")
    charset = _charset_name(parser)
    collation = _charset_name(parser) if parser.accept("COLLATE") else None
    if charset == "default":
        charset = run.database_defaults(name[0], name).charset or "utf8mb4"
    charset = _charset_alias(charset, run.traits) or charset
    state.charset, state.collation = charset, collation
    state.convert = (charset, collation)  # applied last: to the columns this statement adds


def _converted(column: Column, charset: str, collation: str | None) -> Column:
    """``column`` after CONVERT TO CHARACTER SET ``charset``."""
    if column.data_type not in TEXT_TYPES or column.charset == "binary":
        return column
    data_type = column.data_type
    if data_type.endswith("text"):
        from .ddl_tree import sized  # noqa: PLC0415 - see the imports

        chars = _TEXT_SIZE[data_type] // _MAXLEN.get(column.charset or "", 1)
        data_type = sized("text", chars * _MAXLEN.get(charset, 1))
    return dataclasses.replace(
        column,
        data_type=data_type,
        column_type=data_type if data_type.endswith("text") else column.column_type,
        charset=charset,
        collation=collation,
    )


# words ALTER DATABASE's options start with (anything else there is the database's name)
_DATABASE_OPTIONS = frozenset(
    {"DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "CHAR", "READ", "ENCRYPTION", "COMMENT",
     "UPGRADE"}
)  # fmt: skip


def _alter_database(run: _Run) -> None:
    parser = run.parser
    name = run.context.default_db
    if parser.is_name() and not parser.at_word(_DATABASE_OPTIONS):
        name = parser.name()
    if parser.accept("UPGRADE"):
        return
    if name is None:
        raise DdlError("ALTER DATABASE without a database and no database selected", None)
    name = run.database_name(name)
    charset, collation = _database_options(parser)
    if charset is None and collation is None:
        return
    before = run.catalog.databases.get(name, Database(name))
    if charset is None and collation is not None:
        charset = _collation_charset(collation)
    after = Database(name, _charset_alias(charset, run.traits), collation)
    # an effect even when the catalog already shows this charset: a catalog read later than
    # the statement (a seed being fitted to an earlier start) must learn that it changed here
    run.add(DatabaseAltered(before, after))


# -- what an ALTER does to stored values ------------------------------------------------


def _int_range(column: Column) -> tuple[int, int]:
    bits = _INT_BITS[column.data_type]
    if column.unsigned:
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


_TEXT_FAMILY = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BYTES_FAMILY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
# the facts that decide how a value is stored (not the collation, default or nullability)
_STORED_AS = operator.attrgetter(
    "data_type", "unsigned", "length", "precision", "scale", "fsp", "charset", "labels"
)


def _capacity(column: Column) -> int:
    """Characters (text) or bytes a column holds."""
    size = _TEXT_SIZE.get(column.data_type)
    if size is None:
        return column.length or 0
    if column.data_type in _BYTES_FAMILY:
        return size
    return size // _MAXLEN.get(column.charset or "", 1)


# COLUMN_TYPE of FLOAT(M,D)/DOUBLE(M,D), as information_schema prints it and ``_column_type``
# writes it: the seed and the statements agree on it (Column.precision and scale are DECIMAL's)
_FLOAT_DIGITS = re.compile(r"(?:float|double)\((\d+),(\d+)\)")
_FLOAT_WIDENINGS = frozenset({("float", "float"), ("double", "double"), ("float", "double")})


def _float_digits(column: Column) -> tuple[int, int] | None:
    """M and D of a FLOAT(M,D) or DOUBLE(M,D) column (None: FLOAT or DOUBLE without them)."""
    found = _FLOAT_DIGITS.match(column.column_type)
    return None if found is None else (int(found[1]), int(found[2]))


def _same_labels(old: Column, new: Column, strict: bool) -> str | None:
    """Why ENUM/SET values may read otherwise after the labels changed (None: they do not).
    A stored value is its label's number: the server takes, for each, the new label equal to
    the old one under the column's collation ('a' becomes 'A' in a case-insensitive one), or
    else the empty string (outside strict mode) or an error (strict). So outside strict mode
    a removed label is a rewrite; in strict mode a removed label fails the statement where a
    row holds it, and changes nothing where none does, unless a label the statement adds (or
    a changed collation) could equal it: then stored values may take the new spelling. A
    binary collation makes equal mean the same bytes."""
    missing = [x for x in old.labels or () if x not in (new.labels or ())]
    if missing and not strict:
        return "labels removed outside strict mode"
    exact = new.charset == "binary" or (new.collation or "").endswith("_bin")
    recollated = (old.charset, old.collation) != (new.charset, new.collation)
    gone = {x.casefold().rstrip(" ") for x in missing}
    # a label that could equal a removed one: ASCII ones by case and trailing spaces (what a
    # case-insensitive collation ignores), any other conservatively
    alike = [
        x
        for x in new.labels or ()
        if x not in (old.labels or ()) and (not x.isascii() or x.casefold().rstrip(" ") in gone)
    ]
    if missing and not exact and (alike or recollated):
        shown = ", ".join(_quote_label(x) for x in missing)
        return (
            f"labels {shown} not kept as spelled (the server gives stored values the new "
            "label equal under the column's collation)"
        )
    return None


def _keeps_values(old: Column, new: Column, strict: bool) -> str | None:
    """None when every value ``old`` can hold is stored unchanged as ``new``; else why not.
    ``strict``: a value that does not fit fails the statement (so none was changed)."""
    if old.nullable and not new.nullable and not strict:
        return "made NOT NULL outside strict mode (NULLs became the type's default)"
    if _STORED_AS(old) == _STORED_AS(new) and _float_digits(old) == _float_digits(new):
        return None
    a, b = old.data_type, new.data_type
    if a in _INT_BITS and b in _INT_BITS:
        (lo, hi), (lo2, hi2) = _int_range(old), _int_range(new)
        return None if (lo2 <= lo and hi <= hi2) or strict else "integer range narrowed"
    numbers = (a, b) in _FLOAT_WIDENINGS or a == b == "decimal"
    if numbers and new.unsigned and not old.unsigned and not strict:
        return "made UNSIGNED outside strict mode (negative values became 0)"
    if a == b == "decimal":
        assert old.precision is not None and old.scale is not None
        assert new.precision is not None and new.scale is not None
        if new.scale < old.scale:
            return "decimal scale reduced (values rounded)"
        wider = new.precision - new.scale >= old.precision - old.scale
        return None if wider or strict else "decimal range narrowed"
    if (a, b) in _FLOAT_WIDENINGS:
        # (M,D) rounds values to D decimals and bounds them to M-D digits before the point
        # when the server copies the table (whether it does is not logged)
        was, now = _float_digits(old), _float_digits(new)
        if now is None:
            return None
        if was is None or now[1] < was[1]:
            return f"floating-point values rounded to {now[1]} decimals ({new.column_type})"
        wider = now[0] - now[1] >= was[0] - was[1]
        return None if wider or strict else "floating-point range narrowed outside strict mode"
    if a in _TEXT_FAMILY and b in _TEXT_FAMILY:
        if b == "char" and a != "char":  # any sql_mode (but PAD_CHAR_TO_FULL_LENGTH)
            return "became CHAR (trailing spaces of stored values are dropped)"
        charset_ok = (
            old.charset == new.charset
            or new.charset in _WIDE
            or (new.charset in ("utf8mb3", "utf8", "ucs2") and old.charset not in _WIDE)
        )
        if not charset_ok and not strict:
            return f"character set {old.charset} -> {new.charset} outside strict mode"
        if _capacity(new) < _capacity(old) and not strict:
            return "length reduced outside strict mode (values truncated)"
        return None  # CHAR -> VARCHAR too: CHAR values are logged without trailing spaces
    if a in _BYTES_FAMILY and b in _BYTES_FAMILY:
        if a == "binary" and b == "binary" and new.length != old.length:
            return "BINARY length changed (the zero padding of stored values changed)"
        if b == "binary" and a != "binary":
            return "became BINARY (values are padded with zero bytes)"
        return None if _capacity(new) >= _capacity(old) or strict else "length reduced"
    if a == b and a in ("enum", "set"):
        why = _same_labels(old, new, strict)
        if why is not None:
            return why
        wide = old.charset == new.charset or new.charset in _WIDE
        return None if wide or strict else "labels' character set narrowed outside strict mode"
    if a == b and a in ("time", "datetime", "timestamp"):
        rounded = (new.fsp or 0) < (old.fsp or 0)
        return "fractional seconds reduced (values rounded)" if rounded else None
    if a == b == "bit":
        return None if (new.length or 0) >= (old.length or 0) or strict else "BIT width reduced"
    if a == b:
        return None  # year, date, json, geometry, uuid, inet, vector: same values
    return f"type changed from {old.column_type} to {new.column_type}"


def _rewrites(before: Table, after: Table, strict: bool) -> list[str]:
    """Why an ALTER rewrote stored values the binlog does not show (none: it did not).
    ``strict``: a value that does not fit fails the statement (see ``_keeps_values``)."""
    old = {c.id: c for c in before.columns}
    reasons = []
    for column in after.columns:
        previous = old.get(column.id)
        if previous is None:
            continue
        why = _keeps_values(previous, column, strict)
        if why is not None:
            reasons.append(f"column {column.name!r}: {why}")
    return reasons


# -- statement-logged DML ---------------------------------------------------------------


def dml_tables(
    statement: str, context: Context, traits: ServerTraits | None = None
) -> list[TableName] | None:
    """The tables a DML statement writes ([] when it is not DML that writes tables; None when
    it is DML whose tables cannot be told)."""
    traits = traits or ServerTraits()
    try:
        tokens = tokenize(statement, context, traits)
    except DdlError:
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        return None if head in _DML_WORDS else []
    parser = _Parser(tokens, unwrap_versioned(statement, traits))
    if parser.accept("WITH"):
        parser.accept("RECURSIVE")
        while True:
            parser.name()
            if parser.at("("):
                parser.skip_group()
            parser.expect("AS")
            parser.skip_group()
            if not parser.accept(","):
                break
    if not parser.at_word(_DML_WORDS):
        return []
    word = parser.next().upper
    try:
        if word in ("INSERT", "REPLACE"):
            while parser.accept_any("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"):
                pass
            parser.accept("INTO")
            return [parser.qualified(context)]
        if word == "LOAD":
            parser.skip_until("INTO")
            parser.expect("INTO", "TABLE")
            return [parser.qualified(context)]
        if word == "UPDATE":
            while parser.accept_any("LOW_PRIORITY", "IGNORE"):
                pass
            return _references(parser, context, ("SET",))
        if word == "DELETE":
            while parser.accept_any("LOW_PRIORITY", "QUICK", "IGNORE"):
                pass
            found: list[TableName] = []
            if not parser.at("FROM"):  # DELETE t1, t2 FROM ...
                found += _references(parser, context, ("FROM",))
            parser.expect("FROM")
            stops = ("WHERE", "USING", "ORDER", "LIMIT", "PARTITION", "RETURNING")
            found += _references(parser, context, stops)
            if parser.accept("USING"):
                found += _references(parser, context, ("WHERE", "ORDER", "LIMIT"))
            return found
    except DdlError:
        return None
    return None  # CALL, DO, SELECT: a routine or function wrote something


_DML_WORDS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "CALL", "DO", "SELECT"})
_JOINS = frozenset({"JOIN", "STRAIGHT_JOIN"})
# where the condition of ON ends
_ON_ENDS = (",", "JOIN", "STRAIGHT_JOIN", "LEFT", "RIGHT", "INNER", "CROSS", "NATURAL")


def _references(parser: _Parser, context: Context, stops: tuple[str, ...]) -> list[TableName]:
    """Every table named in a table-reference list up to one of ``stops`` (a superset of what
    the statement writes: aliases and read-only tables are included; a derived table makes it
    untellable)."""
    found: list[TableName] = []
    expect_table = True
    while not parser.done() and not parser.at_any(*stops):
        if expect_table:
            if parser.at("("):
                raise DdlError("derived table", None)
            name = parser.qualified(context)
            if parser.accept("."):  # alias.* in DELETE t.* FROM
                parser.next()
            found.append(name)
            expect_table = False
        elif parser.at(",") or parser.at_word(_JOINS):
            parser.i += 1
            expect_table = True
        elif parser.at("("):
            parser.skip_group()
        elif parser.accept("ON"):
            parser.skip_until(*stops, *_ON_ENDS)
        else:
            parser.i += 1
    return found
