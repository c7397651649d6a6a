"""Every committed byte checked against its commit record: sizes, hashes, the schema history pin.

A manifest records each data file's size and SHA-256 (``bytes``, ``sha256``: ``digest``), a
compaction record each output's, and the manifest the schema history file it names
(``schema_history_sha256``). ``committed`` lists the files that hold the committed rows now
(each manifest entry, or the compaction output that superseded it) with what their records
say; ``check`` compares each with the store: present (under its final name, or its hidden
staged name where the protocol allows), of the recorded size (from one listing: no request per
file on an object store), and, for the files asked for, of the recorded hash (read in chunks).

Two callers: the daemon's start (``LandingZone.recover``: every size, and the hashes of the
newest batches only, so a start stays fast on a landing zone of 100k files) and ``replicator
verify`` (``verify_landing``: offline, read-only, every size and with ``--deep`` every hash,
plus the chain of manifests and records, the checkpoint against the manifests, data files no
manifest names and the schema history pin). Files a compaction superseded are not checked
(their rows are read from the output, which is). Entries written before hashes existed (no
``sha256``) are checked on their size alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

from ..checkpoint import CheckpointStore
from ..errors import IntegrityError
from ..landed.checkpointed import check_pinned, check_reached
from ..landed.compacted import CompactionRecord, Output, Piece, read_records
from ..landed.contract import DATA_FILE
from ..landed.manifests import Manifest, manifest_key, read_chain
from ..storage import Store
from . import compaction
from .digest import DIGEST_KEY, check_history, hash_key

__all__ = [
    "Committed",
    "Problem",
    "Report",
    "check",
    "committed",
    "stray_data_files",
    "unnamed_files",
    "verify_landing",
]


@dataclass(frozen=True, slots=True)
class Committed:
    """A file that holds committed rows, and what its commit record says of it."""

    key: str  # relative to the root
    bytes: int | None  # None: not recorded
    sha256: str | None  # None: written before hashes
    batches: tuple[int, ...]  # the batches whose rows it holds
    record: int | None = None  # the compaction record that committed it (an output)
    data_bytes: int | None = None  # what its record says its column chunks take (an output)

    def may_be_staged(self, store: Store, checkpoint_batch: int) -> bool:
        """Whether the file may still be under its staged name (directories only): committed
        but not yet renamed into place, which a batch after the checkpoint (a crash between
        manifest and rename) or a compaction output (renamed after its record) can be."""
        return store.renames and (self.record is not None or self.batches[-1] > checkpoint_batch)

    def origin(self) -> str:
        """``batch 3`` or ``compaction 2, batches 3-7``: what committed it."""
        held = describe_batches(self.batches)
        return held if self.record is None else f"compaction {self.record}, {held}"

    @property
    def recorder(self) -> str:
        return "its manifest" if self.record is None else "its compaction record"


@dataclass(frozen=True, slots=True)
class Problem:
    """A committed file that is not as committed."""

    file: Committed
    uri: str  # where it is (for messages)
    found: str  # "is gone", "has 10 bytes, its manifest says 20", ...

    def line(self) -> str:
        if self.found == "is gone":
            what = "its file" if self.file.record is None else "its output"
            return f"{self.file.origin()} is committed but {what} {self.file.key} is gone"
        return f"{self.uri} ({self.file.origin()}) {self.found}"


@dataclass(slots=True)
class Report:
    """What ``check`` (and ``verify_landing``) found."""

    problems: list[Problem] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # problems that are not one file's
    files: int = 0
    bytes: int = 0
    hashed: int = 0
    batches: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.other

    def lines(self) -> list[str]:
        return [p.line() for p in self.problems] + self.other

    def summary(self) -> str:
        state = "OK" if self.ok else f"{len(self.lines())} problem(s)"
        return (
            f"{state}: {self.files} files ({self.bytes} bytes; {self.hashed} hashed) of "
            f"{self.batches} batches checked"
        )


def describe_batches(batches: Sequence[int]) -> str:
    """``batch 3``, ``batches 3-7`` or ``batches 3, 5, 9``."""
    if not batches:
        return "no batch"
    if len(batches) == 1:
        return f"batch {batches[0]}"
    if list(batches) == list(range(batches[0], batches[0] + len(batches))):
        return f"batches {batches[0]}-{batches[-1]}"
    return "batches " + ", ".join(str(b) for b in batches)


def committed(
    manifests: Sequence[Manifest], records: Sequence[CompactionRecord], *, strict: bool = True
) -> list[Committed]:
    """The files that hold the committed rows: each manifest entry not superseded, each
    committed output not superseded again (with its ``sha256`` when its record gives one).
    ``strict``: a record replacing a file that is not live as it says is an error."""
    live = compaction.Live()
    batch_of: dict[str, int] = {}
    for manifest in manifests:
        for item in manifest.entries:
            path = str(item["path"])
            batch_of[path] = manifest.batch
            live.pieces[path] = Piece(
                path,
                str(item["table"]),
                int(item["rows"]),
                int(item["first_seq"]),
                int(item["last_seq"]),
            )
    outputs: dict[str, tuple[int, Output]] = {}  # path -> (record, output)
    for record in records:
        live.apply(record, strict=strict)
        for output in record.outputs:
            outputs[output.piece.path] = (record.number, output)
    out: list[Committed] = []
    for manifest in manifests:
        for item in manifest.entries:
            path = str(item["path"])
            if path in live.pieces and path not in outputs:
                size = item.get("bytes")
                digest = item.get(DIGEST_KEY)
                out.append(
                    Committed(
                        path,
                        None if size is None else int(size),
                        None if digest is None else str(digest),
                        (manifest.batch,),
                    )
                )
    for path, (number, output) in outputs.items():
        if path in live.pieces:
            held = sorted({batch_of.get(p, 0) for p in live.origins.get(path, [])} - {0})
            # sha256 None: a record from before hashes; data_bytes None: from before sizes
            out.append(
                Committed(path, output.bytes, output.sha256, tuple(held), number, output.data_bytes)
            )
    return out


def check(
    store: Store,
    files: Iterable[Committed],
    sizes: dict[str, int],
    *,
    staged_ok: Callable[[Committed], bool],
    hash_it: Callable[[Committed], bool],
    superseded: Callable[[], set[str]],
) -> Report:
    """Compare each file with the store. ``sizes``: a listing (``Store.list_sizes``); a file
    it does not show is looked up by name (a listing may lag, or the file came after it).
    ``staged_ok``: the file may still be under its staged name (committed, not yet renamed
    into place); ``hash_it``: hash this one too; ``superseded``: the paths committed
    compaction records superseded, read again for a file that is gone (a compaction may have
    committed, and its retention deleted the file, since the records were read)."""
    report = Report()
    gone: list[tuple[Committed, str]] = []
    for item in files:
        where = item.key
        size = _size(store, where, sizes)
        if size is None and staged_ok(item):
            staged = store.staged(item.key)
            if staged != item.key:
                where = staged
                size = _size(store, staged, sizes)
        uri = store.uri(item.key) + ("" if where == item.key else f" (staged as {where})")
        if size is None:
            gone.append((item, uri))
            continue
        report.files += 1
        report.bytes += size
        if item.bytes is not None and size != item.bytes:
            found = f"has {size} bytes, {item.recorder} says {item.bytes}"
            report.problems.append(Problem(item, uri, found))
            continue
        if item.sha256 is None or not hash_it(item):
            continue
        try:
            _, digest = hash_key(store, where)
        except FileNotFoundError:
            gone.append((item, uri))
            continue
        report.hashed += 1
        if digest != item.sha256:
            found = f"has sha256 {digest}, {item.recorder} says {item.sha256}"
            report.problems.append(Problem(item, uri, found))
        elif item.data_bytes is not None:
            # the bytes are the committed ones: the record's size of their data must be theirs
            # too, or compaction plans by a wrong size
            try:
                _, data_bytes = compaction.footer(store, where)
            except IntegrityError as exc:
                report.problems.append(Problem(item, uri, f"has no readable footer: {exc}"))
                continue
            if data_bytes != item.data_bytes:
                found = (
                    f"has {data_bytes} bytes of column chunks, {item.recorder} says "
                    f"{item.data_bytes} (data_bytes)"
                )
                report.problems.append(Problem(item, uri, found))
    if gone:
        now_superseded = superseded()
        report.problems.extend(
            Problem(item, uri, "is gone") for item, uri in gone if item.key not in now_superseded
        )
    return report


def _size(store: Store, key: str, sizes: dict[str, int]) -> int | None:
    size = sizes.get(key)
    if size is not None:
        return size
    try:
        return store.size(key)
    except FileNotFoundError:
        return None


def check_pinned_history(store: Store, manifests: Sequence[Manifest]) -> str | None:
    """The schema history the last manifest names, against its pin: None when fine, else
    what is wrong. Manifests naming one history file must pin it alike."""
    if not manifests:
        return None
    last = manifests[-1]
    name = last.data.get("schema_history")
    if name is None:
        return None
    for manifest in manifests:
        pin = manifest.history_pin
        if manifest.data.get("schema_history") == name and pin not in (None, last.history_pin):
            return (
                f"the manifests of batches {manifest.batch} and {last.batch} pin the schema "
                f"history {name} to different hashes"
            )
    where = store.uri(str(name))
    try:
        raw = store.read(str(name))
    except FileNotFoundError:
        if store.exists(manifest_key(last.batch + 1)):
            return None  # a daemon committed meanwhile and replaced the history
        return f"the schema history {where} that batch {last.batch} names is gone"
    try:
        check_history(raw, last.history_pin, where, last.batch)
    except IntegrityError as exc:
        return str(exc.args[0])
    return None


def verify_landing(store: Store, *, deep: bool) -> Report:
    """Check the whole landing zone, read-only: the manifests one by one and as a chain, the
    checkpoint against them, the compaction records, every committed file's size (``deep``:
    and hash), that no data file is there that no manifest names (a directory), the schema
    history's pin. Raises IntegrityError when the manifests or records themselves cannot be
    trusted (nothing further can be checked then)."""
    # before the manifests: the daemon writes a batch's manifest before the checkpoint
    # naming it, so one read first never names a batch above the manifests listed after it
    loaded = CheckpointStore(store).load()
    checkpoint = loaded.batch
    manifests = read_chain(store)
    sizes = store.list_sizes()  # after the manifests: a file of theirs is there by now
    records = read_records(store)  # after the listing (see ``check``)
    files = committed(manifests, records)
    report = check(
        store,
        files,
        sizes,
        staged_ok=lambda item: item.may_be_staged(store, checkpoint),
        hash_it=lambda item: deep,
        superseded=lambda: compaction.superseded(store),
    )
    report.batches = len(manifests)
    try:
        check_reached(store, checkpoint, manifests[-1].batch if manifests else None)
        check_pinned(store, loaded.manifest_sha256, checkpoint, manifests)
    except IntegrityError as exc:
        report.other.append(str(exc))
    for problem in (unnamed_files(store, manifests, sizes), check_pinned_history(store, manifests)):
        if problem is not None:
            report.other.append(problem)
    return report


def stray_data_files(keys: Iterable[str], named: Collection[str]) -> list[str]:
    """The data files under their final names among ``keys`` that are not in ``named``
    (the paths the manifests name), sorted: the daemon's start and ``unnamed_files`` both
    look for them."""
    return sorted(key for key in keys if DATA_FILE.fullmatch(key) and key not in named)


def unnamed_files(store: Store, manifests: Sequence[Manifest], sizes: dict[str, int]) -> str | None:
    """On a directory: data files under their final names that no manifest names (``sizes``:
    a listing made after the manifests were read), as the daemon's start refuses them
    (``LandingZone._check_no_strays``): a file is renamed into place only after its manifest
    is written, so the manifest is lost or the file was put there by hand, and no reader
    reads it. None when there are none, or on an object store (where a batch's files are in
    place before its manifest: what a crash leaves, deleted by the daemon's next start)."""
    if not store.renames:
        return None
    named = {str(item["path"]) for manifest in manifests for item in manifest.entries}
    strays = stray_data_files(sizes, named)
    if not strays:
        return None
    newest = manifests[-1].batch if manifests else 0
    if store.exists(manifest_key(newest + 1)):
        return None  # a daemon committed meanwhile: its files are renamed after its manifest
    shown = ", ".join(store.uri(key) for key in strays[:3])
    more = f" and {len(strays) - 3} more" if len(strays) > 3 else ""
    return (
        f"{len(strays)} data file(s) in the landing zone are named by no manifest: {shown}{more} "
        "(their manifest is missing: restore _manifests/ from a backup; or they were copied "
        "in by hand: move them out of the landing zone)"
    )
