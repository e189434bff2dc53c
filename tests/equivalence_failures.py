"""What a failed transport check must say: each failing rank, the parameter and a difference
far past rounding (shared by the plain check's tests and the restart variant's)."""

from __future__ import annotations

import re
from collections.abc import Iterable


def assert_names_ranks_and_parameters(said: str, ranks: Iterable[int]) -> None:
    """``said`` (an AssertionError's text from ``assert_matches_local``) names each of
    ``ranks`` of 2 with a parameter of the check's LeNet, its difference over 1e-6, and the
    tolerance and the reference it was compared with."""
    for rank in ranks:
        named = re.search(
            rf"rank {rank} of 2: parameter '(conv|fc)\d\.(weight|bias)' is ([0-9.e-]+) from the "
            r"reference's at \(",
            said,
        )
        assert named, said
        assert float(named[3]) > 1e-6, said  # a wrong step, not a rounding
    assert "tolerance 1e-10" in said and "one process, LocalSync" in said
