"""The flagship comparison keeps every digit of a DECIMAL(65,30), beyond Python's default 28."""

from __future__ import annotations

from decimal import Decimal

from tests.spark.flagship_workload import canonical


def test_decimals_differing_in_the_65th_digit_compare_different() -> None:
    nines = "9" * 35 + "." + "9" * 30
    last_eight = nines[:-1] + "8"
    assert canonical("decimal", nines) != canonical("decimal", last_eight)
    assert canonical("decimal", Decimal(nines)) == canonical("decimal", nines)


def test_trailing_zeros_still_compare_equal() -> None:
    assert canonical("decimal", "1.2500000000") == canonical("decimal", Decimal("1.25"))
