"""``replicator status``: where a landing zone stands, from what is on disk and who answers.

Three sources, each optional except the first, so the command is useful when the daemon is
down or the source unreachable:

* the landing zone: its id, the checkpoint (position, batch, age), the last committed
  manifest, and the record of its lock's last holder (pid, whether it still runs);
* the running daemon's HTTP port (the one its lock records while it runs, else
  ``service.http_port``): readiness, replication lag, whether the dump is streaming, bytes
  behind;
* the source server: the end of its binlog, and how many bytes the checkpoint is behind it
  (or that the checkpoint's position is not in its binlog: another server, or one whose
  binlog was purged or reset).

Nothing here writes anything. A checkpoint naming a batch whose manifest is gone (the newest
manifests removed) is an IntegrityError (exit 4), as for every reader of the landing zone.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from .checkpoint import CheckpointStore, position_to_json
from .errors import IntegrityError, ReplicatorError
from .healthcheck import ALL_ADDRESSES
from .landed.checkpointed import check_reached, newest_batch
from .landed.contract import CHECKPOINT, MANIFESTS
from .sink.identity import read_identity
from .sink.lock import LockRecord, read_record
from .sink.stores import landing_store
from .snapshot.requests import read_requests
from .storage import LocalStore, Store

# The daemon's HTTP port (urllib, prometheus_client) and the source (pymysql) are imported
# when they are asked, so that ``status`` costs little when they are not (``--no-source``, no
# daemon running).
if TYPE_CHECKING:
    from .config import Config

_DAEMON_METRICS = {
    "replicator_replication_lag_seconds": "lag_seconds",
    "replicator_stream_connected": "streaming",
    "replicator_binlog_behind_bytes": "behind_bytes",
    "replicator_batches_committed_total": "batches_this_run",
    "replicator_rows_committed_total": "rows_this_run",
    "replicator_checkpoint_age_seconds": "checkpoint_age_seconds",
}


def gather(
    config: Config,
    *,
    probe_source: bool = True,
    timeout: float = 3.0,
    source_not_asked: str | None = None,
) -> dict[str, Any]:
    """The status report as plain data (what ``--json`` prints). ``source_not_asked``: why
    the source is not asked though a config names it (its password cannot be read)."""
    root = landing_store(config.sink)
    checkpoint = CheckpointStore(root).load()
    report: dict[str, Any] = {
        "landing": str(root.root.absolute()) if isinstance(root, LocalStore) else root.location
    }
    try:
        report["landing_id"] = read_identity(root)
    except ReplicatorError as exc:
        report["landing_id"] = f"unreadable: {exc}"
    record = read_record(root)
    position = checkpoint.position
    report["checkpoint"] = {
        "batch": checkpoint.batch,
        "next_seq": checkpoint.next_seq,
        "committed_at": checkpoint.committed_at or None,
        "age_seconds": _age(checkpoint.committed_at),
        "position": None if position is None else position_to_json(position),
        "describe": None if position is None else position.describe(),
    }
    report["last_batch"] = _last_batch(root, checkpoint.batch)
    report["snapshot"] = checkpoint.snapshot.to_json()
    report["snapshot_requests"] = len(read_requests(root))
    report["writer"] = None if record is None else _writer(record)
    report["daemon"] = _daemon(config, record, timeout)
    if probe_source:
        report["source"] = _source(config, report["checkpoint"]["position"], timeout)
    elif source_not_asked is not None:
        report["source_not_asked"] = source_not_asked
    return report


def _age(committed_at: str) -> float | None:
    if not committed_at:
        return None
    try:
        then = dt.datetime.fromisoformat(committed_at)
    except ValueError:
        return None
    return round((dt.datetime.now(dt.UTC) - then).total_seconds(), 1)


def _last_batch(root: Store, batch: int) -> dict[str, Any] | None:
    """The manifest of ``batch``, the one the checkpoint (read before) names. Its manifest
    gone is an IntegrityError, as for every reader (``landed.checkpointed``): a daemon writes
    a batch's manifest before the checkpoint naming it, and never removes one."""
    if batch == 0:
        return None
    key = f"{MANIFESTS}/{batch:020d}.json"  # (``manifests.manifest_key``: see the imports)
    path = root.uri(key)
    try:
        manifest = json.loads(root.read(key))
    except FileNotFoundError:
        # the manifests' parser (and compaction records' under it) only on this path:
        # status reads one manifest as JSON (tests/unit/test_startup.py)
        from .landed.manifests import manifest_keys  # noqa: PLC0415

        keys, _ = manifest_keys(root)
        check_reached(root, batch, newest_batch(keys))  # the newest manifests removed
        raise IntegrityError(
            f"checkpoint {root.uri(CHECKPOINT)} names batch {batch}, but its manifest {path} "
            "is gone (later batches are committed)",
            hint="restore the manifest from a backup",
        ) from None
    except (OSError, ValueError) as exc:
        return {"batch": batch, "error": f"cannot read {path}: {exc}"}
    tables: dict[str, int] = {}
    for entry in manifest.get("files", []):
        tables[entry["table"]] = tables.get(entry["table"], 0) + int(entry["rows"])
    return {
        "batch": batch,
        "committed_at": manifest.get("committed_at"),
        "rows": manifest.get("rows"),
        "transactions": manifest.get("transactions"),
        "tables": tables,
    }


def _writer(record: LockRecord) -> dict[str, Any]:
    return {
        "pid": record.pid,
        "host": record.host,
        "since": record.since,
        "purpose": record.purpose,
        "running": record.running,
    }


def _daemon(config: Config, record: LockRecord | None, timeout: float) -> dict[str, Any]:
    """Ask the daemon's HTTP port: the one the landing zone's lock records while its holder
    runs, else the config's."""
    if record is not None and record.running is False:
        why = f"its last writer has ended: {record.describe()}"
        return {"reachable": False, "running": False, "why": why}
    service = config.service
    recorded = _recorded_http(record)
    if recorded is not None:
        host, port = recorded
    elif not service.http_enabled:
        return {"reachable": False, "why": "no running daemon recorded in the landing zone's lock"}
    elif service.http_port == 0:
        return {"reachable": False, "why": "service.http_port is not a fixed port"}
    else:
        host, port = service.http_host, service.http_port
    import urllib.error  # noqa: PLC0415 - see the imports
    import urllib.request  # noqa: PLC0415

    from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

    host = "127.0.0.1" if host in ALL_ADDRESSES else host
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{base}/metrics", timeout=timeout) as response:
            body = response.read().decode()
    except (OSError, urllib.error.URLError) as exc:
        return {"reachable": False, "why": f"{base}: {getattr(exc, 'reason', exc)}"}
    out: dict[str, Any] = {"reachable": True, "url": base}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            key = _DAEMON_METRICS.get(sample.name)
            if key is not None:
                out[key] = sample.value
    if "streaming" in out:
        out["streaming"] = bool(out["streaming"])
    try:
        with opener.open(f"{base}/readyz", timeout=timeout) as response:
            out["ready"], out["ready_reason"] = True, response.read().decode().strip()
    except urllib.error.HTTPError as exc:
        out["ready"], out["ready_reason"] = False, exc.read().decode().strip()
    except OSError as exc:
        out["ready"], out["ready_reason"] = False, str(exc)
    return out


def _recorded_http(record: LockRecord | None) -> tuple[str, int] | None:
    """The HTTP address a running daemon recorded in the landing zone's lock."""
    if record is None or not record.running:
        return None
    host, port = record.facts.get("http_host"), record.facts.get("http_port")
    if not isinstance(host, str) or not isinstance(port, int) or port <= 0:
        return None
    return host, port


def _source(config: Config, position: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
    from .progress import bytes_behind, position_missing  # noqa: PLC0415 - see the imports
    from .source.connection import open_connection  # noqa: PLC0415
    from .source.server_info import server_info  # noqa: PLC0415

    try:
        conn = open_connection(config.source, read_timeout=timeout)
    except ReplicatorError as exc:
        return {"reachable": False, "why": str(exc)}
    try:
        info = server_info(conn)
    except ReplicatorError as exc:
        return {"reachable": False, "why": str(exc)}
    finally:
        conn.close()
    out: dict[str, Any] = {"reachable": True, "version": info.version_string}
    if info.binlog_end is not None:
        out["binlog_end"] = str(info.binlog_end)
    out["gtid"] = info.gtid_binlog_pos or info.gtid_executed
    if position is not None and info.binlog_files and position.get("file"):
        file, offset = str(position["file"]), int(position["position"])
        missing = position_missing(info.binlog_files, file, offset)
        if missing is not None:
            # another server than the landing zone's source, or its binlog purged or reset:
            # no byte count means anything then (and never "0 behind")
            out["checkpoint_not_in_binlog"] = missing
        else:
            out["checkpoint_behind_bytes"] = bytes_behind(info.binlog_files, file, offset)
    return out


def format_text(report: dict[str, Any]) -> str:
    """A few aligned lines for people."""
    lines = [("landing zone", report["landing"])]
    if report.get("landing_id"):
        lines.append(("landing id", report["landing_id"]))
    cp = report["checkpoint"]
    if cp["position"] is None:
        lines.append(("checkpoint", "none yet (the first run starts at service start config)"))
    else:
        age = "" if cp["age_seconds"] is None else f", {cp['age_seconds']:.0f} s ago"
        lines.append(("checkpoint", f"{cp['describe']}, batch {cp['batch']}{age}"))
    last = report["last_batch"]
    if last is not None and "error" not in last:
        tables = ", ".join(f"{t} {n}" for t, n in sorted(last["tables"].items()))
        lines.append(
            ("last batch", f"#{last['batch']} at {last['committed_at']}: {last['rows']} rows"
             f" in {last['transactions']} transactions ({tables})")
        )  # fmt: skip
    elif last is not None:
        lines.append(("last batch", last["error"]))
    snap = report.get("snapshot")
    if snap is not None and snap["tables"]:
        lines.append(
            ("snapshot", f"reading {snap['tables'][0]} ({snap['rows']} rows landed), "
             f"{len(snap['tables']) - 1} tables after it; {snap['done']} tables "
             f"({snap['done_rows']} rows) done")
        )  # fmt: skip
    elif snap is not None:
        lines.append(("snapshot", f"done: {snap['done']} tables, {snap['done_rows']} rows"))
    if report.get("snapshot_requests"):
        lines.append(("snapshot", f"{report['snapshot_requests']} request(s) not yet taken"))
    daemon = report["daemon"]
    if daemon["reachable"]:
        state = "ready" if daemon.get("ready") else f"not ready: {daemon.get('ready_reason')}"
        lag = daemon.get("lag_seconds")
        lag_text = "" if lag is None else f", lag {lag:.1f} s"
        lines.append(("daemon", f"running at {daemon['url']}, {state}{lag_text}"))
    elif daemon.get("running") is False:
        lines.append(("daemon", f"not running ({daemon['why']})"))
    else:
        lines.append(("daemon", f"not reachable ({daemon['why']})"))
    source = report.get("source")
    if source is not None and source["reachable"]:
        behind = source.get("checkpoint_behind_bytes")
        missing = source.get("checkpoint_not_in_binlog")
        behind_text = "" if behind is None else f", checkpoint {behind} bytes behind"
        if missing is not None:
            behind_text = f"; the checkpoint's position is not in this server's binlog ({missing})"
        lines.append(("source", f"{source['version']}, binlog end {source.get('binlog_end')}"
                      f"{behind_text}"))  # fmt: skip
    elif source is not None:
        lines.append(("source", f"not reachable ({source['why']})"))
    elif report.get("source_not_asked"):
        lines.append(("source", f"not asked: {report['source_not_asked']}"))
    else:
        lines.append(("source", "not asked (--no-source, or --landing: no config names it)"))
    width = max(len(name) for name, _ in lines)
    return "".join(f"{name:<{width}}  {value}\n" for name, value in lines)
