"""The package's layers, checked from the source against the rules docs/development.md
writes down (its ``layers`` and ``independent`` blocks, read here: the rules exist once).

A unit is a subpackage of ``replicator`` (``binlog``, ``sink``, ...) or a top-level module
(``config``, ``checkpoint``, ...). A unit imports only units of lower layers; units of one
layer do not import each other; the ``independent`` lines keep the outputs (``spark``,
``delta``, ``landed``) free of the daemon. Besides, ``binlog`` imports nothing of ours but
``errors``, and no unit imports a unit that imports it back.

Imports are read with ``ast`` (also those inside functions), so a test cannot be fooled by
an import that happens late. The check is a function of a package directory, so a test can
plant an upward import in a copy and see it caught.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "replicator"
RULES = ROOT / "docs" / "development.md"

ALLOWED_ONLY = {"binlog": {"errors"}}


def _block(name: str) -> list[str]:
    """The lines of the fenced block ``name`` in docs/development.md."""
    found = re.search(rf"```{name}\n(.*?)```", RULES.read_text(encoding="utf-8"), re.S)
    assert found is not None, f"docs/development.md has no {name} block"
    return [line.strip() for line in found[1].splitlines() if line.strip()]


def layers() -> list[set[str]]:
    """The layers, the highest first."""
    return [{u.strip() for u in line.split("|")} for line in _block("layers")]


def independent() -> dict[str, set[str]]:
    """unit -> the units it must not import."""
    out: dict[str, set[str]] = defaultdict(set)
    for line in _block("independent"):
        left, _, right = line.partition(":")
        for unit in left.split():
            out[unit] |= set(right.split())
    return out


def _unit(module: str) -> str:
    """``replicator.sink.landing`` -> ``sink``; ``replicator.config`` -> ``config``."""
    return module.split(".")[1]


def _module(path: Path, package: Path = PACKAGE) -> tuple[str, bool]:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _imports(package: Path = PACKAGE) -> dict[str, set[tuple[str, str]]]:
    """unit -> {(imported module, importing module)} for imports of other units."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in package.rglob("*.py"):
        module, is_package = _module(path, package)
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
                if target.count(".") >= 1 and _unit(target) not in (_unit(module), "__version__"):
                    found[_unit(module)].add((target, module))
    return found


def _units(package: Path) -> set[str]:
    names = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return names | {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}


def violations(package: Path = PACKAGE) -> list[str]:
    """Every import of ``package`` the rules forbid, as ``importer imports imported (why)``."""
    level = {unit: n for n, layer in enumerate(layers()) for unit in layer}
    never = independent()
    wrong = []
    for unit, targets in _imports(package).items():
        for target, source in targets:
            other = _unit(target)
            if other in never.get(unit, ()):
                wrong.append(f"{source} imports {target} (independent)")
            elif level[other] < level[unit]:
                wrong.append(f"{source} imports {target} (a higher layer)")
            elif level[other] == level[unit]:
                wrong.append(f"{source} imports {target} (the same layer)")
    return sorted(wrong)


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


def test_the_rules_name_every_unit_once() -> None:
    named = [unit for layer in layers() for unit in layer]
    assert sorted(named) == sorted(_units(PACKAGE))
    assert set(independent()) | {u for v in independent().values() for u in v} <= set(named)


def test_every_import_follows_the_layers() -> None:
    assert violations() == []


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "replicator"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return copy


def _plant(module: Path, line: str) -> None:
    module.write_text(
        module.read_text(encoding="utf-8") + f"\n\ndef _planted() -> None:\n    {line}\n"
    )


def test_a_planted_upward_import_is_caught(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    assert violations(copy) == []
    _plant(copy / "sink" / "landing.py", "from ..service import Service  # noqa")
    _plant(copy / "source" / "preflight.py", "from ..sink import landing  # noqa")
    _plant(copy / "delta" / "layout.py", "import replicator.sink.changes  # noqa")
    assert violations(copy) == [
        "replicator.delta.layout imports replicator.sink.changes (independent)",
        "replicator.sink.landing imports replicator.service (a higher layer)",
        "replicator.source.preflight imports replicator.sink (the same layer)",
    ]


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
