"""Every row image of the corpus decodes the same with and without compiled row decoders.

The compiled decoders (``binlog/rowcode.py``) are on by default, so every other corpus test
exercises them; this one turns them off for a second pass over every file and compares all
rows events value by value (and type by type), or the error where a file must fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.binlog import events as ev
from replicator.binlog import rows
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


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Compares both decodings of ``path``; returns how many row images it holds."""
    compiled = _row_images(path)
    monkeypatch.setattr(rows, "COMPILED_ROWS", False)
    reference = _row_images(path)
    assert compiled == reference
    assert repr(compiled) == repr(reference)  # 1 == 1.0 == True would hide a wrong type
    if isinstance(compiled, tuple):
        return 0
    return sum(len(image) for _, _, before, after in compiled for image in (before, after))


@pytest.mark.parametrize("rel", _binlog_paths())
def test_corpus_file(corpus_dir: Path, rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _both(corpus_dir / rel, monkeypatch)


@pytest.mark.parametrize("path", LOCAL_FILES, ids=lambda p: p.name)
def test_local_sample(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _both(path, monkeypatch) > 0
