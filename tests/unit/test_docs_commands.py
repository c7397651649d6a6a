"""The documentation's commands and settings exist: every `replicator ...` example in README.md
and docs/*.md names a real subcommand with flags it accepts, and every setting named as
`section.key` (or as its `REPLICATOR_SECTION__KEY` variable) is a key of the config.

A doc that shows a flag the command refuses, or a key the config does not have, fails here
before a user copies it."""

from __future__ import annotations

import dataclasses
import re
import shlex
import typing
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from replicator.cli import main
from replicator.config import Config

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "config" / "README.md"]
SECTIONS = tuple(field.name for field in dataclasses.fields(Config))

# `replicator ...` in a code span or a code block line (also `.venv/bin/replicator ...`)
_COMMAND = re.compile(r"(?:^|[\s`(])(?:\.venv/bin/)?replicator((?:\s+[^`|#;&)\n]+)?)")
_CODE_SPAN = re.compile(r"`([^`]+)`")
_FENCE = re.compile(r"^\s*(```|~~~)")
_KEY = re.compile(rf"^(?:{'|'.join(SECTIONS)})(?:\.[a-z0-9_]+)+$")
_FILE_TYPES = {"py", "md", "json", "yaml", "yml", "sql", "sh", "parquet", "pyi", "c"}
_VARIABLE = re.compile(r"\bREPLICATOR_([A-Z0-9_]+__[A-Z0-9_]+)\b")


def _code(page: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every code span and every line of a code block; a block's
    lines ending in a backslash are joined with the next."""
    fenced = False
    pending = ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            yield number, pending + line
            pending = ""
        else:
            for span in _CODE_SPAN.findall(line):
                yield number, span


def commands(page: Path) -> Iterator[tuple[int, list[str]]]:
    """(line, words after `replicator`) of each command example."""
    for number, text in _code(page):
        for match in _COMMAND.finditer(text):
            try:
                words = shlex.split(match.group(1), comments=False)
            except ValueError:  # an unbalanced quote in prose: take the words as they are
                words = match.group(1).split()
            yield number, words


def _problem(words: list[str]) -> str | None:
    """What is wrong with ``replicator <words>``; None when the CLI accepts its shape."""
    command: click.Command = main
    rest = list(words)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        if name in ("...", "…") or not re.fullmatch(r"[a-z][a-z-]*", name):
            return None  # prose such as `replicator's`, or an elided command
        found = command.commands.get(name)
        if found is None:
            return f"no subcommand {name!r} of {command.name!r}"
        command = found
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    known.add("--help")
    for word in rest:
        flag = word.partition("=")[0]
        if flag.startswith("--") and flag not in known and flag != "--":
            return f"{command.name} has no option {flag}"
    return None


def test_the_pages_show_commands() -> None:
    found = [words for page in PAGES for _, words in commands(page)]
    assert len(found) > 40
    assert ["run", "--config", "replicator.yaml"] in found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_example_is_accepted_by_the_cli(page: Path) -> None:
    wrong = []
    for number, words in commands(page):
        problem = _problem(words)
        if problem is not None:
            wrong.append(f"line {number}: replicator {' '.join(words)}: {problem}")
    assert wrong == []


def _field_type(kind: object, name: str) -> object | None:
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        return None
    hints: dict[str, object] = typing.get_type_hints(kind, include_extras=False)
    names = {field.name for field in dataclasses.fields(kind)}
    if name in names:
        return hints[name]
    for suffix in ("_env", "_file"):  # a secret's other forms: password_env, password_file
        if name.endswith(suffix) and name[: -len(suffix)] in names:
            return str
    return None


def key_exists(dotted: str) -> bool:
    kind: object = Config
    for part in dotted.split("."):
        found = _field_type(kind, part)
        if found is None:
            return False
        args = [a for a in typing.get_args(found) if a is not type(None)]
        kind = args[0] if len(args) == 1 and dataclasses.is_dataclass(args[0]) else found
    return True


def settings(page: Path) -> Iterator[tuple[int, str]]:
    for number, text in _code(page):
        candidate = text.strip().rstrip(":")
        if _KEY.match(candidate) and candidate.rpartition(".")[2] not in _FILE_TYPES:
            yield number, candidate
        for variable in _VARIABLE.findall(text):
            yield number, ".".join(part.lower() for part in variable.split("__"))


def test_key_exists() -> None:
    assert key_exists("sink.batch_max_rows")
    assert key_exists("sink.object_store.endpoint")
    assert key_exists("source.password_env")
    assert key_exists("source.tls.enabled")
    assert not key_exists("sink.batch_max_row")
    assert not key_exists("source.tls.nothing")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setting_named_exists(page: Path) -> None:
    unknown = [f"line {n}: {key}" for n, key in settings(page) if not key_exists(key)]
    assert unknown == []


def test_a_wrong_example_is_caught() -> None:
    assert _problem(["run", "--config", "c.yaml", "--stop-at-end"]) is None
    assert _problem(["checkpoint", "set", "--gtid", "0-1-5"]) is None
    assert _problem(["run", "--no-such-flag"]) == "run has no option --no-such-flag"
    assert _problem(["nonesuch"]) == "no subcommand 'nonesuch' of 'main'"
