"""Compaction and retention of a landing zone in an object store, against a real S3 API server
(moto's, started by the tests).

There is no rename: outputs are written at their final keys before the record that commits
them, and the lock is a lease object (``_state/compact-lease.json``). A failure at every step
leaves the old files or the new ones committed, never both, and the committed readers return
the same rows; an output no record names is a leftover that only the lease holder deletes (a
compactor that holds the lease is never disturbed by the daemon's start); a compactor that
lost its lease, or whose outputs went, commits nothing; retention deletes superseded objects
after the grace period; ``replicator compact`` takes an ``s3://`` root with the config's
``sink.object_store``.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.config import ObjectStoreConfig, Secret, SinkConfig
from replicator.errors import IntegrityError, ReplicatorError, SinkError
from replicator.landed.committed import committed_files, read_manifests
from replicator.landed.compacted import (
    intent_key,
    output_name,
    read_arrow,
    read_records,
    record_key,
)
from replicator.sink import compaction as cp
from replicator.sink.landing import LandingZone
from replicator.sink.verify import verify_landing
from replicator.storage import ObjectStoreOptions, Store, open_store
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.unit.test_compaction import (
    STEPS,
    Boom,
    FailAt,
    Zone,
    assert_free,
    compact_while_released,
)

_names = itertools.count()


@pytest.fixture
def url(s3_server: S3Server) -> str:
    return f"s3://{s3_server.bucket(f'compact-{next(_names)}')}/zone"


def _store(server: S3Server, url: str) -> Store:
    return open_store(
        url,
        ObjectStoreOptions(
            endpoint=server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
        ),
    )


def _sink(server: S3Server, url: str) -> SinkConfig:
    return SinkConfig(
        root=url,
        object_store=ObjectStoreConfig(
            endpoint=server.endpoint,
            region=REGION,
            access_key=Secret(ACCESS_KEY),
            secret_key=Secret(SECRET_KEY),
        ),
    )


def _zone(tmp_path: Path, store: Store, batches: int = 6) -> None:
    """The landing zone ``Zone`` builds (batches of db.t and db.u), uploaded to ``store``."""
    zone = Zone(tmp_path / "built")
    for _ in range(batches):
        zone.add({"db.t": 2, "db.u": 1})
    for path in sorted(zone.root.rglob("*")):
        if path.is_file():
            store.write(path.relative_to(zone.root).as_posix(), path.read_bytes())


def _rows(store: Store, after: int = 0) -> dict[str, list[tuple[object, ...]]]:
    """What the committed readers return per table: (_seq, id, v) in order."""
    out: dict[str, list[tuple[object, ...]]] = {}
    for table, files in committed_files(store, after=after).items():
        data = read_arrow(files, ["_seq", "id", "v"]).to_pylist()
        out[table] = sorted((r["_seq"], r["id"], r["v"]) for r in data)
    return out


# each run's outputs carry a token of their own on an object store: names are compared
# without it (``output_name(first, last)``)
_RUN = re.compile(r"-[0-9a-f]{16}(?=\.parquet)")


def _plain(name: str) -> str:
    return _RUN.sub("", name)


def _live(store: Store) -> dict[str, list[str]]:
    return {
        table: sorted({_plain(f.key.rpartition("/")[2]) for f in files})
        for table, files in committed_files(store).items()
    }


def _key(store: Store, plain: str) -> str:
    """The key of the output named ``plain`` (a folder and ``output_name``) with its run."""
    folder = plain.rpartition("/")[0]
    return next(key for key in store.list(folder) if _plain(key) == plain)


def _listed(store: Store, table: str = "db/t") -> list[str]:
    """What a plain listing of the table's folder shows (output names without their run)."""
    return [_plain(key.rpartition("/")[2]) for key in store.list(table)]


def _settings(**kw: Any) -> cp.Settings:
    base: dict[str, Any] = {"older_than": 0.0, "target_bytes": 1 << 30, "retention": 86400.0}
    base.update(kw)
    return cp.Settings(**base)


def _lease(store: Store, **fields: object) -> None:
    """A compaction lease as another compactor left it."""
    record = {
        "owner": "e" * 32,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "pid_namespace": os.readlink("/proc/self/ns/pid"),
        "since": "2026-01-01T00:00:00+00:00",
        "purpose": "replicator compact",
        "expires": time.time() + 600,
        **fields,
    }
    store.write(cp.LEASE_KEY, json.dumps(record).encode())


T_OUT, U_OUT = output_name(1, 17), output_name(3, 18)


def test_planning_reads_the_footers_several_at_a_time(
    tmp_path: Path, s3_server: S3Server, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each candidate's footer is a read of its own: on an object store several are in
    flight at once, and the plan is the one a read at a time gives."""
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    lock = threading.Lock()
    flight = {"now": 0, "most": 0}
    footer = cp.footer

    def slow(store: Store, path: str) -> Any:
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        try:
            time.sleep(0.05)
            return footer(store, path)
        finally:
            with lock:
                flight["now"] -= 1

    monkeypatch.setattr(cp, "footer", slow)
    result = cp.run_compaction(store, _settings())
    assert (result.record, result.outputs, result.merged) == (1, 2, 12)
    assert _live(store) == {"db.t": [T_OUT], "db.u": [U_OUT]}
    assert _rows(store) == before
    assert flight["most"] > 1


def test_compaction_and_retention_on_an_object_store(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    assert len(_listed(store)) == 6
    result = cp.run_compaction(store, _settings())
    assert (result.record, result.outputs, result.merged) == (1, 2, 12)
    assert (result.files_before, result.files_after) == (12, 2)
    assert _rows(store) == before
    assert _live(store) == {"db.t": [T_OUT], "db.u": [U_OUT]}
    for after in range(7):  # incremental reads: each later row once
        cut = read_manifests(store).manifests[after - 1].last_seq if after else 0
        expected = {t: [r for r in v if int(str(r[0])) > cut] for t, v in before.items()}
        assert _rows(store, after) == {t: v for t, v in expected.items() if v}
    # superseded objects stay for the grace period: a plain listing sees old and new
    assert len(_listed(store)) == 7 and T_OUT in _listed(store)
    assert cp.retain(store, read_records(store), 3600.0) == []
    gone = cp.retain(store, read_records(store), 0.0)
    assert len(gone) == 12 and _listed(store) == [T_OUT] and _listed(store, "db/u") == [U_OUT]
    assert _rows(store) == before
    # the lease was let go; the daemon's start accepts the superseded files gone
    assert json.loads(store.read(cp.LEASE_KEY))["ended"]
    assert LandingZone(_sink(s3_server, url)).recover().batch == 6
    assert _rows(store) == before


def _failed_at(
    tmp_path: Path, s3_server: S3Server, url: str, step: str
) -> tuple[Store, dict[str, list[tuple[object, ...]]], list[str]]:
    """A zone of six batches whose compaction failed at ``step``: its store, the rows it held
    before and the files of db.t it listed then."""
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    originals = _listed(store)
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(retention=0.0), FailAt(step))
    return store, before, originals


def test_a_failure_amid_the_data_leaves_an_uncommitted_output_at_its_key(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store, before, originals = _failed_at(tmp_path, s3_server, url, "compact-data-mid")
    # the first output is there, at its final key, uncommitted: the old files are read
    assert _listed(store) == sorted([*originals, T_OUT])
    assert _live(store)["db.t"] == originals
    assert _rows(store) == before
    LandingZone(_sink(s3_server, url)).recover()  # deletes it
    assert _listed(store) == originals
    assert _rows(store) == before


@pytest.mark.parametrize("step", STEPS)
def test_a_failure_at_every_step_leaves_old_or_new_committed(
    tmp_path: Path, s3_server: S3Server, url: str, step: str
) -> None:
    store, before, originals = _failed_at(tmp_path, s3_server, url, step)
    committed = step in ("compact-record", "compact-publish", "compact-retain-mid")
    # no rename to wait for: once the record is there, the outputs are read, else the old files
    assert read_manifests(store).waiting is None
    assert _rows(store) == before
    assert len(read_records(store)) == (1 if committed else 0)
    assert _live(store)["db.t"] == ([T_OUT] if committed else originals)
    # (the test above: after compact-data-mid the first output is there, uncommitted)
    # the daemon's start deletes the uncommitted outputs (the lease is free)
    LandingZone(_sink(s3_server, url)).recover()
    assert _rows(store) == before
    listed = _listed(store) + _listed(store, "db/u")
    assert (T_OUT in listed) == committed and (U_OUT in listed) == committed
    result = cp.run_compaction(store, _settings(retention=0.0))
    assert result.record == (None if committed else 1)
    assert _live(store) == {"db.t": [T_OUT], "db.u": [U_OUT]}
    assert _listed(store) == [T_OUT] and _listed(store, "db/u") == [U_OUT]
    assert _rows(store) == before


def test_the_lease_keeps_a_second_compactor_and_the_daemons_recovery_out(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store, batches=3)
    leftover = _killed_after_an_output(store)  # as a compactor writing it leaves it
    holder = cp.compaction_lock(store, lease_seconds=30)
    assert isinstance(holder, cp.CompactionLease)
    assert holder.take_or_holder() is None
    try:
        assert cp.compaction_lock(store).take_or_holder() is not None
        with pytest.raises(SinkError, match="held by another process") as caught:
            cp.run_compaction(store, _settings())
        named = f"pid {os.getpid()} on {socket.gethostname()}, replicator compact since"
        assert named in str(caught.value)
        assert not cp.recover_if_idle(store)
        LandingZone(_sink(s3_server, url)).recover()
        assert store.exists(leftover) and store.exists(intent_key(1))  # may be writing
        assert not read_records(store)
    finally:
        holder.release()
    LandingZone(_sink(s3_server, url)).recover()
    assert not store.exists(leftover) and not store.exists(intent_key(1))


def _killed_after_an_output(store: Store) -> str:
    """What a compactor killed after its first output leaves (its intent, and that output at
    its final key): the output's key."""
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(), FailAt("compact-data-mid"))
    leftover = _key(store, f"db/t/{output_name(1, 8)}")
    assert store.exists(leftover) and store.exists(intent_key(1))
    return leftover


def test_a_compactor_waits_for_a_daemons_start_recovery_lease(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store, batches=3)
    recovery = cp.compaction_lock(store, lease_seconds=30, purpose=cp.START_RECOVERY)
    assert recovery.take_or_holder() is None
    try:
        assert json.loads(store.read(cp.LEASE_KEY))["purpose"] == "recovery at a daemon's start"
        result, waited = compact_while_released(store, recovery, _settings())
    finally:
        recovery.release()
    assert result.record == 1 and waited >= 0.4
    assert_free(store)


def test_a_killed_compactors_lease_is_taken_over(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store, batches=3)
    leftover = _killed_after_an_output(store)
    # a compactor of another host, its lease unexpired: kept out
    _lease(store, host="elsewhere.example", pid=1)
    assert not cp.recover_if_idle(store)
    assert store.exists(leftover)
    # ... expired: taken over
    _lease(store, host="elsewhere.example", pid=1, expires=time.time() - 1)
    assert cp.recover_if_idle(store)
    assert not store.exists(leftover)
    # a compactor on this host whose process is gone (SIGKILL): taken over at once
    assert _plain(_killed_after_an_output(store)) == _plain(leftover)
    _lease(store, pid=_dead_pid())
    before = _rows(store)
    assert cp.run_compaction(store, _settings()).record == 1
    # the leftover was deleted first; the output of that name is written anew and committed
    assert _live(store)["db.t"] == [output_name(1, 8)]
    assert not store.exists(intent_key(1)) and not store.exists(intent_key(2))
    assert _rows(store) == before


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


class Then(FailAt):
    """A fault injector that does something at one step instead of failing."""

    def __init__(self, step: str, action: Any) -> None:
        super().__init__(step)
        self.action = action

    def at(self, step: str) -> None:
        if step == self.step:
            self.action()


def test_a_compactor_that_lost_its_lease_or_an_output_commits_nothing(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    # its lease expired while it wrote, and another took it (and deleted its outputs)
    with pytest.raises(SinkError, match="was taken over"):
        cp.run_compaction(
            store, _settings(), Then("compact-data", lambda: _lease(store, pid=os.getpid()))
        )
    assert not read_records(store) and _rows(store) == before
    assert json.loads(store.read(cp.LEASE_KEY))["owner"] == "e" * 32  # left alone
    store.delete(cp.LEASE_KEY)
    # an output deleted under it (a recovery that took the lease meanwhile, then let go)
    with pytest.raises(SinkError, match="is gone or changed before its commit"):
        cp.run_compaction(
            store,
            _settings(),
            Then("compact-data", lambda: store.delete(_key(store, f"db/u/{U_OUT}"))),
        )
    assert not read_records(store) and _rows(store) == before
    assert cp.run_compaction(store, _settings()).record == 1
    assert _rows(store) == before


def test_the_compact_command_takes_an_object_store_root(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    config = tmp_path / "replicator.yaml"
    config.write_text(
        "source:\n  host: 127.0.0.1\n  user: repl\n  server_id: 9\n"
        f"sink:\n{s3_server.sink_yaml(url)}"
        "  compaction:\n    older_than: 0\n    retention: 0\n"
    )
    runner = CliRunner()
    result = runner.invoke(main, ["compact", "--config", str(config)], env=s3_server.env())
    assert result.exit_code == 0, result.output
    assert "compaction 1: 12 files merged into 2; live data files 12 -> 2" in result.output
    assert _listed(store) == [T_OUT]
    assert _rows(store) == before


def test_a_read_that_a_compaction_overtakes_reads_again(
    tmp_path: Path, s3_server: S3Server, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader took the compaction records, then a compaction committed and retention (at
    0 s) deleted what it merged before the reader looked at those files: the reader reads
    again rather than call a committed file gone."""
    from replicator.landed import committed, compacted

    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    stale = compacted.holders(store)  # the records as the reader saw them first
    cp.run_compaction(store, _settings(retention=0.0))
    assert stale == {}  # before any compaction
    real = compacted.holders
    calls = iter([stale])

    def holders(of: Store) -> dict[str, Any]:
        found = next(calls, None)
        return real(of) if found is None else found

    monkeypatch.setattr(committed, "holders", holders)
    assert _rows(store) == before
    assert next(calls, "used") == "used"  # the stale records were read, then fresh ones


def _objects(store: Store) -> dict[str, bytes]:
    """Every object but the daemon's and the lease's state, with its bytes (outputs by their
    name without the run)."""
    return {_plain(key): store.read(key) for key in store.list() if not key.startswith("_state/")}


def test_a_lost_last_record_stops_and_nothing_is_deleted(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    """Retention deleted what the record superseded, then the record was lost: its outputs,
    at their final keys like a killed run's leftovers, are the only copy of their rows."""
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before = _rows(store)
    assert cp.run_compaction(store, _settings(retention=0.0)).record == 1
    assert _listed(store) == [T_OUT]
    saved = store.read(record_key(1))
    store.delete(record_key(1))
    kept = _objects(store)
    named = r"compaction record s3://.*/_compactions/00000000000000000001\.json is missing"
    with pytest.raises(IntegrityError, match=named) as caught:
        cp.run_compaction(store, _settings(retention=0.0))
    assert f"db/t/{T_OUT}" in _plain(str(caught.value))
    assert _objects(store) == kept
    with pytest.raises(IntegrityError, match=named):  # the daemon's start names the record
        LandingZone(_sink(s3_server, url)).recover()
    assert _objects(store) == kept
    store.write(record_key(1), saved)
    assert LandingZone(_sink(s3_server, url)).recover().batch == 6
    assert _rows(store) == before


@pytest.mark.parametrize("step", ["compact-data-mid", "compact-data"])
def test_a_run_killed_before_its_record_is_cleaned_up_exactly(
    tmp_path: Path, s3_server: S3Server, url: str, step: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    before, originals = _rows(store), _objects(store)
    with pytest.raises(Boom):
        cp.run_compaction(store, _settings(), FailAt(step))
    outputs = [f"db/t/{T_OUT}"] + ([f"db/u/{U_OUT}"] if step == "compact-data" else [])
    assert set(_objects(store)) - set(originals) == {intent_key(1), *outputs}
    LandingZone(_sink(s3_server, url)).recover()
    assert _objects(store) == originals
    assert _rows(store) == before


def test_an_output_no_intent_names_is_refused_not_deleted(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    store = _store(s3_server, url)
    _zone(tmp_path, store, batches=3)
    stray = f"db/t/{output_name(1, 8)}"
    store.write(stray, b"rows of a compaction whose record is lost")
    kept = _objects(store)
    with pytest.raises(IntegrityError, match=r"named by no compaction record or intent: s3://"):
        cp.run_compaction(store, _settings())
    with pytest.raises(IntegrityError, match=r"named by no compaction record or intent: s3://"):
        LandingZone(_sink(s3_server, url)).recover()
    assert _objects(store) == kept


def test_a_daemons_start_sees_a_compaction_that_commits_while_it_reads(
    tmp_path: Path, s3_server: S3Server, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``superseded`` holds no lock: a compactor may write its record and remove its intent
    between the listing and the reading of that intent. Its outputs, listed before, are then
    named by the record, not taken for the work of a lost one."""
    store = _store(s3_server, url)
    _zone(tmp_path, store)
    with pytest.raises(Boom):  # record, intent and outputs there
        cp.run_compaction(store, _settings(), FailAt("compact-record"))
    record = store.read(record_key(1))
    store.delete(record_key(1))  # as just before the commit point
    read = store.read

    def commit_then_read(key: str) -> bytes:
        if key == intent_key(1) and not store.exists(record_key(1)):
            store.write(record_key(1), record)  # the compactor commits meanwhile
            store.delete(intent_key(1))
        return read(key)

    monkeypatch.setattr(store, "read", commit_then_read)
    assert len(cp.superseded(store)) == 12


def test_a_stalled_compactor_leaves_the_output_of_the_one_that_took_over_alone(
    tmp_path: Path, s3_server: S3Server, url: str
) -> None:
    """Compactor A stalls while writing an output and its lease runs out; compactor B takes
    over, plans the same groups and commits. Each run's outputs carry a token of their own:
    A's abort and its late upload touch A's key only, never the output B committed."""
    store = _store(s3_server, url)
    _zone(tmp_path, store, batches=3)
    before = _rows(store)
    lock = cp.compaction_lock(store, lease_seconds=1.0)
    real_check = lock.check
    calls = itertools.count(1)
    took_over: list[tuple[int | None, dict[str, list[tuple[object, ...]]]]] = []

    def stalling_check() -> None:
        if next(calls) == 2:  # A is writing its first output
            time.sleep(1.3)
            other = cp.run_compaction(store, _settings(retention=0.0), lease_seconds=30.0)
            took_over.append((other.record, _rows(store)))
        real_check()  # A finds its lease taken over

    lock.check = stalling_check  # type: ignore[method-assign]
    with pytest.raises(ReplicatorError), lock.held():
        cp.compact(store, _settings(retention=0.0), lock=lock)
    assert took_over == [(1, before)]  # B took over once, committed, and kept every row
    assert len(read_records(store)) == 1  # A committed nothing
    report = verify_landing(store, deep=False)
    assert report.ok, report.lines()
    assert _rows(store) == before
