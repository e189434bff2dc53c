"""metrics.jsonl says which run it is: its first line carries the run's settings and job id
(``"run"``), as it carries ``scheme``. A sweep's logs said no learning rate, optimizer, seed,
batch size or job, so logs collected from several hosts, or of a reused ``--out``, could not
be told apart. Real files; the readers of the log read it as before."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.metrics import RUN, MetricsWriter, plot_metrics, read_metrics
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.run_files import first_epoch_at_most
from distconv.run_line import run_line, software
from distconv.sync import create_sync
from distconv.trainer import Trainer

ADAM = {"name": "adam", "lr": 0.01, "beta1": 0.9}
FACTS = {"data": "digits", "seed": 0, "batch_size": 32, "lr_decay": Decimal("0.9")}
FACTS_AND_MORE = {**FACTS, "layers": {"fc1": "..."}, "train_data": {"examples": 384}}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_run_line_says_the_settings_optimizer_and_job_and_leaves_the_long_facts_out():
    said = run_line(FACTS_AND_MORE, ADAM, "sweep-7")
    assert said == {
        "data": "digits",
        "seed": 0,
        "batch_size": 32,
        "lr_decay": {"class": "Decimal", "text": "0.9"},  # its JSON form, as a checkpoint's
        "train_data": {"examples": 384},  # short: the job check's fingerprint
        "optimizer": ADAM,
        "job": "sweep-7",
        **software(),  # build, numpy, BLAS: what computed the numbers
    }
    assert "layers" not in said
    json.dumps(said)  # JSON-able throughout


def test_the_first_line_of_a_log_carries_the_run_and_the_others_do_not(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    writer = MetricsWriter(path, run=run_line(FACTS, ADAM, "sweep-7"))
    writer.write({"epoch": 1, "train_loss": 1.0, "test_loss": 0.9})
    writer.write({"epoch": 2, "train_loss": 0.5, "test_loss": 0.6})
    first, second = _lines(path)
    assert first[RUN]["optimizer"]["lr"] == 0.01 and first[RUN]["job"] == "sweep-7"
    assert first[RUN]["seed"] == 0 and first[RUN]["batch_size"] == 32
    assert RUN not in second
    # the log's readers: the run's own scan, its plot, a resume's trim
    assert [r["epoch"] for r in read_metrics(path)] == [1, 2]
    assert not first_epoch_at_most(read_metrics(path))
    assert plot_metrics(read_metrics(path), tmp_path / "metrics.png")
    assert (tmp_path / "metrics.png").stat().st_size > 0


def test_a_resumed_log_keeps_its_first_line_s_run_and_appends_plain_lines(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    first = MetricsWriter(path, run=run_line(FACTS, ADAM, "sweep-7"))
    for epoch in (1, 2):
        first.write({"epoch": epoch, "train_loss": 1.0 / epoch})
    resumed = MetricsWriter(path, keep_through_epoch=1, run=run_line(FACTS, ADAM, "sweep-8"))
    resumed.write({"epoch": 2, "train_loss": 0.4})
    resumed.write({"epoch": 3, "train_loss": 0.3})
    lines = _lines(path)
    assert [line["epoch"] for line in lines] == [1, 2, 3]
    assert lines[0][RUN]["job"] == "sweep-7"  # the run it began; a resume continues it
    assert [RUN in line for line in lines] == [True, False, False]


def test_a_resume_under_another_build_says_its_own_run_on_its_first_line(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    then = {**run_line(FACTS, ADAM, "sweep-7"), "build": "0.1.0+0000000000000000"}
    first = MetricsWriter(path, run=then)
    for epoch in (1, 2):
        first.write({"epoch": epoch, "train_loss": 1.0 / epoch})
    now = run_line(FACTS, ADAM, "sweep-7")
    resumed = MetricsWriter(path, keep_through_epoch=2, run=now)
    resumed.write({"epoch": 3, "train_loss": 0.3})
    resumed.write({"epoch": 4, "train_loss": 0.2})
    lines = _lines(path)
    assert [line.get(RUN) for line in lines] == [then, None, now, None]
    assert [r["epoch"] for r in read_metrics(path)] == [1, 2, 3, 4]


def test_the_run_in_force_is_the_last_kept_line_s_not_the_first_s(tmp_path: Path):
    """A resume under the software of a resume before it, whose run line it keeps, says no run
    again; one from before that switch, under the later software, says its own again."""
    path = tmp_path / "metrics.jsonl"
    then, now = {**run_line(FACTS, ADAM, "j"), "numpy": "1.26.4"}, run_line(FACTS, ADAM, "j")
    MetricsWriter(path, run=then).write({"epoch": 1, "train_loss": 1.0})
    switched = MetricsWriter(path, keep_through_epoch=1, run=now)
    switched.write({"epoch": 2, "train_loss": 0.5})  # carries now: another numpy
    again = MetricsWriter(path, keep_through_epoch=2, run=now)
    again.write({"epoch": 3, "train_loss": 0.3})
    assert [line.get(RUN) for line in _lines(path)] == [then, now, None]
    earlier = MetricsWriter(path, keep_through_epoch=1, run=now)  # from before the switch
    earlier.write({"epoch": 2, "train_loss": 0.4})
    assert [line.get(RUN) for line in _lines(path)] == [then, now]


def test_a_resume_that_kept_no_line_writes_the_run_on_its_first(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("")  # what a run that failed in its first epoch leaves
    resumed = MetricsWriter(path, keep_through_epoch=0, run=run_line(FACTS, ADAM, None))
    resumed.write({"epoch": 1, "train_loss": 1.0})
    (line,) = _lines(path)
    assert line[RUN]["job"] is None and line[RUN]["optimizer"] == ADAM


def test_a_writer_told_no_run_writes_lines_as_before(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    MetricsWriter(path).write({"epoch": 1, "train_loss": 1.0})
    assert _lines(path) == [{"epoch": 1, "train_loss": 1.0}]


def test_a_trainer_s_log_says_its_run_once_across_a_resume(tmp_path: Path):
    """A real Trainer's chief writes the line (its job id None: none given), and a resume that
    keeps the log appends plain lines: one ``run`` line, the first."""
    train, test = split(synthetic(n=96, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)

    def trainer() -> Trainer:
        set_seed(0)
        net = lenet((1, 8, 8), num_classes=4, channels=(2, 4), hidden=8)
        sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
        return Trainer(net, sync, 16, out_dir=tmp_path / "run", progress=False)

    trainer().fit(train, test, epochs=1)
    trainer().fit(train, test, epochs=3, resume=True)
    lines = _lines(tmp_path / "run" / "metrics.jsonl")
    assert [(line["epoch"], RUN in line) for line in lines] == [(1, True), (2, False), (3, False)]
    run = lines[0][RUN]
    assert run["optimizer"]["name"] == "adam" and run["optimizer"]["lr"] == 0.01, run
    assert run["batch_size"] == 16 and run["job"] is None and "layers" not in run, run
