"""Optimizers: parity with torch.optim, in-place state, configs, argument checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
    with pytest.raises(ValueError, match=r"unknown optimizer 'adamw'.*'adam'"):
        create_optimizer("adamw")
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


def test_names_are_case_insensitive_and_numpy_scalars_accepted():
    opt = create_optimizer("Adam", lr=np.float32(0.5))
    assert opt.name == "adam" and opt.lr == 0.5
    assert isinstance(opt, Optimizer)
