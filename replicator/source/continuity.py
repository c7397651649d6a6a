"""Source identity: does the configured server continue the history the landing zone holds?

A landing zone follows one source history: one sequence of transactions, whatever host serves
it (a promoted replica of the same topology serves the same GTIDs and row images under other
file names). A config pointed at another server, even one whose GTIDs look alike (a fresh
server with the same ``server_id`` and domain), must not land into it. So each manifest
records a proof of the last transaction it lands (``"source"``, ``Proof``), and ``replicator
run`` and ``replicator check --config`` read that transaction back from the server before
anything lands, and compare:

* the server's GTID state must contain the last landed GTID (and the checkpoint's state): a
  server behind it is not a continuation, whatever its binlog holds;
* a dump from the position just before that transaction (``before``: by GTID state when the
  landing zone follows GTIDs, else by file and position) must bring a transaction with the same
  GTID and the same ``digest``.

The digest and what it covers: ``source.proof``. The commit side hashes only the last
transaction of each batch, from the events the pipeline holds: an ordinary transaction costs a
reference kept until the next one. A large transaction's parts are not kept, so they are
hashed as they pass, on the event loop (their row-image bytes once, SHA-256).

What cannot be proven: the transaction was purged from the server's binlog (refused with exit 4
unless ``snapshot.mode: when_needed``, which then resyncs and logs that continuity was not
proven), and landing zones whose last batch predates proofs or records none (a first batch of
snapshot rows only, a resync): accepted with a log line. Everything else that does not match is
an ``IntegrityError`` naming the landing zone's history and what the server has instead. Only
the last landed transaction is compared: a server with the same transaction (same GTID, same
row images) there and another history before it passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass

from ..binlog.gtid import GtidParseError, MariadbGtid, MysqlGtid
from ..binlog.position import StreamPosition
from ..binlog.transaction import Transaction, TransactionPart
from ..checkpoint import position_from_json
from ..config import SourceConfig
from ..errors import (
    ConfigError,
    IntegrityError,
    PositionGoneError,
    ReplicatorError,
    ServerRefusedError,
)
from ..landed.manifests import manifest_key, manifest_keys, parse_manifest
from ..storage import Store
from .connection import describe_source, open_connection
from .proof import PROOF_KEY, Digest, Proof
from .server_info import server_info
from .stream import ReplicaStream, server_facts

__all__ = ["Landed", "Verdict", "landed", "prove"]

_READ_TIMEOUT = 60.0  # seconds a query for the server's state may take
# row images per part when the proof's transaction is read back (any size gives one digest)
READ_BACK_PART_ROWS = 10_000
READ_BACK_PART_BYTES = 32 << 20  # binlog bytes of rows events: parts of wide rows


@dataclass(frozen=True, slots=True)
class Landed:
    """The history a landing zone holds, as its last manifest records it."""

    location: str
    landing_id: str | None
    batch: int  # 0: nothing landed yet
    end: StreamPosition | None  # where the last batch ended
    proof: Proof | None
    recorded: bool  # the manifest has the field (False: written before proofs existed)

    def describe(self) -> str:
        what = (
            f"last landed transaction {self.proof.gtid or 'without a GTID'}"
            if self.proof is not None
            else "no landed transaction recorded"
        )
        return (
            f"landing zone {self.landing_id or '(no id)'} at {self.location}: {what}, batch "
            f"{self.batch}, ending at {'?' if self.end is None else self.end.describe()}"
        )


def landed(store: Store, batch: int | None = None) -> Landed:
    """What the landing zone in ``store`` holds as of its last manifest (``batch``: its
    number when known, e.g. after recovery; else the manifests are listed)."""
    if batch is None:
        keys, _ = manifest_keys(store)
        batch = int(keys[-1].rpartition("/")[2][:20]) if keys else 0
    if batch == 0:
        return Landed(store.location, None, 0, None, None, False)
    key = manifest_key(batch)
    manifest = parse_manifest(store.uri(key), store.read(key), store)
    where = str(manifest.path)
    raw = manifest.data.get(PROOF_KEY)
    return Landed(
        location=store.location,
        landing_id=manifest.landing_id,
        batch=batch,
        end=position_from_json(manifest.data["end"], where),
        proof=None if raw is None else Proof.from_json(raw, where),
        recorded=PROOF_KEY in manifest.data,
    )


@dataclass(frozen=True, slots=True)
class Verdict:
    """What ``prove`` found: ``proven``, or why it went on without (``detail`` says)."""

    proven: bool
    detail: str


async def prove(cfg: SourceConfig, zone: Landed, *, snapshot_mode: str) -> Verdict:
    """Prove that the server ``cfg`` names continues the history ``zone`` holds. Raises
    ``IntegrityError`` when it does not, or when it cannot be proven and ``snapshot_mode`` is
    not ``when_needed``; otherwise says whether it was proven (nothing is logged here: the
    caller says it, ``run`` in its log, ``check`` in its report)."""
    if zone.batch == 0:
        return Verdict(False, "nothing landed yet: there is no history to continue")
    where = describe_source(cfg)
    state = await asyncio.get_running_loop().run_in_executor(None, _server_state, cfg)
    _check_not_behind(cfg, zone, state)
    proof = zone.proof
    if proof is None or proof.before is None:
        why = (
            "its last batch was written before landing zones recorded proofs"
            if not zone.recorded
            else "its last batch records no landed transaction (snapshot rows only, or a resync)"
        )
        return Verdict(False, f"not proven for the {zone.describe()}: {why}")
    try:
        found = await _read_back(cfg, proof)
    except PositionGoneError as exc:
        if snapshot_mode == "when_needed":
            return Verdict(
                False,
                f"not proven for the {zone.describe()}: that transaction is no longer in the "
                f"binlog of {where} ({exc}); snapshot.mode when_needed goes on",
            )
        raise IntegrityError(
            f"cannot prove that {where} continues the history of the {zone.describe()}: "
            f"that transaction is no longer in the server's binlog ({exc})",
            hint="if this is the server the landing zone follows and its binlog was purged, "
            "set snapshot.mode: when_needed to read every table again; otherwise point the "
            "config (source.*) at the server the landing zone follows, or start a new landing "
            "zone (another sink.root) for this server; nothing was landed",
        ) from exc
    except (ServerRefusedError, ConfigError):
        raise  # refused (privileges, binlog format) or misconfigured: not a verdict
    except ReplicatorError as exc:
        raise _refused(where, zone, f"a binlog that cannot be read there: {exc}") from exc
    if found is None:
        raise _refused(
            where, zone, f"no transaction {proof.gtid or ''} after {proof.before.describe()}"
        )
    if found.gtid != proof.gtid:
        raise _refused(
            where,
            zone,
            f"transaction {found.gtid or 'without a GTID'} where that one was "
            f"(after {proof.before.describe()})",
        )
    if found.digest != proof.digest:
        raise _refused(
            where,
            zone,
            f"a different transaction under GTID {proof.gtid} (its content differs: "
            f"{found.events} events, digest {found.digest[:12]}, landed {proof.events} events, "
            f"digest {proof.digest[:12]})",
        )
    return Verdict(
        True,
        f"{where} holds the last landed transaction of the {zone.describe()} as it landed",
    )


def _server_state(cfg: SourceConfig) -> StreamPosition:
    """The server's binlog end with its GTID state (``stream.server_facts``)."""
    conn = open_connection(cfg, read_timeout=_READ_TIMEOUT)
    with contextlib.closing(conn):
        return server_facts(server_info(conn)).end


def _check_not_behind(cfg: SourceConfig, zone: Landed, state: StreamPosition) -> None:
    """A server whose GTID state lacks the last landed GTID, or the landing zone's end, does
    not hold the history the landing zone has landed: it is not a continuation."""
    missing: list[str] = []
    gtid = None if zone.proof is None else _parse_gtid(zone.proof.gtid)
    if isinstance(gtid, MariadbGtid) and (
        state.mariadb_gtid is None or not state.mariadb_gtid.contains(gtid)
    ):
        missing.append(str(gtid))
    if isinstance(gtid, MysqlGtid) and (
        state.mysql_gtid is None or not state.mysql_gtid.contains(gtid)
    ):
        missing.append(str(gtid))
    end = zone.end
    if end is not None and end.mariadb_gtid is not None and state.mariadb_gtid is not None:
        missing += [str(g) for g in end.mariadb_gtid if not state.mariadb_gtid.contains(g)]
    if (
        end is not None
        and end.mysql_gtid is not None
        and state.mysql_gtid is not None
        and not state.mysql_gtid.issuperset(end.mysql_gtid)
    ):
        missing.append(f"the GTID set {end.mysql_gtid}")
    if missing:
        shown = ", ".join(sorted(set(missing)))
        raise _refused(
            describe_source(cfg),
            zone,
            f"GTID state {state.mariadb_gtid or state.mysql_gtid or 'none'} (its binlog ends "
            f"at {state.file}:{state.position}), which does not contain {shown}: it is behind "
            "the landing zone",
        )


def _parse_gtid(text: str | None) -> MariadbGtid | MysqlGtid | None:
    if text is None:
        return None
    try:
        return MariadbGtid.parse(text)
    except GtidParseError:
        pass
    try:
        return MysqlGtid.parse(text)
    except (GtidParseError, ValueError):
        return None


def _same_stream(a: MariadbGtid | MysqlGtid | None, b: MariadbGtid | MysqlGtid | None) -> bool:
    """Two GTIDs of one ordered stream (a MariaDB domain, a MySQL uuid and tag)."""
    if isinstance(a, MariadbGtid) and isinstance(b, MariadbGtid):
        return a.domain_id == b.domain_id
    if isinstance(a, MysqlGtid) and isinstance(b, MysqlGtid):
        return (a.uuid, a.tag) == (b.uuid, b.tag)
    return False


async def _read_back(cfg: SourceConfig, proof: Proof) -> Proof | None:
    """The transaction that follows ``proof.before`` on the server and would be the proof's
    (the first one with its GTID, or of its GTID's stream), as a proof; None: none follows
    before the binlog's end.

    Read as ``mysqlbinlog --read-from-remote-server`` reads (and as ``binlog_probe`` does):
    server_id 0, not registered as a replica, so no replica's dump thread (a running daemon's
    with ``source.server_id``, under ``replicator check``) is taken for a zombie of ours and
    dropped."""
    assert proof.before is not None
    wanted = _parse_gtid(proof.gtid)
    stream = ReplicaStream(
        dataclasses.replace(cfg, server_id=0),
        proof.before,
        stop_at_end=True,
        name="continuity-proof",
        report_host=None,
        part_rows=READ_BACK_PART_ROWS,  # a large transaction is hashed part by part, not held
        part_bytes=READ_BACK_PART_BYTES,
    )
    parts: Digest | None = None  # the digest the open transaction's parts were fed to
    async with stream:
        async for item in stream:
            if isinstance(item, TransactionPart):
                if parts is None:
                    parts = Digest(item.gtid)
                parts.add(item.events)
                continue
            if not isinstance(item, Transaction):
                continue
            typed = item.typed_gtid
            if wanted is None or item.gtid == proof.gtid or _same_stream(typed, wanted):
                return Proof.of(item, proof.before, parts)
            parts = None
    return None


def _refused(where: str, zone: Landed, instead: str) -> IntegrityError:
    return IntegrityError(
        f"{where} does not continue the history this landing zone holds ({zone.describe()}); "
        f"the server has {instead}",
        hint="point the config (source.*) at the server this landing zone follows, or at a "
        "replica of it; or start a new landing zone (another sink.root) for this server. "
        "Nothing was landed",
    )
