"""The per-event value classes (``binlog.records.record``): values, and read-only to mypy."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest
from mypy import api as mypy_api

from replicator.binlog import block as block_module
from replicator.binlog.block import Block
from replicator.binlog.gtid import MariadbGtid, MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.binlog.records import record


@record
class _Point:
    x: int
    y: str = "a"


@record
class _Labelled(_Point):
    label: str = ""


def test_a_record_is_a_slotted_value() -> None:
    point = _Labelled(1, "b", "c")
    assert point == _Labelled(1, "b", "c")
    assert point != _Labelled(1, "b", "d")
    assert len({point, _Labelled(1, "b", "c"), _Point(1, "b")}) == 2
    assert not hasattr(point, "__dict__")
    assert dataclasses.replace(point, label="d") == _Labelled(1, "b", "d")
    assert pickle.loads(pickle.dumps(point)) == point


def test_positions_stay_values() -> None:
    gtid = MariadbGtidPosition((MariadbGtid(0, 1, 5),))
    position = StreamPosition("bin.000001", 400, gtid)
    same = StreamPosition("bin.000001", 400, MariadbGtidPosition((MariadbGtid(0, 1, 5),)))
    assert position == same
    assert hash(position) == hash(same)
    assert {position: 1}[same] == 1
    assert pickle.loads(pickle.dumps(position)) == position


def test_a_record_pickles_as_the_frozen_dataclass_it_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Held XA transactions are pickled with their blocks (``sink.landing``): a file written
    while ``Block`` was a frozen dataclass is the same bytes as one written now."""
    names = [f.name for f in dataclasses.fields(Block)]
    frozen = dataclasses.make_dataclass("Block", names, frozen=True, slots=True)
    frozen.__module__ = Block.__module__
    values: tuple[Any, ...] = (2, ([1, 2],), None, (None,))
    with monkeypatch.context() as patched:
        patched.setattr(block_module, "Block", frozen)
        written_before = pickle.dumps(frozen(*values), protocol=pickle.HIGHEST_PROTOCOL)
    written_now = pickle.dumps(Block(*values), protocol=pickle.HIGHEST_PROTOCOL)
    assert written_now == written_before
    assert pickle.loads(written_before) == Block(*values)


@pytest.mark.parametrize(
    "statement",
    [
        "point.x = 2",
        "position.position = 5",
        "gtid.seq_no = 7",
    ],
)
def test_mypy_refuses_changing_a_record(tmp_path: Path, statement: str) -> None:
    """What stands in for frozen's check at run time: ``scripts/check`` runs ``mypy --strict``,
    which refuses an assignment to a field of a record, its own or one it inherits."""
    source = tmp_path / "change.py"
    source.write_text(
        "from replicator.binlog.records import record\n"
        "from replicator.binlog.gtid import MariadbGtid\n"
        "from replicator.binlog.position import StreamPosition\n"
        "@record\n"
        "class Point:\n"
        "    x: int\n"
        "    y: str = 'a'\n"
        "@record\n"
        "class Labelled(Point):\n"
        "    label: str = ''\n"
        "point = Labelled(1)\n"
        "position = StreamPosition()\n"
        "gtid = MariadbGtid(0, 1, 2)\n"
        f"{statement}\n"
    )
    out, _, status = mypy_api.run(
        ["--strict", "--no-incremental", "--follow-imports=silent", str(source)]
    )
    assert status == 1, out
    assert "read-only" in out or "cannot assign" in out.lower(), out
    assert out.count("error:") == 1, out
