"""Database and table names as directory names (``landed.contract.safe_part``): every name
gets a directory no other name gets, none of them hidden, a separator or a URL escape."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.landed.contract import safe_part, table_rel
from tests.hypothesis_budget import examples
from tests.spark.zone import AWKWARD_NAMES

_ESCAPE = re.compile(r"~(7E|2F|5C|00|25|3A|2E|5F)")


def unescaped(part: str) -> str:
    """The name ``part`` was made from: each escape back to its character."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), part)


# names weighted towards the characters that are escaped, and the escapes spelled out
_PIECES = st.sampled_from(
    ["~", "%", "/", "\\", "\0", ":", ".", "_", "7E", "2F", "25", "3A", "5F", "a", "é"]
)
NAMES = st.lists(_PIECES | st.text(max_size=3), min_size=1, max_size=8).map("".join)


@settings(max_examples=examples(500))
@given(NAMES)
def test_a_directory_name_gives_its_name_back(name: str) -> None:
    part = safe_part(name)
    assert unescaped(part) == name  # so no two names share a directory
    assert not any(ch in part for ch in "/\\\0%:")
    assert not part.startswith((".", "_"))


@settings(max_examples=examples(200))
@given(NAMES, NAMES)
def test_two_names_two_directories(a: str, b: str) -> None:
    assert (safe_part(a) == safe_part(b)) == (a == b)


def test_plain_names_are_their_own_directories() -> None:
    for name in ("orders", "order_items", "Customers2", "caf\u00e9", "t[1]", "a b", "a.b", "x_"):
        assert safe_part(name) == name


def test_the_documented_directories() -> None:
    # tests/spark/zone.py's names, which the Spark and Delta tests land and materialize
    assert {name: table_rel(name).as_posix() for name in AWKWARD_NAMES} == AWKWARD_NAMES
