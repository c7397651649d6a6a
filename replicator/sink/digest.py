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


WRITE_BUFFER_BYTES = 1 << 20
"""Bytes a Parquet writer's output gathers in Arrow's own buffer before they reach Python
(``HashingStream.arrow_sink``). Unbuffered, every page and page header was one call into
Python (about 300 for a file of 100k rows of the standard table, most under 100 bytes), and
each call waits for the GIL: with the reader thread decoding Python-side, up to a switch
interval (5 ms) each. Measured (one file of 100k rows, a thread spinning in Python beside):
1.40 s unbuffered, 0.30 s through a 1 MiB buffer."""


class HashingStream:
    """A writable file object that hashes every byte on its way to ``inner`` (a Python file
    object or a pyarrow output stream); what ``pyarrow.parquet.ParquetWriter`` writes to,
    through ``arrow_sink``.

    Closing it never closes ``inner``: whoever made ``inner`` closes it (an fsync, an upload
    completed) or aborts it. A buffer that Arrow closes on its own, when it is collected,
    must not complete the upload of a file being thrown away."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._hash = hashlib.sha256()
        self._size = 0
        self._closed = False

    @property
    def size(self) -> int:
        return self._size

    def hexdigest(self) -> str:
        return self._hash.hexdigest()

    def arrow_sink(self, buffer_size: int = WRITE_BUFFER_BYTES) -> Any:
        """This stream behind a buffer of Arrow's own (``WRITE_BUFFER_BYTES``), for a Parquet
        writer. Close it once the writer is closed: that hands the rest of the buffer over
        (and closes this stream, not ``inner``)."""
        import pyarrow as pa  # noqa: PLC0415 - what writes Parquet has it imported

        return pa.output_stream(self, buffer_size=buffer_size)

    def write(self, data: Any) -> int:
        if self._closed:
            raise ValueError("write to a closed HashingStream")
        self._hash.update(data)
        count = memoryview(data).nbytes
        self._size += count
        self._inner.write(data)
        return count

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        if not self._closed:
            self._inner.flush()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False
