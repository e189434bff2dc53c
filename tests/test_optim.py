"""Optimizers: parity with torch.optim, in-place state, configs, argument checks."""

from __future__ import annotations

import inspect
import json
import re

import numpy as np
import pytest

from distconv import optim
from distconv.optim import (
    OPTIMIZERS,
    Adam,
    Optimizer,
    create_optimizer,
    optimizer_from_config,
)

# (our name, our hyperparameters, torch class name, torch keyword arguments)
CASES = [
    ("sgd", {"lr": 0.1}, "SGD", {"lr": 0.1}),
    ("sgd", {"lr": 0.1, "weight_decay": 0.01}, "SGD", {"lr": 0.1, "weight_decay": 0.01}),
    ("momentum", {"lr": 0.05, "momentum": 0.9}, "SGD", {"lr": 0.05, "momentum": 0.9}),
    (
        "nesterov",
        {"lr": 0.05, "momentum": 0.8, "weight_decay": 1e-3},
        "SGD",
        {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 1e-3},
    ),
    ("adagrad", {"lr": 0.1}, "Adagrad", {"lr": 0.1}),
    ("rmsprop", {"lr": 0.01, "alpha": 0.9}, "RMSprop", {"lr": 0.01, "alpha": 0.9}),
    ("adam", {"lr": 0.01}, "Adam", {"lr": 0.01}),
    (
        "adam",
        {"lr": 0.002, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6, "weight_decay": 0.1},
        "Adam",
        {"lr": 0.002, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1},
    ),
]


def _grads(steps: int, shape: tuple[int, ...], dtype) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]


def _run_ours(name, hyper, w0, grads):
    opt = create_optimizer(name, **hyper)
    w = w0.copy()
    state = opt.init_state(w)
    for g in grads:
        opt.update(w, g, state)
    return w, state


def _run_torch(cls_name, kwargs, w0, grads):
    torch = pytest.importorskip("torch", reason="torch is needed for the parity tests")
    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    opt = getattr(torch.optim, cls_name)([p], **kwargs)
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
    return p.detach().numpy()


@pytest.mark.parametrize("name,hyper,torch_cls,torch_kw", CASES)
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_matches_torch(name, hyper, torch_cls, torch_kw, dtype, rtol):
    w0 = np.random.default_rng(1).standard_normal((5, 4)).astype(dtype)
    grads = _grads(6, w0.shape, dtype)
    ours, _ = _run_ours(name, hyper, w0, grads)
    theirs = _run_torch(torch_cls, torch_kw, w0, grads)
    assert ours.dtype == dtype
    assert not np.array_equal(ours, w0)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name,hyper,torch_cls,torch_kw", CASES)
def test_300_steps_of_sums_under_a_schedule_match_torch(name, hyper, torch_cls, torch_kw):
    """As a sync drives the rule: sums with ``grad_scale = 1 / examples`` (an uneven last
    batch varies it), the rate scaled each epoch (``scale_lr``), and gradients that are zero in
    some rows or everywhere (a table's unread rows, a step a parameter sat out), over 300 steps,
    in float64: torch, given the averaged gradient and the rate, to rounding."""
    torch = pytest.importorskip("torch", reason="torch is needed for the parity tests")
    rng = np.random.default_rng(12)
    w0 = rng.standard_normal((6, 3))
    opt = create_optimizer(name, **hyper)
    ours, state = w0.copy(), opt.init_state(w0)
    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    theirs = getattr(torch.optim, torch_cls)([p], **torch_kw)
    for t in range(300):
        examples = int(rng.integers(1, 9))
        grad_sum = rng.standard_normal(w0.shape) * examples
        grad_sum[t % 6] = 0  # a row no example read
        if t % 7 == 3:
            grad_sum[:] = 0
        factor = 0.8 ** (t // 50)
        opt.scale_lr(factor)
        theirs.param_groups[0]["lr"] = torch_kw["lr"] * factor
        opt.update(ours, grad_sum, state, grad_scale=1 / examples)
        p.grad = torch.from_numpy(grad_sum / examples)
        theirs.step()
    assert not np.allclose(ours, w0)
    np.testing.assert_allclose(ours, p.detach().numpy(), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), -0.5, "0.5", None, True])
def test_scale_lr_refuses_a_factor_that_is_not_a_finite_rate(factor):
    """SyncStrategy.set_lr_scale refuses these (e007571), but the optimizer's own scale_lr,
    which a loop driving an optimizer by hand calls, took NaN (every weight NaN at the next
    update), a negative factor (uphill) and True (1.0) without a word."""
    opt = create_optimizer("sgd", lr=0.1)
    w = np.ones(3)
    with pytest.raises(
        ValueError, match=r"factor must (satisfy|be a number \() ?0\.0 <= factor\)?, got"
    ):
        opt.scale_lr(factor)
    opt.update(w, np.ones(3), {})
    np.testing.assert_allclose(w, 0.9)  # at the rate it had
    opt.scale_lr(np.float32(0.5))
    assert opt.lr == pytest.approx(0.05)
    opt.scale_lr(0)  # a warm-up's start
    assert opt.lr == 0.0


def test_sgd_step_by_hand():
    w = np.array([1.0, -2.0, 3.0])
    g = np.array([0.5, 0.5, -1.0])
    opt = create_optimizer("sgd", lr=0.1, weight_decay=0.5)
    opt.update(w, g, opt.init_state(w))
    # g + wd * w = [1.0, -0.5, 0.5]
    np.testing.assert_allclose(w, [0.9, -1.95, 2.95])
    np.testing.assert_array_equal(g, [0.5, 0.5, -1.0])  # the gradient is not touched


def test_first_adam_step_moves_every_weight_by_lr():
    # after one step the bias-corrected m/sqrt(v) is sign(g), so each weight moves by ~lr
    w = np.zeros(4, dtype=np.float32)
    g = np.array([3.0, -0.1, 1e-3, -50.0], dtype=np.float32)
    opt = Adam(lr=0.01)
    state = opt.init_state(w)
    opt.update(w, g, state)
    np.testing.assert_allclose(w, -0.01 * np.sign(g), rtol=1e-4)
    assert state["step"].shape == () and int(state["step"]) == 1


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_state_is_arrays_of_the_parameter(name):
    w = np.ones((3, 2), dtype=np.float32)
    state = create_optimizer(name).init_state(w)
    for key, a in state.items():
        assert isinstance(a, np.ndarray), key
        if key != "step":
            assert a.shape == w.shape and a.dtype == w.dtype, key


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_update_on_slices_equals_update_on_whole(name):
    """A parameter-server shard updates slices of a flat parameter; the result must not differ."""
    w = np.random.default_rng(0).standard_normal(10)
    grads = _grads(3, w.shape, np.float64)
    whole, _ = _run_ours(name, {"weight_decay": 0.01}, w, grads)

    opt = create_optimizer(name, weight_decay=0.01)
    sliced = w.copy()
    parts = [slice(0, 4), slice(4, 10)]
    states = [opt.init_state(sliced[s]) for s in parts]
    for g in grads:
        for s, st in zip(parts, states):
            opt.update(sliced[s], g[s], st)
    np.testing.assert_array_equal(sliced, whole)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_scalar_parameter(name):
    """A 0-d parameter (a learned scale) updates like a 1-element one and stays 0-d."""
    opt = create_optimizer(name, lr=0.1, weight_decay=0.01)
    scalar, vector = np.array(2.0), np.array([2.0])
    s_state, v_state = opt.init_state(scalar), opt.init_state(vector)
    for g in (0.5, -1.0, 0.25):
        opt.update(scalar, np.array(g), s_state)
        opt.update(vector, np.array([g]), v_state)
    assert scalar.shape == () and scalar != 2.0
    np.testing.assert_array_equal(scalar.reshape(1), vector)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_config_round_trips_through_json(name):
    opt = create_optimizer(name, lr=0.123)
    cfg = json.loads(json.dumps(opt.config()))
    again = optimizer_from_config(cfg)
    assert type(again) is type(opt)
    assert again.config() == opt.config()
    assert cfg["name"] == name and cfg["lr"] == 0.123


def test_create_optimizer_errors_name_the_problem():
    # a name no one will add (adamw was one, and adding AdamW failed this test)
    with pytest.raises(ValueError, match=r"unknown optimizer 'no-such-rule'.*'adam'"):
        create_optimizer("no-such-rule")
    with pytest.raises(ValueError, match=r"optimizer 'sgd'.*momentum"):
        create_optimizer("sgd", momentum=0.9)
    with pytest.raises(ValueError, match=r"lr must satisfy 0.0 < lr, got -1"):
        create_optimizer("adam", lr=-1)
    with pytest.raises(ValueError, match=r"momentum must satisfy .* < 1.0, got 1.5"):
        create_optimizer("momentum", momentum=1.5)
    with pytest.raises(ValueError, match="beta2"):
        create_optimizer("adam", beta2=float("nan"))
    with pytest.raises(ValueError, match="no 'name'"):
        optimizer_from_config({"lr": 0.1})
    for infinite in ("lr", "weight_decay"):  # a diverging run must not start at all
        with pytest.raises(ValueError, match=f"{infinite} must satisfy.*got inf"):
            create_optimizer("sgd", **{infinite: float("inf")})


#: our name: the torch class, and our hyperparameters by torch's (key, or key and index)
TORCH_KEYS = {
    "sgd": ("SGD", {"lr": "lr"}),
    "momentum": ("SGD", {"lr": "lr", "momentum": "momentum"}),
    "nesterov": ("SGD", {"lr": "lr", "momentum": "momentum"}),
    "adagrad": ("Adagrad", {"lr": "lr", "eps": "eps"}),
    "rmsprop": ("RMSprop", {"lr": "lr", "alpha": "alpha", "eps": "eps"}),
    "adam": ("Adam", {"lr": "lr", "beta1": ("betas", 0), "beta2": ("betas", 1), "eps": "eps"}),
}


def _default(cls, key):
    index = None
    if isinstance(key, tuple):
        key, index = key
    value = inspect.signature(cls.__init__).parameters[key].default
    return value if index is None else value[index]


def test_defaults_unlike_torchs_are_the_ones_the_module_names():
    """The module said the rules have torch's defaults; SGD's lr and Momentum's momentum do
    not. Each default unlike torch 2.x's is named there with torch's, the rest said equal."""
    torch = pytest.importorskip("torch", reason="torch is needed to read its defaults")
    assert sorted(TORCH_KEYS) == sorted(OPTIMIZERS)
    unlike = set()
    for name, (torch_cls, keys) in TORCH_KEYS.items():
        for ours, theirs in keys.items():
            a, b = (
                _default(OPTIMIZERS[name], ours),
                _default(getattr(torch.optim, torch_cls), theirs),
            )
            if float(a) != float(b):
                unlike.add(name)
                for said in (f"``{ours}={a!r}``", f"``{ours}={b!r}``"):
                    assert said in optim.__doc__, (name, said)
    alike = sorted(OPTIMIZERS[name].__name__ for name in OPTIMIZERS if name not in unlike)
    assert f"{', '.join(alike[:-1])} and {alike[-1]} have torch's defaults" in optim.__doc__


def test_names_are_case_insensitive_and_numpy_scalars_accepted():
    opt = create_optimizer("Adam", lr=np.float32(0.5))
    assert opt.name == "adam" and opt.lr == 0.5
    assert isinstance(opt, Optimizer)


def _scaled_runs(name, hyper, dtype, scale, steps=4, start=None):
    """Weights after ``update(w, g, st, grad_scale=scale)`` and after ``update(w, g*scale, st)``.

    The gradients are ``1 / scale`` times larger than usual, as sums over examples are.
    """
    rng = np.random.default_rng(3)
    w0 = rng.standard_normal(4000).astype(dtype) if start is None else start.astype(dtype)
    grads = [(rng.standard_normal(w0.size) / scale).astype(dtype) for _ in range(steps)]
    opt = create_optimizer(name, **hyper)
    folded, scaled = w0.copy(), w0.copy()
    s_folded, s_scaled = opt.init_state(folded), opt.init_state(scaled)
    for g in grads:
        opt.update(folded, g, s_folded, grad_scale=scale)
        opt.update(scaled, g * np.asarray(scale, dtype), s_scaled)
    return w0, folded, scaled


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_grad_scale_equals_a_scaled_gradient(name, dtype, decay):
    """The scale folded into the rule's scalars gives the rule on ``grad * scale`` to rounding.

    The first step from zero is the step itself: a few ulps apart element by element (the
    reference rounds ``grad * scale`` first, the folded rule rounds ``lr * scale``). After
    several steps (moments, weight decay) the weights stay within a few ulps of the largest.
    """
    hyper = {"lr": 0.05, "weight_decay": decay}
    _, first, first_ref = _scaled_runs(name, hyper, dtype, 1 / 7, steps=1, start=np.zeros(4000))
    assert np.abs(first).min() > 0
    np.testing.assert_array_max_ulp(first, first_ref, maxulp=4)
    w0, folded, scaled = _scaled_runs(name, hyper, dtype, 1 / 7)
    assert not np.array_equal(folded, w0)
    worst = np.abs(folded - scaled).max() / np.abs(scaled).max()
    assert worst <= 4 * np.finfo(dtype).eps


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_grad_scale_by_a_power_of_two_is_exact(name):
    """Multiplying by a power of two is exact, so folding it in changes no bit."""
    for dtype in (np.float32, np.float64):
        _, folded, scaled = _scaled_runs(name, {"lr": 0.05, "weight_decay": 0.01}, dtype, 1 / 16)
        np.testing.assert_array_equal(folded, scaled)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_grad_scale_leaves_the_gradient_alone(name):
    grad = np.random.default_rng(5).standard_normal(10)
    kept = grad.copy()
    opt = create_optimizer(name, weight_decay=0.1)
    w = np.ones(10)
    opt.update(w, grad, opt.init_state(w), grad_scale=0.25)
    np.testing.assert_array_equal(grad, kept)


#: scales that change between steps, as an uneven last batch makes them
VARYING_SCALES = (1 / 8, 1 / 8, 1 / 3, 1 / 5)


def _average_then_update(opt, w, state, grads, scales):
    """The reference: the rule on ``grad * scale``, the average formed first."""
    for g, s in zip(grads, scales):
        opt.update(w, g * s, state)


def _sum_grads(n, scales, dtype=np.float64, seed=11):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) / s).astype(dtype) for s in scales]


def _assert_states_close(got, want, rtol):
    assert got.keys() == want.keys()
    for key in want:
        if key == "step":
            np.testing.assert_array_equal(got[key], want[key])
        else:
            np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=0, err_msg=key)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_state_is_kept_in_averaged_units_when_the_scale_varies(name, decay):
    """Folding a changing scale leaves weights AND state as averaging first would.

    A rule that kept, say, momentum's velocity in summed units would agree on the weights for
    one constant scale, but not on its state, and not on the weights once the scale changes.
    """
    opt = create_optimizer(name, lr=0.05, weight_decay=decay)
    grads = _sum_grads(500, VARYING_SCALES)
    w0 = np.random.default_rng(2).standard_normal(500)
    folded, ref = w0.copy(), w0.copy()
    s_folded, s_ref = opt.init_state(folded), opt.init_state(ref)
    for g, s in zip(grads, VARYING_SCALES):
        opt.update(folded, g, s_folded, grad_scale=s)
    _average_then_update(opt, ref, s_ref, grads, VARYING_SCALES)
    assert not np.allclose(ref, w0)
    np.testing.assert_allclose(folded, ref, rtol=1e-12, atol=1e-14)
    _assert_states_close(s_folded, s_ref, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_resuming_from_an_averaged_units_state_continues_identically(name):
    """State written by the old path (the rule on averaged gradients) resumes with the folded
    path as if the old path had gone on: a checkpoint from before the change stays valid."""
    opt = create_optimizer(name, lr=0.05, weight_decay=0.01)
    grads = _sum_grads(500, VARYING_SCALES + VARYING_SCALES[::-1], seed=4)
    scales = VARYING_SCALES + VARYING_SCALES[::-1]
    w = np.random.default_rng(6).standard_normal(500)
    state = opt.init_state(w)
    _average_then_update(opt, w, state, grads[:4], scales[:4])  # the checkpoint
    resumed, s_resumed = w.copy(), {k: v.copy() for k, v in state.items()}
    for g, s in zip(grads[4:], scales[4:]):
        opt.update(resumed, g, s_resumed, grad_scale=s)
    _average_then_update(opt, w, state, grads[4:], scales[4:])
    np.testing.assert_allclose(resumed, w, rtol=1e-12, atol=1e-14)
    _assert_states_close(s_resumed, state, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_float16_parameters_with_a_sum_over_256_ranks(name, decay):
    """16-bit parameters: ``grad_scale = 1 / (256 ranks * 3 examples)`` gives the rule on the
    averaged gradient, as float32 arithmetic computes it, to float16's precision.

    Folded into the rule's scalars, ``(1 - beta2) * s * s`` and the like underflow in float16
    (Adam's ``v`` would stay 0 and the step be tens of times too large), and ``g * g`` of a sum
    overflows; the gradient must be scaled first.
    """
    scale = 1 / (256 * 3)
    hyper = {"lr": 1e-3, "weight_decay": decay}
    if "eps" in OPTIMIZERS[name]().hyper:  # the defaults (1e-8, 1e-10) are 0 in float16
        hyper["eps"] = 1e-3
    rng = np.random.default_rng(8)
    w0 = (0.05 * rng.standard_normal(2000)).astype(np.float16)
    # averaged gradients of magnitude 0.5..1.5: float16 holds g * g, so any error is the scale's
    mean = [rng.choice([-1, 1], w0.size) * rng.uniform(0.5, 1.5, w0.size) for _ in range(4)]
    grads = [(m / scale).astype(np.float16) for m in mean]
    opt = create_optimizer(name, **hyper)
    half, ref = w0.copy(), w0.astype(np.float32)
    s_half, s_ref = opt.init_state(half), opt.init_state(ref)
    half_ref = w0.copy()  # the rule on the averaged gradient, in float16
    s_hr = opt.init_state(half_ref)
    for g in grads:
        opt.update(half, g, s_half, grad_scale=scale)
        opt.update(ref, g.astype(np.float32) * np.float32(scale), s_ref)
        opt.update(half_ref, (g.astype(np.float32) * np.float32(scale)).astype(np.float16), s_hr)
    moved = ref - w0.astype(np.float32)
    assert np.abs(moved).max() > 1e-3
    np.testing.assert_array_equal(half, half_ref)  # scaled first: the average, then the rule
    error = np.abs(half.astype(np.float32) - ref).max()
    assert error <= 0.02 * np.abs(moved).max() + float(np.finfo(np.float16).eps) * 0.2
    for key in s_ref:
        if key != "step":
            want = s_ref[key]
            got = s_half[key].astype(np.float32)
            assert np.isfinite(got).all(), key
            assert np.abs(got - want).max() <= 0.01 * np.abs(want).max(), key


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_eps_that_is_0_in_the_parameters_dtype_is_refused_at_its_state(name):
    """Adam's default eps (1e-8) is 0 in float16: once ``v`` underflowed a step divided by 0,
    and the first epoch ended in "the loss became NaN or infinite"."""
    opt = create_optimizer(name)
    eps = opt.hyper.get("eps")
    if eps is None:  # no denominator: any dtype will do
        assert set(opt.init_state(np.zeros(3, np.float16))) == set(opt.buffers)
        return
    with pytest.raises(ValueError, match=rf"{name}: eps={eps:g} is 0 in float16"):
        opt.init_state(np.zeros(3, np.float16))
    assert set(create_optimizer(name, eps=1e-4).init_state(np.zeros(3, np.float16))) >= set(
        opt.buffers
    )
    opt.init_state(np.zeros(3, np.float32))  # float32 holds it
    opt.init_state(np.zeros(3, np.int64))  # no float: no word on eps (the trainer refuses it)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    opt.init_state(np.zeros(3, ml_dtypes.bfloat16))  # bfloat16 has float32's range


#: each rule's decay of a state buffer: (optimizer, hyperparameter, buffer)
DECAYS = [
    ("momentum", "momentum", "velocity"),
    ("rmsprop", "alpha", "mean_sq"),
    ("adam", "beta1", "m"),
]
#: beta2 = 0.999 changes no bfloat16 value (a relative step under half its ulp) either way
DECAYS_16 = [(*d, dtype) for d in DECAYS for dtype in ("bfloat16", "float16")]
DECAYS_16.append(("adam", "beta2", "v", "float16"))


@pytest.mark.parametrize(("name", "hyper", "buffer", "dtype"), DECAYS_16)
def test_16_bit_state_decays_by_the_hyperparameter_itself(dtype, name, hyper, buffer):
    """A Python float meets a 16-bit array in the array's type (NEP 50; ml_dtypes 0.7 for
    bfloat16), so beta1 = 0.9 became 0.8984 and beta2 = 0.999 became 1.0 before multiplying:
    the default CNN then trained in bfloat16 visibly worse than in float32 (train loss 0.46
    against 0.31 after four epochs, where ml_dtypes 0.5 gave 0.32). The rule now multiplies in
    float32, as PyTorch does, and rounds once into the buffer."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    dtype = np.dtype(dtype)
    opt = OPTIMIZERS[name](lr=1e-3, **({"eps": 1e-4} if name != "momentum" else {}))
    # every 16-bit value in [1, 2): one value alone (1.5 before) rounded the same either way in
    # four of these six cases, so the test passed on the rounded hyperparameters too
    start = np.arange(1.0, 2.0, 2.0 ** -(np.finfo(dtype).nmant)).astype(dtype)
    value = np.ones_like(start)
    state = opt.init_state(value)
    state[buffer][...] = start
    opt.update(value, np.zeros_like(start), state)
    want = (start.astype(np.float32) * np.float32(opt.hyper[hyper])).astype(dtype)
    wrong = np.flatnonzero(state[buffer] != want)
    assert not wrong.size, (start[wrong[:3]], state[buffer][wrong[:3]], want[wrong[:3]])


@pytest.mark.parametrize("name", [None, 5, ["adam"]])
def test_an_optimizer_name_that_is_not_a_string_is_refused_with_the_names(name):
    """create_optimizer(args.optimizer) with the flag unset (None) raised "AttributeError:
    'NoneType' object has no attribute 'lower'"."""
    with pytest.raises(ValueError, match=rf"unknown optimizer {re.escape(repr(name))}; choose"):
        create_optimizer(name)


@pytest.mark.parametrize("name", ["adagrad", "rmsprop", "adam"])
def test_an_eps_of_0_is_refused_not_a_nan_weight_at_a_zero_gradient(name):
    """eps=0 was taken, though init_state refuses an eps that is 0 in float16 for the very
    reason: a weight whose gradient is 0 (a dead unit) divided 0 by 0 and became NaN at the
    first step, without a word."""
    with pytest.raises(ValueError, match=r"eps must satisfy 0.0 < eps, got 0.0"):
        create_optimizer(name, eps=0.0)
    with pytest.raises(ValueError, match=r"eps must satisfy 0.0 < eps, got -1e-08"):
        create_optimizer(name, eps=-1e-8)
    opt = create_optimizer(name, eps=1e-300)  # any eps above 0 keeps the step finite
    w = np.ones(3)
    opt.update(w, np.array([1.0, 0.0, -1.0]), opt.init_state(w))
    assert w[1] == 1.0 and np.isfinite(w).all()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_a_grad_scale_of_0_is_a_zero_gradient_not_a_division_by_zero(name, decay):
    """``update(w, g, st, grad_scale=0)`` is ``update(w, g * 0, st)`` as documented: Momentum
    and Nesterov (``mu / scale``) and every rule with weight decay (``decay / scale``) stopped
    on a bare "ZeroDivisionError: float division by zero"."""
    rng = np.random.default_rng(7)
    opt = create_optimizer(name, lr=0.05, weight_decay=decay)
    folded = rng.standard_normal(6)
    s_folded = opt.init_state(folded)
    opt.update(folded, rng.standard_normal(6), s_folded)  # a first step: momentum to carry
    scaled, s_scaled = folded.copy(), {k: v.copy() for k, v in s_folded.items()}
    g = rng.standard_normal(6)
    g[0] = 1e300  # times 0 is 0 in float64, not inf * 0 = NaN in float32
    opt.update(folded, g, s_folded, grad_scale=0.0)
    opt.update(scaled, g * 0.0, s_scaled)
    np.testing.assert_array_equal(folded, scaled)
    for key in s_scaled:
        np.testing.assert_array_equal(s_folded[key], s_scaled[key])


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("decay", [0.0, 0.01])
@pytest.mark.parametrize(
    "dtype, scale",
    [(np.float32, 1e-39), (np.float32, 1e-42), (np.float64, 4e-309), (np.float64, 1e-311)],
)
def test_a_grad_scale_near_0_is_a_small_gradient_not_an_inf_weight(name, decay, dtype, scale):
    """A scale of 0 was scaled into the gradient first, but one just above it
    still overflowed ``mu / scale`` (Momentum, Nesterov) or ``decay / scale`` in the
    parameter's type: a float32 Nesterov at ``grad_scale=1e-39``, a normal float64, made every
    weight -inf or NaN. Such a scale now goes the same way: bitwise ``update(g * s)``.
    """
    rng = np.random.default_rng(7)
    kw = {"eps": 1e-6} if name in ("adagrad", "rmsprop", "adam") else {}
    opt = create_optimizer(name, lr=0.05, weight_decay=decay, **kw)
    folded = rng.standard_normal(6).astype(dtype)
    s_folded = opt.init_state(folded)
    opt.update(folded, rng.standard_normal(6).astype(dtype), s_folded)
    scaled, s_scaled = folded.copy(), {k: v.copy() for k, v in s_folded.items()}
    g = rng.standard_normal(6).astype(dtype)
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        opt.update(folded, g, s_folded, grad_scale=scale)
    with np.errstate(under="ignore"):
        opt.update(scaled, g * scale, s_scaled)
    assert np.isfinite(folded).all()
    np.testing.assert_array_equal(folded, scaled)
    for key in s_scaled:
        np.testing.assert_array_equal(s_folded[key], s_scaled[key])
