"""Reading through compaction: which file holds a manifest entry's rows now.

``replicator compact`` (``sink.compaction``) merges committed files into ``compact-<first
_seq>-<last _seq>.parquet`` outputs and commits them with one record,
``<root>/_compactions/<id>.json``: each output names the files it supersedes (manifest
entries, or outputs of earlier records). Manifests are never rewritten, so a reader keeps
going by the manifests and asks ``holders`` where each entry's rows are now: in the entry's
own file, or in a slice of an output.

A slice is the output's rows whose ``_seq`` lies in ``within`` = (the previous entry's
``last_seq`` + 1, this entry's ``last_seq``) — the output holds the rows of its entries only,
in ``_seq`` order, so these are exactly the entry's rows. Reading several entries of one output
reads the file once with one ``_seq`` condition per run of adjacent slices (``reads``): a row
is never read twice, and an incremental run that applied some of the output's batches already
reads only the rows of the batches after them. The slices are worked out from what the
records say of the entries, so each entry a reader resolves must be what its record says
(path, table, rows, ``_seq`` range; ``check_holding``): a record that does not match the
manifests (edited, or restored from another backup) stops the read with an IntegrityError.

Records are read before the manifests: a record only names files of batches committed before
it. Only outputs a record names are read: on an object store outputs are written at their
final keys before the record, so an output no record names (being written, or left by a run
that died) is never read, and a committed one is always in place. On a directory an output
that is committed but not yet renamed into place (a compactor died between its record and the
rename; the next run or the daemon's start finishes it) is not read yet: the files it
replaces are read meanwhile, as they are still there. Superseded files stay for the
retention period (``sink.compaction.retention``, a day by default), so a job that resolved the
old files a moment before a compaction still finds them.
The records' format (``CompactionRecord``, and the ``Intent`` a compactor writes before its
outputs) and their reading (``read_records``: found by number, every one checked, a gap
stopping with the missing record named) are defined here, once, for the compactor
(``sink.compaction``), the daemon's recovery and every reader.

This module needs pyarrow only, not Spark.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import IntegrityError
from ..storage import Store
from .contract import COMPACTIONS, DATA_BYTES_KEY, DIGEST_KEY, LANDING_ID_KEY, is_digest

if TYPE_CHECKING:  # pyarrow is imported where rows are read: the records need none of it
    import pyarrow as pa

    from .manifests import CommittedFile

__all__ = [
    "OUTPUT_NAME",
    "CompactionKeys",
    "CompactionRecord",
    "Holding",
    "Intent",
    "Output",
    "Piece",
    "Read",
    "check_holding",
    "compaction_keys",
    "entry_path",
    "holders",
    "intent_key",
    "lost_record",
    "missing_record",
    "output_name",
    "parse_intent",
    "parse_record",
    "piece_json",
    "piece_of",
    "probe_records",
    "read_arrow",
    "read_intents",
    "read_records",
    "reads",
    "record_error",
    "record_key",
    "records_numbered",
]

_RECORD_NAME = re.compile(r"(\d{20})\.json")
_INTENT_NAME = re.compile(r"(\d{20})\.intent\.json")
_META_TEMP = re.compile(r"\.\d{20}(?:\.intent)?\.json\.tmp")  # LocalStore.write's temps
# compact-<first _seq>-<last _seq>[-<run>].parquet: on an object store each compaction run's
# outputs carry a token of their own, so that a compactor that lost its lease to another one
# planning the same groups never writes or deletes the other's key
OUTPUT_NAME = re.compile(r"compact-(\d{20})-(\d{20})(?:-([0-9a-f]{8,32}))?\.parquet")


# ---------------------------------------------------------------------------- the records


def output_name(first_seq: int, last_seq: int, run: str | None = None) -> str:
    tail = "" if run is None else f"-{run}"
    return f"compact-{first_seq:020d}-{last_seq:020d}{tail}.parquet"


def record_key(number: int) -> str:
    return f"{COMPACTIONS}/{number:020d}.json"


def intent_key(number: int) -> str:
    return f"{COMPACTIONS}/{number:020d}.intent.json"


# ---------------------------------------------------------------------------- the records


@dataclass(frozen=True, slots=True)
class Piece:
    """A committed file as a manifest or a record names it."""

    path: str  # key relative to the root
    table: str
    rows: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True, slots=True)
class Output:
    """One output of a record: ``piece`` replaces ``replaces`` (in ``_seq`` order); ``sha256``
    of its bytes (None in records written before hashes); ``data_bytes``, what its column
    chunks take, the size compaction plans by (None in records written before it)."""

    piece: Piece
    bytes: int
    replaces: tuple[Piece, ...]
    sha256: str | None = None
    data_bytes: int | None = None


def piece_json(p: Piece) -> dict[str, Any]:
    return {
        "path": p.path,
        "table": p.table,
        "rows": p.rows,
        "first_seq": p.first_seq,
        "last_seq": p.last_seq,
    }


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    number: int
    committed_at: str
    landing_id: str | None
    outputs: tuple[Output, ...]

    def age(self, now: float) -> float:
        at = dt.datetime.fromisoformat(self.committed_at.replace("Z", "+00:00"))
        return now - at.timestamp()

    def to_json(self) -> dict[str, Any]:
        outputs = []
        for o in self.outputs:
            item: dict[str, Any] = {**piece_json(o.piece), "bytes": o.bytes}
            if o.sha256 is not None:
                item[DIGEST_KEY] = o.sha256
            if o.data_bytes is not None:
                item[DATA_BYTES_KEY] = o.data_bytes
            item["replaces"] = [piece_json(r) for r in o.replaces]
            outputs.append(item)
        return {
            "compaction": self.number,
            LANDING_ID_KEY: self.landing_id,
            "committed_at": self.committed_at,
            "outputs": outputs,
        }


@dataclass(frozen=True, slots=True)
class Intent:
    """What a compaction is about to write, written before its first output:
    ``_compactions/<number>.intent.json``, ``number`` being the id its record will take.
    Recovery deletes an output only when the intent of a compaction that provably never
    committed names it (``recover``); the intent goes once the record is committed and
    published, or once recovery deleted its outputs."""

    number: int
    written_at: str
    outputs: dict[str, tuple[Piece, ...]]  # output path -> the files it replaces

    def to_json(self) -> dict[str, Any]:
        return {
            "intent": self.number,
            "written_at": self.written_at,
            "outputs": [
                {"path": path, "replaces": [piece_json(r) for r in replaces]}
                for path, replaces in self.outputs.items()
            ],
        }


def record_error(key: str, problem: str, what: str = "compaction record") -> IntegrityError:
    return IntegrityError(
        f"{what} {key} {problem}",
        hint="compaction records and intents are commit records like the manifests: restore "
        "_compactions/ from a backup; nothing was changed in the landing zone",
    )


def missing_record(store: Store, number: int, proof: str) -> IntegrityError:
    """A record that existed is gone: nothing may be deleted until it is back."""
    return IntegrityError(
        f"compaction record {store.uri(record_key(number))} is missing: {proof}",
        hint=f"restore {record_key(number)} (and any later records) from a backup of "
        "_compactions/; nothing was deleted: without it, committed outputs cannot be told "
        "from leftovers, nor the files they replaced be found",
    )


def entry_path(item: object, key: str, what: str = "compaction record") -> str:
    if not isinstance(item, dict):
        raise record_error(key, "lists a file that is not an object", what)
    path = item.get("path")
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
        raise record_error(key, f"lists an invalid path {path!r}", what)
    return path


def piece_of(item: object, key: str, what: str = "compaction record") -> Piece:
    path = entry_path(item, key, what)
    assert isinstance(item, dict)
    numbers = []
    for name in ("rows", "first_seq", "last_seq"):
        value = item.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise record_error(key, f"lists {path} without a valid {name!r}", what)
        numbers.append(value)
    table = item.get("table")
    if not isinstance(table, str):
        raise record_error(key, f"lists {path} without its table", what)
    return Piece(path, table, numbers[0], numbers[1], numbers[2])


def parse_record(key: str, raw: bytes) -> CompactionRecord:
    """One record's content checked: its number matches its name; each output lies in its
    table's folder under an output name that matches its ``_seq`` range, and holds exactly
    the rows of the files it replaces, which follow each other by ``_seq``."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise record_error(key, f"is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("outputs"), list):
        raise record_error(key, "has no 'outputs' list")
    number = data.get("compaction")
    if not isinstance(number, int) or key.rpartition("/")[2] != f"{number:020d}.json":
        raise record_error(key, f"says it is compaction {number!r}, which does not match its name")
    if not isinstance(data.get("committed_at"), str):
        raise record_error(key, "has no 'committed_at' time")
    outputs: list[Output] = []
    for item in data["outputs"]:
        piece = piece_of(item, key)
        replaces = tuple(piece_of(r, key) for r in (item.get("replaces") or ()))
        size = item.get("bytes")
        if not isinstance(size, int) or len(replaces) < 2:
            raise record_error(
                key, f"lists output {piece.path} without its bytes or replaced files"
            )
        digest = item.get(DIGEST_KEY)  # absent in records written before hashes
        if digest is not None and not is_digest(digest):
            raise record_error(
                key, f"lists output {piece.path} with an invalid {DIGEST_KEY} {digest!r}"
            )
        data_bytes = item.get(DATA_BYTES_KEY)  # absent in records written before it
        if data_bytes is not None and (
            not isinstance(data_bytes, int)
            or isinstance(data_bytes, bool)
            or not 0 <= data_bytes <= size
        ):
            raise record_error(
                key, f"lists output {piece.path} with an invalid {DATA_BYTES_KEY} {data_bytes!r}"
            )
        folder, _, name = piece.path.rpartition("/")
        named = OUTPUT_NAME.fullmatch(name)
        if named is None or (int(named[1]), int(named[2])) != (piece.first_seq, piece.last_seq):
            raise record_error(key, f"names output {piece.path}, not named after its _seq range")
        previous = -1
        for old in replaces:
            if old.table != piece.table or old.path.rpartition("/")[0] != folder:
                raise record_error(key, f"has {piece.path} replace {old.path} of another table")
            if old.first_seq <= previous:
                raise record_error(key, f"has {piece.path} replace files out of _seq order")
            previous = old.last_seq
        if (
            sum(r.rows for r in replaces) != piece.rows
            or replaces[0].first_seq != piece.first_seq
            or replaces[-1].last_seq != piece.last_seq
        ):
            raise record_error(
                key, f"says {piece.path} holds other rows than the files it replaces"
            )
        outputs.append(Output(piece, size, replaces, digest, data_bytes))
    landing = data.get(LANDING_ID_KEY)
    return CompactionRecord(
        number, data["committed_at"], None if landing is None else str(landing), tuple(outputs)
    )


def parse_intent(key: str, raw: bytes) -> Intent:
    """One intent's content checked: its number matches its name, and each output it names
    is a compaction output's name in a table's folder (recovery may delete those)."""
    what = "compaction intent"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise record_error(key, f"is not valid JSON: {exc}", what) from None
    if not isinstance(data, dict) or not isinstance(data.get("outputs"), list):
        raise record_error(key, "has no 'outputs' list", what)
    number = data.get("intent")
    if (
        not isinstance(number, int)
        or number < 1
        or key.rpartition("/")[2] != f"{number:020d}.intent.json"
    ):
        raise record_error(
            key, f"says it is compaction {number!r}, which does not match its name", what
        )
    if not isinstance(data.get("written_at"), str):
        raise record_error(key, "has no 'written_at' time", what)
    outputs: dict[str, tuple[Piece, ...]] = {}
    for item in data["outputs"]:
        path = entry_path(item, key, what)
        assert isinstance(item, dict)
        if path.count("/") != 2 or not OUTPUT_NAME.fullmatch(path.rpartition("/")[2]):
            raise record_error(key, f"names {path}, which is not a compaction output", what)
        replaces = item.get("replaces")
        if not isinstance(replaces, list) or not replaces:
            raise record_error(key, f"names output {path} without the files it replaces", what)
        outputs[path] = tuple(piece_of(r, key, what) for r in replaces)
    return Intent(number, data["written_at"], outputs)


@dataclass(frozen=True, slots=True)
class CompactionKeys:
    """What ``_compactions/`` holds: record numbers (1, 2, ... without a gap), intent
    numbers, and temps of records or intents never written (``LocalStore.write``)."""

    records: list[int]
    intents: list[int]
    temps: list[str]


def compaction_keys(store: Store) -> CompactionKeys:
    """Records found by number, as ``manifests.manifest_keys`` finds manifests: after the
    listing, the records following the last one listed, and the intent of the next number,
    are asked for by name (an object store's listing may lag behind a completed upload; a
    record it hides would make its outputs look like leftovers). A gap stops with the
    missing record named; anything that is not a record, an intent or a temp is refused."""
    records: list[int] = []
    intents: set[int] = set()
    temps: list[str] = []
    strangers: list[str] = []
    for key in store.list(COMPACTIONS):
        name = key[len(COMPACTIONS) + 1 :]
        if found := _RECORD_NAME.fullmatch(name):
            records.append(int(found[1]))
        elif found := _INTENT_NAME.fullmatch(name):
            intents.add(int(found[1]))
        elif _META_TEMP.fullmatch(name):
            temps.append(key)
        else:
            strangers.append(name)
    if strangers:
        shown = ", ".join(repr(s) for s in sorted(strangers)[:5])
        raise IntegrityError(
            f"{store.uri(COMPACTIONS)} holds a file that is not a compaction record or "
            f"intent: {shown}",
            hint="move it out of _compactions/ (only <20-digit id>.json records and "
            "<20-digit id>.intent.json intents belong there); if it is a renamed record, "
            "restore its name",
        )
    records = probe_records(store, sorted(records))
    last = records[-1] if records else 0
    if last + 1 not in intents and store.exists(intent_key(last + 1)):
        intents.add(last + 1)
    for expected, number in enumerate(records, start=1):
        if number != expected:
            raise missing_record(
                store, expected, f"a record is missing: the records go on with {record_key(number)}"
            )
    return CompactionKeys(records, sorted(intents), temps)


def probe_records(store: Store, numbers: list[int]) -> list[int]:
    """``numbers`` and the records after the last of them, asked for by name."""
    last = numbers[-1] if numbers else 0
    while store.exists(record_key(last + 1)):
        last += 1
        numbers.append(last)
    return numbers


def records_numbered(store: Store, numbers: Sequence[int]) -> list[CompactionRecord]:
    records = []
    for number in numbers:
        key = record_key(number)
        try:
            raw = store.read(key)
        except FileNotFoundError:
            raise missing_record(store, number, "it was there a moment ago") from None
        records.append(parse_record(key, raw))
    return records


def read_intents(store: Store, numbers: Sequence[int]) -> dict[int, Intent]:
    """The intents still there (one may go meanwhile: its compaction committed, or a
    recovery deleted its outputs, then the intent)."""
    intents = {}
    for number in numbers:
        key = intent_key(number)
        try:
            raw = store.read(key)
        except FileNotFoundError:
            continue
        intents[number] = parse_intent(key, raw)
    return intents


def read_records(store: Store) -> list[CompactionRecord]:
    """Every committed compaction record, numbered 1, 2, ... without a gap, found by number
    (``compaction_keys``)."""
    return records_numbered(store, compaction_keys(store).records)


def lost_record(
    store: Store, key: str, first_seq: int | None, last_seq: int | None
) -> IntegrityError | None:
    """For a committed file ``key`` that is gone (``_seq`` ``first_seq``..``last_seq`` when
    known): the error naming the lost compaction record, when its table folder holds a
    compaction output (in place or staged) that no committed record names and whose ``_seq``
    range covers the file's. Retention deletes a file only after a record superseding it
    is committed, so the record that named that output is lost (a gap in the records is
    named by ``read_records`` itself); None when nothing shows that."""
    folder = key.rpartition("/")[0]
    records = read_records(store)
    named = {output.piece.path for record in records for output in record.outputs}
    for found in store.list(folder):
        name = found.rpartition("/")[2]
        if name.startswith(".") and name.endswith(".tmp"):  # staged (``LocalStore.staged``)
            name = name[1 : -len(".tmp")]
        output = OUTPUT_NAME.fullmatch(name)
        path = f"{folder}/{name}"
        if output is None or path in named:
            continue
        if first_seq is not None and not int(output[1]) <= first_seq <= int(output[2]):
            continue
        if last_seq is not None and not int(output[1]) <= last_seq <= int(output[2]):
            continue
        return missing_record(
            store,
            len(records) + 1,
            f"{store.uri(key)} is gone and {store.uri(found)}, a compaction output no record "
            "names, holds its _seq range (a file is deleted only after the record superseding "
            "it is committed)",
        )
    return None


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True, slots=True)
class Holding:
    """Where a manifest entry's rows are: ``path`` (relative), ``_seq`` in ``within``;
    ``bytes``: the output's size as its record gives it (readers check it before reading);
    ``entry``: the manifest entry as record ``record`` (the one that replaced it) names it,
    which ``within`` was worked out from (``check_holding`` compares it with the manifest)."""

    path: str
    within: tuple[int, int]
    bytes: int | None = None
    entry: Piece | None = None
    record: int | None = None


def check_holding(
    store: Store, held: Holding, entry: Piece, batch: int, manifest: Path | str
) -> None:
    """The manifest entry ``entry`` (of batch ``batch``, its manifest at ``manifest``) must be
    what the compaction record that replaced it says it is: its slice of the output
    (``within``) lies between the ``_seq`` ranges the record gives it and its neighbours, so a
    record that says otherwise (edited, or restored from another backup than the manifests)
    would have a reader take rows of one batch for another's, or lose them."""
    said, found, number = held.entry, entry, held.record
    if said is None or number is None or said == found:
        return

    def shown(p: Piece) -> str:
        return f"{p.path} of {p.table}, {p.rows} rows, _seq {p.first_seq}..{p.last_seq}"

    raise IntegrityError(
        f"compaction record {store.uri(record_key(number))} does not match the manifest entry "
        f"it replaces: it says {shown(said)}; batch {batch}'s manifest {manifest} lists "
        f"{shown(found)}",
        hint=f"restore {record_key(number)} from a backup of _compactions/ that belongs with "
        "these manifests (`replicator verify` checks every record against the manifests); "
        "nothing was read",
    )


def holders(store: Store) -> dict[str, Holding]:
    """Manifest entry path -> where its rows are now, for every entry a committed record
    superseded (entries not in it are read from their own files)."""
    replaces: dict[str, tuple[Piece, ...]] = {}  # output -> the files it replaces (direct)
    # output -> the manifest entries it holds, each with the record that replaced it
    entries: dict[str, list[tuple[Piece, int]]] = {}
    sizes: dict[str, int] = {}  # output -> its size as its record says
    pieces: dict[str, Piece] = {}  # output -> what its record says of it
    live: set[str] = set()
    for record in read_records(store):
        for output in record.outputs:
            path = output.piece.path
            for old in output.replaces:
                if old.path in pieces and pieces[old.path] != old:
                    raise record_error(
                        record_key(record.number),
                        f"says {path} replaces {old.path} with other rows than its own record",
                    )
            pieces[path] = output.piece
            held = [
                e for old in output.replaces for e in entries.get(old.path, [(old, record.number)])
            ]
            live.difference_update(old.path for old in output.replaces)
            live.add(path)
            replaces[path] = output.replaces
            entries[path] = held
            sizes[path] = output.bytes
    out: dict[str, Holding] = {}

    def place(holder: str) -> None:
        if not store.exists(holder):
            # committed, not yet renamed into place (a compactor died between its record and
            # the rename; local disks only: object stores write outputs at their final keys
            # before the record): what it replaces is still there (retention runs
            # after the rename), so those are read meanwhile
            for old in replaces[holder]:
                if old.path in replaces:
                    place(old.path)
            return
        low = entries[holder][0][0].first_seq
        for entry, number in entries[holder]:
            out[entry.path] = Holding(holder, (low, entry.last_seq), sizes[holder], entry, number)
            low = entry.last_seq + 1

    for holder in sorted(live):
        place(holder)
    return out


@dataclass(frozen=True, slots=True)
class Read:
    """One physical file to read: whole (``ranges`` None), or only the rows whose ``_seq``
    lies in one of ``ranges`` (inclusive)."""

    path: Path | str
    ranges: tuple[tuple[int, int], ...] | None
    source: tuple[Any, Any] = (None, None)  # what pyarrow reads, and its filesystem


def reads(files: Sequence[CommittedFile]) -> list[Read]:
    """``files`` as the physical reads that return each entry's rows once: whole files as
    they are, the slices of one output merged into one read (adjacent slices into one
    range). Order: by first appearance."""
    out: dict[Path | str, list[tuple[int, int]] | None] = {}
    sources: dict[Path | str, tuple[Any, Any]] = {}
    for item in files:
        sources.setdefault(item.path, item.source())
        if item.within is None:
            if item.path in out:
                raise IntegrityError(
                    f"committed file {item.path} is listed twice",
                    hint="restore the manifests and _compactions/ from one backup",
                )
            out[item.path] = None
            continue
        ranges = out.setdefault(item.path, [])
        if ranges is None:
            raise IntegrityError(
                f"{item.path} is both a committed file and a compaction output",
                hint="restore the manifests and _compactions/ from one backup",
            )
        ranges.append(item.within)
    result: list[Read] = []
    for path, ranges in out.items():
        if ranges is None:
            result.append(Read(path, None, sources[path]))
            continue
        merged: list[tuple[int, int]] = []
        for low, high in sorted(ranges):
            if merged and merged[-1][1] >= low:
                raise IntegrityError(
                    f"two entries of {path} overlap at _seq {low}",
                    hint="restore _compactions/ from a backup",
                )
            if merged and merged[-1][1] + 1 == low:
                merged[-1] = (merged[-1][0], high)
            else:
                merged.append((low, high))
        result.append(Read(path, tuple(merged), sources[path]))
    return result


def _mask(seqs: pa.ChunkedArray, ranges: Sequence[tuple[int, int]]) -> Any:
    import pyarrow.compute as pc  # noqa: PLC0415 - see the imports

    mask: Any = None
    for low, high in ranges:
        test = pc.and_(pc.greater_equal(seqs, low), pc.less_equal(seqs, high))
        mask = test if mask is None else pc.or_(mask, test)
    return mask


def read_arrow(files: Sequence[CommittedFile], columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of ``files`` (one schema), each once, with pyarrow (no Spark)."""
    import pyarrow as pa  # noqa: PLC0415 - see the imports
    import pyarrow.parquet as pq  # noqa: PLC0415

    tables: list[pa.Table] = []
    for read in reads(files):
        wanted = None if columns is None else list(dict.fromkeys([*columns, "_seq"]))
        where, filesystem = read.source
        table = pq.read_table(where, columns=wanted, filesystem=filesystem)
        if read.ranges is not None:
            table = table.filter(_mask(table.column("_seq"), read.ranges))
        if columns is not None:
            table = table.select(list(columns))
        tables.append(table)
    return pa.concat_tables(tables)
