"""A layer shared by two networks is renamed by the second's add; the first keeps its
parameters filed under their old names, so an add there that takes a new name is no longer
refused at add (keeping the names' index up to date costs an add the whole network). The clash
is still refused before any step: ``parameters()``, which setup and the Trainer take, names
both layers and the way out."""

from __future__ import annotations

import pytest

from distconv import Network
from distconv.layers import FullyConnected
from distconv.network import NetworkError


def test_a_name_clash_made_by_another_networks_add_is_refused_at_parameters():
    shared = FullyConnected(4, 3)
    first, second = Network(), Network()
    first.add("fc", shared, "x")
    second.add("g", shared, "x")  # renames shared's weight to g.weight, in first too
    first.add("g", FullyConnected(3, 3), "fc")
    with pytest.raises(NetworkError) as refused:
        first.parameters()
    said = str(refused.value)
    assert said.startswith("two different parameters are named 'g.weight', in layers 'fc' and 'g'")
    assert "rename one, or pass one Parameter to both layers to share it" in said, said
