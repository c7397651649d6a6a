"""Content hashes of the files a landing zone commits.

Every committed file (a batch's data files, a compaction's outputs, a schema history version)
is recorded with its size and the SHA-256 of its bytes, as 64 lowercase hex digits under the
key ``sha256``. A size tells a truncated or extended file; the hash tells a file replaced by
another one of the same size (an object store key overwritten, a backup restored from the
wrong day). SHA-256 because OpenSSL computes it at memory speed on current CPUs (SHA-NI,
ARMv8 crypto) and every tool can check it (``sha256sum``, ``aws s3api`` checksums).

Writers hash what they write as they write it (``HashingStream``), so nothing is read back;
readers and ``replicator verify`` hash what they read (``hash_key``). The schema history file
a manifest names is pinned by the manifest (``HISTORY_DIGEST_KEY``) and checked by every reader
of it (``check_history``): it is the only committed file that is read back to decode the
stream, so an edit to it would silently change the meaning of every later row.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..errors import IntegrityError
from ..landed.contract import DIGEST_KEY, HISTORY_DIGEST_KEY, is_digest
from ..storage import Store

__all__ = [
    "DIGEST_KEY",
    "HISTORY_DIGEST_KEY",
    "HashingStream",
    "check_history",
    "hash_bytes",
    "hash_key",
    "is_digest",
]

_CHUNK = 4 << 20


def hash_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def hash_key(store: Store, key: str) -> tuple[int, str]:
    """The size and hash of the file at ``key``, read in chunks (``FileNotFoundError`` when
    there is none)."""
    fs, base = store.filesystem()
    path = f"{base.rstrip('/')}/{key}" if base else key
    digest = hashlib.sha256()
    size = 0
    with fs.open_input_stream(path) as handle:
        while True:
            chunk = handle.read(_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            digest.update(chunk)
    return size, digest.hexdigest()


def check_history(raw: bytes, pinned: str | None, where: str, batch: int | None) -> None:
    """The schema history file ``where`` holds ``raw``: stop unless it is what the manifest
    of ``batch`` pinned (``pinned``; None: a manifest from before pins, accepted as it is)."""
    if pinned is None:
        return
    found = hash_bytes(raw)
    if found != pinned:
        raise IntegrityError(
            f"the schema history {where} is not the file the manifest of batch {batch} pins: "
            f"its sha256 is {found}, the manifest says {pinned}",
            hint="the file was edited or replaced after it was committed, and the columns of "
            "MINIMAL/NOBLOB binlogs would be named from it: restore it from a backup (the "
            "file whose sha256 the manifest names); nothing was changed in the landing zone",
        )


class HashingStream:
    """A writable file object that hashes every byte on its way to ``inner`` (a Python file
    object or a pyarrow output stream); what ``pyarrow.parquet.ParquetWriter`` writes to."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._hash = hashlib.sha256()
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def write(self, data: Any) -> int:
        self._hash.update(data)
        count = memoryview(data).nbytes
        self._size += count
        self._inner.write(data)
        return count

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        self._inner.flush()

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def close(self) -> None:
        self._inner.close()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False
