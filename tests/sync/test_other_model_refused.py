"""A model rebuilt after ``setup`` (same parameter names, other objects) trained through each
transport: its first gradient is refused in one set of words, and neither model moves.

MPISync looked its gradients up by name and summed the set-up model's (zero) gradients in
their place: it trained nothing, left the rebuilt model's gradients piling up, and exited 0,
where LocalSync and PServerSync refused the same loop."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from tests.sync.ps.ps_helpers import Shards, insecure_worker, small_net

#: the refusal every transport gives (kept here, not imported: a test of the words must not
#: take them from the code it tests)
REFUSED = (
    r"^gradient of 'fc2\.\w+', which was not given to setup "
    r"\(a parameter of that name was: another model's\)$"
)


@pytest.fixture
def make_sync(request, tmp_path):
    """A sync of the transport ``request.param`` names, on one rank: a real shard process for
    ``ps``, MPISync's single-rank communicator for ``mpi``."""
    shards = Shards(tmp_path)
    made = []

    def make():
        optimizer = create_optimizer("sgd", lr=0.1)
        if request.param == "local":
            sync = LocalSync(optimizer)
        elif request.param == "mpi":
            sync = MPISync(optimizer, comm=SingleRankComm())
        else:
            sync = insecure_worker(shards.start(1, 1), lr=0.1, timeout=20)
        made.append(sync)
        return sync

    yield make
    try:
        for sync in made:
            sync.close()
    finally:  # a close that raises (a step left open) must not leave the shard running
        shards.stop()


def _step(net, sync, seed: int = 3) -> None:
    """One step of 8 rows through ``net``, each gradient handed to ``sync``."""
    from distconv.arg import Arg

    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((8, 1, 8, 8)), rng.integers(0, 4, 8)
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=8)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", ["local", "mpi", "ps"], indirect=True)
def test_another_models_gradient_is_refused_in_one_set_of_words(make_sync):
    set_up, rebuilt = small_net(seed=0), small_net(seed=1)
    assert [p.name for p in set_up.parameters()] == [p.name for p in rebuilt.parameters()]
    sync = make_sync()
    sync.setup(set_up.parameters())
    before = [p.value.copy() for p in (*set_up.parameters(), *rebuilt.parameters())]
    sync.start_step(8)
    with pytest.raises(SyncError, match=REFUSED):
        _step(rebuilt, sync)
    sync.abandon_step()  # as a script must where its step raised: it applies nothing either
    after = [p.value for p in (*set_up.parameters(), *rebuilt.parameters())]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", ["local", "mpi", "ps"], indirect=True)
def test_the_set_up_model_still_trains_after_the_refusal(make_sync):
    """The refusal takes nothing into the step: the model set up trains on after a new step."""
    set_up, rebuilt = small_net(seed=0), small_net(seed=1)
    sync = make_sync()
    sync.setup(set_up.parameters())
    sync.start_step(8)
    with pytest.raises(SyncError, match=REFUSED):
        _step(rebuilt, sync)
    sync.setup(set_up.parameters())  # a setup ends the refused step, on every transport
    before = [p.value.copy() for p in set_up.parameters()]
    sync.start_step(8)
    _step(set_up, sync)
    sync.finish_step()
    assert all((a != p.value).any() for a, p in zip(before, set_up.parameters()))
