"""A layer of one's own fed integer or bool values: which TypeErrors a Network blames on that
feed ("input 'mask' holds int64 values ... feed float arrays") and which are the layer's own."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers.base import Layer, LayerTypeError
from distconv.layers.inputs import values_of
from distconv.network import NetworkError


def _mask_blamed(layer: Layer, cause: str) -> None:
    """``layer`` fed float ``x``, integer ``labels`` and, after them, a bool ``mask`` is
    refused naming the mask, numpy's error (holding ``cause``) chained."""
    net = Network()
    net.add("masked", layer, inputs=["x", "labels", "mask"])
    feeds = {
        "x": Arg(np.ones((4, 3))),
        "labels": Arg(np.ones((4, 3), np.int64)),
        "mask": Arg(np.ones((4, 3), bool)),
    }
    with pytest.raises(NetworkError, match=r"input 'mask' holds bool values") as e:
        net.forward(feeds)
    assert cause in str(e.value.__cause__)


class MaskReturnsArg(Layer):
    """Takes an integer mask as values (its own choice) and returns its output wrapped."""

    num_inputs = 2

    def _forward(self, x, mask):
        return Arg(x.value * mask.value)


def broadcast_rows(x, mask):
    """A helper of one's own, named as numpy's are (a call with one argument too many)."""
    return x * mask


class CallsWrongly(MaskReturnsArg):
    """Its forward makes a TypeError of its own, in words that hold "cast" inside a word."""

    def __init__(self, mistake: str) -> None:
        super().__init__()
        self.mistake = mistake

    def _forward(self, x, mask):
        if self.mistake == "numpy's broadcast_to":
            return np.broadcast_to(x.value)  # "broadcast_to() missing 1 required ... 'shape'"
        return broadcast_rows(x.value, mask.value, 1)  # "broadcast_rows() takes 2 positional"


@pytest.mark.parametrize("mistake", ["numpy's broadcast_to", "a helper named broadcast_rows"])
def test_a_layer_s_own_type_error_naming_a_broadcast_is_not_blamed_on_its_integer_feed(mistake):
    """abeba7d6 and d6021e7d took a TypeError as numpy's casting error where "cast" was in its
    words: "broadcast" holds it, so the layer's own "broadcast_to() missing 1 required
    positional argument: 'shape'" was told "input 'mask' holds int64 values ... feed float
    arrays", the real error left as the cause."""
    net = Network()
    net.add("masked", CallsWrongly(mistake), inputs=["x", "mask"])
    feeds = {"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^broadcast_\w+\(\) (missing 1|takes 2)") as e:
        net.forward(feeds)
    assert type(e.value) is TypeError, "the layer's own error passes as it is"


class NegatesMask(MaskReturnsArg):
    """Takes integer labels and a bool mask as values, and negates the mask, which numpy
    refuses for bool values ("The numpy boolean negative, the `-` operator, ...")."""

    num_inputs = 3

    def _forward(self, x, labels, mask):
        return x.value * -mask.value + labels.value


def test_numpy_s_refusal_of_bool_arithmetic_is_blamed_on_the_bool_feed_not_an_integer_one():
    """abeba7d6 blamed numpy's bool refusal on the first feed holding integer or bool values:
    with integer labels wired before the bool mask, "input 'labels' holds int64 values", a
    feed numpy never refused."""
    _mask_blamed(NegatesMask(), cause="boolean negative")


class TanhOfTheArg(MaskReturnsArg):
    """Its forward takes np.tanh of the Arg, not of its values: numpy's "loop of ufunc does
    not support argument 0 of type Arg which has no callable tanh method"."""

    def _forward(self, x, mask):
        return np.tanh(x) * mask.value


def test_a_ufunc_given_an_arg_is_the_layer_s_own_error_not_its_integer_feed_s():
    """0f4ccf93 took "ufunc" for a casting word: a forgotten .value, numpy's "loop of ufunc
    does not support argument 0 of type Arg", was told "input 'mask' holds int64 values ...
    feed float arrays", a feed numpy never refused."""
    net = Network()
    net.add("masked", TanhOfTheArg(), inputs=["x", "mask"])
    feeds = {"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^loop of ufunc does not support argument 0 of type Arg"):
        net.forward(feeds)


class ScalesMaskInPlace(NegatesMask):
    """Takes integer labels and a bool mask as values, and scales the mask in place, which
    numpy refuses: "Cannot cast ufunc 'multiply' output from dtype('float64') to
    dtype('bool') ..."."""

    def _forward(self, x, labels, mask):
        keep = mask.value
        keep *= 0.5
        return x.value * keep + labels.value


def test_numpy_s_casting_error_blames_the_feed_whose_dtype_it_names():
    """A casting error was blamed on the first feed of integer or bool values: with integer
    labels wired before the bool mask numpy named, "input 'labels' holds int64 values", a
    feed numpy never refused."""
    _mask_blamed(ScalesMaskInPlace(), cause="to dtype('bool')")


def test_a_forward_that_returns_no_array_is_not_blamed_on_an_integer_input(rng):
    """A Network turned any TypeError of a layer fed integer values into "input 'mask' holds
    int64 values ... feed float arrays": the layer's own mistake was blamed on its feed."""
    net = Network()
    net.add("masked", MaskReturnsArg(), inputs=["x", "mask"])
    feeds = {"x": Arg(rng.standard_normal((4, 3))), "mask": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(LayerTypeError, match=r"^MaskReturnsArg 'masked': _forward returned Arg"):
        net.forward(feeds)


class MaskTypo(MaskReturnsArg):
    """Takes an integer mask as values, its own code failing with a TypeError of its own."""

    def _forward(self, x, mask):
        return x.value * mask.value * len(mask.value.shape[0])


def test_a_layer_s_own_type_error_is_not_blamed_on_an_integer_input(rng):
    """34db94b2 let one such error through (a _forward returning no array), but any other
    TypeError of the layer's own, here "object of type 'int' has no len()", was still told
    "input 'mask' holds int64 values ... feed float arrays"; numpy's casting error still is."""
    net = Network()
    net.add("masked", MaskTypo(), inputs=["x", "mask"])
    feeds = {"x": Arg(rng.standard_normal((4, 3))), "mask": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^object of type 'int' has no len\(\)$"):
        net.forward(feeds)

    class Halves(MaskReturnsArg):
        def _forward(self, x, mask):
            mask.value *= 0.5  # numpy: "Cannot cast ufunc 'multiply' output ... to int64"
            return x.value * mask.value

    net = Network()
    net.add("halves", Halves(), inputs=["x", "mask"])
    with pytest.raises(NetworkError, match=r"input 'mask' holds int64 values"):
        net.forward(feeds)


class MaskNegated(MaskReturnsArg):
    """Masks with the negated mask, which numpy refuses for bool values with a TypeError whose
    words are neither "cast" nor "ufunc"."""

    def _forward(self, x, mask):
        return x.value * -mask.value  # "The numpy boolean negative, the `-` operator, is not ..."


def test_numpy_s_refusal_of_bool_arithmetic_is_still_blamed_on_the_bool_feed(rng):
    """d6021e7d kept only casting errors ("cast", "ufunc") for the feed: numpy's bool refusals
    ("numpy boolean subtract", "... boolean negative") passed bare, no longer naming the bool
    feed that caused them, as they did before."""
    net = Network()
    net.add("masked", MaskNegated(), inputs=["x", "mask"])
    feeds = {"x": Arg(rng.standard_normal((4, 3))), "mask": Arg(np.ones((4, 3), bool))}
    with pytest.raises(NetworkError, match=r"input 'mask' holds bool values") as e:
        net.forward(feeds)
    assert "boolean negative" in str(e.value.__cause__)


def test_cupy_s_casting_error_is_still_blamed_on_the_integer_feed():
    """cupy refuses a float result into an integer array in its own words, "output (typecode
    'd') could not be coerced to provided output parameter (typecode 'l') according to the
    casting rule "same_kind"" (cupy/_core/_kernel.pyx): "cast" inside "casting" matched
    before 0f4ccf93, no whole word does, and on the GPU the integer mask went unnamed."""
    from distconv.layers.feed_errors import feed_to_blame

    refusal = TypeError(
        "output (typecode 'd') could not be coerced to provided output parameter (typecode "
        "'l') according to the casting rule \"same_kind\""
    )
    args = [Arg(np.ones((4, 3))), Arg(np.ones((4, 3), np.int64))]
    assert feed_to_blame(refusal, ["x", "mask"], args) == ("mask", np.dtype(np.int64))


class AddsLabelsIntoMask(NegatesMask):
    """Adds the integer labels into the bool mask in place: numpy refuses the mask, "Cannot
    cast ufunc 'add' output from dtype('int64') to dtype('bool')", naming the labels' dtype
    as the source it could not write."""

    def _forward(self, x, labels, mask):
        keep = mask.value
        keep += labels.value
        return x.value * keep


def test_a_ufunc_s_output_cast_blames_the_feed_written_not_the_source_numpy_names():
    """9abd5a9a blamed the first feed whose dtype numpy's words held, either of the two: the
    labels, the source of "output from dtype('int64') to dtype('bool')", were told "input
    'labels' holds int64 values", though the bool mask written in place was refused."""
    _mask_blamed(AddsLabelsIntoMask(), cause="from dtype('int64') to dtype('bool')")


class TakesAtFloatRows(MaskReturnsArg):
    """Picks rows of its float input at float positions, its own mistake: numpy's "Cannot cast
    array data from dtype('float64') to dtype('int64')", whatever integer feed is beside it."""

    def _forward(self, x, mask):
        return np.take(x.value, np.zeros(len(mask.value))) * mask.value


@pytest.mark.parametrize("ints", [np.int64, np.int32, np.uint8])
def test_float_indices_cast_to_integers_are_the_layer_s_own_error_not_its_integer_feed_s(ints):
    """A float cast to an integer of numpy's own choosing (np.take's indices) was blamed on the
    int64 feed numpy's words named, or, for an int32 or uint8 one they did not, on the first
    integer feed: "input 'mask' holds int32 values ... feed float arrays", advice that cannot
    help, the layer's own float indices left as the cause."""
    net = Network()
    net.add("taken", TakesAtFloatRows(), inputs=["x", "mask"])
    feeds = {"x": Arg(np.ones((4, 3))), "mask": Arg(np.ones((4, 1), ints))}
    with pytest.raises(TypeError, match=r"^Cannot cast array data from dtype\('float64'\)") as e:
        net.forward(feeds)
    assert type(e.value) is TypeError, "the layer's own error passes as it is"


@pytest.mark.parametrize(
    "refusal, blamed",
    [
        (
            "Cannot cast ufunc 'add' output from dtype('float64') to dtype('int32') with casting "
            "rule 'same_kind'",
            "small",
        ),
        (
            "Cannot cast ufunc 'add' output from dtype('float64') to dtype('int64') with casting "
            "rule 'same_kind'",
            "large",
        ),
        (
            "Cannot cast ufunc 'add' input 0 from dtype('int64') to dtype('float32') with casting "
            "rule 'safe'",
            "large",
        ),
        (
            "Cannot cast array data from dtype('int32') to dtype('float16') according to the rule "
            "'safe'",
            "small",
        ),
        (
            "Cannot cast ufunc 'add' output from dtype('float64') to dtype('float32') with casting "
            "rule 'no'",
            None,
        ),
        (
            "Cannot cast ufunc 'add' input 0 from dtype('float64') to dtype('int64') with casting "
            "rule 'same_kind'",
            None,
        ),
        (
            "output (typecode 'd') could not be coerced to provided output parameter (typecode "
            "'i') according to the casting rule \"same_kind\"",
            "small",
        ),
        (
            "output (typecode 'd') could not be coerced to provided output parameter (typecode "
            "'q') according to the casting rule \"same_kind\"",
            "large",
        ),
    ],
)
def test_feeds_of_several_integer_dtypes_the_refused_one_is_blamed(refusal, blamed):
    """With int32 and int64 feeds both wired, the one numpy refused is blamed (the target an
    output was written into, or the source cast to a float), and none where numpy refused
    neither: a float32 output, a float cast to an integer of the layer's own choosing."""
    from distconv.layers.feed_errors import feed_to_blame

    args = [
        Arg(np.ones(3)),
        Arg(np.ones(3, np.int32)),
        Arg(np.ones(3, np.int64)),
    ]
    found = feed_to_blame(TypeError(refusal), ["x", "small", "large"], args)
    assert (found and found[0]) == blamed


class ScalesByLabels(Layer):
    """Takes integer labels as values (its own choice) and refuses integer rows as
    values_of does, "expected float values, got int32 values"."""

    num_inputs = 2

    def _forward(self, labels, x):
        return values_of(self, x) * labels.value


def test_a_layer_s_refusal_blames_the_integer_feed_it_refused_not_the_first_one():
    """A LayerTypeError was blamed on the first feed of integer values, though it names the
    one refused: int32 rows wired after int64 labels the layer takes as values were told
    "input 'labels' holds int64 values", a feed the layer never refused."""
    net = Network()
    net.add("scaled", ScalesByLabels(), inputs=["labels", "x"])
    feeds = {"labels": Arg(np.ones((4, 1), np.int64)), "x": Arg(np.ones((4, 3), np.int32))}
    with pytest.raises(NetworkError, match=r"input 'x' holds int32 values") as e:
        net.forward(feeds)
    assert "got int32 values" in str(e.value.__cause__)


@pytest.mark.parametrize(
    "words, blamed",
    [
        # CuPy 12-14, cupy/_core/_dtype.pyx _raise_if_invalid_cast("output operand"): "operand"
        # stands between "output" and "from", and the output cast was read as an input's
        (
            "Cannot cast output operand from dtype('float64') to dtype('int64') according to "
            "the rule 'same_kind'",
            ("mask", np.dtype(np.int64)),
        ),
        # CuPy 13, cupy/_core/_routines_math.pyx: "cupy boolean", never numpy's words
        (
            "The cupy boolean negative, the `-` operator, is not supported, use the `~` "
            "operator or the logical_not function instead.",
            ("flags", np.dtype(bool)),
        ),
        (
            "cupy boolean subtract, the `-` operator, is deprecated, use the bitwise_xor, the "
            "`^` operator, or the logical_xor function instead.",
            ("flags", np.dtype(bool)),
        ),
    ],
)
def test_cupy_13_s_refusals_are_blamed_on_the_feed_they_refused(words, blamed):
    """The supported CuPy words these refusals otherwise than CuPy 11 and numpy did: on the GPU
    the integer or bool feed went unnamed, the bare TypeError passing up."""
    from distconv.layers.feed_errors import feed_to_blame

    args = [Arg(np.ones((4, 3))), Arg(np.ones((4, 3), np.int64)), Arg(np.ones((4, 3), bool))]
    assert feed_to_blame(TypeError(words), ["x", "mask", "flags"], args) == blamed
