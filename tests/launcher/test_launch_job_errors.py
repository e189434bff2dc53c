"""A job that stops on its own data, model or configuration (a NaN in the training set, a label
past the classes, a layer of the user's own failing mid-epoch, a feed the network lacks) stops
alike on every attempt: ``--max-restarts 2`` restarted it twice, each attempt reading the data and
failing as the first did. Real ``distconv-launch local`` and ``mpi`` running a real script
(``tests/user_data_script.py``: ``run_main``, ``Trainer.fit``); a failure a restart may get past
(a signal, a file not there) is still restarted."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

import distconv.data
import distconv.layers.errors
import distconv.network
import distconv.placement
from distconv.checkpoint import CheckpointError
from distconv.logs import error_line
from distconv.rank_endings import (
    JOB_ERROR_SUBCLASSES,
    JOB_ERRORS,
    job_error_in,
)
from distconv.sync.errors import JobRefused, SyncError
from launcher.failure import Failure
from launcher.rank_reason import rank_text
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip
from tests.mnist_files import DAMAGES, damage_gzip, write_mnist

SCRIPT = str(Path(__file__).resolve().parents[1] / "user_data_script.py")
#: the job's own errors' classes, as distconv defines them
CLASSES = (
    distconv.data.DataError,
    distconv.network.NetworkError,
    distconv.layers.errors.LayerError,
    distconv.placement.RuntimeConfigError,
)


def unused(error: str) -> str:
    return (
        f"not restarting (--max-restarts 2): the job's own {error} (of its data, model or "
        "configuration), which every attempt would stop on"
    )


def _launched(tmp_path: Path, *argv: str) -> tuple[str, int, dict]:
    """The launcher's output (stderr, then stdout), status and report after a launch of ``argv``
    (its own flags, ``--max-restarts 2``, then the program's) into ``tmp_path/run``."""
    run = tmp_path / "run"
    own, program = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    done = launch(*own, "--max-restarts", "2", "--run-dir", str(run), "--", *program, cwd=tmp_path)
    report = json.loads((run / "failure.json").read_text())
    return done.stderr + done.stdout, done.returncode, report


def _one_worker(tmp_path: Path, *program: str) -> tuple[str, int, dict]:
    """:func:`_launched` of one worker and no shard under ``local``, running ``program``."""
    return _launched(tmp_path, "local", "--workers", "1", "--servers", "0", "--", *program)


def _script(tmp_path: Path, name: str, text: str) -> str:
    """The path of a script ``name`` written into ``tmp_path`` with ``text``."""
    script = tmp_path / name
    script.write_text(text)
    return str(script)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("case", "error", "message"),
    [
        ("nan", "DataError", "the training set's 'x' holds NaN or infinity in 1 row(s): row 5"),
        ("label", "DataError", "the training set's 'label' holds 1 row(s) outside [0, 3)"),
        ("model", "LayerError", "Breaks 'fc': forward 6 failed"),
        ("feed", "NetworkError", "input 'x' was not fed (feeds: ['image', 'label'])"),
    ],
)
def test_a_local_job_stopped_by_its_own_data_or_model_is_not_restarted(
    tmp_path, case, error, message
):
    said, status, report = _one_worker(tmp_path, SCRIPT, case)
    assert status == 1, said[-3000:]
    ending = f"[worker 0] user_data_script.py: error: {error}: {message}"
    assert said.count(ending) == 1, said[-3000:]  # one attempt
    assert "restarting the job" not in said, said[-3000:]
    assert unused(error) in said, said[-3000:]
    assert report["restart"] == 0 and report["then"] == unused(error), report
    assert not (tmp_path / "run" / "restarts.jsonl").exists()


@pytest.mark.timeout(60)
def test_a_parameter_server_job_with_bad_data_on_one_rank_is_not_restarted(tmp_path):
    """Rank 0's data refused at fit start: rank 1, told of it, exits 75 (or is stopped) and is
    no cause; the report blames rank 0, and restarts none."""
    said, status, report = _launched(
        tmp_path, "local", "--workers", "2", "--servers", "1", "--insecure", "--",
        SCRIPT, "nan", "0",
    )  # fmt: skip
    assert status == 1, said[-3000:]
    assert said.count("[worker 0] user_data_script.py: error: DataError: ") == 1, said[-3000:]
    assert "restarting the job" not in said, said[-3000:]
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, 1), report
    assert report["restart"] == 0 and report["then"] == unused("DataError"), report


@pytest.mark.timeout(60)
def test_a_float16_model_on_a_parameter_server_ends_in_one_line_and_is_not_restarted(tmp_path):
    """The shards keep float32 and float64: a float16 model (``Trainer(dtype="float16")``) is
    refused at setup as a configuration error, said in one line that names the way out; it was
    a ``WireError``'s traceback, and restarted as if another attempt might pass."""
    said, status, report = _launched(
        tmp_path, "local", "--workers", "1", "--servers", "1", "--insecure", "--",
        SCRIPT, "float16",
    )  # fmt: skip
    assert status == 1, said[-3000:]
    ending = (
        "[worker 0] user_data_script.py: error: RuntimeConfigError: rank 0: parameter "
        "'fc.weight' is float16 (and 1 more): the parameter server keeps float32 or float64 "
        "parameters; train in float32 or float64, or in 16 bits over MPI (--sync mpi) or locally"
    )
    assert said.count(ending) == 1, said[-3000:]
    assert "Traceback" not in said and "WireError" not in said, said[-3000:]
    # the shard's stats at its end: not a byte came in (no hello, no bye)
    stats = [line for line in said.splitlines() if "shard 0 stats {" in line]
    assert len(stats) == 1 and ', "bytes_in": 0, ' in stats[0], said[-3000:]
    assert report["restart"] == 0 and report["then"] == unused("RuntimeConfigError"), report


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("argv", "error"),
    [  # each rank's own ending, then MPICH's notice of the abort; a rank's MPI_Abort reason
        (("nan", "all"), "DataError"),
        (("model", "1", "open"), "LayerError"),  # mid-epoch: rank 1's abort line
    ],
)
def test_an_mpi_job_stopped_by_its_own_data_or_model_is_not_restarted(tmp_path, argv, error):
    mpiexec_or_skip()
    said, status, report = _launched(tmp_path, "mpi", "-np", "2", "--", SCRIPT, *argv)
    assert status == 1, said[-3000:]
    assert "restarting the job" not in said, said[-3000:]
    assert unused(error) in said, said[-3000:]
    assert report["restart"] == 0 and report["then"] == unused(error), report


@pytest.mark.timeout(60)
def test_a_file_not_there_is_still_restarted(tmp_path):
    """An OSError (the script's own file: its traceback) may be gone on the next attempt."""
    said, status, report = _one_worker(tmp_path, SCRIPT, "oserror")
    assert status == 1, said[-3000:]
    assert "restarting the job (2 of 2)" in said, said[-3000:]
    assert "not restarting" not in said, said[-3000:]
    assert report["restart"] == 2, report
    assert len((tmp_path / "run" / "restarts.jsonl").read_text().splitlines()) == 2


#: a rank that says the words of a data error, then is killed: its signal is the cause
KILLED = """\
import os, signal
print("killed.py: error: DataError: the training set's 'x' holds NaN", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.timeout(60)
def test_a_rank_killed_by_a_signal_is_still_restarted(tmp_path):
    script = _script(tmp_path, "killed.py", KILLED)
    said, status, report = _one_worker(tmp_path, script)
    assert status == 128 + signal.SIGKILL, said[-3000:]
    assert "restarting the job (2 of 2)" in said, said[-3000:]
    assert "not restarting" not in said, said[-3000:]
    assert report["restart"] == 2 and report["signal"] == "SIGKILL", report


def _subclasses(cls: type) -> list[type]:
    return [cls, *(s for sub in cls.__subclasses__() for s in _subclasses(sub))]


def test_the_names_read_are_those_of_the_classes():
    """The launcher reads the classes by name (it imports neither numpy nor the layers): each
    subclass distconv defines is named in the lists, and each is named in the ending."""
    assert tuple(c.__name__ for c in CLASSES) == JOB_ERRORS
    defined = {
        s.__name__
        for cls in CLASSES
        for s in _subclasses(cls)
        if s.__module__.startswith("distconv.") and "[" not in s.__name__
    }
    assert defined == set(JOB_ERRORS + JOB_ERROR_SUBCLASSES)
    for name in defined:
        assert job_error_in([f"x.py: error: {name}: m"]) == (name, "m")


@pytest.mark.parametrize(
    "error",
    [
        distconv.data.DataError("the training set's 'x' holds NaN"),
        distconv.layers.errors.LayerTypeError("layer 'fc' returned a list"),
        distconv.placement.RuntimeConfigError("WORLD_SIZE must be an integer, got 'x'"),
    ],
)
def test_the_ending_of_a_job_error_stops_the_restarts(error):
    """Written by :func:`error_line` (JSON where a test before set the log up so), read by
    the launcher's report."""
    said = rank_text(error_line("train.py", error, "text"))[1]
    assert said == f"train.py: error: {type(error).__name__}: {error}", said
    assert _every_attempt(["epoch 1", said]) == (
        f"the job's own {type(error).__name__} (of its data, model or configuration), "
        "which every attempt would stop on"
    )


def _unreadable(tmp_path: Path) -> BaseException:
    """The DataError of an IDX file that cannot be read (a folder in its place)."""
    with pytest.raises(distconv.data.DataError) as raised:
        distconv.data.read_idx(tmp_path)
    return raised.value


@pytest.mark.parametrize(
    "error",
    [
        FileNotFoundError(2, "No such file or directory"),
        SyncError("rank 1 stalled 30 s in allreduce"),
        JobRefused("rank 0, step 3: pserver h:5: rank 1 (host h, last step 2) closed"),
        CheckpointError("checkpoint c.safetensors is corrupt: it fails its checksum"),
        _unreadable,
    ],
)
def test_other_endings_are_restarted(tmp_path, error):
    """Errors another attempt may get past keep their ending, and are restarted: a data
    set's file that could not be read too."""
    error = error(tmp_path) if callable(error) else error
    said = rank_text(error_line("train.py", error, "text"))[1]
    assert said == f"train.py: error: {error}", said
    assert _every_attempt([said]) is None


@pytest.mark.timeout(60)
def test_distconv_train_under_json_logs_is_not_restarted(tmp_path):
    """``distconv train`` itself, its ending a JSON line: a --data-dir that is not there."""
    said, status, report = _one_worker(
        tmp_path, "--data", "mnist", "--data-dir", "nowhere", "--log-format", "json"
    )
    assert status == 1, said[-3000:]
    assert said.count('"message":"distconv train: error: DataError: MNIST directory') == 1, said
    assert report["restart"] == 0 and report["then"] == unused("DataError"), report


@pytest.mark.parametrize(
    "tail",
    [  # said, then went on: its last words are another failure's
        ["x.py: error: DataError: m", "retrying with the other set", "OSError: disk"],
        [
            "[0] x.py: error: DataError: m",
            "[0] epoch 2",
            "[1] rank 1: SyncError: s; ending this rank",
        ],
        # a user's own class of that name: no module, and no ending of distconv's
        ["DataError: m"],
        ["my.py: error: ValueError: DataError: m"],
    ],
)
def test_a_job_error_not_in_a_rank_s_last_words_is_restarted(tail):
    assert _every_attempt(tail) is None


@pytest.mark.parametrize(
    "tail",
    [
        ["[0] x.py: error: DataError: m", "[1] x.py: error: DataError: m",
         "[1] Abort(1) on node 1 (rank 1 in comm 0): application called MPI_Abort(...)"],
        ["[1,1]<stderr>: distconv.data.DataError: m", "mpirun noticed that process rank 1 ..."],
        ["x.py: error: JobRefused: rank 1, hello: pserver h:5: rank 0 could not set up: "
         "NetworkError: input 'x' was not fed"],
    ],
)  # fmt: skip
def test_each_rank_s_last_words_are_read(tail):
    assert _every_attempt(tail) is not None


def _every_attempt(tail: list[str]) -> str | None:
    """What :attr:`Failure.every_attempt` says of a worker that exited 1 after ``tail``."""
    return Failure("worker", 0, 1, None, "w.log", tail, 0).every_attempt


#: a script's own subclass of a job error, raised under run_main: its ending names a class
#: the launcher reads (the job error it derives from), and it is not restarted
OWN_SUBCLASS = """\
import distconv.distributed as dist
from distconv.data import DataError


class BadRows(DataError):
    pass


def main():
    raise BadRows("rows 3..5 are blank")


dist.run_main(main)
"""


@pytest.mark.timeout(60)
def test_a_script_s_own_subclass_of_a_job_error_is_not_restarted(tmp_path):
    script = _script(tmp_path, "own_error.py", OWN_SUBCLASS)
    said, status, report = _one_worker(tmp_path, script)
    assert status == 1, said[-3000:]
    ending = "[worker 0] own_error.py: error: DataError: rows 3..5 are blank"
    assert said.count(ending) == 1, said[-3000:]  # one attempt
    assert report["restart"] == 0 and report["then"] == unused("DataError"), report


def test_a_subclass_is_named_as_the_job_error_it_derives_from():
    """distconv's own subclasses by their own names; another's by the nearest of distconv's."""

    class Mine(distconv.layers.errors.LayerTypeError):
        pass

    for error, name in [
        (distconv.layers.errors.LayerResultError("m"), "LayerResultError"),
        (Mine("m"), "LayerTypeError"),
    ]:
        said = rank_text(error_line("x.py", error, "text"))[1]
        assert said == f"x.py: error: {name}: m", said
        assert job_error_in([said]) == (name, "m")


#: a plain script (no run_main) whose data set's file cannot be read now (a folder in its
#: place stands for an EIO of a network file system): its traceback's last line is
#: ``distconv.data.DataError: PATH: cannot read: ...``
UNREADABLE = """\
import sys
from distconv.data import read_idx

read_idx(sys.argv[1])
"""


@pytest.mark.timeout(60)
def test_a_data_file_that_cannot_be_read_is_restarted_in_a_traceback_too(tmp_path):
    """As its one-line ending is (no class: :func:`test_other_endings_are_restarted`)."""
    script = _script(tmp_path, "unreadable.py", UNREADABLE)
    said, status, report = _one_worker(tmp_path, script, str(tmp_path))
    assert status == 1, said[-3000:]
    assert "distconv.data.DataError: " in said and ": cannot read: " in said, said[-3000:]
    assert "restarting the job (2 of 2)" in said, said[-3000:]
    assert report["restart"] == 2 and report["then"] is None, report


def test_a_data_file_that_cannot_be_read_is_restarted_as_the_others_say_it(tmp_path):
    """MPI's abort line and a told rank's line name the class of every error: one of a file
    that cannot be read is restarted there too."""
    said = f"DataError: {_unreadable(tmp_path)}"
    for tail in (
        [f"[0] rank 0: {said}; aborting the MPI job"],
        [f"x.py: error: JobRefused: rank 1, hello: pserver h:5: rank 0 could not set up: {said}"],
        [f"[1] x.py: error: rank 0 could not set up: {said}"],
    ):
        assert _every_attempt(tail) is None, tail


#: a script ending on an error the launcher restarts, whose message begins with a job error's
#: class (a quote of one): its ending names its own class too, so that it is not read as one
QUOTES = """\
import distconv.distributed as dist
from distconv.step_guard import TrainingError


def main():
    raise TrainingError("DataError: the loss left the data's range at step 3")


dist.run_main(main)
"""


@pytest.mark.timeout(60)
def test_a_message_that_begins_as_a_job_error_is_still_restarted(tmp_path):
    script = _script(tmp_path, "quotes.py", QUOTES)
    said, status, report = _one_worker(tmp_path, script)
    assert status == 1, said[-3000:]
    ending = "quotes.py: error: TrainingError: DataError: the loss left the data's range"
    assert ending in said, said[-3000:]
    assert "restarting the job (2 of 2)" in said, said[-3000:]
    assert report["restart"] == 2 and report["then"] is None, report


@pytest.mark.parametrize(
    "error",
    [
        CheckpointError("distconv.data.DataError: m"),
        SyncError("NetworkError: m"),
        FileNotFoundError("LayerError[LinAlgError]: m"),
    ],
)
def test_an_ending_never_reads_as_a_job_error_it_is_not(error):
    said = rank_text(error_line("x.py", error, "text"))[1]
    assert said == f"x.py: error: {type(error).__name__}: {error}", said
    assert _every_attempt([said]) is None


def test_an_abort_line_names_a_subclass_as_the_job_error_it_derives_from():
    """MPI's abort line, as the one-line ending: a script's own class by distconv's it derives
    from, read as a job error; distconv's own subclass by its own name; an error of a file that
    cannot be read by its own class still, and restarted."""
    from distconv.sync.mpi.leaving import reason

    class BadRows(distconv.data.DataError):
        pass

    class Unread(distconv.data.DataError):
        pass

    try:
        try:
            raise OSError(5, "Input/output error")
        except OSError as exc:
            raise Unread("f.idx: cannot read") from exc
    except Unread as exc:
        unread = exc

    for error, name, alike in [
        (BadRows("rows 3..5 are blank"), "DataError", True),
        (distconv.layers.errors.LayerTypeError("m"), "LayerTypeError", True),
        (unread, "Unread", False),
    ]:
        line = reason(0, error, "aborting the MPI job").rstrip("\n")
        assert line == f"rank 0: {name}: {error}; aborting the MPI job", line
        assert (_every_attempt([f"[0] {line}"]) is not None) is alike, line


#: under ``mpiexec -n 2``: rank 0 raises a script's own DataError subclass with its sync open
#: (MPISync's abort hook says why, and aborts the job); rank 1 waits, till the abort ends it
OWN_SUBCLASS_MPI = """\
import time

import distconv.distributed as dist
from distconv.data import DataError


class BadRows(DataError):
    pass


def main():
    sync = dist.init("sgd", lr=0.1)
    if sync.rank == 0:
        raise BadRows("rows 3..5 are blank")
    time.sleep(60)


dist.run_main(main)
"""


@pytest.mark.timeout(90)
def test_an_mpi_job_s_own_subclass_of_a_job_error_is_not_restarted(tmp_path):
    mpiexec_or_skip()
    script = _script(tmp_path, "own_error_mpi.py", OWN_SUBCLASS_MPI)
    said, status, report = _launched(tmp_path, "mpi", "-np", "2", "--", script)
    assert status == 1, said[-3000:]
    line = "[0] rank 0: DataError: rows 3..5 are blank; aborting the MPI job"
    assert said.splitlines().count(line) == 1, said[-3000:]  # one attempt (and its report)
    assert "restarting the job" not in said, said[-3000:]
    assert report["restart"] == 0 and report["then"] == unused("DataError"), report


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["magic", "crc"])
def test_a_damaged_gzip_data_file_is_not_restarted(tmp_path, how):
    """``distconv train --data mnist`` on a training images file whose gzip is damaged (gzip's
    BadGzipFile, an OSError): every attempt would read the same bytes."""
    data = tmp_path / "mnist"
    data.mkdir()
    write_mnist(data, gz=True)
    damage_gzip(data / "train-images-idx3-ubyte.gz", how)
    said, status, report = _one_worker(tmp_path, "--data", "mnist", "--data-dir", str(data))
    assert status == 1, said[-3000:]
    ending = f"distconv train: error: DataError: {data}/train-images-idx3-ubyte.gz: damaged gzip"
    assert said.count(f"[worker 0] {ending} data: {DAMAGES[how]}") == 1, said[-3000:]
    assert report["restart"] == 0 and report["then"] == unused("DataError"), report


#: ``user_data_script.py`` run as it is, rank 0 slow to exit after its ending (a user's exit
#: handler of its own: a logger's flush to a network store): the victim it leaves (rank 1,
#: told by the shard, exit 75) is blamed after ``--settle``, and the launcher's stop ends rank 0
SLOW_EXIT = f"""\
import atexit, os, runpy, sys, time

if os.environ["RANK"] == "0":
    atexit.register(time.sleep, 60)
sys.argv = [{SCRIPT!r}, *sys.argv[1:]]
runpy.run_path({SCRIPT!r}, run_name="__main__")
"""


@pytest.mark.timeout(60)
def test_a_job_error_of_a_rank_the_launcher_stopped_after_it_is_not_restarted(tmp_path):
    """Rank 0's LayerError mid-epoch (its last words), its exit past the settle: the report
    blames rank 1, its victim, and the stop ends rank 0; no attempt would go otherwise."""
    script = _script(tmp_path, "slow_exit.py", SLOW_EXIT)
    said, status, report = _launched(
        tmp_path, "local", "--workers", "2", "--servers", "1", "--insecure", "--settle", "0.5",
        "--", script, "model", "0",
    )  # fmt: skip
    ending = "[worker 0] user_data_script.py: error: LayerError: Breaks 'fc': forward 6 failed"
    assert said.count(ending) == 1, said[-3000:]  # one attempt
    assert status == 1, said[-3000:]  # not the victim's 75: no "try again later"
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 1, 75), report
    then = unused("LayerError").replace("configuration)", "configuration), said by worker 0")
    assert report["restart"] == 0 and report["then"] == then, report


#: rank 1 says a job error and is slow to exit; rank 0, once it has, dies of a signal the
#: launcher did not send (an OOM kill): the first failure, and perhaps the cause
KILLED_BESIDE = """\
import atexit, os, signal, sys, time

said = os.path.join(sys.argv[1], "said")
if os.environ["RANK"] == "1":
    print("beside.py: error: DataError: the training set's 'x' holds NaN", flush=True)
    open(said, "w").close()
    atexit.register(time.sleep, 60)
    sys.exit(1)
while not os.path.exists(said):
    time.sleep(0.01)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.timeout(60)
def test_a_rank_killed_by_a_signal_of_its_own_beside_a_job_error_is_restarted(tmp_path):
    script = _script(tmp_path, "beside.py", KILLED_BESIDE)
    said, status, report = _launched(
        tmp_path, "local", "--workers", "2", "--servers", "0", "--", script, str(tmp_path)
    )
    assert status == 128 + signal.SIGKILL, said[-3000:]
    assert "restarting the job (2 of 2)" in said and "not restarting" not in said, said[-3000:]
    assert (report["rank"], report["signal"], report["restart"]) == (0, "SIGKILL", 2), report


#: rank 0 fails at fit start on a script's own DataError subclass, raised by its data (a dict
#: of its own), and is slow to clean up before its ending (a logger's flush): the others are
#: told ``rank 0 could not set up: ...``, and under ``local`` the launcher's stop ends rank 0
#: before it says its own ending, so what the others were told is all the launcher reads
TOLD_SUBCLASS = """\
import time

import numpy as np

import distconv.distributed as dist
from distconv import Trainer
from distconv.data import DataError
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.network import Network


class BadRows(DataError):
    pass


class Rows(dict):
    def items(self):
        raise BadRows("rows 3..5 are blank")


def main():
    sync = dist.init("sgd", lr=0.1)
    rng = np.random.default_rng(0)
    data = {"x": rng.random((64, 1, 2, 2)).astype(np.float32), "label": rng.integers(0, 3, 64)}
    net = Network()
    net.add("fc", FullyConnected(4, 3), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    try:
        Trainer(net, sync, 4, progress=False).fit(Rows(data) if sync.rank == 0 else data)
    finally:
        if sync.rank == 0:
            time.sleep(60)
        sync.close()


dist.run_main(main)
"""


@pytest.mark.timeout(90)
@pytest.mark.parametrize("launcher", ["local", "mpi"])
def test_what_the_others_are_told_of_a_script_s_own_job_error_is_not_restarted(tmp_path, launcher):
    """The others' line names the subclass as the job error it derives from, as the failing
    rank's own ending would: ``rank 0 could not set up: DataError: ...``, not restarted."""
    script = _script(tmp_path, "told_subclass.py", TOLD_SUBCLASS)
    if launcher == "mpi":
        mpiexec_or_skip()
        own = ("mpi", "-np", "2")
    else:
        own = ("local", "--workers", "2", "--servers", "1", "--insecure", "--settle", "0.5")
    said, status, report = _launched(tmp_path, *own, "--grace", "5", "--", script)
    told = "rank 0 could not set up: DataError: rows 3..5 are blank"
    assert told in said and "BadRows" not in said, said[-3000:]
    assert "restarting the job" not in said, said[-3000:]
    assert status == 1, said[-3000:]
    then = unused("DataError")
    if launcher == "local":  # told by worker 1, said by worker 0, which the stop ended
        then = then.replace("configuration)", "configuration), said by worker 0")
    assert report["restart"] == 0 and report["then"] == then, report


def test_the_told_line_names_an_error_as_the_ending_does():
    """A script's subclass by distconv's class, given or the one being handled; distconv's own
    subclass, another error, and one raised as a file could not be read, by their own."""
    from distconv.sync.errors import setup_failure_description, setup_failure_in

    class BadRows(distconv.data.DataError):
        pass

    def told(text, error=None):
        return setup_failure_in(setup_failure_description(0, text, error))

    bad = BadRows("rows 3..5")
    assert told("BadRows: rows 3..5", bad) == "rank 0 could not set up: DataError: rows 3..5"
    assert told("BadRows", bad) == "rank 0 could not set up: DataError"
    assert told("BadRowsX: m", bad) == "rank 0 could not set up: BadRowsX: m"  # not its name
    try:
        raise bad
    except BadRows:
        assert told("BadRows: rows 3..5") == "rank 0 could not set up: DataError: rows 3..5"
    assert told("BadRows: rows 3..5") == "rank 0 could not set up: BadRows: rows 3..5"
    own = distconv.layers.errors.LayerTypeError("m")
    assert told("LayerTypeError: m", own) == "rank 0 could not set up: LayerTypeError: m"
    assert told("ValueError: m", ValueError("m")) == "rank 0 could not set up: ValueError: m"
    try:
        try:
            raise OSError(5, "Input/output error")
        except OSError:
            raise BadRows("f.idx: cannot read") from None
    except BadRows as exc:
        unread = exc
    said = told("BadRows: f.idx: cannot read", unread)
    assert said == "rank 0 could not set up: BadRows: f.idx: cannot read", said


#: rank 0 said a job error's line and went on (a bad shard skipped), still at work when the
#: stop ends it; rank 2 hangs (a stalled node, which a restart may get past), and rank 1, left
#: waiting for it, says so and exits 75: its words quote no error of rank 0's
WENT_ON = """\
import os, sys, time

rank = os.environ["RANK"]
if rank == "0":
    print("went_on.py: error: DataError: shard 3 holds NaN; skipping it", flush=True)
if rank == "1":
    time.sleep(0.3)
    print("went_on.py: error: PeerFailed: rank 2 stopped answering", flush=True)
    sys.exit(75)
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_a_job_error_said_by_a_rank_its_victim_did_not_wait_for_is_restarted(tmp_path):
    """A rank the launcher's stop ended, whose last words are a job error that no victim
    quotes: the victim stopped for another rank, so the job error is not why the job ended."""
    script = _script(tmp_path, "went_on.py", WENT_ON)
    said, status, report = _launched(
        tmp_path, "local", "--workers", "3", "--servers", "0", "--settle", "0.3", "--grace", "2",
        "--", script,
    )  # fmt: skip
    assert "restarting the job (2 of 2)" in said and "not restarting" not in said, said[-3000:]
    assert status == 75, said[-3000:]  # the victim's: "try again later"
    assert (report["rank"], report["exit_code"], report["restart"]) == (1, 75, 2), report


#: rank 0 says a job error, ignores the stop's SIGTERM and exits 1 on its own after the
#: settle; rank 1, left waiting, exits 75 at once, its words naming no error
OWN_EXIT_AFTER_SETTLE = """\
import os, signal, sys, time

if os.environ["RANK"] == "1":
    print("late.py: error: PeerFailed: rank 0 failed", flush=True)
    sys.exit(75)
print("late.py: error: DataError: the training set's 'x' holds NaN", flush=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(1.5)
sys.exit(1)
"""


@pytest.mark.timeout(60)
def test_a_job_error_of_a_rank_that_exits_on_its_own_after_the_settle_is_not_restarted(tmp_path):
    """The victim is reported, but the launcher exits 1, as docs/operations.md says."""
    script = _script(tmp_path, "late.py", OWN_EXIT_AFTER_SETTLE)
    said, status, report = _launched(
        tmp_path, "local", "--workers", "2", "--servers", "0", "--settle", "0.3", "--grace", "10",
        "--", script,
    )  # fmt: skip
    assert status == 1, said[-3000:]
    assert (report["rank"], report["exit_code"], report["restart"]) == (1, 75, 0), report
    then = unused("DataError").replace("configuration)", "configuration), said by worker 0")
    assert report["then"] == then, report
