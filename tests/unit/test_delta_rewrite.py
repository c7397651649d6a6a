"""The pure pieces of the file-by-file copy-on-write (``delta.rewrite``) and of the ranged
build's routing (``delta.build``): which files a key range may be in (a truncated text
maximum included, rounded types never trusted), the keys a batch touches as the fold sees
them (a partial image's key from its before image), a file's rows with touched rows
replaced in place, and the range of each value by binary search as bound by bound."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from replicator.delta import rewrite as rewrite_module
from replicator.delta.build import _range_of, _split
from replicator.delta.layout import ABSENT, BEFORE_KEY
from replicator.delta.rewrite import _candidates, _replaced, _touched
from tests.unit.test_delta_fold import KEYED, changes


def stats(first: str, lows: list[object], highs: list[object]) -> pa.Table:
    paths = [f"f{i}" for i in range(len(lows))]
    return pa.table({"path": paths, f"min.{first}": lows, f"max.{first}": highs})


def test_candidates_by_integer_range() -> None:
    actions = stats("id", [1, 11, 21, None], [10, 20, 30, None])
    assert _candidates(actions, pa.array([5, 25], pa.int64()), "id") == [0, 2, 3]
    assert _candidates(actions, pa.array([31], pa.int64()), "id") == [3]  # no range: read


def test_candidates_take_a_truncated_text_maximum_as_a_prefix() -> None:
    actions = stats("k", ["a", "m"], ["abc", "z"])
    # "abcz" > "abc", but a writer may have cut the maximum "abcz..." to "abc"
    assert _candidates(actions, pa.array(["abcz"]), "k") == [0]
    assert _candidates(actions, pa.array(["abd"]), "k") == []
    assert _candidates(actions, pa.array(["n"]), "k") == [1]


def test_candidates_never_trust_a_rounded_range() -> None:
    moment = dt.datetime(2026, 1, 1, 12, 0, 0)
    actions = stats("t", [moment, moment], [moment, moment])
    values = pa.array([moment + dt.timedelta(microseconds=500)], pa.timestamp("us"))
    assert _candidates(actions, values, "t") == [0, 1]
    assert _candidates(stats("x", [1], [2]), pa.array([5]), "id") == [0]  # no statistics


def test_touched_keys_take_a_partial_image_s_key_from_its_before_image() -> None:
    batch = changes(
        KEYED,
        [
            {"op": "u", "id": None, "v": "x", "absent": ["id", "w"], "before": {"id": 7}},
            {"op": "u", "id": 9, "v": "y", "w": 1, "before": {"id": 3}},  # a key change
            {"op": "c", "id": 4, "v": "z", "w": 2},
            {"op": "d", "id": 4, "v": "z", "w": 2},
        ],
    )
    found = _touched(KEYED, batch)
    assert sorted(found.column("id").to_pylist()) == [3, 4, 7, 9]


def test_touched_keys_keep_a_null_nobody_left_out() -> None:
    batch = changes(KEYED, [{"op": "c", "id": None, "v": "x", "w": 1}])
    assert _touched(KEYED, batch).column("id").to_pylist() == [None]


@pytest.mark.parametrize("sliced", [256, 0])  # slices, or one take
def test_replaced_puts_new_versions_at_their_rows_places(
    sliced: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rewrite_module, "_SLICED", sliced)
    rows = pa.table({"id": list(range(10)), "v": [f"old{i}" for i in range(10)]})
    new = pa.table({"id": [0, 5, 9], "v": ["new0", "new5", "new9"]})
    positions = np.array([0, 3, 5, 9], dtype=np.int64)  # 3 is deleted
    where = np.array([0, 5, 9], dtype=np.int64)
    out = _replaced(rows, positions, where, new)
    assert out.column("id").to_pylist() == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert out.column("v").to_pylist() == [
        "new0", "old1", "old2", "old4", "new5", "old6", "old7", "old8", "new9"
    ]  # fmt: skip


@pytest.mark.parametrize("sliced", [256, 0])
def test_replaced_can_leave_nothing(sliced: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rewrite_module, "_SLICED", sliced)
    rows = pa.table({"id": [1, 2]})
    empty = pa.table({"id": pa.array([], pa.int64())})
    out = _replaced(rows, np.array([0, 1], dtype=np.int64), np.array([], np.int64), empty)
    assert out.num_rows == 0


INTEGERS_AND_BOUNDS = (
    pa.array([None, 1, 5, 10, 11, 20, 21, 99, -3], pa.int64()),
    pa.array([5, 10, 20], pa.int64()),
)


def _ranges_by_bounds(values: pa.Array, bounds: pa.Array) -> list[int]:
    """Each value's range, counting the bounds below it (a null's is 0)."""
    return [
        0 if value is None else sum(value > b for b in bounds.to_pylist())
        for value in values.to_pylist()
    ]


@pytest.mark.parametrize(
    ("values", "bounds"),
    [
        INTEGERS_AND_BOUNDS,
        (pa.array([dt.date(2020, 1, d) for d in (1, 2, 3, 9)]), pa.array([dt.date(2020, 1, 2)])),
        (pa.array([3, None], pa.int32()), pa.array([], pa.int32())),
    ],
)
def test_range_by_binary_search_is_range_by_bounds(values: pa.Array, bounds: pa.Array) -> None:
    bounds = bounds.cast(values.type)
    assert _range_of(values, bounds).to_pylist() == _ranges_by_bounds(values, bounds)


def test_range_of_text_is_range_by_bounds() -> None:
    """Bound by bound: the integers as text, in the same order, fall in the same ranges."""
    values, bounds = INTEGERS_AND_BOUNDS
    padded = pa.array([None if v is None else f"{v + 100:04d}" for v in values.to_pylist()])
    marks = pa.array([f"{b + 100:04d}" for b in bounds.to_pylist()])
    assert _range_of(padded, marks).to_pylist() == _ranges_by_bounds(values, bounds)


def test_split_sends_a_key_change_to_both_ranges() -> None:
    part = pa.table(
        {
            "id": pa.array([1, 50, 7, 60, None, None, 3], pa.int64()),
            "_seq": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
            ABSENT: pa.array([[], [], [], [], ["id"], [], []], pa.list_(pa.string())),
            BEFORE_KEY: pa.array(
                [None, {"id": 2}, {"id": 55}, {"id": 60}, {"id": 70}, {"id": 80}, {"id": None}],
                pa.struct([("id", pa.int64())]),
            ),
        }
    )
    routed = {
        at: rows.column("_seq").to_pylist() for at, rows in _split(part, "id", pa.array([10]))
    }
    # range 0: ids up to 10, and NULL; range 1: above. _seq 2 moves 2 -> 50, _seq 3 moves
    # 55 -> 7; _seq 5 leaves the key out (a partial image): the row stays at 70; _seq 6 moves
    # 80 -> NULL (a keyless table's first column), _seq 7 NULL -> 3
    assert routed == {0: [1, 3, 6, 7, 2], 1: [2, 4, 5, 3, 6]}
