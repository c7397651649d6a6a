"""What the replication stream hands its consumer: one type, ``StreamItem``.

``ReplicaStream`` (``source.stream``) yields, in binlog order:

* ``Transaction`` — a whole transaction, its rows events decoded (``binlog.transaction``);
* ``TransactionRun`` — whole transactions of rows, many at a time, the last one a
  ``Transaction`` (``binlog.runs``; only from a stream made with ``runs=True``);
* ``TransactionPart`` — a piece of a transaction too large to hold whole, handed on as it
  is read; the transaction's last piece carries its ending;
* ``TransactionAborted`` — a transaction whose parts were handed out already will not end
  here: the connection broke inside it (the whole transaction comes again), or the next
  group or a restarted server's first event came before its end (it never committed); the
  consumer drops the parts;
* ``GtidStateLearned`` — the GTID state at a position, learnt for a stream that started
  without one;
* any other ``binlog.events.Event`` outside a transaction (heartbeats, rotates, format
  descriptions, DDL a consumer only observes).

The pipeline (``pipeline.Pipeline.handle``), the service's loop and the snapshot runner take
a ``StreamItem`` and tell the cases apart by their class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from ..binlog import events as ev
from ..binlog.position import StreamPosition
from ..binlog.runs import TransactionRun
from ..binlog.transaction import Transaction, TransactionPart

__all__ = ["GtidStateLearned", "StreamItem", "TransactionAborted"]


@dataclass(frozen=True, slots=True)
class TransactionAborted:
    """A transaction whose parts were already handed out will not end here: drop them. The
    connection broke inside it (the whole transaction comes again after the reconnect), or
    its group was cut off before its end (the next group or a restarted server's first event
    came first: it never committed)."""

    gtid: str | None


@dataclass(frozen=True, slots=True)
class GtidStateLearned:
    """The GTID state at ``position`` (after the last transaction handed over), learnt for a
    stream that started without one: a consumer at the same file and position takes it."""

    position: StreamPosition


StreamItem: TypeAlias = (
    Transaction
    | TransactionRun
    | TransactionPart
    | TransactionAborted
    | GtidStateLearned
    | ev.Event
)
