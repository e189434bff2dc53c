"""What a resume checks and keeps: facts that must match, read errors that are not
damage, a second fit on the same Trainer, per-rank rates, frozen parameters, the metrics log."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from distconv import files as run_dir_files
from distconv import run_dir
from distconv.build_identity import build_id
from distconv.checkpoint import CheckpointError, CheckpointReadError, load_checkpoint, save_tensors
from distconv.checkpoint import save_checkpoint as write_checkpoint
from distconv.epoch_tally import epoch_sums
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.resume import Position, Preempted
from distconv.run_dir import RunDirectory, RunDirError
from distconv.run_files import foreign_checkpoints
from distconv.sampler import GlobalBatchSampler
from distconv.sync import create_sync
from distconv.trainer import Trainer

# 240 training examples in batches of 16: 15 steps per epoch


def _net(dtype=None, init_seed=0):
    set_seed(init_seed)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    for p in net.parameters() if dtype else ():
        p.cast(dtype)  # a network built in this dtype, without asking the Trainer for one
    return net


def _trainer(out_dir, net=None, **kw):
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    return Trainer(net or _net(), sync, 16, out_dir=out_dir, progress=False, **kw)


def _weights(trainer):
    return {p.name: p.value.copy() for p in trainer.params}


def _rewrite_extra(manifest, **changes):
    """Rewrite a checkpoint as an older distconv wrote it: other facts, a valid checksum."""
    path = manifest.part("chief")
    ckpt = load_checkpoint(path)
    extra = {k: v for k, v in {**ckpt.extra, **changes}.items() if v is not None}
    params = [_Named(name, value) for name, value in ckpt.params.items()]
    write_checkpoint(
        path,
        params,
        ckpt.optim_state,
        step=ckpt.step,
        epoch=ckpt.epoch,
        seed=ckpt.seed,
        optimizer=ckpt.optimizer,
        extra=extra,
    )


class _Named:
    """What save_checkpoint reads of a parameter: its name and value."""

    def __init__(self, name, value):
        self.name, self.value = name, value


# -- the data set, the model and the network's real dtype must match -----------------------------
def test_a_checkpoint_of_another_data_set_or_model_is_refused(data, tmp_path):
    train, test = data
    facts = {"data": "digits", "model": "lenet"}
    _trainer(tmp_path, config=facts).fit(train, test, epochs=1)
    other_data = _trainer(tmp_path, config={**facts, "data": "mnist"})
    with pytest.raises(CheckpointError, match=r"data: checkpoint 'digits', this run 'mnist'"):
        other_data.fit(train, test, epochs=2, resume=True)
    other_model = _trainer(tmp_path, config={**facts, "model": "resnet"})
    with pytest.raises(CheckpointError, match=r"model: checkpoint 'lenet', this run 'resnet'"):
        other_model.fit(train, test, epochs=2, resume=True)
    assert len(_trainer(tmp_path, config=facts).fit(train, test, epochs=2, resume=True)) == 1


def test_a_checkpoint_without_the_data_and_model_facts_still_resumes(data, tmp_path):
    train, test = data
    first = _trainer(tmp_path)
    first.fit(train, test, epochs=1)
    _rewrite_extra(first.checkpoints.run.latest(), data=None, model=None)  # as older runs wrote it
    again = _trainer(tmp_path, config={"data": "digits", "model": "lenet"})
    assert [r["epoch"] for r in again.fit(train, test, epochs=2, resume=True)] == [2]


def test_a_run_that_records_no_data_set_resumes_a_checkpoint_that_does(data, tmp_path):
    """Trained by `distconv train`, continued from Python: only facts both record compare."""
    train, test = data
    _trainer(tmp_path, config={"data": "digits", "model": "lenet"}).fit(train, test, epochs=1)
    assert [r["epoch"] for r in _trainer(tmp_path).fit(train, test, epochs=2, resume=True)] == [2]


def test_the_real_dtype_is_recorded_and_a_network_of_another_dtype_is_refused(data, tmp_path):
    train, test = data
    first = _trainer(tmp_path)  # dtype=None: the network's own float32
    first.fit(train, test, epochs=1)
    ckpt = load_checkpoint(first.checkpoints.run.latest().part("chief"))
    assert ckpt.extra["dtype"] == "float32"
    wider = _trainer(tmp_path, _net("float64"))
    before = _weights(wider)
    # the run's dtype, once (a clause per parameter before: the symptom, not the cause)
    with pytest.raises(CheckpointError, match=r"dtype: checkpoint 'float32', this run 'float64'"):
        wider.fit(train, test, epochs=2, resume=True)
    assert all(np.array_equal(before[k], v) for k, v in _weights(wider).items())


def test_an_old_checkpoint_with_dtype_none_is_refused_per_parameter_not_cast(data, tmp_path):
    train, test = data
    first = _trainer(tmp_path)
    first.fit(train, test, epochs=1)
    _rewrite_extra(first.checkpoints.run.latest(), dtype="None")  # what dtype=None recorded
    wider = _trainer(tmp_path, _net("float64"))
    with pytest.raises(
        CheckpointError, match=r"'conv1.weight': model dtype float64, checkpoint dtype float32"
    ) as info:
        wider.fit(train, test, epochs=2, resume=True)
    # no fact differs, and the parameters in dtype alone: how to load them all the same
    cast = "cast this model's parameters to float32 first (p.cast('float32') for each), load them"
    assert cast in str(info.value) and "Trainer(dtype='float64')" in str(info.value)
    same = _trainer(tmp_path)  # the same dtype resumes as it always did
    assert [r["epoch"] for r in same.fit(train, test, epochs=2, resume=True)] == [2]


def test_a_refusal_of_another_run_says_too_that_the_parameters_do_not_fit(data, tmp_path):
    """A model of one's own resized (fc1 16 -> 32 wide) resumed with another learning rate:
    the refusal named the learning rate alone, in the same words as with the model unchanged,
    and its advice, to load the weights into a new run, failed on the misfit it never said."""
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1)
    set_seed(0)
    resized = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=32)
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.02))
    wider = Trainer(resized, sync, 16, out_dir=tmp_path, progress=False)
    before = _weights(wider)
    with pytest.raises(CheckpointError) as refused:
        wider.fit(train, test, epochs=2, resume=True)
    said = str(refused.value)
    assert "comes from a different run" in said and "optimizer.lr: checkpoint 0.01" in said
    assert "parameters do not fit this model either (3 differences" in said, said
    assert "fc1.bias" in str(refused.value.__cause__)  # the list, for a traceback
    assert all(np.array_equal(before[k], v) for k, v in _weights(wider).items())


# -- resume=True with nowhere to resume from -----------------------------------------------------
def test_resume_true_without_an_output_directory_is_refused(data):
    train, test = data
    t = _trainer(None)
    before = _weights(t)
    with pytest.raises(CheckpointError, match=r"resume=True \(--resume\) needs an output dir"):
        t.fit(train, test, epochs=1, resume=True)
    assert t.pos.epoch == 0 and t.history == []
    assert all(np.array_equal(before[k], v) for k, v in _weights(t).items())
    assert len(_trainer(None).fit(train, test, epochs=1, resume="auto")) == 1  # nothing to find


# -- a second fit on the same Trainer ------------------------------------------------------------
def test_a_fit_after_preempted_runs_to_the_end_like_an_uninterrupted_run(data, tmp_path):
    train, test = data
    whole = _trainer(tmp_path / "whole")
    whole.fit(train, test, epochs=2)
    t = _trainer(tmp_path / "split")
    step = t.train_step

    def signalled_at_step_5(*args):
        out = step(*args)
        if t.pos.step == 5:
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal, caught by fit's handler
        return out

    t.train_step = signalled_at_step_5
    with pytest.raises(Preempted, match="after step 5"):
        t.fit(train, test, epochs=2)
    t.train_step = step
    history = t.fit(train, test, epochs=2, resume=True)  # no new signal: must not stop
    assert [r["epoch"] for r in history] == [1, 2] and t.pos.step == 30
    for name, value in _weights(whole).items():
        np.testing.assert_array_equal(_weights(t)[name], value, err_msg=name)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_stop_and_resume_anywhere_logs_the_uninterrupted_runs_losses(data, tmp_path, dtype):
    """The fold at a stop restarted the loss sum, and the resumed run added the rest beside
    the sum so far: another rounding, so train_loss differed in its last bits from the
    uninterrupted run's (float64: stops at steps 2 to 12 of 15; float32: most). One rank's
    loss is now one sequence of additions, cut or not."""
    train, test = data
    whole = _trainer(tmp_path / "whole", dtype=dtype, checkpoint_every=4)
    expected = [r["train_loss"] for r in whole.fit(train, test, epochs=2)]
    for at in (2, 6, 11, 17, 20):
        t = _trainer(tmp_path / f"stop{at}", dtype=dtype, checkpoint_every=4)
        step = t.train_step

        def signalled(*args, t=t, step=step, at=at):
            out = step(*args)
            if t.pos.step == at:
                os.kill(os.getpid(), signal.SIGTERM)  # a real signal, caught by fit's handler
            return out

        t.train_step = signalled
        with pytest.raises(Preempted, match=f"after step {at}"):
            t.fit(train, test, epochs=2)
        t.train_step = step
        first = 2 if at > 15 else 1
        history = t.fit(train, test, epochs=2, resume=True)
        assert [r["train_loss"] for r in history] == expected[first - 1 :], at
        logged = (tmp_path / f"stop{at}" / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(line)["train_loss"] for line in logged] == expected, at


@pytest.mark.parametrize("resume", [True, "auto"])
def test_a_checkpoint_of_distconv_0_1_is_named_by_either_resume(data, tmp_path, resume):
    """``--resume`` said "no complete checkpoint in <out>/checkpoints" beside the single
    checkpoint file distconv 0.1 wrote, which only ``--resume auto`` named."""
    train, test = data
    old = _trainer(tmp_path / "old")
    old.fit(train, test, epochs=1)
    out = tmp_path / "run"
    out.mkdir()
    write_checkpoint(out / "checkpoint.safetensors", old.params, step=15, epoch=1)
    with pytest.raises(RunDirError, match=r"older distconv \(checkpoint\.safetensors, format"):
        _trainer(out).fit(train, test, epochs=2, resume=resume)
    assert (out / "checkpoint.safetensors").exists()


def test_fit_returns_only_the_records_of_its_own_call(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    assert [r["epoch"] for r in t.fit(train, test, epochs=1)] == [1]
    history = t.fit(train, test, epochs=2, resume=True)
    assert [r["epoch"] for r in history] == [2] and t.history == history


# -- the per-rank rate after a mid-epoch resume --------------------------------------------------
def test_after_a_mid_epoch_resume_one_rank_rate_equals_the_global_rate(data, tmp_path):
    train, test = data
    first = _trainer(tmp_path, checkpoint_every=7)
    first.fit(train, test, epochs=2)
    for m in first.checkpoints.run.manifests():
        if m.step > 21:  # as if killed after step 21, inside epoch 2
            m.path.unlink()
    again = _trainer(tmp_path, checkpoint_every=7)
    (record,) = again.fit(train, test, epochs=2, resume=True)
    assert record["epoch"] == 2
    assert record["examples_per_second_per_rank"] == [record["examples_per_second"]]
    logged = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1]["examples_per_second_per_rank"] == [logged[-1]["examples_per_second"]]


@pytest.mark.parametrize("done", [0, 3, 7])
def test_each_ranks_examples_before_a_checkpoint_add_up_to_the_global_count(done):
    # 97 examples in global batches of 16: the last step (7) has one example, for rank 0 only
    ranks = [GlobalBatchSampler(97, 8, rank, 2, seed=4) for rank in range(2)]
    pos = Position(epoch=1, step=7 + done, step_in_epoch=done, sums={"examples": 0.0})
    counted = [epoch_sums(pos, sampler).get("rank_examples", 0.0) for sampler in ranks]
    expected = min(97, 16 * done)
    assert sum(counted) == expected
    assert counted == ([8.0 * done] * 2 if done < 7 else [49.0, 48.0])


# -- a parameter frozen since the checkpoint -----------------------------------------------------
def test_one_rank_resumes_with_a_parameter_frozen_since_the_checkpoint(data, tmp_path, caplog):
    train, test = data
    kept = _trainer(tmp_path / "kept", dtype="float64")  # the same process: freeze, go on
    kept.fit(train, test, epochs=1)
    kept.network["conv1"].weight.set_static()
    kept.network.reset_firing_order()  # as the network asks after a freeze
    kept.fit(train, test, epochs=2, resume=True)

    _trainer(tmp_path / "new", dtype="float64").fit(train, test, epochs=1)
    net = _net()
    net["conv1"].weight.set_static()
    again = _trainer(tmp_path / "new", net, dtype="float64")  # a new process
    with caplog.at_level(logging.WARNING, logger="distconv.sync"):
        again.fit(train, test, epochs=2, resume=True)
    assert "not restoring the optimizer state of ['conv1.weight']" in caplog.text
    for name, value in _weights(kept).items():
        np.testing.assert_array_equal(_weights(again)[name], value, err_msg=name)
    for name, state in again.sync.state_dict().items():
        for key, value in state.items():
            np.testing.assert_array_equal(value, kept.sync.state_dict()[name][key])
    assert "conv1.weight" not in again.sync.state_dict()


# -- a read error is not damage ------------------------------------------------------------------
def test_a_read_error_on_the_newest_checkpoint_raises_and_sets_nothing_aside(
    data, tmp_path, monkeypatch
):
    train, test = data
    _trainer(tmp_path, checkpoint_every=7).fit(train, test, epochs=1)  # steps 7, 14, 15
    root = tmp_path / "checkpoints"
    before = sorted(p.name for p in root.iterdir())
    newest = root / "step-00000015" / "chief.safetensors"
    real = Path.read_bytes

    def eio_on_the_newest(self):  # one transient I/O error, as a flaky disk or NFS gives
        if self == newest:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", eio_on_the_newest)
    with pytest.raises(CheckpointReadError, match=r"input/output error; .*retry"):
        _trainer(tmp_path, checkpoint_every=7).fit(train, test, epochs=2, resume="auto")
    assert sorted(p.name for p in root.iterdir()) == before  # nothing renamed
    monkeypatch.undo()
    again = _trainer(tmp_path, checkpoint_every=7)
    assert again.fit(train, test, epochs=1, resume="auto") == [] and again.pos.step == 15


def _eio_on(monkeypatch, method, path):
    """Make ``Path.<method>`` raise a transient I/O error for ``path`` alone."""
    real = getattr(Path, method)

    def failing(self, *args, **kwargs):
        if self == path:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, method, failing)


@pytest.mark.parametrize("what", ["manifest", "part"])
def test_a_read_error_on_the_newest_manifest_or_a_part_raises_and_skips_nothing(
    data, tmp_path, monkeypatch, what
):
    """Passing over an unreadable manifest resumed from an older step: the newer state lost."""
    train, test = data
    _trainer(tmp_path, checkpoint_every=7).fit(train, test, epochs=1)  # steps 7, 14, 15
    root = tmp_path / "checkpoints"
    before = sorted(p.name for p in root.iterdir())
    if what == "manifest":
        _eio_on(monkeypatch, "open", root / "step-00000015.json")
    else:  # looking at the part fails with an error other than "not there"
        part, real_stat = str(root / "step-00000015" / "chief.safetensors"), os.stat

        def eio_stat(path, *args, **kwargs):
            if str(path) == part:
                raise OSError(errno.EIO, os.strerror(errno.EIO), part)
            return real_stat(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", eio_stat)
    pattern = r"manifest .*step-00000015.json cannot be read" if what == "manifest" else (
        r"part .*chief.safetensors cannot be looked at")  # fmt: skip
    with pytest.raises(CheckpointReadError, match=pattern + r": input/output error; .*retry"):
        _trainer(tmp_path, checkpoint_every=7).fit(train, test, epochs=2, resume="auto")
    assert sorted(p.name for p in root.iterdir()) == before
    monkeypatch.undo()
    again = _trainer(tmp_path, checkpoint_every=7)
    assert again.fit(train, test, epochs=1, resume="auto") == [] and again.pos.step == 15


def test_a_read_error_while_pruning_keeps_the_checkpoints_and_training_goes_on(
    data, tmp_path, monkeypatch, caplog
):
    train, test = data
    root = tmp_path / "checkpoints"
    _eio_on(monkeypatch, "open", root / "step-00000005.json")
    t = _trainer(tmp_path, checkpoint_every=5, keep_checkpoints=1)
    with caplog.at_level(logging.WARNING, logger="distconv.checkpoint"):
        assert len(t.fit(train, test, epochs=1)) == 1 and t.pos.step == 15
    assert "not pruning old checkpoints now: checkpoint manifest" in caplog.text
    kept = sorted(p.name for p in root.glob("step-*.json"))
    assert "step-00000005.json" in kept and kept[-1] == "step-00000015.json"
    monkeypatch.undo()
    t.checkpoints.run.acquire()
    t.checkpoints.run._prune()  # readable again: the next save prunes down to the newest
    assert [m.step for m in t.checkpoints.run.manifests()] == [15]


def test_a_manifest_that_is_a_directory_or_not_utf8_is_damage_not_a_read_error(tmp_path):
    run = RunDirectory(tmp_path)
    (run.checkpoint_root / "step-00000001.json").mkdir(parents=True)
    (run.checkpoint_root / "step-00000002.json").write_bytes(b"\xff\xfe\x00garbage")
    found, problems = run.scan()
    assert found == [] and len(problems) == 2
    assert "is a directory" in problems[0] and "is damaged" in problems[1]


@pytest.mark.parametrize("text", ["[]", "null", "3", '"step"'])
def test_a_manifest_of_json_that_is_not_an_object_is_damage(tmp_path, text):
    """Read for its job first, such a manifest raised AttributeError: a traceback for --resume
    auto, and a crash after every later checkpoint (a commit prunes by scanning)."""
    run = RunDirectory(tmp_path)
    run.checkpoint_root.mkdir(parents=True)
    (run.checkpoint_root / "step-00000001.json").write_text(text)
    found, problems = run.scan()
    assert found == [] and len(problems) == 1 and "is damaged (TypeError" in problems[0]


@pytest.mark.parametrize("part", ["3", "null", '["a"]', '{"a": 1}'])
def test_a_manifest_naming_a_part_by_anything_but_a_string_is_damage(tmp_path, part):
    """Looked for on disk outside the manifest's parse, such a part raised TypeError (a Path
    joined with a number): a traceback for --resume auto, a restart given --overwrite, and the
    prune after every later checkpoint."""
    run = RunDirectory(tmp_path)
    run.checkpoint_root.mkdir(parents=True)
    (run.checkpoint_root / "step-00000001.json").write_text(
        f'{{"step": 1, "parts": {{"chief": {part}}}}}'
    )
    found, problems = run.scan()
    assert found == [] and len(problems) == 1 and "is damaged (TypeError" in problems[0]


@pytest.mark.parametrize("parts", ["{}", '{"server": "step-00000001/chief.safetensors"}'])
def test_a_manifest_without_the_chief_part_is_damage(data, tmp_path, caplog, parts):
    """Taken for complete, such a manifest made the resume fail with a KeyError traceback;
    it is passed over for the checkpoint before it, like other damage."""
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=2)
    newest = tmp_path / "checkpoints" / "step-00000030.json"
    newest.write_text(f'{{"step": 30, "parts": {parts}}}')
    found, problems = RunDirectory(tmp_path).scan()
    assert [m.step for m in found] == [15] and len(problems) == 1
    assert "is damaged (KeyError: \"no 'chief' part among" in problems[0]
    with caplog.at_level(logging.WARNING, logger="distconv.resume"):
        _trainer(tmp_path).fit(train, test, epochs=2, resume=True)
    assert "skipping a checkpoint: " in caplog.text


@pytest.mark.parametrize("foreign", ["model_best.pt", "step-00000015/optimizer.pt", "runs/"])
def test_resume_auto_with_no_checkpoint_keeps_another_tools_checkpoints(data, tmp_path, foreign):
    """With no checkpoint to resume, --resume auto (which the refusal of a used directory
    suggests) deleted the whole checkpoints/ directory, another tool's files included.
    It now refuses, naming them, and deletes nothing."""
    train, test = data
    path = tmp_path / "checkpoints" / foreign
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir() if foreign.endswith("/") else path.write_text("precious")
    with pytest.raises(
        RunDirError, match=r"holds files that no distconv run without one leaves \(.*(pt|runs)\)"
    ):
        _trainer(tmp_path).fit(train, test, epochs=1, resume="auto")
    assert path.exists()
    assert len(_trainer(tmp_path).fit(train, test, epochs=1, resume="overwrite")) == 1


def test_resume_auto_still_clears_what_a_run_without_a_checkpoint_left(data, tmp_path):
    """A part without its manifest (the chief's, or a shard's where the shards' directory is
    this one), an empty step directory and the temporary files of cut writes are a run that
    never completed a checkpoint: --resume auto starts afresh over them."""
    train, test = data
    root = tmp_path / "checkpoints"
    (root / "step-00000015").mkdir(parents=True)
    (root / "step-00000015" / "chief.safetensors").write_bytes(b"whole, but no manifest")
    (root / "step-00000015" / ".chief.safetensors.abc123.tmp").write_bytes(b"cut")
    (root / "step-00000030").mkdir()
    (root / ".step-00000015.json.x1y2.tmp").write_text("{")
    (root / "pserver-shard0-step15.safetensors").write_bytes(b"a shard's part, written first")
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1, "step": 15}\n')
    assert len(_trainer(tmp_path).fit(train, test, epochs=1, resume="auto")) == 1
    assert sorted(p.name for p in root.iterdir()) == ["step-00000015", "step-00000015.json"]


@pytest.mark.parametrize(
    "files",
    [
        {"metrics.jsonl": '{"epoch": 1, "step": 15}\n{"epoch": 2, "step": 30}\n'},
        {"metrics.jsonl": '{"epoch": 4, "step": 60}\n'},
        {"metrics.jsonl": '{"epoch": true, "step": 60}\n'},
        {"metrics.jsonl": "loss=0.3 acc=0.91\nloss=0.2 acc=0.93\n"},
        {"metrics.jsonl": '{"epoch": 1}\n', "metrics.png": "a plot"},
        {"metrics.jsonl/": "", "metrics.jsonl/part-0": "another tool's"},
    ],
)
def test_resume_auto_with_no_checkpoint_keeps_metrics_no_unfinished_run_leaves(
    data, tmp_path, files
):
    """A run that never completed a checkpoint leaves at most its first epoch's line (written
    before that epoch's checkpoint) and no plot (drawn after the last). More, or another tool's
    lines, or a finished run whose checkpoints were deleted, were deleted by --resume auto;
    now it refuses, naming them."""
    train, test = data
    for name, text in files.items():
        (tmp_path / name).mkdir() if name.endswith("/") else (tmp_path / name).write_text(text)
    named = "|".join(n.rstrip("/").replace(".", r"\.") for n in files)
    with pytest.raises(RunDirError, match=rf"no distconv run without one leaves \(.*({named})"):
        _trainer(tmp_path).fit(train, test, epochs=1, resume="auto")
    for name, text in files.items():
        assert (
            (tmp_path / name).is_dir()
            if name.endswith("/")
            else (tmp_path / name).read_text() == text
        )


def test_resume_auto_with_no_checkpoint_and_unreadable_metrics_says_so(data, tmp_path, monkeypatch):
    """As root, no permission keeps a file from being read here: the read fails by hand."""
    train, test = data
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1, "step": 15}\n')

    def unreadable(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(run_dir, "read_metrics", unreadable)
    with pytest.raises(RunDirError, match=r"metrics.jsonl cannot be read \(.*ermission denied"):
        _trainer(tmp_path).fit(train, test, epochs=1, resume="auto")
    assert (tmp_path / "metrics.jsonl").read_text() == '{"epoch": 1, "step": 15}\n'


@pytest.mark.timeout(120)
def test_a_checkpoints_link_to_nowhere_is_named_not_file_exists(data, tmp_path):
    """``out/checkpoints -> /bigdisk/ckpts`` with the disk unmounted: the first checkpoint, an
    epoch in, failed as ``[Errno 17] File exists: 'out/checkpoints'``. The start
    names it now, before its first epoch; a save whose disk went since names it too."""
    train, test = data
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").symlink_to(tmp_path / "bigdisk" / "ckpts")
    with pytest.raises(RunDirError, match=r"checkpoints links to .*bigdisk/ckpts, which is not"):
        _trainer(tmp_path / "run").fit(train, test, epochs=1)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    with pytest.raises(RunDirError, match=r"checkpoints is a symlink to .*bigdisk/ckpts, not"):
        RunDirectory(tmp_path / "run").step_dir(12)
    assert not (tmp_path / "bigdisk").exists()


def test_an_output_dir_that_cannot_be_made_names_the_lock_file(data, tmp_path):
    """A full disk, a read-only directory or (here) a file where a directory should be: before,
    a bare OSError naming no file."""
    train, test = data
    (tmp_path / "taken").write_text("a file")
    # the file in the way is named (it was: '.../run.lock: not a directory')
    with pytest.raises(RunDirError, match=r"taken/run cannot be made: .*taken is a file, not a"):
        _trainer(tmp_path / "taken" / "run").fit(train, test, epochs=1)


@pytest.mark.parametrize("text", ["", '{"epoch": 1, "step": 15}\n', '{"epoch": 1, "st'])
def test_resume_auto_clears_the_metrics_a_first_epoch_without_a_checkpoint_left(
    data, tmp_path, text
):
    """Empty, the first epoch's line, or a line torn by a crash mid-write: the run's own."""
    train, test = data
    (tmp_path / "metrics.jsonl").write_text(text)
    records = _trainer(tmp_path).fit(train, test, epochs=1, resume="auto")
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert (
        len(records) == 1 and len(lines) == 1 and json.loads(lines[0])["step"] == records[0]["step"]
    )


# -- the metrics line is on disk before the checkpoint after it ----------------------------------
def test_each_metrics_line_is_synced_before_its_epochs_checkpoint(data, tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    _trainer(tmp_path).fit(*data, epochs=2)
    metrics = os.path.realpath(tmp_path / "metrics.jsonl")
    checkpoints = [i for i, p in enumerate(synced) if "chief.safetensors" in p]
    lines = [i for i, p in enumerate(synced) if p == metrics]
    assert len(lines) == len(checkpoints) == 2
    assert all(line < ckpt for line, ckpt in zip(lines, checkpoints))


def test_a_resume_warns_of_a_metrics_line_lost_before_its_checkpoint(data, tmp_path, caplog):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=2)
    with caplog.at_level(logging.WARNING, logger="distconv.metrics"):
        _trainer(tmp_path).fit(train, test, epochs=3, resume=True)
    assert "has no line" not in caplog.text
    log = tmp_path / "metrics.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:1] + lines[2:]) + "\n")  # epoch 2's line lost in a crash
    with caplog.at_level(logging.WARNING, logger="distconv.metrics"):
        _trainer(tmp_path).fit(train, test, epochs=4, resume=True)
    assert "has no line for epoch(s) [2] of the 3 the resumed checkpoint" in caplog.text


# -- checkpoint order, write failures, set-asides, resumes past the data -------------------------
def test_a_checkpoint_past_step_99999999_is_the_newest_and_outlives_the_older(tmp_path):
    """Manifests were ordered by name: step-100000000.json sorts before step-99999999.json, so
    the newer checkpoint counted as the oldest, a resume took the older one and keeping one
    deleted the checkpoint just written."""
    run = RunDirectory(tmp_path, keep=1)
    for step in (99_999_999, 100_000_000):
        part = run.step_dir(step) / run_dir.CHIEF_PART
        part.write_bytes(b"a part")
        run.commit(step, {run_dir.CHIEF: part})
    assert [m.step for m in run.manifests()] == [100_000_000]
    assert run.latest().step == 100_000_000
    assert (run.checkpoint_root / "step-100000000" / run_dir.CHIEF_PART).is_file()


def test_a_bfloat16_run_resumed_without_ml_dtypes_sets_no_checkpoint_aside(
    data, tmp_path, monkeypatch
):
    """Without ml_dtypes every bfloat16 checkpoint read as damaged: the resume set each newer
    one aside and failed on the oldest, so with ml_dtypes back it resumed from the oldest."""
    bfloat16 = pytest.importorskip("ml_dtypes").bfloat16
    train, _ = data
    _trainer(tmp_path, checkpoint_every=7, dtype=bfloat16).fit(train, epochs=1)  # 7, 14, 15
    before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    again = _trainer(tmp_path, checkpoint_every=7, dtype=bfloat16)
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    with pytest.raises(CheckpointReadError, match=r"step-00000015/.* need the ml_dtypes package"):
        again.fit(train, epochs=2, resume=True)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before
    monkeypatch.undo()
    assert _trainer(tmp_path, dtype=bfloat16).fit(train, epochs=1, resume=True) == []
    assert RunDirectory(tmp_path).latest().step == 15


def test_a_checkpoint_of_another_format_version_stops_the_resume_and_is_not_set_aside(
    data, tmp_path
):
    """Taken for damage, the newest checkpoint of another format version (written by another
    distconv: a job's pods on two images) was set aside and the resume went on from an older
    one; the distconv that wrote it then resumed from that older one too, its steps lost."""
    train, _ = data
    _trainer(tmp_path, checkpoint_every=7).fit(train, epochs=1)  # steps 7, 14, 15
    newest = RunDirectory(tmp_path).latest().part(run_dir.CHIEF)
    newest.write_bytes(newest.read_bytes().replace(b'"version":"2"', b'"version":"3"'))
    before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    with pytest.raises(
        CheckpointError,
        match=r"format version '3'; .*written by distconv .*: resume with that build",
    ):
        _trainer(tmp_path, checkpoint_every=7).fit(train, epochs=2, resume=True)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before


def test_a_manifest_the_disk_has_no_room_for_is_a_checkpoint_error_naming_it(tmp_path, monkeypatch):
    """Its part's write failing was a CheckpointError, the manifest's a bare OSError, which
    an API caller catching CheckpointError missed."""
    run = RunDirectory(tmp_path)
    part = run.step_dir(1) / run_dir.CHIEF_PART
    part.write_bytes(b"a part")
    run.commit(1, {run_dir.CHIEF: part})

    monkeypatch.setattr(run_dir_files, "write_hook", _disk_full)
    part = run.step_dir(2) / run_dir.CHIEF_PART
    part.write_bytes(b"a part")
    with pytest.raises(CheckpointError) as info:
        run.commit(2, {run_dir.CHIEF: part})
    manifest = run.checkpoint_root / "step-00000002.json"
    kept = run.checkpoint_root / "step-00000001" / run_dir.CHIEF_PART
    assert str(info.value) == (
        f"cannot write checkpoint manifest {manifest}: no space left on device; the newest "
        f"checkpoint kept is step 1 ({kept})"
    )
    assert [m.step for m in run.manifests()] == [1]


def test_a_first_manifest_that_cannot_be_written_says_no_checkpoint_is_kept(tmp_path, monkeypatch):
    """The first save's manifest meeting a full disk said "any checkpoint before it is intact"
    where there was none: a ``--resume`` then was refused. It says that none is kept."""
    run = RunDirectory(tmp_path)
    monkeypatch.setattr(run_dir_files, "write_hook", _disk_full)
    part = run.step_dir(1) / run_dir.CHIEF_PART
    part.write_bytes(b"a part")
    with pytest.raises(CheckpointError) as info:
        run.commit(1, {run_dir.CHIEF: part})
    assert str(info.value).endswith(
        "no space left on device; no checkpoint kept yet: --resume auto starts afresh"
    )
    assert run.manifests() == []


def _disk_full(target):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("saved_before", [True, False])
def test_a_part_that_cannot_be_written_names_the_checkpoint_kept(
    tmp_path, monkeypatch, saved_before
):
    """A chief's part meeting a full disk said "any checkpoint before it is intact": no step
    named, and said where none was. Saved in :meth:`RunDirectory.saving`, as a run saves it,
    its error names the newest checkpoint kept, or says none is; its step folder is gone."""
    run = RunDirectory(tmp_path)
    kept = run.step_dir(1) / run_dir.CHIEF_PART
    if saved_before:
        kept.write_bytes(b"a part")
        run.commit(1, {run_dir.CHIEF: kept})
    monkeypatch.setattr(run_dir_files, "write_hook", _disk_full)
    part = run.step_dir(2) / run_dir.CHIEF_PART
    with pytest.raises(CheckpointError) as info, run.saving(2):
        save_tensors(part, {"w": np.zeros(2, np.float32)}, {})
    words = f"the newest checkpoint kept is step 1 ({kept})" if saved_before else (
        "no checkpoint kept yet: --resume auto starts afresh"
    )  # fmt: skip
    assert str(info.value) == f"cannot save checkpoint {part}: no space left on device; {words}"
    assert not part.parent.exists()


@pytest.mark.timeout(120)
def test_a_damaged_checkpoint_set_aside_keeps_its_file_when_the_run_saves_that_step_again(
    data, tmp_path
):
    """A damaged newest checkpoint's manifest was set aside "keeping its files for inspection",
    but its step directory stayed in place: the resumed run saved that step again over the
    damaged file, and the ``.json.unusable`` manifest named a whole one. The
    directory is set aside with it, and a run holding one is still a distconv run's."""
    train, test = data
    out = tmp_path / "run"
    _trainer(out, checkpoint_every=7).fit(train, test, epochs=1)  # steps 7, 14 and 15
    RunDirectory(out).latest().part("chief").write_bytes(b"damaged")
    history = _trainer(out, checkpoint_every=7).fit(train, test, epochs=1, resume="auto")
    assert [r["epoch"] for r in history] == [1]  # from step 14, saving step 15 again
    aside = out / "checkpoints" / "step-00000015.unusable" / "chief.safetensors"
    assert aside.read_bytes() == b"damaged"
    assert (out / "checkpoints" / "step-00000015.json.unusable").is_file()
    load_checkpoint(RunDirectory(out).latest().part("chief"))  # the new one, whole
    assert foreign_checkpoints(RunDirectory(out).checkpoint_root) == []


@pytest.mark.timeout(60)
def test_the_manifest_set_aside_names_the_damaged_part_not_the_step_saved_again(tmp_path):
    """The set-aside manifest (``step-N.json.unusable``) kept naming its part where it had been,
    ``step-N/chief.safetensors``, while the damaged file moved to ``step-N.unusable/``: once
    the run saved step N again, the manifest describing the damaged checkpoint named the new,
    whole part, and the damaged one no manifest at all."""
    run = RunDirectory(tmp_path, keep=5)
    for step in (1, 2):
        part = run.step_dir(step) / run_dir.CHIEF_PART
        part.write_bytes(b"damaged" if step == 2 else b"whole")
        run.commit(step, {run_dir.CHIEF: part}, {"pserver-shard0": "/d/p2"}, job="j", launch="l")
    aside = run.set_aside(run.latest())
    part = run.step_dir(2) / run_dir.CHIEF_PART  # the resumed run saves step 2 again
    part.write_bytes(b"saved again")
    run.commit(2, {run_dir.CHIEF: part})
    record = json.loads(aside.read_text())
    named = run.checkpoint_root / record["parts"][run_dir.CHIEF]
    assert named == run.checkpoint_root / "step-00000002.unusable" / run_dir.CHIEF_PART
    assert named.read_bytes() == b"damaged"
    assert record == {
        "step": 2,
        "parts": {run_dir.CHIEF: f"step-00000002.unusable/{run_dir.CHIEF_PART}"},
        "remote": {"pserver-shard0": "/d/p2"},
        "job": "j",
        "launch": "l",
        "build": build_id(),  # the distconv that wrote it: this one
    }
    assert [m.step for m in run.manifests()] == [1, 2]
    assert foreign_checkpoints(run.checkpoint_root) == []


@pytest.mark.timeout(120)
def test_a_step_directory_that_cannot_be_made_is_a_checkpoint_error_naming_it(
    data, tmp_path, monkeypatch
):
    """``checkpoints`` on a disk gone read-only (or out of inodes): the step directory's mkdir
    escaped as a bare ``[Errno 30] Read-only file system: '...'``, an OSError where a part that
    cannot be written is a CheckpointError naming the newest checkpoint kept."""
    train, test = data
    out = tmp_path / "run"
    _trainer(out).fit(train, test, epochs=1)
    mkdir = Path.mkdir

    def refuse(self, *args, **kwargs):  # what a read-only mount answers
        if self.name.startswith("step-"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(CheckpointError) as info:
        _trainer(out).fit(train, test, epochs=2, resume=True)
    step, kept = out / "checkpoints" / "step-00000030", out / "checkpoints" / "step-00000015"
    assert str(info.value) == (
        f"cannot write a checkpoint into {step}: read-only file system; the newest checkpoint "
        f"kept is step 15 ({kept / run_dir.CHIEF_PART})"
    )
    assert RunDirectory(out).latest().step == 15


@pytest.mark.timeout(120)
def test_a_set_aside_that_cannot_replace_the_last_one_moves_nothing(data, tmp_path, monkeypatch):
    """A step set aside before whose directory could not all go (a file of another owner, or
    made immutable, in ``step-N.unusable``): its delete failed silently, the manifest was moved,
    then the directory's rename raised a bare ``[Errno 39] Directory not empty``; the next
    resume saved that step over the damaged file. Now nothing of it is moved."""
    train, test = data
    out = tmp_path / "run"
    ckpts = out / "checkpoints"
    _trainer(out, checkpoint_every=7).fit(train, test, epochs=1)  # steps 7, 14 and 15
    RunDirectory(out).latest().part("chief").write_bytes(b"damaged")
    _trainer(out, checkpoint_every=7).fit(train, test, epochs=1, resume="auto")  # set aside
    (ckpts / "step-00000015.unusable" / "NOTES.txt").write_text("kept")
    RunDirectory(out).latest().part("chief").write_bytes(b"damaged again")
    unlink = os.unlink

    def refuse(path, *args, **kwargs):  # what an immutable file answers, even to root
        if os.fspath(path).endswith("NOTES.txt"):
            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), path)
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    with pytest.raises(RunDirError) as info:
        _trainer(out, checkpoint_every=7).fit(train, test, epochs=1, resume="auto")
    manifest = ckpts / "step-00000015.json"
    notes = ckpts / "step-00000015.unusable" / "NOTES.txt"
    assert str(info.value) == (
        f"cannot set aside checkpoint {manifest}: {notes}: operation not permitted"
    )
    assert manifest.is_file() and (ckpts / "step-00000015" / "chief.safetensors").read_bytes() == (
        b"damaged again"
    )
    monkeypatch.undo()
    _trainer(out, checkpoint_every=7).fit(train, test, epochs=1, resume="auto")  # now it can
    assert (ckpts / "step-00000015.unusable" / "chief.safetensors").read_bytes() == b"damaged again"
    assert RunDirectory(out).latest().step == 15


def _batch_trainer(out_dir, batch_size):
    sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    return Trainer(_net(), sync, batch_size, out_dir=out_dir, progress=False)


def test_a_resume_with_another_global_batch_past_the_data_trains_as_the_same_run(
    data, tmp_path, caplog
):
    """240 examples: batches of 300 and of 400 are both one step of all of them each epoch, so
    one resumes the other and ends bit for bit where the first alone ends."""
    train, test = data
    whole = _batch_trainer(tmp_path / "whole", 300)
    whole.fit(train, test, epochs=3)
    _batch_trainer(tmp_path / "split", 300).fit(train, test, epochs=1)
    resumed = _batch_trainer(tmp_path / "split", 400)
    with caplog.at_level(logging.INFO, logger="distconv.resume"):
        history = resumed.fit(train, test, epochs=3, resume=True)
    assert [r["epoch"] for r in history] == [2, 3] and resumed.pos.step == 3
    assert "global batch 400, the checkpoint's 300: both reach the 240" in caplog.text
    for name, value in _weights(whole).items():
        np.testing.assert_array_equal(_weights(resumed)[name], value, err_msg=name)


@pytest.mark.parametrize(("first", "second"), [(300, 200), (200, 300)])
def test_a_resume_past_the_data_from_a_batch_within_it_is_still_refused(
    data, tmp_path, first, second
):
    """One side smaller than the data (200 of 240) trains otherwise; either order is refused."""
    train, test = data
    _batch_trainer(tmp_path, first).fit(train, test, epochs=1)
    with pytest.raises(CheckpointError, match=f"global_batch: checkpoint {first}, this run"):
        _batch_trainer(tmp_path, second).fit(train, test, epochs=2, resume=True)


@pytest.mark.parametrize(
    "done, in_epoch, said",
    [
        (0, 10, "10 steps into epoch 1"),
        (2, 1, "1 step into epoch 3"),
        (2, 0, "after epoch 2"),
    ],
)
def test_the_resumed_line_numbers_epochs_as_the_log_does(done, in_epoch, said):
    """``resumed from ... at epoch 0, step 10`` named an epoch the log never shows (it numbers
    them from 1; the checkpoint's ``epoch`` counts those finished)."""
    from distconv.resume import _where_in_epochs

    assert _where_in_epochs(done, in_epoch) == said


def test_a_restore_refused_on_dtype_alone_ends_its_list_and_says_which_parameters_to_cast(
    tmp_path,
):
    """The cast advice ran on from the last difference ("checkpoint dtype float64 Its
    parameters differ ...") and told the user to cast "its parameters", the checkpoint's, which
    are float64 already: the model's are the ones to cast, as operations.md says."""
    from distconv.checkpoint import restore_checkpoint

    path = tmp_path / "weights.safetensors"
    write_checkpoint(path, _net("float64").parameters())
    with pytest.raises(CheckpointError) as info:
        restore_checkpoint(path, _net().parameters())
    said = str(info.value)
    assert "'fc2.weight': model dtype float32, checkpoint dtype float64. Its parameters" in said
    assert "cast this model's parameters to float64 first (p.cast('float64') for each)" in said
    assert "cast its parameters" not in said
