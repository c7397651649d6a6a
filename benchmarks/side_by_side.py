"""Decode and landing throughput, side by side with python-mysql-replication and mariadb-binlog.

From nothing: starts a throwaway MariaDB (ROW, CRC32, GTID, ``binlog_row_metadata=FULL``),
writes the standard OLTP workload into a fresh binlog file, then reads that same binlog range
with each client, ``--repeat`` times, one client at a time, each in its own process:

(a)  python-mysql-replication, over the replication protocol, touching every value;
(b)  our decoder alone: ``ReplicaStream`` over the replication protocol into a null sink (every
     event CRC32-checked, every value decoded into the blocks the daemon lands: native buffers
     for the common types, whose non-NULL values are counted from their set bytes, and every
     other value touched);
(b') our decoder on the binlog file on disk (``read_binlog_files``), same null sink;
(c)  end to end: ``replicator run --stop-at-end`` into a fresh landing zone, until every
     transaction is committed Parquet (wall time of the whole process, start-up included);
(d)  peak RSS of each (``wait4`` ``ru_maxrss`` of the child process);
(e)  ``mariadb-binlog -v --read-from-remote-server`` (C) over the same range, output discarded;
(f)  ``replicator dump --binlog-file`` of the workload's binlog files, its JSON lines to
     /dev/null (wall time of the whole process, start-up included, as (c)).

The workload (seeded, deterministic): table ``bench.t`` with 13 mixed columns (the COLUMNS of
``stream_loop_lag.py``), about 10% NULLs in every column but the key; ``--rows`` inserts in
transactions of 200 rows, then updates of 10% of the rows (100 rows per transaction; full
before and after images), then deletes of 5% (100 per transaction). With the default 1M rows
that is 1.25M row images. Throughput is row images per second over the same range for every
client; the table gives medians over the repetitions and the ratio to (a).

``--workload one-row`` writes ``--rows`` (50,000 by default) one-row INSERTs instead, each its
own autocommit transaction: what per-transaction work costs. ``--small`` is the 200k-row
variant of the standard workload (fixed costs weigh more). Every row of the table gives its
rate against (a) and against the C tool (e).

Targets: (b) >= 25x (a); (c) >= 20x (a); (c) peak RSS <= 250 MB; (f) >= 10x (a); against the
C tool (issue "end to end faster than the C tool"): (c) >= 1.0x (e) and (f) >= 0.7x (e) on the
standard workload, (c) >= 0.7x (e) on one-row transactions.

Run: ``.venv/bin/python benchmarks/side_by_side.py [--rows 1000000] [--repeat 3]``;
``--quick`` is a small smoke run; ``--baseline DIR`` also runs (c) from another checkout,
interleaved, and prints the ratio (how a change moved end-to-end time, side by side). Needs
python-mysql-replication in the venv (``.venv/bin/pip install 'mysql-replication>=1.0.17'``).
``--data-dir DIR`` keeps the server and its workload there and reuses them on the next run;
``--profile DIR`` also records py-spy profiles of (b), (c) and (f) there (slower; needs
``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.mariadb import REPL_PASSWORD, REPL_USER, MariaDBServer

WORKERS = Path(__file__).resolve().with_name("side_by_side_workers.py")
COLUMNS = (
    "id BIGINT PRIMARY KEY, a INT, b INT UNSIGNED, c BIGINT, d DECIMAL(12,2), e DOUBLE, "
    "f VARCHAR(40), g VARCHAR(200), h DATETIME(3), i DATE, j TINYINT, k CHAR(8), l TEXT"
)
INSERT_BATCH = 200
CHANGE_BATCH = 100
TARGET_DECODE = 25.0
TARGET_END_TO_END = 20.0
TARGET_RSS_MB = 250.0
TARGET_DUMP = 10.0
# against the C tool, (e) (issue "end to end faster than the C tool")
TARGET_END_TO_END_VS_C = 1.0
TARGET_DUMP_VS_C = 0.7
TARGET_ONE_ROW_VS_C = 0.7
WORKLOAD_VERSION = 3
WORKLOADS = ("standard", "one-row")
_SERVER_ID = 7300


# ------------------------------------------------------------------------------ workload


def _word_pool(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randrange(2, 11))) for _ in range(size)]


def _text(rng: random.Random, words: list[str], limit: int) -> str:
    """Words up to ``limit`` characters, about ``limit / 2`` on average."""
    out = " ".join(rng.choices(words, k=rng.randrange(0, limit // 8 + 2)))
    return out[:limit]


def _decimal(rng: random.Random) -> str:
    cents = rng.randrange(-(10**12) + 1, 10**12)
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole}.{frac:02d}"


def write_workload(
    server: MariaDBServer, rows: int, seed: int, kind: str = "standard"
) -> dict[str, int]:
    """The workload ``kind`` names; returns its row image counts."""
    if kind == "one-row":
        return write_one_row_workload(server, rows, seed)
    rng = random.Random(seed)
    words = _word_pool(rng, 5000)
    codes = ["".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", k=8)) for _ in range(1000)]
    epoch = dt.datetime(2020, 1, 1)
    server.execute("CREATE DATABASE IF NOT EXISTS bench")
    server.execute(f"CREATE TABLE bench.t ({COLUMNS})")
    conn = server.connect("bench")

    def maybe(value: object) -> object:
        return None if rng.random() < 0.1 else value

    def row(n: int) -> tuple[object, ...]:
        when = epoch + dt.timedelta(seconds=rng.randrange(200_000_000), milliseconds=n % 1000)
        return (
            n,
            maybe(rng.randrange(-(2**31), 2**31)),
            maybe(rng.randrange(2**32)),
            maybe(rng.randrange(-(2**63), 2**63)),
            maybe(_decimal(rng)),
            maybe(rng.uniform(-1e6, 1e6)),
            maybe(_text(rng, words, 40)),
            maybe(_text(rng, words, 200)),
            maybe(when.isoformat(sep=" ", timespec="milliseconds")),
            maybe(when.date().isoformat()),
            maybe(rng.randrange(-128, 128)),
            maybe(rng.choice(codes)),
            maybe(_text(rng, words, 100)),
        )

    insert = "INSERT INTO t VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
    with conn.cursor() as cur:
        for start in range(0, rows, INSERT_BATCH):
            cur.executemany(insert, [row(n) for n in range(start, min(start + INSERT_BATCH, rows))])
        updated = rng.sample(range(rows), rows // 10)
        for start in range(0, len(updated), CHANGE_BATCH):
            ids = updated[start : start + CHANGE_BATCH]
            marks = ",".join(["%s"] * len(ids))
            cur.execute(
                f"UPDATE t SET a = %s, e = IFNULL(e, 0) + 1, g = %s, h = %s WHERE id IN ({marks})",
                (
                    rng.randrange(-(2**31), 2**31),
                    _text(rng, words, 200),
                    (epoch + dt.timedelta(seconds=rng.randrange(200_000_000))).isoformat(" "),
                    *ids,
                ),
            )
        deleted = rng.sample(range(rows), rows // 20)
        for start in range(0, len(deleted), CHANGE_BATCH):
            ids = deleted[start : start + CHANGE_BATCH]
            cur.execute(f"DELETE FROM t WHERE id IN ({','.join(['%s'] * len(ids))})", ids)
    conn.close()
    return {
        "inserts": rows,
        "updates": len(updated),
        "deletes": len(deleted),
        "images": rows + 2 * len(updated) + len(deleted),
    }


def write_one_row_workload(server: MariaDBServer, rows: int, seed: int) -> dict[str, int]:
    """``rows`` one-row INSERTs, each its own autocommit transaction (the common OLTP shape:
    per-transaction work dominates), into the standard table."""
    rng = random.Random(seed)
    words = _word_pool(rng, 5000)
    server.execute("CREATE DATABASE IF NOT EXISTS bench")
    server.execute(f"CREATE TABLE bench.t ({COLUMNS})")
    conn = server.connect("bench")
    conn.autocommit(True)
    insert = "INSERT INTO t (id, a, c, e, f, h) VALUES (%s,%s,%s,%s,%s,%s)"
    with conn.cursor() as cur:
        for n in range(rows):
            cur.execute(
                insert,
                (
                    n,
                    rng.randrange(-(2**31), 2**31),
                    rng.randrange(-(2**63), 2**63),
                    rng.uniform(-1e6, 1e6),
                    _text(rng, words, 40),
                    f"2024-01-01 00:00:{n % 60:02d}.{n % 1000:03d}",
                ),
            )
    conn.close()
    return {"inserts": rows, "updates": 0, "deletes": 0, "images": rows}


@dataclass(frozen=True)
class Workload:
    kind: str
    rows: int
    seed: int
    start_file: str
    start_position: int
    files: list[str]  # binlog files holding the workload, in order
    binlog_bytes: int  # bytes of the range
    counts: dict[str, int]
    write_seconds: float


def prepare(
    server: MariaDBServer, kind: str, rows: int, seed: int, marker: Path | None
) -> Workload:
    """Write the workload, or reuse the one a kept data dir already holds."""
    if marker is not None and marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("version") == WORKLOAD_VERSION and (
            saved["kind"],
            saved["rows"],
            saved["seed"],
        ) == (kind, rows, seed):
            saved.pop("version")
            print(f"reusing the workload in {marker.parent}", flush=True)
            return Workload(**{**saved, "write_seconds": 0.0})
        sys.exit(f"{marker.parent} holds another workload ({saved}); use another --data-dir")
    server.flush_binlogs()
    start = server.binlog_status()
    began = time.perf_counter()
    counts = write_workload(server, rows, seed, kind)
    write_seconds = time.perf_counter() - began
    server.flush_binlogs()  # the range ends at a file end
    names = server.binlog_files()
    files = names[names.index(start.file) : -1]
    size = sum(server.binlog_path(n).stat().st_size for n in files) - start.position
    workload = Workload(
        kind, rows, seed, start.file, start.position, files, size, counts, write_seconds
    )
    if marker is not None:
        marker.write_text(json.dumps({"version": WORKLOAD_VERSION, **workload.__dict__}))
    return workload


# ------------------------------------------------------------------------------ runs


@dataclass
class Run:
    images: int
    seconds: float
    peak_rss_mb: float
    note: str = ""


# ``ru_maxrss`` survives exec: a child forked from this (large) process would report this
# process's RSS as its floor. A bare interpreter (-S, no imports, ~9 MB) forks the measured
# command instead and reports its peak.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _child(
    command: list[str], *, stdout: int | None = subprocess.PIPE, cwd: Path | None = None
) -> tuple[str, float, float]:
    """Run ``command`` (in ``cwd``); (stdout, wall seconds, peak RSS MB of its process)."""
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rss:
        began = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCHER, rss.name, *command],
            stdout=stdout,
            stderr=err,
            cwd=cwd,
        )
        out, _ = proc.communicate()
        seconds = time.perf_counter() - began
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-3000:]
            sys.exit(f"{' '.join(command[:4])} ... exited {proc.returncode}:\n{tail}")
        peak_kb = int(rss.read())
    return (out or b"").decode(), seconds, peak_kb / 1024


def compile_trees(*trees: Path | None) -> None:
    """Byte-compile the ``replicator`` package of each checkout (this one for None) and the
    environment's packages (pyarrow, numpy, pymysql...), as installed packages are: a run
    that imports a module without its ``.pyc`` (missing, stale, or never written because
    ``PYTHONDONTWRITEBYTECODE`` is set, as pip then installs without them) compiles it first,
    every time, which would count against that tree."""
    here = Path(__file__).resolve().parents[1]
    packages = [sysconfig.get_paths()["purelib"]]
    packages += [str((here if tree is None else tree) / "replicator") for tree in trees]
    for package in packages:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", package],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def _profiled(command: list[str], profile: Path | None, name: str) -> list[str]:
    if profile is None:
        return command
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = profile / f"{name}.txt"
    # --gil: only the thread holding the GIL is sampled, which is what bounds throughput here
    flags = ["--gil", "--format", "raw", "--rate", "200"]
    return [spy, "record", *flags, "-o", str(out), "--", *command]


def run_worker(kind: str, spec: dict[str, Any], profile: Path | None = None) -> Run:
    command = _profiled([sys.executable, str(WORKERS), kind, json.dumps(spec)], profile, kind)
    out, _, peak = _child(command)
    # the result is the last JSON line (py-spy, when profiling, prints after it)
    result = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    return Run(result["images"], result["seconds"], peak, f"{result['values']:,} values")


def run_daemon(
    server: MariaDBServer,
    workload: Workload,
    tmp: Path,
    rep: int,
    profile: Path | None,
    tree: Path | None = None,
) -> Run:
    """(c): ``replicator run --stop-at-end``; ``tree``: the package of another checkout (run
    from its directory, so ``-m replicator.cli`` imports it), for a baseline in the same run."""
    root = tmp / f"landing-{rep}"
    config = tmp / f"replicator-{rep}.yaml"
    config.write_text(
        "service:\n  http_enabled: false\n  progress_seconds: 0\n  log_level: warning\n"
        f"source:\n  host: {server.host}\n  port: {server.port}\n  user: {REPL_USER}\n"
        f"  password: {REPL_PASSWORD}\n  server_id: {_SERVER_ID + 10 + rep}\n"
        f"start:\n  file: {workload.start_file}\n  position: {workload.start_position}\n"
        f"sink:\n  root: {root}\n"
    )
    command = [sys.executable, "-m", "replicator.cli", "run", "--stop-at-end", "--config"]
    _, seconds, peak = _child(
        _profiled([*command, str(config)], profile, "run"), stdout=subprocess.DEVNULL, cwd=tree
    )
    landed = sum(
        pq.ParquetFile(f).metadata.num_rows for f in (root / "bench" / "t").glob("*.parquet")
    )
    counts = workload.counts
    expected = counts["inserts"] + counts["updates"] + counts["deletes"]
    if landed != expected:
        sys.exit(f"replicator run landed {landed} row changes, expected {expected}")
    shutil.rmtree(root)
    return Run(counts["images"], seconds, peak, f"{landed:,} row changes landed")


def run_mariadb_binlog(server: MariaDBServer, workload: Workload) -> Run:
    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if tool is None:
        return Run(0, float("nan"), 0.0, "mariadb-binlog not installed")
    command = [
        tool,
        "-v",
        "--read-from-remote-server",
        f"--host={server.host}",
        f"--port={server.port}",
        f"--user={REPL_USER}",
        f"--password={REPL_PASSWORD}",
        f"--start-position={workload.start_position}",
        "--to-last-log",
        workload.start_file,
    ]
    with open(os.devnull, "wb") as null:
        _, seconds, peak = _child(command, stdout=null.fileno())
    return Run(workload.counts["images"], seconds, peak, "-v output discarded")


def run_dump(server: MariaDBServer, workload: Workload, profile: Path | None) -> Run:
    command = [sys.executable, "-m", "replicator.cli", "dump"]
    for name in workload.files:
        command += ["--binlog-file", str(server.binlog_path(name))]
    with open(os.devnull, "wb") as null:
        _, seconds, peak = _child(_profiled(command, profile, "dump"), stdout=null.fileno())
    return Run(workload.counts["images"], seconds, peak, "JSON lines to /dev/null")


# ------------------------------------------------------------------------------ report


@dataclass
class Measure:
    key: str
    title: str
    runs: list[Run]

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def rate(self) -> float:
        return self.runs[0].images / self.seconds if self.runs[0].images else float("nan")

    @property
    def peak(self) -> float:
        return max(r.peak_rss_mb for r in self.runs)


def report(measures: list[Measure], workload: Workload, repeat: int) -> list[str]:
    base = next(m for m in measures if m.key == "a").rate
    tool = next((m.rate for m in measures if m.key == "e"), float("nan"))
    counts = workload.counts
    print()
    print(
        f"workload {workload.kind}: {workload.rows:,} rows inserted, "
        f"{counts['updates']:,} updated, {counts['deletes']:,} deleted = "
        f"{counts['images']:,} row images; binlog range "
        f"{workload.binlog_bytes / 1e6:,.0f} MB ({', '.join(workload.files)}); "
        f"medians of {repeat} run(s)"
    )
    header = (
        f"{'measure':<46} {'row images':>11} {'seconds':>8} {'images/s':>10} "
        f"{'vs (a)':>7} {'vs (e)':>7} {'peak RSS':>9}  runs (s)"
    )
    print(header)
    print("-" * (len(header) + 12))
    for m in measures:
        runs = " ".join(f"{r.seconds:.1f}" for r in m.runs)
        print(
            f"{m.title:<46} {m.runs[0].images:>11,} {m.seconds:>8.2f} {m.rate:>10,.0f} "
            f"{m.rate / base:>6.1f}x {m.rate / tool:>6.2f}x {m.peak:>6.0f} MB  {runs}"
        )
    for m in measures:
        if m.runs[0].note:
            print(f"  {m.key}: {m.runs[0].note}")
    by_key = {m.key: m for m in measures}
    verdicts: list[str] = []
    # (key, text, against, ratio, rss): a rate at least ``ratio`` times measure ``against``'s,
    # or a peak RSS of at most ``rss``
    checks: list[tuple[str, str, str, float | None, float | None]] = [
        ("b", f"decode (b) >= {TARGET_DECODE:g}x (a)", "a", TARGET_DECODE, None),
        ("c", f"end to end (c) >= {TARGET_END_TO_END:g}x (a)", "a", TARGET_END_TO_END, None),
        ("c", f"end-to-end peak RSS <= {TARGET_RSS_MB:g} MB", "c", None, TARGET_RSS_MB),
        ("f", f"dump (f) >= {TARGET_DUMP:g}x (a)", "a", TARGET_DUMP, None),
    ]
    if workload.kind == "one-row":  # the targets against (a) are the standard workload's
        checks = [
            checks[2],
            ("c", f"one-row (c) >= {TARGET_ONE_ROW_VS_C:g}x (e)", "e", TARGET_ONE_ROW_VS_C, None),
        ]
    else:
        checks += [
            ("c", f"end to end (c) >= {TARGET_END_TO_END_VS_C:g}x (e)", "e", 1.0, None),
            ("f", f"dump (f) >= {TARGET_DUMP_VS_C:g}x (e)", "e", TARGET_DUMP_VS_C, None),
        ]
    for key, text, against, ratio, rss in checks:
        if key not in by_key or against not in by_key:
            continue
        m, other = by_key[key], by_key[against]
        if ratio is not None:
            ok, shown = m.rate >= ratio * other.rate, f"{m.rate / other.rate:.2f}x"
        else:
            ok, shown = m.peak <= (rss or 0), f"{m.peak:.0f} MB"
        verdicts.append("met" if ok else "MISSED")
        print(f"target {text}: {shown}, {verdicts[-1]}")
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows inserted")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (medians)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20k rows, 1 repeat")
    parser.add_argument(
        "--small", action="store_true", help="the 200k-row variant (fixed costs weigh more)"
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="standard",
        help="standard: ~1,000-row transactions; one-row: --rows one-row autocommit INSERTs "
        "(default --rows 50,000 then)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--only",
        default="a,b,b',c,e,f",
        help="comma-separated subset of a,b,b',c,e,f (default: all)",
    )
    parser.add_argument("--data-dir", type=Path, help="keep (and reuse) server and workload here")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. a git worktree of an older commit, its native core built): "
        "also measure (c0), `run` from it, interleaved with (c)",
    )
    parser.add_argument("--profile", type=Path, help="record py-spy profiles of (b), (c), (f) here")
    args = parser.parse_args()
    rows_given = any(a == "--rows" or a.startswith("--rows=") for a in sys.argv[1:])
    if args.small:
        args.rows = 200_000
    elif args.workload == "one-row" and not rows_given:
        args.rows = 50_000
    if args.quick:
        args.rows, args.repeat = 20_000, 1
    wanted = set(args.only.split(","))
    if "a" in wanted and importlib.util.find_spec("pymysqlreplication") is None:
        sys.exit(
            "python-mysql-replication is needed for measure (a); install it with\n"
            "    .venv/bin/pip install 'mysql-replication>=1.0.17'"
        )
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    marker = None if args.data_dir is None else args.data_dir / "workload.json"
    with (
        MariaDBServer(["--binlog-row-metadata=FULL"], base_dir=args.data_dir) as server,
        tempfile.TemporaryDirectory(prefix="replicator-bench-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        compile_trees(None, *([args.baseline] if args.baseline is not None else []))
        workload = prepare(server, args.workload, args.rows, args.seed, marker)
        if workload.write_seconds:
            print(f"workload written in {workload.write_seconds:.0f} s", flush=True)
        spec: dict[str, Any] = {
            "host": server.host,
            "port": server.port,
            "user": REPL_USER,
            "password": REPL_PASSWORD,
            "file": workload.start_file,
            "position": workload.start_position,
            "paths": [str(server.binlog_path(n)) for n in workload.files],
        }
        plan: list[tuple[str, str, Callable[[int], Run]]] = [
            (
                "a",
                "(a) python-mysql-replication, stream",
                lambda rep: run_worker("pymysqlrepl", {**spec, "server_id": _SERVER_ID + rep}),
            ),
            (
                "b",
                "(b) replicator decoder, stream -> null sink",
                lambda rep: run_worker(
                    "stream", {**spec, "server_id": _SERVER_ID + 20 + rep}, args.profile
                ),
            ),
            (
                "b'",
                "(b') replicator decoder, binlog file -> null",
                lambda rep: run_worker("file", spec),
            ),
            (
                "c",
                "(c) replicator run --stop-at-end -> Parquet",
                lambda rep: run_daemon(server, workload, tmp, rep, args.profile),
            ),
            (
                "c0",
                "(c0) the same, from --baseline",
                lambda rep: run_daemon(server, workload, tmp, 50 + rep, None, args.baseline),
            ),
            (
                "e",
                "(e) mariadb-binlog -v (C), stream",
                lambda rep: run_mariadb_binlog(server, workload),
            ),
            (
                "f",
                "(f) replicator dump --binlog-file -> /dev/null",
                lambda rep: run_dump(server, workload, args.profile),
            ),
        ]
        if args.baseline is not None:
            wanted.add("c0")
        plan = [p for p in plan if p[0] in wanted]
        measures = [Measure(key, title, []) for key, title, _ in plan]
        for rep in range(args.repeat):
            for (_, title, measure), into in zip(plan, measures, strict=True):
                run = measure(rep)
                into.runs.append(run)
                print(f"run {rep + 1}/{args.repeat} {title}: {run.seconds:.2f} s", flush=True)
    by_key = {m.key: m for m in measures}
    if "c" in by_key and "c0" in by_key:
        c, c0 = by_key["c"], by_key["c0"]
        print(
            f"(c) / (c0): {c.seconds / c0.seconds:.3f} of the baseline's time "
            f"({c.seconds:.2f} s against {c0.seconds:.2f} s, medians of {args.repeat}; "
            f"peak RSS {c.peak:.0f} MB against {c0.peak:.0f} MB)"
        )
    if not any(m.key == "a" for m in measures):
        for m in measures:
            print(f"{m.title}: {m.runs[0].images / m.seconds:,.0f} images/s, peak {m.peak:.0f} MB")
        return
    verdicts = report(measures, workload, args.repeat)
    if "MISSED" in verdicts:
        sys.exit(1)


if __name__ == "__main__":
    main()
