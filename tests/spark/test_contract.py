"""``replicator.landed.contract`` copies the footer keys the daemon writes instead of
importing them (the commit records' names the daemon takes from it): they must match, and
importing every module of ``replicator/spark`` must load nothing of ``sink/``, ``source/``,
``binlog/`` or the C core (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from replicator.landed import contract, manifests
from replicator.sink import arrow_types, compaction, identity, parquet_writer

pytestmark = pytest.mark.spark

FORBIDDEN = ("replicator.sink", "replicator.source", "replicator.binlog", "replicator.pipeline")


def test_the_copies_match_the_daemon() -> None:
    assert contract.FIELD_ID_KEY == arrow_types.FIELD_ID_KEY
    assert contract.FIELD_FILL_KEY == arrow_types.FIELD_FILL_KEY
    assert contract.FIELD_TYPE_KEY == arrow_types.FIELD_TYPE_KEY
    assert contract.PRIMARY_KEY_KEY == parquet_writer.PRIMARY_KEY_KEY
    assert contract.MANIFESTS == manifests.MANIFESTS
    assert contract.COMPACTIONS == compaction.COMPACTIONS  # type: ignore[attr-defined]
    assert contract.LANDING_ID_KEY == identity.LANDING_ID_KEY


def test_spark_imports_nothing_of_the_daemon() -> None:
    code = (
        "import json, pkgutil, sys, importlib, replicator.spark as s\n"
        "for m in pkgutil.iter_modules(s.__path__):\n"
        "    importlib.import_module('replicator.spark.' + m.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(done.stdout)
    assert "replicator.spark.streaming" in loaded
    assert [m for m in loaded if m.startswith(FORBIDDEN) or "_rowcore" in m] == []
