"""Every row image of the corpus decodes the same with the native core and the reference.

The native core is on by default (``binlog/native.py``, when it is built), so every other
corpus test exercises it. This one decodes every file with the reference decoders alone and
with the core, reading the core's blocks both ways (native buffers read back through Arrow, as
the sink reads them, and every column as values), and compares all rows events value by value
(and type by type), or the error where a file must fail. Without the core the comparisons
skip (fail under REPLICATOR_REQUIRE_NATIVE=1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.binlog import events as ev
from replicator.binlog import rows
from replicator.binlog.errors import DecodeError
from tests.blocks import block_rows
from tests.unit.test_native import require_native

from .test_walk import _binlog_paths
from .util import decode_all, flatten

LOCAL_FILES = sorted((Path(__file__).resolve().parents[1] / "data").glob("*.0*"))

# every rows event's (position, kind, before images, after images), or the error's name and text
Images = list[tuple[Any, ...]] | tuple[str, str]


def _row_images(path: Path, *, buffers: bool) -> Images:
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


def _reference(path: Path, monkeypatch: pytest.MonkeyPatch) -> Images:
    monkeypatch.setattr(rows, "ROW_DECODERS", "reference")
    return _row_images(path, buffers=False)


def _image_count(images: Images) -> int:
    """How many row images a decoding holds (none where the file must fail)."""
    if isinstance(images, tuple):
        return 0
    return sum(len(image) for _, _, before, after in images for image in (before, after))


def _native_agrees(path: Path, reference: Images, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core decodes ``path`` as the reference did, its blocks read either way (skips, or
    fails under REPLICATOR_REQUIRE_NATIVE=1, without the core)."""
    require_native()
    monkeypatch.setattr(rows, "ROW_DECODERS", "native")
    decoded = {buffers: _row_images(path, buffers=buffers) for buffers in (True, False)}
    assert decoded == dict.fromkeys(decoded, reference)
    # the same type too: 1 == 1.0 == True would hide a wrong conversion
    assert {b: repr(d) for b, d in decoded.items()} == dict.fromkeys(decoded, repr(reference))


@pytest.mark.parametrize("rel", _binlog_paths())
def test_corpus_file(corpus_dir: Path, rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = corpus_dir / rel
    _native_agrees(path, _reference(path, monkeypatch), monkeypatch)


@pytest.mark.parametrize("path", LOCAL_FILES, ids=lambda p: p.name)
def test_local_sample(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = _reference(path, monkeypatch)
    assert _image_count(reference) > 0
    _native_agrees(path, reference, monkeypatch)
