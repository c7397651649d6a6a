"""Fuzzing the daemon's write path: damaged binlog bytes in, typed errors (or data) out.

Real binlog files (the repository's own captures, and the shared corpus when it is there) are
damaged the ways disks and fuzzers damage them: bytes flipped inside event bodies with the
CRC32 recomputed (so the damage gets past the checksum into the decoders, their blocks, the
pipeline and the Parquet writer), sizes broken, events cut short or repeated. Each damaged
file goes through the same path ``replicator run`` takes (decoder into blocks, transaction
assembler, pipeline, landing zone on a real filesystem, commit protocol). The only outcomes
allowed: it lands, or it stops with a ``ReplicatorError`` (the daemon's typed errors, which
exit with their own code). Afterwards recovery must accept the landing zone and every
committed file must read back. Unclosed files are errors (ResourceWarning).
"""

from __future__ import annotations

import asyncio
import random
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.binlog.constants import EventType
from replicator.binlog.framing import _NeedData
from replicator.binlog.position import StreamPosition
from replicator.binlog.stream import BinlogFileDecoder
from replicator.binlog.transaction import TransactionAssembler
from replicator.config import FilterConfig, SinkConfig
from replicator.errors import ReplicatorError
from replicator.landed.manifests import read_chain
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import LandingZone
from tests.conftest import CORPUS_DIR
from tests.hypothesis_budget import examples

DATA = Path(__file__).resolve().parents[1] / "data"
HEADER = 19
MAGIC = b"\xfebin"
# corpus files rich in column types and event kinds (used when the corpus is present)
CORPUS_SAMPLES = (
    "mysql-binlog-connector-java/mysql-bin.checksum-crc32",  # MySQL 5.7, rows v2
    "canal/mysql-bin.000001",
    "rust_mysql_common/json.binlog.000001",  # binary JSON, PARTIAL_UPDATE_ROWS
    "rust_mysql_common/mysql-enum-string-set.000001",
    "rust_mysql_common/mariadb-bin.000001",  # MariaDB FULL metadata, rows v1
)


def _seed_files() -> list[Path]:
    files = [DATA / "mariadb-full-metadata.000001", DATA / "mariadb-compressed.000001"]
    return files + [CORPUS_DIR / n for n in CORPUS_SAMPLES if (CORPUS_DIR / n).is_file()]


SEED_NAMES = [path.name for path in _seed_files()]
SEEDS = [path.read_bytes() for path in _seed_files()]


def _events(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of each event of a binlog file."""
    out = []
    pos = len(MAGIC)
    while pos + HEADER <= len(data):
        size = struct.unpack_from("<I", data, pos + 9)[0]
        if size < HEADER or pos + size > len(data):
            break
        out.append((pos, size))
        pos += size
    return out


def _fix_crc(data: bytearray, offset: int, size: int) -> None:
    body = bytes(data[offset : offset + size - 4])
    struct.pack_into("<I", data, offset + size - 4, zlib.crc32(body) & 0xFFFFFFFF)


def damage(data: bytes, rng: random.Random) -> bytes:
    """One damaged copy of a binlog file."""
    out = bytearray(data)
    events = _events(data)
    if len(events) < 2:
        return bytes(out)
    kind = rng.choice(("flip", "flip", "flip", "size", "cut", "repeat", "zero"))
    offset, size = rng.choice(events[1:])  # the FORMAT_DESCRIPTION stays intact
    if kind == "flip":
        for _ in range(rng.randint(1, 6)):
            at = offset + rng.randrange(HEADER, max(HEADER + 1, size - 4))
            out[at] ^= rng.randint(1, 255)
        _fix_crc(out, offset, size)
    elif kind == "zero":
        start = offset + rng.randrange(HEADER, max(HEADER + 1, size - 4))
        end = min(offset + size - 4, start + rng.randint(1, 16))
        out[start:end] = bytes(end - start)
        _fix_crc(out, offset, size)
    elif kind == "size":
        struct.pack_into("<I", out, offset + 9, rng.randint(0, size * 2))
    elif kind == "cut":
        del out[offset + rng.randrange(1, size) :]
    else:  # an event repeated, as a torn rewrite might
        out[offset + size : offset + size] = data[offset : offset + size]
    return bytes(out)


def _decode(data: bytes) -> Iterator[object]:
    decoder = BinlogFileDecoder("fuzz-bin.000001", verify_checksum=True)
    decoder.feed(data)
    while True:
        event = decoder.next_event()
        if isinstance(event, _NeedData):
            break
        yield event
    decoder.finish()


async def _land(data: bytes, root: Path) -> None:
    sink = SinkConfig(root=str(root), batch_max_rows=3, large_transaction_rows=4, row_group_rows=2)
    zone = LandingZone(sink)
    pipeline = Pipeline(sink, FilterConfig(), zone, zone.recover())
    pipeline.seed(StreamPosition("fuzz-bin.000001", 4))
    assembler = TransactionAssembler(part_rows=sink.large_transaction_rows)
    try:
        for event in _decode(data):
            for item in assembler.feed(event):  # type: ignore[arg-type]
                await pipeline.handle(item)
        await pipeline.commit()
    finally:
        await pipeline.close()


def _committed_files_read_back(root: Path) -> int:
    LandingZone(SinkConfig(root=str(root))).recover()
    files = 0
    for manifest in read_chain(root):
        for entry in manifest.entries:
            table = pq.read_table(root / entry["path"])
            assert table.num_rows == entry["rows"]
            files += 1
    return files


def _run_case(data: bytes, root: Path) -> str:
    try:
        asyncio.run(_land(data, root))
    except ReplicatorError as exc:  # a typed stop: what the daemon would exit with
        outcome = f"stopped ({type(exc).__name__})"
    else:
        outcome = "landed"
    _committed_files_read_back(root)
    return outcome


# an undamaged seed that stops by design: MySQL PARTIAL_JSON diffs without a before image
STOPS_BY_DESIGN = {"json.binlog.000001"}


def test_the_undamaged_seeds_land(tmp_path: Path) -> None:
    outcomes = {}
    for n, (name, data) in enumerate(zip(SEED_NAMES, SEEDS, strict=True)):
        root = tmp_path / str(n)
        outcomes[name] = _run_case(data, root)
        assert _committed_files_read_back(root) > 0
    assert outcomes == {
        name: "stopped (IntegrityError)" if name in STOPS_BY_DESIGN else "landed"
        for name in SEED_NAMES
    }


def test_damage_gets_past_the_checksum() -> None:
    """The damage is not only caught by CRC32: most damaged copies decode further."""
    rng = random.Random(7)
    data = SEEDS[0]
    damaged = [damage(data, rng) for _ in range(50)]
    assert sum(d != data for d in damaged) >= 45
    flipped = 0
    for copy in damaged:
        try:
            for event in _decode(copy):
                assert event is not None
        except ReplicatorError as exc:
            flipped += "checksum" not in str(exc).lower()
        else:
            flipped += 1
    assert flipped >= 10


@pytest.mark.filterwarnings("error::ResourceWarning")
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@settings(
    max_examples=examples(250),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, 10))
def test_damaged_binlogs_land_or_stop_with_a_typed_error(
    tmp_path_factory: pytest.TempPathFactory, seed: int, which: int
) -> None:
    rng = random.Random(seed)
    data = SEEDS[which % len(SEEDS)]
    for _ in range(rng.randint(1, 3)):
        data = damage(data, rng)
    root = tmp_path_factory.mktemp("zone")
    outcome = _run_case(data, root)
    assert outcome == "landed" or outcome.startswith("stopped (")


def test_event_types_in_the_seeds_cover_rows_and_ddl() -> None:
    kinds: set[int] = set()
    for data in SEEDS:
        for offset, _ in _events(data):
            kinds.add(data[offset + 4])
    assert EventType.TABLE_MAP in kinds
    assert EventType.QUERY in kinds
    assert kinds & {EventType.WRITE_ROWS, EventType.WRITE_ROWS_V1, EventType.UPDATE_ROWS}
