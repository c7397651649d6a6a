"""``materialize --format delta`` refuses a landing zone whose checkpoint names a batch above
the newest manifest (the newest manifests removed), rather than building without those
batches' rows: exit 4, the output left as it was (``landed.checkpointed``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from replicator.cli import main
from replicator.delta.materialize import materialize_delta
from replicator.errors import IntegrityError
from tests.delta.test_lifecycle import ITEMS, outputs
from tests.spark.zone import Zone

pytestmark = pytest.mark.delta

AHEAD = "names batch 3, but the last manifest is batch 2"


def test_a_checkpoint_beyond_the_newest_manifest_is_refused(tmp_path: Path) -> None:
    zone = Zone(tmp_path / "landing")
    for batch in range(1, 4):
        zone.commit([(ITEMS, "c", (batch, "x"))])
    out = tmp_path / "out"
    materialize_delta(zone.root, out)
    built = outputs(out)
    assert len(built["shop.items"]) == 3
    (zone.root / "_manifests" / f"{3:020d}.json").unlink()

    fresh = tmp_path / "fresh"
    result = CliRunner().invoke(
        main, ["materialize", "--format", "delta", "--landing", str(zone.root), "--out", str(fresh)]
    )
    assert result.exit_code == IntegrityError.exit_code, result.output
    assert AHEAD in result.output
    with pytest.raises(IntegrityError, match=AHEAD):  # an incremental run
        materialize_delta(zone.root, out)
    assert outputs(out) == built
