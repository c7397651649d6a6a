"""``replicator schema show``: a table's versions from the landing zone's schema history.

Takes the history the last committed manifest names (``sink.committed_history``: read-only,
checked against the hash that manifest pins it to) and prints, per table, each version with
the statement and binlog position that made it, or, with ``at``, the versions as of a GTID
position (the changes that position covers).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .history import Point, RewindError, SchemaChange, SchemaHistory
from .model import Column, Table


def report(
    history: SchemaHistory,
    *,
    table: str | None = None,
    covered: Callable[[Point], bool] | None = None,
) -> dict[str, Any]:
    """Every version of every table matching the ``table`` glob (``db.t``), as JSON-able
    data; with ``covered``, only the changes it accepts (a position to show the tables at)."""
    if covered is not None:
        history = history.copy()
        try:
            history.rewind(covered)
        except RewindError as exc:
            raise ConfigError(
                f"--at is ahead in one GTID domain and behind in another: {exc}",
                hint="give a position the binlog reached as a whole",
            ) from exc
    names: set[tuple[str, str]] = set(history.seed.tables)
    for change in history.changes:
        for effect in change.effects:
            for attribute in ("table", "before", "after"):
                found = getattr(effect, attribute, None)
                if isinstance(found, Table):
                    names.add((found.schema, found.name))
            names.update((t.schema, t.name) for t in getattr(effect, "tables", ()))
    out: dict[str, Any] = {
        "seeded_at": None if history.seed_point is None else history.seed_point.describe(),
        "changes": len(history.changes),
        "tables": {},
    }
    for schema, name in sorted(names):
        qualified = f"{schema}.{name}"
        if table is not None and not fnmatch.fnmatchcase(qualified, table):
            continue
        versions = [_version(change, found) for change, found in history.versions(schema, name)]
        current = history.catalog.table(schema, name)
        out["tables"][qualified] = {"exists": current is not None, "versions": versions}
    return out


def _version(change: SchemaChange | None, table: Table | None) -> dict[str, Any]:
    return {
        "at": "seed" if change is None else change.point.describe(),
        "seq": None if change is None else change.seq,
        "statement": None if change is None else change.statement,
        "columns": None if table is None else [_column(c) for c in table.columns],
        "primary_key": None if table is None else list(table.primary_key),
    }


def _column(column: Column) -> dict[str, Any]:
    return column.to_json()


def format_text(data: dict[str, Any]) -> str:
    lines = [f"schema history: seeded at {data['seeded_at']}, {data['changes']} changes since"]
    for name, entry in data["tables"].items():
        state = "" if entry["exists"] else " (gone)"
        lines.append(f"\n{name}{state}")
        for version in entry["versions"]:
            where = (
                version["at"]
                if version["seq"] is None
                else f"{version['at']}, _seq {version['seq']}"
            )
            lines.append(f"  at {where}")
            if version["statement"]:
                statement = " ".join(str(version["statement"]).split())
                lines.append(f"    {statement[:160]}")
            if version["columns"] is None:
                lines.append("    (dropped or renamed away)")
                continue
            key = set(version["primary_key"])
            for column in version["columns"]:
                flags = " NOT NULL" if not column["nullable"] else ""
                flags += " PRIMARY KEY" if column["name"] in key else ""
                lines.append(f"    #{column['id']} {column['name']} {column['column_type']}{flags}")
    return "\n".join(lines) + "\n"
