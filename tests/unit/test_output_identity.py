"""``spark.identity``: an output goes on only from the landing zone it was built from, and
``landed.committed.landing_id_of``: the id the manifests carry (no Spark needed)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from replicator.errors import IntegrityError
from replicator.landed.batches import Landing
from replicator.landed.committed import Manifest, landing_id_of
from replicator.spark import identity
from replicator.spark.state import TableState
from tests.spark.zone import Zone, int_col, table

ROOT = Path("/data/landing")
OUT = Path("/data/current")
OURS, THEIRS = "a" * 32, "b" * 32

STATE = TableState(
    table="shop.orders",
    landing=str(ROOT),
    mode="batch",
    last_batch=182,
    stream_batch=-1,
    last_seq=5000,
    key=["id"],
    keep_metadata=False,
    allow_unknown=False,
    schema="",
    rows=10,
    lineage=True,
    landing_id=OURS,
)


def test_a_state_of_this_landing_zone_goes_on() -> None:
    assert identity.check(STATE, OUT, ROOT, OURS, 200) is None


def test_a_state_of_another_landing_zone_stops_naming_both_ids_and_the_fix() -> None:
    with pytest.raises(IntegrityError) as caught:
        identity.check(STATE, OUT, ROOT, THEIRS, 18)
    text = str(caught.value)
    assert caught.value.exit_code == 4
    assert OURS in text and THEIRS in text
    assert f"remove the output directory {OUT}" in text and "--out another directory" in text


def test_a_state_with_an_id_and_a_landing_zone_without_one_stops() -> None:
    with pytest.raises(IntegrityError, match="written before landing zone ids"):
        identity.check(STATE, OUT, ROOT, None, 200)


def test_a_state_from_before_ids_adopts_the_id_once() -> None:
    old = replace(STATE, landing_id=None)
    note = identity.check(old, OUT, ROOT, OURS, 182)
    assert note is not None and OURS in note
    assert identity.check(old, OUT, ROOT, None, 182) is None  # nothing to adopt yet


def test_a_state_from_before_ids_with_batches_the_landing_zone_lacks_stops() -> None:
    old = replace(STATE, landing_id=None)
    with pytest.raises(IntegrityError, match=r"holds batches up to 182 .* has 18 committed"):
        identity.check(old, OUT, ROOT, OURS, 18)
    with pytest.raises(IntegrityError):
        identity.check(old, OUT, ROOT, None, 18)


def test_a_state_of_another_path_is_left_to_the_options_check() -> None:
    moved = replace(STATE, landing_id=None, landing="/elsewhere")
    assert identity.check(moved, OUT, ROOT, OURS, 18) is None


def test_check_output_stops_at_any_table_of_another_landing_zone() -> None:
    # each where its name puts it (check_placed)
    states = [
        (OUT / "shop" / "a", replace(STATE, table="shop.a")),
        (OUT / "shop" / "orders", STATE),
    ]
    identity.check_output(states, OUT, ROOT, OURS, 200)
    states.append((OUT / "shop" / "c", replace(STATE, table="shop.c", landing_id=THEIRS)))
    with pytest.raises(IntegrityError, match=r"shop\.c"):
        identity.check_output(states, OUT, ROOT, OURS, 200)


def _manifest(batch: int, landing_id: str | None) -> Manifest:
    data = {"batch": batch, "first_seq": batch, "last_seq": batch, "landing_id": landing_id}
    return Manifest(Path(f"{batch:020d}.json"), data)


def test_landing_id_of_the_manifests() -> None:
    assert landing_id_of([]) is None
    assert landing_id_of([_manifest(1, None), _manifest(2, None)]) is None
    assert landing_id_of([_manifest(1, None), _manifest(2, OURS), _manifest(3, OURS)]) == OURS
    with pytest.raises(IntegrityError, match=f"{THEIRS}.*{OURS}"):
        landing_id_of([_manifest(1, OURS), _manifest(2, THEIRS)])
    with pytest.raises(IntegrityError, match="written before ids"):
        landing_id_of([_manifest(1, OURS), _manifest(2, None)])


def test_check_output_stops_at_a_table_left_where_an_older_escaping_put_it() -> None:
    # "shop.a:b" lives at shop/a~3Ab now; before ":" was escaped it was built at shop/a:b
    placed = replace(STATE, table="shop.a:b")
    identity.check_output([(OUT / "shop" / "a~3Ab", placed)], OUT, ROOT, OURS, 200)
    with pytest.raises(IntegrityError, match=r"shop\.a:b is at shop/a:b, .* shop/a~3Ab now"):
        identity.check_output([(OUT / "shop" / "a:b", placed)], OUT, ROOT, OURS, 200)
    tombstone = replace(placed, gone="removed")  # nothing a reader sees: left alone
    identity.check_output([(OUT / "shop" / "a:b", tombstone)], OUT, ROOT, OURS, 200)


def test_an_output_must_hold_the_landing_zones_own_batches(tmp_path: Path) -> None:
    """A landing zone restored from an older backup lands its later batches again under the
    same numbers: an output holding the first ones stops, by number while the landing zone
    ends before them, by mark once it has landed another batch of that number."""
    items = table("shop.items", int_col(0, "id"), key=[0])
    root = tmp_path / "landing"
    zone = Zone(root)
    for n in range(1, 3):
        zone.commit([(items, "c", (n,))])
    backup = tmp_path / "backup"
    shutil.copytree(root, backup)
    zone.commit([(items, "c", (3,)), (items, "c", (4,))])
    landing = Landing.read(root)
    mark = landing.mark(3)
    assert mark is not None and landing.mark(4) is None and landing.mark(0) is None
    assert len({landing.mark(n) for n in (1, 2, 3)}) == 3
    landing.check_applied("shop.items", "out/shop/items", 3, mark, refresh=False)
    landing.check_applied("shop.items", "out/shop/items", 2, landing.mark(2), refresh=False)
    shutil.rmtree(root)
    shutil.copytree(backup, root)
    restored = Landing.read(root)
    with pytest.raises(IntegrityError, match=r"up to 3, but the landing zone .* ends at batch 2"):
        restored.check_applied("shop.items", "out/shop/items", 3, mark, refresh=False)
    Zone(root).commit([(items, "c", (3,))])  # batch 3 again, of other transactions
    relanded = Landing.read(root)
    assert relanded.mark(3) != mark
    with pytest.raises(IntegrityError, match=r"holds another batch 3 \(its _seq range") as e:
        relanded.check_applied("shop.items", "out/shop/items", 3, mark, refresh=False)
    assert e.value.exit_code == 4 and "--full-refresh" in str(e.value.hint)
    # a state of an older materialize (no mark): the number alone; a full refresh: no check
    relanded.check_applied("shop.items", "out/shop/items", 3, None, refresh=False)
    relanded.check_applied("shop.items", "out/shop/items", 3, mark, refresh=True)
    restored.check_applied("shop.items", "out/shop/items", 3, mark, refresh=True)
