"""Exactly once: the last landing batch a Delta table holds is recorded in the same commit
as its rows (an app transaction), so a ``materialize --format delta`` killed at any instant
leaves every table as of some batch, whole, and the next run goes on from there. An output
built from another landing zone is refused before anything is written."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from replicator.delta.materialize import APP_PREFIX, materialize_delta
from replicator.errors import ConfigError, IntegrityError
from replicator.landed.committed import landing_id_of, read_manifests
from replicator.landed.options import MaterializeOptions
from tests.delta.test_lifecycle import outputs
from tests.harness.duckdb_delta import read_delta
from tests.spark.zone import Zone, expected_tables, int_col, table, text_col

pytestmark = pytest.mark.delta

ITEMS = table("shop.items", int_col(0, "id"), text_col(1, "name"), key=[0])
LOG = table("shop.log", int_col(0, "a"), text_col(1, "b"))  # copies show a batch applied twice


def land(zone: Zone, batch: int) -> None:
    zone.commit(
        [(ITEMS, "c", (batch * 10 + i, f"b{batch}")) for i in range(3)]
        + [(ITEMS, "u", (batch * 10 - 10, f"u{batch}"), (batch * 10 - 10, f"b{batch - 1}"))]
        * (batch > 1)
        + [(LOG, "c", (batch, "x"))] * 2
        + [(LOG, "d", (batch - 1, "x"))] * (batch > 1)
    )


def command(landing: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from replicator.cli import main; main()",
        "materialize",
        "--format",
        "delta",
        "--landing",
        str(landing),
        "--out",
        str(out),
        *extra,
    ]


FLAGS = pytest.mark.parametrize("flags", [("--no-deletion-vectors",), ()], ids=["merge", "vectors"])


def _run_seconds(landing: Path, out: Path, flags: tuple[str, ...]) -> float:
    """How long one whole run takes on this machine (into a scratch output)."""
    began = time.monotonic()
    subprocess.run(command(landing, out, *flags), stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - began


@FLAGS
def test_killed_at_random_instants_never_loses_or_doubles_a_batch(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    rng = random.Random(20261127)
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    app = APP_PREFIX + str(landing_id_of(read_manifests(zone.root).manifests) or "")
    expected: dict[int, dict[str, Any]] = {}
    kills = 0
    # the kills fall within a run's duration as measured here (start-up included): a fixed
    # window would let runs on a fast machine end before every kill
    land(zone, 1)
    seconds = _run_seconds(zone.root, tmp_path / "scratch", flags)
    for batch in range(1, 13):
        if batch > 1:
            land(zone, batch)
        expected[batch] = expected_tables(zone)
        app = APP_PREFIX + str(landing_id_of(read_manifests(zone.root).manifests))
        run = subprocess.Popen(command(zone.root, out, *flags), stdout=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 0.95) * seconds)
        if run.poll() is None:
            os.kill(run.pid, signal.SIGKILL)
            kills += 1
        run.wait()
        for name in ("shop.items", "shop.log"):
            path = out / name.replace(".", "/")
            if not DeltaTable.is_deltatable(str(path)):
                continue
            version = DeltaTable(str(path)).transaction_version(app)
            assert version is not None
            names, rows = read_delta(path)
            got = sorted((dict(zip(names, r, strict=True)) for r in rows), key=repr)
            assert got == expected[version][name], (name, version)
    assert kills >= 4, "the runs ended before the kills: the test proves nothing"
    options = MaterializeOptions(deletion_vectors=False if flags else None)  # as ``flags``
    materialize_delta(zone.root, out, options=options)
    assert outputs(out) == expected_tables(zone)
    # one more batch applied to the table as it stands (the kills may have left it built
    # only by the last run, never given a batch of its own): by vectors, or not
    land(zone, 13)
    materialize_delta(zone.root, out, options=options)
    assert outputs(out) == expected_tables(zone)
    vectors = DeltaTable(str(out / "shop" / "items")).protocol().reader_features or []
    assert ("deletionVectors" in vectors) == (flags == ())


def test_a_first_commit_never_made_is_built_again_and_anything_else_refused(
    tmp_path: Path,
) -> None:
    """A run killed after writing a new table's files and before its first commit leaves
    files no Delta log names: the next run builds the table (they stay, unreferenced). A
    directory holding anything else is not taken for a table."""
    zone = Zone(tmp_path / "landing")
    land(zone, 1)
    out = tmp_path / "out"
    items = out / "shop" / "items"
    (items / "_delta_log").mkdir(parents=True)
    (items / "part-0123456789abcdef0123456789abcdef.snappy.parquet").write_bytes(b"PAR1")
    (items / "_delta_log" / "_commit_1b4e28ba-2fa1-11d2-883f-0016d3cca427.json.tmp").write_text("{")
    materialize_delta(zone.root, out)
    assert outputs(out) == expected_tables(zone)
    other = tmp_path / "other"
    (other / "shop" / "items").mkdir(parents=True)
    (other / "shop" / "items" / "notes.txt").write_text("mine")
    with pytest.raises(IntegrityError, match=r"shop/items exists and is not a Delta table"):
        materialize_delta(zone.root, other)
    assert (other / "shop" / "items" / "notes.txt").read_text() == "mine"


def test_an_output_of_another_landing_zone_is_refused(tmp_path: Path) -> None:
    first, second = Zone(tmp_path / "a"), Zone(tmp_path / "b")
    out = tmp_path / "out"
    for zone in (first, second):
        land(zone, 1)
    materialize_delta(first.root, out)
    before = read_delta(out / "shop" / "log")
    with pytest.raises(IntegrityError, match="was not built from this landing zone"):
        materialize_delta(second.root, out)
    with pytest.raises(IntegrityError, match="was not built from this landing zone"):
        materialize_delta(second.root, out, options=MaterializeOptions(full_refresh=True))
    assert read_delta(out / "shop" / "log") == before


def test_a_table_of_another_landing_zone_is_refused_even_when_not_chosen(tmp_path: Path) -> None:
    """The second landing zone has no shop.log: the output's shop.log still marks the output
    as another landing zone's, and nothing is written (not even shop.items)."""
    first, second = Zone(tmp_path / "a"), Zone(tmp_path / "b")
    land(first, 1)
    second.commit([(ITEMS, "c", (1, "x"))])
    out = tmp_path / "out"
    materialize_delta(first.root, out, tables=["shop.log"])
    with pytest.raises(IntegrityError, match=r"shop/log was not built from this landing zone"):
        materialize_delta(second.root, out)
    assert not (out / "shop" / "items").exists()


def test_an_output_ahead_of_a_restored_landing_zone_is_refused(tmp_path: Path) -> None:
    """The landing zone restored from a backup taken before its batch 3, which the output
    holds: the batches landed again from there would be taken as applied. The run stops
    before any table is changed; --full-refresh rebuilds from what the landing zone holds."""
    root = tmp_path / "landing"
    zone = Zone(root)
    land(zone, 1)
    land(zone, 2)
    shutil.copytree(root, tmp_path / "backup")
    land(zone, 3)
    out = tmp_path / "out"
    materialize_delta(root, out)
    shutil.rmtree(root)
    shutil.copytree(tmp_path / "backup", root)
    before = read_delta(out / "shop" / "items")
    with pytest.raises(
        IntegrityError, match=r"holds batches up to 3, but the landing zone .* ends at batch 2: "
    ):
        materialize_delta(root, out)
    with pytest.raises(IntegrityError, match=r"^table shop.items: .*") as refused:
        materialize_delta(root, out, tables=["shop.items"])
    assert "--full-refresh" in str(refused.value.hint)
    assert read_delta(out / "shop" / "items") == before
    # the daemon lands batch 3 again, other transactions: the number alone would pass
    again = Zone(root)
    again.commit([(ITEMS, "c", (90, "new3"))])
    with pytest.raises(IntegrityError, match=r"holds another batch 3 \(its _seq range"):
        materialize_delta(root, out)
    assert read_delta(out / "shop" / "items") == before
    materialize_delta(root, out, options=MaterializeOptions(full_refresh=True))
    assert sorted(r["id"] for r in outputs(out)["shop.items"]) == [10, 11, 12, 20, 21, 22, 90]
    again.commit([(ITEMS, "c", (91, "new4"))])
    materialize_delta(root, out)
    ids = sorted(r["id"] for r in outputs(out)["shop.items"])
    assert ids == [10, 11, 12, 20, 21, 22, 90, 91]


def test_options_must_match_the_existing_output(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    land(zone, 1)
    out = tmp_path / "out"
    materialize_delta(zone.root, out)
    land(zone, 2)
    with pytest.raises(ConfigError, match="built with keep_metadata=False"):
        materialize_delta(zone.root, out, options=MaterializeOptions(keep_metadata=True))
    materialize_delta(
        zone.root, out, options=MaterializeOptions(keep_metadata=True, full_refresh=True)
    )
    names, rows = read_delta(out / "shop" / "items", order_by="id")
    assert names[2:] == ["_op", "_seq", "_gtid", "_ts", "_server_id", "_binlog_file", "_binlog_pos"]
    assert [r[:3] for r in rows][-1] == (22, "b2", "c")


def follow(landing: Path, out: Path, flags: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*command(landing, out, *flags), "--follow", "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def held_batch(out: Path, app: str) -> int | None:
    path = out / "shop" / "log"
    if not DeltaTable.is_deltatable(str(path)):
        return None
    return DeltaTable(str(path)).transaction_version(app)


@FLAGS
def test_follow_applies_each_batch_within_two_seconds_and_survives_kills(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    """--follow lands each batch within 2 s of its manifest; SIGKILLed at random instants
    and started again, it never loses or doubles a batch; SIGTERM ends it with exit 0."""
    rng = random.Random(7)
    zone = Zone(tmp_path / "landing")
    out = tmp_path / "out"
    land(zone, 1)
    app = APP_PREFIX + str(landing_id_of(read_manifests(zone.root).manifests))
    run = follow(zone.root, out, flags)
    latencies: list[float] = []
    kills = 0
    try:
        for batch in range(2, 14):
            deadline = time.monotonic() + 30
            while held_batch(out, app) != batch - 1:  # the previous batch is in
                assert run.poll() is None, run.stderr.read() if run.stderr else b""
                assert time.monotonic() < deadline, "the follower stopped applying batches"
                time.sleep(0.02)
            land(zone, batch)
            landed = time.monotonic()
            if batch % 3 == 0:  # killed at a random instant after the batch landed
                time.sleep(rng.uniform(0.0, 0.5))
                run.kill()
                run.wait()
                kills += 1
                run = follow(zone.root, out, flags)
                continue
            while held_batch(out, app) != batch:
                assert time.monotonic() - landed < 10, f"batch {batch} not applied"
                time.sleep(0.02)
            latencies.append(time.monotonic() - landed)
        while held_batch(out, app) != 13:
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=20) == 0
    finally:
        if run.poll() is None:
            run.kill()
    assert kills == 4
    assert max(latencies) < 2.0, latencies
    assert outputs(out) == expected_tables(zone)
    vectors = DeltaTable(str(out / "shop" / "items")).protocol().reader_features or []
    assert ("deletionVectors" in vectors) == (flags == ())
