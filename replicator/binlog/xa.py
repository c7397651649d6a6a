"""XA transaction ids: what ties an XA PREPARE to its XA COMMIT or XA ROLLBACK.

A prepared XA transaction is logged at ``XA PREPARE`` with its rows; its outcome comes later,
possibly after other transactions or a server restart, as a QUERY of its own. The prepared part
ends with an XA_PREPARE event carrying the id as (formatID, gtrid, bqual) (mysql-server
``libs/mysql/binlog/event/control_events.h`` XA_prepare_event; MariaDB ``sql/log_event.h``
XA_prepare_log_event). The outcome QUERY names the same id in the form the server serializes it
(mysql-server ``sql/xa.cc`` ``serialize_xid``; MariaDB ``sql/xa.cc``):

    XA COMMIT X'616263',X'7131',7
    XA ROLLBACK X'7262',X'',1

Hand-typed forms (``'abc'``, ``0x616263``, an omitted bqual or formatID) are read too, in case a
server logs the statement as written. ``XA COMMIT ... ONE PHASE`` never reaches this module as an
outcome: MariaDB logs it as an ordinary transaction, MySQL as an XA_PREPARE event with
``one_phase`` set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import events as ev
from .errors import DecodeError
from .transaction import Ending, Transaction

__all__ = ["XaId", "outcome_xa_id", "parse_xid", "xa_id_of"]

_OUTCOME = re.compile(r"\s*XA\s+(COMMIT|ROLLBACK)\s+(?P<rest>.*?)\s*;?\s*\Z", re.I | re.S)
_ONE_PHASE = re.compile(r"\s+ONE\s+PHASE\s*\Z", re.I)
# one xid part: X'hex', 0xhex, or a quoted string ('' and backslash escapes)
_PART = re.compile(
    r"""\s*(?:[xX]'(?P<hex>[0-9a-fA-F]*)'|0x(?P<hex0>[0-9a-fA-F]+)"""
    r"""|'(?P<sq>(?:[^'\\]|\\.|'')*)'|"(?P<dq>(?:[^"\\]|\\.|"")*)")\s*"""
)
_NUMBER = re.compile(r"\s*(?P<n>-?\d+)\s*")


@dataclass(frozen=True, slots=True)
class XaId:
    format_id: int
    gtrid: bytes
    bqual: bytes

    @classmethod
    def of_prepare(cls, event: ev.XaPrepareEvent) -> XaId:
        return cls(event.format_id, event.gtrid, event.bqual)

    @property
    def key(self) -> str:
        """A stable text form, safe as a file name: ``<formatID>-<gtrid hex>-<bqual hex>``."""
        return f"{self.format_id}-{self.gtrid.hex()}-{self.bqual.hex()}"

    def __str__(self) -> str:
        return f"X'{self.gtrid.hex()}',X'{self.bqual.hex()}',{self.format_id}"


def _unquote(text: str, quote: str) -> bytes:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        elif char == quote and text[i + 1 : i + 2] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out).encode()


def _part(match: re.Match[str]) -> bytes:
    if match["hex"] is not None:
        return bytes.fromhex(match["hex"])
    if match["hex0"] is not None:
        hex_digits = match["hex0"]
        return bytes.fromhex(hex_digits if len(hex_digits) % 2 == 0 else "0" + hex_digits)
    if match["sq"] is not None:
        return _unquote(match["sq"], "'")
    return _unquote(match["dq"], '"')


def parse_xid(text: str) -> XaId:
    """The id in ``gtrid[, bqual[, formatID]]`` form; raises DecodeError when it is not one."""
    text = _ONE_PHASE.sub("", text)
    parts: list[bytes] = []
    pos = 0
    format_id = 1
    while True:
        if len(parts) == 2:  # after gtrid and bqual, only the formatID may follow
            number = _NUMBER.fullmatch(text, pos)
            if number is None:
                raise DecodeError(f"not an XA transaction id: {text!r}")
            format_id = int(number["n"])
            break
        match = _PART.match(text, pos)
        if match is None:
            raise DecodeError(f"not an XA transaction id: {text!r}")
        parts.append(_part(match))
        pos = match.end()
        if pos == len(text):
            break
        if text[pos] != ",":
            raise DecodeError(f"not an XA transaction id: {text!r}")
        pos += 1
    return XaId(format_id, parts[0], parts[1] if len(parts) > 1 else b"")


def outcome_xa_id(query: str) -> tuple[str, XaId] | None:
    """``("COMMIT"|"ROLLBACK", id)`` for an XA outcome statement, else None."""
    match = _OUTCOME.match(query)
    if match is None:
        return None
    return match[1].upper(), parse_xid(match["rest"])


def xa_id_of(transaction: Transaction) -> XaId | None:
    """The XA id of a prepared part (``xa_prepare``) or an outcome (``xa_commit``,
    ``xa_rollback``); None for any other transaction."""
    for event in reversed(transaction.events):
        if transaction.ending is Ending.XA_PREPARE and isinstance(event, ev.XaPrepareEvent):
            return XaId.of_prepare(event)
        if transaction.ending in (Ending.XA_COMMIT, Ending.XA_ROLLBACK) and isinstance(
            event, ev.QueryEvent
        ):
            found = outcome_xa_id(event.query)
            if found is not None:
                return found[1]
    return None
