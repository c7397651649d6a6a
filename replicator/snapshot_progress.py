"""Snapshot progress, as the checkpoint and each manifest carry it (``replicator.snapshot``
reads the tables; this is only the record).

``tables`` lists the tables still to read, in order (``db.table``); the first is being read,
``after`` is the key of the last row of it that landed (None: none yet), ``key`` what that key
was (each key column's id, type and collation: a key changed since, or another table under
the name, makes ``after`` meaningless), ``until`` the greatest key it held when its first
chunk was read (the walk ends there) and ``rows`` how many of its rows landed. The
progress is written with the batch that holds the rows, so a restart resumes at the chunk
after the last committed one: nothing lost, nothing read twice.

Each entry names its table as the stream stands: a RENAME the stream takes renames the
entries (``moved``; a swap or a rotation of names included), and a DROP takes its entry out
(``dropped``), so every table queued is read once, under the name it has when it is read.
``reset`` names the queued tables whose snapshot starts with a ``truncate`` record: the
landing zone may hold rows of them that the stream did not keep in step (a table the filters
left out for a while, a table asked for again), and their snapshot replaces all of it.

Key values are stored with their type (``encode_key``), so a resumed read compares the same
values the stopped one would have: integers, text, bytes, decimals, dates, times.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from .binlog.values import InvalidTemporal
from .errors import IntegrityError


@dataclass(frozen=True, slots=True)
class SnapshotState:
    tables: tuple[str, ...] = ()
    after: tuple[object, ...] | None = None
    rows: int = 0
    key: tuple[str, ...] | None = None  # what ``after`` is a key of (None: not recorded)
    # the table's greatest key in its first chunk's read view: rows of greater keys came
    # later, and the stream lands them (None: not known, read to the table's end)
    until: tuple[object, ...] | None = None
    done: int = 0  # tables finished since the snapshot began
    done_rows: int = 0
    # filters.include / filters.exclude as of the last run: tables a new filter takes in
    # are snapshotted at the next start (None: not known yet)
    filters: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    # the `replicator snapshot` requests (their keys) whose tables this progress has queued;
    # not stored: a request is deleted once a committed progress has it (``add``)
    asked: frozenset[str] = frozenset()
    # queued tables whose first chunk lands after a ``truncate`` record (see the module doc)
    reset: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        return bool(self.tables)

    @property
    def current(self) -> str | None:
        return self.tables[0] if self.tables else None

    @property
    def resets(self) -> bool:
        """The current table's next chunk is its first, and a ``truncate`` record goes
        before it (``reset``)."""
        return self.after is None and self.current in self.reset

    def add(
        self, names: Iterable[str], request: str | None = None, *, reset: bool = False
    ) -> SnapshotState:
        """Queue tables (a table queued or being read already is not queued again), for
        ``request`` when a `replicator snapshot` request asked for them; with ``reset``
        the tables it queues start with a ``truncate`` record."""
        queued = list(self.tables)
        wanted = list(dict.fromkeys(names))
        queued.extend(name for name in wanted if name not in queued)
        asked = self.asked if request is None else self.asked | {request}
        if not reset:
            return replace(self, tables=tuple(queued), asked=asked)
        # queued already (the table waiting its turn, or being read) counts too: what landed
        # of it may be as stale, so its read starts again after a truncate record
        state = replace(self, tables=tuple(queued), asked=asked, reset=self.reset | set(wanted))
        if self.current in wanted and self.after is not None:
            state = state.restarted()
        return state

    def advanced(
        self,
        after: tuple[object, ...],
        rows: int,
        key: tuple[str, ...] | None = None,
        until: tuple[object, ...] | None = None,
    ) -> SnapshotState:
        """A chunk of the current table landed (after its ``truncate``, if it had one)."""
        return replace(
            self,
            after=after,
            rows=self.rows + rows,
            key=key,
            until=until,
            reset=self.reset - {self.current or ""},
        )

    def restarted(self) -> SnapshotState:
        """The current table is read again from its start (its key is not what it was)."""
        return replace(self, after=None, rows=0, key=None, until=None)

    def renamed(self, name: str) -> SnapshotState:
        """The current table goes on under a new name (the runner found it in the schema
        history: progress written before entries followed renames). The other entries name
        other tables, and stay."""
        return self.moved(self.tables[0], name) if self.tables else self

    def moved(self, old: str, new: str) -> SnapshotState:
        """A RENAME of table ``old`` to ``new`` the stream took: the entry of ``old`` names
        ``new`` from now on."""
        if old not in self.tables:
            return self
        tables = tuple(new if t == old else t for t in self.tables)
        reset = (self.reset - {old}) | {new} if old in self.reset else self.reset
        return replace(self, tables=tables, reset=reset)

    def dropped(self, name: str) -> SnapshotState:
        """A DROP of table ``name`` the stream took: its entry goes (a table created under
        the name later is another one). The table being read ends as ``finished`` does;
        what of it landed, its ``drop`` record governs."""
        if name not in self.tables:
            return self
        if self.tables[0] == name:
            return self.finished()
        return replace(
            self,
            tables=tuple(t for t in self.tables if t != name),
            done=self.done + 1,
            reset=self.reset - {name},
        )

    def finished(self, rows: int = 0) -> SnapshotState:
        """The current table is read through."""
        return replace(
            self,
            tables=self.tables[1:],
            after=None,
            key=None,
            until=None,
            rows=0,
            done=self.done + 1,
            done_rows=self.done_rows + self.rows + rows,
            reset=self.reset - {self.current or ""},
        )

    def to_json(self) -> dict[str, Any] | None:
        if not self.tables and not self.done and self.filters is None:
            return None
        out: dict[str, Any] = {
            "tables": list(self.tables),
            "after": None if self.after is None else encode_key(self.after),
            "rows": self.rows,
            "done": self.done,
            "done_rows": self.done_rows,
        }
        if self.key is not None:
            out["key"] = list(self.key)
        if self.until is not None:
            out["until"] = encode_key(self.until)
        if self.filters is not None:
            out["filters"] = {"include": list(self.filters[0]), "exclude": list(self.filters[1])}
        if self.reset:
            out["reset"] = sorted(self.reset)
        return out

    @classmethod
    def from_json(cls, data: object, where: str) -> SnapshotState:
        if data is None:
            return cls()
        try:
            if not isinstance(data, dict):
                raise TypeError("not an object")
            after = data.get("after")
            filters = data.get("filters")
            return cls(
                filters=None
                if filters is None
                else (
                    tuple(str(g) for g in filters["include"]),
                    tuple(str(g) for g in filters["exclude"]),
                ),
                tables=tuple(str(t) for t in data["tables"]),
                after=None if after is None else decode_key(after),
                key=None if data.get("key") is None else tuple(str(k) for k in data["key"]),
                until=None if data.get("until") is None else decode_key(data["until"]),
                rows=int(data.get("rows", 0)),
                done=int(data.get("done", 0)),
                done_rows=int(data.get("done_rows", 0)),
                reset=frozenset(str(t) for t in data.get("reset", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise IntegrityError(
                f"{where}: the snapshot progress is unreadable: {exc}",
                hint="restore the file from a backup, or remove the snapshot entry and ask "
                "for the snapshot again (`replicator snapshot`)",
            ) from exc


def encode_key(values: tuple[object, ...]) -> list[list[str]]:
    out: list[list[str]] = []
    for value in values:
        if isinstance(value, bool) or value is None:
            raise ValueError(f"key value {value!r} cannot be stored")
        if isinstance(value, int):
            out.append(["i", str(value)])
        elif isinstance(value, str):
            out.append(["s", value])
        elif isinstance(value, bytes):
            out.append(["b", value.hex()])
        elif isinstance(value, Decimal):
            out.append(["n", str(value)])
        elif isinstance(value, float):
            out.append(["f", repr(value)])
        elif isinstance(value, dt.datetime):
            out.append(["t", value.isoformat()])
        elif isinstance(value, dt.date):
            out.append(["d", value.isoformat()])
        elif isinstance(value, dt.timedelta):
            out.append(["T", str(_micros(value))])
        elif isinstance(value, InvalidTemporal):
            out.append(["z", value.text])
        else:
            raise ValueError(f"key value of type {type(value).__name__} cannot be stored")
    return out


def _micros(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def decode_key(data: object) -> tuple[object, ...]:
    if not isinstance(data, list):
        raise TypeError("key is not a list")
    out: list[object] = []
    for item in data:
        tag, text = item
        if tag == "i":
            out.append(int(text))
        elif tag == "s":
            out.append(str(text))
        elif tag == "b":
            out.append(bytes.fromhex(text))
        elif tag == "n":
            out.append(Decimal(text))
        elif tag == "f":
            out.append(float(text))
        elif tag == "t":
            out.append(dt.datetime.fromisoformat(text))
        elif tag == "d":
            out.append(dt.date.fromisoformat(text))
        elif tag == "T":
            out.append(dt.timedelta(microseconds=int(text)))
        elif tag == "z":
            out.append(InvalidTemporal(str(text)))
        else:
            raise ValueError(f"unknown key value tag {tag!r}")
    return tuple(out)
