"""The documentation holds together: every relative link and ``#anchor`` in README.md and
docs/*.md resolves (anchors as GitHub makes them from headings), every ``docs/...md#...``
named in the repository's other files exists, every key of config/replicator.example.yaml is
documented in docs/configuration.md (and nothing documented there is unknown to the config),
and the README's test command is the one CI runs."""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from replicator.config import Config

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONFIGURATION = ROOT / "docs" / "configuration.md"
EXAMPLE = ROOT / "config" / "replicator.example.yaml"
# other files that send readers to a page (SQL comments, YAML comments, ...)
POINTERS = [
    *sorted((ROOT / "docker").glob("*.sql")),
    EXAMPLE,
    *sorted((ROOT / "deploy").rglob("*.y*ml")),
    *sorted((ROOT / "deploy").rglob("*.json")),
]

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_POINTER = re.compile(r"\b(docs/[\w.-]+\.md)(?:#([\w-]+))?")


def _prose_lines(text: str) -> Iterator[str]:
    """The lines outside fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: the rendered text lower-cased, punctuation other
    than ``-`` and ``_`` removed, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match is None:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    out: list[str] = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        out.extend(_LINK.findall(_INLINE_CODE.sub("", line)))
    return out


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Setting up the source server", "setting-up-the-source-server"),
        ("`replicator check`", "replicator-check"),
        ("`snapshot.mode`", "snapshotmode"),
        ("Metrics, health and readiness", "metrics-health-and-readiness"),
        ("binlog_row_image", "binlog_row_image"),
        ("Resume, replay and skip", "resume-replay-and-skip"),
        ("MariaDB 10.x and 11.x", "mariadb-10x-and-11x"),
        ("See [Spark](spark.md) & co.", "see-spark--co"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading) == slug


def test_there_are_pages_with_links() -> None:
    assert len(PAGES) >= 10
    assert sum(len(links(page)) for page in PAGES) > 30


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken: list[str] = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: {path} does not exist")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading makes #{anchor} in {path.name}")
    assert broken == []


@pytest.mark.parametrize("source", POINTERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_named_elsewhere_exist(source: Path) -> None:
    broken: list[str] = []
    for page, anchor in _POINTER.findall(source.read_text(encoding="utf-8")):
        path = ROOT / page
        if not path.is_file():
            broken.append(f"{page} does not exist")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{page}#{anchor}: no such heading")
    assert broken == []


def test_the_sql_files_name_the_source_setup_page() -> None:
    for sql in (ROOT / "docker").glob("*.sql"):
        assert _POINTER.search(sql.read_text()), sql.name


def test_no_page_refers_to_a_file_outside_the_repository() -> None:
    for page in PAGES:
        assert "DESIGN.md" not in page.read_text(encoding="utf-8"), page.name


def _dotted_keys(data: dict[str, object], prefix: str = "") -> Iterator[str]:
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _dotted_keys(value, f"{dotted}.")
        else:
            yield dotted


def test_every_example_key_is_documented() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    keys = list(_dotted_keys(yaml.safe_load(EXAMPLE.read_text())))
    assert len(keys) > 50
    missing = [key for key in keys if f"`{key}`" not in text]
    assert missing == []


def _config_keys(cls: type, prefix: str) -> Iterator[str]:
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            yield from _config_keys(kind, f"{prefix}{field.name}.")  # type: ignore[arg-type]
        else:
            yield f"{prefix}{field.name}"
            if field.name == "password":
                yield f"{prefix}password_env"
                yield f"{prefix}password_file"


def test_documented_keys_are_real_and_complete() -> None:
    known = set(_config_keys(Config, ""))
    rows = re.findall(r"^\| `([a-z_]+(?:\.[a-z_]+)+)` \|", CONFIGURATION.read_text(), re.M)
    assert set(rows) - known == set()
    assert known - set(rows) == set()


def test_the_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^(scripts/\S+)", readme, re.M)
    assert "scripts/test.sh" in commands
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^exec scripts/test\.sh\s*$", ci, re.M)
    assert "pytest" in (ROOT / "scripts" / "test.sh").read_text()
