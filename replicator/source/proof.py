"""The proof of a landed transaction that a manifest records (``"source"``), and its digest.

``source.continuity`` says why a landing zone records one and how start-up checks it. This
module is pure (no I/O): the pipeline builds a ``Proof`` of the last transaction of each batch
at commit time, ``continuity`` builds one of the transaction it reads back from the server,
and the two are compared.

The digest is a SHA-256 over what identifies a transaction's content on any host serving the
same history: its GTID, then for each rows event the table's ``db.name``, the kind (insert,
update, delete) and the row images as the server wrote them (``binlog.parser.row_image_bytes``:
after the table id and flags, which differ between servers; uncompressed), and for each
statement (DDL, XA outcomes) its text. Control events (BEGIN, XID, annotations, table maps) are
left out: they carry per-host numbers (XIDs, table ids).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..binlog import events as ev
from ..binlog.parser import row_image_bytes
from ..binlog.position import StreamPosition
from ..binlog.transaction import Transaction
from ..checkpoint import position_from_json, position_to_json
from ..landed.manifests import PROOF_KEY  # the manifest field (its shape is checked there)

__all__ = ["PROOF_KEY", "Digest", "Proof"]

_FORMAT = b"replicator source proof 1\n"
_CONTROL_STATEMENTS = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})


class Digest:
    """The content hash of one transaction, fed its events in order (a large transaction's
    parts one after the other, then its end)."""

    __slots__ = ("_hash", "events")

    def __init__(self, gtid: str | None) -> None:
        self._hash = hashlib.sha256(_FORMAT)
        self._hash.update(b"gtid %s\n" % (gtid or "-").encode())
        self.events = 0  # events hashed

    def add(self, events: Iterable[ev.Event]) -> None:
        update = self._hash.update
        for event in events:
            if isinstance(event, ev.RowsEvent):
                table = f"{event.table.schema}.{event.table.table}"
                self.add_rows(event.kind.value, table, row_image_bytes(event))
            elif isinstance(event, ev.QueryEvent):
                text = event.query.strip()
                if text.upper() in _CONTROL_STATEMENTS:
                    continue
                raw = text.encode("utf-8", "surrogatepass")
                update(b"statement %d\n" % len(raw))
                update(raw)
                self.events += 1

    def add_rows(self, kind: str, table: str, images: bytes | memoryview | None) -> None:
        """One rows event: its kind (``c``, ``u``, ``d``), ``db.table`` and row images as the
        server wrote them (None: not known)."""
        size = -1 if images is None else len(images)
        self._hash.update(b"rows %s %s %d\n" % (kind.encode(), table.encode(), size))
        if images is not None:
            self._hash.update(images)
        self.events += 1

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True, slots=True)
class Proof:
    """What a manifest records of the last transaction it lands."""

    gtid: str | None  # None: a server without GTIDs (or an anonymous transaction)
    before: StreamPosition | None  # the stream position just before the transaction
    digest: str
    events: int

    @classmethod
    def of(
        cls, transaction: Transaction, before: StreamPosition | None, parts: Digest | None
    ) -> Proof:
        """The proof of ``transaction`` (``parts``: the digest its parts were fed to)."""
        digest = parts if parts is not None else Digest(transaction.gtid)
        digest.add(transaction.events)
        return cls(transaction.gtid, before, digest.hexdigest(), digest.events)

    def to_json(self) -> dict[str, Any]:
        return {
            "gtid": self.gtid,
            "before": None if self.before is None else position_to_json(self.before),
            "digest": self.digest,
            "events": self.events,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Proof:
        before = data.get("before")
        return cls(
            gtid=data.get("gtid"),
            before=None if before is None else position_from_json(before, where),
            digest=str(data["digest"]),
            events=int(data["events"]),
        )
