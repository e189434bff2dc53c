"""``distconv-launch mpi``: exact commands for MPICH and OpenMPI, hostfiles, a real mpiexec run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.commands import LaunchError, Program, threads_per_process, usable_cpus
from launcher.mpi import (
    LINE_BUFFERED,
    SCHEDULER_HOSTS,
    Host,
    MpiOptions,
    exported_names,
    flavor_from_version,
    mpi_command,
    mpi_worker_command,
    parse_hostfile,
    parse_hosts,
)
from tests.child_env import child_path
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import ENV as LAUNCH_ENV
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import run_job

PY = sys.executable

HYDRA = """HYDRA build details:
    Version:                                 4.1.2
    Release Date:                            Wed Jun  7 15:22:45 CDT 2023
"""
OPENMPI = "mpirun (Open MPI) 4.1.5\n\nReport bugs to http://www.open-mpi.org/community/help/\n"


def test_flavor_from_version():
    assert flavor_from_version(HYDRA) == "mpich"
    assert flavor_from_version(OPENMPI) == "openmpi"
    assert flavor_from_version("mpirun (OpenRTE) 2.1.1") == "openmpi"
    with pytest.raises(
        LaunchError, match="unknown MPI: .* says 'Something 1.0'; pass --mpi-flavor"
    ):
        flavor_from_version("Something 1.0\nmore")


def test_hostfiles_in_both_formats():
    """A host without a slot count takes 1 slot in either format, as MPICH counts it and as
    both MPIs read the host list the launcher passes on; it is marked unstated, so that a
    refusal of more ranks can say Open MPI's own hostfile reading would count its cores."""
    mpich = "# MPICH\nnode-a:2\nnode-b:4   # fast one\n\nnode-c\n"
    openmpi = "node-a slots=2\nnode-b slots=4 max_slots=8\nnode-c\n"
    expected = [Host("node-a", 2), Host("node-b", 4), Host("node-c", 1, stated=False)]
    assert parse_hostfile(mpich) == expected
    assert parse_hostfile(openmpi) == expected
    assert parse_hosts("node-a:2,node-b:4,node-c") == expected


@pytest.mark.parametrize(
    "line",
    [
        "node-a slots=3",
        "node-a count=3",
        "node-a cpu=3",
        "node-a slots = 3",
        "node-a slots =3\tmax-slots= 8",
        "node-a max-slots=8 slots=3",
        "node-a slots=3 slots_max=8",
        "node-a cpu=3 max_cpu=3 count_max=4 max-count=5",
    ],
)
def test_open_mpis_other_spellings_of_a_hosts_slots(line):
    """Open MPI's mpirun reads count= and cpu= as slots=, spaces around '=', and a maximum in
    twelve spellings; each was refused as an unknown field."""
    assert parse_hostfile(line + "\n") == [Host("node-a", 3)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("a:0\n", "hosts line 1: slots must be a positive integer, got '0' in 'a:0'"),
        ("a\nb slots=x\n", "hosts line 2: slots must be a positive integer, got 'x'"),
        ("a cpus=2\n", "hosts line 1: unknown field 'cpus=2' in 'a cpus=2'"),
        # Open MPI refuses these too: a parse error, two counts, a maximum below the count
        ("a maxslots=4\n", "hosts line 1: unknown field 'maxslots=4'"),
        ("a slots=1 count=2\n", "hosts line 1: the slot count is given twice in"),
        ("a:2 slots=2\n", "hosts line 1: the slot count is given twice in"),
        ("a slots=2 max-slots=1\n", "hosts line 1: the maximum 1 is less than the 2 slots in"),
        (":2\n", "no host name in ':2'"),
        ("# nothing\n", "hosts names no hosts"),
    ],
)
def test_bad_hostfiles(text, message):
    with pytest.raises(LaunchError, match=message):
        parse_hostfile(text, where="hosts")


def test_bad_host_list():
    with pytest.raises(LaunchError, match=r"-H 'a:two': slots must be"):
        parse_hosts("a:two")


def test_worker_commands_under_mpi():
    train = Program(("--epochs", "1"), True)
    assert mpi_worker_command(train, python="py") == [
        "py", "-m", "mpi4py", "-m", "distconv", "train", "--sync", "mpi", "--epochs", "1",
    ]  # fmt: skip
    assert mpi_worker_command(Program(("me.py", "-x"), False), python="py") == [
        "py",
        "-m",
        "mpi4py",
        "-c",
        LINE_BUFFERED,
        "me.py",
        "-x",
    ]
    assert mpi_worker_command(Program(("prog",), False)) == ["prog"]


ENVIRON = {
    "PATH": "/bin",
    "HOME": "/h",
    "PYTHONPATH": "/src",
    "DISTCONV_JOB_ID": "j",
    "OMP_NUM_THREADS": "2",
    "NCCL_DEBUG": "INFO",
}


def test_mpich_command_exactly():
    opts = MpiOptions(4, (Host("a", 2), Host("b", 2)), oversubscribe=True, allow_run_as_root=True)
    assert mpi_command("/x/mpiexec", "mpich", opts, ["w"], ENVIRON) == [
        "/x/mpiexec", "-n", "4", "-hosts", "a:2,b:2", "-genvall", "-prepend-rank",
        "-print-all-exitcodes", "w",
    ]  # fmt: skip
    assert mpi_command("mpiexec", "mpich", MpiOptions(2), ["w"], ENVIRON) == [
        "mpiexec", "-n", "2", "-genvall", "-prepend-rank",
        "-print-all-exitcodes", "w",
    ]  # fmt: skip


def test_openmpi_command_exactly():
    opts = MpiOptions(5, (Host("a", 2), Host("b", 2)), oversubscribe=True, allow_run_as_root=True)
    assert exported_names(ENVIRON) == [
        "DISTCONV_JOB_ID", "NCCL_DEBUG", "OMP_NUM_THREADS", "PATH", "PYTHONPATH",
    ]  # fmt: skip
    assert mpi_command("mpirun", "openmpi", opts, ["w", "x"], ENVIRON) == [
        "mpirun", "-np", "5", "-H", "a:2,b:2", "--tag-output", "--bind-to", "none",
        "--oversubscribe", "--allow-run-as-root",
        "-x", "DISTCONV_JOB_ID", "-x", "NCCL_DEBUG", "-x", "OMP_NUM_THREADS", "-x", "PATH",
        "-x", "PYTHONPATH", "w", "x",
    ]  # fmt: skip


def test_more_ranks_than_slots_is_refused():
    with pytest.raises(LaunchError, match=r"-np 3 is more than the 2 slot\(s\) of the hosts; add "):
        mpi_command("m", "openmpi", MpiOptions(3, (Host("a", 2),)), ["w"], {})
    # a host without a count: what it takes, and what Open MPI's own mpirun would have counted
    hosts = (Host("a", 2), *parse_hostfile("node-c\n"))
    said = (
        "-np 4 is more than the 3 slot(s) of the hosts; add hosts or slots, or pass "
        "--oversubscribe ('node-c' has no slot count, so it takes 1, as MPICH counts it; Open "
        "MPI's own mpirun --hostfile would count its cores: write them, as 'node-c slots=N' or "
        "'node-c:N')"
    )
    with pytest.raises(LaunchError, match=re.escape(said)):
        mpi_command("m", "mpich", MpiOptions(4, hosts), ["w"], {})
    with pytest.raises(LaunchError, match="MPI flavor must be one of mpich, openmpi"):
        mpi_command("m", "lam", MpiOptions(1), ["w"], {})


def launch_env(tmp_path: Path) -> dict[str, str]:
    """The environment the tests run the launcher in: this checkout, then the parent's own
    ``PYTHONPATH`` (:func:`tests.child_env.child_path`), for the launcher and its ranks; a
    ``HOME`` of the test's own in ``tmp_path`` (``/tmp`` was shared with the other xdist worker
    and other users: MPI's and Python's files kept there)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": child_path(), "HOME": str(home)}
    # Open MPI's own settings (root in a container, oversubscription: .ci/openmpi) carry over;
    # a runner's default hostfile does not: it would send the ranks elsewhere
    base.update(
        {
            k: v
            for k, v in os.environ.items()
            if k.startswith(("OMPI_", "PRTE_")) and k not in SCHEDULER_HOSTS
        }
    )
    return base


def launch(
    *argv: str,
    tmp_path: Path,
    env: dict | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """``distconv-launch mpi ARGV`` in :func:`launch_env` (its ``HOME`` in ``tmp_path``), its
    output captured as text; where it hangs past ``timeout``, it, ``mpiexec`` and every rank
    are killed (:func:`tests.processes.run_job`)."""
    argv = [PY, "-m", "launcher", "mpi", *argv]
    return run_job(argv, env={**launch_env(tmp_path), **(env or {})}, timeout=timeout, cwd=cwd)


@pytest.mark.timeout(60)
def test_dry_run_prints_the_exact_command(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("node-a slots=2\nnode-b slots=2\n")
    done = launch("-np", "4", "--hostfile", str(hostfile), "--mpiexec", "sh", "--mpi-flavor",
                  "openmpi", "--allow-run-as-root", "--job-id", "j9", "--threads", "3", "--dry-run",
                  "--", "--epochs", "1", cwd=tmp_path, tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    exports = ["DISTCONV_JOB_ID", "DISTCONV_LAUNCH", "DISTCONV_NUM_THREADS", "DISTCONV_RESTART"]
    exports += ["MKL_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "PATH", "PYTHONPATH"]
    expected = [
        shutil.which("sh"),
        "-np",
        "4",
        "-H",
        "node-a:2,node-b:2",
        "--tag-output",
        "--bind-to",
        "none",
    ]
    expected += ["--allow-run-as-root"]
    for name in exports:
        expected += ["-x", name]
    expected += [PY, "-m", "mpi4py", "-m", "distconv", "train", "--sync", "mpi", "--epochs", "1"]
    expected += ["--out", str(tmp_path / "runs" / "j9" / "train")]  # as local does
    assert done.stdout.endswith(" " + shlex.join(expected) + "\n")
    # what the launcher sets in mpiexec's environment, so the command runs as it would
    prefix = shlex.split(done.stdout[: -len(shlex.join(expected)) - 2])
    assert prefix[0] == "env"
    assert {"DISTCONV_JOB_ID=j9", "DISTCONV_RESTART=0", "OMP_NUM_THREADS=3"} <= set(prefix)
    assert any(re.fullmatch(r"DISTCONV_LAUNCH=[0-9a-f]{16}", a) for a in prefix)  # restarts too
    assert not (tmp_path / "runs").exists()


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_the_dry_runs_command_runs_as_the_launcher_would(tmp_path):
    """A shell with another launcher's RANK left over: the printed command unsets it."""
    script = rank_script(tmp_path)
    leftover = {"RANK": "5", "PYTHONUNBUFFERED": "1"}
    done = launch("-np", "2", "-H", "localhost:2", "--job-id", "d1", "--threads", "1",
                  "--dry-run", "--", str(script), env=leftover, cwd=tmp_path,
                  tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    ran = run_job(
        shlex.split(done.stdout),
        env={**launch_env(tmp_path), **leftover},
        timeout=100,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    rows = [json.loads(line[line.index("{") :]) for line in ran.stdout.splitlines() if "{" in line]
    assert sorted((r["rank"], r["world"], r["job"], r["threads"]) for r in rows) == [
        (0, 2, "d1", "1"),
        (1, 2, "d1", "1"),
    ]


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_dry_run_detects_the_installed_mpi(tmp_path):
    script = tmp_path / "my.py"
    script.write_text("")
    beside = Path(PY).parent / "mpiexec"  # the one for this Python's mpi4py comes first
    mpiexec = str(beside) if os.access(beside, os.X_OK) else shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec beside Python or on PATH")
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    flavor = flavor_from_version(version.stdout + version.stderr)
    done = launch(
        "-np", "2", "-H", "localhost:2", "--dry-run", "--", str(script), tmp_path=tmp_path
    )
    if flavor == "mpich":
        expected = [mpiexec, "-n", "2", "-hosts", "localhost:2", "-genvall", "-prepend-rank"]
        expected += ["-print-all-exitcodes"]
    else:
        expected = [mpiexec, "-np", "2", "-H", "localhost:2", "--tag-output", "--bind-to", "none"]
    assert done.stdout.startswith("env ")  # what the launcher sets, then the command
    assert " " + shlex.join(expected) + " " in done.stdout
    assert done.stdout.endswith(
        shlex.join([PY, "-m", "mpi4py", "-c", LINE_BUFFERED, str(script)]) + "\n"
    )


RANK_SCRIPT = """
import json, os, sys
from mpi4py import MPI
from distconv.kernels.parallel import num_threads
from distconv.runtime import detect_runtime
runtime = detect_runtime()
comm = MPI.COMM_WORLD
total = comm.allreduce(runtime.rank + 1)
print(json.dumps({"mpi_rank": comm.Get_rank(), "source": runtime.source, "rank": runtime.rank,
                  "world": runtime.world_size, "job": runtime.job_id, "sum": total,
                  "threads": os.environ["OMP_NUM_THREADS"], "argv": sys.argv[1:],
                  "kernel_threads": num_threads(),
                  "kernel_var": os.environ.get("DISTCONV_NUM_THREADS")}), flush=True)
"""


def _installed_flavor() -> str:
    """``mpich`` or ``openmpi``: the MPI whose ``mpiexec`` is on PATH."""
    version = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True, timeout=30)
    return flavor_from_version(version.stdout + version.stderr)


def rank_script(tmp_path: Path) -> Path:
    """RANK_SCRIPT in a file, where a real mpiexec and mpi4py can run it (else the test skips)."""
    mpiexec_or_skip()
    script = tmp_path / "ranks.py"
    script.write_text(RANK_SCRIPT)
    return script


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_mpiexec_really_runs_two_ranks_from_a_hostfile(tmp_path):
    script = rank_script(tmp_path)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost:2\n")
    done = launch("-np", "2", "--hostfile", str(hostfile), "--job-id", "mpi1", "--threads", "1",
                  "--run-dir", str(tmp_path / "run"), "--", str(script), "--flag",
                  timeout=100, tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # every line carries its rank: "[1] ..." (MPICH) or "[1,1]<stdout>:..." (OpenMPI)
    tagged = [re.match(r"\[(?:\d+,)?(\d+)\](?:<stdout>:)? ?(.*)$", line) for line in lines]
    assert all(tagged), lines
    rows = sorted((json.loads(m.group(2)) for m in tagged), key=lambda r: r["rank"])
    assert sorted(int(m.group(1)) for m in tagged) == [0, 1]
    for rank, row in enumerate(rows):
        assert row["source"] in ("pmi", "openmpi")
        expected = {"mpi_rank": rank, "rank": rank, "world": 2, "job": "mpi1", "sum": 3}
        assert {k: row[k] for k in expected} == expected
        assert (row["threads"], row["argv"]) == ("1", ["--flag"])
    assert len(rows) == 2
    log = logged(tmp_path / "run" / "logs" / "mpiexec-0.log").decode().splitlines()
    # the log alone keeps Hydra's -print-all-exitcodes line: every process's status
    statuses = [line for line in log if "Exit codes" in line]
    said = [re.sub(r"^\[mpiexec@[^\]]*\] ", "", line) for line in statuses]
    assert said == (["Exit codes: [localhost] 0,0"] if _installed_flavor() == "mpich" else [])
    assert sorted(line for line in log if line not in statuses) == sorted(done.stdout.splitlines())


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_without_threads_each_rank_sizes_its_kernel_threads_for_the_ranks_on_its_host(tmp_path):
    """No DISTCONV_NUM_THREADS from the launching host: each rank divides its own host's cores
    by the ranks MPI started there (MPI_LOCALNRANKS, OMPI_COMM_WORLD_LOCAL_SIZE)."""
    script = rank_script(tmp_path)
    done = launch("-np", "2", "-H", "localhost:2", "--oversubscribe", "--job-id", "mpi2",
                  "--run-dir", str(tmp_path / "run"), "--", str(script), timeout=100,
                  tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line[line.index("{") :]) for line in done.stdout.splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["kernel_var"] is None
        assert row["kernel_threads"] == max(1, usable_cpus() // 2)
        assert row["threads"] == str(threads_per_process(2))  # BLAS's: this host's estimate


@pytest.mark.timeout(60)
def test_a_dry_run_without_threads_leaves_the_kernel_threads_to_each_rank(tmp_path):
    done = launch("-np", "2", "-H", "a:1,b:1", "--mpiexec", "sh", "--mpi-flavor", "openmpi",
                  "--job-id", "j8", "--dry-run", "--", "--epochs", "1", cwd=tmp_path,
                  tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "DISTCONV_NUM_THREADS" not in done.stdout
    assert "OMP_NUM_THREADS=" in done.stdout and "-x OMP_NUM_THREADS" in done.stdout


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flavor", ["mpich", "openmpi"])
def test_a_kernel_thread_count_inherited_from_the_shell_does_not_reach_the_ranks(tmp_path, flavor):
    """Without --threads each rank sizes its own kernel threads: a DISTCONV_NUM_THREADS left
    in the launching shell is removed (local mode overrides it too), not passed on."""
    done = launch("-np", "2", "-H", "a:1,b:1", "--mpiexec", "sh", "--mpi-flavor", flavor,
                  "--job-id", "j8", "--dry-run", "--", "--epochs", "1",
                  env={"DISTCONV_NUM_THREADS": "7"}, cwd=tmp_path, tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "-u DISTCONV_NUM_THREADS" in done.stdout and "-x DISTCONV_NUM_THREADS" not in done.stdout


FAKE_MPIEXEC = """#!/bin/sh
echo "$DISTCONV_RESTART $DISTCONV_LAUNCH" >> "$SEEN"
[ "$DISTCONV_RESTART" = 1 ]
"""


@pytest.mark.timeout(60)
def test_every_start_of_an_mpi_job_carries_its_launchs_one_token(tmp_path):
    """The dry run shows start 0 only: an mpiexec that fails once records what each start got.
    A restart must see the first start's DISTCONV_LAUNCH (distconv train --overwrite continues
    the run its launch began by it), and an inherited one is not passed on."""
    fake, seen = tmp_path / "mpiexec", tmp_path / "seen"
    fake.write_text(FAKE_MPIEXEC)
    fake.chmod(0o755)
    done = launch("-np", "2", "--mpiexec", str(fake), "--mpi-flavor", "mpich",
                  "--max-restarts", "1", "--run-dir", str(tmp_path / "run"), "--", "--epochs", "1",
                  env={"SEEN": str(seen), "DISTCONV_LAUNCH": "outer"}, cwd=tmp_path,
                  tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    starts = [line.split() for line in seen.read_text().splitlines()]
    assert [restart for restart, _ in starts] == ["0", "1"]
    assert starts[0][1] == starts[1][1] != "outer"
    assert re.fullmatch(r"[0-9a-f]{16}", starts[0][1])


def test_a_dry_run_to_a_closed_stdout_is_refused_in_one_line(tmp_path):
    """Started with stdout closed (``>&-``), ``--dry-run``'s command went nowhere and the
    launcher exited 0, as if it had been printed."""
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "mpi", "-np", "2", "--mpi-flavor", "mpich",
         "--dry-run", "--", "--epochs", "1"],
        env=LAUNCH_ENV, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),  # as a shell's >&-
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        "distconv-launch mpi: error: stdout is closed: --dry-run prints the command there\n"
    )


@pytest.mark.timeout(60)
def test_the_launcher_and_its_mpiexec_run_with_a_home_of_the_tests_own(tmp_path):
    """``HOME`` was ``/tmp``, shared with the other xdist worker and other users: what MPI or
    Python keep in it (``~/.cache``, Hydra's and Open MPI's files) crossed tests."""
    fake, seen = tmp_path / "mpiexec", tmp_path / "seen"
    fake.write_text('#!/bin/sh\necho "$HOME" > "$SEEN"\n')
    fake.chmod(0o755)
    done = launch("-np", "2", "--mpiexec", str(fake), "--mpi-flavor", "mpich",
                  "--run-dir", str(tmp_path / "run"), "--", "--epochs", "1",
                  env={"SEEN": str(seen)}, tmp_path=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert seen.read_text() == f"{tmp_path / 'home'}\n"  # was /tmp


@pytest.mark.mpi
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "where, env",
    [
        (["-H", "a:1,b:1"], {}),
        (["--hostfile", "hosts"], {}),
        ([], {"SLURM_JOB_NODELIST": "node[1-2]"}),  # a batch allocation: mpiexec's own hosts
    ],
    ids=["hosts", "hostfile", "batch"],
)
def test_a_program_the_other_hosts_have_is_not_refused_for_missing_here(tmp_path, where, env):
    """'mpi -H a:1,b:1 -- /opt/on-nodes/prog' was refused, 'program ... does not exist',
    looked for on this host before the hosts were: each host's ranks start their own copy.
    Where every rank runs here, it is still refused before mpiexec starts."""
    (tmp_path / "hosts").write_text("a slots=1\nb slots=1\n")
    program = str(tmp_path / "on-nodes" / "prog")  # nothing there on this host
    done = launch("-np", "2", *where, "--dry-run", "--", program, "--lr", "1",
                  tmp_path=tmp_path, env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(shlex.join([program, "--lr", "1"])), done.stdout
    said = f"note: on this host, program {program!r} does not exist; the ranks start each host's"
    assert said in done.stderr, done.stderr  # a slip ('-- epochs 2') is still said
    here = launch("-np", "2", "--dry-run", "--", program, tmp_path=tmp_path, cwd=tmp_path)
    assert (here.returncode, here.stdout) == (1, ""), here.stderr
    assert f"program {program!r} does not exist" in here.stderr


@pytest.mark.timeout(60)
def test_a_train_flags_dashes_left_out_are_refused_over_other_hosts_too(tmp_path):
    """``mpi -H a:1,b:1 -- epochs 2`` was only noted (``program 'epochs' does not exist``)
    and mpiexec started the ranks on a program no host has: a bare word that is no program
    here but a train flag's name is refused as a usage error (exit 2), before anything
    starts, naming the fix; a program of that name on ``PATH`` here still runs."""
    refused = launch("-np", "2", "-H", "a:1,b:1", "--dry-run", "--", "batch_size", "32",
                     tmp_path=tmp_path, cwd=tmp_path)  # fmt: skip
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
    said = "did you mean -- --batch-size 32? (a program 'batch_size' on the other hosts is "
    assert said in refused.stderr, refused.stderr  # and how one the nodes alone have runs
    assert refused.stderr.rstrip().endswith("by its path: -- /path/to/batch_size)")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "epochs").write_text("#!/bin/sh\n")
    (tools / "epochs").chmod(0o755)
    path = {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    ran = launch("-np", "2", "-H", "a:1,b:1", "--dry-run", "--", "epochs", "2",
                 tmp_path=tmp_path, env=path, cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.rstrip().endswith(" epochs 2"), ran.stdout


def test_a_train_flags_dashes_left_out_are_a_usage_error_here_too():
    """Where the ranks run here the slip was refused already, as a missing program (exit 1);
    now as the usage error it is, as k8s's and over other hosts, with the fix named. Over
    other hosts a program of that name that only they have (``-- seed 1``, a tool on the
    nodes alone) is named too, started by its path, which the refusal says."""
    from launcher.commands import UsageError, parse_program

    with pytest.raises(UsageError, match=r"did you mean -- --epochs 2\?$"):
        parse_program(["epochs", "2"], False)  # all ranks here: no other host's program
    nodes = r"\? \(a program 'seed' on the other hosts is started by its path: -- /path/to/seed\)$"
    with pytest.raises(UsageError, match=r"did you mean -- --seed 1" + nodes):
        parse_program(["seed", "1"], True)
    with pytest.raises(UsageError, match=r"did you mean -- --epochs\? \(a program 'epochs' "):
        parse_program(["epochs", "--lr", "1"], True)
    # a negative value is the flag's, as argparse reads it: it was left out of the fix
    with pytest.raises(UsageError, match=r"did you mean -- --lr -0\.1\? \("):
        parse_program(["lr", "-0.1"], True)
    # a flag that takes no value is named alone: '-- --overwrite x' is refused
    with pytest.raises(UsageError, match=r"did you mean -- --overwrite\?$"):
        parse_program(["overwrite", "x"], False)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "where, env",
    [
        (["-H", "localhost:2"], {}),
        (["-H", "127.0.0.1:1,[::1]:1"], {}),
        (["--hostfile", "hosts"], {}),  # this host's own name
        ([], {"SLURM_JOB_NODELIST": socket.gethostname()}),  # a one-node allocation: this one
    ],
    ids=["localhost", "loopback", "hostfile", "batch"],
)
def test_hosts_that_are_this_one_refuse_a_program_missing_here(tmp_path, monkeypatch, where, env):
    """Any host list counted as ranks elsewhere: 'mpi -H localhost:2 -- /opt/x/prog' was only
    noted, then every rank's mpiexec said 'execvp error'. Hosts that are all
    this one start this host's program, which is looked for here, before mpiexec. A
    runner's own default hostfile is not the launch's: launch_env leaves it out."""
    (tmp_path / "hosts").write_text(f"{socket.gethostname()} slots=2\n")
    (tmp_path / "runners").write_text("a slots=1\nb slots=1\n")
    monkeypatch.setenv("OMPI_MCA_orte_default_hostfile", str(tmp_path / "runners"))
    monkeypatch.setenv("PRTE_MCA_prte_default_hostfile", str(tmp_path / "runners"))
    program = str(tmp_path / "on-nodes" / "prog")  # nothing there on this host
    done = launch("-np", "2", *where, "--dry-run", "--", program,
                  tmp_path=tmp_path, env=env, cwd=tmp_path)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert f"error: program {program!r} does not exist" in done.stderr, done.stderr
