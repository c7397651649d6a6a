"""``materialize --format delta`` refuses compaction records it cannot trust, as ``replicator
verify``, the compactor and the daemon's start do, rather than building from them: a record
edited so that a boundary between two of the files it replaces moved (rows, order and range
unchanged) would have an incremental run lose a row; a newest record lost after retention
deleted what it merged would have every run take its batches for ones not yet published, and
build nothing of them, forever. Once the record is restored the run goes on as if nothing
happened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from replicator.landed.compacted import record_key
from replicator.landed.options import MaterializeOptions
from replicator.sink import compaction as cp
from replicator.storage import LocalStore
from tests.delta.test_lifecycle import outputs
from tests.spark.zone import Zone, expected_tables, int_col, table, text_col

pytestmark = pytest.mark.delta

ONE = table("shop.one", int_col(0, "id"), text_col(1, "name"), key=[0])
ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])


def _compact(zone: Zone) -> cp.Result:
    return cp.run_compaction(
        LocalStore(zone.root), cp.Settings(older_than=0.0, target_bytes=1 << 30, retention=0.0)
    )


def _materialize(zone: Zone, out: Path) -> tuple[int, str]:
    args = ["--format", "delta", "--landing", str(zone.root), "--out", str(out)]
    result = CliRunner().invoke(main, ["materialize", *args])
    return result.exit_code, result.output


def test_an_edited_record_stops_an_incremental_run(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    for b in range(1, 3):
        zone.commit([(ITEMS, "c", (b * 10 + i, f"b{b}")) for i in range(3)])
    materialize_delta(zone.root, out, options=MaterializeOptions())  # holds batches 1-2
    built = outputs(out)
    for b in range(3, 5):
        zone.commit([(ITEMS, "c", (b * 10 + i, f"b{b}")) for i in range(3)])
    result = _compact(zone)
    assert (result.record, result.merged) == (1, 4)
    path = zone.root / record_key(1)
    original = path.read_bytes()
    record = json.loads(original)
    replaces = record["outputs"][0]["replaces"]
    replaces[1]["last_seq"] += 1  # batch 2's entry now ends one _seq later ...
    replaces[2]["first_seq"] += 1  # ... and batch 3's begins one later
    path.write_text(json.dumps(record, indent=1) + "\n")

    with pytest.raises(IntegrityError, match="does not match the manifest entry it replaces"):
        materialize_delta(zone.root, out, options=MaterializeOptions())
    assert outputs(out) == built  # nothing applied
    code, text = _materialize(zone, out)
    assert code == 4, text
    assert record_key(1) in text

    path.write_bytes(original)  # restored
    materialize_delta(zone.root, out, options=MaterializeOptions())
    assert outputs(out) == expected_tables(zone)
    assert len(outputs(out)["shop.items"]) == 12


def test_a_lost_record_stops_materialize_with_exit_4(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    zone.commit([(ONE, "c", (1, "only"))])  # batch 1: shop.one, never merged
    for b in range(2, 7):  # batches 2-6: shop.items, merged into one output
        zone.commit([(ITEMS, "c", (b, f"b{b}"))])
    result = _compact(zone)
    assert (result.record, result.merged, result.deleted) == (1, 5, 5)
    path = zone.root / record_key(1)
    original = path.read_bytes()
    path.unlink()  # lost (an incomplete restore), after retention deleted what it merged

    code, text = _materialize(zone, out)
    assert code == 4, text
    assert f"compaction record {zone.root / record_key(1)} is missing" in " ".join(text.split())
    assert not out.exists() or outputs(out) == {}

    path.write_bytes(original)  # restored
    code, text = _materialize(zone, out)
    assert code == 0, text
    assert outputs(out) == expected_tables(zone)
