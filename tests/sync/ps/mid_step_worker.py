"""A user script (``distconv.distributed``'s ``init`` and ``run_main``, as in the README) of two
workers whose rank 0 stops on an error in the middle of a step while rank 1 waits in it.

The model pools each sentence to one row, while its set says the loss averages over tokens
(``mean_over="rows"``). No sentence holds more than one token, so the fit's check of one
example passes (a sentence of one token: one row either way); in the second step rank 0's
sentences are one of a token and an empty one, which the pool gives a row of zeros: 1 token in
2 rows, so after its forward ``loss_rows_checked`` refuses them (a ``DataError`` naming
``mean_over``), while rank 1's share is only empty sentences: it runs no forward, hands every
gradient over (``fire_every_gradient``) and waits for the step's values.

Each rank writes ``rank R stopped at T`` (``time.time()``) to stderr as its error leaves
``main``, for the test to time the other rank's stop. ``python mid_step_worker.py
[--no-close]``; the rank, the world and the shards come from the environment (the test's, or
the launcher's). ``--no-close``: the script ends without closing its sync (no ``bye``).
"""

from __future__ import annotations

import sys
import time

import distconv.distributed as dist
from distconv.sequence_set import SequenceSet
from distconv.trainer import Trainer
from tests.sequence_tagger import classifier, lengths_in_order, sentences

#: sentence lengths in epoch 0's order, 2 a rank a step: step 1 gives rank 0 [1, 0] (1 token,
#: 2 rows) and rank 1 [0, 0]; 10 steps, past the async ranks' stop check after step 8
IN_ORDER = (1, 1, 1, 1, 1, 0, 0, 0, *[1] * 32)


def labelled() -> SequenceSet:
    """The sentences, one label each, counted by their tokens (what the pooling model is not)."""
    d = sentences(lengths_in_order(IN_ORDER))
    per_sentence = {"label": d["sentence_label"]}
    return SequenceSet(
        {"tok": d["tok"]}, d["seq_starts"], per_sentence, name="labelled", mean_over="rows"
    )


def main() -> None:
    sync = dist.init("adam", lr=0.05)
    try:
        trainer = Trainer(classifier(sync.rank), sync, 2, progress=False, dtype="float64")
        trainer.fit(labelled(), epochs=1)
    except Exception:
        print(f"rank {sync.rank} stopped at {time.time()!r}", file=sys.stderr, flush=True)
        raise
    finally:
        if "--no-close" not in sys.argv:  # a script that never closes its sync: no bye
            sync.close()


if __name__ == "__main__":
    dist.run_main(main)
