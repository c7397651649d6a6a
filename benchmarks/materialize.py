"""Current state at scale: ``materialize --format delta`` and ``--format parquet``, side by side.

No database server: the landing zones are written by the real commit protocol
(``sink.landing.LandingZone``: ``recover``, ``begin``, ``Batch.add``, ``Batch.commit``), with
runs of 100k rows whose blocks hold plain Python lists per column, as the pipeline hands them
over. One table, ``bench.t``: a BIGINT primary key and 12 more columns of mixed types (INT,
INT UNSIGNED, BIGINT, DECIMAL(12,2), DOUBLE, VARCHAR(40), VARCHAR(200), DATETIME(3), DATE,
TINYINT, CHAR(8), TEXT), about 10% NULLs in every column but the key. Every value derives
from the row's key and its version, so an update's before image is the row as it stands.

For each ``--rows`` N: N inserts (batches of 1M rows). Then, for each ``--changes`` K and
``--spread``: one more batch of K changes (80% updates with full before images, 10% deletes,
10% inserts of new keys), either uniform over the keys or on the newest ones. Measured, each
run a separate ``replicator materialize`` process (wall time with start-up; peak RSS of its
whole process tree, the Spark JVM included: ``wait4`` of the main process and ``/proc``
sampled every 0.1 s over its session):

(a)  full build: every batch of the N-row zone into an empty output, once per format per N
     (the K rows of one N share it);
(b)  incremental: the run after the K-change batch landed, on the built output;
(c)  ``--format delta --follow --interval 0.1`` on the output of (b): another K-change batch
     lands, and the latency is from its commit to the Delta table's app transaction version
     (``replicator-<landing id>``) naming that batch; then SIGTERM.

Formats: ``delta`` (the default: a keyed table's batches by deletion vectors), ``delta-cow``
(``--no-deletion-vectors``: copy-on-write, each touched file written again) and ``parquet``
(the Spark job).

With ``--floor``, also the copy-on-write floor of (b): in a process of its own, the batch's
rows folded alone (no output rows read: full row images) and applied by one bare delta-rs
MERGE (upsert and delete by key, no key-range predicate) to a copy of the built output; the
MERGE alone is timed, and the process's peak RSS shown. What (b) costs beyond it is ours.

After every run the output's row count is checked against what the batches leave. A run that
fails, is killed (out of memory) or passes ``--timeout`` shows as such in the table.

Targets (issue "current state at scale"): incremental K=1k on 10M <= 2 s and <= 5% of its full
build; incremental grows with K, not N (10M within 2x of 1M); follow latency <= 2 s at 10M;
peak RSS <= 1 GB.

Run: ``.venv/bin/python benchmarks/materialize.py [--rows 1000000,10000000] [--changes
1000,100000] [--spread uniform,newest] [--formats delta,delta-cow,parquet] [--repeat 1]
[--timeout 900] [--work DIR] [--floor]``;
``--quick`` is N=100k, K=1000. The N-row landing zones stay in ``--work`` (default a temp dir)
and are reused by the next run with the same ``--work``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow.dataset as ds

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.side_by_side import _LAUNCHER
from replicator.binlog.block import Block
from replicator.binlog.constants import ColumnType as T
from replicator.binlog.position import StreamPosition
from replicator.config import SinkConfig
from replicator.sink.changes import Run, TableVersion
from replicator.sink.landing import LandingZone
from tests.spark.zone import col, int_col, text_col

REPLICATOR = Path(sys.executable).with_name("replicator")
FORMATS = {"delta", "delta-cow", "parquet"}
TABLE = TableVersion(
    "bench",
    "t",
    (
        col(0, T.LONGLONG, "id", nullable=False),
        int_col(1, "a"),
        int_col(2, "b", unsigned=True),
        col(3, T.LONGLONG, "c"),
        col(4, T.NEWDECIMAL, "d", 12 << 8 | 2),
        col(5, T.DOUBLE, "e", 8),
        col(6, T.VARCHAR, "f", 160, charset="utf-8"),
        text_col(7, "g"),
        col(8, T.DATETIME2, "h", 3),
        col(9, T.DATE, "i"),
        col(10, T.TINY, "j"),
        col(11, T.STRING, "k", T.STRING << 8 | 32, charset="utf-8"),
        col(12, T.BLOB, "l", 2, charset="utf-8"),
    ),
    (0,),
)
INSERT_BATCH = 1_000_000
RUN_ROWS = 100_000
TS = dt.datetime(2026, 11, 27, 0, 0, 0, tzinfo=dt.UTC)
BINLOG = "mysql-bin.000001"
ZONE_VERSION = 1  # bump when the generated rows change: older zones in --work are rebuilt

TARGET_INCREMENTAL_S = 2.0
TARGET_INCREMENTAL_PCT = 5.0
TARGET_GROWTH = 2.0
TARGET_FOLLOW_S = 2.0
TARGET_RSS_MB = 1024.0


# ------------------------------------------------------------------------------ rows


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: well-spread 64-bit values from consecutive inputs."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        mixed: np.ndarray = x ^ (x >> np.uint64(31))
        return mixed


def _pool(size: int, words: int, limit: int, seed: int) -> np.ndarray:
    """``size`` texts of up to ``words`` words, cut at ``limit`` characters."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    lexicon = ["".join(rng.choices(letters, k=rng.randrange(2, 11))) for _ in range(2000)]
    texts = [
        " ".join(rng.choices(lexicon, k=rng.randrange(words + 1)))[:limit] for _ in range(size)
    ]
    return np.array(texts, dtype=object)


SHORT = _pool(20_000, 6, 40, 1)
LONG = _pool(20_000, 30, 200, 2)
TEXTS = _pool(5_000, 60, 1000, 3)
CODES = np.array([f"{i:08X}" for i in range(0, 2**32, 2**32 // 5000)][:5000], dtype=object)
EPOCH_MS = np.datetime64("2020-01-01T00:00:00", "ms")
EPOCH_DAY = np.datetime64("1990-01-01", "D")


def rows(ids: np.ndarray, versions: np.ndarray) -> tuple[list[object], ...]:
    """The 13 columns (lists) of the rows with keys ``ids`` at their ``versions``."""
    with np.errstate(over="ignore"):
        x = _mix(ids.astype(np.uint64) * np.uint64(1_000_003) + versions.astype(np.uint64))
        y = _mix(x)
    cents = (x % np.uint64(2 * 10**11)).astype(np.int64) - 10**11
    columns: list[list[object]] = [
        ids.astype(np.int64).tolist(),
        (x & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32).tolist(),
        (x >> np.uint64(32)).tolist(),
        y.view(np.int64).tolist(),
        [Decimal(c).scaleb(-2) for c in cents.tolist()],
        ((y >> np.uint64(11)).astype(np.float64) * 2.0**-53 * 1e6).tolist(),
        SHORT[(y % np.uint64(len(SHORT))).astype(np.int64)].tolist(),
        LONG[((y >> np.uint64(16)) % np.uint64(len(LONG))).astype(np.int64)].tolist(),
        (EPOCH_MS + (x % np.uint64(200_000_000_000)).astype(np.int64))
        .astype("datetime64[us]")
        .tolist(),
        (EPOCH_DAY + (y % np.uint64(15_000)).astype(np.int64)).tolist(),
        ((y >> np.uint64(24)) % np.uint64(256)).astype(np.int64).__sub__(128).tolist(),
        CODES[((x >> np.uint64(20)) % np.uint64(len(CODES))).astype(np.int64)].tolist(),
        TEXTS[((x >> np.uint64(40)) % np.uint64(len(TEXTS))).astype(np.int64)].tolist(),
    ]
    nulls = _mix(y)
    for index in range(1, len(columns)):
        values = columns[index]
        for row in np.flatnonzero((nulls >> np.uint64(4 * index)) % np.uint64(10) == 0).tolist():
            values[row] = None
    return tuple(columns)


@dataclass
class Model:
    """Which keys exist and at which version (0 unless a change batch wrote them)."""

    rows: int
    top: int = 0  # the largest key ever inserted
    versions: dict[int, int] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)

    def version_of(self, keys: np.ndarray) -> np.ndarray:
        return np.array([self.versions.get(k, 0) for k in keys.tolist()], dtype=np.int64)


class Landing:
    """A landing zone and its commits, through ``LandingZone`` as the pipeline uses it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.zone = LandingZone(SinkConfig(root=str(root)))
        self.checkpoint = self.zone.recover()
        self.transactions = 0

    @property
    def batch(self) -> int:
        return self.checkpoint.batch

    def commit(self, runs: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray | None]]) -> int:
        """Land one batch: (op, keys, versions, before versions for updates) per run of
        rows; every run is one transaction. Returns the batch number."""
        batch = self.zone.begin(self.checkpoint)
        seq = self.checkpoint.next_seq
        count = 0
        for op, keys, versions, before in runs:
            for start in range(0, len(keys), RUN_ROWS):
                part = slice(start, start + RUN_ROWS)
                values = rows(keys[part], versions[part])
                if before is None:
                    block = Block(len(values[0]), values, None, (None,) * len(values))
                else:
                    old = rows(keys[part], before[part])
                    block = Block(len(values[0]), old, values, (None,) * len(values))
                self.transactions += 1
                gtid = f"0-1-{self.transactions}"
                batch.add(TABLE, [Run(op, seq, gtid, TS, 1, BINLOG, 4 + seq, block)])
                seq += block.count
                count += 1
        batch.transactions += count
        self.checkpoint = batch.commit(StreamPosition(BINLOG, 4 + seq), seq)
        return batch.number


def build_base(root: Path, n: int) -> None:
    """N inserts in batches of 1M rows (kept: ``done`` marks a finished zone)."""
    done = root / f".bench-done-{ZONE_VERSION}"
    if done.exists():
        print(f"landing zone {root}: reused ({n:,} rows)", flush=True)
        return
    shutil.rmtree(root, ignore_errors=True)
    began = time.perf_counter()
    landing = Landing(root)
    for start in range(1, n + 1, INSERT_BATCH):
        keys = np.arange(start, min(n, start + INSERT_BATCH - 1) + 1, dtype=np.int64)
        landing.commit([("c", keys, np.zeros(len(keys), np.int64), None)])
    done.touch()
    print(f"landing zone {root}: {n:,} rows in {time.perf_counter() - began:.0f} s", flush=True)


def land_changes(
    landing: Landing, model: Model, k: int, spread: str, version: int, seed: int
) -> tuple[int, float]:
    """One batch of ``k`` changes; (its number, seconds to write and commit it)."""
    rng = np.random.default_rng(seed)
    updates, deletes = k * 8 // 10, k // 10
    inserts = k - updates - deletes
    wanted = updates + deletes
    if spread == "uniform":
        picked: list[int] = []
        seen: set[int] = set()
        while len(picked) < wanted:
            for key in rng.integers(1, model.top + 1, 2 * wanted).tolist():
                if key not in seen and key not in model.deleted and len(picked) < wanted:
                    seen.add(key)
                    picked.append(key)
        chosen = np.array(picked, dtype=np.int64)
    else:  # the newest keys still there
        newest: list[int] = []
        key = model.top
        while len(newest) < wanted and key > 0:
            if key not in model.deleted:
                newest.append(key)
            key -= 1
        chosen = rng.permutation(np.array(newest, dtype=np.int64))
    updated, removed = np.sort(chosen[:updates]), np.sort(chosen[updates:])
    added = np.arange(model.top + 1, model.top + 1 + inserts, dtype=np.int64)
    began = time.perf_counter()
    number = landing.commit(
        [
            ("u", updated, np.full(len(updated), version), model.version_of(updated)),
            ("d", removed, model.version_of(removed), None),
            ("c", added, np.full(len(added), version), None),
        ]
    )
    seconds = time.perf_counter() - began
    for key in updated.tolist():
        model.versions[key] = version
    for key in added.tolist():
        model.versions[key] = version
    model.deleted.update(removed.tolist())
    model.top += inserts
    model.rows += inserts - deletes
    return number, seconds


def _land_next(landing: Landing, model: Model, k: int, spread: str, version: int, seed: int) -> int:
    """A later K-change batch (rows at ``version``), landed while ``--follow`` runs."""
    return land_changes(landing, model, k, spread, version, seed)[0]


# ------------------------------------------------------------------------------ runs


@dataclass
class Outcome:
    seconds: float | None  # None: failed (``failure`` says how)
    rss_mb: float
    failure: str = ""


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # state ppid pgrp session
            pids.append(int(entry))
    return pids


def _rss_mb(pids: Sequence[int], skip: int) -> float:
    total = 0.0
    for pid in pids:
        if pid == skip:
            continue
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


class Child:
    """A command in its own session, under a bare launcher that reports its ``wait4`` peak
    RSS; the session's RSS (every process: pyspark's JVM is a child it does not wait for) is
    sampled while it runs."""

    live: ClassVar[set[Child]] = set()  # killed when the benchmark stops early

    def __init__(self, command: list[str]) -> None:
        self.files = Path(tempfile.mkdtemp(prefix="materialize-child-"))
        out = os.open(self.files / "stdout", os.O_WRONLY | os.O_CREAT, 0o600)
        err = os.open(self.files / "stderr", os.O_WRONLY | os.O_CREAT, 0o600)
        self.began = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCHER, str(self.files / "peak"), *command],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        os.close(out)
        os.close(err)
        self.sampled = 0.0
        self.last_output = ""  # its stdout, once finished
        Child.live.add(self)

    def printed(self) -> str:
        """What it has written to stdout so far."""
        return (self.files / "stdout").read_text(errors="replace")

    def sample(self) -> None:
        self.sampled = max(self.sampled, _rss_mb(_session_pids(self.proc.pid), self.proc.pid))

    def running(self) -> bool:
        self.sample()
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """``sig`` to every process of the session; SIGTERM to the measured command only
        (the launcher waits for it and passes on its exit status)."""
        for pid in _session_pids(self.proc.pid):
            if sig != signal.SIGKILL and pid == self.proc.pid:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def finish(self, timeout: float) -> Outcome:
        """Wait for the end (killing the session after ``timeout`` seconds)."""
        timed_out = False
        while self.running():
            if time.perf_counter() - self.began > timeout:
                self.kill()
                timed_out = True
                self.proc.wait()
                break
            time.sleep(0.05)
        seconds = time.perf_counter() - self.began
        # the JVM outlives the driver by a moment: let it go before the next run starts
        deadline = time.perf_counter() + 30
        while _session_pids(self.proc.pid) and time.perf_counter() < deadline:
            self.sample()
            time.sleep(0.1)
        self.kill()
        peak = self.files / "peak"
        text = peak.read_text().strip() if peak.exists() else ""
        rss = max(self.sampled, int(text) / 1024 if text else 0.0)
        tail = (self.files / "stderr").read_bytes().decode(errors="replace").splitlines()
        self.last_output = self.printed()
        shutil.rmtree(self.files, ignore_errors=True)
        Child.live.discard(self)
        code = self.proc.returncode
        if timed_out:
            return Outcome(None, rss, f"timeout (> {timeout:.0f} s)")
        if code != 0:
            last = next((line for line in reversed(tail) if line.strip()), "")
            # the launcher exits with -9 (247) when SIGKILL (the OOM killer) ended the run
            what = "killed (out of memory?)" if code in (-9, 137, 247) else f"exit {code}"
            return Outcome(None, rss, f"{what}: {last[:120]}")
        return Outcome(seconds, rss)


def materialize_command(fmt: str, landing: Path, out: Path, *extra: str) -> list[str]:
    """``fmt``: ``delta`` (deletion vectors, the default), ``delta-cow`` (copy-on-write:
    ``--no-deletion-vectors``) or ``parquet``."""
    flags = (
        ["--format", "delta", "--no-deletion-vectors"] if fmt == "delta-cow" else ["--format", fmt]
    )
    return [
        str(REPLICATOR), "materialize", *flags,
        "--landing", str(landing), "--out", str(out), *extra,
    ]  # fmt: skip


def count_rows(fmt: str, out: Path) -> int:
    path = out / "bench" / "t"
    if fmt.startswith("delta"):
        import pyarrow as pa  # noqa: PLC0415
        from deltalake import DeltaTable  # noqa: PLC0415 - only where Delta is measured

        table = DeltaTable(str(path))
        first = table.schema().fields[0].name
        return int(pa.table(table.scan(columns=[first]).read_all()).num_rows)  # vectors applied
    return int(ds.dataset(str(path), format="parquet").count_rows())


def run_materialize(fmt: str, landing: Path, out: Path, expected: int, timeout: float) -> Outcome:
    outcome = Child(materialize_command(fmt, landing, out)).finish(timeout)
    if outcome.seconds is not None:
        found = count_rows(fmt, out)
        if found != expected:
            return Outcome(None, outcome.rss_mb, f"WRONG: {found:,} rows, expected {expected:,}")
    return outcome


def app_version(out: Path, app_id: str) -> int | None:
    from deltalake import DeltaTable  # noqa: PLC0415

    try:
        return DeltaTable(str(out / "bench" / "t")).transaction_version(app_id)
    except Exception:  # a commit under way: look again
        return None


def follow_latency(
    landing: Landing, out: Path, timeout: float, land: Callable[[], int], fmt: str = "delta"
) -> Outcome:
    """Start ``--follow`` on the built ``out``, land one batch, time until it is applied."""
    from replicator.delta.materialize import APP_PREFIX  # noqa: PLC0415
    from replicator.landed.committed import landing_id_of, read_manifests  # noqa: PLC0415

    app_id = APP_PREFIX + (landing_id_of(read_manifests(landing.root).manifests) or "")
    child = Child(materialize_command(fmt, landing.root, out, "--follow", "--interval", "0.1"))
    began = time.perf_counter()
    # ready: its first pass (nothing new) reported the table, it looks for batches now
    while "bench.t:" not in child.printed() or app_version(out, app_id) != landing.batch:
        if not child.running() or time.perf_counter() - began > timeout:
            child.kill()
            return Outcome(None, child.finish(0).rss_mb, "did not start following")
        time.sleep(0.1)
    time.sleep(1.0)  # between looks, as in service
    number = land()
    landed = time.perf_counter()
    latency: float | None = None
    while child.running() and time.perf_counter() - landed < timeout:
        if app_version(out, app_id) == number:
            latency = time.perf_counter() - landed
            break
        time.sleep(0.02)
    alive = child.proc.poll() is None
    child.kill(signal.SIGTERM)
    end = child.finish(60)
    if latency is None:
        why = "timeout" if alive else end.failure or "exited"
        return Outcome(None, end.rss_mb, f"batch not applied: {why}")
    if end.seconds is None:
        return Outcome(None, end.rss_mb, f"SIGTERM: {end.failure}")
    return Outcome(latency, end.rss_mb)


def merge_floor(landing: Path, out: Path) -> None:
    """(In the child of ``--floor``.) Fold the batches ``out`` does not hold yet, alone, and
    apply them by one bare delta-rs MERGE; prints the seconds of the MERGE."""
    import pyarrow as pa  # noqa: PLC0415
    from deltalake import DeltaTable  # noqa: PLC0415

    from replicator.delta.changes import read_files  # noqa: PLC0415
    from replicator.delta.fold import fold  # noqa: PLC0415
    from replicator.delta.materialize import app_id  # noqa: PLC0415
    from replicator.landed.batches import Landing as Landed  # noqa: PLC0415
    from replicator.landed.batches import landing_root  # noqa: PLC0415
    from replicator.landed.options import MaterializeOptions  # noqa: PLC0415

    landed = Landed.read(landing_root(landing))
    table = DeltaTable(str(out / "bench" / "t"))
    done = table.transaction_version(app_id(landed)) or 0
    files = [f for m in landed.manifests if m.batch > done for f in m.files]
    read = read_files("bench.t", files, MaterializeOptions())
    folded = fold(read.model, read.changes)
    alive = folded.rows
    gone = folded.touched.join(alive.select(["id"]), ["id"], join_type="left anti")
    action = "__action"
    updated = alive.append_column(action, pa.array(["u"] * alive.num_rows))
    deleted = pa.table(
        [gone["id"] if f.name == "id" else pa.nulls(gone.num_rows, f.type) for f in alive.schema],
        schema=alive.schema,
    ).append_column(action, pa.array(["d"] * gone.num_rows))
    source = pa.concat_tables([updated, deleted])
    began = time.perf_counter()
    (
        table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate=f"s.{action} = 'd'")
        .when_matched_update_all(predicate=f"s.{action} = 'u'", except_cols=[action])
        .when_not_matched_insert_all(predicate=f"s.{action} = 'u'", except_cols=[action])
        .execute()
    )
    print(f"merge seconds {time.perf_counter() - began:.3f}", flush=True)


def run_floor(landing: Path, built: Path, out: Path, timeout: float) -> Outcome:
    _restore(built, out)
    command = [sys.executable, __file__, "--floor-of", str(landing), str(out)]
    child = Child(command)
    outcome = child.finish(timeout)
    if outcome.seconds is None:
        return outcome
    found = [line for line in child.last_output.splitlines() if line.startswith("merge seconds")]
    if not found:
        return Outcome(None, outcome.rss_mb, "no time printed")
    return Outcome(float(found[-1].split()[-1]), outcome.rss_mb)


# ------------------------------------------------------------------------------ main


def _restore(source: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True)


def _median(outcomes: Sequence[Outcome]) -> Outcome:
    failed = [o for o in outcomes if o.seconds is None]
    rss = max(o.rss_mb for o in outcomes)
    if failed:
        return Outcome(None, rss, failed[0].failure)
    return Outcome(statistics.median(o.seconds for o in outcomes if o.seconds is not None), rss)


@dataclass
class Row:
    n: int
    k: int
    spread: str
    fmt: str
    full: Outcome
    incremental: Outcome
    follow: Outcome | None
    floor: Outcome | None = None  # a bare delta-rs MERGE of the batch (``--floor``)


def _secs(outcome: Outcome | None) -> str:
    if outcome is None:
        return "-"
    return f"{outcome.seconds:.2f}" if outcome.seconds is not None else "FAILED"


def _pct(row: Row) -> float | None:
    if row.full.seconds is None or row.incremental.seconds is None:
        return None
    return 100 * row.incremental.seconds / row.full.seconds


def print_table(results: list[Row]) -> None:
    print()
    print(
        "| rows N | changes K | spread | format | full build s | incremental s "
        "| incremental/full % | follow latency s | peak RSS MB full / incr / follow |"
    )
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for row in results:
        pct = _pct(row)
        rss = " / ".join(
            "-" if o is None else f"{o.rss_mb:.0f}" for o in (row.full, row.incremental, row.follow)
        )
        print(
            f"| {row.n:,} | {row.k:,} | {row.spread} | {row.fmt} | {_secs(row.full)} "
            f"| {_secs(row.incremental)} | {'-' if pct is None else f'{pct:.1f}'} "
            f"| {_secs(row.follow)} | {rss} |"
        )
    floors = [row for row in results if row.floor is not None]
    if floors:
        print(
            "\n| rows N | changes K | spread | incremental s | bare delta-rs MERGE s "
            "| peak RSS MB incremental / bare MERGE |"
        )
        print("|---:|---:|---|---:|---:|---:|")
        for row in floors:
            assert row.floor is not None
            print(
                f"| {row.n:,} | {row.k:,} | {row.spread} | {_secs(row.incremental)} "
                f"| {_secs(row.floor)} | {row.incremental.rss_mb:.0f} / {row.floor.rss_mb:.0f} |"
            )
    failures = [
        (row, what, o)
        for row in results
        for what, o in (
            ("full", row.full),
            ("incremental", row.incremental),
            ("follow", row.follow),
        )
        if o is not None and o.seconds is None
    ]
    for row, what, o in failures:
        print(f"\nFAILED: N={row.n:,} K={row.k:,} {row.spread} {row.fmt} {what}: {o.failure}")
    print_targets(results)


def print_targets(results: list[Row]) -> None:
    def verdict(ok: bool | None) -> str:
        return "n/a (not measured)" if ok is None else ("met" if ok else "NOT met")

    largest = max(r.n for r in results)
    print(f"\ntargets (largest N measured: {largest:,}):")
    for fmt in dict.fromkeys(r.fmt for r in results):
        mine = [r for r in results if r.fmt == fmt]
        at_1k = [r for r in mine if r.k == 1000 and r.n == 10_000_000]
        ok: bool | None = None
        shown = []
        if at_1k:
            ok = True
            for r in at_1k:
                pct = _pct(r)
                s = r.incremental.seconds
                fits = (
                    s is not None
                    and pct is not None
                    and s <= TARGET_INCREMENTAL_S
                    and pct <= TARGET_INCREMENTAL_PCT
                )
                ok = ok and fits
                shown.append(
                    f"{r.spread} {_secs(r.incremental)} s / {'-' if pct is None else f'{pct:.1f}'}%"
                )
        print(
            f"- {fmt}: incremental K=1k on 10M <= {TARGET_INCREMENTAL_S:.0f} s and "
            f"<= {TARGET_INCREMENTAL_PCT:.0f}% of full: {verdict(ok)} ({'; '.join(shown) or '-'})"
        )
        growth: list[str] = []
        ok = None
        for r in mine:
            if r.n != 10_000_000:
                continue
            small = next(
                (s for s in mine if s.n == 1_000_000 and (s.k, s.spread) == (r.k, r.spread)), None
            )
            if small is None:
                continue
            a, b = small.incremental.seconds, r.incremental.seconds
            if a is None or b is None:
                ok = False
                growth.append(f"K={r.k:,} {r.spread} FAILED")
                continue
            ok = (True if ok is None else ok) and b <= TARGET_GROWTH * a
            growth.append(f"K={r.k:,} {r.spread} {b / a:.2f}x")
        print(
            f"- {fmt}: incremental 10M within {TARGET_GROWTH:.0f}x of 1M: {verdict(ok)} "
            f"({'; '.join(growth) or '-'})"
        )
        peaks = {
            what: max((o.rss_mb for o in runs if o is not None), default=0.0)
            for what, runs in (
                ("full", [r.full for r in mine]),
                ("incremental", [r.incremental for r in mine]),
                ("follow", [r.follow for r in mine]),
            )
        }
        shown = [f"{what} {mb:.0f} MB" for what, mb in peaks.items() if mb]
        print(
            f"- {fmt}: peak RSS <= {TARGET_RSS_MB:.0f} MB: "
            f"{verdict(max(peaks.values()) <= TARGET_RSS_MB)} (max: {', '.join(shown)})"
        )
    for fmt in ("delta", "delta-cow"):
        follows = [
            r.follow for r in results if r.fmt == fmt and r.follow is not None and r.n == 10_000_000
        ]
        if not any(r.fmt == fmt for r in results):
            continue
        ok = (
            None
            if not follows
            else all(f.seconds is not None and f.seconds <= TARGET_FOLLOW_S for f in follows)
        )
        worst = [f.seconds for f in follows if f.seconds is not None]
        print(
            f"- {fmt}: follow latency at 10M <= {TARGET_FOLLOW_S:.0f} s: {verdict(ok)} "
            f"(max {max(worst) if worst else float('nan'):.2f} s)"
        )


def _ints(text: str) -> list[int]:
    return [int(v.replace("_", "")) for v in text.split(",") if v.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=_ints, default=[1_000_000, 10_000_000])
    parser.add_argument("--changes", type=_ints, default=[1000, 100_000])
    parser.add_argument("--spread", default="uniform,newest")
    parser.add_argument("--formats", default="delta,delta-cow,parquet")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="N=100k, K=1000")
    parser.add_argument("--work", type=Path, help="keeps the landing zones for the next run")
    parser.add_argument(
        "--floor", action="store_true", help="also time a bare delta-rs MERGE of each batch"
    )
    parser.add_argument("--floor-of", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.floor_of:
        merge_floor(*args.floor_of)
        return
    if args.quick:
        args.rows, args.changes = [100_000], [1000]
    spreads = [s.strip() for s in args.spread.split(",") if s.strip()]
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not set(spreads) <= {"uniform", "newest"} or not set(formats) <= FORMATS:
        parser.error("--spread takes uniform,newest; --formats delta,delta-cow,parquet")
    work = args.work or Path(tempfile.mkdtemp(prefix="materialize-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work directory: {work}", flush=True)
    results: list[Row] = []
    try:
        for n in args.rows:
            results.extend(measure(work / f"n{n}", n, args, spreads, formats))
            print_table(results)
    finally:
        for child in list(Child.live):
            child.kill()
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


def measure(
    place: Path, n: int, args: argparse.Namespace, spreads: list[str], formats: list[str]
) -> list[Row]:
    """Every configuration of one N: full builds once per format, then each (K, spread)."""
    base, run = place / "base", place / "run"
    build_base(base, n)
    landing_dir = run / "landing"
    full: dict[str, Outcome] = {}
    for fmt in formats:
        outcomes = []
        for rep in range(args.repeat):
            _restore(base, landing_dir)
            shutil.rmtree(run / f"out-{fmt}", ignore_errors=True)
            outcomes.append(run_materialize(fmt, landing_dir, run / f"out-{fmt}", n, args.timeout))
            print(f"N={n:,} {fmt} full build {rep + 1}: {_secs(outcomes[-1])} s", flush=True)
        full[fmt] = _median(outcomes)
        if full[fmt].seconds is not None:
            _restore(run / f"out-{fmt}", place / f"built-{fmt}")
    rows_out: list[Row] = []
    for k in args.changes:
        for spread in spreads:
            seed = k * 7 + len(spread)
            incremental: dict[str, list[Outcome]] = {fmt: [] for fmt in formats}
            follows: dict[str, list[Outcome]] = {}
            floors: list[Outcome] = []
            for rep in range(args.repeat):
                _restore(base, landing_dir)
                landing = Landing(landing_dir)
                model = Model(rows=n, top=n)
                _, landed_s = land_changes(landing, model, k, spread, 1, seed)
                for fmt in formats:
                    if full[fmt].seconds is None:
                        incremental[fmt].append(Outcome(None, 0.0, "no full build"))
                        continue
                    out = run / f"out-{fmt}"
                    _restore(place / f"built-{fmt}", out)
                    outcome = run_materialize(fmt, landing_dir, out, model.rows, args.timeout)
                    incremental[fmt].append(outcome)
                    print(
                        f"N={n:,} K={k:,} {spread} {fmt} incremental {rep + 1}: "
                        f"{_secs(outcome)} s (batch landed in {landed_s:.1f} s)",
                        flush=True,
                    )
                if args.floor and "delta" in formats and full["delta"].seconds is not None:
                    floor = run_floor(
                        landing_dir, place / "built-delta", run / "out-floor", args.timeout
                    )
                    floors.append(floor)
                    shutil.rmtree(run / "out-floor", ignore_errors=True)
                    print(
                        f"N={n:,} K={k:,} {spread} delta bare MERGE {rep + 1}: "
                        f"{_secs(floor)} s, {floor.rss_mb:.0f} MB",
                        flush=True,
                    )
                for number, fmt in enumerate(("delta", "delta-cow"), start=2):
                    done = incremental.get(fmt, [])
                    if not done or done[-1].seconds is None:
                        continue
                    # another K-change batch, landed while --follow runs on the output of
                    # (b); the second format's first pass applies the first's batch too
                    land = functools.partial(
                        _land_next, landing, model, k, spread, number, seed + number
                    )
                    out = run / f"out-{fmt}"
                    follow = follow_latency(landing, out, args.timeout, land, fmt)
                    if follow.seconds is not None and count_rows(fmt, out) != model.rows:
                        follow = Outcome(None, follow.rss_mb, "WRONG row count after follow")
                    follows.setdefault(fmt, []).append(follow)
                    print(f"N={n:,} K={k:,} {spread} {fmt} follow {rep + 1}: {_secs(follow)} s")
            for fmt in formats:
                median = _median(follows[fmt]) if follows.get(fmt) else None
                lowest = _median(floors) if fmt == "delta" and floors else None
                rows_out.append(
                    Row(n, k, spread, fmt, full[fmt], _median(incremental[fmt]), median, lowest)
                )
    return rows_out


if __name__ == "__main__":
    main()
