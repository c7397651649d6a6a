"""``materialize --format delta --out s3://...``: the Delta tables on an S3 API server (moto,
started by the test), written with delta-rs's own S3 commits, kept up to date by MERGE and
removed when their table is dropped; read back by DuckDB from a copy of the objects."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

from replicator.delta.materialize import materialize_delta, optimize_delta
from replicator.errors import IntegrityError
from tests.delta.test_lifecycle import ITEMS, LOG
from tests.harness.duckdb_delta import read_delta
from tests.harness.s3 import S3Server
from tests.spark.zone import Ddl, Zone, expected_tables, int_col, table, text_col

pytestmark = pytest.mark.delta


def tables_on(server: S3Server, bucket: str, prefix: str, local: Path) -> dict[str, object]:
    """Every Delta table under s3://bucket/prefix, copied down and read by DuckDB."""
    fs = server.filesystem()
    found: dict[str, object] = {}
    selector = pafs.FileSelector(f"{bucket}/{prefix}", recursive=True, allow_not_found=True)
    logs = {
        i.path.split("/_delta_log/")[0]
        for i in fs.get_file_info(selector)
        if "/_delta_log/" in i.path
    }
    for found_at in sorted(logs):
        rel = found_at[len(f"{bucket}/{prefix}/") :]
        pafs.copy_files(found_at, str(local / rel), source_filesystem=fs)
        names, rows = read_delta(local / rel)
        found[rel.replace("/", ".")] = sorted(
            (dict(zip(names, r, strict=True)) for r in rows), key=repr
        )
    return found


def test_tables_on_an_object_store(s3_env: S3Server, tmp_path: Path) -> None:
    bucket = s3_env.bucket("current-state")
    out = f"s3://{bucket}/tables"
    zone = Zone(tmp_path / "landing")
    zone.commit([(ITEMS, "c", (i, f"n{i}")) for i in (1, 2, 3)] + [(LOG, "c", (1, "x"))] * 2)
    materialize_delta(zone.root, out)
    assert tables_on(s3_env, bucket, "tables", tmp_path / "a") == expected_tables(zone)

    zone.commit([(ITEMS, "u", (2, "two"), (2, "n2")), (LOG, "d", (1, "x"))])
    results = {r.table: r for r in materialize_delta(zone.root, out)}
    assert (results["shop.items"].action, results["shop.log"].action) == ("merged", "merged")
    assert results["shop.items"].path == f"{out}/shop/items"
    assert tables_on(s3_env, bucket, "tables", tmp_path / "b") == expected_tables(zone)

    zone.commit([Ddl("drop", "shop.log")])
    results = {r.table: r for r in materialize_delta(zone.root, out)}
    assert results["shop.log"].action == "removed"
    assert optimize_delta(out)[0].table == "shop.items"
    assert tables_on(s3_env, bucket, "tables", tmp_path / "c") == expected_tables(zone)

    other = Zone(tmp_path / "other")
    other.commit([(ITEMS, "c", (9, "x"))])
    with pytest.raises(IntegrityError, match="was not built from this landing zone"):
        materialize_delta(other.root, out)


def test_table_names_that_urls_would_cut_short(s3_env: S3Server, tmp_path: Path) -> None:
    # an unquoted s3:// URL ends at "#" or "?": shop.a#b and shop.a?b were one Delta table
    # at shop/a, and the second table's run found the first one's rows there
    bucket = s3_env.bucket("url-names")
    out = f"s3://{bucket}/tables"
    names = ("shop.a#b", "shop.a?b", "shop.a b")
    versions = [table(n, int_col(0, "id"), text_col(1, "name"), key=[0]) for n in names]
    zone = Zone(tmp_path / "landing")
    zone.commit([(v, "c", (k, f"{v.name}-{k}")) for v in versions for k in range(3)])
    assert {r.action for r in materialize_delta(zone.root, out)} == {"built"}
    assert {r.action for r in materialize_delta(zone.root, out)} == {"unchanged"}
    assert tables_on(s3_env, bucket, "tables", tmp_path / "copy") == expected_tables(zone)
