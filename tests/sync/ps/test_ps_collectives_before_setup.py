"""A parameter-server worker refuses a metrics sum and a barrier before its first setup has
completed, as MPISync does, before anything is sent. ``Trainer.evaluate`` before ``fit`` summed
the ranks' shares through shard 0 while each rank still held its own initial values: ranks
seeded differently got one number, a mixture of two models' losses, without a word; and where
one rank alone evaluated first, its gather met the other's setup and failed the job. After a
setup both are served as before. Real shards on 127.0.0.1 port 0, served on a thread; the
workers are processes (``run_main``) or threads."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import time

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, script_ranks, served

from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from tests.other_jobs import SMALL_NET

#: the shard's --timeout: a rank left waiting for another fails the test at it; each ends sooner
SHARD_TIMEOUT = 8.0
#: what a refused evaluation says, after "rank R: summing N values before setup: "
WHY = "the ranks' parameters may still differ (each its own initial values)"

#: ``python EVAL_FIRST OUT WHO``: each rank seeds its own initial values (``set_seed(rank)``),
#: then the ranks named by WHO ("both", or one rank's number) evaluate before ``fit``, catching
#: the error; every rank then fits an epoch and evaluates. Each writes ``OUT.<rank>`` (JSON):
#: what the first evaluation gave or raised and how long it took, the later loss, its parameters
EVAL_FIRST = (
    """\
import json
import sys
import time
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network

out, who = sys.argv[1], sys.argv[2]


def main():
    sync = dist.init("sgd", lr=0.05)
    try:
        set_seed(sync.rank)
"""
    + SMALL_NET
    + """        trainer = Trainer(net, sync, 2, progress=False)
        said = {}
        if who == "both" or sync.rank == int(who):
            began = time.monotonic()
            try:
                said["before"] = trainer.evaluate(data)["test_loss"]
            except Exception as exc:
                said["refused"] = f"{type(exc).__name__}: {exc}"
            said["took"] = time.monotonic() - began
        trainer.fit(data, epochs=1)
        said["after"] = trainer.evaluate(data)["test_loss"]
        said["params"] = {p.name: p.value.tolist() for p in net.parameters()}
        with open(f"{out}.{sync.rank}", "w") as f:
            json.dump(said, f)
    finally:
        sync.close()


dist.run_main(main)
"""
)


def _shard() -> Shard:
    return Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=SHARD_TIMEOUT))


def _run_script(tmp_path, who: str) -> list[dict]:
    """Run :data:`EVAL_FIRST` as ranks 0 and 1 of a served shard; what each rank wrote. Both
    exit 0 well before the shard's timeout, and the shard never failed the job."""
    script = tmp_path / "eval_first.py"
    script.write_text(EVAL_FIRST)
    out = tmp_path / "said"
    with served(_shard()) as shard:
        began = time.monotonic()
        ended = script_ranks([sys.executable, str(script), str(out), who], shard.endpoint, 30)
        took = time.monotonic() - began
        assert shard.failed is None, shard.failed
    for status, err in ended:
        assert status == 0, err[-2000:]
    assert took < SHARD_TIMEOUT, f"took {took:.1f} s"
    return [json.loads(out.with_name(f"said.{r}").read_text()) for r in range(2)]


def _local_loss(params: dict) -> float:
    """The loss of the scripts' small net holding ``params`` on their data, evaluated in one
    process (LocalSync)."""
    ns = {"np": np, "Network": Network, "FullyConnected": FullyConnected, "MSELoss": MSELoss}
    exec(textwrap.dedent(SMALL_NET), ns)  # its net and data, as the scripts make them
    for p in ns["net"].parameters():
        p.value[...] = np.array(params[p.name])
    trainer = Trainer(ns["net"], LocalSync(create_optimizer("sgd", lr=0.05)), 2, progress=False)
    return trainer.evaluate(ns["data"])["test_loss"]


def _assert_trained_alike(said: list[dict]) -> None:
    """Both ranks ended with one model, and their evaluation after fit is its loss."""
    assert said[0]["params"] == said[1]["params"]
    assert said[0]["after"] == said[1]["after"]
    np.testing.assert_allclose(said[0]["after"], _local_loss(said[0]["params"]), rtol=1e-12)


@pytest.mark.timeout(60)
def test_both_ranks_evaluating_before_fit_are_refused_at_once_and_then_train(tmp_path):
    """Each rank's evaluation before fit raises at once, naming the sum, why and the fix;
    neither got a number (it was the sum of two models' shares). Then both fit and evaluate
    together as before."""
    said = _run_script(tmp_path, "both")
    for rank, words in enumerate(said):
        assert "before" not in words, words
        lead = f"SyncError: rank {rank}: summing 14 values before setup: {WHY}"
        assert words["refused"].startswith(lead), words["refused"]
        assert "(evaluate after fit" in words["refused"], words["refused"]
        assert words["took"] < 0.5, words["took"]
    _assert_trained_alike(said)


@pytest.mark.timeout(60)
def test_one_rank_evaluating_before_fit_is_refused_alone_and_the_job_goes_on(tmp_path):
    """Rank 0 alone evaluates before fit: it is refused at once, and rank 1, in its setup
    meanwhile, never hears of it. Its gather met rank 1's job check on shard 0 and failed the
    job ("ranks are at different points of the job")."""
    said = _run_script(tmp_path, "0")
    assert said[0]["refused"].startswith("SyncError: rank 0: summing 14 values before setup")
    assert said[0]["took"] < 0.5, said[0]["took"]
    assert "refused" not in said[1] and "before" not in said[1], said[1]
    _assert_trained_alike(said)


@pytest.mark.timeout(30)
def test_a_sum_and_a_barrier_before_setup_send_nothing():
    """Before any setup a worker's sum and barrier raise without a request: shard 0 handled
    none, so no other rank could be held in a gather for them."""
    with served(_shard()) as shard:
        sync = insecure_worker([shard.endpoint], 1, 2, timeout=SHARD_TIMEOUT)
        try:
            summing = re.escape(f"rank 1: summing 1 value before setup: {WHY}")
            with pytest.raises(SyncError, match=summing):
                sync.allreduce_sum([1.0])
            with pytest.raises(SyncError, match=r"^rank 1: a barrier before setup: .*after fit"):
                sync.barrier()
            assert shard.requests == 0, shard.requests
        finally:
            sync.close()


@pytest.mark.timeout(40)
def test_a_failed_setup_keeps_the_refusal_and_the_setup_made_again_ends_it():
    """Threads as ranks: every rank's first setup fails alike before its hello (two parameters
    named ``w``: each tells the shard, fail_setup's path), which made no rank's parameters
    rank 0's, so sums and barriers are still refused; the setup made again serves them,
    summed over the ranks in rank order."""
    with served(_shard()) as shard:

        def rank(r: int) -> tuple[list[float], str, str]:
            sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
            try:
                twice = [Parameter("w", np.zeros(2)), Parameter("w", np.zeros(3))]
                with pytest.raises(ValueError, match="two parameters are named 'w'"):
                    sync.setup(twice)
                with pytest.raises(SyncError) as summed:
                    sync.allreduce_sum([1.0, 2.0])
                with pytest.raises(SyncError) as met:
                    sync.barrier()
                sync.setup([Parameter("w", np.zeros(2))])
                total = sync.allreduce_sum([1.0 + r, 0.5 * r])
                sync.barrier()
                return total, str(summed.value), str(met.value)
            finally:
                sync.close()

        said = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 20)
        assert shard.failed is None, shard.failed
    for r, (total, summed, met) in enumerate(said):
        assert total == [3.0, 0.5]
        assert summed.startswith(f"rank {r}: summing 2 values before setup: {WHY}"), summed
        assert met.startswith(f"rank {r}: a barrier before setup"), met
