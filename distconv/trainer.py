"""The training loop: one global batch per step, ``backward(sync)``, ``finish_step``; metrics out.

:class:`Trainer` trains any network that ends in a loss, with any sync strategy behind the
``inc_update`` callback, and uses nothing of the strategy but the contract in
:mod:`distconv.sync.base`. It takes its rank's share of each global batch
(:mod:`distconv.sampler`), accumulates gradients over ``accumulate`` passes, reduces metrics
over ranks, evaluates on every rank's share of the test set, checkpoints every N steps, at each
epoch's end and on SIGTERM or Ctrl-C, and resumes from the newest complete checkpoint so that an
interrupted run ends with exactly the weights of an uninterrupted one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import distconv  # annotations name the probes' type through it: get_type_hints imports it then
from distconv.arg import feeds_of
from distconv.data import Arrays, DataError, Dataset
from distconv.data_checks import check_evaluation_set, check_sets
from distconv.epoch_run import run_epoch
from distconv.epoch_sums import share_position
from distconv.epoch_tally import EpochTally
from distconv.evaluation_sums import evaluate_shares, right_answers
from distconv.fit_start import start_fit
from distconv.frozen_resume import refuse_frozen_resume
from distconv.layers.base import LayerError
from distconv.layers.loss import wide_loss
from distconv.metrics import MetricsWriter, summary
from distconv.network import Network
from distconv.resume import (
    JobStart,
    Position,
    StepCheckpoints,
    dtype_fact,
)
from distconv.resume import Preempted as Preempted  # fit raises it; callers catch it from here
from distconv.resume import TrainingError as TrainingError  # the same, from a fold
from distconv.run_dir import RunDirectory
from distconv.run_files import METRICS
from distconv.run_line import run_line
from distconv.run_plot import draw_plot, plot_after
from distconv.sampler import check_count, check_seed
from distconv.sequence_set import (
    SequenceSet,
    as_data_set,
    counted,
    loss_rows_checked,
    refuse_misplaced_labels,
    set_length,
)
from distconv.step_guard import ParamLayout
from distconv.stop_agreement import STOP_CHECK_EVERY as STOP_CHECK_EVERY  # drain reads it
from distconv.stop_request import StopRequest
from distconv.sync.base import SyncStrategy, tell_setup_failed
from distconv.sync.closed_calls import refuse_closed_trainer
from distconv.sync.collective_time import timed_collective
from distconv.train_step import say_applied_in_part, train_step
from distconv.trainer_args import (
    accuracy_pair,
    check_counts,
    check_lr_decay,
    check_parts,
    check_progress,
    check_resume,
    job_config,
    output_dir,
    run_config,
    training_dtype,
)
from distconv.trainer_settings import TrainerSettings, settings_made

if TYPE_CHECKING:  # imported by the caller that serves probes, not by every trainer
    import distconv.service

log = logging.getLogger("distconv.trainer")


class Trainer(TrainerSettings):
    """Trains ``network`` with ``sync`` behind its ``inc_update`` callback.

    Args:
        network: the model; its layer ``loss`` outputs a scalar mean loss.
        sync: the sync strategy (rank, world size, optimizer, collectives).
        batch_size: examples per pass on each rank (the global batch is
            ``world_size * batch_size * accumulate``); of a
            :class:`~distconv.sequence_set.SequenceSet`, its sequences.
        loss: the loss layer's name.
        accuracy: ``(predictions, labels)`` names to count right answers with, None for no
            accuracy, or ``"auto"``: the loss's inputs when it is a softmax cross-entropy.
        accumulate: forward/backward passes per optimizer step.
        out_dir: where checkpoints and metrics go (the chief writes them); None writes nothing
            ("" is refused: ``Path("")`` is the current directory).
        seed: the shuffle seed, an int >= 0 (with the epoch, the only input to the batch order;
            with the rank, step and pass, the only one to what layers draw in training).
        lr_decay: epoch ``e`` (from 0) trains at ``lr * lr_decay**e``. A per-epoch factor, not a
            schedule over the run's length, so a run resumed with more epochs continues exactly
            the schedule an uninterrupted one follows.
        checkpoint_every: also checkpoint every this many steps (0: at epoch ends only).
        keep_checkpoints: complete checkpoints to keep.
        dtype: the float type the parameters and each batch of a float feed are cast to.
            None keeps the network's and feeds float arrays as they are: float64 images
            (``x / 255.0`` of uint8) make a float32 model compute in float64, slower, which
            ``fit`` warns of once (cast them, ``x.astype(np.float32)``, or pass ``dtype``).
        progress: draw a progress bar on the chief: None draws one on a terminal only.
        config: more facts that must agree on every rank (data set, model), for the digest;
            each checkpoint keeps them (one under a key it keeps its own fact under, ``scheme``,
            as ``config scheme``: :func:`~distconv.checkpoint_checks.savable_facts`).
        monitor: a :class:`~distconv.service.ServiceEndpoints` (``/readyz``, ``/healthz``,
            ``/metrics``) told when this rank is ready and how each step went, or None.
        start: which start of which job this is (:class:`~distconv.resume.JobStart`); a
            restart with ``resume`` False or ``"overwrite"`` tells the run its launch began by
            it. None: the launch and restart ``distconv-launch`` sets in the environment.
        checkpoints: makes the run's checkpoints from ``(run directory or None, parameters,
            sync, config, start)``: :class:`~distconv.resume.StepCheckpoints`, or a subclass
            (``distconv train --init-from``'s :class:`~distconv.init_from.InitFromCheckpoints`).

    Raises:
        ValueError: a count (``batch_size``, ``accumulate``, ``checkpoint_every``,
            ``keep_checkpoints``) that is not an int in range, ``lr_decay`` outside (0, 1], a
            blank ``out_dir``, ``loss`` not a layer, or ``accuracy`` naming neither a layer nor
            an input of the network (:mod:`distconv.trainer_args`), or a ``config`` entry a
            checkpoint cannot save (:func:`~distconv.checkpoint_checks.savable_facts`), or
            whose key the Trainer keeps a fact of its own under with another value (``dtype``,
            ``seed``: :func:`~distconv.trainer_args.run_config`).
        TypeError: ``network`` is not a Network, ``sync`` not a sync strategy (an optimizer
            instead), or ``dtype`` is not one the Trainer trains in.

    Attributes:
        batch_size, accumulate, seed, lr_decay, dtype, checkpoint_every, out_dir: as given,
            read-only (:mod:`~distconv.trainer_settings`: the run's config records them; a
            new Trainer on the same network and sync takes other values).
        history: one record per epoch completed by this call of :meth:`fit` (on the chief
            the first has ``earlier_schemes`` where a resume switched schemes mid-epoch;
            another rank's has not: :meth:`~distconv.epoch_tally.EpochTally.record`).
    """

    def __init__(
        self,
        network: Network,
        sync: SyncStrategy,
        batch_size: int,
        *,
        loss: str = "loss",
        accuracy: tuple[str, str] | str | None = "auto",
        accumulate: int = 1,
        out_dir: str | Path | None = None,
        seed: int = 0,
        lr_decay: float = 1.0,
        checkpoint_every: int = 0,
        keep_checkpoints: int = 3,
        dtype: Any = None,
        progress: bool | None = None,
        config: Mapping[str, Any] | None = None,
        monitor: distconv.service.ServiceEndpoints | None = None,
        start: JobStart | None = None,
        checkpoints: Callable[..., StepCheckpoints] = StepCheckpoints,
    ) -> None:
        check_parts(network, sync, loss)
        check_lr_decay(lr_decay)
        check_progress(progress)  # "yes" and "no" alike drew a bar
        check_counts(
            batch_size=batch_size, accumulate=accumulate, keep_checkpoints=keep_checkpoints
        )
        check_count("checkpoint_every", checkpoint_every, 0)
        check_seed(seed)  # here, not at the first epoch after setup and the job check
        self.network, self.sync, self.loss_name = network, sync, loss
        self.batch_size, self.accumulate = batch_size, accumulate
        self.accuracy = accuracy_pair(network, accuracy, loss)
        self.out_dir, self.seed, self.lr_decay = output_dir(out_dir), seed, lr_decay
        self.checkpoint_every, self.monitor, self.progress = checkpoint_every, monitor, progress
        self.dtype = training_dtype(dtype)
        settings_made(self)  # read-only from here: the config below records them
        self.params = network.parameters()
        # the config refused before a weight is cast: a refused Trainer leaves the network as is
        self.config = run_config(  # and the Trainer's facts: one's key with another value refused
            config,
            batch_size=batch_size,
            accumulate=accumulate,
            seed=seed,
            lr_decay=lr_decay,
            dtype=dtype_fact(self.params, self.dtype),  # the network's as cast, or as it is
            checkpoint_every=checkpoint_every,  # which steps run checkpoint barriers
            global_batch=self.global_batch,
        )
        run = RunDirectory(self.out_dir, keep_checkpoints) if self.writes_files else None
        self.checkpoints = checkpoints(run, self.params, sync, self.config, start)
        if self.dtype is not None:
            for p in self.params:
                p.cast(self.dtype)
        self._take_trainable()
        self.pos = Position()
        self._said_fresh_again = False  # memory_resume's warning, once
        self._position_data: dict[str, Any] | None = None  # the set self.pos was trained on
        self.history: list[dict[str, Any]] = []
        self._stop = StopRequest()
        self._layout = ParamLayout([])  # each fit's, made before its setup

    def _take_trainable(self) -> None:
        """The parameters to train: those not frozen now (a fit after a freeze leaves it out)."""
        self.trainable = [p for p in self.params if not p.static]
        fired = self.network.firing_order  # a freeze or a thaw since stopped a fit at step 1
        if fired is not None and set(fired) != {p.name for p in self.trainable}:
            self.network.reset_firing_order()
        # tables of which a parameter server moves only a batch's rows: fetch them first
        self.sparse = self.sync.fetches_rows and any(p.sparse_rows for p in self.trainable)

    @property
    def writes_files(self) -> bool:
        return self.out_dir is not None and self.sync.is_chief

    def _metrics_writer(self) -> MetricsWriter | None:
        """The chief's metrics log, whose first line says which run it is (its settings,
        optimizer and job id: a sweep's logs told apart); None where this rank writes none."""
        if not self.writes_files:
            return None
        start = self.checkpoints.start
        run = run_line(self.checkpoints.facts, self.sync.optimizer_config(), start.job_id)
        return MetricsWriter(self.out_dir / METRICS, self.pos.epoch, run=run)

    @property
    def global_batch(self) -> int:
        return self.sync.world_size * self.batch_size * self.accumulate

    # -- one step -------------------------------------------------------------------------------
    def _forward(self, arrays: Arrays | SequenceSet, index: np.ndarray) -> tuple[Any, Any]:
        """Forward a batch; returns its summed loss and right answers (0 without accuracy).

        The rows of ``sparse_rows`` tables the batch reads are fetched through the sync first.
        The loss is summed over the rows it averages: a sequence set's count, checked.
        """
        ragged = isinstance(arrays, SequenceSet)
        feeds = arrays.feeds(index, self.dtype) if ragged else feeds_of(arrays, index, self.dtype)
        if self.sparse:
            self.sync.prefetch(self.network.rows_needed(feeds))
        try:
            outputs = self.network.forward(feeds)
        except LayerError:  # a loss's labels of the other kind: said in the set's words
            if ragged:
                wiring = self.network.wiring[self.loss_name]
                refuse_misplaced_labels(arrays, self.network[self.loss_name], wiring, feeds, index)
            raise
        if self.monitor is not None:  # evaluating is progress too: a long test set is no stall
            self.monitor.beat()
        mean = outputs[self.loss_name].value
        if mean.ndim:  # backward would seed every element: a whole epoch of wrong steps
            raise LayerError(
                f"the loss layer {self.loss_name!r} outputs shape {tuple(mean.shape)}, not the "
                "scalar mean loss the Trainer trains on (reduce it to its mean)"
            )
        loss_layer = self.network[self.loss_name]
        count = loss_rows_checked(arrays, loss_layer, index) if ragged else len(index)
        loss = wide_loss(loss_layer, mean) * count  # a 16-bit loss's float32 mean, unrounded
        return loss, (0 if self.accuracy is None else right_answers(outputs, self.accuracy))

    def train_step(
        self, arrays: Arrays | SequenceSet, passes: list[np.ndarray]
    ) -> tuple[Any, Any, int]:
        """One optimizer step over this rank's passes; returns (loss sum, right, examples).

        ``examples`` counts the rows the loss averages over: a sequence set's tokens (or its
        sequences, for a loss of one row per sequence: :func:`~distconv.sequence_set.counted`).
        """
        return train_step(self, arrays, passes)

    # -- evaluation -----------------------------------------------------------------------------
    def evaluate(
        self, arrays: Arrays | Dataset | SequenceSet, batch_size: int = 256
    ) -> dict[str, float]:
        """Mean loss (and accuracy) over the whole set, each rank forwarding its stride share
        (of a sequence set: of its sequences, ``batch_size`` of them a batch, the means over
        the rows the loss averages, its tokens).

        Across processes call it after :meth:`fit` and before the sync's ``close()``: the ranks
        sum their shares, which MPISync and PServerSync refuse before setup (nothing sent),
        when the ranks' parameters may still differ, and every sync refuses once closed
        (``SyncError``, naming ``Trainer.evaluate()``). Ids past a layer's range, and images
        of other channels than the convolution that reads them, are refused first, as fit
        refuses them (``DataError``: :func:`~distconv.data_checks.check_evaluation_set`)."""
        refuse_closed_trainer(self.sync, "evaluate")  # named so, not the sync's allreduce_sum
        check_count("batch_size", batch_size, 1)  # a negative one ran no batch: a loss of 0
        arrays = counted(self.network, self.loss_name, as_data_set(arrays))
        if set_length(arrays) == 0:  # a DataError: a script ends on its one line
            named = f" {arrays.name!r}" if isinstance(arrays, SequenceSet) else ""
            raise DataError(f"cannot evaluate on an empty data set{named}")
        check_evaluation_set(self.network, arrays)  # as fit checks its sets: before a batch
        accuracy = self.accuracy is not None
        say_applied_in_part(self, "evaluate() scores")  # a second Ctrl-C's, as fit said
        return evaluate_shares(self._forward, arrays, self.sync, batch_size, accuracy, self.dtype)

    # -- epochs ---------------------------------------------------------------------------------
    def fit(
        self,
        train: Arrays | Dataset | SequenceSet,
        test: Arrays | Dataset | SequenceSet | None = None,
        epochs: int = 1,
        *,
        resume: bool | str = False,
    ) -> list[dict[str, Any]]:
        """Train until ``epochs`` epochs are complete; returns the records of this call's epochs.

        Args:
            train: the whole training set (arrays by feed name, a :class:`Dataset`, or a
                :class:`~distconv.sequence_set.SequenceSet` of ragged sequences).
            test: evaluated after each epoch when given.
            epochs: epochs in all, counting those a resumed checkpoint already holds (0, or
                no more than it holds, trains nothing: a resume that only restores).
            resume: ``False`` starts fresh (refusing a directory that holds a run), ``True``
                continues from the newest complete checkpoint (which must exist, in ``out_dir``),
                ``"auto"`` continues when one exists and starts fresh otherwise, and
                ``"overwrite"`` deletes a previous run's files first. A restart (told by
                ``start``) given ``False`` or ``"overwrite"`` continues the run its launch
                began instead, or starts it afresh where no checkpoint of it is complete.
                Without ``out_dir`` a Trainer that has trained holds its last position in
                memory: ``True`` and ``"auto"`` continue from it (with the weights and the
                sync's optimizer state, as from a checkpoint), and ``False`` starts the epochs
                again from the trained weights and optimizer state (the schedule, shuffle
                order and epoch numbers anew), which a warning says once.

        Raises:
            CheckpointError: no checkpoint (or output directory) to resume from, one from a
                different run, an output directory that holds a run and no instruction what to
                do with it, or a checkpoint that cannot be read now (``CheckpointReadError``).
            TrainingError: the loss became NaN or infinite.
            ValueError: ``epochs`` is not an int >= 0.
            DataError: the test set is empty, or one example of it does not go through the
                model (checked before training; one of the training set does), or its float
                examples have another shape than the training set's while the model's outputs
                do not, a set holds
                NaN or infinity (where the network checks its feeds: ``check_finite``), or a
                label of either set lies outside the classes its softmax cross-entropy scores
                (:func:`~distconv.data_checks.refuse_labels_past_classes`), or a sequence set's
                count is not the rows its loss reads
                (:func:`~distconv.sequence_set.loss_rows_checked`).
            Preempted: SIGTERM or the first Ctrl-C (SIGINT) arrived, in this fit or after an
                earlier one's last stop check; a checkpoint was saved first (see
                :mod:`distconv.stop_request`).
        """
        refuse_closed_trainer(self.sync, "fit")  # before a file is read: named so, not setup
        check_resume(resume)
        check_count("epochs", epochs, 0)  # -3 trained nothing, 1.5 two epochs, silently
        self.history = []  # this call's
        # this fit's: a stop one before stopped by is done, one it did not is carried in
        self._stop = StopRequest(announce=self.sync.is_chief)
        restore_handlers = writer = None
        try:
            try:  # maybe on this rank alone: the others would wait in their setup for it
                train, test, sampler, data, state, pos, layers = start_fit(
                    self, train, test, resume
                )
            except Exception as exc:  # not a Ctrl-C: this rank's own error, for the others
                tell_setup_failed(self.sync, exc)
                raise
            self.sync.setup(self.trainable, job_config(self.config, layers), state)
            self._layout.check(self.sync)  # its broadcast_parameters too
            # not setup's: shards keep that, fits vary; a rank waits there for the slowest start
            timed_collective(self.sync, self.sync.all_equal, data)
            check_sets(self.network, self._forward, train, test)  # the ranks agree: all fail alike
            self.pos = share_position(self.sync, pos)
            self._position_data = data["train_data"]  # a resume in memory compares it
            refuse_frozen_resume(self.params, self.pos, self.sync.world_size)
            if self.monitor is not None:
                self.monitor.set_ready()
            restore_handlers = self._stop.install_for_fit()  # the main thread's only
            writer = self._metrics_writer()
            while self.pos.epoch < epochs:
                record, scheme = run_epoch(self, train, test, sampler, self.pos.epoch + 1 == epochs)
                self._layout.check_rows_pushed(self.sync)  # held-back rows: before the checkpoint
                self.history.append(record)
                if writer is not None:  # before the checkpoint: a resume keeps its line
                    writer.write(EpochTally.metrics_line(record, writer.records))
                self.checkpoints.save(self.pos, {}, scheme)
                if self.monitor is not None:  # the epoch end's waits: no step comes after the last
                    self.monitor.record_totals(self.sync.traffic(), self.sync)
                log.info(summary(record, epochs))
            if writer is not None:
                draw_plot(writer, self.out_dir)
        except BaseException as error:  # a Ctrl-C or an error ended it: its own stop not handed on
            self._stop.ended_by(error)
            if writer is not None:  # drawn at a stop, else never left older than the log
                plot_after(error, writer, self.out_dir)
            raise
        finally:
            if restore_handlers is not None:
                restore_handlers()
            self.checkpoints.close()
        return self.history
