"""The package's layers, checked from the source: which folder may import which.

A unit is a subpackage of ``replicator`` (``binlog``, ``sink``, ...) or a top-level module
(``config``, ``checkpoint``, ...). The rules:

* ``binlog/`` is the sans-I/O core: it imports nothing of ours but ``errors``;
* ``sink/`` writes what it is given: never ``source/``, ``pipeline/`` or ``snapshot/``;
* ``spark/`` reads the landing contract on its own: never ``source/``, ``binlog/`` or the C
  core (a Spark job must not need the decoder built);
* no cycles between units.

Imports are read with ``ast`` (also those inside functions), so a test cannot be fooled by
an import that happens late.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "replicator"

ALLOWED_ONLY = {"binlog": {"errors"}}
FORBIDDEN = {
    "sink": {"source", "pipeline", "snapshot", "service", "cli"},
    "spark": {"source", "binlog", "sink", "pipeline", "snapshot", "schema", "checkpoint"},
}


def _unit(module: str) -> str:
    """``replicator.sink.landing`` -> ``sink``; ``replicator.config`` -> ``config``."""
    return module.split(".")[1]


def _module(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _imports() -> dict[str, set[tuple[str, str]]]:
    """unit -> {(imported module, importing module)} for imports of other units."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module, is_package = _module(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")
                    if not is_package:
                        base = base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                if target == "replicator":  # from replicator import x: x is a unit
                    targets = [f"replicator.{alias.name}" for alias in node.names]
                elif target.startswith("replicator."):
                    targets = [target]
                    if node.module is None:  # from . import x
                        targets = [f"{target}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("replicator.")]
            for target in targets:
                if target.count(".") >= 1 and _unit(target) != _unit(module):
                    found[_unit(module)].add((target, module))
    return found


def test_the_import_reader_sees_imports() -> None:
    imports = _imports()
    assert ("replicator.binlog.position", "replicator.sink.landing") in imports["sink"]
    assert any(target.startswith("replicator.sink.") for target, _ in imports["pipeline"])


def test_binlog_imports_nothing_of_ours_above_it() -> None:
    for unit, allowed in ALLOWED_ONLY.items():
        wrong = sorted(
            f"{source} imports {target}"
            for target, source in _imports()[unit]
            if _unit(target) not in allowed
        )
        assert wrong == [], unit


def test_forbidden_imports() -> None:
    imports = _imports()
    for unit, forbidden in FORBIDDEN.items():
        wrong = sorted(
            f"{source} imports {target}"
            for target, source in imports[unit]
            if _unit(target) in forbidden
        )
        assert wrong == [], unit


def test_spark_does_not_need_the_c_core() -> None:
    for path in (PACKAGE / "spark").rglob("*.py"):
        assert "_rowcore" not in path.read_text(encoding="utf-8"), path


def test_no_cycles_between_units() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for unit, targets in _imports().items():
        graph[unit] |= {_unit(target) for target, _ in targets}
    cycles = []
    for start in sorted(graph):
        # every unit reachable from start; start among them means a cycle through it
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            unit = todo.pop()
            if unit not in seen:
                seen.add(unit)
                todo.extend(graph.get(unit, ()))
        if start in seen:
            cycles.append(start)
    assert cycles == []
