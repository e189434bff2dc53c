"""``distconv.transport_flags``: a flag for another transport is refused, and a process knows
whether it is a rank of an MPI train job before (or without) the full parse."""

from __future__ import annotations

import pytest

from distconv.transport_flags import mpi_train_rank
from tests.test_cli import SMALL, _assert_one_line_error, distconv

pytestmark = pytest.mark.timeout(60)


MPI_ONLY = "is for --sync mpi, and this run uses local sync"
PSERVER_ONLY = "is for --sync pserver, and this run uses mpi sync"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--grad-dtype", "bfloat16"], f"--grad-dtype {MPI_ONLY}"),
        (["--bucket-mb", "1"], f"--bucket-mb {MPI_ONLY}"),
        (["--timeout", "5"], "--timeout is for --sync pserver or mpi, and this run uses local"),
        (["--sync", "mpi", "--push-kb", "0"], f"--push-kb {PSERVER_ONLY}"),
        (["--sync", "mpi", "--insecure"], f"--insecure {PSERVER_ONLY}"),
        (["--sync", "mpi", "--pservers", "h:9"], "--pservers is for --sync pserver, and this run"),
        (["--keys", "/k"], "--keys is for --sync pserver, and this run uses local sync"),
    ],
)
def test_a_flag_for_another_transport_is_refused_on_one_line(tmp_path, flags, said):
    """Before, each was dropped without a word: ``--grad-dtype`` on one process halved
    nothing, ``--pservers`` beside ``--sync mpi`` named servers no one used."""
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(tmp_path / "run"), *flags)
    _assert_one_line_error(proc, said)
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.parametrize("flags", [["--stall-seconds", "900"], ["--health-host", "0.0.0.0"]])
def test_a_probe_setting_without_health_port_is_refused_on_one_line(tmp_path, flags):
    """Without ``--health-port`` no probe is served, and ``--stall-seconds`` or
    ``--health-host`` was dropped without a word."""
    proc = distconv("train", *SMALL, "--epochs", "1", "--out", str(tmp_path / "run"), *flags)
    _assert_one_line_error(proc, f"{flags[0]} is a setting of the probes", "--health-port")
    assert not (tmp_path / "run").exists()


def test_the_servers_in_the_environment_are_not_a_flag(tmp_path):
    """DISTCONV_PSERVERS set around an explicit ``--sync local`` run is the environment's, not
    something this command asked for: the run goes on."""
    env = {"DISTCONV_PSERVERS": "127.0.0.1:9"}
    out = str(tmp_path / "run")
    proc = distconv("train", *SMALL, "--epochs", "1", "--sync", "local", "--out", out, env=env)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("argv", "env", "rank"),
    [
        (["train"], {"PMI_SIZE": "2"}, True),  # mpi implied under mpiexec
        (["-q", "train", "--epochs", "x"], {"PMI_SIZE": "2"}, True),
        (["train", "--sync=mpi"], {"OMPI_COMM_WORLD_SIZE": "3"}, True),
        (["train", "--sy", "mpi"], {"PMI_SIZE": "2"}, True),  # argparse takes abbreviations
        (["train", "--sync", "pserver"], {"PMI_SIZE": "2"}, False),
        (["train", "--pserv", "h:1"], {"PMI_SIZE": "2"}, False),
        (["train"], {"PMI_SIZE": "2", "DISTCONV_PSERVERS": "h:1"}, False),
        (["train", "--sync", "mpi", "--sync", "pserver"], {"PMI_SIZE": "2"}, False),  # the last
        # refused as one of several ranks, also as rank 0 of 1 by its flags: MPI ranks
        # beside it would wait in MPI_Init for ever
        (["train", "--sync", "local"], {"PMI_SIZE": "2"}, True),
        (["train", "--sync", "pserver", "--sync", "local"], {"OMPI_COMM_WORLD_SIZE": "2"}, True),
        (["train", "--sync=local", "--world-size=01", "--rank=0"], {"PMI_SIZE": "2"}, True),
        (["-q", "train", "--sync", "local", "--world-size=1"], {"PMI_SIZE": "2"}, True),
        # abbreviations as the full parse reads them: --s is ambiguous there (--seed), so that
        # parse fails, and mpi is implied
        (["train", "--s", "local"], {"PMI_SIZE": "2"}, True),
        (["train", "--s", "pserver"], {"PMI_SIZE": "2"}, True),
        (["train", "--sy", "pserver"], {"PMI_SIZE": "2"}, False),
        (["train", "--sync"], {"PMI_SIZE": "2"}, True),  # no value: none chosen, mpi implied
        (["train", "--sync", "mpi"], {"PMI_SIZE": "1"}, False),  # one rank waits for none
        (["train", "--sync", "mpi"], {}, False),
        (["pserver", "--sync", "mpi"], {"PMI_SIZE": "2"}, False),
    ],
)
def test_a_rank_of_an_mpi_train_job_is_known_before_the_parse(monkeypatch, argv, env, rank):
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "DISTCONV_PSERVERS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert mpi_train_rank(argv) is rank


def test_the_sniffing_parse_writes_nothing(monkeypatch, capsys):
    """An ambiguous flag fails the sniffing parse too; the full parse alone says so."""
    monkeypatch.setenv("PMI_SIZE", "2")
    assert mpi_train_rank(["train", "--sync", "local", "--r", "0", "--w", "1"]) is True
    assert capsys.readouterr() == ("", "")
