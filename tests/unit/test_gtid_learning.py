"""A start given as file/position learns its GTID state (``source.stream``): MySQL's rule
for PREVIOUS_GTIDS, how a position takes a learnt state, and a pipeline whose checkpoint
then carries it (MariaDB's ``BINLOG_GTID_POS`` path is tested live: test_gtid_start.py)."""

from __future__ import annotations

from pathlib import Path

from replicator.binlog import events as ev
from replicator.binlog.constants import LOG_EVENT_ARTIFICIAL_F
from replicator.binlog.gtid import MariadbGtidPosition, MysqlGtidSet
from replicator.binlog.position import StreamPosition
from replicator.binlog.transaction import TransactionAssembler
from replicator.config import FilterConfig, SinkConfig
from replicator.pipeline.pipeline import Pipeline
from replicator.sink.landing import LandingZone
from replicator.source.items import GtidStateLearned
from replicator.source.stream import ServerFacts, previous_gtids_state

from .synthetic_events import UUID, Events

PREVIOUS = MysqlGtidSet.parse(f"{UUID}:1-4")


def _facts(*, gtid_mode: bool) -> ServerFacts:
    end = StreamPosition("b.2", 4, None, MysqlGtidSet.parse(f"{UUID}:1-9") if gtid_mode else None)
    return ServerFacts("mysql", (8, 0, 40), "CRC32", "ROW", end)


def _previous_gtids(file: str, position: int, *, flags: int = 0) -> ev.PreviousGtidsEvent:
    header = ev.EventHeader(1_700_000_000, 35, 1, 71, position + 71, flags)
    return ev.PreviousGtidsEvent(header, file, position, position + 71, PREVIOUS)


def test_previous_gtids_give_the_state_at_the_start_of_their_file() -> None:
    facts = _facts(gtid_mode=True)
    at_start = StreamPosition("b.2", 4)
    assert previous_gtids_state(at_start, _previous_gtids("b.2", 126), facts) == StreamPosition(
        "b.2", 4, mysql_gtid=PREVIOUS
    )
    # the end of the file before: every transaction of it is in the next file's set
    end_of_last = StreamPosition("b.1", 9000)
    learnt = previous_gtids_state(end_of_last, _previous_gtids("b.2", 126), facts)
    assert learnt == StreamPosition("b.1", 9000, mysql_gtid=PREVIOUS)


def test_previous_gtids_tell_nothing_otherwise() -> None:
    on, off = _facts(gtid_mode=True), _facts(gtid_mode=False)
    event = _previous_gtids("b.2", 126)
    # a start inside the file: transactions before it are not in the set
    assert previous_gtids_state(StreamPosition("b.2", 5000), event, on) is None
    # GTIDs off: the set is empty and means nothing (a GTID start would resend everything)
    assert previous_gtids_state(StreamPosition("b.2", 4), event, off) is None
    # a state known already
    known = StreamPosition("b.2", 4, mysql_gtid=MysqlGtidSet.parse(f"{UUID}:1-3"))
    assert previous_gtids_state(known, event, on) is None
    artificial = _previous_gtids("b.2", 126, flags=LOG_EVENT_ARTIFICIAL_F)
    assert previous_gtids_state(StreamPosition("b.2", 4), artificial, on) is None


def test_a_position_takes_a_learnt_state_only_at_the_same_place() -> None:
    bare = StreamPosition("b.1", 1234)
    state = MariadbGtidPosition.parse("0-1-7")
    learnt = StreamPosition("b.1", 1234, mariadb_gtid=state)
    assert bare.with_gtid_of(learnt) == learnt
    assert bare.with_gtid_of(None) == bare
    assert bare.with_gtid_of(StreamPosition("b.1", 99, mariadb_gtid=state)) == bare
    own = StreamPosition("b.1", 1234, mariadb_gtid=MariadbGtidPosition.parse("0-1-3"))
    assert own.with_gtid_of(learnt) == own  # a state of its own is never replaced


async def test_the_checkpoint_carries_the_learnt_state(tmp_path: Path) -> None:
    cfg = SinkConfig(root=str(tmp_path), batch_max_seconds=999)
    zone = LandingZone(cfg)
    pipeline = Pipeline(cfg, FilterConfig(), zone, zone.recover())
    events = Events()
    start = StreamPosition("b.1", events.position)
    pipeline.seed(start)  # what Service does with the stream's origin
    await pipeline.handle(GtidStateLearned(StreamPosition("b.1", start.position, None, PREVIOUS)))
    assembler = TransactionAssembler()
    for event in (events.gtid(5), events.query("BEGIN"), events.table_map(), events.xid(1)):
        for item in assembler.feed(event):
            await pipeline.handle(item)
    await pipeline.commit()
    await pipeline.close()

    checkpoint = LandingZone(cfg).recover()
    assert checkpoint.position is not None
    assert checkpoint.position.mysql_gtid == MysqlGtidSet.parse(f"{UUID}:1-5")
    assert (checkpoint.position.file, checkpoint.position.position) == ("b.1", events.position)
