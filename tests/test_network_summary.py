"""``repr`` of a Network, as a notebook shows a model: its size, feeds and layers, one a line,
each with its kind, inputs, outputs and parameters, and a few lines still for a model of
thousands of layers. It was ``<distconv.network.Network object at 0x...>``."""

from __future__ import annotations

import re

import pytest

from distconv.layers import FullyConnected, MSELoss
from distconv.models import lenet
from distconv.network import Network, NetworkError
from distconv.network_summary import MOST_CHARS, MOST_LAYERS


def test_lenet_shows_its_layers_in_order_with_their_kinds_outputs_and_parameters():
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 4), hidden=8)
    assert repr(net) == "\n".join(
        [
            "Network(7 layers, 360 parameters; feeds image, label)",
            "  conv1  Conv2D               <- image       4 out   40 parameters",
            "  pool1  MaxPool2D            <- conv1",
            "  conv2  Conv2D               <- pool1       4 out  148 parameters",
            "  pool2  MaxPool2D            <- conv2",
            "  fc1    FullyConnected       <- pool2       8 out  136 parameters",
            "  fc2    FullyConnected       <- fc1         4 out   36 parameters",
            "  loss   SoftmaxCrossEntropy  <- fc2, label",
        ]
    )
    assert sum(p.size for p in net.parameters()) == 360


def _chain(layers, width=3):
    net = Network()
    for i in range(layers):
        net.add(f"fc{i}", FullyConnected(width, width), f"fc{i - 1}" if i else "x")
    return net


def test_a_big_network_shows_its_first_layers_and_counts_the_rest():
    net = _chain(2000)
    lines = repr(net).splitlines()
    assert lines[0] == "Network(2,000 layers, 24,000 parameters; feeds x)"
    assert len(lines) == 1 + MOST_LAYERS + 1
    assert lines[1].split() == ["fc0", "FullyConnected", "<-", "x", "3", "out", "12", "parameters"]
    assert lines[MOST_LAYERS].split()[0] == f"fc{MOST_LAYERS - 1}"
    assert lines[-1] == f"  ({2000 - MOST_LAYERS} more layers)"


def test_a_network_of_exactly_as_many_layers_as_shown_counts_none_more():
    lines = repr(_chain(MOST_LAYERS)).splitlines()
    assert len(lines) == 1 + MOST_LAYERS and "more" not in lines[-1]
    assert repr(_chain(MOST_LAYERS + 1)).splitlines()[-1] == "  (1 more layer)"


def test_a_shared_weight_counts_once_in_the_total_and_beside_each_holder():
    net = Network()
    first = net.add("a", FullyConnected(4, 4, bias=False), "x")
    net.add("b", FullyConnected(4, 4, bias=False, weight=first.weight), "a")
    net.add("loss", MSELoss(), ["b", "target"])
    lines = repr(net).splitlines()
    assert lines[0] == "Network(3 layers, 16 parameters; feeds target, x)"
    assert lines[1].endswith("4 out  16 parameters") and lines[2].endswith("16 parameters")


def test_an_empty_network_and_a_wrong_one_are_shown_not_refused():
    """A notebook shows the model it was just told is wrong: two parameters of one name (a
    layer renamed by another network's add) make ``parameters()`` raise, not the summary."""
    assert repr(Network()) == "Network(0 layers, 0 parameters; feeds none)"
    shared = FullyConnected(4, 3)
    net, other = Network(), Network()
    net.add("fc", shared, "x")
    other.add("g", shared, "x")  # renames shared's weight to g.weight, in net too
    net.add("g", FullyConnected(3, 3), "fc")
    with pytest.raises(NetworkError, match="two different parameters are named 'g.weight'"):
        net.parameters()
    assert repr(net).startswith("Network(2 layers, 27 parameters; feeds x)")


def test_a_layer_put_in_without_add_is_shown_reading_nothing():
    """A script may put a layer into ``layers`` by hand: it has no wiring, and the summary
    raised KeyError for it, hiding the model in a notebook and a traceback's locals."""
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 4), hidden=8)
    net.layers["probe"] = FullyConnected(3, 2)
    lines = repr(net).splitlines()
    assert lines[0] == "Network(8 layers, 368 parameters; feeds image, label)"
    assert lines[-1].split() == "probe FullyConnected <- nothing 2 out 8 parameters".split()


class _Unbuilt(Network):
    def __init__(self):  # no super().__init__(): no layers, no wiring
        pass


class _Broken(FullyConnected):
    def parameters(self):
        raise RuntimeError("a custom layer's own bug")


def test_a_model_no_summary_can_be_made_of_is_shown_by_its_type_and_why():
    assert re.fullmatch(
        r"<_Unbuilt at 0x[0-9a-f]+: no summary \(AttributeError: .*'layers'\)>",
        repr(_Unbuilt()),
    )
    net = Network()
    net.add("fc", FullyConnected(3, 3), "x")
    net.layers["fc"].__class__ = _Broken  # parameters() raises from now on
    assert re.fullmatch(
        r"<Network at 0x[0-9a-f]+: no summary \(RuntimeError: a custom layer's own bug\)>",
        repr(net),
    )


def test_long_names_are_cut_and_kept_on_their_line():
    net = Network()
    net.add("n" * 100_000, FullyConnected(2, 2), "x\n" * 1000)
    lines = repr(net).splitlines()
    assert len(lines) == 2 and all(len(line) < 400 for line in lines)
    assert lines[1].startswith(f"  {'n' * (MOST_CHARS - 3)}...  FullyConnected  <- x x x")
