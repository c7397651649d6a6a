"""Replication command payloads and stream positions."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog.gtid import MariadbGtid, MariadbGtidPosition, MysqlGtid, MysqlGtidSet
from replicator.binlog.position import StreamPosition, position_reached, start_position
from replicator.errors import ConfigError
from replicator.source.protocol import (
    BINLOG_THROUGH_GTID,
    dump_gtid_payload,
    dump_payload,
    register_replica_payload,
)
from tests.corpus.util import decode_all


def test_register_replica_payload_layout() -> None:
    payload = register_replica_payload(4242, host="replicator", user="")
    server_id, host_len = struct.unpack_from("<IB", payload)
    assert server_id == 4242
    assert payload[5 : 5 + host_len] == b"replicator"
    rest = payload[5 + host_len :]
    assert rest == b"\x00" + b"\x00" + struct.pack("<HII", 0, 0, 0)  # user, password, port...


def test_dump_payload_layout() -> None:
    payload = dump_payload(7, "mysql-bin.000003", 1234, flags=2)
    assert struct.unpack_from("<IHI", payload) == (1234, 2, 7)
    assert payload[10:] == b"mysql-bin.000003"


def test_dump_gtid_payload_carries_the_server_encoding(corpus_dir: Path) -> None:
    """The GTID set in COM_BINLOG_DUMP_GTID uses the same encoding as PREVIOUS_GTIDS; the
    bytes must be exactly what a MySQL server wrote for that set."""
    events = decode_all(
        corpus_dir / "rust_mysql_common" / "binlog_transaction_previous_GTID_no_tag.000001"
    )
    (previous,) = [e for e in events if isinstance(e, ev.PreviousGtidsEvent)]
    raw = (
        corpus_dir / "rust_mysql_common" / "binlog_transaction_previous_GTID_no_tag.000001"
    ).read_bytes()
    body = raw[previous.position + 19 : previous.next_position - 4]
    gtid_set = MysqlGtidSet.parse("b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2")
    payload = dump_gtid_payload(99, gtid_set, file="", position=4)
    flags, server_id, name_len = struct.unpack_from("<HII", payload)
    assert (flags, server_id, name_len) == (BINLOG_THROUGH_GTID, 99, 0)
    position, data_len = struct.unpack_from("<QI", payload, 10)
    assert position == 4
    assert payload[22:] == body
    assert data_len == len(body)


def test_stream_position_after_transactions() -> None:
    start = StreamPosition("mysql-bin.000001", 4, MariadbGtidPosition.parse("0-1-5"))
    moved = start.after(MariadbGtid.parse("0-1-6"), "mysql-bin.000001", 900).after(
        MariadbGtid.parse("1-2-3"), "mysql-bin.000002", 77
    )
    assert moved.file == "mysql-bin.000002" and moved.position == 77
    assert str(moved.mariadb_gtid) == "0-1-6,1-2-3"
    mysql = StreamPosition(
        mysql_gtid=MysqlGtidSet.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
    )
    gtid = MysqlGtid.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:6")
    after = mysql.after(gtid, "binlog.000009", 10)
    assert str(after.mysql_gtid) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6"


def test_position_order_follows_file_numbers() -> None:
    assert position_reached("mysql-bin.000010", 4, "mysql-bin.000009", 999999)
    assert not position_reached("mysql-bin.000009", 100, "mysql-bin.000009", 101)
    assert position_reached("mysql-bin.000009", 101, "mysql-bin.000009", 101)


def test_start_position_parsing() -> None:
    assert start_position(None, None) is None
    mariadb = start_position("0-1-100,1-1-5", None)
    assert mariadb is not None and str(mariadb.mariadb_gtid) == "0-1-100,1-1-5"
    mysql = start_position("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", None)
    assert mysql is not None and mysql.mysql_gtid is not None
    by_file = start_position(None, "mysql-bin.000002", 120)
    assert by_file == StreamPosition("mysql-bin.000002", 120)
    with pytest.raises(ConfigError, match="not both"):
        start_position("0-1-1", "mysql-bin.000001")
    with pytest.raises(ConfigError, match="before the first event"):
        start_position(None, "mysql-bin.000001", 2)
