"""The landing zone on an object store, against a real S3 API server (moto's, started by the
tests): the ``Store`` itself, the commit protocol without renames, and the recovery rules
that differ from a directory's.

On an object store data files are written under their final names before the manifest, so
recovery deletes the data files no manifest names (what a crash left of a batch that never
committed) where a directory's recovery refuses them; a file a committed manifest names is
never overwritten; the writer's lease refuses a second writer; credentials never show.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import structlog

from replicator.binlog.constants import ColumnType
from replicator.binlog.gtid import MariadbGtidPosition
from replicator.binlog.position import StreamPosition
from replicator.binlog.schema import ColumnDef
from replicator.checkpoint import Checkpoint
from replicator.config import ObjectStoreConfig, Secret, SinkConfig, load_config
from replicator.errors import ConfigError, IntegrityError
from replicator.landed.committed import (
    committed_files,
    file_schema,
    open_landing,
    read_file,
    read_manifests,
)
from replicator.schema import ddl
from replicator.schema.history import Point, SchemaHistory
from replicator.schema.model import Catalog, ServerTraits
from replicator.sink.changes import HeldXa, TableVersion
from replicator.sink.landing import LandingZone
from replicator.sink.lock import LandingZoneBusyError, LeaseLock, read_record
from replicator.storage import ObjectStore, ObjectStoreOptions, Store, open_store, redact_url
from tests.harness.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.unit.test_parquet_writer import change

_names = itertools.count()
VERSION = TableVersion(
    "shop",
    "orders",
    (
        ColumnDef(index=0, type=ColumnType.LONG, meta=0, name="id"),
        ColumnDef(index=1, type=ColumnType.VARCHAR, meta=80, name="note"),
    ),
    primary_key=(0,),
)


@pytest.fixture
def url(s3_server: S3Server) -> str:
    """A fresh landing zone URL (a new bucket per test)."""
    return f"s3://{s3_server.bucket(f'landing-{next(_names)}')}/zone"


def _options(server: S3Server) -> ObjectStoreOptions:
    return ObjectStoreOptions(
        endpoint=server.endpoint, region=REGION, access_key=ACCESS_KEY, secret_key=SECRET_KEY
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


def _end(number: int) -> StreamPosition:
    return StreamPosition(
        "mysql-bin.000001", 1000 + number, MariadbGtidPosition.parse(f"0-1-{number}")
    )


def _land(zone: LandingZone, rows: Iterator[int], count: int) -> None:
    """One batch of ``count`` orders through the real commit protocol."""
    checkpoint = zone.checkpoints.load()
    batch = zone.begin(checkpoint)
    seq = checkpoint.next_seq
    changes = [change(seq + i, [next(rows), f"n{seq + i}"]) for i in range(count)]
    batch.add(VERSION, changes)
    batch.commit(_end(batch.number), seq + count)


def test_the_store_reads_writes_lists_and_deletes(s3_server: S3Server, url: str) -> None:
    store = open_store(url, _options(s3_server))
    assert store.list() == [] and not store.renames
    store.write("_state/a.json", b"one")
    store.write("_state/a.json", b"two")  # replaced whole
    output = store.open_output("db/t/part-1.parquet")
    output.write(b"x" * 10)
    assert not store.exists("db/t/part-1.parquet")  # nothing before the upload completes
    assert output.close() == 10
    assert store.read("_state/a.json") == b"two"
    assert store.size("db/t/part-1.parquet") == 10
    assert store.list() == ["_state/a.json", "db/t/part-1.parquet"]
    assert store.list("db") == ["db/t/part-1.parquet"]
    assert store.list("nothing") == []
    aborted = store.open_output("db/t/part-2.parquet")
    aborted.write(b"half")
    aborted.abort()
    assert not store.exists("db/t/part-2.parquet")
    store.delete("_state/a.json")
    store.delete("_state/a.json")  # not there: fine
    with pytest.raises(FileNotFoundError):
        store.read("_state/a.json")
    with pytest.raises(ValueError, match="not a landing zone key"):
        store.read("../escape")
    assert store.uri("db/t/x") == f"{url}/db/t/x"


def test_a_delete_removes_the_object_alone(s3_server: S3Server, url: str) -> None:
    """One request (a DELETE), as retention sends for every superseded file: no existence
    check first and no folder marker put in the file's place afterwards."""
    store = open_store(url, _options(s3_server))
    for name in ("part-1", "part-2"):
        store.write(f"db/t/{name}.parquet", b"x")
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    log = s3_server.log_path
    before = len(log.read_text().splitlines())
    store.delete("db/t/part-1.parquet")
    store.delete("db/t/part-2.parquet")
    store.delete("db/t/part-2.parquet")  # not there: fine
    deadline = time.monotonic() + 10
    while len(log.read_text().splitlines()) < before + 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # the server notes a request after it answered
    time.sleep(0.2)
    requests = log.read_text().splitlines()[before:]
    methods = [re.findall(r"(GET|HEAD|PUT|POST|DELETE) /", r) for r in requests]
    assert methods == [["DELETE"]] * 3, requests
    fs = s3_server.filesystem()
    keys = [i.path for i in fs.get_file_info(pafs.FileSelector(bucket, recursive=True))]
    assert not [k for k in keys if k.startswith(f"{bucket}/{prefix}/db")], keys


def test_many_reads_overlap_and_come_back_in_order(
    s3_server: S3Server, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain of manifests is read with several requests in flight, each manifest's bytes
    in its place, and a read that fails raises in its turn, after those before it."""
    store = open_store(url, _options(s3_server))
    keys = [f"_manifests/{i:020d}.json" for i in range(1, 41)]
    for key in keys:
        store.write(key, key.encode())
    store.delete(keys[30])
    lock = threading.Lock()
    flight = {"now": 0, "most": 0}
    read = store.read

    def slow(key: str) -> bytes:
        with lock:
            flight["now"] += 1
            flight["most"] = max(flight["most"], flight["now"])
        try:
            time.sleep(0.02)
            return read(key)
        finally:
            with lock:
                flight["now"] -= 1

    monkeypatch.setattr(store, "read", slow)
    got: list[bytes] = []
    with pytest.raises(FileNotFoundError):
        for data in store.read_each(keys):
            got.append(data)
    assert got == [key.encode() for key in keys[:30]]
    assert flight["most"] > 1


def test_batches_commit_and_readers_find_them_by_manifest(s3_server: S3Server, url: str) -> None:
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    rows = itertools.count(1)
    for _ in range(3):
        _land(zone, rows, 5)
    store = zone.store
    manifests = read_manifests(store).manifests
    assert [m.batch for m in manifests] == [1, 2, 3]
    files = committed_files(store)["shop.orders"]
    assert [f.rows for f in files] == [5, 5, 5]
    fs, base = store.filesystem()
    table = pq.read_table([f"{base}/{f.key}" for f in files], filesystem=fs)
    assert sorted(table.column("id").to_pylist()) == list(range(1, 16))
    assert table.column("_seq").to_pylist() == list(range(1, 16))
    assert file_schema(files[0]).field("id") is not None
    assert not any(key.endswith(".tmp") for key in store.list())  # nothing staged or renamed
    checkpoint = json.loads(store.read("_state/checkpoint.json"))
    assert checkpoint["batch"] == 3 and checkpoint["next_seq"] == 16


def test_recovery_deletes_uncommitted_data_files_and_rolls_forward(
    s3_server: S3Server, url: str
) -> None:
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    rows = itertools.count(1)
    _land(zone, rows, 4)
    store = zone.store
    # a batch that crashed after its data files (no manifest): a leftover under a final name
    store.write("shop/orders/part-00000000000000000005.parquet", b"not committed")
    # a batch whose manifest was written but not its checkpoint: rolled forward
    _land(zone, rows, 3)
    first = json.loads(store.read("_manifests/00000000000000000001.json"))
    store.write(
        "_state/checkpoint.json",
        json.dumps({"format": 1, "batch": 1, "next_seq": 5, "position": first["end"]}).encode(),
    )
    manifest2 = json.loads(store.read("_manifests/00000000000000000002.json"))
    committed2 = manifest2["files"][0]["path"]
    assert committed2 == "shop/orders/part-00000000000000000005.parquet"  # the same name
    store.write("shop/orders/part-00000000000000000099.parquet", b"leftover")
    again = LandingZone(_sink(s3_server, url))
    checkpoint = again.recover()
    assert checkpoint.batch == 2 and checkpoint.next_seq == 8
    assert not store.exists("shop/orders/part-00000000000000000099.parquet")
    assert store.size(committed2) > 100  # the committed file, not the leftover's bytes
    assert again.committed_through == 7


def test_a_replayed_batch_overwrites_a_leftover_but_never_a_committed_file(
    s3_server: S3Server, url: str
) -> None:
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    rows = itertools.count(1)
    _land(zone, rows, 2)
    store = zone.store
    # the replay of batch 2 finds a leftover of its own earlier try under its name
    store.write("shop/orders/part-00000000000000000003.parquet", b"earlier try")
    _land(zone, rows, 2)
    assert (
        pq.read_metadata(
            store.filesystem()[0].open_input_file(
                f"{store.filesystem()[1]}/shop/orders/part-00000000000000000003.parquet"
            )
        ).num_rows
        == 2
    )
    # a checkpoint behind the committed data: _seq 3 is committed, its file is refused
    with pytest.raises(IntegrityError, match="committed before"):
        zone._open_file(VERSION, 3)
    with pytest.raises(IntegrityError, match="committed before"):
        zone._open_file(VERSION, 1)


def test_a_committed_file_that_is_gone_stops_recovery(s3_server: S3Server, url: str) -> None:
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    _land(zone, itertools.count(1), 2)
    zone.store.delete("shop/orders/part-00000000000000000001.parquet")
    with pytest.raises(IntegrityError, match="is gone"):
        LandingZone(_sink(s3_server, url)).recover()
    assert zone.store.exists("_manifests/00000000000000000001.json")  # nothing was changed


def test_the_lease_refuses_a_second_writer_until_it_ends(s3_server: S3Server, url: str) -> None:
    store = open_store(url, _options(s3_server))
    first = LeaseLock(store, lease_seconds=30).acquire("replicator run", server_id=7)
    with pytest.raises(LandingZoneBusyError, match=r"in use by another replicator process"):
        LeaseLock(store, lease_seconds=30).acquire("replicator run")
    record = read_record(store)
    assert record is not None and record.facts["server_id"] == 7 and record.ended is None
    assert record.running is True  # this process holds it
    first.check()  # still ours
    first.release()
    record = read_record(store)
    assert record is not None and record.ended is not None
    LeaseLock(store, lease_seconds=30).acquire("checkpoint set").release()


def test_a_holder_whose_lease_was_taken_over_stops(s3_server: S3Server, url: str) -> None:
    store = open_store(url, _options(s3_server))
    holder = LeaseLock(store, lease_seconds=0.3).acquire("replicator run")
    # its lease ran out (a stalled process) and another writer took the landing zone
    other = {"owner": "f" * 32, "pid": 1, "host": "elsewhere", "expires": time.time() + 60}
    store.write("_state/lease.json", json.dumps(other).encode())
    time.sleep(0.2)  # a renewal is due
    with pytest.raises(LandingZoneBusyError, match="taken over"):
        holder.check()
    assert json.loads(store.read("_state/lease.json"))["owner"] == "f" * 32  # left alone


class _Stall:
    """A fault injector that runs ``hook`` once, when the commit reaches ``step``."""

    def __init__(self, step: str, hook: Callable[[], None]) -> None:
        self.step = step
        self.hook: Callable[[], None] | None = hook

    def at(self, step: str) -> None:
        if step == self.step and self.hook is not None:
            hook, self.hook = self.hook, None
            hook()


def _take_over(sink: SinkConfig, rows: Iterator[int] | None = None) -> None:
    """Another daemon once the first one's lease has run out: it takes the lease, recovers
    (deleting what no manifest names) and, with ``rows``, commits a batch of its own."""
    time.sleep(1.3)
    other = LandingZone(sink)
    LeaseLock(other.store, lease_seconds=30.0).acquire("replicator run")
    other.recover()
    if rows is not None:
        _land(other, rows, 5)


@pytest.mark.parametrize("stalled_at", ["before the commit", "between data and manifest"])
def test_a_writer_whose_lease_was_taken_over_writes_nothing_more(
    s3_server: S3Server, stalled_at: str
) -> None:
    """A daemon that stalled past its lease (a GC pause, a partition) and lost it to another
    stops at its next write of the commit: before its files, whose names the other may have
    committed by then, and before its manifest, whose files the other deleted as leftovers."""
    sink = _sink(s3_server, f"s3://{s3_server.bucket(f'takeover-{next(_names)}')}/zone")
    zone = LandingZone(sink)
    zone.lease = LeaseLock(zone.store, lease_seconds=1.0).acquire("replicator run").check
    zone.recover()
    _land(zone, itertools.count(1), 3)
    checkpoint = zone.checkpoints.load()
    batch = zone.begin(checkpoint)
    seq = checkpoint.next_seq
    batch.add(VERSION, [change(seq + i, [100 + i, "x"]) for i in range(2)])
    if stalled_at == "before the commit":
        _take_over(sink, itertools.count(500))  # the other commits batch 2 under these names
    else:
        zone.fault = _Stall("data", lambda: _take_over(sink))  # type: ignore[assignment]
    with pytest.raises(LandingZoneBusyError, match="taken over"):
        batch.commit(_end(batch.number), seq + 2)
    again = LandingZone(sink)
    recovered = again.recover()  # a start accepts what is there: every file as committed
    landed = [1, 2, 3, *(range(500, 505) if stalled_at == "before the commit" else ())]
    assert recovered.next_seq == len(landed) + 1
    files = committed_files(again.store)["shop.orders"]
    fs, base = again.store.filesystem()
    table = pq.read_table([f"{base}/{f.key}" for f in files], filesystem=fs)
    assert sorted(table.column("id").to_pylist()) == landed


def _land_with(
    zone: LandingZone,
    rows: Iterator[int],
    count: int,
    *,
    history: SchemaHistory | None = None,
    held: HeldXa | None = None,
) -> None:
    """``_land`` with a changed schema history and an XA transaction held prepared."""
    checkpoint = zone.checkpoints.load()
    batch = zone.begin(checkpoint)
    seq = checkpoint.next_seq
    batch.add(VERSION, [change(seq + i, [next(rows), f"n{seq + i}"]) for i in range(count)])
    prepared = {} if held is None else {held.key: held}
    batch.commit(_end(batch.number), seq + count, prepared, history=history)


def _history() -> SchemaHistory:
    catalog = Catalog(ServerTraits("mariadb", (10, 11, 6), 0))
    catalog, _ = ddl.apply_ddl(catalog, "CREATE DATABASE shop", ddl.Context(default_db=None))
    return SchemaHistory(seed=catalog, seed_point=Point("mysql-bin.000001", 4))


def _held(key: str, position: int) -> HeldXa:
    return HeldXa(key=key, xid=f"'{key}'", groups=[], file="mysql-bin.000001", position=position)


@pytest.mark.parametrize("stalled_at", ["manifest", "checkpoint"])
def test_a_writer_taken_over_after_its_manifest_deletes_nothing_of_the_new_writer(
    s3_server: S3Server, stalled_at: str
) -> None:
    """A daemon that stalled past its lease after its manifest (before or after its
    checkpoint) and lost it to a writer that then committed a batch with DDL and a prepared
    XA transaction: the stalled one goes on to finish its commit, and must delete neither
    the schema history the other's batch names nor the other's held XA rows."""
    sink = _sink(s3_server, f"s3://{s3_server.bucket(f'tail-{next(_names)}')}/zone")
    zone = LandingZone(sink)
    zone.lease = LeaseLock(zone.store, lease_seconds=1.0).acquire("replicator run").check
    zone.recover()
    _land_with(zone, itertools.count(1), 2, history=_history(), held=_held("a", 10))
    other_history = "_schema/history-00000000000000000003.json"
    other_held = "_state/xa/b.mysql-bin.000001.20.pickle"

    def take_over() -> None:
        time.sleep(1.3)
        other = LandingZone(sink)
        LeaseLock(other.store, lease_seconds=30.0).acquire("replicator run")
        other.recover()  # batch 2 is committed: its manifest is there
        _land_with(other, itertools.count(500), 2, history=_history(), held=_held("b", 20))

    zone.fault = _Stall(stalled_at, take_over)  # type: ignore[assignment]
    if stalled_at == "manifest":  # stopped before its checkpoint: the other's is kept
        with pytest.raises(LandingZoneBusyError, match="taken over"):
            _land_with(zone, itertools.count(100), 2, history=_history())
    else:  # its own older files only
        _land_with(zone, itertools.count(100), 2, history=_history())
    # (the other's commit dropped history-2, superseded by its own)
    assert zone.store.list("_schema") == [other_history]
    assert zone.store.list("_state/xa") == [other_held]
    again = LandingZone(sink)
    recovered = again.recover()
    assert recovered.batch == 3 and recovered.xa_pending == ("b.mysql-bin.000001.20",)
    assert [h.key for h in again.load_held(recovered.xa_pending)] == ["b"]


def test_an_expired_lease_or_one_of_a_dead_local_process_is_taken_over(
    s3_server: S3Server, url: str
) -> None:
    store = open_store(url, _options(s3_server))
    store.write(
        "_state/lease.json",
        json.dumps({"owner": "x", "pid": 1, "host": "gone", "expires": 1.0}).encode(),
    )
    LeaseLock(store, lease_seconds=30).acquire("replicator run").release()
    _lease_of_a_dead_process_here(store, "y", os.readlink("/proc/self/ns/pid"))
    LeaseLock(store, lease_seconds=30).acquire("replicator run").release()


def _lease_of_a_dead_process_here(store: Store, owner: str, namespace: str | None) -> None:
    """An unexpired lease of ``owner``, a process gone, on a host of this name, in pid
    ``namespace``."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.write(
        "_state/lease.json",
        json.dumps(
            {"owner": owner, "pid": dead.pid, "host": socket.gethostname(),
             "pid_namespace": namespace, "expires": time.time() + 60}
        ).encode(),
    )  # fmt: skip


@pytest.mark.parametrize("namespace", ["pid:[1]", None], ids=["another", "unrecorded"])
def test_a_live_lease_of_another_pid_namespace_on_a_host_of_the_same_name_is_refused(
    s3_server: S3Server, url: str, namespace: str | None
) -> None:
    """Containers that share a host name (host networking, a fixed `hostname:`) do not see
    each other's processes: a pid this process cannot find proves nothing there, and the
    lease is another writer's until it expires."""
    store = open_store(url, _options(s3_server))
    _lease_of_a_dead_process_here(store, "z", namespace)
    with pytest.raises(LandingZoneBusyError, match="in use by another replicator process"):
        LeaseLock(store, lease_seconds=30).acquire("replicator run")
    assert json.loads(store.read("_state/lease.json"))["owner"] == "z"


def test_credentials_in_the_url_are_refused_and_never_shown(s3_server: S3Server) -> None:
    secret_url = f"s3://{ACCESS_KEY}:{SECRET_KEY}@landing-bucket/zone"
    with pytest.raises(ConfigError) as caught:
        ObjectStore(secret_url, _options(s3_server))
    assert SECRET_KEY not in str(caught.value) and SECRET_KEY not in repr(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_config(None, {"REPLICATOR_SINK__ROOT": secret_url})
    assert SECRET_KEY not in str(caught.value)
    assert redact_url(secret_url) == "s3://landing-bucket/zone"


def test_object_store_secrets_are_redacted(s3_server: S3Server, url: str) -> None:
    sink = _sink(s3_server, url)
    assert SECRET_KEY not in repr(sink) and ACCESS_KEY not in repr(sink)
    zone = LandingZone(sink)
    assert SECRET_KEY not in zone.location and SECRET_KEY not in repr(vars(zone.store))
    config = load_config(
        None,
        {
            "REPLICATOR_SINK__ROOT": url,
            "REPLICATOR_SINK__OBJECT_STORE__SECRET_KEY_ENV": "MY_SECRET",
            "REPLICATOR_SINK__OBJECT_STORE__ACCESS_KEY_ENV": "MY_KEY",
            "MY_SECRET": SECRET_KEY,
            "MY_KEY": ACCESS_KEY,
        },
    )
    assert config.sink.object_store.secret_key.reveal() == SECRET_KEY
    assert SECRET_KEY not in repr(config)
    with pytest.raises(ConfigError, match="go together") as caught:
        load_config(
            None,
            {
                "REPLICATOR_SINK__ROOT": url,
                "REPLICATOR_SINK__OBJECT_STORE__SECRET_KEY_ENV": "MY_SECRET",
                "MY_SECRET": SECRET_KEY,
            },
        )
    assert SECRET_KEY not in str(caught.value)


def test_readers_take_a_url_with_credentials_and_endpoint_from_the_environment(
    s3_server: S3Server, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    _land(zone, itertools.count(1), 3)
    for name, value in {**s3_server.env(), "AWS_ENDPOINT_URL": s3_server.endpoint}.items():
        monkeypatch.setenv(name, value)
    landing = open_landing(url)  # what `replicator materialize --landing s3://...` opens
    files = committed_files(landing)["shop.orders"]
    assert [f.rows for f in files] == [3]
    assert (
        files[0].spark_path == "s3a://" + f"{url}/shop/orders/part-00000000000000000001.parquet"[5:]
    )
    assert read_file(files[0], ["id"]).column("id").to_pylist() == [1, 2, 3]


def test_readers_refuse_a_committed_file_that_is_gone(s3_server: S3Server, url: str) -> None:
    zone = LandingZone(_sink(s3_server, url))
    zone.recover()
    rows = itertools.count(1)
    _land(zone, rows, 2)
    _land(zone, rows, 2)
    zone.store.delete("shop/orders/part-00000000000000000003.parquet")
    with pytest.raises(IntegrityError, match=r"batch 2 is committed but its file .* is gone"):
        read_manifests(zone.store)


def test_conditional_writes_create_once_and_replace_only_what_was_read(
    s3_server: S3Server, url: str
) -> None:
    store = open_store(url, _options(s3_server))
    assert store.conditional() is None  # moto's server honours If-None-Match and If-Match
    tag = store.create("_state/x.json", b"one")
    with pytest.raises(FileExistsError):
        store.create("_state/x.json", b"two")
    assert store.read("_state/x.json") == b"one"
    # a PUT retried after its reply was lost finds its own write: that is no conflict
    assert store.create("_state/x.json", b"one") == tag
    data, read_tag = store.read_tagged("_state/x.json")
    assert (data, read_tag) == (b"one", tag)
    newer = store.replace("_state/x.json", b"three", tag)
    with pytest.raises(FileExistsError):
        store.replace("_state/x.json", b"four", tag)  # changed since `tag` was read
    assert store.replace("_state/x.json", b"three", tag) == newer  # our own write, retried
    assert store.read_tagged("_state/x.json") == (b"three", newer)
    assert store.list("_state") == ["_state/x.json"]  # the probe left nothing behind


def test_two_writers_reading_the_lease_at_the_same_instant_cannot_both_take_it(
    s3_server: S3Server, url: str
) -> None:
    """Both read "nobody holds it"; the one that writes second is refused (If-None-Match),
    and so is one that read an expired lease after another took it over (If-Match)."""
    store = open_store(url, _options(s3_server))
    late = LeaseLock(store, lease_seconds=30)
    assert late._read() is None  # the same instant: nobody holds it yet
    first = LeaseLock(store, lease_seconds=30).acquire("replicator run")
    late._record = {"owner": late.owner, "pid": 1, "host": "h", "purpose": "replicator run"}
    with pytest.raises(LandingZoneBusyError, match="written by another process"):
        late._write()
    assert json.loads(store.read("_state/lease.json"))["owner"] == first.owner
    first.release()

    ended = LeaseLock(store, lease_seconds=30)
    assert ended._read() is not None  # an ended lease: free to take
    taker = LeaseLock(store, lease_seconds=30).acquire("replicator run")
    ended._record = {"owner": ended.owner, "pid": 1, "host": "h", "purpose": "replicator run"}
    with pytest.raises(LandingZoneBusyError, match="written by another process"):
        ended._write()
    assert json.loads(store.read("_state/lease.json"))["owner"] == taker.owner
    taker.release()


def test_two_writers_cannot_both_commit_a_batch_number(s3_server: S3Server, url: str) -> None:
    first, second = LandingZone(_sink(s3_server, url)), LandingZone(_sink(s3_server, url))
    first.recover()
    second.recover()
    rows = itertools.count(1)
    _land(first, rows, 3)
    store = open_store(url, _options(s3_server))
    manifest = store.read("_manifests/00000000000000000001.json")
    batch = second.begin(Checkpoint(batch=0, next_seq=100, position=None))  # it saw no batch
    batch.add(VERSION, [change(100, [999, "other"])])
    with pytest.raises(IntegrityError, match="committed by another writer"):
        batch.commit(_end(1), 101)
    assert store.read("_manifests/00000000000000000001.json") == manifest


def test_a_store_without_conditional_writes_says_so_at_start(tmp_path: Path) -> None:
    store = open_store(f"mock://{tmp_path.as_posix()}/zone")  # pyarrow's in-memory store
    assert isinstance(store, ObjectStore)
    store.fs.create_dir(f"{store.base}/_state")  # it has directories, unlike S3
    assert "no conditional writes" in (store.conditional() or "")
    with structlog.testing.capture_logs() as logs:
        LeaseLock(store, lease_seconds=30).acquire("replicator run").release()
    warned = [e for e in logs if e["event"].startswith("no conditional writes")]
    assert len(warned) == 1 and "pyarrow offers no conditional writes" in warned[0]["why"]


def test_a_missing_bucket_is_named_with_how_to_create_it(s3_server: S3Server) -> None:
    store = open_store("s3://no-such-bucket-here/zone", _options(s3_server))
    with pytest.raises(ConfigError) as missing:
        LeaseLock(store, lease_seconds=30).acquire("replicator run")
    assert "the bucket 'no-such-bucket-here' does not exist" in str(missing.value)
    assert "aws s3 mb s3://no-such-bucket-here" in (missing.value.hint or "")
    assert "credentials" not in str(missing.value)


def test_a_read_sees_one_whole_version_while_the_object_is_replaced(
    s3_server: S3Server, url: str
) -> None:
    """The checkpoint is replaced in place while ``replicator compact``, ``status`` or
    ``verify`` reads it. Each read returns one whole version: never the first bytes of a new,
    longer object cut at the old one's length (a HEAD for the size, then a ranged GET, as
    pyarrow's input stream reads, splits one read across two versions)."""
    store = open_store(url, _options(s3_server))
    versions = [json.dumps({"batch": n, "pad": "x" * (n % 7) * 40}).encode() for n in range(1, 8)]
    store.write("_state/checkpoint.json", versions[0])
    stop = threading.Event()
    failed: list[BaseException] = []

    def replace() -> None:
        writer = open_store(url, _options(s3_server))
        try:
            for data in itertools.cycle(versions):
                if stop.is_set():
                    return
                writer.write("_state/checkpoint.json", data)
        except BaseException as exc:  # told by the assertion below, not lost with the thread
            failed.append(exc)

    thread = threading.Thread(target=replace)
    thread.start()
    try:
        seen = [store.read("_state/checkpoint.json") for _ in range(300)]
    finally:
        stop.set()
        thread.join()
    assert failed == []
    torn = [data for data in seen if data not in versions]
    assert torn == [], f"{len(torn)} of {len(seen)} reads mixed two versions: {torn[:2]}"
    assert len(set(seen)) > 1  # the object did change under the reads


def test_an_s3_client_botocore_cannot_make_is_an_os_error(
    s3_server: S3Server, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile botocore cannot find fails the read as the stores' errors fail (an
    ``OSError`` the commands turn into their message), never a botocore traceback, and shows
    no secret."""
    store = open_store(url, _options(s3_server))
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile-anywhere")
    with pytest.raises(OSError, match=r"no S3 client for bucket .*ProfileNotFound") as raised:
        store.read("_state/checkpoint.json")
    assert SECRET_KEY not in str(raised.value)
