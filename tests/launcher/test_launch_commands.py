"""The local job's commands and environments, asserted exactly (no process is started)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.procfs import process_identity
from launcher.cli import build_parser, local_children, local_plan
from launcher.commands import (
    THREAD_VARS,
    JobEnv,
    LaunchError,
    Program,
    ServerOptions,
    UsageError,
    child_env,
    clean_environ,
    has_option,
    keys_command,
    option_value,
    parse_program,
    server_command,
    threads_per_process,
    train_args,
    usable_cpus,
    with_out,
    worker_command,
)
from launcher.options import split_argv
from launcher.ports import free_ports, reserve_ports
from launcher.supervisor import Failure
from tests.child_env import child_path

PY = sys.executable
REPO_ROOT = Path(__file__).resolve().parents[2]


def test_split_argv_at_the_first_double_dash():
    assert split_argv(["local", "--workers", "2", "--", "a.py", "--", "x"]) == (
        ["local", "--workers", "2"],
        ["a.py", "--", "x"],
    )
    assert split_argv(["local", "--workers", "2"]) == (["local", "--workers", "2"], [])


def test_parse_program(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text("print(1)\n")
    assert parse_program([]) == Program((), is_train=True)
    assert parse_program(["--epochs", "2"]) == Program(("--epochs", "2"), is_train=True)
    assert parse_program(["train", "--epochs", "2"]) == Program(("--epochs", "2"), True)
    program = parse_program([str(script), "--lr", "1"])
    assert not program.is_train and program.is_script
    program = parse_program(["sh", "-c", "true"])
    assert not program.is_train and not program.is_script
    with pytest.raises(LaunchError, match="script 'gone.py' does not exist"):
        parse_program(["gone.py"])
    with pytest.raises(LaunchError, match="program '/no/such' does not exist"):
        parse_program(["/no/such"])


@pytest.mark.parametrize("name", ["data", "data/", "data.py"])
def test_a_folder_after_the_dashes_is_said_to_be_a_folder(tmp_path, name):
    """``-- ./data`` was said not to exist, though it is there: a folder, no program."""
    (tmp_path / name).mkdir()
    what = "script" if name.endswith(".py") else "program"
    with pytest.raises(LaunchError) as refused:
        parse_program([f"{tmp_path}/{name}", "--epochs", "1"])
    assert str(refused.value) == f"'{tmp_path}/{name}' is a folder, not a {what}"


def test_train_flags_are_spelled_out_so_the_launchers_own_see_them(tmp_path):
    program = parse_program(["--ou", "mine", "--ep=2"])
    assert program == Program(("--out", "mine", "--epochs=2"), is_train=True)
    assert with_out(program, tmp_path) == program  # the user's --ou is kept, not overridden
    assert parse_program(["train", "--syn", "local"]).argv == ("--sync", "local")
    with pytest.raises(LaunchError, match=r"^--p could be any of --pservers, --push-kb \(the"):
        parse_program(["--p", "1"])
    with pytest.raises(LaunchError, match="distconv train takes no --bogus"):
        parse_program(["train", "--bogus"])
    assert parse_program(["sh", "-c", "--x"]).argv == ("sh", "-c", "--x")  # not train's


def test_train_flags_are_told_from_values_as_argparse_tells_them():
    """A value with a space is a value, even one starting with ``--``; a short option distconv
    train does not take is refused like a long one, before anything starts."""
    assert parse_program(["--ou", "--my run", "--lr", "0.5"]).argv == (
        "--out", "--my run", "--lr", "0.5",
    )  # fmt: skip
    # -.5 is --lr's value, as argparse reads it (and then refuses: a rate is > 0)
    with pytest.raises(UsageError, match=r"^argument --lr: must lie in \(0.0, inf\), got -.5"):
        parse_program(["--lr", "-.5"])
    with pytest.raises(LaunchError, match=r"^distconv train takes no -x \(the arguments"):
        parse_program(["--epochs", "1", "-x"])


def test_options_in_argv():
    argv = ["--out", "a", "--resume=auto", "--out=b"]
    assert has_option(argv, "--resume") and not has_option(argv, "--res")
    assert option_value(argv, "--out") == "b" and option_value(argv, "--lr") is None


def test_train_args_add_sync_only_when_missing_and_no_resume_on_a_restart():
    """``--resume auto`` on a restart resumed a run the first start had refused:
    a restarted distconv train continues its own launch's run without it
    (tests/test_restart_resume.py)."""
    program = Program(("--epochs", "2"), True)
    assert train_args(program, "pserver") == ["--sync", "pserver", "--epochs", "2"]
    assert train_args(program, None) == ["--epochs", "2"]
    assert worker_command(program, None, python="py")[4:] == ["--epochs", "2"]  # every start
    mine = Program(("--sync", "local", "--resume"), True)
    assert train_args(mine, "pserver") == ["--sync", "local", "--resume"]


def test_a_restart_leaves_overwrite_to_distconv_train():
    """Beside ``--overwrite``, ``--resume auto`` made distconv train refuse to start at all; on
    a restart ``--overwrite`` itself resumes the job's own run (tests/test_overwrite_restart.py)."""
    from distconv.train_args import train_parser

    program = Program(("--overwrite", "--epochs", "2"), True)
    argv = worker_command(program, None, python="py")[4:]  # every start's
    assert argv == ["--overwrite", "--epochs", "2"]
    assert train_parser().parse_args(argv).resume == "overwrite"


def test_overwrite_with_resume_is_refused_before_anything_starts():
    with pytest.raises(LaunchError, match=r"^distconv train takes --resume or --overwrite, not"):
        parse_program(["--ov", "--re=auto"])


def test_worker_commands():
    assert worker_command(Program(("--epochs", "1"), True), "pserver", python="py") == [
        "py", "-m", "distconv", "train", "--sync", "pserver", "--epochs", "1",
    ]  # fmt: skip
    assert worker_command(Program(("me.py", "-x"), False), "pserver", python="py") == [
        "py",
        "me.py",
        "-x",
    ]
    assert worker_command(Program(("prog", "-x"), False), None) == ["prog", "-x"]


def test_server_and_keys_commands():
    opts = ServerOptions(2, 3, "async", "j", "/r/keys", "/r/ckpt", extra=("--insecure",))
    assert server_command(1, 5555, opts, python="py") == [
        "py", "-m", "distconv", "pserver", "--bind", "127.0.0.1:5555", "--shard", "1",
        "--num-shards", "2", "--workers", "3", "--mode", "async", "--job-id", "j",
        "--keys", "/r/keys",
        "--checkpoint-dir", "/r/ckpt", "--drain-seconds", "0", "--insecure",
    ]  # fmt: skip
    assert server_command(0, 7, ServerOptions(1, 1), python="py")[4:] == [
        "--bind", "127.0.0.1:7", "--shard", "0", "--num-shards", "1", "--workers", "1",
        "--mode", "sync", "--drain-seconds", "0",
    ]  # fmt: skip
    assert keys_command("/r/keys", 4, python="py") == [
        "py", "-m", "distconv", "keys", "/r/keys", "--workers", "4",
    ]  # fmt: skip


def test_threads_count_only_the_cores_this_process_may_use():
    """Under a one-core affinity mask (taskset, a cpuset) every child gets one thread."""
    code = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from launcher.commands import threads_per_process as t; print(t(1))"
    )
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout == "1\n"


def test_shards_count_when_sharing_the_cores(tmp_path):
    _, _, _, job = _local(["--workers", "1", "--servers", "1", "--", "--epochs", "1"], tmp_path)
    assert job.threads == threads_per_process(2)


def test_threads_per_process():
    assert threads_per_process(2, cpus=16) == 8
    assert threads_per_process(3, cpus=16) == 5
    assert threads_per_process(32, cpus=16) == 1


def test_child_env_replaces_foreign_placement_and_pins_threads():
    environ = {
        "PATH": "/bin",
        "RANK": "9",
        "OMPI_COMM_WORLD_RANK": "9",
        "PMI_RANK": "9",
        "JOB_COMPLETION_INDEX": "9",
        "DISTCONV_PSERVERS": "stale:1",
        "DISTCONV_KEYS": "/stale",
        "OMP_NUM_THREADS": "64",
    }
    job = JobEnv("j", ("127.0.0.1:1", "127.0.0.1:2"), "/k", threads=4, restart=2)
    env = child_env(environ, job, "worker", 1, 3)
    assert env == {
        "PATH": "/bin",
        "DISTCONV_ROLE": "worker",
        "RANK": "1",
        "WORLD_SIZE": "3",
        "LOCAL_RANK": "1",
        "DISTCONV_JOB_ID": "j",
        "DISTCONV_RESTART": "2",
        "PYTHONUNBUFFERED": "1",
        "DISTCONV_PSERVERS": "127.0.0.1:1,127.0.0.1:2",
        "DISTCONV_KEYS": "/k",
        **dict.fromkeys(THREAD_VARS, "4"),
    }
    env = child_env({**environ, "DISTCONV_LAUNCH": "outer"}, JobEnv("j"), "server", 0, 1)
    assert "DISTCONV_PSERVERS" not in env and "DISTCONV_KEYS" not in env
    assert "DISTCONV_LAUNCH" not in env  # an enclosing launcher's is not this job's
    assert child_env(environ, JobEnv("j", launch="a1"), "server", 0, 1)["DISTCONV_LAUNCH"] == "a1"
    outer = {**environ, "DISTCONV_LAUNCHER": "b n 1 2"}  # an enclosing launcher: not followed
    assert "DISTCONV_LAUNCHER" not in child_env(outer, JobEnv("j"), "worker", 0, 1)
    ours = child_env(outer, JobEnv("j", launcher="b n 3 4"), "worker", 0, 1)
    assert ours["DISTCONV_LAUNCHER"] == "b n 3 4"
    assert clean_environ({"PMIX_RANK": "1", "MPI_LOCALRANKID": "0", "HOME": "/h"}) == {"HOME": "/h"}
    # another job's count of processes on the host would size this job's threads
    left_over = {"LOCAL_WORLD_SIZE": "8", "MPI_LOCALNRANKS": "8", "HOME": "/h"}
    assert clean_environ(left_over) == {"HOME": "/h"}


def _local(argv: list[str], tmp_path: Path):
    own, rest = split_argv(["local", *argv])
    args = build_parser().parse_args(own)
    program = parse_program(rest)
    servers, job, worker_argv = local_plan(args, program, "j", tmp_path, {})
    return args, Program(tuple(worker_argv), program.is_train), servers, job


def test_a_parameter_server_job_exactly(tmp_path):
    args, program, servers, job = _local(
        ["--workers", "2", "--servers", "2", "--threads", "3", "--", "--epochs", "1"], tmp_path
    )
    keys, out = str(tmp_path / "keys"), str(tmp_path / "train")
    assert servers == ServerOptions(2, 2, "sync", "j", keys, out, drain_seconds=30.0)  # --grace
    assert job == JobEnv("j", (), keys, threads=3, launch=job.launch, launcher=process_identity())
    assert re.fullmatch(r"[0-9a-f]{16}", job.launch)  # one token per launch, for every start
    specs = local_children(program, servers, job, 2, 1, {"HOME": "/h"}, ports=[7001, 7002])
    assert [(s.role, s.rank) for s in specs] == [
        ("server", 0),
        ("server", 1),
        ("worker", 0),
        ("worker", 1),
    ]
    assert specs[1].argv == [
        PY, "-m", "distconv", "pserver", "--bind", "127.0.0.1:7002", "--shard", "1",
        "--num-shards", "2", "--workers", "2", "--mode", "sync", "--job-id", "j",
        "--keys", keys, "--checkpoint-dir", out, "--drain-seconds", "30",
    ]  # fmt: skip
    # the launcher's own stop: SIGINT stops a shard at once (its workers are gone); SIGTERM
    # first, for one not up yet or with SIGINT ignored
    assert specs[1].stop_signals == (signal.SIGTERM, signal.SIGINT)
    assert specs[3].stop_signals == (signal.SIGTERM,)
    assert specs[3].argv == [
        PY, "-m", "distconv", "train", "--sync", "pserver", "--epochs", "1", "--out", out,
    ]  # fmt: skip
    worker = specs[3].env
    assert worker["DISTCONV_PSERVERS"] == "127.0.0.1:7001,127.0.0.1:7002"
    assert (worker["DISTCONV_ROLE"], worker["RANK"], worker["WORLD_SIZE"]) == ("worker", "1", "2")
    assert (worker["DISTCONV_KEYS"], worker["DISTCONV_RESTART"], worker["OMP_NUM_THREADS"]) == (
        keys,
        "1",
        "3",
    )
    server = specs[1].env
    assert (server["DISTCONV_ROLE"], server["RANK"], server["WORLD_SIZE"]) == ("server", "1", "2")
    assert server["OMP_NUM_THREADS"] == "1"
    first = local_children(program, servers, job, 2, 0, {"HOME": "/h"}, ports=[7001, 7002])
    assert {s.env["DISTCONV_LAUNCH"] for s in [*specs, *first]} == {job.launch}


@pytest.mark.parametrize(
    "grace, drain",
    [("1234567", "1234567"), ("0.1234567", "0.1234567"), ("2.5", "2.5"), ("1e16", "1e+16")],
)
def test_the_shards_drain_for_exactly_the_grace_given(tmp_path, grace, drain):
    """``--grace`` reaches the shards' ``--drain-seconds`` as written: formatted with ``:g``
    (six significant digits), 1234567 became 1.23457e+06, a shard draining 1234570 s, and
    0.1234567 drained 0.123457 s."""
    from distconv.cli import build_parser as distconv_parser

    args, program, servers, job = _local(
        ["--workers", "1", "--grace", grace, "--", "--epochs", "1"], tmp_path
    )
    shard = local_children(program, servers, job, 1, 0, {}, ports=[7001])[0]
    said = shard.argv[shard.argv.index("--drain-seconds") + 1]
    assert said == drain
    parsed = distconv_parser().parse_args(shard.argv[3:])  # distconv pserver ...
    assert parsed.drain_seconds == args.grace == float(grace)


def test_insecure_and_user_out_dir(tmp_path):
    _, program, servers, job = _local(
        ["--workers", "2", "--insecure", "--mode", "async", "--", "--out", "/o"], tmp_path
    )
    assert program.argv == ("--out", "/o", "--insecure")
    assert servers == ServerOptions(
        1, 2, "async", "j", None, "/o", drain_seconds=30.0, extra=("--insecure",)
    )
    assert job.keys_dir is None


def test_a_user_program_without_servers(tmp_path):
    _, program, servers, job = _local(["--workers", "2", "--servers", "0", "--", "sh"], tmp_path)
    assert servers is None and job.keys_dir is None and program == Program(("sh",), False)
    specs = local_children(program, servers, job, 2, 0, {})
    assert [s.argv for s in specs] == [["sh"], ["sh"]]
    assert "DISTCONV_PSERVERS" not in specs[0].env


def test_train_needs_servers_for_several_workers(tmp_path):
    # a usage error (exit 2), as the launcher's other refusals of a flag combination
    with pytest.raises(UsageError, match="needs parameter servers .* or allreduce"):
        _local(["--workers", "2", "--servers", "0"], tmp_path)
    argv = ["local", "--workers", "2", "--servers", "0", "--run-dir", str(tmp_path / "r"), "--"]
    done = subprocess.run([sys.executable, "-m", "launcher", *argv, "--epochs", "2"],
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)  # fmt: skip
    assert done.returncode == 2 and "needs parameter servers" in done.stderr
    _, program, servers, _ = _local(["--workers", "1", "--servers", "0"], tmp_path)
    assert servers is None and program.argv == ("--out", str(tmp_path / "train"))


def test_more_workers_than_a_shard_serves_are_refused_before_any_child(tmp_path):
    """``--workers 70000 --insecure`` started every worker and the shards, which then refused
    ``--workers 70000`` (past config.MAX_WORKERS); with CURVE keys it failed only at
    ``distconv keys``, in its words. The launcher names the bound first (exit 2)."""
    from distconv.sync.ps.config import MAX_WORKERS

    many = str(MAX_WORKERS + 1)
    for security in (["--insecure"], []):
        with pytest.raises(UsageError, match=f"^--workers must be 1..{MAX_WORKERS}, got {many} "):
            _local(["--workers", many, *security, "--"], tmp_path)
    _, _, servers, _ = _local(["--workers", str(MAX_WORKERS), "--insecure", "--"], tmp_path)
    assert servers.workers == MAX_WORKERS  # the bound itself is a job
    _, _, servers, _ = _local(["--workers", many, "--servers", "0", "--", "sh"], tmp_path)
    assert servers is None  # no shard: nothing bounds a user program's workers


@pytest.mark.parametrize(
    "argv, message",
    [
        (["local"], "the following arguments are required: --workers"),
        (["local", "--workers", "0"], "must be >= 1, got 0"),
        (["local", "--workers", "1_0"], "--workers: must be an integer, got '1_0'"),  # not 10
        (["local", "--workers", "1", "--servers", "\u0663"], "must be an integer, got '\u0663'"),
        (["local", "--workers", "2", "--grace", "-1"], "must be finite and >= 0"),
        (["mpi", "-np", "2", "--hostfile", "f", "-H", "a"], "not allowed with argument"),
    ],
)
def test_bad_flags(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(5)
    assert len(set(ports)) == 5
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_reserved_ports_are_distinct_listening_and_nobody_elses():
    """A reserved port cannot be taken while the launcher holds it (a picked one could, in
    the second before its shard bound it), and a client reaches it before any shard runs."""
    reserved = reserve_ports(3)
    try:
        ports = [s.getsockname()[1] for s in reserved]
        assert len(set(ports)) == 3 and all(s.get_inheritable() for s in reserved)
        for port in ports:
            with socket.socket() as s, pytest.raises(OSError, match="in use"):
                s.bind(("127.0.0.1", port))
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=5):
            pass  # queued until a shard accepts
    finally:
        for s in reserved:
            s.close()


def test_shards_serve_on_the_sockets_the_launcher_reserved(tmp_path):
    _, program, servers, job = _local(["--workers", "2", "--servers", "2"], tmp_path)
    specs = local_children(program, servers, job, 2, 0, {}, ports=[7001, 7002], fds=[5, 9])
    shards = specs[:2]
    assert [s.argv[s.argv.index("--bind") + 1 : s.argv.index("--bind") + 4] for s in shards] == [
        ["127.0.0.1:7001", "--bind-fd", "5"],
        ["127.0.0.1:7002", "--bind-fd", "9"],
    ]
    assert [s.fds for s in specs] == [(5,), (9,), (), ()]  # the workers inherit none
    assert specs[2].env["DISTCONV_PSERVERS"] == "127.0.0.1:7001,127.0.0.1:7002"


def test_failure_status_and_description():
    base = dict(role="worker", rank=1, log="l", tail=[], restart=0)
    assert Failure(exit_code=3, signal=None, **base).status == 3
    assert Failure(exit_code=300, signal=None, **base).status == 1
    killed = Failure(exit_code=None, signal="SIGKILL", **base)
    assert killed.status == 137 and killed.describe() == "worker 1 failed with signal SIGKILL"


def test_the_jobs_keys_are_never_readable_by_others(tmp_path):
    """The launcher's keys (made by `distconv keys`): directory 0700, no file open to others."""
    from launcher.job_keys import make_keys

    previous = os.umask(0o022)  # a typical umask, whatever the test runner has
    try:
        keys = tmp_path / "run" / "keys"
        make_keys(keys, 2)
    finally:
        os.umask(previous)
    assert (keys.stat().st_mode & 0o777) == 0o700
    files = sorted(keys.iterdir())
    assert len(files) == 6
    assert all(f.stat().st_mode & 0o077 == 0 for f in files), [oct(f.stat().st_mode) for f in files]


def test_threads_per_process_counts_a_containers_cpu_quota(monkeypatch):
    """A container limited to 2 CPUs on a 64-core node: children share 2 cores, as each rank's
    own kernel threads count them (distconv.cores), not 64."""
    from distconv import cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(cores, "_cgroup_quota", lambda root: 2.0)
    assert usable_cpus() == 2
    assert threads_per_process(2) == 1


def test_without_an_affinity_mask_the_launcher_counts_every_core(monkeypatch):
    """Not Linux (no sched_getaffinity): os.cpu_count(), as usable_cpus says, not 1."""
    from distconv import cores

    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(cores, "_cgroup_quota", lambda root: None)
    assert usable_cpus() == 8
    assert threads_per_process(2) == 4
