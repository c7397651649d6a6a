"""Server character sets and collations mapped to Python codecs.

TABLE_MAP optional metadata (``DEFAULT_CHARSET`` / ``COLUMN_CHARSET``, mysql-server
``libbinlogevents/src/rows_event.cpp``, MariaDB ``sql/log_event_server.cc``) names a column's
collation by numeric id; information_schema names its character set. Both are turned into the
Python codec that decodes the column's bytes.

The id table is the union of MariaDB 10.11 (``information_schema.COLLATION_CHARACTER_SET_
APPLICABILITY`` read from a live server) and MySQL 8.0/8.4 (``information_schema.COLLATIONS``;
ids 76, 248-250 and 255-323 exist only there). The two servers agree on every shared id.
MariaDB's UCA-14.0.0 collations live in whole 256-id pages per character set (``MY_PAGE2_*`` in
MariaDB ``include/m_ctype.h``: 0x800 utf8mb3, 0x900 utf8mb4, 0xA00 ucs2, 0xB00 utf16,
0xC00 utf32); each page is mapped as a whole so collations added later still resolve.

Codec choices: MySQL ``latin1`` is Windows-1252 with the five bytes cp1252 leaves undefined
(0x81 0x8D 0x8F 0x90 0x9D) mapped to the C1 controls of the same value (``strings/
ctype-latin1.cc``, checked against a live server); ``text_decoder("cp1252")`` applies exactly
that table. ``ucs2`` and ``utf16`` are big-endian, ``utf32`` is big-endian UTF-32. Legacy
8-bit sets with no Python codec (dec8, swe7, keybcs2, armscii8, geostd8) map to ``None``:
callers keep their bytes rather than guess. A few old tables (greek, hebrew, cp866, koi8u,
cp1256, tis620) differ from Python's codec in one to nine rarely used positions.
"""

from __future__ import annotations

import codecs
from bisect import bisect_right
from collections.abc import Callable

__all__ = [
    "BINARY",
    "KNOWN_CHARSETS",
    "MYSQL_LATIN1_TABLE",
    "charset_for_collation",
    "codec_for_charset",
    "codec_for_collation",
    "text_decoder",
]

BINARY = "binary"

# charset -> collation ids ("a-b" is an inclusive range).
_COLLATION_IDS: dict[str, str] = {
    "big5": "1 84 1025 1108",
    "latin2": "2 9 21 27 77 1033 1101",
    "dec8": "3 69 1027 1093",
    "cp850": "4 80 1028 1104",
    "latin1": "5 8 15 31 47-49 94 1032 1071",
    "hp8": "6 72 1030 1096",
    "koi8r": "7 74 1031 1098",
    "swe7": "10 82 1034 1106",
    "ascii": "11 65 1035 1089",
    "ujis": "12 91 1036 1115",
    "sjis": "13 88 1037 1112",
    "cp1251": "14 23 50-52 1074-1075",
    "hebrew": "16 71 1040 1095",
    "tis620": "18 89 1042 1113",
    "euckr": "19 85 1043 1109",
    "latin7": "20 41-42 79 1065 1103",
    "koi8u": "22 75 1046 1099",
    "gb2312": "24 86 1048 1110",
    "greek": "25 70 1049 1094",
    "cp1250": "26 34 44 66 99 1050 1090",
    "gbk": "28 87 1052 1111",
    "cp1257": "29 58-59 1082-1083",
    "latin5": "30 78 1054 1102",
    "armscii8": "32 64 1056 1088",
    "utf8mb3": "33 76 83 192-215 223 576-578 1057 1107 1216 1238 2048-2303",
    "ucs2": "35 90 128-151 159 640-642 1059 1114 1152 1174 2560-2815",
    "cp866": "36 68 1060 1092",
    "keybcs2": "37 73 1061 1097",
    "macce": "38 43 1062 1067",
    "macroman": "39 53 1063 1077",
    "cp852": "40 81 1064 1105",
    "utf8mb4": "45-46 224-247 255-323 608-610 1069-1070 1248 1270 2304-2559",
    "utf16": "54-55 101-124 672-674 1078-1079 1125 1147 2816-3071",
    "utf16le": "56 62 1080 1086",
    "cp1256": "57 67 1081 1091",
    "utf32": "60-61 160-183 736-738 1084-1085 1184 1206 3072-3327",
    "binary": "63",
    "geostd8": "92-93 1116-1117",
    "cp932": "95-96 1119-1120",
    "eucjpms": "97-98 1121-1122",
    "gb18030": "248-250",
}

# server charset -> Python codec (None: no faithful Python codec; keep bytes).
_CODECS: dict[str, str | None] = {
    "armscii8": None,
    "ascii": "ascii",
    "big5": "big5",
    "binary": BINARY,
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "cp932": "cp932",
    "dec8": None,
    "eucjpms": "euc_jp",  # closest Python codec to eucJP-ms
    "euckr": "euc_kr",
    "gb18030": "gb18030",
    "gb2312": "gb2312",
    "gbk": "gbk",
    "geostd8": None,
    "greek": "iso8859-7",
    "hebrew": "iso8859-8",
    "hp8": "hp-roman8",  # identical to the server's hp8 table for all 256 bytes
    "keybcs2": None,
    "koi8r": "koi8-r",
    "koi8u": "koi8-u",
    "latin1": "cp1252",  # MySQL latin1 = cp1252 (+5 C1 controls, see text_decoder)
    "latin2": "iso8859-2",
    "latin5": "iso8859-9",
    "latin7": "iso8859-13",
    "macce": "mac-latin2",
    "macroman": "mac-roman",
    "sjis": "shift_jis",
    "swe7": None,
    "tis620": "tis-620",
    "ucs2": "utf-16-be",
    "ujis": "euc_jp",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "utf8": "utf-8",  # MySQL 5.7 name of utf8mb3
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
}


def _ranges() -> tuple[tuple[int, ...], tuple[tuple[int, str], ...]]:
    spans: list[tuple[int, int, str]] = []
    for charset, ids in _COLLATION_IDS.items():
        for part in ids.split():
            first, _, last = part.partition("-")
            spans.append((int(first), int(last or first), charset))
    spans.sort()
    return tuple(first for first, _, _ in spans), tuple((last, cs) for _, last, cs in spans)


_STARTS, _ENDS = _ranges()


def charset_for_collation(collation_id: int) -> str | None:
    """Server character set name of a collation id, or None if the id is unknown."""
    index = bisect_right(_STARTS, collation_id) - 1
    if index < 0:
        return None
    last, charset = _ENDS[index]
    return charset if collation_id <= last else None


KNOWN_CHARSETS = frozenset(_CODECS)  # every server character set name


def codec_for_charset(charset_name: str) -> str | None:
    """Python codec for a server character set name ("utf8mb4", "latin1", "binary", ...).

    Returns "binary" for the binary set and None when the set is unknown or has no faithful
    Python codec.
    """
    return _CODECS.get(charset_name.lower())


def codec_for_collation(collation_id: int) -> str | None:
    """Python codec for a collation id from TABLE_MAP metadata (see ``codec_for_charset``)."""
    charset = charset_for_collation(collation_id)
    return None if charset is None else _CODECS[charset]


def _mysql_latin1_table() -> str:
    table = bytes(range(256)).decode("latin-1")
    high = bytes(range(0x80, 0xA0)).decode("cp1252", errors="replace")
    chars = list(table)
    for offset, char in enumerate(high):
        if char != "\ufffd":
            chars[0x80 + offset] = char
    return "".join(chars)


MYSQL_LATIN1_TABLE = _mysql_latin1_table()
"""Byte -> character table of MySQL/MariaDB ``latin1`` (cp1252 with 0x81 0x8D 0x8F 0x90 0x9D
as the C1 controls U+0081 ...)."""


def decode_mysql_latin1(data: bytes) -> str:
    """MySQL ``latin1`` text (see the module doc)."""
    if data.isascii():  # the usual case: ASCII is the same in every table, and C-fast
        return data.decode("ascii")
    return codecs.charmap_decode(data, "strict", MYSQL_LATIN1_TABLE)[0]


def text_decoder(codec: str) -> Callable[[bytes], str]:
    """The fastest strict ``bytes -> str`` function for a codec name from this module.

    Raises ``LookupError`` for an unknown codec. Decoding errors raise ``UnicodeDecodeError``.
    """
    name = codecs.lookup(codec).name
    if name == "utf-8":
        return bytes.decode  # utf-8 is the default: a C call with no codec lookup
    if name == "cp1252":
        return decode_mysql_latin1
    decode = codecs.getdecoder(name)

    def decode_text(data: bytes) -> str:
        return decode(data)[0]

    return decode_text
