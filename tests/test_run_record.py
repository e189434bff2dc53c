"""metrics.jsonl's first line says what reproduces its numbers: beside the run's settings, the
training set's short fingerprint, distconv's build, numpy's version and numpy's BLAS. The
build was only in the checkpoints, which ``--keep-checkpoints`` prunes, and float32 numbers
change in their last bits with numpy or its BLAS. A real Trainer writes a real log here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from distconv.build_identity import build_id
from distconv.checkpoint import load_checkpoint
from distconv.data import as_arrays, fingerprint, split, synthetic
from distconv.init import set_seed
from distconv.kernels.blas import numpy_blas
from distconv.kernels.parallel import blas_libraries
from distconv.metrics import RUN
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.run_line import SOFTWARE, run_line, software, software_changed
from distconv.sync import create_sync
from distconv.trainer import Trainer


def _first_run(out: Path) -> dict:
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[0])[RUN]


def test_a_trainer_s_first_line_says_its_build_numpy_blas_and_training_set(tmp_path: Path):
    train, test = split(synthetic(n=96, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(2, 4), hidden=8)
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    trainer = Trainer(net, sync, 16, out_dir=tmp_path / "run", progress=False)
    trainer.fit(train, test, epochs=1)

    run = _first_run(tmp_path / "run")
    assert run["build"] == build_id() and run["numpy"] == np.__version__, run
    assert isinstance(run["blas"], str) and run["blas"], run
    # the fingerprint the job check and a resume compare: the one the checkpoint records
    assert run["train_data"] == fingerprint(as_arrays(train), np.float32), run
    checkpoint = load_checkpoint(trainer.checkpoints.run.latest().part("chief"))
    assert run["train_data"] == checkpoint.extra["train_data"] and run["build"] == checkpoint.build
    assert "layers" not in run  # long, and the model's name says it


def test_the_run_line_ends_with_the_software_whatever_the_facts():
    said = run_line({"data": "digits", "train_data": {"examples": 3}}, {"name": "sgd"}, None)
    assert said["train_data"] == {"examples": 3}
    assert {key: said[key] for key in SOFTWARE} == software()
    json.dumps(said)  # JSON-able throughout


def test_numpy_blas_names_numpy_s_own_library_its_version_and_kernels():
    numpy_dir = str(Path(np.__file__).parent)
    ours = [lib for lib in blas_libraries() if str(lib.filepath).startswith(numpy_dir)]
    if not ours:  # a numpy built against a system BLAS: the first loaded one is named
        ours = blas_libraries()
    said = numpy_blas()
    assert said is not None and said.split()[:2] == [ours[0].internal_api, ours[0].version]
    if getattr(ours[0], "architecture", None):  # OpenBLAS's kernels, picked by the CPU
        assert ours[0].architecture in said.split()


def test_a_resume_under_other_software_is_told_from_one_under_the_same():
    ours = run_line({"seed": 0}, {"name": "adam"}, "sweep-7")
    assert not software_changed(ours, {**ours, "job": "sweep-8"})  # another job: the same code
    for key in SOFTWARE:
        assert software_changed({**ours, key: "other"}, ours), key
    assert software_changed(None, ours)  # a log whose lines said no run: now they do
    assert software_changed({"seed": 0}, ours)  # a log of an older distconv: no software said
