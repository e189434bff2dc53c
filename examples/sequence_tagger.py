"""Train a sequence model with the Trainer: a tagger on ragged sentences (a ``SequenceSet``).

The same script runs alone, under ``mpiexec`` and under ``distconv-launch``::

    python examples/sequence_tagger.py --epochs 10
    mpiexec -n 2 python -m mpi4py examples/sequence_tagger.py --epochs 10
    distconv-launch local --workers 2 --servers 1 -- examples/sequence_tagger.py --epochs 10

Each sentence is token ids of its own length (some are empty); each token's tag depends on the
token and the one before it, which a context window of two rows sees. The data set holds every
sentence's tokens and tags end to end and the offsets between sentences; the Trainer samples
sentences (``--batch-size`` counts them), feeds their rows with the offsets, and averages the
loss, accuracy and each step's gradient over the tokens.
"""

from __future__ import annotations

import argparse

import numpy as np

import distconv.distributed as dist
from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import ContextProjection, FullyConnected, Mixed, SoftmaxCrossEntropy
from distconv.layers.projection import TableProjection
from distconv.script_flags import add_run_flags, print_last_epoch, refusals
from distconv.sequence_set import SequenceSet

VOCAB, TAGS, WIDTH = 12, 3, 8


def build_model() -> Network:
    """Embed each token, put it beside the one before it (zeros at a sentence's start), tag."""
    net = Network()
    net.add("emb", Mixed([TableProjection(VOCAB, WIDTH)]), ["tok"])
    net.add("pair", Mixed([ContextProjection(WIDTH, 2, context_start=-1)]), ["emb"])
    net.add("hidden", FullyConnected(2 * WIDTH, 32, act="tanh"), "pair")
    net.add("out", FullyConnected(32, TAGS), "hidden")
    net.add("loss", SoftmaxCrossEntropy(), ["out", "tag"])
    return net


def make_data(sentences: int, seed: int) -> SequenceSet:
    """Sentences of 0 to 9 tokens; a token's tag is (token + the token before) mod 3, the
    first token's the token's own mod 3. The same on every rank (the seed fixes it)."""
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(rng.integers(0, 10, sentences))])
    tok = rng.integers(0, VOCAB, starts[-1])
    before = np.concatenate([[0], tok[:-1]])
    before[starts[:-1][starts[:-1] < starts[-1]]] = 0  # nothing before a sentence's first
    return SequenceSet({"tok": tok, "tag": (tok + before) % TAGS}, starts, name="sentences")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    add_run_flags(parser, epochs=10, batch_size=16)
    args = parser.parse_args()

    sync = dist.init("adam", lr=0.02)  # rank, world size and transport from the environment
    set_seed(0)
    with refusals(parser):  # a run already in --out and no --resume: one line, not a traceback
        try:
            trainer = Trainer(
                build_model(), sync, args.batch_size, out_dir=args.out, progress=False
            )
            trainer.fit(
                make_data(800, seed=1), make_data(200, seed=2), args.epochs, resume=args.resume
            )
        finally:
            sync.close()
    if sync.is_chief:  # the test loss, or that a resume found nothing left to train
        print_last_epoch(trainer, args.out)


if __name__ == "__main__":
    dist.run_main(main)  # exit 75 where another rank's failure stopped this one
