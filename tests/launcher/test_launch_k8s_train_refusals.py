"""``distconv-launch k8s`` refuses train arguments after ``--`` with a usage error, exit 2, as
``distconv-launch local`` does: a workers' ``--timeout`` below a shard's least exited 1 from
k8s (the renderer's ValueError became a plain launch error) and 2 from local, the same slip.
A refusal of the launch's own flags stays exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(120)

#: a parameter-server job of two workers and one shard
SHARDED = ("--workers", "2", "--servers", "1")
BELOW_THE_LEAST = ("--", "--data", "synthetic", "--epochs", "1", "--timeout", "0.1")


def _refused(*argv: str, cwd: Path) -> tuple[int, str]:
    """The exit status and the one stderr line of the launch of ``argv``, which starts nothing:
    no output on stdout, nothing written in ``cwd``."""
    cwd.mkdir()
    done = launch(*argv, cwd=cwd)
    assert done.stdout == "" and list(cwd.iterdir()) == [], done.stdout[-2000:]
    (line,) = done.stderr.splitlines()
    return done.returncode, line


def test_a_timeout_below_the_shards_least_is_a_usage_error_from_k8s_as_from_local(tmp_path):
    rendered = _refused("k8s", *SHARDED, "--image", "d:1", *BELOW_THE_LEAST, cwd=tmp_path / "k")
    started = _refused("local", *SHARDED, "--insecure", "--run-dir", "run", *BELOW_THE_LEAST,
                       cwd=tmp_path / "l")  # fmt: skip
    assert rendered[0] == started[0] == 2, (rendered, started)
    assert rendered[1].startswith("distconv-launch k8s: error: --timeout 0.1 is below 0.2 s")


def test_an_mpijobs_timeout_past_its_stall_limit_is_a_usage_error(tmp_path):
    train = ("--", "--epochs", "1", "--timeout", "400", "--stall-seconds", "300")
    status, line = _refused("k8s", "--mpi", "--workers", "2", "--image", "d:1", *train,
                            cwd=tmp_path / "m")  # fmt: skip
    assert status == 2, line
    assert "--timeout 400 is not below their --stall-seconds 300" in line


def test_the_launchs_own_flags_refused_first_stay_exit_1(tmp_path):
    status, line = _refused("k8s", *SHARDED, "--image", "d:1", "--job-name", "Bad_Name",
                            *BELOW_THE_LEAST, cwd=tmp_path / "j")  # fmt: skip
    assert status == 1 and "--job-name must be a DNS label" in line, line


def test_a_refusal_of_the_train_arguments_in_other_words_is_still_a_usage_error(monkeypatch):
    """Told by the job rendering without them, not by the refusal's closing words "(the train
    arguments after --)": the real renderer, its refusal reworded (as any may come to be),
    refuses a workers' --timeout below a shard's least, and the launch still says exit 2."""
    from distconv.deploy import render
    from launcher.cli import build_parser
    from launcher.commands import UsageError
    from launcher.k8s import checked_manifests
    from launcher.options import parse_own

    real = render.render_manifests

    def reworded(**kwargs):
        try:
            return real(**kwargs)
        except ValueError as exc:
            raise ValueError(str(exc).replace(" (the train arguments after --)", "")) from None

    monkeypatch.setattr(render, "render_manifests", reworded)
    own = ["k8s", *SHARDED, "--image", "d:1"]
    rest = list(BELOW_THE_LEAST[1:])
    with pytest.raises(UsageError) as refused:
        checked_manifests(parse_own(build_parser(), own, rest), rest)
    assert str(refused.value).startswith("--timeout 0.1 is below 0.2 s"), refused.value
    assert not str(refused.value).endswith("(the train arguments after --)")


def test_the_launchs_own_flag_refused_beside_a_train_arguments_refusal_stays_exit_1(tmp_path):
    """An MPIJob given shards is refused after the train arguments are, but the launch's own
    flags are wrong too: no usage error of the train arguments alone."""
    status, line = _refused("k8s", "--mpi", "--servers", "2", "--workers", "2", "--image", "d:1",
                            "--", "--timeout", "400", cwd=tmp_path / "s")  # fmt: skip
    assert status == 1, line
