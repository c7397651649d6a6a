"""Every row image of the corpus decodes the same with the native core and the reference.

The native core is on by default (``binlog/native.py``, when it is built), so every other
corpus test exercises it. This one decodes every file with the reference decoders alone and
with the core, reading the core's blocks both ways (native buffers read back through Arrow, as
the sink reads them, and every column as values), and compares all rows events value by value
(and type by type), or the error where a file must fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.binlog import events as ev
from replicator.binlog import native, rows
from replicator.binlog.errors import DecodeError
from tests.blocks import block_rows

from .test_walk import _binlog_paths
from .util import decode_all, flatten

LOCAL_FILES = sorted((Path(__file__).resolve().parents[1] / "data").glob("*.0*"))


def _row_images(path: Path, *, buffers: bool) -> list[tuple[Any, ...]] | tuple[str, str]:
    try:
        events = decode_all(path)
    except DecodeError as exc:
        return type(exc).__name__, str(exc)
    out: list[tuple[object, ...]] = []
    for e in flatten(events):
        if isinstance(e, ev.RowsEvent):
            images = block_rows(e.block) if buffers else (e.rows, e.after)
            out.append((e.position, e.kind, *images))
    return out


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Compares every decoding of ``path``; returns how many row images it holds."""
    monkeypatch.setattr(rows, "ROW_DECODERS", "reference")
    reference = _row_images(path, buffers=False)
    if native.available():
        monkeypatch.setattr(rows, "ROW_DECODERS", "native")
        for buffers in (True, False):
            decoded = _row_images(path, buffers=buffers)
            assert decoded == reference, buffers
            # the same type too: 1 == 1.0 == True would hide a wrong conversion
            assert repr(decoded) == repr(reference), buffers
    if isinstance(reference, tuple):
        return 0
    return sum(len(image) for _, _, before, after in reference for image in (before, after))


@pytest.mark.parametrize("rel", _binlog_paths())
def test_corpus_file(corpus_dir: Path, rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _both(corpus_dir / rel, monkeypatch)


@pytest.mark.parametrize("path", LOCAL_FILES, ids=lambda p: p.name)
def test_local_sample(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _both(path, monkeypatch) > 0
