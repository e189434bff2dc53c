"""A run records the sync scheme it ran (:func:`~distconv.sync.description.sync_scheme`): a
local run's first metrics line says so, and an MPI rank's its wire dtype and buckets, as its
start line does. The parameter-server case, whose mode comes from the shards, is
tests/sync/ps/test_async_scheme_recorded.py."""

from __future__ import annotations

import enum
import json
import logging
import signal
import sys
import threading

import numpy as np
import pytest

from distconv import strict_json
from distconv.checkpoint import load_checkpoint, save_checkpoint
from distconv.epoch_tally import EpochTally, scheme_in_force
from distconv.init import set_seed
from distconv.job import scheme_text
from distconv.metrics import read_metrics
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Preempted
from distconv.run_dir import RunDirectory
from distconv.sync.description import sync_scheme
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.signals import signal_at

pytestmark = pytest.mark.timeout(60)


def _small_net():
    set_seed(0)
    return lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)


#: 16 examples: two steps of 8 an epoch
DATA = {
    "image": np.random.default_rng(0).standard_normal((16, 1, 8, 8)),
    "label": np.random.default_rng(1).integers(0, 4, 16),
}


@pytest.fixture
def mpi_alone(monkeypatch):
    """MPISync's single-rank stand-in (no MPI_Init in the test process): the class."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    from distconv.sync.mpi import MPISync

    return MPISync


def test_a_local_runs_first_metrics_line_names_its_sync(tmp_path):
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    trainer = Trainer(_small_net(), sync, 8, out_dir=tmp_path / "run", progress=False)
    trainer.fit(DATA, epochs=2)
    first, second = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert first["scheme"] == {"sync": "local"} and "scheme" not in second
    # and each checkpoint's metadata, which a resume compares
    ckpt = load_checkpoint(trainer.checkpoints.run.latest().part("chief"))
    assert ckpt.extra["scheme"] == {"sync": "local"}


class _Mode(enum.Enum):
    ASYNC = "async"


class _OwnSync(LocalSync):
    """A strategy of one's own: a ``describe()`` of its own meaning, a ``mode`` that is no
    JSON, an ``overlap`` that is a method."""

    def __init__(self, optimizer) -> None:
        super().__init__(optimizer)
        self.mode = _Mode.ASYNC

    def describe(self) -> str:
        return "my own sync"

    def overlap(self) -> bool:
        return True


def test_a_strategy_of_ones_own_is_recorded_not_a_failed_run(tmp_path):
    """Its record failed the run at epoch 1's end, before the epoch's checkpoint:
    ``dict()`` of a ``describe()`` that says a string, and a line json could not write."""
    sync = _OwnSync(create_optimizer("sgd", lr=0.05))
    Trainer(_small_net(), sync, 8, out_dir=tmp_path / "run", progress=False).fit(DATA, epochs=1)
    (first,) = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert first["scheme"] == {"sync": "_OwnSync", "mode": "_Mode.ASYNC"}
    # a class of one's own named as a transport's is not that transport
    named_so = type("LocalSync", (_OwnSync,), {})(create_optimizer("sgd"))
    assert sync_scheme(named_so)["sync"] == "LocalSync"


def test_a_setting_that_is_a_class_is_recorded_not_left_out():
    """``grad_dtype=np.float16`` (a class: callable) was left out as a method would be,
    so a float16 wire and the gradients' own recorded the same scheme."""
    sync = _OwnSync(create_optimizer("sgd"))
    sync.grad_dtype = np.float16
    assert sync_scheme(sync) == {"sync": "_OwnSync", "mode": "_Mode.ASYNC", "grad_dtype": "float16"}


def test_an_infinite_bound_is_recorded_as_its_line_says_it():
    """A float ``inf`` stayed one in the scheme, but its metrics line says ``null``: a resume
    under that very scheme took it for another and recorded it again."""
    sync = _OwnSync(create_optimizer("sgd"))
    sync.max_staleness = float("inf")
    record = {"epoch": 2, "scheme": sync_scheme(sync)}
    line = json.loads(strict_json.dumps(record))  # as read back from metrics.jsonl
    assert record["scheme"]["max_staleness"] == "Infinity"
    assert EpochTally.metrics_line(record, [line]) == {"epoch": 2}


class _Compressor:
    """A setting that says nothing of itself: its default str has its address."""


def test_a_setting_without_a_str_of_its_own_is_the_same_scheme_in_every_process():
    """Its str has its address, another in each process: a resume under the run's own scheme
    took it for another and recorded it again."""
    schemes = []
    for _ in range(2):  # two objects, two addresses: as a run and its resume see it
        sync = _OwnSync(create_optimizer("sgd"))
        sync.overlap = _Compressor()
        schemes.append(sync_scheme(sync))
    assert schemes[0]["overlap"] == "_Compressor"
    record = {"epoch": 2, "scheme": schemes[1]}
    assert EpochTally.metrics_line(record, [{"epoch": 1, "scheme": schemes[0]}]) == {"epoch": 2}


def test_an_mpi_ranks_scheme_names_its_wire_and_buckets(mpi_alone):
    sync = mpi_alone(create_optimizer("sgd"), grad_dtype="bfloat16", bucket_bytes=1 << 18)
    try:
        scheme = sync_scheme(sync)
        assert scheme == {"sync": "mpi", "grad_dtype": "bfloat16", "bucket_bytes": 1 << 18}
        assert scheme_text(scheme) == "mpi sync (grad_dtype bfloat16, bucket_bytes 262144)"
    finally:
        sync.close()


def test_each_start_and_resume_records_the_scheme_it_ran_under(tmp_path, mpi_alone):
    """The first line each start or resume writes has its scheme where it is not the one in
    force (the last line's at or before it that has one). An MPI bfloat16 run resumed locally
    kept line 1's scheme alone, so the resumed epochs read as MPI bfloat16. A
    resume under the same scheme writes an uninterrupted run's lines; a log written before
    schemes were recorded (no line has one) is resumed as before."""
    out = tmp_path / "run"

    def fit(sync, epochs: int) -> list[dict]:
        try:
            trainer = Trainer(_small_net(), sync, 8, out_dir=out, progress=False)
            trainer.fit(DATA, epochs=epochs, resume="auto")
        finally:
            sync.close()
        return read_metrics(out / "metrics.jsonl")

    fit(mpi_alone(create_optimizer("sgd", lr=0.05), grad_dtype="bfloat16"), 1)
    fit(LocalSync(create_optimizer("sgd", lr=0.05)), 2)
    fit(LocalSync(create_optimizer("sgd", lr=0.05)), 3)
    records = fit(mpi_alone(create_optimizer("sgd", lr=0.05)), 4)
    mpi = {"sync": "mpi", "bucket_bytes": 4 << 20, "overlap": False}
    assert [r.get("scheme") for r in records] == [
        {**mpi, "grad_dtype": "bfloat16"},
        {"sync": "local"},
        None,  # resumed under the scheme in force: local, as epoch 2
        mpi,
    ]
    assert scheme_in_force(records[:3]) == {"sync": "local"}  # epoch 3's, as a reader takes it
    old = [{k: v for k, v in r.items() if k != "scheme"} for r in records]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    records = fit(LocalSync(create_optimizer("sgd", lr=0.05)), 5)
    assert records[:4] == old and records[4]["scheme"] == {"sync": "local"}


def test_a_set_or_an_objects_address_is_the_same_scheme_in_every_process():
    """A set's order follows PYTHONHASHSEED and a lock's str has its address: each process
    recorded another scheme, so a resume under the run's own recorded it again."""
    schemes = []
    for _ in range(2):
        sync = _OwnSync(create_optimizer("sgd"))
        sync.overlap, sync.mode = frozenset({"b", "a", "c"}), threading.Lock()
        schemes.append(sync_scheme(sync))
    assert schemes[0]["overlap"] == ["a", "b", "c"]
    assert schemes[0] == schemes[1] and "0x" not in schemes[0]["mode"]


def _stopped_at(trainer: Trainer, step: int, epochs: int, **fit) -> None:
    """Fit until a real SIGTERM after ``step``, which fit's handler turns into a checkpoint."""
    signal_at(trainer, step, signal.SIGTERM)
    with pytest.raises(Preempted, match=f"after step {step}"):
        trainer.fit(DATA, epochs=epochs, **fit)


#: what the resume's warning starts with
SWITCHED = "under another sync scheme than its checkpoint's"


def test_a_resume_under_another_scheme_says_both_and_its_epochs_line_the_earlier(
    tmp_path, mpi_alone, caplog
):
    """A resume under another scheme than its checkpoint's said nothing, and one in the middle
    of an epoch labelled the whole epoch with the new scheme. It warns, naming
    both; the epoch's line keeps the steps' earlier schemes, also across a second resume of
    it, and an epoch begun under the new scheme has no earlier one."""
    out = tmp_path / "run"
    bf16 = {"sync": "mpi", "grad_dtype": "bfloat16", "bucket_bytes": 4 << 20, "overlap": False}
    local = {"sync": "local"}

    def run(sync, epochs: int, stop: int | None = None) -> list[dict]:
        caplog.clear()
        trainer = Trainer(_small_net(), sync, 4, out_dir=out, progress=False)
        try:
            with caplog.at_level(logging.INFO, logger="distconv.resume"):
                if stop is None:
                    trainer.fit(DATA, epochs=epochs, resume="auto")
                else:
                    _stopped_at(trainer, stop, epochs, resume="auto")
        finally:
            sync.close()
        return read_metrics(out / "metrics.jsonl")

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if SWITCHED in r.getMessage()]

    # epoch 2 (steps 5 to 8): steps 5 and 6 in bfloat16 over MPI, then locally
    run(mpi_alone(create_optimizer("sgd", lr=0.05), grad_dtype="bfloat16"), 2, stop=6)
    assert said() == []
    run(LocalSync(create_optimizer("sgd", lr=0.05)), 2, stop=7)
    (line,) = said()
    assert json.dumps(bf16) in line and json.dumps(local) in line and "step 6" in line, line
    run(LocalSync(create_optimizer("sgd", lr=0.05)), 2)  # the checkpoint's own scheme
    assert said() == []
    # the resume's line says the checkpoint's scheme: one need not open the file for it
    assert 'at step 7, 3 steps into epoch 2, written under {"sync": "local"}' in caplog.text
    records = run(mpi_alone(create_optimizer("sgd", lr=0.05), grad_dtype="bfloat16"), 3)
    assert len(said()) == 1  # at epoch 3's start: its line has its scheme, nothing earlier
    assert [r.get("scheme") for r in records] == [bf16, local, bf16]
    assert records[1]["earlier_schemes"] == [{"scheme": bf16, "to_step": 6}]
    assert "earlier_schemes" not in records[0] and "earlier_schemes" not in records[2]
    assert scheme_in_force(records[:2]) == local  # the one epoch 3's would go on from


@pytest.mark.parametrize("config_scheme", [None, {"name": "cosine", "warmup": 5}])
def test_a_checkpoint_without_a_scheme_labels_its_steps_as_run_under_an_unrecorded_one(
    tmp_path, mpi_alone, caplog, config_scheme
):
    """An older distconv's checkpoint records no scheme: it loads, and no scheme is said to be
    its own. Nor where its extra has a config's own ``scheme`` (a mapping): it was read
    as the sync scheme, "written under {"name": "cosine", ...}", warned of and listed as
    earlier. Resumed in the middle of its epoch under MPI, that epoch's line was labelled with
    MPI alone, though its first two steps ran under the old run's scheme: they
    are listed under an unrecorded scheme (null), also after a second resume of the epoch."""
    out = tmp_path / "run"
    _stopped_at(Trainer(_small_net(), LocalSync(create_optimizer("sgd", lr=0.05)), 4,
                        out_dir=out, progress=False), 2, 1)  # fmt: skip
    part = RunDirectory(out, 3).latest().part("chief")
    old = load_checkpoint(part)
    unwritten = ("scheme", "facts_form", "layers", "world_size")  # before schemes were recorded
    extra = {k: v for k, v in old.extra.items() if k not in unwritten}
    extra.update({} if config_scheme is None else {"scheme": config_scheme})
    save_checkpoint(part, [Parameter(k, v) for k, v in old.params.items()], old.optim_state,
                    step=old.step, epoch=old.epoch, seed=old.seed, optimizer=old.optimizer,
                    extra=extra)  # fmt: skip
    for stop in (3, None):  # epoch 1 (steps 1 to 4): resumed at 2, stopped at 3, resumed again
        sync = mpi_alone(create_optimizer("sgd", lr=0.05))
        caplog.clear()
        try:
            with caplog.at_level(logging.INFO, logger="distconv.resume"):
                trainer = Trainer(_small_net(), sync, 4, out_dir=out, progress=False)
                if stop is None:
                    (record,) = trainer.fit(DATA, epochs=1, resume=True)
                else:
                    _stopped_at(trainer, stop, 1, resume=True)
                    resumed = "at step 2, 2 steps into epoch 1, written under an unrecorded scheme"
                    assert resumed in caplog.text
        finally:
            sync.close()
    assert SWITCHED not in caplog.text and "cosine" not in caplog.text
    assert record["scheme"] == {"sync": "mpi", "bucket_bytes": 4 << 20, "overlap": False}
    assert record["earlier_schemes"] == [{"scheme": None, "to_step": 2}]
    (line,) = read_metrics(out / "metrics.jsonl")
    assert line.pop("run")["optimizer"]["name"] == "sgd"  # which run: its first line
    assert line == record


def test_an_epoch_begun_under_the_new_scheme_keeps_no_earlier_one_across_its_checkpoints(
    tmp_path, mpi_alone
):
    """A resume at an epoch's start under another scheme wrote the checkpoint's scheme into
    the epoch's mid-epoch checkpoints as an earlier one (the position's schemes outlived the
    epoch boundary), so a second resume labelled steps of the epoch before with it:
    epoch 2 ran all its steps in bfloat16 over MPI, yet its line said local to step 4."""
    out = tmp_path / "run"
    local = LocalSync(create_optimizer("sgd", lr=0.05))
    Trainer(_small_net(), local, 4, out_dir=out, progress=False).fit(DATA, epochs=1)
    for stop in (6, None):  # epoch 2 (steps 5 to 8): stopped after step 6, then finished
        sync = mpi_alone(create_optimizer("sgd", lr=0.05), grad_dtype="bfloat16")
        trainer = Trainer(_small_net(), sync, 4, out_dir=out, progress=False)
        try:
            if stop is None:
                trainer.fit(DATA, epochs=2, resume="auto")
            else:
                _stopped_at(trainer, stop, 2, resume="auto")
        finally:
            sync.close()
    records = read_metrics(out / "metrics.jsonl")
    assert [r.get("scheme", {}).get("sync") for r in records] == ["local", "mpi"]
    assert "earlier_schemes" not in records[1], records[1]


class _BuggySync(LocalSync):
    """A strategy of one's own whose ``describe()`` hook has a bug inside."""

    def describe(self) -> dict:
        return {"shift": 1 << None}


def test_a_bug_in_describe_is_raised_before_the_first_step():
    """The first call of ``sync_scheme`` of a Trainer run was the first epoch's record: the
    bug surfaced after a whole epoch of training."""
    trainer = Trainer(_small_net(), _BuggySync(create_optimizer("sgd")), 8, progress=False)
    with pytest.raises(TypeError, match="unsupported operand"):
        trainer.fit(DATA, epochs=1)
    assert trainer.pos.step == 0


class _CountedSync(LocalSync):
    """A strategy of one's own that counts the calls of its ``describe()``."""

    calls = 0

    def describe(self) -> dict:
        self.calls += 1
        return {"level": 2}


def test_the_scheme_is_read_once_an_epoch_and_each_checkpoint_records_it(tmp_path):
    """Each checkpoint read the scheme (a ``describe()`` of one's own) anew on the chief, one
    read a step with ``checkpoint_every=1``, though the epoch's tally had read it: once
    an epoch now, every checkpoint of it recording that one."""
    sync = _CountedSync(create_optimizer("sgd"))
    out = tmp_path / "run"
    trainer = Trainer(_small_net(), sync, 8, out_dir=out, checkpoint_every=1, progress=False)
    trainer.fit(DATA, epochs=2)  # two steps an epoch: 4 step checkpoints, 2 at epochs' ends
    assert sync.calls == 2
    for manifest in RunDirectory(out, 3).scan()[0]:
        scheme = load_checkpoint(manifest.part("chief")).extra["scheme"]
        assert scheme == {"sync": "_CountedSync", "level": 2}, manifest
