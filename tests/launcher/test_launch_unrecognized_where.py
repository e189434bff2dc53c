"""Where ``distconv-launch`` says arguments no option took go: not after ``--`` where they
are a mistyped flag of its own, and after ``--`` where they are a program put before it.

With a program after ``--``, any flag before it that no option took was told to go after the
program's name: ``distconv-launch local --workers 2 --max-restrts 2 -- python job.py`` showed
``distconv-launch local --workers 2 -- python job.py --max-restrts 2``, the launcher's own
restarts handed to the user's program as its arguments; and ``distconv-launch mpi -np 2 job.py``
said ``unrecognized arguments: job.py`` alone. A train flag the launch sets itself (``mpi -np 2
--rank 1``) was sent after ``--``, where it was refused in turn."""

from __future__ import annotations

import shlex
import sys

import pytest

from tests.launcher.launch_cli import usage_refusal


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["local", "--workers", "2", "--max-restrts", "2", "--", "python", "job.py"],
            "distconv-launch local: error: unrecognized arguments: --max-restrts 2 (did you "
            "mean --max-restarts?)",
        ),
        (
            ["mpi", "-np", "2", "--run_dir=r", "--", "job.py"],
            "distconv-launch mpi: error: unrecognized arguments: --run_dir=r (did you mean "
            "--run-dir?)",
        ),
        (  # no program: argparse's words had said nothing more
            ["mpi", "-np", "2", "--dryrun"],
            "distconv-launch mpi: error: unrecognized arguments: --dryrun (did you mean "
            "--dry-run?)",
        ),
    ],
    ids=["before-a-program", "with-a-value", "no-program"],
)
def test_a_mistyped_own_flag_is_named_not_moved_after_the_program(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    assert usage_refusal(capsys, *argv) == said


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["mpi", "-np", "2", "job.py", "--epochs", "1"],
            "unrecognized arguments: job.py --epochs 1 (a program goes after --: distconv-launch "
            "mpi -np 2 -- job.py --epochs 1)",
        ),
        (
            ["local", "--workers", "2", sys.executable, "job.py"],
            f"unrecognized arguments: {sys.executable} job.py (a program goes after --: "
            f"distconv-launch local --workers 2 -- {shlex.quote(sys.executable)} job.py)",
        ),
        (["mpi", "-np", "2", "4"], "unrecognized arguments: 4"),  # a stray value, no program
    ],
    ids=["script", "command", "stray-value"],
)
def test_a_program_before_a_forgotten_dashes_is_shown_after_them(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    assert usage_refusal(capsys, *argv) == f"distconv-launch {argv[0]}: error: {said}"


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["mpi", "-np", "2", "--rank", "1"],
            "unrecognized arguments: --rank 1 (distconv train's --rank, which this launch sets: "
            "MPI gives each rank its rank; drop it from the train arguments)",
        ),
        (
            ["local", "--workers", "2", "--pservers", "h:1"],
            "unrecognized arguments: --pservers h:1 (distconv train's --pservers, which this "
            "launch sets: the launcher gives the workers its shards' addresses; drop it from the "
            "train arguments)",
        ),
        (  # no shards: the worker picks its transport, and --pservers after -- is its own
            ["local", "--workers", "2", "--servers", "0", "--pservers", "h:1"],
            "unrecognized arguments: --pservers h:1 (distconv train's arguments go after --: "
            "distconv-launch local --workers 2 --servers 0 -- --pservers h:1)",
        ),
    ],
    ids=["mpi-rank", "local-pservers", "no-shards"],
)
def test_a_train_flag_the_launch_sets_is_not_sent_after_the_dashes(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    """Sent after ``--``, it was refused in turn (``--rank after --: MPI gives each rank its
    rank``): the hint led to a second refusal."""
    assert usage_refusal(capsys, *argv) == f"distconv-launch {argv[0]}: error: {said}"


@pytest.mark.parametrize(
    "argv, why",
    [
        (
            ["mpi", "-np", "2", "--push-kb", "64"],
            "--push-kb is for --sync pserver, and this run uses mpi sync (the train arguments "
            "after --)",
        ),
        (  # the flag the launch sets is not the first one left over
            ["mpi", "-np", "2", "--epochs", "1", "--rank", "1"],
            "--rank after --: MPI gives each rank its rank; drop it from the train arguments",
        ),
        (
            ["local", "--workers", "2", "--sync", "mpi"],
            "--sync mpi after --, but this launch trains with --sync pserver",
        ),
        (  # the renderer sets it: checked by rendering, as the k8s command does
            ["k8s", "--workers", "2", "--image", "img", "--rank", "1"],
            "--rank after --: each worker's rank comes from its Job index (or MPI under an "
            "MPIJob); drop it from the train arguments",
        ),
        (
            ["k8s", "--workers", "2", "--image", "img", "job.py"],
            "k8s renders distconv train jobs; put the program in the image instead",
        ),
    ],
    ids=[
        "other-transport",
        "owned-not-first",
        "other-sync",
        "k8s-owned",
        "k8s-program",
    ],
)
def test_arguments_the_launch_refuses_after_the_dashes_are_not_sent_there(
    capsys: pytest.CaptureFixture[str], argv: list[str], why: str
):
    """The hint ``distconv train's arguments go after --: ...`` led to a second refusal (or,
    for ``job.py``, to a program read as a train argument): the refusal is said at once."""
    said = usage_refusal(capsys, *argv)
    assert said.endswith(f"(not after -- either: {why})"), said


@pytest.mark.parametrize(
    "own",
    [["--mpi", "--ipv6"], ["--image", "bad image"], ["--job-name", "j" * 80]],
    ids=["ipv6-under-mpi", "bad-image", "long-job-name"],
)
def test_a_k8s_render_its_own_flags_fail_does_not_blame_the_train_arguments(
    capsys: pytest.CaptureFixture[str], own: list[str]
):
    """The hint rendered the job whole with the train arguments: a refusal of the launcher's
    own flags said ``--epochs 1 (not after -- either: --ipv6 renders parameter-server jobs
    only...)``, valid train arguments blamed and not sent after ``--``."""
    said = usage_refusal(capsys, "k8s", "--workers", "2", "--image", "img", *own, "--epochs", "1")
    assert "(distconv train's arguments go after --: " in said, said
    assert said.endswith(" -- --epochs 1)"), said


@pytest.mark.parametrize("stray", ["runs", "data.csv"])
def test_a_stray_value_naming_no_program_keeps_argparse_words(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch: pytest.MonkeyPatch, stray: str
):
    """A folder or data file beside the launch is no program: '-- runs' was hinted, and then
    refused ('runs' is neither a program on PATH nor a .py file)."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "data.csv").write_text("1\n")
    monkeypatch.chdir(tmp_path)
    said = usage_refusal(capsys, "local", "--workers", "2", stray)
    assert said == f"distconv-launch local: error: unrecognized arguments: {stray}"


def test_a_path_to_a_file_local_cannot_start_is_not_sent_after_the_dashes(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """A word with a '/' to a file counted as a program: ``local --workers 2 ./data.csv`` was
    told ``-- ./data.csv``, which the launch then refused at the worker's start."""
    (tmp_path / "data.csv").write_text("1\n")
    monkeypatch.chdir(tmp_path)
    said = usage_refusal(capsys, "local", "--workers", "2", "./data.csv")
    why = "cannot start './data.csv': './data.csv' is not executable (chmod +x it)"
    assert said.endswith(f"(not after -- either: {why})"), said


@pytest.mark.parametrize(
    "first, mode, why",
    [
        ("#!/bin/sh\n", 0o644, "'./run.sh' is not executable (chmod +x it)"),
        (
            "#!/no/such/sh\n",
            0o755,
            "the interpreter its #! line names, '/no/such/sh', does not exist",
        ),
    ],
    ids=["no-execute-bit", "no-interpreter"],
)
def test_a_program_the_ranks_cannot_start_is_not_sent_after_the_dashes(
    capsys: pytest.CaptureFixture[str],
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    first: str,
    mode: int,
    why: str,
):
    """mpi refuses a program of this host that its ranks cannot start before anything starts
    (``cannot start './run.sh' in the ranks``); the hint ``-- ./run.sh`` led to that refusal.
    On hosts of their own (``-H``) the ranks start their own copy, which the hint still names."""
    script = tmp_path / "run.sh"
    script.write_text(first)
    script.chmod(mode)
    monkeypatch.chdir(tmp_path)
    said = usage_refusal(capsys, "mpi", "-np", "2", "./run.sh")
    assert said.endswith(f"(not after -- either: cannot start './run.sh' in the ranks: {why})")
    said = usage_refusal(capsys, "mpi", "-np", "2", "-H", "a,b", "./run.sh")
    assert said.endswith("(a program goes after --: distconv-launch mpi -np 2 -H a,b -- ./run.sh)")


@pytest.mark.parametrize(
    "argv, said",
    [
        (["local", "--workers", "2", "sync"], "sync (did you mean --mode sync?)"),
        (["k8s", "--workers", "2", "--image", "i", "async"], "async (did you mean --mode async?)"),
        (["mpi", "-np", "2", "mpich"], "mpich (did you mean --mpi-flavor mpich?)"),
        (
            ["local", "--workers", "2", "test"],
            "test (if 'test' is the program to run, it goes after --: distconv-launch local "
            "--workers 2 -- test)",
        ),
    ],
    ids=["mode-value", "k8s-mode-value", "flavor-value", "lone-command"],
)
def test_a_stray_word_that_names_a_command_is_not_taken_for_the_program(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    """Arguments before ``--`` are the launcher's: a value of its own option, its flag left
    out, was hinted as the program (``local --workers 2 sync`` was told ``-- sync``, which
    runs /usr/bin/sync in every worker); a lone word on PATH is as likely a stray value as
    a program, so the hint says the command only for the program case."""
    assert (
        usage_refusal(capsys, *argv)
        == f"distconv-launch {argv[0]}: error: unrecognized arguments: {said}"
    )


@pytest.mark.parametrize(
    "argv, again",
    [
        (["mpi", "-np", "2", "--epochs", "1", "job.py"], "mpi -np 2 -- job.py --epochs 1"),
        (
            ["local", "--workers", "2", "--servers", "0", "--lr", "0.1", "job.py", "--", "-v"],
            "local --workers 2 --servers 0 -- job.py --lr 0.1 -v",
        ),
    ],
    ids=["mpi", "local-with-rest"],
)
def test_a_program_after_its_own_arguments_is_shown_first_after_the_dashes(
    capsys: pytest.CaptureFixture[str], argv: list[str], again: str
):
    """``--epochs 1 job.py`` sent after ``--`` makes job.py a train argument, which the launch
    refuses; the refusal said that alone (``not after -- either: unrecognized arguments:
    job.py``), and no longer that the program goes first (as ced7f2d7 had it)."""
    said = usage_refusal(capsys, *argv)
    hint = f"(a program goes first after --, its arguments after it: distconv-launch {again})"
    assert said.endswith(hint), said


@pytest.mark.parametrize(
    "argv, hint",
    [
        (  # sync is --mode's, and /usr/bin/sync: '-- sync --epochs 1' ran it in every worker
            ["local", "--workers", "2", "--epochs", "1", "sync"],
            "(not after -- either: unrecognized arguments: sync (in the distconv train "
            "arguments after --))",
        ),
        (
            ["mpi", "-np", "2", "--epochs", "1", "test"],
            "(if 'test' is the program to run, it goes first after --, its arguments after it: "
            "distconv-launch mpi -np 2 -- test --epochs 1)",
        ),
        (  # test is --out's value: '-- test --out --epochs 0' ran /usr/bin/test, --out empty
            ["local", "--workers", "2", "--out", "test", "--epochs", "0"],
            "(not after -- either: argument --epochs: must be >= 1, got 0 (in the distconv "
            "train arguments after --))",
        ),
    ],
    ids=["option-value", "lone-command", "train-flag-value"],
)
def test_a_stray_word_after_train_arguments_is_not_taken_for_the_program(
    capsys: pytest.CaptureFixture[str], argv: list[str], hint: str
):
    """The word moved first after ``--`` as the program is read as 47226417 reads one before
    ``--``: a value of the command's own option (``sync``, its ``--mode`` left out) is none,
    though PATH holds ``/usr/bin/sync``, and a lone word on PATH only perhaps one; nor
    is the value of the train flag before it (``--out test``)."""
    said = usage_refusal(capsys, *argv)
    assert said.endswith(hint), said


@pytest.mark.parametrize(
    "argv, said",
    [
        (["local", "--workers", "2", "--mode", "async", "sync"], "sync (--mode async)"),
        (["local", "--workers", "2", "--mode", "sync", "async"], "async (--mode sync)"),
        (["k8s", "--workers", "2", "--image", "i", "--mo=async", "sync"], "sync (--mode async)"),
        (["mpi", "-np", "2", "--mpi-flavor", "mpich", "openmpi"], "openmpi (--mpi-flavor mpich)"),
    ],
    ids=["local", "default-typed", "k8s-abbreviated", "flavor"],
)
def test_a_value_of_an_option_already_given_is_not_told_to_give_it(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    """``local --workers 2 --mode async sync`` was told ``did you mean --mode sync?``, against
    the ``--mode async`` typed just before; ``--mode sync``, the default typed, counts as given
    too, and ``--mo=async`` as argparse reads it."""
    word, given = said.split(" (")
    flag = given.split()[0]
    assert usage_refusal(capsys, *argv) == (
        f"distconv-launch {argv[0]}: error: unrecognized arguments: {word} ({flag} is given "
        f"already: {given}"
    )


#: what the hint adds where k8s took a --out after the train arguments as its own
OUT_NOTE = (
    "; the --out after them was read as k8s's own, the folder its manifests are written to: if "
    "it was meant for the workers, it goes after -- too)"
)


@pytest.mark.parametrize(
    "given, noted",
    [
        (["--epochs", "1", "--out", "/opt/x"], True),  # kubernetes.md's line, its -- forgotten
        (["--epochs", "1", "--ou=/opt/x"], True),  # abbreviated, as argparse takes it
        (["--out", "/opt/m", "--epochs", "1"], False),  # before them: the manifests' folder
        (["--epochs", "1", "--ipv6"], False),  # another flag of k8s's own after them
    ],
    ids=["after", "abbreviated", "before", "other-flag"],
)
def test_a_k8s_out_after_the_train_arguments_is_said_to_be_the_manifests_folder(
    capsys: pytest.CaptureFixture[str], given: list[str], noted: bool
):
    """``k8s ... --epochs 1 --out /opt/x``, its ``--`` forgotten, was told to put ``--epochs 1``
    after ``--`` and keep ``--out /opt/x`` before it, where it is k8s's own flag: the manifests
    written into /opt/x, not the workers' run folder."""
    said = usage_refusal(capsys, "k8s", "--workers", "2", "--image", "d:1", *given)
    assert said.startswith("distconv-launch k8s: error: unrecognized arguments: --epochs 1 ("), said
    assert said.endswith(OUT_NOTE) is noted, said


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["local", "--workers", "2", "./run.sh", "--", "--epochs", "1"],
            "./run.sh (a program goes after --: distconv-launch local --workers 2 -- ./run.sh "
            "--epochs 1)",
        ),
        (
            ["mpi", "-np", "2", sys.executable, "--", "job.py"],
            f"{sys.executable} (a program goes after --: distconv-launch mpi -np 2 -- "
            f"{shlex.quote(sys.executable)} job.py)",
        ),
        (
            ["local", "--workers", "2", "train", "--", "--epochs", "1"],
            "train (the launcher runs distconv train itself: drop train (distconv-launch local "
            "--workers 2 -- --epochs 1), or put a program after --)",
        ),
        (
            ["local", "--workers", "2", "distconv", "train", "--epochs", "2", "--", "--lr", "1"],
            "distconv train --epochs 2 (the launcher runs distconv train itself: drop distconv "
            "train (distconv-launch local --workers 2 -- --epochs 2 --lr 1), or put a program "
            "after --)",
        ),
        (
            ["mpi", "-np", "2", "train", "--", "./run.sh"],
            "train (the program after -- runs instead of distconv train: drop train "
            "(distconv-launch mpi -np 2 -- ./run.sh))",
        ),
        (
            ["k8s", "--workers", "2", "--image", "i", "distconv", "--", "--epochs", "1"],
            "distconv (the launcher runs distconv train itself: drop distconv (distconv-launch "
            "k8s --workers 2 --image i -- --epochs 1))",  # k8s takes no program of the user's
        ),
    ],
    ids=["script", "interpreter", "train", "distconv-train", "train-then-program", "k8s"],
)
def test_a_program_before_the_dashes_given_is_shown_after_them(
    capsys: pytest.CaptureFixture[str],
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    said: str,
):
    """``./run.sh -- --epochs 1`` said ``unrecognized arguments: ./run.sh`` alone: only a
    program with nothing after ``--`` was told it goes after it; and ``train`` (or
    ``distconv``) there, the program the launch runs itself, was told nothing either."""
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert (
        usage_refusal(capsys, *argv)
        == f"distconv-launch {argv[0]}: error: unrecognized arguments: {said}"
    )


def test_another_distconv_command_before_the_dashes_is_a_program_of_the_users(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """``distconv keys out -- x`` was told to drop ``distconv`` as the program the launch
    runs itself, leaving ``-- keys out x``: ``keys``, no program, run by every worker."""
    (tmp_path / "distconv").write_text("#!/bin/sh\n")
    (tmp_path / "distconv").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    said = usage_refusal(capsys, "local", "--workers", "2", "distconv", "keys", "out", "--", "x")
    assert said == (
        "distconv-launch local: error: unrecognized arguments: distconv keys out (a program "
        "goes after --: distconv-launch local --workers 2 -- distconv keys out x)"
    )


@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["local", "--workers", "2", "distconv", "train", "--epochs", "1"],
            "distconv train --epochs 1 (the launcher runs distconv train itself: drop distconv "
            "train (distconv-launch local --workers 2 -- --epochs 1), or put a program after --)",
        ),
        (
            ["mpi", "-np", "2", "distconv", "--epochs", "1"],
            "distconv --epochs 1 (the launcher runs distconv train itself: drop distconv "
            "(distconv-launch mpi -np 2 -- --epochs 1), or put a program after --)",
        ),
        (
            ["local", "--workers", "2", "distconv"],
            "distconv (the launcher runs distconv train itself: drop distconv (distconv-launch "
            "local --workers 2), or put a program after --)",
        ),
        (
            ["k8s", "--workers", "2", "--image", "i", "distconv", "train", "--epochs", "1"],
            "distconv train --epochs 1 (the launcher runs distconv train itself: drop distconv "
            "train (distconv-launch k8s --workers 2 --image i -- --epochs 1))",
        ),
        (  # -q was read as the start of train's, and 'train' refused after --
            ["local", "--workers", "2", "distconv", "-q", "train", "--epochs", "1"],
            "distconv -q train --epochs 1 (the launcher runs distconv train itself: drop "
            "distconv train (distconv-launch local --workers 2 -- -q --epochs 1), or put a "
            "program after --)",
        ),
        (  # ... and 'distconv -q keys' was said to be the launch's own distconv train
            ["local", "--workers", "2", "distconv", "--quiet", "keys", "out"],
            "distconv --quiet keys out (a program goes after --: distconv-launch local "
            "--workers 2 -- distconv --quiet keys out)",
        ),
    ],
    ids=["local", "mpi", "alone", "k8s", "quiet-train", "quiet-keys"],
)
def test_distconv_train_with_no_dashes_is_said_to_be_the_launchs_own(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    """``local --workers 2 distconv train --epochs 1`` was told ``-- distconv train --epochs
    1``: distconv run as a program of the user's by every worker, with no --out of the run's
    nor the checks of the flags the launch sets, as a ``--`` given was not (b95794c7)."""
    assert usage_refusal(capsys, *argv) == (
        f"distconv-launch {argv[0]}: error: unrecognized arguments: {said}"
    )


#: what the ranks' other hosts have and this one does not
ON_NODES = "/opt/on-nodes/prog"


@pytest.mark.usefixtures("no_batch_hosts")  # the launch's hosts are its -H alone
@pytest.mark.parametrize(
    "argv, said",
    [
        (
            ["-H", "a:1,b:1", ON_NODES, "--lr", "1"],
            f"{ON_NODES} --lr 1 (a program goes after --: distconv-launch mpi -np 2 -H a:1,b:1 "
            f"-- {ON_NODES} --lr 1)",
        ),
        (
            ["-H", "a:1,b:1", "--lr", "1", ON_NODES],
            f"--lr 1 {ON_NODES} (a program goes first after --, its arguments after it: "
            f"distconv-launch mpi -np 2 -H a:1,b:1 -- {ON_NODES} --lr 1)",
        ),
        (["-H", "localhost:2", ON_NODES], ON_NODES),  # this host runs it: it does not exist
        (["-H", "a:1,b:1", "4"], "4"),  # a bare word missing here: a stray value, no program
    ],
    ids=["forgotten", "after-its-arguments", "hosts-here", "bare-word"],
)
def test_a_program_only_the_other_hosts_have_is_told_to_go_after_the_dashes(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    """'mpi -H a:1,b:1 -- /opt/on-nodes/prog' runs each host's own copy, but with -- left
    out that program was told nothing ('unrecognized arguments: ...' alone), read as a
    program after -- but not before it: its hint names it after --."""
    got = usage_refusal(capsys, "mpi", "-np", "2", *argv)
    assert got == f"distconv-launch mpi: error: unrecognized arguments: {said}", got


@pytest.mark.usefixtures("no_batch_hosts")  # the launch's hosts are its -H alone
@pytest.mark.parametrize("argv", [["--epochs", "1", "./set.npz"], ["./set.npz", "--epochs", "1"]])
def test_a_data_file_this_host_has_is_no_program_of_the_other_hosts(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch, argv: list[str]
):
    """Over other hosts, a path was taken for their program whatever it was here: a data
    file beside the launch (a shared /home has it on every host) was told 'a program goes
    first after --'. A file this host has is a program only where it reads as
    one: executable, or a script (test_a_program_the_ranks_cannot_start_...)."""
    (tmp_path / "set.npz").write_bytes(b"PK\x03\x04")  # no execute bit, no #! line
    monkeypatch.chdir(tmp_path)
    got = usage_refusal(capsys, "mpi", "-np", "2", "-H", "a:1,b:1", *argv)
    assert "a program goes" not in got, got
    assert got.startswith(f"distconv-launch mpi: error: unrecognized arguments: {' '.join(argv)}")


@pytest.mark.usefixtures("no_batch_hosts")  # the launch's hosts are its -H alone
def test_a_programs_name_is_not_judged_by_a_file_of_that_name_here(
    capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch
):
    """A bare word names a program on PATH: a data file of the same name in the working
    directory (``hostname``) made it read as that file, and the hint was lost."""
    (tmp_path / "hostname").write_bytes(b"PK\x03\x04")  # no execute bit, no #! line
    monkeypatch.chdir(tmp_path)
    got = usage_refusal(capsys, "mpi", "-np", "2", "-H", "a:1,b:1", "--epochs", "1", "hostname")
    assert "goes first after --, its arguments after it: distconv-launch mpi -np 2 " in got, got
