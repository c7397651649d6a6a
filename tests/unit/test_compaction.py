"""Compaction and retention (``sink.compaction``) and reading through it (``landed.compacted``).

Planning: only consecutive files of one table with equal schemas and footers merge, never
across a lifecycle record, an unpublished, young or replay batch; groups close at the target
size. The record is the commit point: a failure at every step leaves the rows the committed
readers return unchanged (old files or new, never both), and the next run (or the daemon's
start) cleans up or rolls forward. Readers see each row once, incremental reads after any
batch included, across compactions of compactions; retention deletes only superseded files,
and the daemon's recovery accepts them gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from replicator.checkpoint import Checkpoint, CheckpointStore, position_from_json
from replicator.cli import main
from replicator.config import CompactionConfig, Config, SinkConfig
from replicator.errors import IntegrityError, SinkError
from replicator.landed.committed import committed_files, read_manifests
from replicator.landed.compacted import (
    intent_key,
    output_name,
    read_arrow,
    read_records,
    record_key,
)
from replicator.service import RunOptions, Service
from replicator.sink import compaction as cp
from replicator.sink.digest import hash_key, is_digest
from replicator.sink.landing import LandingZone
from replicator.sink.parquet_options import writer_options
from replicator.storage import LocalStore, Store
from tests.logs import captured_log

OLD = "2026-01-01T00:00:00Z"


def _schema(version: str = "v1", key: str = '["id"]') -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
            pa.field("v", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
            pa.field("_op", pa.string(), nullable=False),
            pa.field("_seq", pa.int64(), nullable=False),
        ],
        metadata={
            b"replicator.table": b"db.t",
            b"replicator.version": version.encode(),
            b"replicator.primary_key": key.encode(),
        },
    )


class Zone:
    """A landing zone as the daemon leaves it: batches of one file per table, committed,
    published and checkpointed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.batch = 0
        self.seq = 1
        self.versions: dict[str, str] = {}

    def add(
        self,
        rows: dict[str, int],
        *,
        records: list[dict[str, Any]] | None = None,
        replay: bool = False,
        committed_at: str = OLD,
        version: dict[str, str] | None = None,
        checkpoint: bool = True,
    ) -> int:
        self.batch += 1
        first = self.seq
        files = []
        for table, count in rows.items():
            if version and table in version:
                self.versions[table] = version[table]
            seqs = list(range(self.seq, self.seq + count))
            self.seq += count
            db, name = table.split(".")
            rel = f"{db}/{name}/part-{seqs[0]:020d}.parquet"
            (self.root / db / name).mkdir(parents=True, exist_ok=True)
            data = pa.table(
                {
                    "id": [s % 7 for s in seqs],
                    "v": [f"{table}-{s}" for s in seqs],
                    "_op": ["c"] * count,
                    "_seq": seqs,
                },
                schema=_schema(self.versions.get(table, "v1")),
            )
            pq.write_table(data, self.root / rel)
            files.append(
                {
                    "table": table,
                    "path": rel,
                    "rows": count,
                    "bytes": (self.root / rel).stat().st_size,
                    "first_seq": seqs[0],
                    "last_seq": seqs[-1],
                }
            )
        for record in records or ():
            record["seq"] = self.seq
            self.seq += 1
        manifest = {
            "batch": self.batch,
            "committed_at": committed_at,
            "first_seq": first,
            "last_seq": self.seq - 1,
            "rows": sum(rows.values()),
            "transactions": 1,
            "start": None if self.batch == 1 else _end(self.batch - 1),
            "end": _end(self.batch),
            "files": files,
            "schema_changes": records or [],
            "replay": replay,
        }
        path = self.root / "_manifests" / f"{self.batch:020d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(manifest))
        if checkpoint:
            CheckpointStore(self.root).save(
                Checkpoint(
                    batch=self.batch,
                    next_seq=self.seq,
                    position=position_from_json(_end(self.batch), "test"),
                )
            )
        return self.batch


def _end(batch: int) -> dict[str, object]:
    return {"file": "mysql-bin.000001", "position": 1000 + batch, "mariadb_gtid": f"0-1-{batch}"}


def _rows(root: Path, after: int = 0) -> dict[str, list[tuple[object, ...]]]:
    """What the committed readers return per table: (_seq, id, v) in order."""
    out: dict[str, list[tuple[object, ...]]] = {}
    for table, files in committed_files(root, after=after).items():
        data = read_arrow(files, ["_seq", "id", "v"]).to_pylist()
        out[table] = sorted((r["_seq"], r["id"], r["v"]) for r in data)
    return out


def _settings(**kw: Any) -> cp.Settings:
    base: dict[str, Any] = {"older_than": 0.0, "target_bytes": 1 << 30, "retention": 86400.0}
    base.update(kw)
    return cp.Settings(**base)


def _data_files(root: Path, table: str = "db/t") -> list[str]:
    return sorted(p.name for p in (root / table).iterdir())


def _live(root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for table, files in committed_files(root).items():
        out[table] = sorted({Path(f.path).name for f in files})
    return out


# ------------------------------------------------------------------------------ planning


def test_consecutive_files_merge_into_one_and_readers_see_the_same_rows(tmp_path: Path) -> None:
    zone = Zone(tmp_path)
    for _ in range(20):
        zone.add({"db.t": 3, "db.u": 2})
    before = _rows(tmp_path)
    result = cp.run_compaction(LocalStore(tmp_path), _settings())
    assert (result.record, result.outputs, result.merged) == (1, 2, 40)
    assert (result.files_before, result.files_after) == (40, 2)
    assert _rows(tmp_path) == before
    assert _live(tmp_path) == {
        "db.t": [output_name(1, 98)],
        "db.u": [output_name(4, 100)],
    }
    output = pq.read_table(tmp_path / "db" / "t" / output_name(1, 98))
    assert output.schema.equals(_schema(), check_metadata=True)
    assert output.column("_seq").to_pylist() == sorted(output.column("_seq").to_pylist())
    # superseded files stay for the retention period
    assert len(_data_files(tmp_path)) == 21
    # every incremental start reads each later row once
    for after in range(21):
        assert _rows(tmp_path, after) == _rows_before(before, zone, after)


def _rows_before(
    rows: dict[str, list[tuple[object, ...]]], zone: Zone, after: int
) -> dict[str, list[tuple[object, ...]]]:
    """``rows`` (of every batch) without those of batches up to ``after``."""
    manifests = read_manifests(zone.root).manifests
    cut = manifests[after - 1].last_seq if after else 0
    out = {t: [r for r in v if int(str(r[0])) > cut] for t, v in rows.items()}
    return {t: v for t, v in out.items() if v}


def test_schema_changes_lifecycle_records_and_replays_bound_groups(tmp_path: Path) -> None:
    zone = Zone(tmp_path)
    zone.add({"db.t": 2})  # 1
    zone.add({"db.t": 2})  # 2
    zone.add({"db.t": 2}, records=[{"op": "truncate", "table": "db.t"}])  # 3: record after rows
    zone.add({"db.t": 2})  # 4
    zone.add({"db.t": 2}, version={"db.t": "v2"})  # 5: another schema version
    zone.add({"db.t": 2})  # 6
    zone.add({"db.t": 2}, replay=True)  # 7: a replay stays its own file
    zone.add({"db.t": 2})  # 8
    zone.add({"db.t": 2})  # 9
    zone.add({"db.u": 1}, records=[{"op": "rename", "table": "db.u", "to": "db.t"}])  # 10
    zone.add({"db.t": 2})  # 11
    zone.add({"db.t": 2}, committed_at="2999-01-01T00:00:00Z")  # 12: too young
    zone.add({"db.t": 2}, checkpoint=False)  # 13: not checkpointed (maybe unpublished)
    before = _rows(tmp_path)
    store = LocalStore(tmp_path)
    records = read_records(store)
    manifests, batch = cp.read_landing(store)
    live = cp.live_files(manifests, records)
    tables, marks = cp.candidates(store, manifests, live, batch, 60.0)
    groups = cp.plan(tables, marks, 1 << 30)
    batches = {m.entries[0]["path"]: m.batch for m in manifests}
    assert [[batches[m.piece.path] for m in g.members] for g in groups] == [
        [1, 2, 3],  # the truncate is after batch 3's rows: it ends the group
        [5, 6],  # batch 4 alone before the schema changes
        [8, 9],  # the rename to db.t (batch 10) ends this one; 11 alone; 12, 13 not yet
    ]
    cp.run_compaction(store, _settings(older_than=60.0))
    assert _rows(tmp_path) == before
    assert len(_live(tmp_path)["db.t"]) == 13 - 1 - 4  # 12 files of db.t, 3 groups into 3


def test_target_size_closes_groups_and_large_files_stay(tmp_path: Path) -> None:
    zone = Zone(tmp_path)
    for _ in range(10):
        zone.add({"db.t": 5})
    store = LocalStore(tmp_path)
    manifests, batch = cp.read_landing(store)
    live = cp.live_files(manifests, [])
    tables, marks = cp.candidates(store, manifests, live, batch, 0.0)
    size = min(c.bytes for c in tables["db.t"])
    assert [len(g.members) for g in cp.plan(tables, marks, 3 * size)] == [3, 3, 3]
    assert cp.plan(tables, marks, size) == []  # each file is at the target already
    before = _rows(tmp_path)
    cp.run_compaction(store, _settings(target_bytes=3 * size))
    assert len(_live(tmp_path)["db.t"]) == 4
    assert _rows(tmp_path) == before


def test_compaction_of_compacted_files_with_new_batches(tmp_path: Path) -> None:
    zone = Zone(tmp_path)
    store = LocalStore(tmp_path)
    for _ in range(5):
        zone.add({"db.t": 2})
    cp.run_compaction(store, _settings())
    for _ in range(5):
        zone.add({"db.t": 2})
    before = _rows(tmp_path)
    result = cp.run_compaction(store, _settings(retention=0.0))
    assert (result.record, result.merged, result.files_after) == (2, 6, 1)
    assert _live(tmp_path) == {"db.t": [output_name(1, 20)]}
    assert _data_files(tmp_path) == [output_name(1, 20)]  # retention 0: all else gone
    assert _rows(tmp_path) == before
    for after in range(11):
        assert _rows(tmp_path, after) == _rows_before(before, zone, after)
    assert cp.run_compaction(store, _settings()).record is None  # nothing left to merge
    # the daemon starts on it: superseded files gone is fine, outputs are no strays
    checkpoint = LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert checkpoint.batch == 10


# ------------------------------------------------------------------------------ failures


class Boom(Exception):
    pass


class FailAt:
    """A fault injector that raises at one step (the crash tests kill instead)."""

    def __init__(self, step: str) -> None:
        self.step = step

    def at(self, step: str) -> None:
        if step == self.step:
            raise Boom(step)


STEPS = (
    "compact-intent",
    "compact-data-mid",
    "compact-data",
    "compact-record",
    "compact-publish",
    "compact-retain-mid",
)


def _failed_at(
    tmp_path: Path, step: str
) -> tuple[Path, LocalStore, dict[str, list[tuple[object, ...]]]]:
    """A zone of six batches whose compaction failed at ``step``: its root, its store and
    the rows it held before."""
    zone = Zone(tmp_path / "z")
    root = zone.root
    for _ in range(6):
        zone.add({"db.t": 2, "db.u": 1})
    before = _rows(root)
    store = LocalStore(root)
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(retention=0.0), FailAt(step))
    return root, store, before


def test_a_failure_after_the_record_leaves_the_old_files_read_until_recovered(
    tmp_path: Path,
) -> None:
    root, store, before = _failed_at(tmp_path, "compact-record")
    # committed, not yet published: readers read the old files
    assert read_manifests(root).waiting is None
    assert _live(root)["db.t"] == _original(root, "t")
    assert _rows(root) == before
    cp.recover(store)
    assert _live(root)["db.t"] == [output_name(1, 17)]
    assert _rows(root) == before


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_at_every_step_leaves_old_or_new_committed(tmp_path: Path, step: str) -> None:
    root, store, before = _failed_at(tmp_path, step)
    committed = step in ("compact-record", "compact-publish", "compact-retain-mid")
    if step == "compact-record":  # committed, not yet published (the test above): publish
        cp.recover(store)
    assert _rows(root) == before
    assert len(read_records(store)) == (1 if committed else 0)
    live = _live(root)
    assert live["db.t"] == ([output_name(1, 17)] if committed else _original(root, "t"))
    # the daemon's start cleans up (or rolls forward) too, and the next run finishes
    LandingZone(SinkConfig(root=str(root))).recover()
    assert _rows(root) == before
    assert not [p for p in root.rglob(".compact-*")]
    result = cp.run_compaction(store, _settings(retention=0.0))
    assert result.record == (None if committed else 1)
    assert _live(root) == {"db.t": [output_name(1, 17)], "db.u": [output_name(3, 18)]}
    assert _data_files(root) == [output_name(1, 17)]
    assert _rows(root) == before


def _original(root: Path, table: str) -> list[str]:
    return sorted(p.name for p in (root / "db" / table).glob("part-*.parquet"))


def test_uncommitted_outputs_are_removed_and_a_running_compactor_is_left_alone(
    tmp_path: Path,
) -> None:
    zone = Zone(tmp_path)
    for _ in range(3):
        zone.add({"db.t": 2, "db.u": 1})
    store = LocalStore(tmp_path)
    with pytest.raises(Boom):  # killed after its first output: intent and output are left
        cp.run_compaction(store, _settings(), FailAt("compact-data-mid"))
    staged = tmp_path / "db" / "t" / f".{output_name(1, 8)}.tmp"
    intent = tmp_path / intent_key(1)
    assert staged.exists() and intent.exists()
    lock = cp.CompactionLock(store)
    assert lock.take_or_holder() is None
    try:
        with pytest.raises(SinkError, match="held by another process") as caught:
            cp.run_compaction(store, _settings())
        holder = f"pid {os.getpid()} on {socket.gethostname()}, replicator compact since"
        assert holder in str(caught.value)
        assert caught.value.hint == "wait for it to finish; one compactor at a time"
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
        assert staged.exists() and intent.exists()  # a compactor may be writing them
    finally:
        lock.release()
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert not staged.exists() and not intent.exists()


def test_a_compactor_waits_for_a_daemons_start_recovery_but_not_for_ever(tmp_path: Path) -> None:
    """A daemon starting holds the compaction lock while it cleans up: `replicator compact`
    started meanwhile waits for it and then runs; a recovery that outlasts the wait is named."""
    zone = Zone(tmp_path)
    for _ in range(3):
        zone.add({"db.t": 2})
    store = LocalStore(tmp_path)
    recovery = cp.compaction_lock(store, purpose=cp.START_RECOVERY)
    assert recovery.take_or_holder() is None
    try:
        waiting = cp.compaction_lock(store).held(recovery_wait=0.3)
        with pytest.raises(SinkError, match="held by another process") as caught, waiting:
            pass
        assert "recovery at a daemon's start" in str(caught.value)
        assert "did not end within 0 s" in (caught.value.hint or "")
        result, waited = compact_while_released(store, recovery, _settings())
    finally:
        recovery.release()
    assert result.record == 1 and waited >= 0.4
    assert_free(store)


def _held_by_a_compactor(entry: Mapping[str, Any]) -> bool:
    """The log entry names this process, as ``replicator compact``, as the lock's holder."""
    here = f"pid {os.getpid()} on {socket.gethostname()}, replicator compact since"
    return here in entry["holder"]


def test_a_daemons_start_recovery_names_the_compactor_it_leaves_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = captured_log(monkeypatch, cp)
    store = LocalStore(tmp_path)
    compactor = cp.compaction_lock(store)
    assert compactor.take_or_holder() is None
    try:
        assert not cp.recover_if_idle(store)
    finally:
        compactor.release()
    assert [entry["event"] for entry in capture.entries] == [
        "compaction recovery skipped: a compactor runs"
    ]
    assert _held_by_a_compactor(capture.entries[0])
    assert cp.recover_if_idle(store)  # once it let go


def test_a_daemons_compaction_round_names_the_compactor_it_skips_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = captured_log(monkeypatch, cp)
    zone = Zone(tmp_path)
    for _ in range(3):
        zone.add({"db.t": 2})
    config = Config(
        sink=SinkConfig(root=str(tmp_path), compaction=CompactionConfig(older_than=0.0))
    )
    service = Service(config, RunOptions())
    compactor = cp.compaction_lock(LocalStore(tmp_path))
    assert compactor.take_or_holder() is None
    try:
        assert service._compact_once() is None
    finally:
        compactor.release()
    assert [entry["event"] for entry in capture.entries] == [
        "compaction round skipped: the compaction lock is held"
    ]
    assert _held_by_a_compactor(capture.entries[0])
    done = service._compact_once()  # once it let go
    assert done is not None and done.record == 1


def compact_while_released(
    store: Store, holder: cp.CompactionGuard, settings: cp.Settings
) -> tuple[cp.Result, float]:
    """Run a compaction while ``holder`` lets go of the lock 0.5 s later: its result, and how
    long it took."""
    timer = threading.Timer(0.5, holder.release)
    timer.start()
    started = time.monotonic()
    try:
        return cp.run_compaction(store, settings), time.monotonic() - started
    finally:
        timer.join()


def assert_free(store: Store) -> None:
    """Nobody holds the compaction lock of ``store``."""
    free = cp.compaction_lock(store)
    assert free.take_or_holder() is None
    free.release()


def test_daemon_recovery_accepts_only_superseded_files_gone(tmp_path: Path) -> None:
    zone = Zone(tmp_path)
    for _ in range(4):
        zone.add({"db.t": 2})
    zone.add({"db.u": 2})
    cp.run_compaction(LocalStore(tmp_path), _settings(retention=0.0))
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    (tmp_path / "db" / "u" / "part-00000000000000000009.parquet").unlink()  # never compacted
    with pytest.raises(IntegrityError, match=r"its file db/u/part-00000000000000000009\.parquet"):
        LandingZone(SinkConfig(root=str(tmp_path))).recover()


# ------------------------------------------------------------------------------ records


def _record(root: Path, number: int = 1) -> Path:
    return root / "_compactions" / f"{number:020d}.json"


def _compacted(tmp_path: Path) -> Path:
    zone = Zone(tmp_path)
    for _ in range(4):
        zone.add({"db.t": 2})
    cp.run_compaction(LocalStore(tmp_path), _settings())
    return _record(tmp_path)


def test_a_record_that_does_not_add_up_stops_writers_and_readers(tmp_path: Path) -> None:
    path = _compacted(tmp_path)
    data = json.loads(path.read_text())
    data["outputs"][0]["rows"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match="holds other rows than the files it replaces"):
        cp.run_compaction(LocalStore(tmp_path), _settings())
    with pytest.raises(IntegrityError, match="holds other rows than the files it replaces"):
        committed_files(tmp_path)


def test_a_missing_record_or_a_foreign_file_stops(tmp_path: Path) -> None:
    path = _compacted(tmp_path)
    data = json.loads(path.read_text())
    data["compaction"] = 2
    _record(tmp_path, 2).write_text(json.dumps(data))
    original = path.read_bytes()
    path.unlink()
    with pytest.raises(IntegrityError, match=r"_compactions/00000000000000000001\.json is missing"):
        read_records(LocalStore(tmp_path))
    with pytest.raises(IntegrityError, match="a record is missing"):
        committed_files(tmp_path)
    _record(tmp_path, 2).unlink()
    path.write_bytes(original)
    (path.parent / "notes.txt").write_text("mine")
    with pytest.raises(IntegrityError, match="not a compaction record"):
        cp.run_compaction(LocalStore(tmp_path), _settings())


def test_a_record_naming_a_file_that_is_not_live_stops(tmp_path: Path) -> None:
    path = _compacted(tmp_path)
    second = json.loads(path.read_text())
    second["compaction"] = 2
    _record(tmp_path, 2).write_text(json.dumps(second))  # supersedes the same files again
    with pytest.raises(IntegrityError, match="which is not a committed, live file"):
        cp.run_compaction(LocalStore(tmp_path), _settings())


# ------------------------------------------------------------------------------ lost records


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the landing zone but the daemon's and the lock's state, with its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.relative_to(root).parts[0] != "_state"
    }


def _compacted_thrice(root: Path) -> Zone:
    """Three compactions with retention 0, four batches before each: each merged the
    previous output and the newer files, and retention deleted all they superseded."""
    zone = Zone(root)
    for _ in range(3):
        for _ in range(4):
            zone.add({"db.t": 2, "db.u": 1})
        cp.run_compaction(LocalStore(root), _settings(retention=0.0))
    return zone


@pytest.mark.parametrize("lost", [3, 2], ids=["the-last", "one-in-the-middle"])
def test_a_lost_record_stops_compaction_and_the_daemon_naming_it_and_nothing_is_deleted(
    tmp_path: Path, lost: int
) -> None:
    """Retention deleted what the records superseded; then a record is lost. Its outputs are
    the only copy of their rows: nobody may take them for leftovers."""
    _compacted_thrice(tmp_path)
    before = _rows(tmp_path)
    assert _data_files(tmp_path) == [output_name(1, 35)]  # the only copy of db.t's rows
    record = tmp_path / record_key(lost)
    saved = record.read_bytes()
    record.unlink()
    kept = _files(tmp_path)
    named = rf"compaction record {tmp_path}/_compactions/{lost:020d}\.json is missing"
    store = LocalStore(tmp_path)
    with pytest.raises(IntegrityError, match=named) as caught:
        cp.run_compaction(store, _settings(retention=0.0))
    assert f"restore _compactions/{lost:020d}.json" in caught.value.hint
    assert _files(tmp_path) == kept
    config = tmp_path.parent / f"{tmp_path.name}.yaml"
    config.write_text(
        "source:\n  host: 127.0.0.1\n  user: repl\n  server_id: 9\n"
        f"sink:\n  root: {tmp_path}\n  compaction:\n    older_than: 0\n    retention: 0\n"
    )
    ran = CliRunner().invoke(main, ["compact", "--config", str(config)])
    assert ran.exit_code == 4, ran.output
    assert f"_compactions/{lost:020d}.json is missing" in ran.output
    assert _files(tmp_path) == kept
    with pytest.raises(IntegrityError, match=named):  # the daemon's start names it too
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    with pytest.raises(IntegrityError, match=named):
        cp.recover_if_idle(store)
    assert _files(tmp_path) == kept
    record.write_bytes(saved)  # restored from a backup: everything reads as before
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert _rows(tmp_path) == before


BEFORE_RECORD = ("compact-intent", "compact-data-mid", "compact-data")


@pytest.mark.parametrize("cleaner", ["next-run", "daemon-start"])
@pytest.mark.parametrize("step", BEFORE_RECORD)
def test_a_run_killed_before_its_record_is_cleaned_up_exactly(
    tmp_path: Path, step: str, cleaner: str
) -> None:
    zone = Zone(tmp_path)
    for _ in range(6):
        zone.add({"db.t": 2, "db.u": 1})
    before, originals = _rows(tmp_path), _files(tmp_path)
    store = LocalStore(tmp_path)
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(), FailAt(step))
    intent = json.loads((tmp_path / intent_key(1)).read_text())
    assert intent["intent"] == 1
    t_out, u_out = f"db/t/{output_name(1, 17)}", f"db/u/{output_name(3, 18)}"
    assert [o["path"] for o in intent["outputs"]] == [t_out, u_out]
    assert [len(o["replaces"]) for o in intent["outputs"]] == [6, 6]
    written = {"compact-intent": [], "compact-data-mid": [t_out], "compact-data": [t_out, u_out]}
    left = set(_files(tmp_path)) - set(originals)
    assert left == {intent_key(1), *(store.staged(o) for o in written[step])}
    assert _rows(tmp_path) == before
    if cleaner == "next-run":
        cp.recover(store)  # what a run does first
    else:
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert _files(tmp_path) == originals  # exactly what it left is gone, the rest as it was
    assert _rows(tmp_path) == before
    assert cp.run_compaction(store, _settings()).record == 1


@pytest.mark.parametrize("stray", ["in-place", "staged"])
@pytest.mark.parametrize("intent", [False, True], ids=["no-intent", "another-intent"])
def test_an_output_no_record_or_intent_names_is_refused_not_deleted(
    tmp_path: Path, stray: str, intent: bool
) -> None:
    zone = Zone(tmp_path)
    for _ in range(3):
        zone.add({"db.t": 2})
    store = LocalStore(tmp_path)
    if intent:  # a killed run's intent names compact-1-6, not the stray
        with pytest.raises(Boom):
            cp.run_compaction(store, _settings(), FailAt("compact-intent"))
    name = output_name(1, 4)
    path = tmp_path / "db" / "t" / (name if stray == "in-place" else f".{name}.tmp")
    path.write_bytes(b"rows of a compaction whose record is lost")
    kept = _files(tmp_path)
    named = rf"{path}; compaction record {tmp_path}/_compactions/00000000000000000001\.json"
    with pytest.raises(IntegrityError, match=named):
        cp.run_compaction(store, _settings())
    assert _files(tmp_path) == kept
    with pytest.raises(IntegrityError, match=named):
        LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert _files(tmp_path) == kept
    path.unlink()  # moved out by hand: then the leftovers of the killed run go
    LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert not (tmp_path / intent_key(1)).exists()


def _intent_to_2(root: Path) -> None:
    intent = root / intent_key(1)
    data = json.loads(intent.read_text())
    data["intent"] = 2
    (root / intent_key(2)).write_text(json.dumps(data))
    intent.unlink()


def _publish_one(root: Path) -> None:
    staged = root / "db" / "t" / f".{output_name(1, 17)}.tmp"
    staged.rename(staged.with_name(output_name(1, 17)))


def _replaced_gone(root: Path) -> None:
    (root / "db" / "u" / "part-00000000000000000003.parquet").unlink()


@pytest.mark.parametrize("change", [_intent_to_2, _publish_one, _replaced_gone])
def test_an_intent_that_shows_its_record_was_lost_stops_recovery(
    tmp_path: Path, change: Any
) -> None:
    """The run committed (killed after its record), then the record was lost: an intent
    beyond the next number, an output in place (renamed only after the record), or a file
    it replaced gone (deleted only after the record) prove it; nothing is deleted."""
    zone = Zone(tmp_path)
    for _ in range(6):
        zone.add({"db.t": 2, "db.u": 1})
    store = LocalStore(tmp_path)
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(), FailAt("compact-record"))
    (tmp_path / record_key(1)).unlink()
    change(tmp_path)
    kept = _files(tmp_path)
    with pytest.raises(IntegrityError, match=r"_compactions/00000000000000000001\.json is missing"):
        cp.recover(store)
    assert _files(tmp_path) == kept


class Then(FailAt):
    """A fault injector that does something at one step instead of failing."""

    def __init__(self, step: str, action: Any) -> None:
        super().__init__(step)
        self.action = action

    def at(self, step: str) -> None:
        if step == self.step:
            self.action()


def test_outputs_carry_their_hash_and_one_changed_before_the_record_is_not_committed(
    tmp_path: Path,
) -> None:
    zone = Zone(tmp_path)
    for _ in range(6):
        zone.add({"db.t": 2, "db.u": 1})
    before = _rows(tmp_path)
    store = LocalStore(tmp_path)
    staged = tmp_path / "db" / "u" / f".{output_name(3, 18)}.tmp"

    def flip_a_byte() -> None:  # the same size, other bytes
        data = bytearray(staged.read_bytes())
        data[len(data) // 2] ^= 0xFF
        staged.write_bytes(bytes(data))

    with pytest.raises(SinkError, match=r"is gone or changed before its commit: sha256") as caught:
        cp.run_compaction(store, _settings(), Then("compact-data", flip_a_byte))
    assert str(staged) in str(caught.value)
    assert not read_records(store) and _rows(tmp_path) == before
    assert cp.run_compaction(store, _settings()).record == 1
    record = json.loads(_record(tmp_path).read_text())
    for output in record["outputs"]:
        assert (output["bytes"], output["sha256"]) == hash_key(store, output["path"])
    assert _rows(tmp_path) == before


def test_records_from_before_hashes_are_read_and_an_invalid_hash_stops(tmp_path: Path) -> None:
    path = _compacted(tmp_path)
    data = json.loads(path.read_text())
    assert is_digest(data["outputs"][0].pop("sha256"))
    path.write_text(json.dumps(data))  # as written before hashes
    assert read_records(LocalStore(tmp_path))[0].outputs[0].sha256 is None
    assert len(_rows(tmp_path)["db.t"]) == 8
    data["outputs"][0]["sha256"] = "0" * 63
    path.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match="with an invalid sha256 '0000"):
        read_records(LocalStore(tmp_path))


def test_a_settled_output_that_may_not_merge_is_planned_as_such(tmp_path: Path) -> None:
    """An output's recorded size spares its footer read; it does not make it eligible."""
    zone = Zone(tmp_path)
    for _ in range(4):
        zone.add({"db.t": 5})
    store = LocalStore(tmp_path)
    cp.run_compaction(store, _settings())
    records = read_records(store)
    manifests, batch = cp.read_landing(store)
    live = cp.live_files(manifests, records)
    (output,) = records[0].outputs
    assert output.data_bytes is not None
    settled = {output.piece.path: output.data_bytes}
    tables, _ = cp.candidates(
        store, manifests, live, batch, 3600.0, settled=settled, target_bytes=output.data_bytes
    )  # committed long ago (OLD), so old enough: eligible
    recent, _ = cp.candidates(
        store, manifests, live, 0, 0.0, settled=settled, target_bytes=output.data_bytes
    )  # before the checkpoint's batch 0: nothing may merge

    assert [(c.eligible, c.bytes, c.schema) for c in tables["db.t"]] == [
        (True, output.data_bytes, None)
    ]
    assert [(c.eligible, c.bytes) for c in recent["db.t"]] == [(False, 0)]


def test_records_from_before_data_bytes_are_read_and_invalid_data_bytes_stop(
    tmp_path: Path,
) -> None:
    path = _compacted(tmp_path)
    data = json.loads(path.read_text())
    output = data["outputs"][0]
    assert 0 < output.pop("data_bytes") < output["bytes"]
    path.write_text(json.dumps(data))  # as written before data_bytes
    assert read_records(LocalStore(tmp_path))[0].outputs[0].data_bytes is None
    assert len(_rows(tmp_path)["db.t"]) == 8
    for wrong in (-1, output["bytes"] + 1, True, "12"):
        output["data_bytes"] = wrong
        path.write_text(json.dumps(data))
        with pytest.raises(IntegrityError, match=f"with an invalid data_bytes {wrong!r}"):
            read_records(LocalStore(tmp_path))


def test_retention_keeps_superseded_files_until_the_grace_period_ends(tmp_path: Path) -> None:
    _compacted(tmp_path)
    store = LocalStore(tmp_path)
    assert cp.retain(store, read_records(store), 3600.0) == []
    assert len(_original(tmp_path, "t")) == 4
    gone = cp.retain(store, read_records(store), 0.0)
    assert len(gone) == 4 and _original(tmp_path, "t") == []
    assert len(_rows(tmp_path)["db.t"]) == 8


def test_retention_keeps_what_a_lost_output_replaced(tmp_path: Path) -> None:
    """The committed output of a compaction is gone (a stray delete, a bad restore, a lease
    taken over on an object store): retention deletes none of the files it replaced, which
    are then the only copy of their rows, and stops naming the output and its record. Once
    the output is back, retention goes on."""
    zone = Zone(tmp_path)
    for _ in range(6):
        zone.add({"db.t": 3})
    before = _rows(tmp_path)
    store = LocalStore(tmp_path)
    cp.run_compaction(store, _settings())
    (output,) = (tmp_path / "db" / "t").glob("compact-*.parquet")
    kept = output.read_bytes()
    output.unlink()
    with pytest.raises(IntegrityError, match=r"compaction output .* \(record .*\) is missing"):
        cp.run_compaction(store, _settings(retention=0.0, target_bytes=1))
    assert len(_data_files(tmp_path)) == 6  # the batches' files, every one
    output.write_bytes(kept)
    result = cp.run_compaction(store, _settings(retention=0.0, target_bytes=1))
    assert result.deleted == 6
    assert _rows(tmp_path) == before


def test_retention_lists_each_folder_once_instead_of_asking_for_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records keep naming what they replaced after retention deleted it: a later run
    must not ask the store for each of those files (a request each on an object store)."""
    _compacted(tmp_path)
    store = LocalStore(tmp_path)
    records = read_records(store)
    asked: list[tuple[str, str]] = []
    for name in ("exists", "size", "list", "list_sizes"):
        method = getattr(store, name)

        def counted(*args: Any, _name: str = name, _method: Any = method) -> Any:
            asked.append((_name, *args))
            return _method(*args)

        monkeypatch.setattr(store, name, counted)
    assert len(cp.retain(store, records, 0.0)) == 4
    assert asked == [("list", "db/t")]
    asked.clear()
    assert cp.retain(store, records, 0.0) == []
    assert asked == [("list", "db/t")]
    assert len(_rows(tmp_path)["db.t"]) == 8


def test_outputs_at_the_target_size_are_planned_from_their_record_not_their_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compacted zone's live files are mostly outputs at the target size: a later run must
    not read all their footers again (two requests each on an object store) to find that."""
    zone = Zone(tmp_path)
    for _ in range(12):
        zone.add({"db.t": 5})
    store = LocalStore(tmp_path)
    manifests, batch = cp.read_landing(store)
    tables, _ = cp.candidates(store, manifests, cp.live_files(manifests, []), batch, 0.0)
    first = cp.run_compaction(store, _settings(target_bytes=3 * tables["db.t"][0].bytes))
    outputs = json.loads(_record(tmp_path).read_text())["outputs"]
    recorded = [o["data_bytes"] for o in outputs]
    footers = [cp.footer(store, o["path"])[1] for o in outputs]
    zone.add({"db.t": 5})
    zone.add({"db.t": 5})
    before = _rows(tmp_path)
    read: list[str] = []
    footer = cp.footer

    def counted(store: Store, path: str) -> Any:
        read.append(path)
        return footer(store, path)

    monkeypatch.setattr(cp, "footer", counted)
    second = cp.run_compaction(store, _settings(target_bytes=min(recorded)))

    assert first.outputs == 4
    assert recorded == footers
    assert (second.record, second.outputs, second.merged) == (2, 1, 2)
    assert sorted(read) == [f"db/t/part-{seq:020d}.parquet" for seq in (61, 66)]
    assert _live(tmp_path)["db.t"] == sorted(
        [*(o["path"].rpartition("/")[2] for o in outputs), output_name(61, 70)]
    )
    assert _rows(tmp_path) == before


def test_durations_and_sizes_of_the_command(tmp_path: Path) -> None:
    from replicator.cli import _bytes, _seconds
    from replicator.errors import ConfigError

    assert _seconds("1d", "x") == 86400 and _seconds("0s", "x") == 0 and _seconds("90", "x") == 90
    assert _bytes("128MB", "x") == 128 * 1024**2 and _bytes("2kb", "x") == 2048
    for bad in ("soon", "-1h"):
        with pytest.raises(ConfigError):
            _seconds(bad, "--older-than")
    with pytest.raises(ConfigError):
        _bytes("12", "--target-size")
    shutil.rmtree(tmp_path, ignore_errors=True)


def _hashed_zone(root: Path) -> Path:
    """Six batches of db.t, the second batch's file recorded with its SHA-256 (as the daemon
    records it); returns that file."""
    zone = Zone(root)
    for _ in range(6):
        zone.add({"db.t": 3})
    hashed = root / "db" / "t" / f"part-{4:020d}.parquet"
    manifest = root / "_manifests" / f"{2:020d}.json"
    data = json.loads(manifest.read_text())
    data["files"][0]["sha256"] = hashlib.sha256(hashed.read_bytes()).hexdigest()
    manifest.write_text(json.dumps(data))
    return hashed


def test_a_file_replaced_right_after_its_check_is_not_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What compaction merges are the bytes it checked against the commit record: a file
    replaced just after its check (a valid Parquet file of the same schema and ``_seq``, other
    values) does not reach the output."""
    target = _hashed_zone(tmp_path)
    before = _rows(tmp_path)
    original = pq.read_table(target)
    field = original.schema.field("v")
    other = original.set_column(
        original.schema.get_field_index("v"),
        field,
        pa.array(["replaced"] * original.num_rows, field.type),
    )
    check = cp._check_input
    replaced: list[str] = []

    def check_then_replace(store: Store, path: str, recorded: Any, found: Any = None) -> None:
        if found is None:  # hashed as a stream
            check(store, path, recorded)
        else:  # hashed from the bytes at hand
            check(store, path, recorded, found)
        if path.endswith(target.name):
            pq.write_table(other, target, **writer_options("zstd"))
            replaced.append(path)

    monkeypatch.setattr(cp, "_check_input", check_then_replace)
    result = cp.run_compaction(LocalStore(tmp_path), _settings())
    assert replaced and result.merged == 6
    assert _rows(tmp_path) == before
    assert "replaced" not in {row[2] for row in _rows(tmp_path)["db.t"]}


def test_a_damaged_input_is_not_merged(tmp_path: Path) -> None:
    """A committed file that is not what its manifest says (a byte changed in its data, same
    size, footer intact) is never merged: its damage would live on in an output with a new,
    valid hash, and retention would then delete the file that shows it."""
    damaged = _hashed_zone(tmp_path)
    raw = bytearray(damaged.read_bytes())
    raw[8] ^= 0xFF  # inside the first column chunk's data
    damaged.write_bytes(bytes(raw))
    before = _files(tmp_path)
    with pytest.raises(IntegrityError, match="is not what its commit record says") as refused:
        cp.run_compaction(LocalStore(tmp_path), _settings())
    assert "part-00000000000000000004.parquet" in str(refused.value)
    assert "nothing was compacted" in str(refused.value)
    after = {k: v for k, v in _files(tmp_path).items() if not k.endswith(".intent.json")}
    assert after == before
    assert not (tmp_path / "_compactions" / f"{1:020d}.json").exists()


def test_a_checkpoint_removed_after_retention_is_rebuilt(tmp_path: Path) -> None:
    """The recovery operations.md gives for a bad checkpoint (remove it: it is rebuilt from the
    manifests) after compaction and retention: the manifests' files superseded and deleted
    are not published again, and nothing is lost."""
    zone = Zone(tmp_path)
    for _ in range(4):
        zone.add({"db.t": 2})
    before = _rows(tmp_path)
    cp.run_compaction(LocalStore(tmp_path), _settings(retention=0.0))
    (tmp_path / "_state" / "checkpoint.json").unlink()
    checkpoint = LandingZone(SinkConfig(root=str(tmp_path))).recover()
    assert checkpoint.batch == 4
    assert _rows(tmp_path) == before


def test_a_rename_left_undone_gives_readers_their_grace_when_it_is_done(tmp_path: Path) -> None:
    """A compactor killed between its record and the rename: readers go on resolving the
    replaced files. The run that renames the output later leaves them for the retention
    period counted from the rename, however old the record is."""
    zone = Zone(tmp_path)
    for _ in range(4):
        zone.add({"db.t": 2})
    store = LocalStore(tmp_path)
    retention = 1.0
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(retention=retention), FailAt("compact-record"))
    time.sleep(retention + 0.2)  # the record is older than the retention period
    files = committed_files(tmp_path)["db.t"]  # a reader resolves the files now
    assert all(f.within is None for f in files)  # the original part files
    cp.run_compaction(store, _settings(retention=retention))  # renames the output
    assert committed_files(tmp_path)["db.t"] != files  # new readers take the output
    assert all(Path(f.path).exists() for f in files)
    cp.run_compaction(store, _settings(retention=retention))  # a run at once: still kept
    assert all(Path(f.path).exists() for f in files)
    time.sleep(retention + 0.2)
    cp.run_compaction(store, _settings(retention=retention))  # their grace is over
    assert not any(Path(f.path).exists() for f in files)
