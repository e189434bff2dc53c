"""Train flags the launcher sets itself, or a flag of another transport than the launch's, are
refused before anything starts, as usage errors (exit 2, as a train value argparse refuses;
they exited 1).

After ``--`` they won over the launcher's: ``--pservers`` or ``--insecure`` left every worker
waiting 90 s or more for shards that never answered it, ``--rank 0`` made two workers clash on
the run directory, ``--sync mpi`` under ``local`` failed in every worker with a rank mismatch;
each after all the children had started, and again after every restart.
"""

from __future__ import annotations

import pytest

from tests.launcher.launch_cli import launch


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "command, train, said",
    [
        ("local", ["--pservers", "127.0.0.1:1"], "--pservers after --: the launcher gives"),
        ("local", ["--insecure"], "--insecure after --: the launcher already sets it, on the "
         "workers and the shards, from distconv-launch local --insecure; pass it only to the "
         "launcher"),
        ("local", ["--ra", "0"], "--rank after --"),  # abbreviated, as distconv train reads it
        ("local", ["--world-size=3"], "--world-size after --"),
        ("local", ["--keys", "/tmp"], "--keys after --"),
        ("local", ["--job-id", "other"], "--job-id after --: the launcher already sets it"),
        ("local", ["--sync", "mpi"], "--sync mpi after --, but this launch trains with --sync "),
        ("mpi", ["--sync=pserver"], "--sync pserver after --, but this launch trains with --sync"),
        ("mpi", ["--pservers", "h:1"], "--pservers after --: a parameter-server flag"),
        ("mpi", ["--rank", "0"], "--rank after --: MPI gives each rank its rank; drop it"),
        # another transport's flag failed every worker at start, on every restart
        ("mpi", ["--push-kb", "64"], "error: --push-kb is for --sync pserver, and this run "
         "uses mpi sync (the train arguments after --)"),
        ("local", ["--grad-dtype", "bfloat16"], "error: --grad-dtype is for --sync mpi, and "
         "this run uses pserver sync"),
        ("local", ["--bucket-m=4"], "error: --bucket-mb is for --sync mpi, and this run uses "
         "pserver sync"),
    ],
)  # fmt: skip
def test_a_flag_the_launcher_sets_is_one_line_and_starts_nothing(tmp_path, command, train, said):
    shape = ["--workers", "2", "--servers", "1"] if command == "local" else ["-np", "2"]
    run_dir = tmp_path / "run"
    argv = [command, *shape, "--run-dir", str(run_dir), "--", "--epochs", "1", *train]
    done = launch(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"distconv-launch {command}: error: "), lines
    assert said in lines[0], lines
    assert not run_dir.exists()  # no keys made, no child started


@pytest.mark.timeout(90)
def test_the_launchs_own_sync_still_passes(tmp_path):
    done = launch(
        "mpi", "-np", "2", "--mpi-flavor", "mpich", "--dry-run", "--", "--sync", "mpi",
        "--epochs", "1", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "train --sync mpi --epochs 1" in done.stdout
    from launcher.commands import parse_program, refuse_owned_flags
    from launcher.owned import LOCAL_OWNED

    # a program of the user's is not distconv train: its flags are its own
    refuse_owned_flags(parse_program(["sh", "-c", "true", "--rank", "0"]), LOCAL_OWNED, "pserver")


class _Checked(Exception):
    """Raised where run_local goes on past its flag checks (an older test never got there)."""


@pytest.mark.timeout(90)
def test_a_job_without_shards_keeps_its_own_rank_and_sync(monkeypatch):
    # one worker, no shards: --rank, --sync, shards of its own and --insecure are its business
    import launcher.cli as cli

    def reached(args):
        raise _Checked

    monkeypatch.setattr(cli, "_job_id", reached)  # the first step after the checks
    args = cli.build_parser().parse_args(["local", "--workers", "1", "--servers", "0"])
    with pytest.raises(_Checked):
        cli.run_local(args, ["--rank", "0", "--sync", "pserver", "--pservers", "h:1", "--insecure"])
    shards = cli.build_parser().parse_args(["local", "--workers", "1"])
    with pytest.raises(ValueError, match="^--rank after --"):  # with shards, it is refused
        cli.run_local(shards, ["--rank", "0", "--epochs", "1"])


@pytest.mark.timeout(90)
def test_insecure_passed_to_both_says_the_launcher_already_passes_it(tmp_path):
    run_dir = tmp_path / "run"
    done = launch(
        "local", "--insecure", "--workers", "2", "--servers", "1", "--run-dir", str(run_dir),
        "--", "--epochs", "1", "--insecure", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(
        "--insecure after --: the launcher already sets it, on the workers and the shards, "
        "from distconv-launch local --insecure; pass it only to the launcher"
    ), done.stderr
    assert not run_dir.exists()


@pytest.mark.timeout(90)
def test_the_launchs_own_transport_flags_still_pass(tmp_path, monkeypatch):
    # the check refuses another transport's flags, not the launch's own
    done = launch(
        "mpi", "-np", "2", "--mpi-flavor", "mpich", "--dry-run", "--", "--bucket-mb", "4",
        "--grad-dtype", "bfloat16", "--timeout", "30", "--epochs", "1", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "train --sync mpi --bucket-mb 4 --grad-dtype bfloat16 --timeout 30" in done.stdout
    import launcher.cli as cli

    def reached(args):
        raise _Checked

    monkeypatch.setattr(cli, "_job_id", reached)  # the first step after the checks
    args = cli.build_parser().parse_args(["local", "--workers", "2", "--servers", "1"])
    with pytest.raises(_Checked):
        cli.run_local(args, ["--push-kb", "64", "--timeout", "30", "--epochs", "1"])


K8S_SHAPES = {"pserver": ["--servers", "2"], "mpi": ["--mpi"]}


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "shape, train, said",
    [
        ("pserver", ["--job-id", "foo"], "--job-id after --: the deployment sets "
         "DISTCONV_JOB_ID on every pod (the job's one name), from --job-name; drop it"),
        ("pserver", ["--ra", "0"], "--rank after --: each worker's rank comes from its Job "
         "index"),
        ("pserver", ["--world-size=3"], "--world-size after --: the deployment sets the world "
         "size from --workers"),
        ("mpi", ["--rank", "1"], "--rank after --: each worker's rank comes from its Job index "
         "(or MPI under an MPIJob)"),
        ("mpi", ["--world-size", "3"], "--world-size after --"),
        ("mpi", ["--job-id", "foo"], "--job-id after --"),
    ],
)  # fmt: skip
def test_k8s_refuses_what_the_deployment_sets_in_the_environment(tmp_path, shape, train, said):
    # rendered silently, every worker's hello was refused (another job id) or every
    # pod claimed rank 0; local and mpi refused these flags already
    out = tmp_path / "manifests"
    argv = ["k8s", "--workers", "4", *K8S_SHAPES[shape], "--image", "reg/distconv:1"]
    done = launch(*argv, "--out", str(out), "--", "--epochs", "1", *train, cwd=tmp_path)
    assert done.returncode == 2, done.stderr  # a usage error, as local's and mpi's
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("distconv-launch k8s: error: "), lines
    assert said in lines[0], lines
    assert not out.exists() and done.stdout == ""  # no manifest written


@pytest.mark.timeout(90)
@pytest.mark.parametrize("shape", sorted(K8S_SHAPES))
def test_k8s_still_renders_the_train_flags_it_leaves_to_the_user(tmp_path, shape):
    argv = ["k8s", "--workers", "4", *K8S_SHAPES[shape], "--image", "reg/distconv:1"]
    own = ["--push-kb", "64"] if shape == "pserver" else ["--bucket-mb", "4"]
    done = launch(*argv, "--", "--epochs", "1", "--timeout", "30", *own, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f'- "{own[0]}"' in done.stdout, done.stdout  # in the rank's arguments


@pytest.mark.timeout(90)
def test_a_job_without_shards_refuses_a_flag_of_another_transport_than_its_workers(
    tmp_path, monkeypatch
):
    # without shards the worker trains with local sync (pserver with --pservers of
    # its own), and --push-kb (or --insecure) failed it at every start and restart
    run_dir = tmp_path / "run"
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(run_dir), "--",
        "--epochs", "1", "--push-kb", "64", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "distconv-launch local: error: --push-kb is for --sync pserver, and this run uses local "
        "sync (the train arguments after --)"
    ]
    assert not run_dir.exists()
    import launcher.cli as cli

    def reached(args):
        raise _Checked

    monkeypatch.setattr(cli, "_job_id", reached)  # the first step after the checks
    args = cli.build_parser().parse_args(["local", "--workers", "1", "--servers", "0"])
    with pytest.raises(ValueError, match="^--insecure is for --sync pserver, and this run uses"):
        cli.run_local(args, ["--sync", "local", "--insecure"])
    for own in (
        ["--sync", "mpi", "--grad-dtype", "bfloat16"],
        ["--pservers", "h:1", "--push-kb", "0"],
    ):
        with pytest.raises(_Checked):
            cli.run_local(args, [*own, "--epochs", "1"])
