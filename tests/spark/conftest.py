"""One local SparkSession for the whole test session (local[2], no UI, two shuffle
partitions, quiet logs), created lazily by the first Spark test.

The driver runs with TZ=UTC so that PySpark's ``collect()`` shows TIMESTAMP values in UTC
(it converts them to naive datetimes in the Python process's local zone). The tests skip
when pyspark or Java is missing; with REPLICATOR_REQUIRE_LIVE=1 (CI sets it) that skip becomes a
failure, as for the live servers in tests/conftest.py.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.conftest import REQUIRE_LIVE_ENV, _unavailable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

os.environ["TZ"] = "UTC"
time.tzset()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if importlib.util.find_spec("pyspark") is None:
        _unavailable("pyspark is not installed", REQUIRE_LIVE_ENV)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        _unavailable("Spark needs Java (none on PATH, JAVA_HOME unset)", REQUIRE_LIVE_ENV)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("replicator-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
