"""Every expected value INDEX.md quotes for the corpus, asserted against our decoder.

Upstream projects assert ENUM/SET as raw index/bitmask; where the TABLE_MAP carries labels we
decode labels, so both the label and its position in the label list are checked.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from pathlib import Path
from uuid import UUID

import pytest

from replicator.binlog import events as ev
from replicator.binlog.constants import CHECKSUM_OFF, EventType
from replicator.binlog.gtid import MariadbGtid, MysqlGtidSet
from replicator.binlog.parser import EventParser
from replicator.binlog.values import ABSENT

from .util import changes, corpus_file, decode_all, flatten

RUST = "rust_mysql_common"
OSHEROFF = "mysql-binlog-connector-java"
APECLOUD = "mysql-binlog-connector-rust"


def _of(events: list[ev.Event], kind: type[ev.Event]) -> list[ev.Event]:
    return [e for e in flatten(events) if isinstance(e, kind)]


def test_enum_string_set(corpus_dir: Path) -> None:
    found = changes(decode_all(corpus_dir / RUST / "mysql-enum-string-set.000001"))
    assert [c.op for c in found] == ["c", "u", "d"]
    insert, update, delete = found
    table = _of(decode_all(corpus_dir / RUST / "mysql-enum-string-set.000001"), ev.TableMapEvent)[0]
    assert isinstance(table, ev.TableMapEvent)
    enum_labels = table.columns[2].enum_values
    set_labels = table.columns[3].set_values
    assert enum_labels == ("var1", "variant2", "foo")
    assert set_labels == ("one", "two", "three", "four")
    assert insert.after is not None
    f1, f2, f3, f4, f5 = insert.after
    assert f1 == "0123456789" * 10
    # INDEX.md calls it "the 300-char string"; the server's bytes hold 298 characters, and the
    # independent reference decode (mariadb-binlog) prints the same 298.
    reference = corpus_file(
        corpus_dir,
        "_reference-decodes/rust_mysql_common_mysql-enum-string-set.000001.mariadb-binlog-vv.txt",
    ).read_text(encoding="latin-1")
    printed = reference.split("@2='", 1)[1].split("'", 1)[0]
    assert f2 == printed
    assert len(printed) == 298
    assert f3 == "var1" and enum_labels.index("var1") + 1 == 1
    assert f4 == "one,three"  # bitmask 0b00000101
    assert f5 == "0123456789"
    assert update.before == insert.after
    assert update.after == ("field1", "field_2", "variant2", "two,four", f2)  # 2, 0b00001010
    assert delete.before == update.after


def test_bit_columns(corpus_dir: Path) -> None:
    (insert,) = changes(decode_all(corpus_dir / RUST / "mysql_type_bit.000001"))
    # upstream: a = bytes [0b100], b = 'foo', c = bytes [0b100000]; we decode BIT as int
    assert insert.after == (0b100, "foo", 0b100000)


def test_minimal_row_metadata_unsigned_and_collation(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "minimal_row_metadata.000001")
    (table,) = _of(events, ev.TableMapEvent)
    assert isinstance(table, ev.TableMapEvent)
    assert table.columns[2].collation_id == 255  # utf8mb4_0900_ai_ci
    assert table.columns[4].unsigned
    (insert,) = changes(events)
    assert insert.after == (1, ABSENT, "a", ABSENT, 3230202323)


def test_negative_time_over_24_hours(corpus_dir: Path) -> None:
    (insert,) = changes(decode_all(corpus_dir / RUST / "time_issue.000001"))
    assert insert.after == (-dt.timedelta(days=21, hours=3, minutes=48, seconds=27),)
    assert -dt.timedelta(hours=507, minutes=48, seconds=27) == insert.after[0]


def test_json_opaque_scalars(corpus_dir: Path) -> None:
    found = changes(decode_all(corpus_dir / RUST / "json-opaque.binlog"))
    texts = [c.after[0] for c in found if c.after is not None]
    # INDEX.md quotes the DECIMAL scalars as strings (serde_json's rendering); MySQL itself
    # prints JSON decimals as bare numbers, as we do.
    assert texts == [
        '{"a":"base64:type15:VQ=="}',
        '{"b":"2012-03-18"}',
        '{"c":"2012-03-18 11:30:45.000000"}',
        '{"c":"87:31:46.654321"}',
        '{"d":123.456}',
        '{"e":9.00}',
        '{"e":[0,1,true,false]}',
        '{"e":null}',
    ]
    assert json.loads(str(texts[4]), parse_float=Decimal) == {"d": Decimal("123.456")}


def test_vector_columns(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "vector.binlog")
    maps = {
        (t.schema, t.table): t
        for t in _of(events, ev.TableMapEvent)
        if isinstance(t, ev.TableMapEvent)
    }
    foo, bar = maps[("dtb", "foo")], maps[("dtb", "bar")]
    assert [c.vector_dimensions for c in foo.columns if c.type == 242] == [3]
    assert [c.vector_dimensions for c in bar.columns if c.type == 242] == [2, 4]
    first = next(
        e
        for e in _of(events, ev.RowsEvent)
        if isinstance(e, ev.RowsEvent) and e.table.table == "foo"
    )
    assert isinstance(first, ev.RowsEvent)
    expected = [
        (1, bytes.fromhex("cdcc8c3fcdcc0c4033335340")),
        (2, bytes.fromhex("0000803f000080bf00000000")),
    ]
    assert [(row[0], struct.pack("<3f", *row[1])) for row in first.rows] == expected  # type: ignore[misc]
    assert first.rows[0][1] == pytest.approx([1.1, 2.2, 3.3])


def test_invisible_columns(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "binlog-invisible-columns.000001")
    table = _of(events, ev.TableMapEvent)[0]
    assert isinstance(table, ev.TableMapEvent)
    assert [c.name for c in table.columns] == ["f1", "f2", "f3", "f4", "f5", "f6"]
    assert [c.visible for c in table.columns] == [False, False, True, True, True, False]
    assert [c.unsigned for c in table.columns] == [True, True, False, False, False, True]
    assert changes(events)[0].after == (1, 2, -3, "4", b"\x05", 6000000000)


def test_transaction_compression_inner_events(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "transaction_compression.000001")
    (payload,) = [e for e in events if isinstance(e, ev.TransactionPayloadEvent)]
    assert [e.header.type_code for e in payload.events] == [
        EventType.QUERY,
        EventType.TABLE_MAP,
        EventType.WRITE_ROWS,
        EventType.XID,
    ]
    (insert,) = changes(events)
    assert (insert.table, insert.after) == ("test.tb1", (1,))


def test_tagged_gtid_file(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "binlog_transaction_with_GTID_TAG.000001")
    (previous,) = _of(events, ev.PreviousGtidsEvent)
    assert isinstance(previous, ev.PreviousGtidsEvent)
    uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
    assert previous.gtid_set == MysqlGtidSet.parse(f"{uuid}:1-13:mytag:1-2")
    assert previous.gtid_set.intervals(UUID(uuid)) == ((1, 14),)
    assert previous.gtid_set.intervals(UUID(uuid), "mytag") == ((1, 3),)
    (gtid,) = _of(events, ev.MysqlGtidEvent)
    assert isinstance(gtid, ev.MysqlGtidEvent)
    assert gtid.header.type_code == EventType.GTID_TAGGED
    assert (gtid.tag, gtid.gno, gtid.gtid) == ("mytag", 3, f"{uuid}:mytag:3")
    (insert,) = changes(events)
    assert (insert.table, insert.after) == ("test.orders", (3, 100, Decimal("250.00")))


def test_previous_gtids_untagged(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "binlog_transaction_previous_GTID_no_tag.000001")
    (previous,) = _of(events, ev.PreviousGtidsEvent)
    assert isinstance(previous, ev.PreviousGtidsEvent)
    assert str(previous.gtid_set) == "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"


def test_mariadb_full_metadata(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / RUST / "mariadb-bin.000001")
    table = _of(events, ev.TableMapEvent)[0]
    assert isinstance(table, ev.TableMapEvent)
    assert (table.schema, table.table) == ("toddy_test", "outbox")
    assert table.column_names == ("id", "topic", "event_type", "event", "created")
    assert table.primary_key == (0,)
    assert [c.collation_id for c in table.columns] == [None, 45, 45, 63, None]
    first = changes(events)[0]
    assert first.after == (
        62,
        "foo",
        "JSON",  # ENUM index 2 of ('BLOB', 'JSON', 'PROTOBUF')
        b'{"foo":1}',
        dt.datetime.fromtimestamp(1650493084, dt.UTC),
    )
    assert table.columns[2].enum_values == ("BLOB", "JSON", "PROTOBUF")
    annotate = _of(events, ev.AnnotateRowsEvent)[0]
    assert isinstance(annotate, ev.AnnotateRowsEvent)
    assert annotate.query == (
        "insert into outbox (topic, event_type, event) values ('foo', 'JSON', '{\"foo\":1}')"
    )
    gtids = [e.gtid for e in _of(events, ev.MariadbGtidEvent) if isinstance(e, ev.MariadbGtidEvent)]
    assert gtids[0] == MariadbGtid(0, 1, 1)


def test_osheroff_compressed_update(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / OSHEROFF / "mysql-bin.compressed")
    (payload,) = [e for e in events if isinstance(e, ev.TransactionPayloadEvent)]
    assert (payload.compression_type, payload.payload_size, payload.uncompressed_size) == (
        0,
        451,
        960,
    )
    query, table, rows, xid = payload.events
    assert isinstance(query, ev.QueryEvent) and query.query == "BEGIN"
    assert isinstance(table, ev.TableMapEvent)
    assert (table.schema, table.table, table.table_id, len(table.columns)) == (
        "demo",
        "movies",
        84,
        11,
    )
    assert isinstance(rows, ev.RowsEvent) and rows.header.type_code == EventType.UPDATE_ROWS
    assert isinstance(xid, ev.XidEvent) and xid.xid == 31
    for inner in payload.events:
        assert (inner.header.server_id, inner.header.timestamp) == (223344, 1646406641)
    before = (
        1,
        "Once Upon a Time in the West",
        1968,
        "Italy",
        "Western",
        "Claudia Cardinale|Charles Bronson|Henry Fonda|Gabriele Ferzetti|Frank Wolff|"
        "Al Mulock|Jason Robards|Woody Strode|Jack Elam|Lionel Stander|Paolo Stoppa|"
        "Keenan Wynn|Aldo Sambrell",
        "Sergio Leone",
        "Ennio Morricone",
        "Sergio Leone|Sergio Donati|Dario Argento|Bernardo Bertolucci",
        "Tonino Delli Colli",
        "Paramount Pictures",
    )
    assert rows.rows == (before,)
    assert rows.after == ((*before[:4], "Western|Action", *before[5:]),)


def test_osheroff_payload_body_vector(corpus_dir: Path) -> None:
    vectors = _osheroff_vectors(corpus_dir)
    body = vectors["TransactionPayloadEventDataDeserializerTest:DATA"]
    parser = EventParser(checksum_alg=CHECKSUM_OFF)
    event = parser.parse(_event(EventType.TRANSACTION_PAYLOAD, body))
    assert isinstance(event, ev.TransactionPayloadEvent)
    assert [type(e) for e in event.events] == [
        ev.QueryEvent,
        ev.TableMapEvent,
        ev.RowsEvent,
        ev.XidEvent,
    ]
    file_events = decode_all(corpus_dir / OSHEROFF / "mysql-bin.compressed")
    (payload,) = [e for e in file_events if isinstance(e, ev.TransactionPayloadEvent)]
    assert [getattr(e, "rows", None) for e in event.events] == [
        getattr(e, "rows", None) for e in payload.events
    ]


def _osheroff_vectors(corpus_dir: Path) -> dict[str, bytes]:
    data = json.loads(corpus_file(corpus_dir, f"{OSHEROFF}/test-vectors.json").read_text())
    out: dict[str, bytes] = {}
    for v in data["vectors"]:
        test = Path(v["file"]).stem
        out[f"{test}:{v['name']}"] = bytes.fromhex(v["hex"])
    return out


def _event(type_code: int, body: bytes, *, server_id: int = 0, timestamp: int = 1) -> bytes:
    size = 19 + len(body)
    return struct.pack("<IBIIIH", timestamp, type_code, server_id, size, 0, 0) + body


def test_osheroff_mariadb_and_xa_bodies(corpus_dir: Path) -> None:
    vectors = _osheroff_vectors(corpus_dir)
    parser = EventParser(checksum_alg=CHECKSUM_OFF)
    gtid = parser.parse(
        _event(EventType.MARIADB_GTID, vectors["MariadbGtidEventDataDeserializerTest:DATA"])
    )
    assert isinstance(gtid, ev.MariadbGtidEvent)
    assert str(gtid.gtid) == "0-0-7404"
    gtid_list = parser.parse(
        _event(
            EventType.MARIADB_GTID_LIST, vectors["MariadbGtidListEventDataDeserializerTest:DATA"]
        )
    )
    assert isinstance(gtid_list, ev.MariadbGtidListEvent)
    assert [str(g) for g in gtid_list.gtids] == ["0-102-7255"]
    annotate = parser.parse(
        _event(
            EventType.MARIADB_ANNOTATE_ROWS, vectors["AnnotateRowsEventDataDeserializerTest:DATA"]
        )
    )
    assert isinstance(annotate, ev.AnnotateRowsEvent)
    assert annotate.query == "INSERT INTO foo set i = 2"
    xa = parser.parse(
        _event(EventType.XA_PREPARE, vectors["XAPrepareEventDataDeserializerTest:DATA"])
    )
    assert isinstance(xa, ev.XaPrepareEvent)
    assert (xa.one_phase, xa.format_id, xa.gtrid, xa.bqual) == (False, 123, b"gtrid", b"bqual")


def test_gh_ost_files(corpus_dir: Path) -> None:
    for name in ("mysql-bin.000066", "mysql-bin.000070"):
        events = decode_all(corpus_dir / "gh-ost" / name)
        fde = events[0]
        assert isinstance(fde, ev.FormatDescriptionEvent)
        assert fde.checksum_alg == 1
        assert fde.server_version == "5.6.28-log"
        kinds = [e.kind.value for e in _of(events, ev.RowsEvent) if isinstance(e, ev.RowsEvent)]
        assert (kinds.count("c"), kinds.count("u"), kinds.count("d")) == (9, 5, 3)  # events
        ops = [c.op for c in changes(events) if c.table == "test.samplet"]
        assert (ops.count("c"), ops.count("u"), ops.count("d")) == (10, 6, 4)  # row changes


def test_apecloud_files(corpus_dir: Path) -> None:
    events = decode_all(corpus_dir / APECLOUD / "mysql-bin.000057")
    payloads = [e for e in events if isinstance(e, ev.TransactionPayloadEvent)]
    assert len(payloads) == 2
    queries = [
        " ".join(e.query.split())
        for e in _of(events, ev.RowsQueryEvent)
        if isinstance(e, ev.RowsQueryEvent)
    ]
    assert (
        "update test_table_3 set enum_field='large', set_field='c', "
        "product_item_2='product_3_value' where product_id=55555"
    ) in queries
    assert any(
        q.startswith("insert into test_table_3 values(6666, 'product_item_value_2'")
        for q in queries
    )
    first = next(c for c in changes(events) if c.table == "a.b")
    assert first.after == (1,)
    emoji = [
        c
        for c in changes(decode_all(corpus_dir / APECLOUD / "mysql-bin.000080"))
        if "emoji" in c.table
    ]
    assert emoji and all(c.after is not None and c.after[1] in ("", b"") for c in emoji)
