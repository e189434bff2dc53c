"""The gradient checks hold a layer's sparse-table rows to what a parameter server trusts: the
rows its backward wrote are among those it noted (``note_rows``), and those noted (else
written) among those its ``rows_read`` reports. A layer noting fewer rows than it writes
passed every check a contributor runs, and on shards the rows it left out never trained."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad, check_network_grad
from tests.layers.bag_layer import Bag, bag_feeds, bag_net

#: three bags of two ids: rows 1, 2 and 3 in the first column, 7, 8 and 9 in the second
IDS = [[1, 7], [2, 8], [3, 9]]


def _check_layer(**bag) -> None:
    check_layer_grad(Bag(10, 2, **bag), [Arg(ids=np.array(IDS))])


def _check_network(**bag) -> None:
    check_network_grad(bag_net(**bag), bag_feeds(IDS), loss="loss")


CHECKS = pytest.mark.parametrize("check", [_check_layer, _check_network])


@CHECKS
@pytest.mark.parametrize("note", ["all", "none"])
def test_a_layer_noting_what_it_writes_or_nothing_passes(check, note):
    check(note=note)


@CHECKS
def test_rows_written_but_not_noted_are_named(check):
    with pytest.raises(AssertionError, match=r"table: its backward wrote rows \[7, 8, 9\] "):
        check(note="first")


@CHECKS
@pytest.mark.parametrize("note, how", [("all", "noted as written"), ("none", "written")])
def test_rows_written_but_not_read_are_named(check, note, how):
    with pytest.raises(AssertionError, match=rf"rows \[7, 8, 9\] \(3 in all\) {how} by its"):
        check(note=note, read="first")


@CHECKS
def test_rows_noted_beyond_those_read_are_named(check):
    """Every row noted (as a full product notes), rows 1-3 and 7-9 read."""
    with pytest.raises(AssertionError, match=r"rows \[0, 4, 5, 6\] \(4 in all\) noted as written"):
        check(note="every")
