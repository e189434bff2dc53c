"""``distconv.distributed.run_main`` in a script of its own, as a user runs one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from distconv.distributed import run_main
from distconv.logs import interrupted_line
from distconv.sync import JobRefused
from distconv.sync.mpi import leaving
from distconv.sync.mpi.leaving import install_abort_hook
from tests.child_env import child_path
from tests.mpi.common import AbortRecorder
from tests.signals import sigint_as_in_a_terminal

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """\
import sys
import distconv.distributed as dist
from distconv.sync.peers import PeerFailed


def main():
    if sys.argv[1] == "peer":
        raise PeerFailed("rank 1 failed", [1])
    return int(sys.argv[1])


sys.exit(dist.run_main(main))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("arg", "status"), [("0", 0), ("3", 3), ("peer", 75)])
def test_run_main_keeps_mains_exit_status(tmp_path, arg, status):
    """run_main returned None whatever ``main`` returned: ``sys.exit(main())`` turned into
    ``sys.exit(dist.run_main(main))`` exited 0 where ``main`` said 3."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(script), arg], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == status, done.stderr[-2000:]
    assert ("PeerFailed: rank 1 failed" in done.stderr) == (arg == "peer")  # the traceback


#: the README's own pattern (``try: ... finally: sync.close()`` inside ``dist.run_main(main)``),
#: signalled after step 2 as a person's Ctrl-C or a scheduler's SIGTERM would be
STOPPED = """\
import os, signal, sys
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network
sys.path.insert(0, {root!r})
from tests.signals import signal_at


def main():
    sync = dist.init("sgd", lr=0.01, log_format=os.environ.get("LOG_FORMAT", "text"))
    set_seed(0)
    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "target"])
    rng = np.random.default_rng(0)
    data = {{"x": rng.standard_normal((64, 4)), "target": rng.standard_normal((64, 1))}}
    try:
        trainer = Trainer(net, sync, 2, out_dir=sys.argv[1], progress=False)
        signal_at(trainer, 2, signal.Signals[sys.argv[2]])
        trainer.fit(data, epochs=5)
    finally:
        sync.close()


dist.run_main(main)
"""


def stopped_script(tmp_path: Path) -> Path:
    """The script of :data:`STOPPED` in ``tmp_path``."""
    script = tmp_path / "stopped.py"
    script.write_text(STOPPED.format(root=str(ROOT)))
    return script


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("signame", "status"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_script_stopped_by_a_signal_says_one_line_and_exits_as_distconv_train(
    tmp_path, signame, status
):
    """A script run as the README says (``dist.run_main(main)``) that Ctrl-C or SIGTERM
    stopped, after its checkpoint, ended with Preempted's traceback and status 1: a failure
    to a launcher or a scheduler, where ``distconv train`` exits 130 or 143 with one line."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(stopped_script(tmp_path)), str(tmp_path / "out"), signame],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        preexec_fn=sigint_as_in_a_terminal,
    )
    assert done.returncode == status, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    # one rank stops at the step it was signalled after, with its checkpoint
    assert done.stderr.splitlines()[-1] == f"stopped.py: stopped by {signame} after step 2"
    assert (tmp_path / "out" / "checkpoints" / "step-00000002.json").is_file()


@pytest.mark.timeout(60)
def test_the_stop_line_of_a_script_logging_json_is_json(tmp_path):
    """Under ``init(log_format="json")`` the one line of a stopped script was plain text among
    JSON lines, which a collector parsing a pod's output as JSON could not read."""
    env = {**os.environ, "PYTHONPATH": child_path(), "LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, str(stopped_script(tmp_path)), str(tmp_path / "out"), "SIGTERM"],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 143, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert lines[-1]["message"] == "stopped.py: stopped by SIGTERM after step 2"
    assert lines[-1]["level"] == "warning" and lines[-1]["rank"] == 0


#: Ctrl-C while the script sets up, before the Trainer handles it; with an argument, the
#: KeyboardInterrupt carries it as a note (two lines), as ``MPISync.fail_setup``'s does; with
#: ``SECOND`` in the environment, a second Ctrl-C comes as the noted one propagates; with
#: ``SETTLED`` too, the noted one's notes are settled first (``settle_notes``: what a setup made
#: again in the handler, after ``fail_setup``'s note, does)
INTERRUPTED = """\
import os, signal, sys
import distconv.distributed as dist
from distconv.logs import settle_notes
from distconv.notes import add_note


def main():
    sync = dist.init("sgd", lr=0.01, log_format=os.environ.get("LOG_FORMAT", "text"))
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.pause()  # the handler raises KeyboardInterrupt here
    except KeyboardInterrupt as interrupt:
        for note in sys.argv[1:]:
            add_note(interrupt, note)  # as MPISync's
        if os.environ.get("SETTLED"):
            settle_notes(interrupt)
        if os.environ.get("SECOND"):  # raised here: the noted one is its context
            os.kill(os.getpid(), signal.SIGINT)
            signal.pause()
        raise
    finally:
        sync.close()


dist.run_main(main)
"""


def run_interrupted(tmp_path: Path, *notes: str, **env: str) -> subprocess.CompletedProcess:
    """Run :data:`INTERRUPTED` (its Ctrl-C carrying ``notes``), ``env`` added to its own."""
    script = tmp_path / "setup.py"
    script.write_text(INTERRUPTED)
    env = {**os.environ, "PYTHONPATH": child_path(), **env}
    env.pop("DISTCONV_DEBUG", None)
    return subprocess.run(
        [sys.executable, str(script), *notes],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
        preexec_fn=sigint_as_in_a_terminal,
    )


@pytest.mark.timeout(60)
def test_a_ctrl_c_before_the_trainer_takes_it_says_interrupted_and_exits_130(tmp_path):
    """It printed KeyboardInterrupt's traceback and died by SIGINT, where ``distconv train``
    says ``interrupted`` and exits 130."""
    done = run_interrupted(tmp_path)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == "setup.py: interrupted"


#: a Ctrl-C's notes, as MPISync.fail_setup's names the error it cut short (one of two lines)
NOTES = ("this rank could not set up (ValueError: x); the others were told", "one\ntwo")
#: what the script says of a Ctrl-C that carries :data:`NOTES`: each line of them after
#: ``interrupted``
NOTES_SAID = [f"setup.py: {line}" for line in ["interrupted", NOTES[0], "one", "two"]]


@pytest.mark.timeout(60)
def test_a_ctrl_c_says_its_notes_after_interrupted(tmp_path):
    """The notes of a Ctrl-C (``MPISync.fail_setup``'s: the error it cut short, whether the
    other ranks were told) were said nowhere: only ``interrupted``. Each line follows it."""
    done = run_interrupted(tmp_path, *NOTES)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-len(NOTES_SAID) :] == NOTES_SAID, done.stderr[-2000:]


@pytest.mark.timeout(60)
def test_a_ctrl_c_says_its_notes_as_json_lines_under_a_json_log(tmp_path):
    done = run_interrupted(tmp_path, *NOTES, LOG_FORMAT="json")
    assert done.returncode == 130, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines()[-len(NOTES_SAID) :]]
    assert [line["message"] for line in lines] == NOTES_SAID
    assert all(line["level"] == "warning" and line["rank"] == 0 for line in lines), lines


@pytest.mark.timeout(60)
def test_a_second_ctrl_c_says_the_notes_of_the_first(tmp_path):
    """A second Ctrl-C as the noted first propagated (``MPISync.fail_setup``'s) ended the
    script with ``interrupted`` alone: the first, its note naming the error it cut short, was
    only the second's context. Its notes follow now, each line once."""
    done = run_interrupted(tmp_path, *NOTES, SECOND="1")
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-len(NOTES_SAID) :] == NOTES_SAID, done.stderr[-2000:]
    # once, in the ending, on every Python (never logged as it was made)
    assert done.stderr.count(NOTES[0]) == 1, done.stderr[-2000:]


@pytest.mark.timeout(60)
def test_a_later_ctrl_c_says_no_notes_of_one_settled_in_its_context(tmp_path):
    """A script that caught ``fail_setup``'s noted Ctrl-C and set up again in its handler, a
    later Ctrl-C ending it there, ended with the first one's note (``this rank could not set
    up ...``) as if this Ctrl-C had cut that failure short, though a setup followed it. The
    setup settles that note (``settle_notes``): the later Ctrl-C says ``interrupted`` alone,
    where an unsettled one's notes are still said (the test above)."""
    done = run_interrupted(tmp_path, *NOTES, SECOND="1", SETTLED="1")
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1] == "setup.py: interrupted", done.stderr[-2000:]
    # in no ending, and not logged as it was made, on every Python
    assert done.stderr.count(NOTES[0]) == 0, done.stderr[-2000:]


def test_the_notes_of_a_context_chain_that_loops_are_said_once():
    """A context chain made to loop (Python breaks only the loops raising makes) is read to
    where it comes back, each interrupt's notes once and a note twice added once; an error in
    the chain that is no Ctrl-C is passed over, its notes not said (they are its traceback's)."""
    last, error, first = KeyboardInterrupt(), ValueError("cut short"), KeyboardInterrupt()
    last.__notes__ = ["second"]  # PEP 678's attribute, as add_note keeps it
    error.__notes__ = ["the error's"]
    first.__notes__ = ["first\nof two lines", "second"]
    last.__context__, error.__context__, first.__context__ = error, first, last
    said = interrupted_line("script.py", last).splitlines()
    assert said == [
        "script.py: interrupted",
        "script.py: second",
        "script.py: first",
        "script.py: of two lines",
    ]
    chain = KeyboardInterrupt()  # a chain as long as a loop of handlers makes: read so far
    for n in range(10_000):
        chain.__notes__ = [f"note {n}"]
        chain, chain.__context__ = KeyboardInterrupt(), chain
    assert 1 < len(interrupted_line("script.py", chain).splitlines()) < 200


#: a Ctrl-C after ``init`` noted the JSON log format but before it set the log up
BEFORE_THE_LOG = """\
import distconv.distributed as dist
from distconv.script_main import note_log_format


def main():
    note_log_format("json")  # what init does first, before configure_logging
    raise KeyboardInterrupt


dist.run_main(main)
"""


@pytest.mark.timeout(60)
def test_a_ctrl_c_before_the_log_is_set_up_says_interrupted_as_json_when_asked(tmp_path):
    """``run_main`` wrote its ``interrupted`` line as text where ``init`` had asked for JSON
    but had not yet set the log up: the format noted was passed to its errors' line alone."""
    script = tmp_path / "early.py"
    script.write_text(BEFORE_THE_LOG)
    env = {**os.environ, "PYTHONPATH": child_path()}
    env.pop("DISTCONV_DEBUG", None)
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 130, done.stderr[-2000:]
    line = json.loads(done.stderr.splitlines()[-1])
    assert line["message"] == "early.py: interrupted" and line["level"] == "warning", line


#: a script whose ``init`` reads a malformed environment, or whose ``main`` fails after it
SETUP = """\
import sys
import distconv.distributed as dist
from distconv.sync import JobRefused
from distconv.sync.peers import PeerFailed

if sys.argv[3:] == ["hook"]:  # a script's own exception hook (a logger's), no MPI loaded
    sys.excepthook = lambda *exc: sys.__excepthook__(*exc)


def main():
    sync = dist.init("sgd", lr=0.01, log_format=sys.argv[1])
    sync.close()
    if sys.argv[2] == "peer":
        raise PeerFailed("rank 1 failed", [1])
    if sys.argv[2] == "bug":
        raise ValueError("a bug")
    if sys.argv[2] == "misuse":  # the sync API out of order: a plain SyncError
        sync.start_step(1)
    if sys.argv[2] == "refused":
        raise JobRefused("rank 0 and rank 1 run different jobs: config.batch: 8 here, 9 there")


dist.run_main(main)
"""


def run_setup(tmp_path: Path, args: list[str], **environ: str) -> subprocess.CompletedProcess:
    """:data:`SETUP` run with ``args``, in the environment with ``environ`` set."""
    script = tmp_path / "setup.py"
    script.write_text(SETUP)
    env = {**os.environ, "PYTHONPATH": child_path(), **environ}
    for name in ("DISTCONV_DEBUG", "DISTCONV_PSERVERS", "RANK", "WORLD_SIZE"):
        if name not in environ:
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=50
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("environ", "said"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK must be an integer, got 'x'"),
        ({"DISTCONV_PSERVERS": " , "}, "DISTCONV_PSERVERS: an empty entry in ' , '"),
    ],
)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_malformed_environment_is_one_line_and_status_1(tmp_path, environ, said, log_format):
    """``init`` refusing the environment ended a script run through ``run_main`` with a
    traceback, where ``distconv train`` says one line naming the cause and exits 1:
    the same line, JSON where the script asked for a JSON log."""
    done = run_setup(tmp_path, [log_format, "ok"], **environ)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    message = json.loads(line)["message"] if log_format == "json" else line
    assert message.startswith(f"setup.py: error: RuntimeConfigError: {said}"), line


@pytest.mark.timeout(60)
def test_a_malformed_environment_keeps_its_traceback_under_debug(tmp_path):
    """``DISTCONV_DEBUG=1`` asks for the traceback, as under ``distconv train``."""
    done = run_setup(tmp_path, ["text", "ok"], RANK="x", WORLD_SIZE="2", DISTCONV_DEBUG="1")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "RuntimeConfigError: RANK must be an integer" in done.stderr


@pytest.mark.timeout(60)
def test_a_bug_keeps_its_traceback(tmp_path):
    """Only the user's errors are one line: a bug's traceback stays."""
    done = run_setup(tmp_path, ["text", "bug"])
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr and "ValueError: a bug" in done.stderr


@pytest.mark.timeout(60)
def test_a_misuse_of_the_sync_keeps_its_traceback(tmp_path):
    """A plain SyncError from run_main's script is most often the sync API used out of order
    (here a step after close()): its traceback shows where, so it stays (only JobRefused, the
    user's configuration, is one line)."""
    done = run_setup(tmp_path, ["text", "misuse"])
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr, done.stderr[-2000:]
    assert "SyncError: LocalSync.start_step() called after close()" in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_job_refused_is_one_line_and_status_1(tmp_path, log_format):
    """Ranks that run different jobs (JobRefused) ended a script run through run_main with a
    traceback, where ``distconv train`` says one line and exits 1: the same line, JSON
    under a JSON log; the traceback under DISTCONV_DEBUG=1."""
    done = run_setup(tmp_path, [log_format, "refused"])
    assert done.returncode == 1, done.stderr[-2000:]
    (line,) = done.stderr.splitlines()
    message = json.loads(line)["message"] if log_format == "json" else line
    assert message == (
        "setup.py: error: rank 0 and rank 1 run different jobs: config.batch: 8 here, 9 there"
    ), line
    debugged = run_setup(tmp_path, [log_format, "refused"], DISTCONV_DEBUG="1")
    assert debugged.returncode == 1 and "Traceback" in debugged.stderr, debugged.stderr[-2000:]


@pytest.mark.timeout(60)
def test_a_job_refused_is_one_line_under_a_scripts_own_exception_hook(tmp_path):
    """run_main left a JobRefused not raised alike (the parameter server's job check) to any
    exception hook not Python's own, taken for an MPI sync's abort hook: a script's own (a
    logger's) printed its traceback. Only an MPI job's hook takes it."""
    done = run_setup(tmp_path, ["text", "refused", "hook"])
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "setup.py: error: rank 0 and rank 1 run different jobs: config.batch: 8 here, 9 there"
    ], done.stderr[-2000:]


@pytest.mark.timeout(60)
def test_a_peer_failure_under_a_json_log_is_a_json_line(tmp_path):
    """The traceback of a failure another rank caused went to stderr as text under
    ``init(log_format="json")``, where every line is JSON (docs/operations.md): it is now the
    ``exception`` of one JSON line."""
    done = run_setup(tmp_path, ["json", "peer"])
    assert done.returncode == 75, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert lines[-1]["message"] == "setup.py: error: rank 1 failed", lines[-1]
    assert lines[-1]["level"] == "error" and lines[-1]["rank"] == 0
    assert "PeerFailed: rank 1 failed" in lines[-1]["exception"]


def ends_of_run_main(capsys) -> list[str]:
    """How an in-process run_main ends a ``main`` that raises a script's own JobRefused, then
    one that raises KeyboardInterrupt: ``exit N`` and what it said on stderr, or the name of
    the exception it left uncaught."""
    ends = []
    for error in (JobRefused("a script's own refusal"), KeyboardInterrupt()):

        def main(error: BaseException = error) -> None:
            raise error

        try:
            run_main(main)
        except SystemExit as exc:
            ends.append(f"exit {exc.code}: {capsys.readouterr().err}")
        except BaseException as exc:  # noqa: BLE001 - what run_main let through is the result
            ends.append(type(exc).__name__)
    return ends


#: :func:`ends_of_run_main` with no hook to leave an error to: one line, status 1, then 130
SAID = ["exit 1: script.py: error: a script's own refusal\n", "exit 130: script.py: interrupted\n"]


@pytest.fixture
def mpi_loaded_and_a_scripts_hook(monkeypatch):
    """An MPI job's process as run_main sees it, not under mpiexec: mpi4py.MPI loaded (a
    stand-in where it is not), a script's own exception hook (a logger's) installed."""
    loaded = sys.modules.get("mpi4py.MPI") or types.ModuleType("mpi4py.MPI")
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", loaded)
    for name in ("DISTCONV_DEBUG", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "DISTCONV_PSERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", ["script.py"])
    monkeypatch.setattr(sys, "excepthook", lambda *exc: sys.__excepthook__(*exc))


@pytest.mark.timeout(10)
@pytest.mark.usefixtures("mpi_loaded_and_a_scripts_hook")
def test_a_scripts_own_hook_with_mpi4py_loaded_is_no_abort_hook(capsys):
    """run_main took any hook but Python's own, where mpi4py.MPI was loaded, for MPISync's
    abort hook: a script's own (a logger's) in an MPI job got the traceback of a refusal (a
    script's own JobRefused), and a Ctrl-C died by SIGINT, not ``interrupted`` and 130.
    Only MPISync's hook, by its mark, takes them."""
    assert ends_of_run_main(capsys) == SAID


@pytest.mark.timeout(10)
@pytest.mark.usefixtures("mpi_loaded_and_a_scripts_hook")
def test_mpisyncs_abort_hook_takes_the_error_uncaught_until_closed(capsys):
    """Under MPISync's hook (installed over the script's) run_main leaves a refusal raised on
    one rank, and a Ctrl-C, to the hook, which aborts the job (another rank may wait for this
    one). Closed, it aborts no more: left installed (a first sync closed under a second's,
    put back by the second's close), it is no abort hook, and run_main says its line."""
    comms = AbortRecorder(), AbortRecorder()
    close_first, close_second = install_abort_hook(comms[0]), install_abort_hook(comms[1])
    try:
        close_first()  # under the second's: left installed, told it is closed
        assert ends_of_run_main(capsys) == ["JobRefused", "KeyboardInterrupt"]
    finally:
        close_second()  # puts the first's back
    assert sys.excepthook.__name__ == "print_and_abort"  # the first's, closed
    assert ends_of_run_main(capsys) == SAID
    assert comms[0].aborted == comms[1].aborted == []  # run_main never called a hook


#: hooks a script may set after ``init()``, over MPISync's: one that hands on to the hook it
#: replaced, a logger's that calls Python's own instead, Python's own put back
SCRIPTS_HOOKS = {
    "hands-on": lambda ours, seen: lambda *exc: (seen.append("script"), ours(*exc)),
    "pythons-own": lambda ours, seen: (
        lambda *exc: (seen.append("script"), sys.__excepthook__(*exc))
    ),
    "default": lambda ours, seen: sys.__excepthook__,
}


@pytest.mark.timeout(10)
@pytest.mark.usefixtures("mpi_loaded_and_a_scripts_hook")
@pytest.mark.parametrize("hook", SCRIPTS_HOOKS)
def test_a_scripts_hook_set_over_an_open_abort_hook_sees_the_error_then_ours_aborts(
    hook, capsys, monkeypatch
):
    """A hook a script sets after ``init()`` need not hand on to MPISync's (a logger's that
    calls Python's own, ``sys.__excepthook__`` put back): a one-rank refusal or a Ctrl-C left
    to it ended this rank alone, the others waiting in a collective (mpiexec -n 2 hung).
    While MPISync's hook is open run_main hands the error to the script's hook, then
    aborts the job through MPISync's: it skipped the script's (a logger's log stayed
    empty). One that hands on aborts in ours: once, the traceback printed once. Once
    MPISync's hook is closed, the script's hook is its own again."""
    monkeypatch.setattr(leaving, "_exit", lambda status: None)  # the stand-in Abort returns
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.0)  # no launcher forwards the output
    comm, seen = AbortRecorder(), []
    close = install_abort_hook(comm)
    monkeypatch.setattr(sys, "excepthook", SCRIPTS_HOOKS[hook](sys.excepthook, seen))
    try:
        assert ends_of_run_main(capsys) == ["JobRefused", "KeyboardInterrupt"]
    finally:
        close()
    assert comm.aborted == [1, 130]  # once each, by ours
    assert seen == ([] if hook == "default" else ["script", "script"])
    err = capsys.readouterr().err
    assert err.count("Traceback (most recent call last)") == 2, err  # one each, not again
    assert "JobRefused: a script's own refusal" in err and "\nKeyboardInterrupt\n" in err
    assert ends_of_run_main(capsys) == SAID
    assert comm.aborted == [1, 130]
