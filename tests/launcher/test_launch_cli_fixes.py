"""``distconv-launch`` refusals are one line, and a job can be launched again into its run dir.

Each test runs the real launcher as a subprocess on real files.
"""

from __future__ import annotations

import importlib.util
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.shown import shown
from tests.launcher.launch_cli import ENV, launch, wait_while_running
from tests.processes import job_env

HAS_RENDERER = importlib.util.find_spec("distconv.deploy") is not None


def one_error_line(done: subprocess.CompletedProcess, command: str) -> str:
    """The single error line of a refused launch (and nothing else on stderr)."""
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"distconv-launch {command}: error: "), lines
    return lines[0]


@pytest.mark.timeout(60)
def test_a_binary_hostfile_is_one_line_not_a_traceback(tmp_path):
    hostfile = tmp_path / "binhosts"
    hostfile.write_bytes(b"node1:2\n\xd0\x00\xff\xfe garbage\n")
    done = launch(
        "mpi", "-np", "2", "--hostfile", str(hostfile), "--dry-run", "--", "--epochs", "1",
        cwd=tmp_path,
    )  # fmt: skip
    line = one_error_line(done, "mpi")
    assert f"--hostfile {shown(hostfile)}: not a text hostfile" in line


def test_a_hostfile_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_bytes(b"\xef\xbb\xbfnode-a slots=2\nnode-b:2\n")  # a Windows editor's
    done = launch(
        "mpi", "-np", "4", "--hostfile", str(hostfile), "--mpi-flavor", "mpich", "--dry-run",
        "--", "--epochs", "1", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert " -hosts node-a:2,node-b:2 " in done.stdout


@pytest.mark.skipif(not HAS_RENDERER, reason="distconv.deploy is not merged yet")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("out_flag", [["--out", "/data/run"], ["--out=/opt/run"]])
def test_k8s_refuses_manifests_its_own_checks_reject(tmp_path, out_flag):
    """A train --out on the read-only root would crash every worker at its first checkpoint."""
    folder = tmp_path / "m"
    done = launch(
        "k8s", "--workers", "2", "--image", "img:1", "--out", str(folder),
        "--", "--epochs", "1", *out_flag,
        cwd=tmp_path,
    )  # fmt: skip
    line = one_error_line(done, "k8s")
    assert "is on no writable volume" in line and done.stdout == ""
    assert not folder.exists()  # nothing written that kubectl could apply
    # on the run volume the same job renders
    fine = launch(
        "k8s", "--workers", "2", "--image", "img:1", "--",
        "--epochs", "1", "--out", "/var/lib/distconv/run/mine",
        cwd=tmp_path,
    )  # fmt: skip
    assert fine.returncode == 0 and "kind: Job" in fine.stdout, fine.stderr


#: a worker that says which keys it was given and that its own secret file is there
KEY_PROBE = (
    "import os, pathlib; d = pathlib.Path(os.environ['DISTCONV_KEYS']); "
    "print('keys', d, (d / f\"worker-{os.environ['RANK']}.key_secret\").is_file())"
)


def _distconv_keys(keys: Path, workers: int) -> subprocess.CompletedProcess:
    """``distconv keys KEYS --workers N``, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(keys), "--workers", str(workers)],
        env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _make_keys(keys: Path, workers: int) -> None:
    """Make a job's CURVE keys for ``workers`` workers in ``keys`` (``distconv keys``)."""
    made = _distconv_keys(keys, workers)
    assert made.returncode == 0, made.stderr


def _local(run: Path, workers: int, cwd: Path) -> subprocess.CompletedProcess:
    return launch(
        "local", "--workers", str(workers), "--servers", "1", "--grace", "5",
        "--run-dir", str(run), "--", sys.executable, "-c", KEY_PROBE,
        cwd=cwd, timeout=170,
    )  # fmt: skip


@pytest.mark.timeout(240)
def test_a_job_launched_again_into_its_run_dir_reuses_its_keys(tmp_path):
    run = tmp_path / "run"
    first = _local(run, 2, tmp_path)
    assert first.returncode == 0, first.stderr
    keys = run / "keys"
    before = {p.name: p.read_bytes() for p in keys.iterdir()}
    again = _local(run, 2, tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"reusing the job's CURVE keys in '{keys}'" in again.stderr
    assert again.stdout.count(f"keys {keys} True") == 2, again.stdout
    # the same keys, untouched: shards and workers of the first launch would still agree
    assert {p.name: p.read_bytes() for p in keys.iterdir()} == before


@pytest.mark.timeout(120)
def test_keys_for_another_worker_count_are_refused_in_one_line(tmp_path):
    run = tmp_path / "run"
    keys = run / "keys"
    _make_keys(keys, 3)
    done = _local(run, 2, tmp_path)
    line = one_error_line(done, "local")
    assert f"{shown(keys)} holds keys for 3 worker(s) (worker-0..worker-2), not 2" in line
    assert f"2 worker(s) with the run directory {shown(run)}, remove {shown(keys)} and" in line
    assert not (run / "logs").exists()  # refused before anything started
    # a key set cut short (no secret for worker 1) is refused too, not half used
    (keys / "worker-2.key").unlink()
    (keys / "worker-2.key_secret").unlink()
    (keys / "worker-1.key_secret").unlink()
    line = one_error_line(_local(run, 2, tmp_path), "local")
    assert f"{shown(keys)} lacks worker-1.key_secret" in line


def _empty_secret(keys: Path) -> str:
    (keys / "worker-1.key_secret").write_bytes(b"")  # as a full disk left it
    return "holds a damaged key set: worker-1.key_secret is empty"


def _no_server_pair(keys: Path) -> str:
    for name in ("server.key", "server.key_secret"):
        (keys / name).unlink()
    return "lacks server.key"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("damage", [_empty_secret, _no_server_pair])
def test_a_damaged_key_set_is_refused_before_any_child_starts(tmp_path, damage):
    """A key set a full disk cut short (before ``distconv keys`` wrote all or none) passed
    where each file was there: an empty secret file failed the job at its worker, in words
    never restarted, and ``distconv keys`` run again over it said it held keys, as if whole;
    one without ``server.key`` was not looked at, and new keys were written over the
    workers' files. The launch is refused before any child starts, saying how to go on, and
    ``distconv keys`` says the set is damaged."""
    run = tmp_path / "run"
    keys = run / "keys"
    _make_keys(keys, 2)
    said = damage(keys)
    line = one_error_line(_local(run, 2, tmp_path), "local")
    assert f"{shown(keys)} {said} (an interrupted `distconv keys`?), so its keys" in line
    assert f"remove {shown(keys)} and launch again" in line
    assert not (run / "logs").exists()  # refused before any child started
    again = _distconv_keys(keys, 2)  # run again by hand: it says the same
    assert again.returncode == 1, again
    refused = f"{keys} {said} (an interrupted `distconv keys`?); remove them or choose another"
    assert again.stderr == f"distconv keys: error: {refused} directory\n"


@pytest.mark.timeout(120)
def test_keys_for_another_worker_count_say_how_to_go_on_with_the_run(tmp_path):
    """The refusal offered another --run-dir or --job-id beside removing the keys, as if
    either went on with the run: for distconv train without an --out of its own, another run
    directory is a new run (the next test). It says how to go on here, and that works."""
    run = tmp_path / "run"
    keys = run / "keys"
    _make_keys(keys, 2)
    line = one_error_line(_local(run, 1, tmp_path), "local")
    go_on = f"to launch on 1 worker(s) with the run directory {shown(run)}, remove {shown(keys)}"
    assert go_on + " and launch again" in line
    # a program of its own keeps its files where it chooses: no new run said of another
    assert line.endswith("or choose another --run-dir or --job-id"), line
    shutil.rmtree(keys)  # as the refusal says
    again = _local(run, 1, tmp_path)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count(f"keys {keys} True") == 1, again.stdout
    assert sorted(p.name for p in keys.glob("worker-*")) == ["worker-0.key", "worker-0.key_secret"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("train", "new_run"),
    [((), True), (("--out", "ck"), False)],
)  # fmt: skip
def test_keys_for_another_worker_count_say_a_new_run_only_where_the_run_lives_there(
    tmp_path, train, new_run
):
    """distconv train with an --out of its own keeps its run there, whatever the run
    directory: another --run-dir or --job-id goes on with it as well (its keys new), and the
    refusal said it would start a new run. Only a train writing into the run directory's
    train/ is told so; the others are offered both ways, and where the run is."""
    run = tmp_path / "run"
    keys = run / "keys"
    _make_keys(keys, 2)
    done = launch(
        "local", "--workers", "1", "--servers", "1", "--run-dir", str(run), "--",
        "--data", "synthetic", "--epochs", "1", *train, cwd=tmp_path,
    )  # fmt: skip
    line = one_error_line(done, "local")
    assert (f"remove {shown(keys)} and launch again" in line) and not (run / "logs").exists()
    assert ("starts a new run, not this one" in line) is new_run, line
    if not new_run:
        assert line.endswith(
            f"or choose another --run-dir or --job-id; the run is in --out {shown('ck')} either way"
        ), line


@pytest.mark.skipif(not HAS_RENDERER, reason="distconv.deploy is not merged yet")
@pytest.mark.timeout(60)
def test_k8s_gpus_are_per_rank_for_an_mpijob(tmp_path):
    """--gpus 1 with 4 slots: each of a pod's 4 ranks picks CUDA device <local rank>."""
    import yaml

    done = launch(
        "k8s", "--workers", "8", "--slots-per-worker", "4", "--gpus", "1", "--mpi",
        "--image", "d:1", "--", "--epochs", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (mpijob,) = yaml.safe_load_all(done.stdout)
    pod = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 4
    helped = launch("k8s", "--help", cwd=tmp_path)
    assert "GPUs per training rank" in " ".join(helped.stdout.split())


@pytest.mark.timeout(60)
@pytest.mark.skipif(not HAS_RENDERER, reason="the manifest renderer is not importable")
def test_k8s_out_refuses_a_folder_with_another_jobs_manifests(tmp_path):
    """``kubectl apply -f DIR`` would deploy both jobs; the same job renders again in place."""
    folder = tmp_path / "m"
    render = ("k8s", "--workers", "2", "--image", "img:1", "--out", str(folder), "--job-name")
    assert launch(*render, "one", "--", "--epochs", "1", cwd=tmp_path).returncode == 0
    written = sorted(p.name for p in folder.iterdir())
    again = launch(*render, "one", "--", "--epochs", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in folder.iterdir()) == written
    line = one_error_line(launch(*render, "two", "--", "--epochs", "1", cwd=tmp_path), "k8s")
    assert "holds manifests this job does not have" in line
    assert sorted(p.name for p in folder.iterdir()) == written  # nothing of "two" written
    other = tmp_path / "j"  # kubectl apply -f reads JSON too
    other.mkdir()
    (other / "job-other.json").write_text('{"apiVersion": "batch/v1", "kind": "Job"}')
    render_json = ("k8s", "--workers", "2", "--image", "img:1", "--out", str(other))
    line = one_error_line(launch(*render_json, "--", "--epochs", "1", cwd=tmp_path), "k8s")
    assert "(job-other.json)" in line


@pytest.mark.parametrize("grace", ["nan", "inf", "-1"])
def test_a_grace_that_is_not_a_finite_time_is_refused(tmp_path, grace):
    done = launch("local", "--workers", "1", "--grace", grace, "--", "true", cwd=tmp_path)
    # nan and inf: "must be finite, got 'nan'", as every decimal flag says it
    assert done.returncode == 2 and "--grace: must be finite" in done.stderr


@pytest.mark.timeout(60)
def test_ctrl_c_before_the_job_starts_is_one_line(tmp_path):
    """SIGINT while the launcher asks a slow `mpiexec --version` which MPI it is."""
    slow, asked = tmp_path / "mpiexec", tmp_path / "asked"
    slow.write_text(f"#!/bin/sh\ntouch {asked}\nsleep 30\n")
    slow.chmod(0o755)
    with job_env(ENV) as env:  # a hung launcher goes with its mpiexec stand-in
        launcher = subprocess.Popen(
            [sys.executable, "-m", "launcher", "mpi", "-np", "1", "--mpiexec", str(slow),
             "--run-dir", str(tmp_path / "run"), "--", "--epochs", "1"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            # in the version question: a fixed 2 s pause could land in Python's own start-up on
            # a loaded host, and waited 2 s on a quiet one
            wait_while_running(asked.exists, launcher, "mpiexec asked")
            launcher.send_signal(signal.SIGINT)
            _, stderr = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 130, stderr
    assert stderr.strip() == "distconv-launch mpi: interrupted before the job started"
