"""``spark.state``: a table's versions and temporary links are told apart from those of a
table whose name starts like its own (no Spark needed: ``write`` is a plain function)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from replicator.spark import state as st
from replicator.spark.state import TableState


def _state(table: str) -> TableState:
    return TableState(
        table=table,
        landing="/data/landing",
        mode="batch",
        last_batch=1,
        stream_batch=-1,
        last_seq=1,
        key=["id"],
        keep_metadata=False,
        allow_unknown=False,
        schema="",
        rows=0,
    )


def _writes(rows: int) -> Callable[[Path], int]:
    def write(directory: Path) -> int:
        directory.mkdir()
        (directory / "part-00000.parquet").write_bytes(b"rows")
        return rows

    return write


def test_a_table_named_like_another_tables_version_keeps_its_state(tmp_path: Path) -> None:
    database = tmp_path / "out" / "db"
    mine = database / "a"
    # MySQL takes any name quoted: these look like a's version directory and temporary link
    others = [database / "a.v-0123456789ab", database / "a.link-0123456789ab"]
    for link in others:
        st.publish(link, _writes(7), _state(f"db.{link.name}"))
    st.publish(mine, _writes(1), _state("db.a"))
    st.publish(mine, _writes(2), _state("db.a"))  # a's old version goes, nothing else
    st.clean(mine)
    for link in others:
        found = st.load(link)
        assert found is not None, link.name
        assert found[0].rows == 7
        assert (found[1] / "part-00000.parquet").read_bytes() == b"rows"
    found = st.load(mine)
    assert found is not None
    assert found[0].rows == 2
    versions = [p.name for p in database.iterdir() if re.fullmatch(r"\.a\.v-[0-9a-f]{12}", p.name)]
    assert versions == [found[1].name]
