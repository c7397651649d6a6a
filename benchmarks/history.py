"""History: what a landing zone's readers pay for every batch ever committed.

The manifests are the commit records, and every reader checks them whole: the daemon's start
(``LandingZone.recover``: the chain, every committed file's size, the newest files' hashes),
``replicator verify`` (the same for every file, offline), and the committed readers
(``read_manifests``: what ``materialize``, ``materialize-delta`` and ``read_changes`` start
from). Their cost grows with the number of batches, not with the changes since the last
run. This script measures that slope.

For each ``--batches`` N it builds a local landing zone of N batches through the real commit
protocol (``LandingZone.begin``/``commit``; each batch one file of ``--rows`` rows), kept in
``--work`` between runs (building 20,000 batches takes minutes), then times each reader
``--repeat`` times in this process, with the daemon's collector settings (``tune_gc``), and
prints the median seconds and microseconds per batch.

Run: ``.venv/bin/python benchmarks/history.py [--batches 1000,5000] [--repeat 3]``; ``--quick``
is a small smoke run. It measures the package of the checkout it is in: to measure another
commit, run this script from a worktree of it (``--work`` can share the landing zones).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replicator.config import SinkConfig
from replicator.landed.committed import read_manifests
from replicator.runtime import tune_gc
from replicator.sink.landing import LandingZone
from replicator.sink.verify import verify_landing
from replicator.storage import LocalStore
from tests.unit.test_object_store import _land


def build(root: Path, batches: int, rows: int) -> float:
    """A landing zone of ``batches`` committed batches at ``root`` (kept when it is there
    already); returns the seconds it took to build (0 when kept)."""
    if (root / "_manifests").is_dir():
        return 0.0
    started = time.perf_counter()
    zone = LandingZone(SinkConfig(root=str(root)))
    zone.recover()
    ids = itertools.count(1)
    for _ in range(batches):
        _land(zone, ids, rows)
    return time.perf_counter() - started


def _start(root: Path) -> None:
    LandingZone(SinkConfig(root=str(root))).recover()


def _verify(root: Path) -> None:
    report = verify_landing(LocalStore(root), deep=False)
    if not report.ok:
        raise SystemExit(f"{root}: {report.lines()[:3]}")


def _readers(root: Path) -> None:
    read_manifests(root)


READERS: list[tuple[str, Callable[[Path], None]]] = [
    ("daemon start (recover)", _start),
    ("verify (sizes)", _verify),
    ("read_manifests (readers)", _readers),
]


def table(work: Path, sizes: list[int], rows: int, repeat: int) -> str:
    tune_gc()
    lines = [
        "| reader | batches | median s | us per batch |",
        "|---|---:|---:|---:|",
    ]
    for size in sizes:
        root = work / f"zone-{size}x{rows}"
        built = build(root, size, rows)
        if built:
            print(f"built {size} batches in {built:.1f} s ({root})", file=sys.stderr)
        for name, reader in READERS:
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                reader(root)
                times.append(time.perf_counter() - started)
            median = statistics.median(times)
            lines.append(f"| {name} | {size} | {median:.3f} | {median / size * 1e6:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1000,5000", help="comma-separated sizes")
    parser.add_argument("--rows", type=int, default=1, help="rows in each batch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, help="keep the landing zones here")
    parser.add_argument("--quick", action="store_true", help="200 and 400 batches, once")
    args = parser.parse_args()
    sizes = [200, 400] if args.quick else [int(n) for n in args.batches.split(",")]
    repeat = 1 if args.quick else args.repeat
    with tempfile.TemporaryDirectory(prefix="replicator-history-") as temp:
        print(table(args.work or Path(temp), sizes, args.rows, repeat))


if __name__ == "__main__":
    main()
