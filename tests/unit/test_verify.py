"""Every committed byte is checked against its commit record (``sink.verify``, ``sink.digest``).

Batches are committed through the real commit protocol into a real landing zone (a directory,
or moto's S3 server): each manifest entry carries the file's size and SHA-256, computed as it
was written, and the manifest pins the schema history it names. A truncated file, a file
replaced by other bytes of the same size, a committed compaction output that is gone or an
edited schema history stop the daemon's start (or the history's readers) with an
IntegrityError naming the file and its batch; ``replicator verify`` checks a whole landing
zone offline and exits 4 naming each bad file, 0 with a summary otherwise.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.config import SinkConfig
from replicator.errors import IntegrityError
from replicator.landed.committed import read_file, read_manifests
from replicator.schema import ddl
from replicator.schema.history import Point, SchemaHistory
from replicator.schema.model import Catalog, ServerTraits
from replicator.sink import compaction as cp
from replicator.sink.committed_history import load_committed_history
from replicator.sink.landing import HASHED_BATCHES, LandingZone
from replicator.storage import LocalStore
from tests.harness.s3 import REGION, S3Server
from tests.unit.test_object_store import _end, _land, _sink

PART = "shop/orders/part-{:020d}.parquet"


def _zone(root: Path, batches: int, rows: int = 3) -> LandingZone:
    """A local landing zone with ``batches`` committed batches of ``rows`` orders each."""
    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()
    ids = itertools.count(1)
    for _ in range(batches):
        _land(zone, ids, rows)
    return zone


def _part(batch: int, rows: int = 3) -> str:
    return PART.format((batch - 1) * rows + 1)


def _flip_a_byte(path: Path) -> None:
    """Other content of the same size (a page's byte: the footer still reads)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))


def _verify(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["verify", *args])
    return result.exit_code, result.output


def test_manifests_carry_each_file_s_size_and_hash_and_pages_their_checksums(
    tmp_path: Path,
) -> None:
    _zone(tmp_path, 1)
    manifest = json.loads((tmp_path / "_manifests" / f"{1:020d}.json").read_text())
    [entry] = manifest["files"]
    data = (tmp_path / entry["path"]).read_bytes()
    assert entry["bytes"] == len(data)
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    # every page carries its CRC: a reader that asks verifies them
    table = pq.read_table(tmp_path / entry["path"], page_checksum_verification=True)
    assert table.num_rows == 3


def test_a_truncated_file_stops_the_start_and_the_readers_naming_it(tmp_path: Path) -> None:
    _zone(tmp_path, 2)
    path = tmp_path / _part(1)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size // 2])
    with pytest.raises(IntegrityError) as stopped:
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    message = str(stopped.value)
    assert _part(1) in message and "(batch 1)" in message
    assert f"has {size // 2} bytes, its manifest says {size}" in message
    assert "restore" in message
    assert path.stat().st_size == size // 2  # nothing was changed
    # the readers (materialize, read_changes, current_state) check a file before reading it
    (truncated,) = [f for m in read_manifests(tmp_path).manifests for f in m.files if f.batch == 1]
    with pytest.raises(IntegrityError, match=rf"{_part(1)} \(batch 1\) has {size // 2} bytes"):
        read_file(truncated)


def test_other_bytes_of_the_same_size_in_a_newest_batch_stop_the_start(tmp_path: Path) -> None:
    _zone(tmp_path, 3)
    path = tmp_path / _part(3)
    size = path.stat().st_size
    _flip_a_byte(path)
    assert path.stat().st_size == size
    with pytest.raises(IntegrityError) as stopped:
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    message = str(stopped.value)
    assert _part(3) in message and "(batch 3)" in message
    assert "has sha256 " in message and ", its manifest says " in message


def test_verify_deep_finds_a_replaced_file_in_an_old_batch(tmp_path: Path) -> None:
    batches = HASHED_BATCHES + 2
    _zone(tmp_path, batches)
    _flip_a_byte(tmp_path / _part(1))
    # a start hashes only the newest batches (sizes of every one): this one is older
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    code, output = _verify("--landing", str(tmp_path))
    assert code == 0, output
    code, output = _verify("--landing", str(tmp_path), "--deep")
    assert code == 4, output
    bad = [line for line in output.splitlines() if line.startswith("bad: ")]
    assert len(bad) == 1
    assert _part(1) in bad[0] and "(batch 1)" in bad[0] and "has sha256" in bad[0]
    assert f"1 problem(s): {batches} files" in output


def test_a_good_landing_zone_verifies(tmp_path: Path) -> None:
    _zone(tmp_path, 3)
    total = sum((tmp_path / _part(n)).stat().st_size for n in (1, 2, 3))
    code, output = _verify("--landing", str(tmp_path), "--deep")
    assert code == 0, output
    assert output == f"OK: 3 files ({total} bytes; 3 hashed) of 3 batches checked\n"


def test_a_committed_compaction_output_replaced_or_gone_is_found(tmp_path: Path) -> None:
    _zone(tmp_path, 4)
    result = cp.run_compaction(LocalStore(tmp_path), cp.Settings(older_than=0.0, retention=0.0))
    assert result.record is not None
    [output] = [p for p in (tmp_path / "shop" / "orders").iterdir() if p.name.startswith("c")]
    assert not (tmp_path / _part(1)).exists()  # superseded and removed: accepted
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert _verify("--landing", str(tmp_path), "--deep")[0] == 0
    _flip_a_byte(output)  # the record gives the output's hash too
    code, shown = _verify("--landing", str(tmp_path), "--deep")
    assert code == 4 and f"{output.name} (compaction 1, batches 1-4) has sha256" in shown
    output.unlink()
    with pytest.raises(IntegrityError) as stopped:
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    message = str(stopped.value)
    assert f"compaction 1, batches 1-4 is committed but its output shop/orders/{output.name}" in (
        message
    )
    code, shown = _verify("--landing", str(tmp_path))
    assert code == 4 and output.name in shown


def test_verify_deep_compares_an_output_s_data_bytes_with_its_footer(tmp_path: Path) -> None:
    _zone(tmp_path, 4)
    store = LocalStore(tmp_path)
    result = cp.run_compaction(store, cp.Settings(older_than=0.0, retention=0.0))
    assert result.record is not None
    [record_file] = (tmp_path / "_compactions").glob("*.json")
    data = json.loads(record_file.read_text())
    [output] = data["outputs"]
    actual = cp.footer(store, output["path"])[1]
    assert output["data_bytes"] == actual
    assert _verify("--landing", str(tmp_path), "--deep")[0] == 0
    output["data_bytes"] = actual - 1  # still a valid size: only the footer tells it is wrong
    record_file.write_text(json.dumps(data))
    code, shown = _verify("--landing", str(tmp_path), "--deep")
    name = output["path"].rpartition("/")[2]
    assert code == 4
    assert (
        f"{name} (compaction 1, batches 1-4) has {actual} bytes of column chunks, its compaction "
        f"record says {actual - 1} (data_bytes)"
    ) in shown
    code, shown = _verify("--landing", str(tmp_path))  # sizes only: the footer is not read
    assert code == 0, shown


# -------------------------------------------------------------------------- schema history


def _history() -> SchemaHistory:
    catalog = Catalog(ServerTraits("mariadb", (10, 11, 6), 0))
    context = ddl.Context(default_db="shop", server_charset="latin1")
    for statement in ("CREATE DATABASE shop", "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"):
        catalog, _ = ddl.apply_ddl(catalog, statement, context)
    return SchemaHistory(seed=catalog, seed_point=Point("mysql-bin.000001", 4))


def _swap_column_names(path: Path) -> None:
    """``a`` and ``b`` exchanged: still valid JSON, still a valid history."""
    text = path.read_text()
    swapped = text.replace('"name":"a"', '"name":"@"').replace('"name":"b"', '"name":"a"')
    path.write_text(swapped.replace('"name":"@"', '"name":"b"'))
    assert swapped != text


def test_an_edited_schema_history_is_refused_by_every_reader(tmp_path: Path) -> None:
    zone = LandingZone(SinkConfig(root=str(tmp_path)))
    zone.recover()
    batch = zone.begin(zone.checkpoints.load())
    batch.commit(_end(1), 1, history=_history())
    manifest = json.loads((tmp_path / "_manifests" / f"{1:020d}.json").read_text())
    name = manifest["schema_history"]
    assert (
        manifest["schema_history_sha256"]
        == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
    )
    _land(zone, itertools.count(1), 2)  # a batch without DDL pins the same history
    manifest = json.loads((tmp_path / "_manifests" / f"{2:020d}.json").read_text())
    assert manifest["schema_history"] == name
    restart = LandingZone(SinkConfig(root=str(tmp_path)))
    restart.recover()
    assert restart.load_history() is not None  # as committed: loads

    _swap_column_names(tmp_path / name)
    SchemaHistory.from_json(json.loads((tmp_path / name).read_text()))  # still a history
    restart = LandingZone(SinkConfig(root=str(tmp_path)))
    restart.recover()
    with pytest.raises(IntegrityError) as stopped:
        restart.load_history()
    message = str(stopped.value)
    assert name in message and "the manifest of batch 2 pins" in message
    assert "restore it from a backup" in message
    with pytest.raises(IntegrityError, match="the manifest of batch 2 pins"):
        load_committed_history(tmp_path)  # `replicator schema show`
    code, output = _verify("--landing", str(tmp_path))
    assert code == 4 and f"bad: the schema history {tmp_path / name}" in output


# -------------------------------------------------------------------------- object store


def test_an_object_replaced_by_another_committed_file_is_refused(
    s3_server: S3Server, tmp_path: Path
) -> None:
    url = f"s3://{s3_server.bucket('verify-replaced')}/zone"
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    ids = itertools.count(1)
    _land(zone, ids, 3)
    _land(zone, ids, 3)
    assert _verify_config(s3_server, url, tmp_path)[0] == 0
    first, second = _part(1), _part(2)
    zone.store.write(second, zone.store.read(first))  # another committed file of the table
    with pytest.raises(IntegrityError, match=rf"{second} \(batch 2\) has "):
        LandingZone(_sink(s3_server, url)).recover()
    code, output = _verify_config(s3_server, url, tmp_path)
    assert code == 4, output
    bad = [line for line in output.splitlines() if line.startswith("bad: ")]
    assert len(bad) == 1 and f"{url}/{second} (batch 2) has " in bad[0]


def _verify_config(server: S3Server, url: str, tmp_path: Path) -> tuple[int, str]:
    """``verify --deep --config``: its sink section alone is read; the source's password
    variable is not set (and not needed)."""
    config = tmp_path / "replicator.yaml"
    config.write_text(
        json.dumps(
            {
                "source": {"host": "db.invalid", "password_env": "VERIFY_TEST_UNSET_PASSWORD"},
                "sink": {
                    "root": url,
                    "object_store": {
                        "endpoint": server.endpoint,
                        "region": REGION,
                        "access_key_env": "VERIFY_TEST_KEY",
                        "secret_key_env": "VERIFY_TEST_SECRET",
                    },
                },
            }
        )
    )
    sink = _sink(server, url).object_store
    result = CliRunner().invoke(
        main,
        ["verify", "--deep", "--config", str(config)],
        env={
            "VERIFY_TEST_KEY": sink.access_key.reveal(),
            "VERIFY_TEST_SECRET": sink.secret_key.reveal(),
            "VERIFY_TEST_UNSET_PASSWORD": None,
        },
    )
    return result.exit_code, result.output
