"""A set in a setting or a job description is written in one order in every process
(:func:`~distconv.plain_json.plain`), whatever order its hashes give it there."""

from __future__ import annotations

import pytest

from distconv.optim import create_optimizer
from distconv.sync.description import as_sent, sync_scheme
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(10)


class _Seeded(str):
    """A string whose hash is given: what ``PYTHONHASHSEED`` makes of ``"1"``'s in a process."""

    def __new__(cls, text: str, hashed: int) -> _Seeded:
        made = super().__new__(cls, text)
        made.hashed = hashed
        return made

    def __hash__(self) -> int:
        return self.hashed


def test_elements_that_print_alike_are_written_in_one_order_whatever_their_hashes():
    """``1`` and ``"1"`` both print ``1``: sorted by their text, they kept their hash order,
    another in each process, so a resume under the run's own scheme recorded it anew."""
    sets = [frozenset({1, _Seeded("1", hashed)}) for hashed in (0, 2)]  # "1" before 1, after
    assert [list(s) for s in sets] == [["1", 1], [1, "1"]]  # as two processes see them
    schemes = []
    for tags in sets:
        sync = LocalSync(create_optimizer("sgd"))
        sync.overlap = tags
        schemes.append(sync_scheme(sync))
    assert schemes[0] == schemes[1] == {"sync": "local", "overlap": ["1", 1]}
    assert as_sent({"config.tags": sets[0]}) == as_sent({"config.tags": sets[1]})
