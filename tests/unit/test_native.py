"""The native core (``replicator/binlog/_rowcore_c/``) is built, used by default, can be
turned off, and is what its stub (``_rowcore.pyi``) says.

Without a C compiler the package installs without it and the generated Python decoders run
instead; that skips the native tests here, and with REPLICATOR_REQUIRE_NATIVE=1 (CI sets it)
the skip is a failure, so CI always tests the native path.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from replicator.binlog import native, rows
from tests.conftest import _unavailable

REQUIRE_NATIVE_ENV = "REPLICATOR_REQUIRE_NATIVE"


def require_native() -> None:
    """Skip without the native core; fail instead when REPLICATOR_REQUIRE_NATIVE=1."""
    if native.available():
        return
    _unavailable(f"the native core is not built: {native.unavailable()}", REQUIRE_NATIVE_ENV)


def test_native_core_is_the_default() -> None:
    require_native()
    assert rows.default_decoders() == "native"


def _defaults(env: dict[str, str]) -> str:
    code = (
        "from replicator.binlog import native, rows; "
        "print(native.available(), rows.default_decoders())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_replicator_native_0_turns_it_off() -> None:
    require_native()
    env = {k: v for k, v in os.environ.items() if k != "REPLICATOR_NATIVE"}
    assert _defaults(env) == "True native"
    assert _defaults({**env, "REPLICATOR_NATIVE": "0"}) == "False reference"


STUB = Path(native.__file__).with_name("_rowcore.pyi")


def _declared() -> dict[str, ast.stmt]:
    """The stub's public names (private aliases and imports left out), by name."""
    declared: dict[str, ast.stmt] = {}
    for node in ast.parse(STUB.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names = [node.name]
        else:
            continue
        declared.update((name, node) for name in names if not name.startswith("_"))
    return declared


def _call(fn: ast.FunctionDef) -> str:
    """The stub's parameters as the module's docstrings spell a call: ``f(a, b, c=None)``."""
    positional = [*fn.args.posonlyargs, *fn.args.args]
    defaults = [None] * (len(positional) - len(fn.args.defaults)) + list(fn.args.defaults)
    params = [
        arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}"
        for arg, default in zip(positional, defaults, strict=True)
        if arg.arg not in ("self", "cls")
    ]
    return f"{fn.name}({', '.join(params)})"


def test_the_stub_names_every_public_name_of_the_module() -> None:
    require_native()
    module = native.core()
    assert set(_declared()) == {name for name in dir(module) if not name.startswith("_")}


def test_the_stub_types_the_constants_as_the_module_has_them() -> None:
    require_native()
    module = native.core()
    constants = {
        name: ast.unparse(node.annotation)
        for name, node in _declared().items()
        if isinstance(node, ast.AnnAssign)
    }
    assert len(constants) > 40
    assert constants == dict.fromkeys(constants, "Final[int]")
    assert {name: type(getattr(module, name)) for name in constants} == dict.fromkeys(
        constants, int
    )


def test_the_stub_has_the_parameters_the_module_documents() -> None:
    require_native()
    module = native.core()
    functions = [node for node in _declared().values() if isinstance(node, ast.FunctionDef)]
    assert len(functions) == 10
    calls = {fn.name: _call(fn) for fn in functions}
    documented = {name: getattr(module, name).__doc__[: len(call)] for name, call in calls.items()}
    assert documented == calls


def test_the_stub_describes_block_spec() -> None:
    require_native()
    module = native.core()
    stub = _declared()["BlockSpec"]
    assert isinstance(stub, ast.ClassDef)
    methods = {node.name: node for node in stub.body if isinstance(node, ast.FunctionDef)}
    assert {m for m in methods if not m.startswith("_")} == {
        m for m in vars(module.BlockSpec) if not m.startswith("_")
    }
    decode = _call(methods["decode"])
    assert module.BlockSpec.decode.__doc__[: len(decode)] == decode
    # the constructor takes the stub's parameters by keyword
    spec = module.BlockSpec(**{arg.arg: () for arg in methods["__new__"].args.args[1:]})
    assert spec.decode(b"", 0, 0) == (0, (), None)
