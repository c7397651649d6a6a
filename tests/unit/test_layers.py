"""The package's layers, checked from the source: which folder may import which.

A unit is a subpackage of ``replicator`` (``binlog``, ``sink``, ...) or a top-level module
(``config``, ``checkpoint``, ...). The rules:

* ``binlog/`` is the sans-I/O core: it imports nothing of ours but ``errors``;
* ``sink/`` writes what it is given: never ``source/``, ``pipeline/`` or ``snapshot/``;
* ``landed/`` is the one reader of the landing zone for both outputs: pyarrow only, never
  ``spark/``, ``delta/``, pyspark or the daemon's units;
* ``spark/`` reads the landing contract through ``landed/``: never ``source/``, ``binlog/``
  or the C core (a Spark job must not need the decoder built);
* ``delta/`` (``materialize --format delta``) runs without Spark: never ``spark/`` or
  pyspark;
* no cycles between units.

Imports are read with ``ast`` (also those inside functions), so a test cannot be fooled by
an import that happens late.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "replicator"

ALLOWED_ONLY = {"binlog": {"errors"}}
_DAEMON = {"source", "binlog", "sink", "pipeline", "snapshot", "schema", "checkpoint"}
FORBIDDEN = {
    "sink": {"source", "pipeline", "snapshot", "service", "cli"},
    "spark": _DAEMON,
    "landed": {*_DAEMON, "spark", "delta", "service", "cli"},
    "delta": {*_DAEMON, "spark", "service", "cli"},
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


def _imports_pyspark(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "pyspark" for a in node.names
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and (node.module or "").split(".")[0] == "pyspark"
        ):
            return True
    return False


def test_delta_and_landed_import_no_pyspark() -> None:
    files = sorted([*(PACKAGE / "delta").rglob("*.py"), *(PACKAGE / "landed").rglob("*.py")])
    assert len(files) > 10, "no delta or landed package"
    assert [str(p) for p in files if _imports_pyspark(p)] == []


def test_delta_imports_without_pyspark_loaded() -> None:
    code = (
        "import importlib, pkgutil, sys, replicator.delta as d, replicator.landed as l\n"
        "for p in (d, l):\n"
        "    for m in pkgutil.iter_modules(p.__path__):\n"
        "        importlib.import_module(f'{p.__name__}.{m.name}')\n"
        "sys.exit(1 if any(m.split('.')[0] == 'pyspark' for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
