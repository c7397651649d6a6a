"""The Prometheus alert rules (deploy/prometheus/) and the Grafana dashboard (deploy/grafana/)
name only metrics the daemon exports, and the dashboard shows every one of them.

The exported names come from ``replicator.metrics.Metrics`` itself (a counter ``x`` is scraped as
``x_total``); the names in a PromQL expression are its identifiers that are neither functions,
keywords, label names nor template variables. ``promtool check rules`` and ``promtool test
rules`` (the rules' own unit tests in alerts.test.yml) run where promtool is installed:
scripts/bootstrap.sh unpacks it from Debian's prometheus package.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from replicator.metrics import Metrics
from tests.conftest import REQUIRE_LIVE_ENV, _unavailable

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "replicator.json"
PROMETHEUS_OWN = {"up"}  # series Prometheus makes for every scrape target

_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_VARIABLES = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
_KEYWORDS |= {"group_left", "group_right", "inf", "nan", "atan2"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub("", text)
    text = _VARIABLES.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group()
        if text[match.end() :].lstrip().startswith("(") or name.lower() in _KEYWORDS:
            continue  # a function call, or an operator word
        names.add(name)
    return names


def exported() -> dict[str, str]:
    """Every series name the daemon exports -> its metric family name."""
    names: dict[str, str] = {}
    for family in Metrics().registry.collect():
        if family.type == "counter":
            names[f"{family.name}_total"] = family.name
        else:
            names[family.name] = family.name
    return names


def rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def panels() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # a collapsed row holds its panels
    return found


def queries() -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in panels()
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("replicator_replication_lag_seconds > 300", {"replicator_replication_lag_seconds"}),
        (
            'sum by (table, op) (rate(replicator_row_changes_total{job=~"$job", op="u"}'
            "[$__rate_interval]))",
            {"replicator_row_changes_total"},
        ),
        ("a > 900 and on(instance) b offset 5m > 1e3", {"a", "b"}),
        ("time() - replicator_last_batch_timestamp_seconds{instance=~'x'}", {
            "replicator_last_batch_timestamp_seconds"
        }),
        ('up{job="replicator"} == 0', {"up"}),
    ],
)  # fmt: skip
def test_metric_names_of_an_expression(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_exported_names_are_the_documented_families() -> None:
    names = exported()
    assert "replicator_commit_failures_total" in names
    assert "replicator_replication_lag_seconds" in names
    assert "replicator_snapshot_table_eta_seconds" in names
    assert all(name.startswith("replicator_") for name in names)


def test_alert_rules_name_only_exported_metrics() -> None:
    known = set(exported()) | PROMETHEUS_OWN
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        assert names <= known, f"{rule['alert']}: {sorted(names - known)} are not exported"


def test_alert_rules_cover_the_operational_signals() -> None:
    used = set().union(*(metric_names(rule["expr"]) for rule in rules()))
    assert {
        "replicator_replication_lag_seconds",
        "replicator_source_silence_seconds",
        "replicator_checkpoint_age_seconds",
        "replicator_crc_errors_total",
        "replicator_stream_connected",
        "up",  # a stop: a failed commit (a full disk) among them
    } <= used
    # a failed commit stops the daemon within a second: its counter is gone before a scrape
    assert "replicator_commit_failures_total" not in used


def test_every_alert_says_how_bad_and_what_happened() -> None:
    for rule in rules():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_rule_unit_tests_feed_only_exported_series() -> None:
    known = set(exported()) | PROMETHEUS_OWN
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    series = [s["series"] for test in tests for s in test["input_series"]]
    assert series
    for text in series:
        assert metric_names(text) <= known, text
    tested = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert tested == {rule["alert"] for rule in rules()}


def test_dashboard_is_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "job", "instance"} <= variables
    for panel in panels():
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        refs = [target["refId"] for target in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_dashboard_queries_name_only_exported_metrics() -> None:
    known = set(exported())
    for title, expr in queries():
        names = metric_names(expr)
        assert names, title
        assert names <= known, f"{title}: {sorted(names - known)} are not exported"
        assert 'job=~"$job"' in expr and 'instance=~"$instance"' in expr, title


def test_dashboard_shows_every_exported_metric() -> None:
    shown = set().union(*(metric_names(expr) for _, expr in queries()))
    assert set(exported()) - shown == set()


def _promtool() -> str:
    found = shutil.which("promtool") or shutil.which(
        "promtool", path=str(Path(sys.executable).parent)
    )
    if found:
        return found
    _unavailable(
        "promtool not installed (scripts/bootstrap.sh unpacks it from Debian's prometheus)",
        REQUIRE_LIVE_ENV,
    )


@pytest.mark.tools
@pytest.mark.parametrize(
    "command", [("check", "rules", RULES.name), ("test", "rules", RULE_TESTS.name)]
)
def test_promtool(command: tuple[str, ...]) -> None:
    result = subprocess.run(
        [_promtool(), *command],
        cwd=RULES.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
