"""The public API for user programs: ``distconv.distributed.init`` and a script built on it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.distributed import ENV_INSECURE, build_sync, choose_transport, init
from distconv.optim import create_optimizer
from distconv.runtime import Runtime, RuntimeConfigError, detect_runtime
from distconv.sync import create_sync
from distconv.sync.local import LocalSync
from tests.child_env import child_path

REPO = Path(__file__).resolve().parents[1]


def test_a_user_script_trains_a_regression_network_through_the_public_api(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "mixed_regression.py"), "--epochs", "8"]
        + ["--out", str(out)],
        env={**os.environ, "PYTHONPATH": child_path()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == list(range(1, 9))
    assert "train_acc" not in records[0]  # no labels, no accuracy
    assert records[-1]["test_loss"] < 0.25 * records[0]["train_loss"]
    assert f"test loss {records[-1]['test_loss']:.5f}" in proc.stdout


def test_init_alone_gives_local_sync(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "DISTCONV_PSERVERS"):
        monkeypatch.delenv(var, raising=False)
    sync = init("sgd", lr=0.5, log_format=None)
    assert isinstance(sync, LocalSync)
    assert (sync.rank, sync.world_size, sync.is_chief) == (0, 1, True)
    assert sync.optimizer_config()["lr"] == 0.5


@pytest.mark.parametrize(
    "runtime,kind",
    [
        (Runtime(), "local"),
        (Runtime(rank=1, world_size=2, pservers=("h:1",), source="distconv"), "pserver"),
        (Runtime(rank=1, world_size=2, source="pmi"), "mpi"),
        (Runtime(rank=1, world_size=2, source="openmpi"), "mpi"),
    ],
)
def test_the_transport_follows_the_runtime(runtime, kind):
    assert choose_transport(runtime) == kind


def test_local_sync_refuses_a_multi_rank_runtime():
    runtime = Runtime(rank=1, world_size=3, source="distconv")
    with pytest.raises(RuntimeConfigError, match="rank 1 of 3.*--sync pserver or mpi"):
        build_sync("local", create_optimizer("sgd"), runtime, {})
    with pytest.raises(RuntimeConfigError, match="needs the servers"):
        build_sync("pserver", create_optimizer("sgd"), runtime, {})


def test_pserver_sync_without_keys_is_a_one_line_error():
    """A server list without --keys or --insecure: the error distconv train prints on one line,
    not the client's ValueError, which reached the user as a traceback."""
    runtime = Runtime(rank=0, world_size=1, pservers=("h:1",), source="default")
    with pytest.raises(RuntimeConfigError, match="needs the job's CURVE keys: --keys DIR"):
        build_sync("pserver", create_optimizer("sgd"), runtime, {})


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("DISTCONV_AUTOTUNE", "2", "DISTCONV_AUTOTUNE must be 0 or 1, got '2'"),
        ("DISTCONV_NUM_THREADS", "x", "DISTCONV_NUM_THREADS must be an integer >= 1, got 'x'"),
    ],
)
def test_init_reads_the_kernel_settings_before_it_connects(monkeypatch, name, value, words):
    """A user script's malformed kernel setting stops init(), as it does distconv train, not
    the first convolution (a traceback after the servers were reached), nor nothing at all
    in a network without one."""
    monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeConfigError, match=words):
        init("sgd", sync="pserver", flags={"pservers": "127.0.0.1:9"}, log_format=None)


def test_keys_and_insecure_together_are_refused_unless_a_flag_overrides_a_variable(
    monkeypatch, tmp_path, caplog
):
    """CURVE keys and insecure together: the client dropped the keys and trained without
    CURVE without a word. Now two settings at one level (two flags or options, two
    variables) are refused, naming both; a flag or option overrides a variable, as flags do
    any variable, and an insecure one that drops DISTCONV_KEYS says so."""
    keys, sgd = str(tmp_path), create_optimizer("sgd")
    flagged = Runtime(pservers=("127.0.0.1:9",), keys_dir=keys)
    with pytest.raises(RuntimeConfigError, match="both --keys .* and insecure .* pick one"):
        build_sync("pserver", sgd, flagged, {"insecure": True})
    with pytest.raises(ValueError, match="exactly one of keys_dir .* and insecure=True"):
        create_sync(
            "pserver",
            optimizer=sgd,
            rank=0,
            world_size=1,
            pservers=["127.0.0.1:9"],
            keys_dir=keys,
            insecure=True,
        )
    monkeypatch.setenv("DISTCONV_KEYS", keys)
    inherited = detect_runtime({"pservers": "127.0.0.1:9"})
    sync = build_sync("pserver", sgd, inherited, {"insecure": True})
    sync.close()
    assert sync._insecure and sync._keys_dir is None
    assert f"insecure overrides DISTCONV_KEYS={keys!r}" in caplog.text
    monkeypatch.setenv(ENV_INSECURE, "1")
    with pytest.raises(RuntimeConfigError, match=r"both DISTCONV_KEYS .* and DISTCONV_INSECURE=1"):
        init("sgd", sync="pserver", flags={"pservers": "127.0.0.1:9"}, log_format=None)
    monkeypatch.delenv("DISTCONV_KEYS")  # --keys beats DISTCONV_INSECURE: its keys are read
    with pytest.raises(RuntimeConfigError, match=r"CURVE key file .*worker-0.key_secret not f"):
        init(
            "sgd",
            sync="pserver",
            flags={"pservers": "127.0.0.1:9", "keys_dir": keys},
            log_format=None,
        )


@pytest.mark.timeout(30)
@pytest.mark.parametrize("sync", ["local", None])
def test_keys_and_insecure_variables_do_not_stop_another_transport(monkeypatch, tmp_path, sync):
    """DISTCONV_KEYS and DISTCONV_INSECURE=1 are refused together for a parameter server only:
    init(sync='local'), or a transport chosen without servers, stopped with 'both
    DISTCONV_KEYS ... and DISTCONV_INSECURE=1 are set', though neither means anything there."""
    monkeypatch.delenv("DISTCONV_PSERVERS", raising=False)
    monkeypatch.setenv("DISTCONV_KEYS", str(tmp_path))
    monkeypatch.setenv(ENV_INSECURE, "1")
    strategy = init("sgd", sync=sync, flags={"rank": 0, "world_size": 1}, log_format=None)
    try:
        assert isinstance(strategy, LocalSync)
    finally:
        strategy.close()


def test_pserver_sync_with_keys_missing_from_their_folder_is_a_one_line_error(tmp_path):
    """The client's KeyFileError (a ValueError, so a traceback from distconv train) comes out
    as a user error naming the file."""
    runtime = Runtime(rank=0, world_size=1, pservers=("127.0.0.1:1",), keys_dir=str(tmp_path))
    with pytest.raises(RuntimeConfigError, match=r"CURVE key file .*worker-0.key_secret not f"):
        build_sync("pserver", create_optimizer("sgd"), runtime, {})


@pytest.mark.parametrize(
    "options, words",
    [
        ({"time_out": 20}, "no transport takes 'time_out'; they take ['bucket_bytes'"),
        ({"insecure": "no"}, "insecure must be one of (False, True), got 'no'"),
        ({"overlap": 1}, "overlap must be one of (None, False, True), got 1"),
    ],
)
def test_a_sync_option_no_transport_takes_or_a_flag_not_a_bool_is_refused(options, words):
    """A typo left the default silently, and insecure="no" turned CURVE off: refused, whatever
    the transport, since a script may pass every transport's settings."""
    runtime = Runtime(rank=0, world_size=1, source="default")
    for kind in ("local", "mpi"):
        with pytest.raises(ValueError, match=re.escape(words)):
            build_sync(kind, create_optimizer("sgd"), runtime, options)
    build_sync("local", create_optimizer("sgd"), runtime, {"overlap": None, "insecure": True})


def test_a_numpy_bool_is_a_bool_to_sync_options():
    """np.True_ (a setting read through numpy) was refused as not one of (False, True), in a
    message that printed it as a bool; it is one, and the transport gets Python's."""
    import numpy as np

    runtime = Runtime(rank=0, world_size=1, source="default")
    sync = build_sync("mpi", create_optimizer("sgd"), runtime, {"overlap": np.False_})
    assert sync.overlap is False
    sync.close()
    build_sync("local", create_optimizer("sgd"), runtime, {"insecure": np.True_})


def test_sparse_is_a_mark_in_the_model_not_a_sync_option():
    runtime = Runtime(rank=0, world_size=1, source="default")
    with pytest.raises(ValueError, match=r"TableProjection\(\.\.\., sparse=True\)"):
        build_sync("local", create_optimizer("sgd"), runtime, {"sparse": ["t.weight"]})


def test_the_command_line_timeout_reaches_the_mpi_sync():
    """``--timeout`` bounds every blocking MPI call too (the watchdog of a multi-rank job)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    from distconv.cli import build_parser
    from distconv.transport_flags import sync_options

    args = build_parser().parse_args(["train", "--timeout", "7.5", "--bucket-mb", "1"])
    runtime = Runtime(rank=0, world_size=1, source="default")
    sync = build_sync("mpi", create_optimizer("sgd"), runtime, sync_options(args))
    try:
        assert (sync.timeout, sync.bucket_bytes) == (7.5, 1 << 20)
    finally:
        sync.close()


def test_the_trainer_and_network_are_at_the_top_level_and_load_when_first_used():
    probe = (
        "import sys, distconv\n"
        "assert 'distconv.trainer' not in sys.modules\n"
        "from distconv import Network, Trainer\n"
        "import distconv.network, distconv.trainer\n"
        "assert Trainer is distconv.trainer.Trainer and Network is distconv.network.Network\n"
        "assert {'Trainer', 'Network'} <= set(dir(distconv))\n"
        "try:\n"
        "    distconv.Trainr\n"
        "except AttributeError as e:\n"
        "    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": child_path()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "module 'distconv' has no attribute 'Trainr'"


@pytest.mark.timeout(30)
def test_distconv_train_under_a_wrapper_reads_the_launchers_insecure_variable(monkeypatch):
    """``distconv-launch local --insecure`` gives a ``distconv train`` it starts itself the
    flag, and every child DISTCONV_INSECURE=1; one a wrapper script starts gets only the
    variable, which init() alone read: it stopped asking for keys the job has none of. Now
    build_sync, which both reach, reads it (for a parameter server only)."""
    monkeypatch.setenv(ENV_INSECURE, "1")
    runtime = Runtime(pservers=("127.0.0.1:9",))
    sync = build_sync("pserver", create_optimizer("sgd"), runtime, {})
    sync.close()
    assert sync._insecure and sync._keys_dir is None
    monkeypatch.delenv(ENV_INSECURE)
    with pytest.raises(RuntimeConfigError, match="needs the job's CURVE keys"):
        build_sync("pserver", create_optimizer("sgd"), runtime, {})


def test_mpi_s_rank_against_the_environment_s_is_the_documented_runtime_error():
    """``init()`` documents a RuntimeConfigError where the transport's rank and world size
    disagree with the environment; the MPI sync raised a SyncError there, which a caller's
    ``except RuntimeConfigError`` let through (here MPI says rank 0 of 1)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    runtime = Runtime(rank=1, world_size=2, source="flags")
    said = r"MPI says rank 0 of 1, but the environment \(flags\) says rank 1 of 2"
    with pytest.raises(RuntimeConfigError, match=said):
        build_sync("mpi", create_optimizer("sgd"), runtime, {})


def test_an_mpi_launch_without_mpi4py_says_so(monkeypatch):
    """``mpiexec -n 2`` where mpi4py is missing: the MPI sync stands in for one process, and
    each rank said "MPI says rank 0 of 1, but the environment (pmi) says rank 1 of 2", which
    points at the launcher, not at the missing package."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py fails, as uninstalled
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    runtime = Runtime(rank=1, world_size=2, source="pmi")
    said = r"mpi4py cannot be imported \(.*\), so the mpi sync trains alone, but the environment"
    with pytest.raises(RuntimeConfigError, match=said) as raised:
        build_sync("mpi", create_optimizer("sgd"), runtime, {})
    assert "pip install 'distconv[mpi]'" in str(raised.value)


@pytest.mark.parametrize("optimizer", [None, 0.01, {"name": "adam"}])
def test_init_refuses_an_optimizer_that_is_neither_one_nor_a_name(optimizer):
    """init(None) returned a sync with no optimizer, which failed only at the first fit's
    setup ("'NoneType' object has no attribute 'config'")."""
    with pytest.raises(TypeError, match=r"init: optimizer must be an Optimizer or the name"):
        init(optimizer, log_format=None)


def test_init_refuses_hyperparameters_beside_an_optimizer_built_already():
    """init(create_optimizer("adam", lr=0.5), lr=0.01) trained at 0.5 without a word."""
    with pytest.raises(TypeError, match=r"hyperparameters \['lr'\] are for an optimizer given"):
        init(create_optimizer("adam", lr=0.5), lr=0.01, log_format=None)
    assert init(create_optimizer("adam", lr=0.5), log_format=None).optimizer_config()["lr"] == 0.5


@pytest.mark.parametrize("argument", ["flags", "sync_options"])
def test_init_refuses_flags_or_sync_options_that_are_not_mappings(argument):
    """flags="rank=1" was "AttributeError: 'str' object has no attribute 'items'", and
    sync_options="x" "dictionary update sequence element #0 has length 1; 2 is required"."""
    with pytest.raises(TypeError, match=rf"init: {argument} must be a mapping .*got str 'x=1'"):
        init("sgd", log_format=None, **{argument: "x=1"})


@pytest.mark.parametrize("flags", [{"world_size": 2}, {"rank": 1, "world_size": 2}])
def test_flags_beside_an_mpi_launcher_still_imply_the_mpi_sync(monkeypatch, flags):
    """mpiexec -n 2 distconv train --world-size 2 chose local sync (the source was 'flags',
    not 'pmi'), which then refused to train: 'use --sync pserver or mpi'."""
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "2")
    monkeypatch.delenv("DISTCONV_PSERVERS", raising=False)
    assert choose_transport(detect_runtime(flags)) == "mpi"
    assert choose_transport(detect_runtime({"rank": 0, "world_size": 1})) == "local"
