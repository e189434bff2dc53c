"""``examples/own_sync.py``: a sync strategy of one's own (global-norm gradient clipping, the
updates made at ``finish_step``), written from the contract in docs/architecture.md and
checked against LocalSync, against clipped SGD computed here in numpy, as a script, and
through a checkpoint and resume. The float64 LeNet of the MPI tests, trained for real. Made by
``dist.init(sync=...)``: under mpiexec the script makes MPISync with the same clipping as its
``grad_hook`` instead; under a parameter-server launch its strategy is refused on each worker."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.backend import resolve_dtype
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.description import sync_scheme
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.trainer import Trainer
from tests.child_env import REPO_ROOT, child_env
from tests.launcher.launch_cli import launch
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    global_batches,
    one_step,
    run_mpi,
    small_lenet,
    train,
    trainer_data,
    weights,
)

EXAMPLE = REPO_ROOT / "examples" / "own_sync.py"
#: the script's closing line after one epoch with --max-norm 1: the accuracy, the last norm
RESULT = re.compile(
    r"test accuracy (0\.\d{4}) \(loss \d+\.\d{4}\) after epoch 1, gradient norm (\d+\.\d{3}) "
    r"\(max 1\)\n"
)
_spec = importlib.util.spec_from_file_location("own_sync_example", EXAMPLE)
EX = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(EX)


def _relative_gap(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> float:
    """``|a - b| / |b|``, each the norm over every parameter at once (a bias may be all 0)."""
    assert ours.keys() == theirs.keys()
    a, b = (np.concatenate([w[k].ravel() for k in sorted(w)]) for w in (ours, theirs))
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_an_infinite_max_norm_trains_as_local_sync_does():
    """Nothing clipped, the updates made at finish_step instead of during backward: Adam's
    steps are LocalSync's (its state carried over four steps, the last one uneven)."""
    ends = {}
    for name, sync in [
        ("local", LocalSync(create_optimizer("adam", lr=0.01))),
        ("clip", EX.GlobalNormClipSync(create_optimizer("adam", lr=0.01), math.inf)),
    ]:
        net = small_lenet(seed=3)
        start = weights(net)
        sync.setup(net.parameters())
        train(net, sync)
        ends[name] = weights(net)
        assert sync.state["fc2.weight"]["step"] == 4  # the state LocalSync keeps, moved
    assert _relative_gap(ends["local"], start) > 1e-3  # they trained
    assert _relative_gap(ends["clip"], ends["local"]) <= 1e-12


def test_one_clipped_step_is_sgd_on_the_mean_gradient_scaled_to_max_norm():
    """One step from the same weights: the gradients summed over the batch (a backward with a
    callback that keeps them), averaged, scaled by ``max_norm / norm`` over every parameter,
    and subtracted times the learning rate, all here in numpy."""
    x, y = next(global_batches())
    net = small_lenet(seed=3)
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(lambda param: None, loss="loss", loss_scale=len(y))
    mean = {p.name: p.grad / len(y) for p in net.parameters()}
    norm = math.sqrt(sum(float((g * g).sum()) for g in mean.values()))
    lr, max_norm = 0.5, norm / 4  # a quarter of the step
    expected = {p.name: p.value - lr * (max_norm / norm) * mean[p.name] for p in net.parameters()}

    net = small_lenet(seed=3)
    sync = EX.GlobalNormClipSync(create_optimizer("sgd", lr=lr), max_norm)
    sync.setup(net.parameters())
    one_step(net, sync, x, y)
    assert sync.last_norm == pytest.approx(norm, rel=1e-12)
    assert _relative_gap(weights(net), expected) <= 1e-12
    assert all(not p.grad.any() for p in net.parameters())  # left zero, as the contract says


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_gradient_whose_squares_pass_float16s_range_is_not_clipped_to_nothing(dtype):
    """Gradient sums of 300 over 100 examples: a mean of 3 in each of four elements, a norm of
    6 under a max_norm of 10, so nothing is clipped. Squared and summed in float16, the
    squares (360 000 in all) passed its largest number, 65504: the norm was inf, every
    gradient was multiplied by 10 / inf = 0 and the step updated nothing, without a word
    (a LeNet at batch 256 in float16 lost half its steps so). bfloat16 summed them with 8
    bits of mantissa."""
    param = Parameter("w", np.zeros(4, dtype=resolve_dtype(dtype)))
    sync = EX.GlobalNormClipSync(create_optimizer("sgd", lr=0.1), 10.0)
    sync.setup([param])
    sync.start_step(100)
    param.grad[...] = 300
    sync.on_gradient(param)
    sync.finish_step()
    assert sync.last_norm == pytest.approx(6.0, rel=1e-6)
    assert np.asarray(param.value, dtype=np.float64) == pytest.approx([-0.3] * 4, rel=1e-2)


def test_the_clip_hook_is_recorded_by_its_max_norm_not_by_the_last_norm_it_saw():
    """The scheme a run records (each epoch's, each checkpoint's, compared on resume) names
    the hook's setting alone. With ``last_norm`` among its fields, every checkpoint recorded
    the norm of the step before it, and a resume under mpiexec warned of "another sync
    scheme than its checkpoint's" (NaN now, the last norm then) where nothing had changed."""
    hook = EX.ClipHook(1.0)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), grad_hook=hook)
    before = sync_scheme(sync)
    param = Parameter("w", np.zeros(4))
    param.grad[...] = 8.0  # a norm of 16 over one example: clipped
    hook([param], 1)
    assert hook.last_norm == 16.0 and param.grad == pytest.approx([0.5] * 4)
    assert sync_scheme(sync) == before
    assert before["grad_hook"] == {"class": "ClipHook", "fields": {"max_norm": 1.0}}


def test_the_strategy_records_its_max_norm_so_a_resume_with_another_is_a_scheme_change():
    """Its scheme named the class alone (``{"sync": "GlobalNormClipSync"}``), so a resume with
    another ``--max-norm`` changed the training without the warning another scheme gives."""
    schemes = [sync_scheme(EX.GlobalNormClipSync(create_optimizer("sgd"), n)) for n in (1, 0.5)]
    assert schemes[0] == {"sync": "GlobalNormClipSync", "max_norm": 1.0}
    assert schemes[1] == {"sync": "GlobalNormClipSync", "max_norm": 0.5}
    unclipped = sync_scheme(EX.GlobalNormClipSync(create_optimizer("sgd")))
    assert unclipped == {"sync": "GlobalNormClipSync", "max_norm": "Infinity"}


def test_a_gradient_outside_a_step_or_after_close_is_refused_and_an_abandoned_step_is_not():
    """The held gradients are refused where LocalSync refuses its own; a step abandoned before
    its finish_step updated nothing, so the next one starts (LocalSync's own refusal of a step
    applied in part would have named it); a close with a step open is refused as LocalSync's
    is, and the gradient after it named as arriving after close."""
    net = small_lenet(seed=3)
    sync = EX.GlobalNormClipSync(create_optimizer("sgd", lr=0.1), 1.0)
    sync.setup(net.parameters())
    before = weights(net)
    param = net.parameters()[0]
    with pytest.raises(SyncError, match=f"gradient of '{param.name}' arrived outside a step"):
        sync.on_gradient(param)
    x, y = next(global_batches())
    sync.start_step(len(y))
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=len(y))
    sync.abandon_step()
    assert _relative_gap(weights(net), before) == 0  # nothing applied
    with pytest.raises(SyncError, match=f"gradient of '{param.name}' arrived outside a step"):
        sync.on_gradient(param)  # after abandon_step, as LocalSync says it
    for p in net.parameters():
        p.grad[...] = 0  # what the next setup would do
    one_step(net, sync, x, y)
    assert _relative_gap(weights(net), before) > 0
    sync.start_step(len(y))
    with pytest.raises(SyncError, match=r"closed in the middle of step"):
        sync.close()  # a step's backward still running: refused, yet closed all the same
    with pytest.raises(SyncError, match=f"gradient of '{param.name}' arrived after close"):
        sync.on_gradient(param)


def _fit(out, epochs: int, resume: bool = False) -> dict[str, np.ndarray]:
    """Momentum, clipped hard (every step), 3 steps an epoch, a checkpoint after each."""
    sync = EX.GlobalNormClipSync(create_optimizer("momentum", lr=0.1), 0.05)
    trainer = Trainer(small_lenet(seed=3), sync, 16, out_dir=out, progress=False)
    trainer.fit(trainer_data(), epochs=epochs, resume=resume)
    assert sync.last_norm > sync.max_norm  # the steps were clipped
    return weights(trainer.network)


def test_a_resumed_run_ends_with_the_weights_of_one_never_stopped(tmp_path):
    """Its state is LocalSync's (the velocity): saved and restored, a run stopped after its
    first epoch and resumed ends where one that went straight through does."""
    straight = _fit(tmp_path / "straight", 2)
    _fit(tmp_path / "stopped", 1)
    resumed = _fit(tmp_path / "stopped", 2, resume=True)
    assert _relative_gap(resumed, straight) <= 1e-12
    assert _relative_gap(straight, _fit(None, 1)) > 1e-3  # the second epoch moved them


@pytest.mark.timeout(60)
def test_the_script_trains_on_the_digits_and_prints_its_accuracy(tmp_path):
    """``python examples/own_sync.py --epochs 1``: exit 0 and one closing line, the test
    accuracy the run's metrics recorded, well above a guess's 0.1."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs", "1", "--max-norm", "1", "--out", "run"],
        env=child_env(OMP_NUM_THREADS="1"), cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    said = RESULT.fullmatch(proc.stdout)
    assert said, proc.stdout
    (record,) = [line for line in (tmp_path / "run" / "metrics.jsonl").open() if '"epoch"' in line]
    assert float(said[1]) == pytest.approx(float(re.search(r'"test_acc": ([\d.]+)', record)[1]),
                                           abs=5e-5)  # fmt: skip
    assert float(said[1]) > 0.3


def _script(*args: str, mpi: bool = False) -> subprocess.CompletedProcess:
    """``examples/own_sync.py ARGS``, alone or under ``mpiexec -n 2``."""
    command = [sys.executable, *(["-m", "mpi4py"] if mpi else []), str(EXAMPLE), *args]
    if mpi:
        return run_mpi(["-n", "2", *command], timeout=60)
    return subprocess.run(command, env=child_env(OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=60)  # fmt: skip


@pytest.mark.timeout(120)
@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_under_mpiexec_two_ranks_clip_in_mpisyncs_hook_as_one_process_clips(tmp_path):
    """``mpiexec -n 2 python -m mpi4py examples/own_sync.py``: MPISync with the clipping as its
    grad_hook (init refused the strategy, which trains alone, before the hook existed); the
    chief alone says how the run ended, and 2 ranks x 16 land where 1 process x 32 does, up
    to float32's rounding of the sums."""
    args = ("--epochs", "1", "--max-norm", "1", "--out")
    two = _script(*args, str(tmp_path / "two"), "--batch-size", "16", mpi=True)
    one = _script(*args, str(tmp_path / "one"), "--batch-size", "32")
    for done in (two, one):
        assert done.returncode == 0, done.stderr
    said = [RESULT.fullmatch(done.stdout) for done in (two, one)]
    assert all(said), (two.stdout, one.stdout)  # one closing line each: the chief's
    assert float(said[0][1]) == pytest.approx(float(said[1][1]), abs=0.01)
    assert float(said[0][2]) == pytest.approx(float(said[1][2]), rel=1e-3)  # the last norm


def test_under_a_parameter_server_launch_the_strategy_that_trains_alone_is_refused(tmp_path):
    """``distconv-launch local --workers 2``: two workers and a shard, no MPI. The script clips
    across ranks only under mpiexec (MPISync's hook); here its own strategy is refused, on
    each worker, as one that trains alone. Choosing by the world size alone, it made an
    MPISync, refused as "MPISync says rank 0 of 1 ... it trains alone ... make a strategy of
    several ranks": the framework's own MPI transport, blamed for a launch without MPI."""
    done = launch(
        "local", "--workers", "2", "--servers", "1", "--insecure", "--run-dir",
        str(tmp_path / "job"), "--", str(EXAMPLE), "--epochs", "1", cwd=tmp_path, timeout=60,
    )  # fmt: skip
    said = re.findall(
        r"\[worker ([01])\] own_sync\.py: error: RuntimeConfigError: (\w+) says rank 0 of 1",
        done.stdout,
    )
    # the first to fail stops the other, which may not have said its own line by then
    assert said and {name for _, name in said} == {"GlobalNormClipSync"}, done.stdout + done.stderr
    assert "MPISync" not in done.stdout + done.stderr
    assert done.returncode == 1, done.stderr
