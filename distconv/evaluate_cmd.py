"""``distconv evaluate --from PATH``: the test loss and accuracy of a run's checkpoint.

PATH is anything ``distconv train --init-from`` takes (:func:`~distconv.init_from.
checkpoint_file` resolves it: a run's ``--out``, its ``checkpoints`` folder, a step folder or
manifest, a checkpoint file). The model and data are rebuilt from what the checkpoint records
(its data set, model, seed and dtype), the weights loaded, and the test split evaluated as the
run evaluated it after each epoch (``Trainer.evaluate``, 256 examples a batch), so the numbers
are those of its ``metrics.jsonl`` line for that step. The split is the one the run's seed drew
(another seed's test split holds training examples: a higher accuracy, wrongly); the rebuilt
training set is checked against the fingerprint the checkpoint keeps of the run's.

It reads the run folder only: no run lock, no plot, nothing written, so it works while the run
still trains. No optimizer and no server: the chief's part of a parameter-server run holds
every weight, as an MPI run's checkpoint does.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distconv.checkpoint import Checkpoint, CheckpointError
from distconv.data import DataError, Dataset, as_arrays, fingerprint, load_dataset
from distconv.init_from import copy_weights, read_checkpoint
from distconv.network import Network
from distconv.source_words import EVALUATE_FROM

log = logging.getLogger("distconv.evaluate")

#: the models ``distconv train`` builds, by the name its checkpoints record
MODELS = ("lenet",)
#: examples a batch, as the Trainer evaluates after each epoch (``Trainer.evaluate``'s default)
RUN_BATCH_SIZE = 256


@dataclass(frozen=True)
class Evaluation:
    """One checkpoint's test numbers and what they were computed on."""

    metrics: dict[str, float]  # test_loss, test_acc: as metrics.jsonl has them
    checkpoint: Path
    step: int
    epoch: int  # epochs complete
    step_in_epoch: int  # steps of the next epoch done: 0 at an epoch's end
    data: str
    seed: int
    examples: int
    runs_data: str  # the data set the run trained on: ``data`` where the split is the run's

    def line(self) -> str:
        """The one line ``distconv evaluate`` prints: the numbers first, in full precision."""
        numbers = "  ".join(f"{k} {v!r}" for k, v in self.metrics.items())
        split = f"{self.data} test split of seed {self.seed}, {self.examples} examples"
        if self.data != self.runs_data:
            split += f"; not the run's data, {self.runs_data}"
        at = f"epoch {self.epoch}"
        if self.step_in_epoch:  # a --checkpoint-every one: no metrics.jsonl line has its step
            at = f"{self.step_in_epoch} steps into epoch {self.epoch + 1}"
        made = f"checkpoint step {self.step}, {at}: {self.checkpoint}"
        return f"{numbers}  ({split}; {made})"

    def fields(self) -> dict[str, Any]:
        """The line's facts, each a key of its own under ``--log-format json``."""
        return {
            **self.metrics,
            "step": self.step,
            "epoch": self.epoch,
            "step_in_epoch": self.step_in_epoch,
            "data": self.data,
            "seed": self.seed,
            "examples": self.examples,
            "checkpoint": str(self.checkpoint),
        }


def evaluate_checkpoint(
    path: str,
    data: str | None = None,
    data_dir: str | None = None,
    batch_size: int = RUN_BATCH_SIZE,
) -> Evaluation:
    """Evaluate the checkpoint ``path`` names on the test split of its run (``data`` None) or
    of the data set ``data`` (a name ``distconv train --data`` takes), split by the run's seed.

    Raises:
        CheckpointError: nothing at ``path``, a shard's part, a damaged checkpoint, one no
            ``distconv train`` wrote, or of another model than ``data`` builds.
        DataError: the data cannot be loaded, or its training set is not the run's (another
            ``data_dir``, a changed file): its test split would not be the run's either.
    """
    ckpt = read_checkpoint(path, EVALUATE_FROM)
    runs_data, seed, dtype = _run_facts(ckpt)
    name = data or runs_data
    train_set, test_set = load_dataset(name, data_dir, seed)
    if name == runs_data:
        _refuse_other_split(ckpt, train_set, dtype, name, seed)
    else:
        log.warning(
            "evaluating on %s's test split (seed %d), not the run's data %s", name, seed, runs_data
        )
    trainer = _trainer(_model(ckpt, train_set, name), dtype)
    copy_weights(ckpt, trainer.params, EVALUATE_FROM)  # read once: a live run may prune it
    metrics = trainer.evaluate(as_arrays(test_set), batch_size=batch_size)
    into = int(ckpt.extra.get("step_in_epoch") or 0)
    return Evaluation(
        metrics, ckpt.path, ckpt.step, ckpt.epoch, into, name, seed, len(test_set), runs_data
    )


def run_evaluate(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """``distconv evaluate`` as ``args`` say: its result line and that line's fields."""
    from distconv.backend import device_from_env, set_device
    from distconv.logs import configure_logging
    from distconv.runtime import detect_runtime
    from distconv.verbosity import log_level

    configure_logging(detect_runtime(), log_level(args), args.log_format)
    set_device(args.device or device_from_env())
    result = evaluate_checkpoint(args.source, args.data, args.data_dir, args.batch_size)
    return result.line(), result.fields()


def _run_facts(ckpt: Checkpoint) -> tuple[str, int, str]:
    """The data set, seed and dtype the checkpoint's run trained with.

    Raises:
        CheckpointError: the checkpoint records none of them (a script's own Trainer wrote it,
            without ``config={"data": ..., "model": ...}``), or another model than those
            ``distconv train`` builds.
    """
    extra = ckpt.extra
    model, data = extra.get("model"), extra.get("data")
    if model not in MODELS or not isinstance(data, str) or ckpt.seed is None:
        made = f"a checkpoint of the model {model!r}" if model else "a checkpoint of no model"
        source = EVALUATE_FROM.source(ckpt.path)
        raise CheckpointError(
            f"{source}: {made}, data set {data!r} and seed {ckpt.seed!r}: distconv "
            f"evaluate rebuilds the models distconv train builds ({', '.join(MODELS)}) from "
            "what their checkpoints record; load a script's own model with "
            "distconv.init_from.load_weights and evaluate it with Trainer.evaluate or "
            "distconv.predict"
        )
    return data, ckpt.seed, extra.get("dtype", "float32")


def _refuse_other_split(
    ckpt: Checkpoint, train_set: Dataset, dtype: str, data: str, seed: int
) -> None:
    """Refuse a training set rebuilt now that is not the run's: the test split beside it is
    then not the run's either, and may hold examples the run trained on."""
    theirs = ckpt.extra.get("train_data")
    ours = fingerprint(as_arrays(train_set), dtype)
    if theirs is not None and theirs != ours:
        source = EVALUATE_FROM.source(ckpt.path)
        raise DataError(
            f"{source}: the training set --data {data} gives now (seed {seed}) is not "
            f"the one the run trained on (fingerprint {ours}, the run's {theirs}), so neither "
            "is its test split; pass the --data-dir the run read, or its data set's files as "
            "they were"
        )


def _model(ckpt: Checkpoint, train_set: Dataset, data: str) -> Network:
    """The model the checkpoint's run trained, built for ``train_set``'s examples and classes.

    Raises:
        CheckpointError: its layers are not those the checkpoint records (another data set's
            examples or classes), naming the first that differs.
    """
    from distconv.models import lenet

    network = lenet(train_set.image_shape, train_set.num_classes)
    network.check_finite = False  # load_dataset checked the values once
    # the resume's comparison, which reads tuples as lists and lets newer settings pass
    from distconv.resume_facts import LAYERS, layer_differences, recorded

    if differ := layer_differences(recorded(ckpt.extra, LAYERS), network.structure()):
        source = EVALUATE_FROM.source(ckpt.path)
        raise CheckpointError(
            f"{source}: a checkpoint of another model than the one --data {data} "
            f"builds ({differ[0]}); evaluate it on a data set of its run's examples and classes"
        )
    return network


def _trainer(network: Network, dtype: str) -> Any:
    """A Trainer of one process around ``network``, its parameters cast to ``dtype``: its
    ``evaluate`` is the one each epoch of the run ended with, so the numbers are the same.
    Its optimizer takes no step (evaluate takes none): a sync of one process needs one."""
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync
    from distconv.trainer import Trainer

    return Trainer(network, LocalSync(create_optimizer("sgd")), 1, dtype=dtype)
