"""Transactions assembled from every corpus file hold every row change, none twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.transaction import Transaction, TransactionAssembler, TransactionPart

from .test_walk import EXPECTED_FAILURES, _binlog_paths
from .util import changes, decode_all


@pytest.mark.parametrize("rel", [p for p in _binlog_paths() if p not in EXPECTED_FAILURES])
def test_transactions_cover_every_row_change(corpus_dir: Path, rel: str) -> None:
    events = decode_all(corpus_dir / rel)
    assembler = TransactionAssembler()
    found: list[Transaction] = []
    passed_through: list[TransactionPart | ev.Event] = []
    for event in events:
        for item in assembler.feed(event):
            if isinstance(item, Transaction):
                found.append(item)
            else:
                passed_through.append(item)
    # files cut inside a transaction keep it open; none is dropped
    assert assembler.discarded_incomplete == 0
    assert sum(t.row_count for t in found) == len(changes(events)) - _open_rows(assembler)
    # transactions tile the stream in order
    ends = [(t.position, t.end_position) for t in found]
    assert ends == sorted(ends)
    assert all(start < end for start, end in ends)
    assert all(not isinstance(e, ev.RowsEvent) for e in passed_through)


def _open_rows(assembler: TransactionAssembler) -> int:
    return sum(len(e.rows) for e in assembler._open if isinstance(e, ev.RowsEvent))
