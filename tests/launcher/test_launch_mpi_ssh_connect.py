"""An mpi launch over other hosts bounds ssh's connect (``-o ConnectTimeout``) where the user
has not: a host that took the connection but never answered held the launch without a word,
for minutes (the kernel's connect timeout) or for good (once connected)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.batch_hosts import BATCH_JOB_VARS, MPI_DEFAULT_HOSTS, SCHEDULER_HOSTS
from launcher.mpi import Host
from launcher.ssh_connect import CONNECT_SECONDS, ssh_connect_bound
from tests.launcher.launch_cli import ENV, launcher_command
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import run_job

HYDRA = {"HYDRA_LAUNCHER_EXTRA_ARGS": f"-o ConnectTimeout={CONNECT_SECONDS}"}
#: a tab, not '=', between the option and its seconds: Open MPI 5 cuts the value at '=' where
#: it passes it on to its daemons (test_open_mpis_daemons_pass_the_bound_on)
OPENMPI = dict.fromkeys(
    ("PRTE_MCA_plm_ssh_args", "OMPI_MCA_plm_rsh_args"), f"-x -o ConnectTimeout\t{CONNECT_SECONDS}"
)
OTHERS = (Host("node-a", 2), Host("localhost", 2))


def _no_batch(env: dict[str, str]) -> dict[str, str]:
    """``env`` outside any batch job (the tests may run inside one)."""
    return {k: v for k, v in env.items() if k not in (*BATCH_JOB_VARS, *SCHEDULER_HOSTS)}


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    """A user's environment: this PATH (with ssh), a HOME with no MPI settings, no batch job."""
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh here")
def test_the_bound_for_each_mpi_over_other_hosts_only(environ, tmp_path):
    mpirun = str(tmp_path / "mpi" / "bin" / "mpirun")
    assert ssh_connect_bound("mpich", mpirun, OTHERS, environ) == HYDRA
    assert ssh_connect_bound("openmpi", mpirun, OTHERS, environ) == OPENMPI
    here = (Host("localhost", 2), Host("127.0.0.1", 1))
    for flavor in ("mpich", "openmpi"):
        assert ssh_connect_bound(flavor, mpirun, here, environ) == {}  # no ssh is run
        assert ssh_connect_bound(flavor, mpirun, (), environ) == {}  # mpiexec's own hosts
    # a wrapper named for ssh takes its options (tests start "remote" proxies so)
    fake = {**environ, "HYDRA_LAUNCHER_EXEC": "/opt/tools/fakessh"}
    assert ssh_connect_bound("mpich", mpirun, OTHERS, fake) == HYDRA
    fake = {**environ, "PRTE_MCA_plm_ssh_agent": "/opt/tools/fakessh"}
    assert ssh_connect_bound("openmpi", mpirun, OTHERS, fake) == OPENMPI


@pytest.mark.parametrize(
    "flavor, setting",
    [
        ("mpich", {"HYDRA_LAUNCHER_EXTRA_ARGS": "-p 2222"}),  # the user's own options
        ("mpich", {"HYDRA_LAUNCHER": "rsh"}),  # no ssh started
        ("mpich", {"HYDRA_BOOTSTRAP": "slurm"}),  # -o is srun's output file
        ("mpich", {"HYDRA_LAUNCHER_EXEC": "/usr/bin/rsh"}),
        ("mpich", {"SLURM_JOB_ID": "7"}),  # a batch job's mpiexec starts through srun
        ("openmpi", {"PBS_JOBID": "7.server"}),
        ("openmpi", {"PRTE_MCA_plm_ssh_args": "-p 2222"}),
        ("openmpi", {"OMPI_MCA_plm_rsh_agent": "rsh"}),
        ("openmpi", {"PATH": "/nonexistent"}),  # no ssh: Open MPI falls back to rsh
    ],
)
def test_no_bound_where_the_user_or_the_system_says_otherwise(environ, tmp_path, flavor, setting):
    mpirun = str(tmp_path / "mpi" / "bin" / "mpirun")
    assert ssh_connect_bound(flavor, mpirun, OTHERS, {**environ, **setting}) == {}


@pytest.mark.parametrize(
    "where, setting",
    [
        (".mpiexec.hydra.conf", "-launcher rsh"),  # the user's
        (".mpiexec.hydra.conf", "-hosts node-c  --bootstrap-exec /usr/bin/rsh"),
        ("mpi/etc/mpiexec.hydra.conf", "-bootstrap rsh"),  # the installation's
        ("site.conf", "-launcher-exec /opt/bin/rsh"),  # HYDRA_CONFIG_FILE's
    ],
)
def test_no_bound_where_hydras_config_files_name_another_launcher(
    environ, tmp_path, where, setting
):
    """Hydra reads its config files as its command line: -o reached an rsh they name."""
    mpirun = str(tmp_path / "mpi" / "bin" / "mpiexec")
    conf = tmp_path / where
    conf.parent.mkdir(parents=True, exist_ok=True)
    environ = {**environ, "HYDRA_CONFIG_FILE": str(conf)} if where == "site.conf" else environ
    conf.write_text("-launcher ssh -launcher-exec /opt/bin/ssh-wrapper\n")  # ssh all the same
    assert ssh_connect_bound("mpich", mpirun, OTHERS, environ) == HYDRA
    conf.write_text(f"{setting}\n")
    assert ssh_connect_bound("mpich", mpirun, OTHERS, environ) == {}


#: rsh's stand-in: refuses an option, as rsh refuses ssh's, and runs the command here
HERE_RSH = """#!/bin/sh
case "$1" in -*) echo "rsh: invalid option -- '$1'" >&2; exit 1;; esac
shift
exec sh -c "$*"
"""


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_a_launch_by_hydras_configured_rsh_still_runs(tmp_path, own_home):
    """~/.mpiexec.hydra.conf says -launcher rsh: the bound's -o went to rsh, which refused
    it, and a launch that ran without it failed (255)."""
    mpiexec_or_skip()
    (tmp_path / "bin").mkdir()
    rsh = tmp_path / "bin" / "rsh"
    rsh.write_text(HERE_RSH)
    rsh.chmod(0o755)
    (own_home / ".mpiexec.hydra.conf").write_text("-launcher rsh\n")
    env = {**_no_batch(ENV), "PATH": f"{rsh.parent}{os.pathsep}{ENV['PATH']}"}
    done = run_job(
        [*launcher_command(), "mpi", "-np", "1", "-H", "10.255.255.1:1", "--mpi-flavor",
         "mpich", "--run-dir", "run", "--", "true"],
        env=env, timeout=50, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh here")
@pytest.mark.parametrize("name", MPI_DEFAULT_HOSTS)
@pytest.mark.parametrize("flavor, bound", [("mpich", HYDRA), ("openmpi", OPENMPI)])
def test_an_mpis_default_hostfile_is_no_batch_job(environ, tmp_path, name, flavor, bound):
    """A user's default hostfile (HYDRA_HOST_FILE and Open MPI's), which -H overrides, is set
    outside any batch job: mpiexec still starts its daemons with ssh, which the bound was
    then left off."""
    (tmp_path / "hosts").write_text("node-c:2\n")
    mpirun = str(tmp_path / "mpi" / "bin" / "mpirun")
    setting = {**environ, name: str(tmp_path / "hosts")}
    assert ssh_connect_bound(flavor, mpirun, OTHERS, setting) == bound


@pytest.mark.skipif(shutil.which("ssh") is None, reason="no ssh here")
@pytest.mark.parametrize(
    "where", [".openmpi/mca-params.conf", ".prte/mca-params.conf", "mpi/etc/prte-mca-params.conf"]
)
def test_no_bound_where_open_mpis_parameter_files_set_sshs_options(environ, tmp_path, where):
    """The environment would override a file's setting (a port, another program)."""
    mpirun = str(tmp_path / "mpi" / "bin" / "mpirun")
    conf = tmp_path / where
    conf.parent.mkdir(parents=True)
    conf.write_text("# ours\nrmaps_base_oversubscribe = 1\n")
    assert ssh_connect_bound("openmpi", mpirun, OTHERS, environ) == OPENMPI  # others: kept
    conf.write_text("plm_ssh_agent = /opt/bin/ssh-wrapper\n")  # a program named for ssh
    assert ssh_connect_bound("openmpi", mpirun, OTHERS, environ) == OPENMPI
    for setting in ("plm_ssh_args = -x -p 2222  # the nodes' port", "plm_rsh_agent = rsh"):
        conf.write_text(f"# ours\n{setting}\n")
        assert ssh_connect_bound("openmpi", mpirun, OTHERS, environ) == {}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flavor, bound", [("mpich", HYDRA), ("openmpi", OPENMPI)])
def test_a_dry_run_over_other_hosts_shows_the_bound(tmp_path, flavor, bound):
    if shutil.which("ssh") is None and flavor == "openmpi":
        pytest.skip("no ssh here")
    argv = ["mpi", "-np", "2", "--mpi-flavor", flavor, "--dry-run", "--", "--epochs", "1"]
    shown = []
    for hosts in ("node-a:1,node-b:1", "localhost:2"):
        done = run_job(
            [*launcher_command(), *argv[:3], "-H", hosts, *argv[3:]],
            env=_no_batch(ENV), timeout=50, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        words = shlex.split(done.stdout)
        shown.append({w.partition("=")[0]: w.partition("=")[2] for w in words if "=" in w})
    assert {k: shown[0][k] for k in bound} == bound  # in the env before mpiexec
    assert not set(bound) & set(shown[1])  # this host's ranks need no ssh


#: ssh to a listener of the test's on this host, in place of the host Hydra names: a host
#: that takes the connection and never answers
SILENT_SSH = """#!/bin/sh
n=$#; host=
while [ $n -gt 0 ]; do
  a=$1; shift; n=$((n - 1))
  case "$a" in
    -[bcDEeFIiJLlmOopQRSWw]) set -- "$@" "$a" "$1"; shift; n=$((n - 1));;
    -*) set -- "$@" "$a";;
    *) if [ -z "$host" ]; then host=$a; set -- "$@" -p "$SILENT_PORT" 127.0.0.1
       else set -- "$@" "$a"; fi;;
  esac
done
exec REAL_SSH -o BatchMode=yes -o StrictHostKeyChecking=no "$@"
"""


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_a_host_that_never_answers_ssh_fails_the_launch_in_seconds(tmp_path):
    """Hydra starts its proxy on node-a with a real ssh, to a port of this host that takes
    the connection and says nothing. The bound is shortened to 2 s for the test (the
    product's is CONNECT_SECONDS); without it the launch waited until the test's timeout."""
    mpiexec_or_skip()
    ssh = shutil.which("ssh")
    if ssh is None:
        pytest.skip("no ssh here")
    fake = tmp_path / "ssh"
    fake.write_text(SILENT_SSH.replace("REAL_SSH", shlex.quote(ssh)))
    fake.chmod(0o755)
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('a rank ran')\n")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; no greeting ever comes
        env = {**_no_batch(ENV), "HYDRA_LAUNCHER_EXEC": str(fake)}
        env["SILENT_PORT"] = str(silent.getsockname()[1])
        started = time.monotonic()
        done = run_job(
            [*launcher_command("ssh_connect", CONNECT_SECONDS=2), "mpi", "-np", "2",
             "-H", "node-a.invalid:2", "--mpi-flavor", "mpich", "--run-dir", "run", "--",
             str(script)],
            env=env, timeout=30, cwd=tmp_path,
        )  # fmt: skip
        took = time.monotonic() - started
    assert done.returncode == 255, done.stderr  # mpiexec's, which failed to start its proxy
    assert took < 15, took
    assert "Connection timed out during banner exchange" in done.stderr, done.stderr
    assert "a rank ran" not in done.stderr
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert "Connection timed out during banner exchange" in "\n".join(report["tail"]), report


#: ssh's stand-in for Open MPI's daemons: it reads its options as ssh reads them (``ssh -G``,
#: which connects nowhere, exit 255 on one it refuses), notes the ConnectTimeout they make,
#: then runs the command here, as ssh runs it on the host
CHECKING_SSH = """#!PYTHON
import os, subprocess, sys
args, options = sys.argv[1:], []
while args[0].startswith("-"):
    takes = len(args[0]) == 2 and args[0][1] in "bcDEeFIiJLlmOopQRSWw"
    options += args[: 1 + takes]
    args = args[1 + takes :]
host, command = args[0], " ".join(args[1:])
read = subprocess.run(["ssh", "-G", *options, host], capture_output=True, text=True)
with open(os.environ["SSH_LOG"], "a") as log:
    said = [l for l in read.stdout.splitlines() if l.startswith("connecttimeout ")]
    log.write(f"{host} {read.returncode} {said} {read.stderr.strip()}\\n")
if read.returncode:  # ssh's own line, and its status
    sys.stderr.write(read.stderr)
    sys.exit(255)
os.execv("/bin/sh", ["sh", "-c", command])
"""


def _open_mpi_or_skip() -> str:
    """An Open MPI mpirun on PATH, after another MPI's too; skips the test where there is
    none."""
    from launcher.commands import LaunchError
    from launcher.mpi import detect_flavor

    for folder in os.environ.get("PATH", "").split(os.pathsep):
        found = shutil.which("mpirun", path=folder or None)
        try:
            if found is not None and detect_flavor(found) == "openmpi":
                return found
        except LaunchError:
            continue
    pytest.skip("no Open MPI mpirun on PATH")


@pytest.mark.mpi
@pytest.mark.timeout(90)
def test_open_mpis_daemons_pass_the_bound_on(tmp_path):
    """Open MPI's daemons start those of further hosts (its tree spawn: past 64 hosts by
    default, here from the second on) with the ssh options passed on to them, which Open MPI
    5 cut at '=': their ssh refused '-o ConnectTimeout' and the launch failed (255) where it
    ran without the bound. Every ssh, the daemons' too, must read the bound. (mpirun runs
    without the launcher's --bind-to none, which now and then hangs where every "host" is
    this one.)"""
    mpirun = _open_mpi_or_skip()
    if shutil.which("ssh") is None:
        pytest.skip("no ssh here")
    fake = tmp_path / "fake-ssh"
    fake.write_text(CHECKING_SSH.replace("PYTHON", sys.executable, 1))
    fake.chmod(0o755)
    log = tmp_path / "ssh.log"
    env = {**_no_batch(ENV), "SSH_LOG": str(log)}
    env.update(dict.fromkeys(("PRTE_MCA_plm_ssh_agent", "OMPI_MCA_plm_rsh_agent"), str(fake)))
    env.update(dict.fromkeys(("PRTE_MCA_routed_radix", "OMPI_MCA_routed_radix"), "1"))
    hosts = [Host(f"10.255.255.{n}", 1) for n in (1, 2, 3)]  # none this host; never reached
    bound = ssh_connect_bound("openmpi", mpirun, hosts, env)
    assert set(bound) == set(OPENMPI)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    done = run_job(
        [mpirun, "-np", "3", "-H", ",".join(f"{h.name}:1" for h in hosts), *root, "true"],
        env={**env, **bound}, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    said = log.read_text() if log.exists() else "(no ssh ran)"
    assert done.returncode == 0, f"{done.stderr}\n{said}"
    lines = said.splitlines()
    assert len(lines) == 3, said  # one daemon a host
    assert all(f" 0 ['connecttimeout {CONNECT_SECONDS}'] " in line + " " for line in lines), said
