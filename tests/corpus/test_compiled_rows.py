"""Every row image of the corpus decodes the same with every row decoder.

The fast decoders are on by default (the native core, ``binlog/native.py``, when it is
built; else the generated Python of ``binlog/rowcode.py``), so every other corpus test
exercises them. This one decodes every file again with the other fast decoder and with the
reference loop alone, and compares all rows events value by value (and type by type), or the
error where a file must fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog import native, rows
from replicator.binlog.errors import DecodeError

from .test_walk import _binlog_paths
from .util import decode_all, flatten

LOCAL_FILES = sorted((Path(__file__).resolve().parents[1] / "data").glob("*.0*"))


def _row_images(path: Path) -> list[tuple[object, ...]] | tuple[str, str]:
    try:
        events = decode_all(path)
    except DecodeError as exc:
        return type(exc).__name__, str(exc)
    return [
        (e.position, e.kind, e.rows, e.after)
        for e in flatten(events)
        if isinstance(e, ev.RowsEvent)
    ]


FAST: tuple[rows.RowDecoders, ...] = ("native", "python") if native.available() else ("python",)


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Compares every decoding of ``path``; returns how many row images it holds."""
    monkeypatch.setattr(rows, "ROW_DECODERS", "reference")
    reference = _row_images(path)
    for fast in FAST:
        monkeypatch.setattr(rows, "ROW_DECODERS", fast)
        decoded = _row_images(path)
        assert decoded == reference, fast
        assert repr(decoded) == repr(reference), fast  # 1 == 1.0 == True hides a wrong type
    if isinstance(reference, tuple):
        return 0
    return sum(len(image) for _, _, before, after in reference for image in (before, after))


@pytest.mark.parametrize("rel", _binlog_paths())
def test_corpus_file(corpus_dir: Path, rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _both(corpus_dir / rel, monkeypatch)


@pytest.mark.parametrize("path", LOCAL_FILES, ids=lambda p: p.name)
def test_local_sample(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _both(path, monkeypatch) > 0
