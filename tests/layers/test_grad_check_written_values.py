"""check_network_grad names a layer that writes into another layer's output (or a feed), in
its forward or its backward, instead of blaming the weights of the layer whose output it was:
that layer reads its output in backward (a tanh's derivative), so its gradient came out wrong
and the check failed at its weight."""

import re

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.finite_differences import Objective
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.kernels import parallel
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.written_values import copies_of, refuse_written_inputs
from tests.layers.researcher_layers import Scale

F64 = np.float64


class ScaleInPlace(Scale):
    """``Scale``, its forward writing ``x * w + b`` into its input's array."""

    def _forward(self, x):
        v = values_of(self, x)
        v *= self.w.value
        v += self.b.value
        return v


class HalvesItsInput(Scale):
    """``Scale``, its backward halving its input's values once done with them."""

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        self.inputs[0].value *= 0.5


class View(Layer):
    """``y = x``, its output the input's own array (no copy), its backward right."""

    def _forward(self, x):
        return x.value

    def _backward(self, dz, callback):
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz


class ScalesItsGradient(Scale):
    """``Scale``, its backward multiplying the gradient it is handed in place: right, as
    nothing reads that gradient after it."""

    def _backward(self, dz, callback):
        x = self.inputs[0]
        self.w.grad += (dz * x.value).sum(0)
        self.b.grad += dz.sum(0)
        dz *= self.w.value
        if x.needs_grad:
            x.grad += dz
        self.w.inc_update(callback)
        self.b.inc_update(callback)


def network(own: Layer, *, on_feed: bool = False, view: bool = False) -> Network:
    """``own`` over a tanh FC of 4 to 3 (or on the feed ``x``, 3 wide), under an FC to 1 and a
    squared error; with ``view``, a :class:`View` of the tanh FC between."""
    net = Network()
    below = "x"
    if not on_feed:
        net.add("act", FullyConnected(3, 3, act="tanh", dtype=F64), "x")
        below = "act"
    if view:
        net.add("view", View(), below)
        below = "view"
    net.add("own", own, below)
    net.add("fc", FullyConnected(3, 1, dtype=F64), "own")
    net.add("loss", MSELoss(), ["fc", "target"])
    own.w.value[...] = [0.5, 2.0, -1.5]
    own.b.value[...] = [0.1, -0.2, 0.3]
    return net


def feeds(rng) -> dict:
    return {"x": Arg(rng.standard_normal((5, 3))), "target": Arg(rng.standard_normal((5, 1)))}


def refusal(net: Network, rng) -> str:
    with pytest.raises(AssertionError) as refused:
        check_network_grad(net, feeds(rng), loss="loss")
    return str(refused.value)


def test_a_forward_writing_into_the_output_below_names_it_not_the_weight_below(rng):
    said = refusal(network(ScaleInPlace(3)), rng)
    assert said.startswith(
        "network (loss 'loss'): the forward of ScaleInPlace 'own' wrote into the output of "
        "FullyConnected 'act' after it was made; a layer must not write into its inputs' values"
    ), said
    assert "act.weight" not in said


def test_a_write_through_a_view_names_the_writer_and_each_output_it_changed(rng):
    said = refusal(network(ScaleInPlace(3), view=True), rng)
    assert re.match(
        r"network \(loss 'loss'\): the forward of ScaleInPlace 'own' wrote into the output of "
        r"FullyConnected 'act' and the output of View 'view' after",
        said,
    ), said


def test_a_forward_writing_into_a_feed_names_the_feed(rng):
    said = refusal(network(ScaleInPlace(3), on_feed=True), rng)
    assert said.startswith(
        "network (loss 'loss'): the forward of ScaleInPlace 'own' wrote into feed 'x'; "
    ), said
    assert said.endswith("Each later forward reads the changed feed")


def test_a_backward_writing_into_its_input_names_it_not_the_weight_below(rng):
    said = refusal(network(HalvesItsInput(3)), rng)
    assert said.startswith(
        "network (loss 'loss'): the backward of HalvesItsInput 'own' wrote into the output of "
        "FullyConnected 'act', which it reads; a layer must not write into its inputs' values"
    ), said
    assert "act.weight" not in said


def test_the_feeds_and_parameters_given_are_left_as_they_were_and_right_layers_pass(rng):
    """A backward that scales the gradient it was handed in place is right (nothing reads it
    after), and passes, to 1e-6; the check's copies of the feeds are its own."""
    given = feeds(rng)
    x = given["x"].value.copy()
    net = network(ScalesItsGradient(3))
    weights = {p.name: p.value.copy() for p in net.parameters()}
    assert check_network_grad(net, given, loss="loss", inputs=True).worst < 1e-6
    np.testing.assert_array_equal(given["x"].value, x)
    for p in net.parameters():
        np.testing.assert_array_equal(p.value, weights[p.name])
    with pytest.raises(AssertionError, match="wrote into feed 'x'"):  # the feed given as it was
        check_network_grad(network(ScaleInPlace(3), on_feed=True), given, loss="loss")
    np.testing.assert_array_equal(given["x"].value, x)


@pytest.mark.parametrize("kind, when", [(ScaleInPlace, "forward"), (HalvesItsInput, "backward")])
def test_the_layer_check_names_a_write_into_its_input_and_puts_the_input_back(kind, when, rng):
    """Alone, such a layer was told that its own weight's gradient was off by half, and the
    caller's input was left changed."""
    layer = kind(3)
    layer.w.value[...] = [0.5, 2.0, -1.5]
    x = rng.standard_normal((5, 3))
    given = Arg(x.copy())
    with pytest.raises(AssertionError) as refused:
        check_layer_grad(layer, [given])
    assert str(refused.value) == (
        f"{kind.__name__}: its {when} wrote into input 0; a layer must not write into its "
        "inputs' values (v = x.value; v *= g): compute a new array (x.value * g)"
    )
    np.testing.assert_array_equal(given.value, x)


def test_a_write_that_changes_nothing_at_the_start_still_leaves_the_input_as_it_was(rng):
    """With weights of 1 and biases of 0 the forward writes back the values it read, which no
    comparison at the starting point tells; the finite differences then do not pass (the writes
    at the moved weights stay in the input: off, or one-sided slopes that part like a kink's,
    refused), and the caller's input is put back all the same."""
    x = rng.standard_normal((5, 3))
    given = Arg(x.copy())
    with pytest.raises((AssertionError, ValueError), match=r"param ScaleInPlace\.w"):
        check_layer_grad(ScaleInPlace(3), [given])
    np.testing.assert_array_equal(given.value, x)


class ReluScale(Scale):
    """``Scale`` of ``relu(x)``, the ReLU taken in place in its input's array: a write that
    gives the same values at each forward after the first."""

    def _forward(self, x):
        v = values_of(self, x)
        np.maximum(v, 0, out=v)
        return v * self.w.value + self.b.value


def test_a_write_giving_the_same_values_again_is_refused_from_the_first_forward(rng):
    """The check's first forwards had written into the input before it was copied, and the
    later ones wrote what was there: the layer check said that the input's gradient was off,
    the network check passed or blamed the feed's gradient."""
    layer = ReluScale(3)
    layer.w.value[...] = [0.5, 2.0, -1.5]
    x = rng.standard_normal((5, 3))
    given = Arg(x.copy())
    with pytest.raises(AssertionError, match=r"^ReluScale: its forward wrote into input 0; "):
        check_layer_grad(layer, [given])
    np.testing.assert_array_equal(given.value, x)
    for inputs in (False, True):
        with pytest.raises(AssertionError) as refused:
            check_network_grad(network(ReluScale(3), on_feed=True), feeds(rng), inputs=inputs)
        assert str(refused.value).startswith(
            "network (loss 'loss'): the forward of ReluScale 'own' wrote into feed 'x'; "
        ), refused.value


class ClipsIds(Layer):
    """``x * (1 + ids % 2)``, its forward clipping the ids it reads (or the integer values) to
    [0, 1] in place."""

    num_inputs = 2

    def _forward(self, x, chosen):
        ids = chosen.value if chosen.ids is None else chosen.ids
        np.clip(ids, 0, 1, out=ids)
        self.m = (1 + ids % 2)[:, None].astype(F64)
        return values_of(self, x) * self.m

    def _backward(self, dz, callback):
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz * self.m


@pytest.mark.parametrize("as_arg", [True, False])
def test_a_write_into_integer_ids_leaves_the_callers_feed_as_it_was(as_arg, rng):
    """The check copied the float feeds alone: ids, or an integer array given as a feed, were
    the caller's own, and a layer writing into them changed the caller's data."""
    net = Network()
    net.add("act", FullyConnected(3, 3, act="tanh", dtype=F64), "x")
    net.add("own", ClipsIds(), ["act", "chosen"])
    net.add("fc", FullyConnected(3, 1, dtype=F64), "own")
    net.add("loss", MSELoss(), ["fc", "target"])
    ids = np.array([0, 3, 1, 2, 5])
    given = feeds(rng) | {"chosen": Arg(ids=ids.copy()) if as_arg else ids.copy()}
    with pytest.raises(
        AssertionError, match="the forward of ClipsIds 'own' wrote into feed 'chosen'"
    ):
        check_network_grad(net, given)
    np.testing.assert_array_equal(given["chosen"].ids if as_arg else given["chosen"], ids)


class ZeroesItsOutput(Scale):
    """``Scale``, its backward zeroing its own output once done: no layer reads it after (its
    readers' backward ran before), so it is harmless."""

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        self.output.value[...] = 0.0


def test_a_backward_is_named_by_what_it_wrote_not_by_what_it_reads(rng):
    """The backward's writer was taken to be every layer that reads a changed output: the View
    that only handed it on was named beside the layer that wrote, and a layer zeroing its own
    output in its backward, harmless, was refused naming the innocent FC that reads it."""
    said = refusal(network(HalvesItsInput(3), view=True), rng)
    assert said.startswith(
        "network (loss 'loss'): the backward of HalvesItsInput 'own' wrote into the output of "
        "FullyConnected 'act' and the output of View 'view', which it reads; "
    ), said
    assert check_network_grad(network(ZeroesItsOutput(3)), feeds(rng)).worst < 1e-6


class CountsBackwards(Scale):
    """``Scale``, counting its backward passes."""

    backwards = 0

    def _backward(self, dz, callback):
        self.backwards += 1
        super()._backward(dz, callback)


def test_the_layer_check_s_probe_costs_one_backward(rng):
    """It ran a second backward after the comparison that follows the first, comparing
    nothing after it: a backward more per check, the layer's slowest part."""
    layer, given = CountsBackwards(3), Arg(rng.standard_normal((5, 3)))
    copies = copies_of([given])
    obj = Objective(layer, [given], rng)
    refuse_written_inputs(obj, copies)
    assert layer.backwards == 1


class TrimsByRebinding(Scale):
    """``Scale`` of 2 features, trimming its 3-wide input by rebinding the Arg's value."""

    def _forward(self, x):
        if x.value.shape[1] == 3:
            x.value = x.value[:, :2]
        return super()._forward(x)


def test_an_input_whose_value_was_rebound_gets_its_own_array_back(rng):
    """The inputs were put back by writing the copies into whatever array each Arg held at
    the end: a value rebound to another shape raised numpy's broadcast error there, in place of
    the check's refusal, and the caller's Arg kept the layer's array."""
    x = rng.standard_normal((5, 3))
    given = Arg(x.copy())
    original = given.value
    with pytest.raises(AssertionError, match=r"^TrimsByRebinding: its forward wrote into input 0"):
        check_layer_grad(TrimsByRebinding(2), [given])
    assert given.value is original
    np.testing.assert_array_equal(original, x)


def test_a_feed_whose_value_was_rebound_is_refused_naming_the_layer(rng):
    """The network check's probes put its own feeds back before each forward by writing into
    the array each Arg held: a feed rebound to another shape raised numpy's broadcast error."""
    net = Network()
    net.add("own", TrimsByRebinding(2), "x")
    net.add("fc", FullyConnected(2, 1, dtype=F64), "own")
    net.add("loss", MSELoss(), ["fc", "target"])
    given = feeds(rng)
    with pytest.raises(
        AssertionError, match="the forward of TrimsByRebinding 'own' wrote into feed 'x'; "
    ):
        check_network_grad(net, given)
    assert given["x"].value.shape == (5, 3)


class MovesItsOffsets(Scale):
    """``Scale``, its forward moving its input's sequence offsets in place, not back."""

    def _forward(self, x):
        x.seq_starts -= 1
        return super()._forward(x)


class MovesItsListedOffsets(Scale):
    """``Scale``, its forward moving its input's offsets given as a list, in place."""

    def _forward(self, x):
        x.seq_starts[1] += 1
        return super()._forward(x)


@pytest.mark.parametrize(
    "layer, starts",
    [(MovesItsOffsets, np.array([0, 2, 5])), (MovesItsListedOffsets, [0, 2, 5])],
    ids=["array", "list"],
)
def test_a_write_into_sequence_offsets_is_refused_and_the_callers_are_left_as_given(
    rng, layer, starts
):
    """The checks copied an input's (or a feed's) values and ids, not its ``seq_starts``: a
    layer that wrote into the offsets passed both checks, and left the caller's array moved by
    every forward the checks ran, though the network check says it computes on copies. Offsets
    given as a list were kept as the same object and compared by identity: the caller's
    [0, 2, 5] came back [0, 37, 5]."""
    name = layer.__name__
    x = Arg(rng.standard_normal((5, 3)), seq_starts=starts)
    with pytest.raises(AssertionError, match=rf"^{name}: its forward wrote into input 0"):
        check_layer_grad(layer(3), [x])
    assert x.seq_starts is starts
    np.testing.assert_array_equal(starts, [0, 2, 5])
    net = Network()
    net.add("own", layer(3), "x")
    net.add("fc", FullyConnected(3, 1, dtype=F64), "own")
    net.add("loss", MSELoss(), ["fc", "target"])
    given = feeds(rng)
    given["x"].seq_starts = starts
    with pytest.raises(AssertionError, match=f"the forward of {name} 'own' wrote into"):
        check_network_grad(net, given)
    assert given["x"].seq_starts is starts
    np.testing.assert_array_equal(starts, [0, 2, 5])


class Witness(HalvesItsInput):
    """``HalvesItsInput``, noting what the pass running it set up: in each forward whether
    BLAS is held to one thread; in each backward that, the callback it is handed, the gradient
    its output was given and its weight's count of users."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.forwards: list[bool] = []
        self.backwards: list[tuple] = []

    def _forward(self, x):
        self.forwards.append(parallel._holders > 0)
        return super()._forward(x)

    def _backward(self, dz, callback):
        held, called = parallel._holders > 0, getattr(callback, "__qualname__", None)
        self.backwards.append((held, called, self.output.grad.copy(), self.w.shared_count))
        super()._backward(dz, callback)


def test_the_backward_probe_runs_each_layer_as_the_network_s_backward_does(rng):
    """The probe that finds which layer's backward wrote repeated the preparation of
    Network.backward (counts, cleared gradients, the seed) and ran each layer's backward
    itself: BLAS unheld, the callback not the pass's, and any change to how the network
    prepares a pass not followed. A layer whose writes depend on what the pass sets up was
    seen writing by the network's backward and then not by the probe, which named no layer."""
    own = Witness(3)
    said = refusal(network(own), rng)
    assert said.startswith(
        "network (loss 'loss'): the backward of Witness 'own' wrote into the output of "
        "FullyConnected 'act', which it reads; "
    ), said
    (held, called, grad, users), (p_held, p_called, p_grad, p_users) = own.backwards
    assert (held, called, users) == (True, "Firing.fire", 1)
    assert (p_held, p_called, p_users) == (held, called, users)
    assert np.abs(grad).sum() > 0
    np.testing.assert_array_equal(p_grad, grad)


def test_the_forward_probe_runs_each_layer_as_the_network_s_forward_does(rng):
    """The probes' forward that copies each output as it is made ran each layer's forward
    itself, without the one-BLAS-thread hold of Network.forward, its feed checks or its
    errors: every forward of the check now is the network's own."""
    own = Witness(3)
    refusal(network(own), rng)
    assert own.forwards and all(own.forwards), own.forwards
