"""``scripts/fetch-corpus``: each file fetched at its pinned commit, written only when its
sha256 is the pinned one, nothing fetched twice, and the tests find the result.

Offline: an HTTP server on 127.0.0.1 stands in for the upstream repositories (laid out as
``{repo}/{commit}/{path}``, as the default URL template asks), and ``file://`` URLs for a
mirror. The script runs as a user runs it, in a process of its own.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.corpus.util import CORPUS_DIR, CORPUS_ENV, DEFAULT_CORPUS_DIR, corpus_root

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "fetch-corpus"
PINS = ROOT / "scripts" / "corpus-pins.json"


@dataclass
class Upstream:
    """A local HTTP server playing the upstream repositories; ``requests`` logs each path."""

    root: Path
    port: int
    requests: list[str] = field(default_factory=list)

    @property
    def template(self) -> str:
        return f"http://127.0.0.1:{self.port}/{{repo}}/{{commit}}/{{path}}"

    def put(self, repo: str, commit: str, path: str, data: bytes) -> None:
        target = self.root / repo / commit / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Upstream]:
    served = tmp_path / "served"
    served.mkdir()
    requests: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(served), **kwargs)

        def do_GET(self) -> None:
            requests.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Upstream(served, server.server_address[1], requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def fetch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != CORPUS_ENV}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
    )


# -- a small corpus of our own: two upstream files (one a binlog in the manifest), one derived --

A = b"\xfebin" + bytes(range(200))
B = b"some upstream text\n" * 3
C = b"made for the corpus\n"
A_FACTS = {"version": "8.0.40", "events": 3, "event_types": {"QUERY": 3}, "err": None}


def pin(path: str, data: bytes, upstream: dict[str, str] | None, **extra: Any) -> dict[str, Any]:
    return {
        "path": path,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "upstream": upstream,
        **extra,
    }


@pytest.fixture
def pins(tmp_path: Path, upstream: Upstream) -> Path:
    entries = [
        pin("alpha/a.bin", A, {"repo": "o/alpha", "commit": "c1" * 20, "path": "data/a.bin"},
            manifest=A_FACTS),
        pin("beta/sub/b.txt", B, {"repo": "o/beta", "commit": "c2" * 20, "path": "t/x/b.txt"}),
        pin("_derived/c.txt", C, None),
    ]  # fmt: skip
    upstream.put("o/alpha", "c1" * 20, "data/a.bin", A)
    upstream.put("o/beta", "c2" * 20, "t/x/b.txt", B)
    path = tmp_path / "pins.json"
    path.write_text(json.dumps({"files": entries}))
    return path


def test_fetches_each_upstream_file_verified_and_writes_the_manifest(
    tmp_path: Path, upstream: Upstream, pins: Path
) -> None:
    target = tmp_path / "corpus"
    result = fetch(str(target), "--upstream-url", upstream.template, "--pins", str(pins))

    assert result.returncode == 0, result.stderr
    assert (target / "alpha/a.bin").read_bytes() == A
    assert (target / "beta/sub/b.txt").read_bytes() == B
    assert not (target / "_derived").exists()  # no upstream: only a mirror has it
    assert sorted(upstream.requests) == [
        f"/o/alpha/{'c1' * 20}/data/a.bin",
        f"/o/beta/{'c2' * 20}/t/x/b.txt",
    ]
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest == [
        {"path": "alpha/a.bin", "size": len(A), "sha256": hashlib.sha256(A).hexdigest()} | A_FACTS
    ]
    assert "2 fetched, 0 already there, 0 refused" in result.stdout
    assert "1 files were made for the corpus" in result.stdout
    assert not list(target.rglob(".*.part"))


def test_a_second_run_fetches_nothing(tmp_path: Path, upstream: Upstream, pins: Path) -> None:
    target = tmp_path / "corpus"
    args = (str(target), "--upstream-url", upstream.template, "--pins", str(pins))
    assert fetch(*args).returncode == 0
    manifest = (target / "manifest.json").stat().st_mtime_ns
    upstream.requests.clear()

    again = fetch(*args)

    assert again.returncode == 0, again.stderr
    assert upstream.requests == []
    assert "0 fetched, 2 already there" in again.stdout
    assert (target / "manifest.json").stat().st_mtime_ns == manifest


@pytest.mark.parametrize(
    ("served", "words"),
    [
        (B.replace(b"some", b"SOME"), "sha256 of http://"),  # same size, other bytes
        (B + b"!", "gave 58 bytes, the pin says 57"),
    ],
)
def test_refuses_a_file_whose_bytes_differ(
    tmp_path: Path, upstream: Upstream, pins: Path, served: bytes, words: str
) -> None:
    upstream.put("o/beta", "c2" * 20, "t/x/b.txt", served)
    target = tmp_path / "corpus"

    result = fetch(str(target), "--upstream-url", upstream.template, "--pins", str(pins))

    assert result.returncode == 1
    assert "refused beta/sub/b.txt" in result.stderr
    assert words in result.stderr
    assert "not written" in result.stderr
    assert not (target / "beta/sub/b.txt").exists()
    assert not list(target.rglob(".*.part"))
    assert (target / "alpha/a.bin").read_bytes() == A  # the others still land
    assert "1 fetched, 0 already there, 1 refused" in result.stdout


def test_a_missing_upstream_file_is_named(tmp_path: Path, upstream: Upstream, pins: Path) -> None:
    (upstream.root / "o/alpha" / ("c1" * 20) / "data/a.bin").unlink()

    result = fetch(str(tmp_path / "c"), "--upstream-url", upstream.template, "--pins", str(pins))

    assert result.returncode == 1
    assert "refused" in result.stderr and "HTTP 404" in result.stderr


def test_a_local_file_with_other_bytes_is_replaced(
    tmp_path: Path, upstream: Upstream, pins: Path
) -> None:
    target = tmp_path / "corpus"
    args = (str(target), "--upstream-url", upstream.template, "--pins", str(pins))
    assert fetch(*args).returncode == 0
    (target / "alpha/a.bin").write_bytes(b"tampered")
    upstream.requests.clear()

    result = fetch(*args)

    assert result.returncode == 0, result.stderr
    assert (target / "alpha/a.bin").read_bytes() == A
    assert upstream.requests == [f"/o/alpha/{'c1' * 20}/data/a.bin"]


def test_the_directory_comes_from_the_variable_the_tests_read(
    tmp_path: Path, upstream: Upstream, pins: Path
) -> None:
    target = tmp_path / "from-env"
    args = ("--upstream-url", upstream.template, "--pins", str(pins))

    result = fetch(*args, env={CORPUS_ENV: str(target)})

    assert result.returncode == 0, result.stderr
    assert (target / "alpha/a.bin").read_bytes() == A
    assert corpus_root({CORPUS_ENV: str(target)}) == target.resolve()
    assert corpus_root({}) == DEFAULT_CORPUS_DIR

    missing = fetch(*args)
    assert missing.returncode == 2
    assert CORPUS_ENV in missing.stderr


def test_a_mirror_gives_every_file(tmp_path: Path, pins: Path) -> None:
    mirror = tmp_path / "mirror"
    for rel, data in (("alpha/a.bin", A), ("beta/sub/b.txt", B), ("_derived/c.txt", C)):
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_bytes(data)
    target = tmp_path / "corpus"

    result = fetch(str(target), "--mirror", mirror.as_uri(), "--pins", str(pins))

    assert result.returncode == 0, result.stderr
    assert (target / "_derived/c.txt").read_bytes() == C
    assert "3 fetched" in result.stdout


# -- the real pins, against the local corpus copy --------------------------------------------


@pytest.fixture
def local_corpus() -> Path:
    if not (CORPUS_DIR / "manifest.json").is_file():
        pytest.skip(f"binlog corpus not found at {CORPUS_DIR}")
    return CORPUS_DIR


def test_the_pins_match_the_corpus_manifest(local_corpus: Path) -> None:
    pinned = {e["path"]: e for e in json.loads(PINS.read_text())["files"]}
    for entry in json.loads((local_corpus / "manifest.json").read_text()):
        facts = {k: v for k, v in entry.items() if k not in ("path", "size", "sha256")}
        want = pinned[entry["path"]]
        assert (want["size"], want["sha256"]) == (entry["size"], entry["sha256"]), entry["path"]
        assert want["manifest"] == facts, entry["path"]


def test_upstream_fetch_of_the_real_pins_gives_a_corpus_the_tests_read(
    tmp_path: Path, upstream: Upstream, local_corpus: Path
) -> None:
    """Every upstream file, served from the local copy at its pinned place; then the corpus
    tests run on the result: what it lacks (files made for the corpus) skips, nothing fails."""
    entries = json.loads(PINS.read_text())["files"]
    for entry in entries:
        if entry["upstream"] is not None:
            up = entry["upstream"]
            upstream.put(
                up["repo"], up["commit"], up["path"], (local_corpus / entry["path"]).read_bytes()
            )
    target = tmp_path / "corpus"

    result = fetch(str(target), "--upstream-url", upstream.template)

    assert result.returncode == 0, result.stderr
    fetched = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    assert fetched == {e["path"] for e in entries if e["upstream"]} | {"manifest.json"}
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/corpus/test_walk.py", "tests/corpus/test_index_values.py",
         "tests/corpus/test_reference_decodes.py"],
        cwd=ROOT, env={**os.environ, CORPUS_ENV: str(target)},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    summary = tests.stdout.strip().splitlines()[-1]
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert " passed" in summary and " skipped" in summary and "failed" not in summary


def test_mirror_fetch_of_the_real_pins_is_the_whole_corpus(
    tmp_path: Path, local_corpus: Path
) -> None:
    target = tmp_path / "corpus"

    result = fetch(str(target), "--mirror", local_corpus.as_uri())

    assert result.returncode == 0, result.stderr
    for entry in json.loads(PINS.read_text())["files"]:
        assert (target / entry["path"]).read_bytes() == (local_corpus / entry["path"]).read_bytes()
    ours = {e["path"]: e for e in json.loads((target / "manifest.json").read_text())}
    theirs = {e["path"]: e for e in json.loads((local_corpus / "manifest.json").read_text())}
    assert ours == theirs
    shutil.rmtree(target)
