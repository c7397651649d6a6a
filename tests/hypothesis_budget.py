"""How many examples a property test runs: its share of the loaded Hypothesis profile.

tests/conftest.py registers two profiles: ``ci`` (``CI_EXAMPLES`` examples a test,
derandomized, no deadline; loaded by ``scripts/test.sh`` and wherever ``CI`` is set) and
``dev`` (a tenth of that; the default elsewhere, for a fast inner loop). ``HYPOTHESIS_PROFILE``
or ``--hypothesis-profile`` picks one. A test that needs more or fewer examples than the
others says how many under ``ci``: ``@settings(max_examples=examples(300))`` runs 300 there
and 30 under ``dev``.
"""

from __future__ import annotations

from hypothesis import settings

CI_EXAMPLES = 100  # Hypothesis's own default
DEV_EXAMPLES = 10


def examples(under_ci: int) -> int:
    """``under_ci`` scaled by the loaded profile's ``max_examples`` (at least 1)."""
    return max(1, under_ci * settings().max_examples // CI_EXAMPLES)
