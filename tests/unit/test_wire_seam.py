"""pymysql's private API is reached from one module only, ``replicator/source/wire.py``, and
pymysql is pinned below its next major for it.

The package's source is read with ``ast``: an attribute of pymysql's internals (``_sock``,
``_execute_command``, ...) on anything but ``self``, any private attribute of something named
``conn``/``connection`` (also ``self._conn``), and ``getattr``/``setattr`` with such a name as a
string. The check is a function of a package directory, so a test can plant each form in a copy
and see it caught.
"""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "replicator"
SEAM = "replicator/source/wire.py"

# pymysql.connections.Connection / MySQLResult internals the package has needed
PYMYSQL_PRIVATE = frozenset(
    {
        "_execute_command",
        "_read_packet",
        "_read_ok_packet",
        "_read_bytes",
        "_write_bytes",
        "_sock",
        "_rfile",
        "_result",
        "_read_timeout",
        "_write_timeout",
        "_next_seq_id",
    }
)
CONNECTION_NAMES = frozenset({"conn", "connection"})
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _receiver_name(node: ast.expr) -> str:
    """``conn`` for ``conn``, ``self._conn`` and ``x.connection``; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr.lstrip("_")
    return ""


def private_access(package: Path = PACKAGE) -> set[tuple[str, int, str]]:
    """(file relative to the package's parent, line, attribute) of every private pymysql
    access in ``package``."""
    found: set[tuple[str, int, str]] = set()
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                receiver = node.value
                on_self = isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
                if (node.attr in PYMYSQL_PRIVATE and not on_self) or (
                    _receiver_name(receiver) in CONNECTION_NAMES and not node.attr.startswith("__")
                ):
                    found.add((name, node.lineno, node.attr))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ATTRIBUTE_CALLS
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in PYMYSQL_PRIVATE
            ):
                found.add((name, node.lineno, str(node.args[1].value)))
    return found


def test_pymysql_internals_are_reached_from_the_seam_only() -> None:
    outside = {(file, attr) for file, _, attr in private_access() if file != SEAM}
    assert outside == set()


def test_the_seam_is_where_the_internals_are() -> None:
    used = {attr for file, _, attr in private_access() if file == SEAM}
    assert used == {
        "_execute_command",
        "_read_packet",
        "_read_ok_packet",
        "_read_query_result",
        "_sock",
        "_rfile",
        "_result",
        "_read_timeout",
        "_write_timeout",
    }


def test_each_form_of_private_access_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "replicator"
    (package / "source").mkdir(parents=True)
    (package / "source" / "wire.py").write_text("def f(conn):\n    return conn._sock\n")
    (package / "planted.py").write_text(
        "def f(conn, link, self):\n"
        "    link._execute_command(3, b'')\n"  # an internal, whatever the variable
        "    conn._anything = 1\n"  # any private attribute of a connection
        "    self._conn._sock.close()\n"  # a connection kept on an object
        "    getattr(link, '_rfile')\n"  # by name
        "    self._result = None\n"  # ours, not pymysql's
        "    conn.__class__\n"  # dunders are not pymysql's
    )
    found = private_access(package)
    assert {(f, a) for f, _, a in found if f != "replicator/source/wire.py"} == {
        ("replicator/planted.py", "_execute_command"),
        ("replicator/planted.py", "_anything"),
        ("replicator/planted.py", "_sock"),
        ("replicator/planted.py", "_rfile"),
    }
    assert ("replicator/source/wire.py", 2, "_sock") in found


def test_pymysql_is_pinned_below_its_next_major() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = [Requirement(d) for d in project["dependencies"] if Requirement(d).name == "pymysql"]
    assert len(pins) == 1
    installed = Version(version("pymysql"))
    assert installed in pins[0].specifier
    following = installed.major + 1
    assert not pins[0].specifier.contains(f"{following}.0")
    assert not pins[0].specifier.contains(f"{following}.0.0rc1", prereleases=True)
