import numpy as np
import pytest

from distconv.init import initialize, set_seed
from distconv.layers import Conv2D


def test_msra_has_he_variance():
    set_seed(0)
    w = initialize("msra", (256, 64, 3, 3), fan_in=64 * 9, fan_out=256 * 9, dtype=np.float64)
    assert w.std() == pytest.approx(np.sqrt(2 / (64 * 9)), rel=0.02)
    assert abs(w.mean()) < 0.01 * w.std()


def test_xavier_is_uniform_within_the_glorot_limit():
    set_seed(0)
    w = initialize("xavier", (300, 200), fan_in=200, fan_out=300, dtype=np.float64)
    limit = np.sqrt(6 / 500)
    assert w.max() <= limit and w.min() >= -limit
    assert w.max() > 0.98 * limit and w.min() < -0.98 * limit
    assert w.std() == pytest.approx(limit / np.sqrt(3), rel=0.02)


def test_normal_and_zero():
    set_seed(0)
    assert initialize("normal", (400, 400), 1, 1).std() == pytest.approx(0.01, rel=0.02)
    assert not initialize("zero", (3, 3), 1, 1).any()
    assert initialize("zero", (2,), 1, 1, dtype=np.float64).dtype == np.float64


def test_set_seed_makes_models_reproducible():
    set_seed(7)
    a = Conv2D(3, 4, 3).weight.value
    set_seed(7)
    b = Conv2D(3, 4, 3).weight.value
    c = Conv2D(3, 4, 3).weight.value
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_unknown_initialiser():
    with pytest.raises(ValueError, match="unknown initialiser 'lecun'"):
        initialize("lecun", (2, 2), 1, 1)


def test_ones_and_unit_normal_by_name():
    set_seed(0)
    assert (initialize("ones", (2, 3), 1, 1) == 1).all()
    w = initialize("unit_normal", (300, 300), 1, 1, dtype=np.float64)
    assert w.std() == pytest.approx(1.0, rel=0.02)


@pytest.mark.parametrize(
    "draw,got",
    [
        (lambda shape, fan_in, fan_out, rng: rng.standard_normal(shape[::-1]), r"\(3, 4\)"),
        (lambda shape, fan_in, fan_out, rng: 0.5, r"\(\)"),
    ],
)
def test_an_initialiser_of_the_wrong_shape_is_refused_by_name(draw, got):
    """An (in, out) draw for PyTorch's (out, in) layout, or a constant, became the weight's
    shape: a 0-d weight, or a numpy matmul error at the first forward, far from the cause."""
    from distconv.layers import FullyConnected

    with pytest.raises(ValueError, match=rf"initialiser <lambda> returned .* shape {got}, not "):
        FullyConnected(3, 4, init=draw)
    set_seed(0)  # a function of the right shape is taken as it is
    w = FullyConnected(3, 4, init=lambda shape, fan_in, fan_out, rng: np.full(shape, 0.25))
    assert w.weight.value.shape == (4, 3) and (w.weight.value == 0.25).all()


def _conv(init):
    from distconv.layers import Conv2D

    return Conv2D(3, 4, 3, init=init, name="c")


def _fc(init):
    from distconv.layers import FullyConnected

    return FullyConnected(3, 4, init=init, name="f")


def _mixed(init):
    from distconv.layers import FullMatrixProjection, Mixed

    return Mixed([FullMatrixProjection(3, 4, init=init)], name="m")


@pytest.mark.parametrize(
    "make, named",
    [
        (_conv, "Conv2D 'c': weight"),
        (_fc, "FullyConnected 'f': weight"),
        (_mixed, "Mixed 'm': proj0.weight"),
    ],
)
def test_a_layers_bad_initialiser_names_the_layer_and_the_weight(make, named):
    """Every other argument's error names the layer (bias=, dtype=, kernel_size= ...): an
    unknown init=, or a function's draw of another shape, was a plain ValueError naming
    neither the layer nor which of its weights."""
    from distconv.layers import LayerError

    with pytest.raises(LayerError, match=rf"^{named}: unknown initialiser 'lecun'"):
        make("lecun")
    with pytest.raises(LayerError, match=rf"^{named}: initialiser <lambda> returned"):
        make(lambda shape, fan_in, fan_out, rng: np.zeros(shape[::-1]))


@pytest.mark.parametrize("init", [None, 3, ["msra"]])
def test_an_initialiser_neither_named_nor_callable_names_the_layer_and_the_weight(init):
    """init=None (taken for "the default") or a number was Python's bare
    "'NoneType' object is not callable", a TypeError naming neither the layer nor the weight,
    where an unknown name has been a LayerError naming both."""
    from distconv.layers import FullyConnected, LayerError

    with pytest.raises(LayerError, match=r"^FullyConnected 'f': weight: initialiser must be a "):
        FullyConnected(3, 4, init=init, name="f")
    with pytest.raises(ValueError, match=r"initialiser must be a name, one of \['glorot'"):
        initialize(init, (2, 2), 1, 1)


def test_an_initialisers_own_error_keeps_its_traceback():
    """A function's own ValueError (numpy's "scale < 0" from a sign slip) became the layer's
    message with its cause dropped: the traceback no longer reached the function's line."""
    import traceback

    from distconv.layers import FullyConnected, LayerError

    def slipped(shape, fan_in, fan_out, rng):
        return rng.normal(0.0, -1.0, shape)

    with pytest.raises(LayerError, match=r"^FullyConnected 'f': weight: scale < 0") as caught:
        FullyConnected(3, 4, init=slipped, name="f")
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError) and str(cause) == "scale < 0"
    assert "slipped" in [frame.name for frame in traceback.extract_tb(cause.__traceback__)]
    with pytest.raises(LayerError) as caught:  # a name's error says all there is to say
        FullyConnected(3, 4, init="lecun", name="f")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "init, said",
    [
        (lambda shape: np.zeros(shape), r"takes 1 positional argument but 4 were given"),
        (lambda shape, fan_in, fan_out, rng: {"w": 1}, r"float\(\) argument must be"),
    ],
)
def test_an_initialiser_of_the_wrong_signature_or_result_names_the_layer_and_the_weight(init, said):
    """A function of the wrong signature (``lambda shape: ...``), or one returning no array,
    failed calling it as a bare TypeError naming neither the layer nor the weight, as
    init=None did before 25fcf27. Its own error stays the cause."""
    from distconv.layers import FullyConnected, LayerError

    with pytest.raises(LayerError, match=rf"^FullyConnected 'f': weight: .*{said}") as caught:
        FullyConnected(3, 4, init=init, name="f")
    assert isinstance(caught.value, TypeError) and isinstance(caught.value.__cause__, TypeError)


@pytest.mark.parametrize(
    "draw, dtype, bad",
    [
        (lambda shape, fan_in, fan_out, rng: np.full(shape, np.nan), np.float32, 12),
        (lambda shape, fan_in, fan_out, rng: rng.standard_normal(shape) / 0.0, np.float64, 12),
        (lambda shape, fan_in, fan_out, rng: np.full(shape, 1e6), np.float16, 12),
    ],
)
def test_an_initialiser_drawing_nan_or_infinity_is_refused_naming_the_layer(draw, dtype, bad):
    """A custom init= returning NaN or infinity (a division by a fan, a value past float16's
    range) was taken: the first loss was NaN, said as "lower the learning rate or check the
    data", neither of which was the cause."""
    from distconv.layers import FullyConnected, LayerError

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        with pytest.raises(
            LayerError,
            match=rf"^FullyConnected 'f': weight: initialiser <lambda> returned {bad} NaN or "
            rf"infinite value\(s\) of 12 in {np.dtype(dtype)}",
        ):
            FullyConnected(4, 3, init=draw, dtype=dtype, name="f")
    assert initialize("unit_normal", (4, 3), 4, 3, dtype=np.float16).dtype == np.float16
