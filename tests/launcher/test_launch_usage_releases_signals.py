"""A usage error of the launcher called as a function gives the stop signals back.

In a process whose program is ``distconv-launch`` (the installed command, or a wrapper of
that name that calls :func:`launcher.cli.main`), ``import launcher`` keeps the stop signals
for ``main`` (:func:`launcher.interrupt.defer`). A usage error (argparse's, or a flag that
changes nothing) or ``--help`` raised SystemExit before the ``try`` whose ``finally`` gives
them back: the process went on with a handler that keeps a SIGTERM for good, and the next
SIGTERM stopped nothing."""

from __future__ import annotations

import signal

import pytest

from tests.launcher.c_handler import SIGTERM_ENDS_IT
from tests.launcher.launch_cli import run_python

#: ``main(ARGV)`` caught, then a SIGTERM to itself: it must end the process
CALLER = f"""\
import os, signal, sys
sys.argv[0] = "/usr/local/bin/distconv-launch"
import launcher
from launcher.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
{SIGTERM_ENDS_IT}"""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv",
    [
        ["local", "--bogus"],
        ["local", "--workers", "1", "--servers", "0", "--mode", "async", "--", "x.py"],
        ["k8s", "--help"],
    ],
    ids=["usage-error", "ignored-flag", "help"],
)
def test_a_usage_error_of_main_called_as_a_function_gives_the_signals_back(argv, tmp_path):
    done = run_python(CALLER, *argv, cwd=tmp_path)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr[-500:])


#: the caller sets its own SIGTERM handler after the import (whose defer() noted the default):
#: ``main(ARGV)`` must give that one back, not the default, nor replace it where it never
#: took it over (a usage error)
OWN_HANDLER = CALLER.replace(
    "from launcher.cli import main\n",
    "from launcher.cli import main\nsignal.signal(signal.SIGTERM, lambda *_: os._exit(7))\n",
)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv",
    [
        ["local", "--bogus"],
        ["k8s", "--help"],
        ["local", "--workers", "1", "--servers", "0", "--", "missing.py"],
    ],
    ids=["usage-error", "help", "run"],
)
def test_main_called_as_a_function_gives_the_caller_s_own_handler_back(argv, tmp_path):
    done = run_python(OWN_HANDLER, *argv, cwd=tmp_path)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr[-500:])


#: ``main(ARGV)`` called in a thread of a process whose program is ``distconv-launch`` (the
#: import's defer() took the handlers in the main thread): its status, or its usage error
IN_A_THREAD = """\
import sys, threading
sys.argv[0] = "/usr/local/bin/distconv-launch"
import launcher
from launcher.cli import main
ended = []
def run():
    try:
        ended.append(main(sys.argv[1:]))
    except BaseException as exc:
        ended.append(repr(exc))
worker = threading.Thread(target=run)
worker.start()
worker.join()
print(ended)
"""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("argv", "ended"),
    [
        (["local", "--bogus"], "['SystemExit(2)']"),
        (["local", "--workers", "1", "--servers", "0", "--", "missing.py"], "[1]"),
    ],
    ids=["usage-error", "run"],
)
def test_main_called_in_a_thread_gives_its_status(argv, ended, tmp_path):
    """release() gave the handlers back with signal.signal(), which raises ValueError outside
    the main thread: main() raised that in place of its status or usage error."""
    done = run_python(IN_A_THREAD, *argv, cwd=tmp_path, text=True)
    assert done.stdout.strip() == ended, (done.stdout, done.stderr[-500:])


#: the caller's own SIGTERM handler, and a launch whose end raises (a bug; here the drain of
#: the held pipes) after the supervisor took the handlers over: the caller's must come back
END_RAISES = CALLER.replace(
    "from launcher.cli import main\n",
    """from launcher.cli import main
from launcher.supervisor import Supervisor
def raises(self):
    raise RuntimeError("the end raised")
Supervisor._drain_logs = raises
signal.signal(signal.SIGTERM, lambda *_: os._exit(7))
""",
).replace("except SystemExit:\n", "except RuntimeError:\n")


@pytest.mark.timeout(30)
def test_a_launch_whose_end_raises_gives_the_caller_s_own_handler_back(tmp_path):
    """The supervisor gave its handlers back last in its ``finally``, after the output's end:
    an error there left its own in, and release() gives back only where the launcher's is
    (dc43ad98), so the caller's process kept a handler that stopped nothing."""
    (tmp_path / "fails.py").write_text("raise SystemExit(3)\n")
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "fails.py"]
    done = run_python(END_RAISES, *argv, cwd=tmp_path)
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr[-500:])


#: a SIGTERM once ``main()`` in a thread returned: the default's, given back, ends the process
SIGTERM_AFTER = IN_A_THREAD + SIGTERM_ENDS_IT
#: a SIGTERM while the job of ``main()`` in a thread runs (armed: its log is there)
SIGTERM_DURING = IN_A_THREAD.replace(
    "worker.join()\n",
    """import os, signal, time
while not os.path.exists("run/logs/worker-0.log"):
    time.sleep(0.05)
os.kill(os.getpid(), signal.SIGTERM)
worker.join()
""",
)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("script", "ended"), [(SIGTERM_AFTER, "[3]"), (SIGTERM_DURING, "")], ids=["after", "during"]
)
def test_main_called_in_a_thread_leaves_the_caller_its_sigterm(script, ended, tmp_path):
    """release() in a thread other than the main one kept the handlers the import's defer()
    took (9dd8ff42): the process went on with one that keeps every SIGTERM for good; and
    arm() there armed the main thread's, so a SIGTERM during the job raised Interrupted in
    the caller's main thread (the launch in a thread sets no handlers of its own)."""
    (tmp_path / "job.py").write_text("import sys, time\ntime.sleep(3)\nsys.exit(3)\n")
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "job.py"]
    done = run_python(script, *argv, cwd=tmp_path, text=True)
    said = (done.returncode, done.stdout.strip())
    assert said == (-signal.SIGTERM, ended), (said, done.stderr[-800:])


#: the caller's own SIGINT handler (set before the import, whose defer() took it), then a
#: SIGINT and a SIGTERM that come together while the job of ``main()`` in a thread runs: both
#: are the caller's, its handler's line and SIGTERM's default
TWO_AT_ONCE = IN_A_THREAD.replace(
    "import launcher\n",
    """import os, signal, time
signal.signal(signal.SIGINT, lambda *_: print("the caller's SIGINT", flush=True))
import launcher
""",
).replace(
    "worker.join()\n",
    """while not os.path.exists("run/logs/worker-0.log"):
    time.sleep(0.05)
both = {signal.SIGINT, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, both)  # both to this thread, pending till unblocked
signal.raise_signal(signal.SIGINT)
signal.raise_signal(signal.SIGTERM)
signal.pthread_sigmask(signal.SIG_UNBLOCK, both)  # in together: SIGINT's handler runs first
worker.join()
""",
)


@pytest.mark.timeout(30)
def test_two_signals_at_once_during_main_in_a_thread_both_reach_the_caller(tmp_path):
    """The first signal's handler gave back every handler the import's defer() took: SIGTERM's
    default was in before CPython ran SIGTERM's, already come, which it then dropped ("Signal
    15 ignored due to race condition"), and the process ran on, SIGTERM lost (d4246dba)."""
    (tmp_path / "job.py").write_text("import sys, time\ntime.sleep(3)\nsys.exit(3)\n")
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "job.py"]
    done = run_python(TWO_AT_ONCE, *argv, cwd=tmp_path, text=True)
    said = (done.returncode, done.stdout.strip())
    assert said == (-signal.SIGTERM, "the caller's SIGINT"), (said, done.stderr[-800:])


#: a SIGTERM while the job of ``main()`` in a thread runs, and another inside its handler's
#: give-back (sent as the handler to set is looked up: run there, in raise_signal's check)
ONE_INSIDE = SIGTERM_DURING.replace(
    "os.kill(os.getpid(), signal.SIGTERM)\n",
    """import launcher.interrupt as interrupt
looked_up = interrupt.restorable
def restorable(handler):
    interrupt.restorable = looked_up
    print("inside", flush=True)  # the nested signal is placed: else the test checks nothing
    signal.raise_signal(signal.SIGTERM)
    return looked_up(handler)
interrupt.restorable = restorable
os.kill(os.getpid(), signal.SIGTERM)
""",
)


@pytest.mark.timeout(30)
def test_a_signal_inside_the_give_back_of_main_in_a_thread_is_not_raised(tmp_path):
    """A signal whose handler ran inside the give-back of its own, the launcher's still in,
    went on as in a launch of the main thread's: armed, it raised Interrupted into the
    caller's main thread, out of the handler it cut, the process going on."""
    (tmp_path / "job.py").write_text("import sys, time\ntime.sleep(3)\nsys.exit(3)\n")
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "job.py"]
    done = run_python(ONE_INSIDE, *argv, cwd=tmp_path, text=True)
    said = (done.returncode, done.stdout.strip())
    assert said == (-signal.SIGTERM, "inside"), (said, done.stderr[-800:])
