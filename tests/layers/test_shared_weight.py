"""A weight shared by two layers, trained through LocalSync, against a step computed by hand.

The callback of a shared parameter must fire once per pass, after every user has added its
gradient. Counting calls cannot tell a late callback from an early one: both fire once in a
pass. Momentum can: two half-gradient updates ``v = mu*v + a; v = mu*v + b`` leave a different
weight than one ``v = mu*v + (a + b)``, so a callback that fires before the second user is in
moves the weight off the hand-computed reference. The second test shows that such a callback
is caught before: the Network refuses a parameter that fires twice in a pass at its second
fire, before the callback (a sync's) takes it.
"""

import numpy as np
import pytest

from distconv import Arg, Parameter
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network, NetworkError
from distconv.optim import Momentum
from distconv.sync.local import LocalSync

LR, MU, STEPS = 0.1, 0.9, 3


def _train(rng, callback=lambda sync: sync):
    """Three steps of ``y = x W^T W^T`` (one W in two layers) under an MSE loss; the weights."""
    net = Network()
    first = net.add("fc1", FullyConnected(3, 3, bias=False, dtype=np.float64), inputs="x")
    net.add("fc2", FullyConnected(3, 3, bias=False, weight=first.weight), inputs="fc1")
    net.add("loss", MSELoss(), inputs=["fc2", "t"])
    w0 = rng.standard_normal((3, 3)) * 0.5
    first.weight.value[...] = w0
    sync = LocalSync(Momentum(lr=LR, momentum=MU))
    sync.setup(net.parameters())
    batches = [(rng.standard_normal((4, 3)), rng.standard_normal((4, 3))) for _ in range(STEPS)]
    for x, t in batches:
        net.forward({"x": Arg(x, needs_grad=False), "t": Arg(t, needs_grad=False)})
        sync.start_step(len(x))
        net.backward(callback(sync), loss="loss", loss_scale=len(x))
        sync.finish_step()
    return w0, batches, first.weight.value


def _by_hand(w0, batches):
    """The same steps written out: both users' gradients summed, then one momentum step."""
    w, v = w0.copy(), np.zeros_like(w0)
    for x, t in batches:
        h = x @ w.T
        y = h @ w.T
        dy = 2 * (y - t) / y.size  # d mean((y - t)^2) / dy
        grad = dy.T @ h + (dy @ w).T @ x  # fc2's use of W, then fc1's
        v = MU * v + grad
        w = w - LR * v
    return w


def test_shared_weight_takes_the_hand_computed_steps(rng):
    w0, batches, trained = _train(rng)
    np.testing.assert_allclose(trained, _by_hand(w0, batches), rtol=1e-12, atol=1e-14)


def test_a_callback_fired_per_user_is_refused(rng, monkeypatch):
    def fire_at_once(self: Parameter, callback) -> None:  # the bug: no wait for other users
        if not self.static:
            callback(self)

    monkeypatch.setattr(Parameter, "inc_update", fire_at_once)
    # the Network refuses it before any callback has the second fire: LocalSync refused it
    # itself ("fired twice in one step", naming no layer); a callback of one's own took both.
    # To LocalSync the gradient fired is held, so the second user's share is refused at its
    # write, before its fire; a callback of one's own is not guarded, so the second fire is.
    said = {
        "sync": r"layer 'fc1' wrote into the gradient of 'fc1\.weight', which fired already in "
        r"the backward of layer 'fc2'.* \(it counts 2 user\(s\)\)",
        "own": r"'fc1\.weight' fired twice in one backward pass \(first in the backward of layer "
        r"'fc2', again in that of layer 'fc1'\)",
    }
    for name, callback in (("sync", lambda sync: sync), ("own", lambda sync: lambda p: None)):
        with pytest.raises(NetworkError, match=said[name]):
            _train(rng, callback=callback)
