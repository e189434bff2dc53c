"""A training loop of one's own around a sync: the steps the Trainer takes, written out.

Runs alone, as ranks of ``mpiexec``, and as parameter-server workers (``dist.init`` picks the
sync from the environment); in float64 all three print what ``Trainer.fit`` reports::

    python examples/own_loop.py
    mpiexec -n 2 python -m mpi4py examples/own_loop.py
    # shards started by hand: distconv pserver --bind 127.0.0.1:7000 --shard 0 --num-shards 1
    #   --workers 2 --insecure; then, for r in 0 1:
    DISTCONV_PSERVERS=127.0.0.1:7000 RANK=$r WORLD_SIZE=2 DISTCONV_INSECURE=1 \\
        python examples/own_loop.py

``--checkpoint FILE`` saves after each epoch; ``--resume`` goes on from it (every rank reads it).
A model whose rank 0 may get no row in the first step tells the sync the ranks' agreed firing
order after it (``distconv.order_agreement``; docs/architecture.md, "One global batch").
"""

from __future__ import annotations

import argparse

import numpy as np

import distconv.distributed as dist
from distconv import Arg, Network
from distconv.checkpoint import load_checkpoint, restore_checkpoint, save_checkpoint
from distconv.empty_pass import fire_every_gradient
from distconv.init import set_seed
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.runtime import RuntimeConfigError
from distconv.sampler import GlobalBatchSampler
from distconv.sync import SyncStrategy

RNG = np.random.default_rng(0)  # the same data on every rank: a class is the largest of 3 scores
TRUTH = RNG.standard_normal((10, 3))
X, X_TEST = RNG.standard_normal((57, 10)), RNG.standard_normal((40, 10))  # 57 = 7 x 8 + 1
Y, Y_TEST = (X @ TRUTH).argmax(axis=1), (X_TEST @ TRUTH).argmax(axis=1)


def build_model() -> Network:
    set_seed(0)  # every rank builds the same weights (setup makes them rank 0's anyway)
    net = Network()
    net.add("hidden", FullyConnected(10, 16, act="relu", dtype=np.float64), inputs="x")
    net.add("logits", FullyConnected(16, 3, dtype=np.float64), inputs="hidden")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["logits", "label"])
    return net


def feeds(x: np.ndarray, y: np.ndarray) -> dict[str, Arg]:
    return {"x": Arg(x, needs_grad=False), "label": Arg(ids=y)}


def evaluate(net: Network, sync: SyncStrategy) -> tuple[float, float]:
    """Test loss and accuracy: each rank scores every world_size-th example, summed over ranks."""
    mine = np.arange(sync.rank, len(Y_TEST), sync.world_size)
    net.forward(feeds(X_TEST[mine], Y_TEST[mine]))  # the loss is the mean over these rows
    right = (net.outputs["logits"].value.argmax(axis=1) == Y_TEST[mine]).sum()
    loss, right, n = sync.allreduce_sum(
        [float(net.outputs["loss"].value) * len(mine), right, len(mine)]
    )
    return loss / n, right / n


def train_epoch(
    net: Network, sync: SyncStrategy, sampler: GlobalBatchSampler, epoch: int, step: int
) -> int:
    """One epoch of the Trainer's steps, the first the run's ``step``; the step after it."""
    for (index,) in sampler.passes(epoch):  # one pass per step (accumulate=1)
        sync.start_at(step)  # the run's step number, for the transports' messages
        sync.start_step(len(index))  # this rank's examples in the step
        if len(index):
            net.forward(feeds(X[index], Y[index]))
            # the loss is a mean: seed it with its rows, so the sync gets gradient sums
            net.backward(sync, loss_scale=len(index))
        else:  # an empty share (the last step's one example went to rank 0):
            fire_every_gradient(sync, net)  # every gradient still goes to the sync
        sync.finish_step()
        step += 1
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--global-batch", type=int, default=8, help="examples per step, all ranks")
    parser.add_argument("--checkpoint", help="file saved after each epoch")
    parser.add_argument("--resume", action="store_true", help="go on from --checkpoint")
    args = parser.parse_args()
    if args.resume and not args.checkpoint:
        parser.error("--resume needs --checkpoint FILE, the file to go on from")

    sync = dist.init("momentum", lr=0.05, momentum=0.9)  # local, mpi or pserver, from the env
    try:
        net = build_model()
        params = net.parameters()
        done_epochs = step = 0  # where a fresh run starts; a resumed one, where it saved
        state = None
        if args.resume:  # the weights on every rank, the position too; the state to the chief
            ckpt = restore_checkpoint(load_checkpoint(args.checkpoint), params)
            done_epochs, step, state = ckpt.epoch, ckpt.step, ckpt.optim_state
        sync.setup(params, {"global_batch": args.global_batch}, state if sync.is_chief else None)
        # the Trainer's steps: the same global batches at any world size, strided over ranks
        batch, rest = divmod(args.global_batch, sync.world_size)  # 1 x 8 steps as 2 x 4 do
        if rest or batch < 1:  # 3 ranks of 2 would step 6 at a time: other numbers, unsaid
            ranks = f"{sync.world_size} rank(s), 1 or more each"
            raise RuntimeConfigError(
                f"--global-batch {args.global_batch}: pass a multiple of the {ranks}"
            )
        sampler = GlobalBatchSampler(len(Y), batch, sync.rank, sync.world_size)
        for epoch in range(done_epochs, args.epochs):
            step = train_epoch(net, sync, sampler, epoch, step)
            sync.refresh_parameters()  # every rank: the trained weights (async shards)
            loss, accuracy = evaluate(net, sync)
            if sync.is_chief:
                print(f"epoch {epoch + 1}: step {step} test loss {loss!r} accuracy {accuracy!r}")
                if args.checkpoint:  # the chief alone writes, with the optimizer's state
                    save_checkpoint(args.checkpoint, params, sync.checkpoint_state(),
                                    step=step, epoch=epoch + 1)  # fmt: skip
    finally:
        sync.close()


if __name__ == "__main__":
    dist.run_main(main)
