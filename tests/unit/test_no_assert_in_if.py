"""No assertion of the tests sits inside an ``if``: a branch could skip it, and the test pass
without checking what it names. Checked from the source (``ast``), so it stays so.

Counted: ``assert`` statements and ``pytest.fail`` calls within an ``if`` block (or its
``else``) of the same function; a nested function starts afresh. Conditional expressions
(``a if c else b``) compute values and are not blocks."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.depth = 0
        self.found: list[int] = []

    def visit_If(self, node: ast.If) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.depth = self.depth, 0
        self.generic_visit(node)
        self.depth = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assert(self, node: ast.Assert) -> None:
        if self.depth > 0:
            self.found.append(node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        fails = isinstance(node.func, ast.Attribute) and node.func.attr == "fail"
        if fails and self.depth > 0:
            self.found.append(node.lineno)
        self.generic_visit(node)


def assertions_in_ifs(source: str) -> list[int]:
    finder = _Finder()
    finder.visit(ast.parse(source))
    return finder.found


def test_no_test_asserts_inside_an_if() -> None:
    found = {
        str(path.relative_to(TESTS)): lines
        for path in sorted(TESTS.rglob("*.py"))
        if (lines := assertions_in_ifs(path.read_text()))
    }
    assert found == {}


def test_the_check_finds_each_form() -> None:
    source = """
def test_a(x):
    if x:
        assert x
    else:
        pytest.fail("no")
    assert x if x else True
    def inner():
        assert x
    if x:
        def helper():
            assert x
"""
    assert assertions_in_ifs(source) == [4, 6]
