"""The hint ``distconv-launch local ... -- --mode async`` gets names a launch the launcher
accepts, tried here: it named ``distconv-launch local (or k8s) --mode async --max-staleness
N``, which a launch of ``--servers 0`` is refused in turn (``--mode async is for the
parameter-server shards, and --servers 0 starts none``), and whose ``N`` is no number.

The hinted launch is tried in this process up to where its job would start (its supervisor
a stand-in that records the children it would start): every check the launcher makes
before that is the real one, with no job to wait for."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
from pathlib import Path

import pytest

from launcher import cli
from launcher.commands import UsageError
from launcher.options import PROG, parse_own, split_argv

#: the mpi launches here run on this host, not a batch system's
pytestmark = pytest.mark.usefixtures("no_batch_hosts")
#: the hint's words before the command it names
TOLD = "asynchronous SGD is the shards' setting, a flag of the launcher's before --: "


def _parsed(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``distconv-launch ARGV``'s own arguments parsed as :func:`launcher.cli.main` parses
    them, and what followed ``--``."""
    own, rest = split_argv(argv)
    return parse_own(cli.build_parser(), own, rest), rest


def _run_local(argv: list[str]) -> int:
    """``distconv-launch ARGV`` (a local launch) as :func:`launcher.cli.main` runs it, less
    its signal handling: its own arguments parsed, then :func:`launcher.cli.run_local`."""
    return cli.run_local(*_parsed(argv))


def _hinted(refused: pytest.ExceptionInfo) -> list[str]:
    """The command the hint of the refusal ``refused`` names."""
    said = str(refused.value)
    assert TOLD in said, said
    return shlex.split(said.split(TOLD, 1)[1].removesuffix(")"))


def _same_run(launch: list[str], hinted: list[str], dests: set[str]) -> None:
    """The launch ``hinted`` sets each of ``dests`` (the job's options) as ``launch`` does:
    the same run (its run directory, job id, threads, restarts, grace), made async."""
    was, now = _parsed(launch)[0], _parsed(hinted[1:])[0]
    assert {d: getattr(now, d) for d in dests} == {d: getattr(was, d) for d in dests}, hinted


#: a local launch's options its async hint keeps as they are
LOCAL_SAME = {"workers", "run_dir", "job_id", "threads", "max_restarts", "grace", "settle"}
#: the job's options, abbreviated and not, with ``=`` and without
JOB = ("--threads", "2", "--max-r=1", "--gr", "5", "--settle", "0.5")


class _Started:
    """A stand-in for the supervisor: records the children the launch would start."""

    children: list = []
    stopped_by = None  # no stop signal: the launch ran to its end
    job_id = None  # what launch.json records of it (its run directory is a tmp_path)
    train = None  # the train arguments a stop's way on reads (none: it ran to its end)

    def __init__(self, run_dir: Path, *_: object, **__: object) -> None:  # grace, its settings
        self.run_dir = run_dir

    def claim(self) -> None: ...

    def unclaim(self) -> None: ...

    def say(self, line: str, level: str = "info", paths: object = None) -> None: ...

    def run(self, build, max_restarts: int) -> int:
        _Started.children = build(0)
        return 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "launch, after",
    [
        (["--workers", "1", "--servers", "0"], ["--mode", "async"]),
        (
            ["--workers", "2", "--servers", "0"],
            ["--epochs", "1", "--mode=async", "--staleness", "3"],
        ),
        (["--workers", "1"], ["--sync", "async", "--epochs", "1"]),  # N was no number here
        (["--workers", "1", "--mode", "async"], ["--max-staleness", "-1", "--async"]),
        (["--workers", "1"], ["--epochs", "1", "--mo", "async", "--ma", "3"]),  # flags abbreviated
        (  # the same run: its job's options kept
            [*("--workers", "2", "--servers", "0", "--run-dir", "my run", "--job-id=j1"), *JOB],
            ["--mode", "async"],
        ),
        (  # train flags the shards' launch refuses after --, taken without them
            ["--workers", "1", "--servers", "0"],
            ["--sync", "local", "--rank", "0", "--world-size=1", "--mode", "async"],
        ),
    ],
    ids=[
        *("servers-0", "servers-0-staleness", "sync-async", "bound-refused", "abbreviated"),
        *("job-options", "refused-after-dashes"),
    ],
)
def test_the_async_hint_names_a_launch_the_launcher_accepts(tmp_path, monkeypatch, launch, after):
    with pytest.raises(UsageError) as refused:
        _run_local(["local", *launch, "--", *after])
    hinted = _hinted(refused)
    assert hinted[:2] == [PROG, "local"] and "--mode" in hinted, hinted
    _same_run(["local", *launch, "--", *after], hinted, LOCAL_SAME)
    monkeypatch.chdir(tmp_path)  # its run directory: runs/<job-id> here
    monkeypatch.setattr(cli, "Supervisor", _Started)
    monkeypatch.setattr(cli, "make_keys", lambda keys_dir, workers, *hint: False)
    assert _run_local(hinted[1:]) == 0  # was: a UsageError of its own
    servers = [c for c in _Started.children if c.role == "server"]
    assert servers and all(c.argv[c.argv.index("--mode") + 1] == "async" for c in servers)


def test_the_async_hint_takes_an_abbreviated_bound_over():
    """``-- --mo async --ma 3``: ``--mode async`` and ``--max-staleness 3`` as argparse would
    read them; the 3 the hinted launch's bound, not a train argument left over."""
    with pytest.raises(UsageError) as refused:
        _run_local(["local", "--workers", "1", "--", "--epochs", "1", "--mo", "async", "--ma", "3"])
    hinted = shlex.split(str(refused.value).split(TOLD, 1)[1].removesuffix(")"))
    assert hinted[hinted.index("--max-staleness") + 1] == "3", hinted
    assert hinted[hinted.index("--") :] == ["--", "--epochs", "1"], hinted


def _started_async(tmp_path, monkeypatch, hinted: list[str]) -> None:
    """Run the local launch ``hinted`` up to its supervisor: it starts async shards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "Supervisor", _Started)
    monkeypatch.setattr(cli, "make_keys", lambda keys_dir, workers, *hint: False)
    assert _run_local(hinted[1:]) == 0
    servers = [c for c in _Started.children if c.role == "server"]
    assert servers and all(c.argv[c.argv.index("--mode") + 1] == "async" for c in servers)


@pytest.mark.timeout(30)
def test_an_mpi_launchs_async_hint_is_a_local_launch_of_its_ranks(tmp_path, monkeypatch):
    """mpi has no shards: it was told 'distconv-launch local (or k8s) --mode async
    --max-staleness N'. Its hint is a local launch of -np workers, its job's options
    kept; over hosts, that asynchronous SGD needs shards."""
    launch = ["mpi", "-np", "2", "--job-id", "j2", "--run-dir", "run 2", *JOB[:5]]
    with pytest.raises(UsageError) as refused:
        cli.run_mpi(*_parsed([*launch, "--", "--epochs", "1", "--mode=async"]))
    hinted = _hinted(refused)
    assert hinted[:4] == [PROG, "local", "--workers", "2"], hinted
    _same_run(launch, hinted, {"run_dir", "job_id", "threads", "max_restarts", "grace"})
    _started_async(tmp_path, monkeypatch, hinted)
    with pytest.raises(UsageError) as refused:
        cli.run_mpi(*_parsed(["mpi", "-np", "2", "-H", "a:1,b:1", "--", "--mode", "async"]))
    assert "needs parameter-server shards, and distconv-launch mpi starts none" in str(
        refused.value
    )


@pytest.mark.skipif(
    importlib.util.find_spec("distconv.deploy") is None, reason="no Kubernetes renderer"
)
@pytest.mark.parametrize(
    "launch",
    [
        ["--mpi", "--slots-per-worker", "2"],
        ["--servers", "0", "--max-staleness", "3"],  # refused under --servers 0: not async
        ["--servers", "2", "--job-name", "jj", "--out", "my manifests"],
    ],
    ids=["mpi", "servers-0", "servers-2"],
)
def test_a_k8s_renders_async_hint_is_a_render_it_takes(tmp_path, launch):
    """k8s --mpi (an MPIJob) was told the general hint, whose '--mode async' its render
    refuses: its hint is this render with shards, the same image and workers."""
    from launcher.k8s import checked_manifests

    own = ["k8s", "--workers", "2", "--image", "img:1", *launch]
    if "--max-staleness" in launch:
        own = own[:-2]  # a bound with no shards is refused before --
    with pytest.raises(UsageError) as refused:
        checked_manifests(*_parsed([*own, "--", "--mode", "async", "--epochs", "1"]))
    hinted = _hinted(refused)
    assert hinted[:2] == [PROG, "k8s"] and "--mpi" not in hinted, hinted
    _same_run(own, hinted, {"workers", "image", "job_name", "out", "gpus"})
    objects = checked_manifests(*_parsed(hinted[1:]))  # was: a refusal of its own
    assert "MPIJob" not in {o["kind"] for o in objects}
    servers = max(int(own[own.index("--servers") + 1]), 1) if "--servers" in own else 1
    assert _parsed(hinted[1:])[0].servers == servers


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv, expected, after",
    [
        (
            ["mpi", "-np", "2", "--job-id", "j3", "--mode", "async", "--max-staleness", "2"],
            {"workers": 2, "job_id": "j3", "max_staleness": 2},
            [],
        ),
        (
            ["local", "--workers", "1", "--async", "--gr", "5", "--", "--epochs", "1"],
            {"workers": 1, "grace": 5.0},
            ["--epochs", "1"],
        ),
    ],
    ids=["mpi-mode", "local-async"],
)
def test_an_async_word_before_the_dashes_is_told_a_launch_taken(
    tmp_path, monkeypatch, capsys, argv, expected, after
):
    """'mpi -np 2 --mode async' (no flag of mpi's) was told the general hint too, the launch
    it named none that takes it: it names the launch made async, as after --."""
    with pytest.raises(SystemExit):
        _parsed(argv)
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert TOLD in said, said
    hinted = shlex.split(said.split(TOLD, 1)[1].removesuffix(")"))
    args, rest = _parsed(hinted[1:])
    assert ({d: getattr(args, d) for d in expected}, rest) == (expected, after), hinted
    _started_async(tmp_path, monkeypatch, hinted)


@pytest.mark.timeout(30)
def test_an_mpi_launchs_async_hint_leaves_out_the_train_flags_shards_refuse(tmp_path, monkeypatch):
    """'mpi -np 2 -- --sync mpi --bucket-mb 4 --job-id j4 --mode async': its hint kept the
    --sync mpi and --bucket-mb that a launch with shards refuses, and the --job-id it takes
    only as its own: the hinted launch was refused in turn."""
    after = ["--sync", "mpi", "--bucket-mb", "4", "--job-id", "j4", "--mode", "async"]
    with pytest.raises(UsageError) as refused:
        cli.run_mpi(*_parsed(["mpi", "-np", "2", "--", *after, "--epochs", "1"]))
    hinted = _hinted(refused)
    args, rest = _parsed(hinted[1:])
    assert (args.job_id, rest) == ("j4", ["--epochs", "1"]), hinted
    _started_async(tmp_path, monkeypatch, hinted)


@pytest.mark.parametrize("variable", ["SLURM_JOB_NODELIST", "PBS_NODEFILE"])
def test_an_mpi_launch_on_a_batch_systems_hosts_is_not_told_a_local_launch(monkeypatch, variable):
    """Under Slurm (or PBS, ...) mpiexec takes its hosts from the allocation, with no -H:
    'mpi -np 64 -- --mode async' was told 'local --workers 64', all on this node."""
    monkeypatch.setenv(variable, "node[1-2]")
    with pytest.raises(UsageError) as refused:
        cli.run_mpi(*_parsed(["mpi", "-np", "4", "--", "--mode", "async"]))
    assert TOLD not in str(refused.value)
    assert "distconv-launch mpi starts none" in str(refused.value)


def test_the_async_hints_launch_names_a_line_break_as_a_shell_word():
    """A --run-dir with a line break was joined by shlex (its break kept in quotes), which
    the one-line refusal wrote as ``'$'my\\nrun''``: pasted, the run directory ``$mynrun``.
    It is the ``$'...'`` word, as the launcher's other hints write one."""
    with pytest.raises(UsageError) as refused:
        _run_local(["local", "--workers", "1", "--run-dir", "my\nrun", "--", "--mode", "async"])
    said = str(refused.value)
    assert "\n" not in said and f"{TOLD}{PROG} local --workers 1 --run-dir $'my\\nrun' " in said


#: train arguments on the user's own shards, made async
OWN_SHARDS = ["--sync", "pserver", "--pserv", "127.0.0.1:1,127.0.0.1:2", "--epochs", "1"]
OWN_ASYNC = [*OWN_SHARDS, "--mode", "async", "--max-stal=3"]


def test_a_launch_on_the_users_own_shards_is_told_their_setting():
    """'local --servers 0 -- --pservers h:p,h:q --mode async' was told a local launch that
    drops --pservers and starts shards of its own, in place of the user's: it is
    told that asynchronous SGD is the setting of those shards, which their own start takes."""
    from distconv.cli import build_parser

    args, rest = _parsed(["local", "--workers", "2", "--servers", "0", "--", *OWN_ASYNC])
    with pytest.raises(UsageError) as refused:
        cli.run_local(args, rest)
    said = str(refused.value)
    assert TOLD not in said and "the shards --pservers names, which you start" in said, said
    flags = shlex.split(said.rsplit(" with ", 1)[1].removesuffix(")"))
    assert flags == ["--mode", "async", "--max-staleness", "3"], said
    shard = ["--bind", "tcp://127.0.0.1:1", "--shard", "0", "--num-shards", "2", "--workers", "2"]
    taken = build_parser().parse_args(["pserver", *shard, *flags])  # flags the shards take
    assert (taken.mode, taken.max_staleness) == ("async", 3)


@pytest.mark.timeout(30)
def test_an_mpi_launch_on_the_users_own_shards_is_told_a_launch_taken(tmp_path, monkeypatch):
    """mpi's ranks train with allreduce, refusing --pservers after --: 'mpi -np 2 --
    --pservers h:p --mode async' was told to start those shards with --mode async,
    and the launch was refused next for --pservers itself. Its hint is the local launch
    of its ranks, which starts async shards of its own."""
    with pytest.raises(UsageError) as refused:
        cli.run_mpi(*_parsed(["mpi", "-np", "2", "--", *OWN_ASYNC]))
    hinted = _hinted(refused)
    assert hinted[:4] == [PROG, "local", "--workers", "2"], hinted
    _started_async(tmp_path, monkeypatch, hinted)  # was: '--pservers after --' refused


@pytest.mark.skipif(
    importlib.util.find_spec("distconv.deploy") is None, reason="no Kubernetes renderer"
)
@pytest.mark.parametrize("launch", [["--mpi"], ["--servers", "0"]], ids=["mpi", "servers-0"])
def test_a_k8s_render_on_the_users_own_shards_is_told_a_render_it_takes(launch):
    """A k8s render leaves --pservers to its deployment: its own-shards hint named a
    render refused for --pservers. Its hint is this render with shards, which it takes."""
    from launcher.k8s import checked_manifests

    own = ["k8s", "--workers", "2", "--image", "img:1", *launch]
    with pytest.raises(UsageError) as refused:
        checked_manifests(*_parsed([*own, "--", *OWN_ASYNC]))
    hinted = _hinted(refused)
    assert checked_manifests(*_parsed(hinted[1:]))  # was: '--pservers' refused
