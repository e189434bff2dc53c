"""Review k276: the checks k272 added to save_checkpoint and restore_checkpoint (optimizer state
that is no mapping, state keys that are no strings) refuse no state a distconv optimizer makes:
every optimizer's state, trained so that it is not zeros, dense and sparse, in float64, float32,
float16 and bfloat16, goes through a save and a restore bit for bit. And a save of ``{}`` or
``None`` state saves none, while ``[]`` (no mapping) is refused naming it, as documented."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.init import set_seed
from distconv.layers import FullyConnected, Mixed, SoftmaxCrossEntropy, TableProjection
from distconv.network import Network
from distconv.optim import OPTIMIZERS, create_optimizer
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

VOCAB, WIDTH = 40, 3


def _net(dtype) -> Network:
    """A sparse table under a classifier: sparse rows and dense weights, in ``dtype``."""
    set_seed(1)
    net = Network()
    net.add("embed", Mixed([TableProjection(VOCAB, WIDTH, sparse=True)]), inputs="words")
    net.add("logits", FullyConnected(WIDTH, 3), inputs="embed")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["logits", "label"])
    for p in net.parameters():
        p.cast(dtype)
    return net


def _trained(name: str, dtype) -> tuple[Network, LocalSync]:
    """Three steps of ``name``: its state holds numbers that are not zeros."""
    net = _net(dtype)
    eps = {"eps": 1e-3} if "eps" in create_optimizer(name).hyper else {}  # 1e-8 is 0 in float16
    sync = LocalSync(create_optimizer(name, lr=0.1, **eps))
    sync.setup(net.parameters(), {})
    rng = np.random.default_rng(2)
    for _ in range(3):
        words = rng.integers(0, VOCAB, 6)
        sync.start_step(len(words))
        feed = {"words": Arg(ids=words, needs_grad=False), "label": Arg(ids=words % 3)}
        net.forward(feed)
        net.backward(sync, loss="loss", loss_scale=len(words))
        sync.finish_step()
    return net, sync


def _bits(a) -> tuple:
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


DTYPES = [np.float64, np.float32, np.float16]
try:
    import ml_dtypes

    DTYPES.append(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency of the tests
    pass


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizers_state_saves_and_restores_bitwise(tmp_path, name, dtype):
    net, sync = _trained(name, dtype)
    state = sync.state_dict()
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, net.parameters(), state, step=3)
    loaded = load_checkpoint(path).optim_state
    saved = {n: sorted(s) for n, s in state.items() if s}  # SGD's empty entries leave no tensor
    assert {n: sorted(s) for n, s in loaded.items()} == saved
    for n, s in state.items():
        for key, value in s.items():
            assert _bits(loaded[n][key]) == _bits(value), (n, key)
    fresh_net, fresh = _net(dtype), LocalSync(sync.optimizer)
    fresh.setup(fresh_net.parameters(), {})  # zeros, as a resumed run's before its restore
    restore_checkpoint(path, fresh_net.parameters(), fresh.state)
    for n, s in state.items():
        for key, value in s.items():
            assert _bits(fresh.state[n][key]) == _bits(value), (n, key)
    for p, q in zip(net.parameters(), fresh_net.parameters()):
        assert _bits(q.value) == _bits(p.value), p.name


@pytest.mark.parametrize("state", [{}, None])
def test_a_save_of_no_state_saves_none(tmp_path, state):
    net, _ = _trained("adam", np.float64)
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, net.parameters(), state)
    assert load_checkpoint(path).optim_state == {}


def test_a_save_of_an_empty_list_is_refused_as_no_mapping(tmp_path):
    """The docstring: 'the optimizer state or an entry of it is no mapping' is refused (before
    k272, ``optim_state or {}`` took ``[]`` as no state)."""
    net, _ = _trained("sgd", np.float64)
    path = tmp_path / "ckpt.safetensors"
    with pytest.raises(CheckpointError, match=r"optimizer state is a list, not a mapping"):
        save_checkpoint(path, net.parameters(), [])
    assert not path.exists()
