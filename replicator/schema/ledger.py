"""The one owner of a run's schema history: what was taken, what landed, what was written.

A run of the daemon keeps one schema history (``schema.history``): the landing zone's, fitted
to the stream's start, or a new one seeded from the source. ``SchemaLedger`` holds it with
the two marks the commit protocol needs, so that neither the pipeline nor the service counts
changes of its own. A mark is a number of changes: changes are only appended or cut off the
end, so a number names a prefix of the history.

* The changes taken: those of every transaction the pipeline has taken (a DDL statement, a
  table learned from its TABLE_MAP, a resync), landed or not (``record``); a transaction
  that cannot land takes its own back (``take_back``).
* Committed: how many of them the last batch that landed covers (``committed``). When the
  open batch is dropped (a large transaction's parts aborted, read again from the
  checkpoint), the history goes back there (``roll_back``).
* Written: how many of them the history file holds that the landing zone names as of the
  last commit handed over, exactly (None: there is no such file, or it holds something else,
  as after a rewind or a cut below it). A commit writes the history when it is not that
  prefix (``for_commit``): with the batch whose DDL changed it, and with the first batch of a
  history the landing zone does not hold yet.

The landing zone stores what a commit hands it (``sink.landing``) and nothing more; the next
start reads the history back from there and makes a new ledger.

The reader thread does not share this object. Its ``SchemaTracker`` (``schema.tracker``)
works on a copy handed out by ``reader_view`` when the stream starts, for three reasons:

* It runs ahead. A DDL statement is applied as its QUERY event is decoded, before the next
  event is decoded, while the transactions before it may still wait in the hand-off queue
  for the pipeline: its catalog is the one of the event being decoded, this one's the one of
  the last transaction taken.
* Its marks are other marks. Its own (the last transaction it handed over, where a reconnect
  resumes) is ahead of both of this one's. What it takes back (at a reconnect, or when the
  assembler drops an incomplete group) is in no transaction handed over whole: never
  recorded here, or recorded from a large transaction's parts that are then aborted
  (``TransactionAborted``), which takes them back here too (``roll_back``: the pipeline
  commits everything before a large transaction, so the two marks meet there). What
  ``roll_back`` takes back here is sent again by the stream and recorded again.
* It is another thread. Sharing one list would have its rewinds and the pipeline's roll-backs
  cut it at different points under each other.

The copy grows by the same changes in the same order: each change the tracker records
travels to the pipeline inside its event (``SchemaChangeEvent``, ``TableLearnedEvent``) and
is recorded here, with the ``_seq`` of its first landing record, when the pipeline takes
that transaction. Only this history is written.
"""

from __future__ import annotations

from .history import SchemaChange, SchemaHistory
from .model import Catalog


class SchemaLedger:
    """The schema history of a run, with the marks of what landed and what was written."""

    def __init__(self, history: SchemaHistory, *, landed: bool) -> None:
        """``landed``: the landing zone holds exactly ``history`` (loaded from it and neither
        rewound nor advanced); otherwise the first commit writes it."""
        self.history = history  # changed only through the ledger
        self._committed = len(history.changes)
        self._written: int | None = len(history.changes) if landed else None

    @property
    def catalog(self) -> Catalog:
        """The catalog as of the last transaction taken."""
        return self.history.catalog

    @property
    def mark(self) -> int:
        """Where the history stands now, for ``take_back``."""
        return len(self.history.changes)

    def record(self, change: SchemaChange) -> SchemaChange:
        """A change of a transaction taken; returns it as recorded (``SchemaHistory.record``)."""
        return self.history.record(change)

    def take_back(self, mark: int) -> None:
        """Forget the changes recorded after ``mark``."""
        if mark >= len(self.history.changes):
            return
        self.history.truncate(mark)
        if self._written is not None and self._written > mark:
            self._written = None  # the file holds changes the history no longer has

    def roll_back(self) -> None:
        """The open batch is dropped: back to what the last batch that landed covers."""
        self.take_back(self._committed)

    def for_commit(self) -> tuple[int, SchemaHistory | None]:
        """A commit is being handed over: the mark it covers (``committed`` once it landed),
        and a copy of the history to write with it, or None when the file the landing zone
        names holds it already (or will, from a commit handed over before). From here on
        the history counts as written."""
        count = len(self.history.changes)
        if self._written == count:
            return count, None
        self._written = count
        return count, self.history.copy()

    def committed(self, mark: int) -> None:
        """A commit that covers the first ``mark`` changes has landed."""
        self._committed = mark

    def reader_view(self) -> SchemaHistory:
        """The reader thread's copy (see the module doc), as of the last transaction taken."""
        return self.history.copy()
