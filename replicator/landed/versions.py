"""A table's committed files grouped by schema version, and the key they record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ..errors import ConfigError
from .columns import renames, version_key
from .committed import CommittedFile, file_key, file_schema, key_of
from .options import MaterializeOptions

__all__ = ["FileVersion", "file_versions", "identity_columns"]


@dataclass(frozen=True, slots=True)
class FileVersion:
    """Committed files of one landed table with one schema (columns, ids, fills, source
    types: ``columns.version_key``)."""

    table: str
    schema: pa.Schema
    files: tuple[CommittedFile, ...]
    newest: int  # highest _seq in them: orders the versions

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.spark_path for f in self.files)


def file_versions(files: Sequence[CommittedFile]) -> list[FileVersion]:
    """``files`` grouped by landed table and schema version (``columns.version_key``, from
    their footers), oldest first."""
    groups: dict[tuple[object, ...], tuple[pa.Schema, list[CommittedFile]]] = {}
    for item in files:
        schema = file_schema(item)
        found = groups.setdefault((item.table, version_key(schema)), (schema, []))
        found[1].append(item)
    versions = [
        FileVersion(
            members[0].table,
            schema,
            tuple(members),
            max(m.last_seq if m.last_seq is not None else -1 for m in members),
        )
        for schema, members in groups.values()
    ]
    return sorted(versions, key=lambda v: v.newest)


def identity_columns(
    table: str,
    versions: Sequence[FileVersion],
    newest: pa.Schema,
    options: MaterializeOptions,
    previous: tuple[str, ...] | None,
) -> tuple[str, ...]:
    """The identity columns (newest names): ``--key``, else the key every file records.

    A file that records a primary key carries the before image of that key only
    (``_before_key``): an update could not find the row it changes under other identity
    columns. So ``--key`` is refused on such a file unless its columns are the recorded
    key's (all of them, or some)."""
    override = options.keys.get(table)
    keyed: list[tuple[Path | str, tuple[str, ...] | None]] = []
    for version in versions:
        renamed = renames(version.schema, newest)
        for item in version.files:
            key = file_key(file_schema(item))
            keyed.append(
                (item.path, None if key is None else tuple(renamed.get(k.lower(), k) for k in key))
            )
    if override is None:
        return key_of(table, keyed, previous=previous)
    for path, key in keyed:
        if key and not {k.lower() for k in override} <= {k.lower() for k in key}:
            raise ConfigError(
                f"table {table}: --key {table}={','.join(override)} names columns outside "
                f"the primary key its files record ({', '.join(key)}, in {path}): an update "
                "carries the before image of that key only, so the row it changes could not "
                "be found",
                hint=f"leave out --key {table} (it is for tables whose files record no primary "
                "key), or name columns of the recorded key",
            )
    return tuple(override)
