"""A process started by a script the launcher started follows the launcher: when the launcher
is SIGKILLed, the kernel SIGTERMs the launcher's own children only, and a ``distconv train``
under a wrapper script trained on, orphaned. Real launchers, scripts and processes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_supervision import ENV, launch_argv, wait_for, wait_gone

from distconv.procfs import process_identity
from tests.processes import job_env

REPO_ROOT = Path(__file__).resolve().parents[2]


def _launch_wrapped(tmp_path: Path, wrapper: str, env: dict[str, str]) -> subprocess.Popen:
    """A launcher of one worker that runs ``sh -c wrapper`` with ``env`` (a
    :func:`tests.processes.job_env`'s): the wrapper is the launcher's child, what it starts
    is not."""
    argv = launch_argv(tmp_path / "run", "--workers", "1", "--servers", "0", "--", "sh", "-c")
    return subprocess.Popen(
        [*argv, wrapper],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def _killed_after(*procs: subprocess.Popen) -> Iterator[None]:
    """Each of ``procs`` killed and reaped on leaving, whatever the test found."""
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _pid_in(path: Path, limit: float = 30) -> int:
    """The pid a process writes to ``path``: the file appears (``open(path, 'w')``) before its
    text is written, and a fixed pause after it read it empty on a loaded host."""
    deadline = time.monotonic() + limit
    while not (text := path.read_text() if path.exists() else "").strip():
        assert time.monotonic() < deadline, f"no pid in {path} within {limit} s"
        time.sleep(0.02)
    return int(text)


def _kill_launcher_and_wait_gone(
    launcher: subprocess.Popen, pid: int, limit: float, what: str
) -> None:
    """SIGKILL ``launcher``, which gets no word of it: its job's process ``pid`` must still be
    gone within ``limit`` seconds (the follower's work), else the test fails with ``what``."""
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=10)
    assert wait_gone([pid], limit=limit) == [], what


@pytest.mark.timeout(60)
def test_a_script_started_process_stops_when_its_launcher_is_killed(tmp_path):
    """A user script run through ``sh`` (so not the launcher's child) that calls init()."""
    pid_file = tmp_path / "pid"
    script = tmp_path / "train.py"
    script.write_text(
        "import os, sys, time\n"
        "import distconv.distributed as d\n"
        "d.init('sgd', log_format=None)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(50)\n"
    )
    with job_env(ENV) as env:  # what is left of the job goes at the end, by its mark
        launcher = _launch_wrapped(tmp_path, f"{sys.executable} {script}; sleep 50", env)
        with _killed_after(launcher):  # Popen's own kill: no pid reaped since
            pid = _pid_in(pid_file)
            _kill_launcher_and_wait_gone(
                launcher, pid, 10, "the script outlived its killed launcher"
            )


@pytest.mark.timeout(120)
def test_distconv_train_under_a_wrapper_checkpoints_when_its_launcher_is_killed(tmp_path):
    """As at the launcher's SIGTERM: the train process checkpoints, then exits."""
    out = tmp_path / "out"
    train = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs",
             "200", "--batch-size", "8", "--no-progress", "--out", str(out)]  # fmt: skip
    # its output to a file, not the launcher's pipe: a write to that pipe fails once the
    # launcher is gone, which may end a process that writes, but not one that trains quietly
    log = tmp_path / "train.log"
    wrapper = f"echo $$ > {tmp_path / 'sh.pid'}; {' '.join(train)} > {log} 2>&1; sleep 50"
    with job_env(ENV) as env:  # what is left of the job goes at the end, by its mark
        launcher = _launch_wrapped(tmp_path, wrapper, env)
        trainer = None
        with _killed_after(launcher):  # Popen's own kill: no pid reaped since
            shell = _pid_in(tmp_path / "sh.pid")
            deadline = time.monotonic() + 60
            while trainer is None:
                assert time.monotonic() < deadline, "distconv train never started"
                children = Path(f"/proc/{shell}/task/{shell}/children")
                found = children.read_text().split() if children.exists() else []
                trainer = int(found[0]) if found else None
                time.sleep(0.05)
            wait_for([out / "metrics.jsonl"], limit=60)  # it trains
            _kill_launcher_and_wait_gone(
                launcher, trainer, 30, "distconv train outlived its launcher"
            )
            said = log.read_text()
            ended = f"(the launcher, pid {launcher.pid}, ended)"  # the stop line says why
            assert re.search(rf"stopped by SIGTERM after step \d+ {re.escape(ended)}", said), said
            assert "the launcher (pid" in said and "has ended" in said


#: seconds between a follower's looks at the launcher in these tests: the module's 1 s made
#: every test that waits "more than a look's interval" wait 1.5 s. Its thread reads the value
#: at each look, so a follower program sets it before it starts following
LOOK = 0.05
#: how long a follower that must not stop is watched: many looks, not one
SEVERAL_LOOKS = 10 * LOOK
_FAST_LOOKS = f"import distconv.launch_env as _env; _env.LAUNCHER_LOOK_EVERY = {LOOK}\n"

#: a follower whose watch stops it at its first look: SIGTERM waits until the answer is printed,
#: or the watch thread's first look could kill it before the main thread said a word (the test
#: then read no line, about one run in eight on a loaded host). Blocked before distconv is
#: imported: every thread inherits the mask, numpy's BLAS pool too, which would take it else
_FOLLOW_STOPPED_AT_ONCE = (
    "import signal, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
    f"{_FAST_LOOKS}"
    "from distconv.launch_env import stop_with_launcher\n"
    "print(stop_with_launcher() is not None, flush=True)\n"
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})\n"
    "time.sleep(20)\n"
)


#: a follower that says whether it follows, then runs on until stopped
_FOLLOWS = (
    "import time\n"
    f"{_FAST_LOOKS}"
    "from distconv.launch_env import stop_with_launcher\n"
    "print(stop_with_launcher() is not None, flush=True)\n"
    "time.sleep(20)\n"
)


def _sleeping(proc: subprocess.Popen, limit: float = 10) -> subprocess.Popen:
    """``proc`` once it runs ``sleep``: a wrapper (``setpriv``, ``unshare``) has changed its
    user or namespace and exec'd. A fixed 0.2 s pause raced it on a loaded host: the follower
    saw a process of the wrong user, or the test skipped for want of a time namespace."""
    deadline = time.monotonic() + limit
    while Path(f"/proc/{proc.pid}/comm").read_text().strip() != "sleep":
        assert time.monotonic() < deadline, f"{proc.args} did not exec sleep in {limit} s"
        time.sleep(0.01)
    return proc


def _identity_of(pid: int) -> str:
    """``process_identity()`` of process ``pid`` (this one's boot and namespace)."""
    start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return " ".join([*process_identity().split(" ")[:2], str(pid), start])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", ["followed", "its parent", "malformed", "start not digits"])
def test_a_process_follows_the_launcher_it_names_its_parent_too(case):
    """The launcher stands in as a ``sleep``: its end SIGTERMs a process that names it in
    DISTCONV_LAUNCHER; a process whose parent it is follows it too (the kernel's
    parent-death signal may be cleared), and is not stopped while it runs (this test's own
    process); one given a malformed identity starts no thread."""
    sleeper = subprocess.Popen(["sleep", "30"])
    named = {"followed": _identity_of(sleeper.pid), "its parent": _identity_of(os.getpid())}
    named["start not digits"] = named["followed"] + "x"
    env = {**ENV, "DISTCONV_LAUNCHER": named.get(case, "x y 1 2")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _FOLLOWS], env=env, stdout=subprocess.PIPE, text=True
    )
    with _killed_after(sleeper, proc):
        assert proc.stdout.readline().strip() == str(case in ("followed", "its parent"))
        sleeper.kill()
        sleeper.wait()
        if case == "followed":
            assert proc.wait(timeout=10) == -signal.SIGTERM
        else:
            time.sleep(SEVERAL_LOOKS)
            assert proc.poll() is None


@pytest.mark.timeout(30)
def test_a_process_whose_parent_took_the_launchers_pid_stops():
    """The launcher (named as started at tick 1) has ended, and the shell that starts the
    follower took its pid: the follower took its parent for the launcher, whose death the
    kernel tells it, and followed nothing, training on, orphaned."""
    where = " ".join(process_identity().split(" ")[:2])
    code = _FOLLOW_STOPPED_AT_ONCE.replace("time.sleep(20)", "time.sleep(20); print('ran on')")
    shell = f'export DISTCONV_LAUNCHER="{where} $$ 1"; {sys.executable} -c "$0"; exit 0'
    # job_env: the follower is the shell's child, which _killed_after's kill leaves running
    with job_env(ENV) as env:
        proc = subprocess.Popen(
            ["sh", "-c", shell, code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        with _killed_after(proc):
            assert proc.stdout.readline().strip() == "True", proc.stderr.read()
            proc.wait(timeout=10)  # the shell ends with the follower
            assert "has ended" in proc.stderr.read()
            assert proc.stdout.read() == ""


@pytest.mark.timeout(60)
def test_the_launchers_own_child_under_another_group_stops_when_it_is_killed(tmp_path):
    """``-- setpriv --regid=...`` between the launcher and the trainer: the change of group
    cleared the kernel's parent-death SIGTERM, and the trainer, the launcher's own child,
    trained on, orphaned, after the launcher was killed."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv")
    pid_file = tmp_path / "pid"
    script = tmp_path / "train.py"
    script.write_text(
        "import os, time\n"
        "import distconv.distributed as d\n"
        "d.init('sgd', log_format=None)\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(50)\n"
    )
    regid = ["setpriv", f"--regid={os.getgid() + 1}", "--keep-groups", sys.executable]
    argv = launch_argv(tmp_path / "run", "--workers", "1", "--servers", "0", "--", *regid)
    with job_env(ENV) as env:  # what is left of the job goes at the end, by its mark
        launcher = subprocess.Popen(
            [*argv, str(script)], env=env, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        with _killed_after(launcher):  # Popen's own kill: no pid reaped since
            pid = _pid_in(pid_file)
            assert _ppid_of(pid) == launcher.pid  # its own child, not a script's
            _kill_launcher_and_wait_gone(launcher, pid, 10, "the launcher's child outlived it")


def _ppid_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _can_unshare(*flags: str) -> bool:
    """Whether this user may make the namespaces ``flags`` name (root in most CI containers)."""
    try:
        return subprocess.run(["unshare", *flags, "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def _can_open_pidfd() -> bool:
    """Whether this process may open a pidfd (Linux 5.3; older Docker releases' seccomp profile
    refuses it), as the follower does to follow the process it first looked at."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


@pytest.mark.timeout(30)
def test_a_launcher_hidden_by_hidepid_is_not_followed():
    """A process ``/proc`` hides the running launcher from (another user's, ``hidepid=2``:
    its /proc/<pid> is missing, ``kill(pid, 0)`` answers EPERM) SIGTERMed itself within a
    second of its start while the launcher ran on. Now it says so and does not follow it."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not _can_unshare("--mount"):
        pytest.skip("needs root, setpriv, and mount namespaces")
    sleeper = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534",
                                "--clear-groups", "sleep", "30"])  # fmt: skip
    # root without capabilities or group 0 in the follower: hidepid hides nobody's process
    # from it, and kill(pid, 0) answers EPERM
    wrap = ["unshare", "--mount", "sh", "-c", 'mount -t proc -o hidepid=2 proc /proc && '
            'exec setpriv --regid=65534 --clear-groups --bounding-set=-all --inh-caps=-all '
            '"$@"', "sh"]  # fmt: skip
    env = {**ENV, "DISTCONV_LAUNCHER": _identity_of(_sleeping(sleeper).pid)}
    proc = subprocess.Popen(
        [*wrap, sys.executable, "-c", _FOLLOWS],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with _killed_after(sleeper, proc):
        assert proc.stdout.readline().strip() == "False", proc.stderr.read()
        time.sleep(SEVERAL_LOOKS)
        assert proc.poll() is None, proc.stderr.read()
        proc.kill()
        assert "cannot see the launcher (pid" in proc.stderr.read()


@pytest.mark.timeout(30)
def test_a_launcher_read_on_another_clock_is_followed_until_it_ends():
    """A process in another time namespace (``unshare --time``) reads the launcher's start
    time offset from the one the launcher wrote: it gave up following (logged 'cannot see the
    launcher') and trained on, orphaned, after the launcher was killed. It follows the
    process it found: on while the launcher runs, SIGTERMed once it ends."""
    if not shutil.which("unshare") or not _can_unshare("--time"):
        pytest.skip("needs time namespaces")
    sleeper = subprocess.Popen(["sleep", "30"])
    _sleeping(sleeper)
    _followed_until_killed(sleeper, "1000")


def _followed_until_killed(launcher: subprocess.Popen, boottime: str) -> None:
    """A follower of ``launcher`` in a time namespace of boot-time offset ``boottime`` runs
    on while the launcher runs, and is SIGTERMed once it is killed."""
    env = {**ENV, "DISTCONV_LAUNCHER": _identity_of(launcher.pid)}
    proc = subprocess.Popen(
        ["unshare", "--time", "--boottime", boottime, sys.executable, "-c", _FOLLOWS],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with _killed_after(launcher, proc):
        assert proc.stdout.readline().strip() == "True", proc.stderr.read()
        time.sleep(SEVERAL_LOOKS)  # followed while it runs
        assert proc.poll() is None, proc.stderr.read()
        launcher.kill()
        launcher.wait()
        assert proc.wait(timeout=10) == -signal.SIGTERM
        said = proc.stderr.read()
        assert "has ended" in said and "cannot see" not in said, said


@pytest.mark.timeout(30)
@pytest.mark.parametrize("boottime", ["1000", "-1"])
def test_an_earlier_process_on_the_launchers_pid_read_on_another_clock_stops_the_follower(
    boottime,
):
    """The launcher ended, and a process that began before this one took its pid: a follower
    in a time namespace of another boot-time offset took it for the launcher read on its own
    clock and followed it, training on, orphaned, as long as it ran. Taken back
    by the two offsets, its start is a second after the launcher's: another process, even
    where it reads here as the launcher's start written (an offset of -1 s)."""
    if not shutil.which("unshare") or not _can_unshare("--time"):
        pytest.skip("needs time namespaces")
    later = subprocess.Popen(["sleep", "30"])
    _sleeping(later)
    wrap = ["unshare", "--time", "--boottime", boottime]
    _stopped_by_a_later_process(later, os.sysconf("SC_CLK_TCK"), wrap)


def _stopped_by_a_later_process(later: subprocess.Popen, back: int, wrap: list[str]) -> str:
    """A follower run under ``wrap``, naming ``later``'s pid with a start ``back`` ticks
    before its own (the launcher's, written before ``later`` took the pid), stops at once
    and leaves ``later`` running. Returns what it said on stderr."""
    *where, pid, start = _identity_of(later.pid).split(" ")
    env = {**ENV, "DISTCONV_LAUNCHER": " ".join([*where, pid, str(int(start) - back)])}
    proc = subprocess.Popen(
        [*wrap, sys.executable, "-c", _FOLLOW_STOPPED_AT_ONCE],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    with _killed_after(later, proc):
        assert proc.stdout.readline().strip() == "True", proc.stderr.read()
        assert proc.wait(timeout=10) == -signal.SIGTERM
        said = proc.stderr.read()
        assert "has ended" in said, said
        assert later.poll() is None  # the later process is not the follower's to stop
    return said


@pytest.mark.timeout(30)
def test_a_launcher_that_began_before_the_followers_clock_zero_is_followed():
    """A process in a time namespace whose boot-time offset is below minus the launcher's
    start reads that start wrapped to a huge unsigned value: it took the running launcher for
    a later process on its pid and SIGTERMed itself at once. It follows it."""
    if not shutil.which("unshare") or not _can_unshare("--time"):
        pytest.skip("needs time namespaces")
    sleeper = _sleeping(subprocess.Popen(["sleep", "30"]))
    zero = int(_identity_of(sleeper.pid).split(" ")[3]) // os.sysconf("SC_CLK_TCK") + 1
    # the clock's zero just after its start can be set once now + offset >= 0: the next
    # whole second of the boot clock (a fixed 1.2 s pause waited the worst case every time)
    while float(Path("/proc/uptime").read_text().split()[0]) < zero + 0.05:
        time.sleep(0.02)
    _followed_until_killed(sleeper, str(-zero))  # before it


@pytest.mark.timeout(30)
def test_a_later_process_on_the_launchers_pid_stops_the_follower():
    """The launcher ended and a later process took its pid before a process it started
    through a script looked: that process took the later one for the launcher hidden from it
    (another time namespace's clock), logged 'cannot see the launcher' and trained on,
    orphaned, where before that check it stopped at once. The later process stands in as a
    ``sleep`` named with an earlier start time than its own: the start the launcher wrote."""
    later = subprocess.Popen(["sleep", "30"])
    _sleeping(later)
    assert int(_identity_of(later.pid).split(" ")[3]) > 0
    said = _stopped_by_a_later_process(later, 1, [])
    assert "the launcher (pid" in said and "cannot see the launcher" not in said, said


@pytest.mark.timeout(30)
def test_a_later_process_of_another_user_that_began_first_stops_the_follower():
    """The launcher ended before a process its script started began, and another user's
    process took its pid first: a follower that may not ptrace it (root without capabilities,
    or another user) cannot read its time namespace, took it for the launcher on another clock
    and followed it, training on, orphaned, as long as it ran. Its boot-time
    offset, which anyone may read, is this one's: on this clock, a later process."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv")
    later = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "sleep", "30"])  # fmt: skip
    _sleeping(later)
    wrap = ["setpriv", "--regid=65534", "--clear-groups", "--bounding-set=-all",
            "--inh-caps=-all"]  # fmt: skip
    _stopped_by_a_later_process(later, 1, wrap)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("named", ["its own start", "an earlier start"])
def test_a_follower_in_another_time_namespace_of_the_same_offset_reads_on_one_clock(named):
    """A follower in a time namespace of its own with this one's boot-time offset
    (``unshare --time`` alone) took every process of another namespace for one read on
    another clock: it followed a later process that took the launcher's pid before it
    began, training on, orphaned, as long as that one ran. The offsets say
    the clock is one: a start other than the named one is a later process, and stops it;
    the launcher's own is followed while it runs."""
    if not shutil.which("unshare") or not _can_unshare("--time"):
        pytest.skip("needs time namespaces")
    sleeper = subprocess.Popen(["sleep", "30"])
    _sleeping(sleeper)
    *where, pid, start = _identity_of(sleeper.pid).split(" ")
    start = start if named == "its own start" else str(int(start) - 1)
    env = {**ENV, "DISTCONV_LAUNCHER": " ".join([*where, pid, start])}
    proc = subprocess.Popen(
        ["unshare", "--time", sys.executable, "-c", _FOLLOW_STOPPED_AT_ONCE],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    with _killed_after(sleeper, proc):
        assert proc.stdout.readline().strip() == "True", proc.stderr.read()
        if named == "its own start":
            time.sleep(SEVERAL_LOOKS)  # followed while it runs
            assert proc.poll() is None, proc.stderr.read()
            sleeper.kill()
            sleeper.wait()
        assert proc.wait(timeout=10) == -signal.SIGTERM
        assert "has ended" in proc.stderr.read()
        if named == "an earlier start":
            assert sleeper.poll() is None  # the later process is not the follower's to stop


@pytest.mark.timeout(30)
def test_a_later_process_of_another_time_namespace_on_the_launchers_pid_stops_the_follower(
    tmp_path,
):
    """The launcher ended and a process in another time namespace (or of another user) took
    its pid after this one started: d92ce8e followed a later process of this one's time
    namespace only, so this one took it for the launcher hidden, logged 'cannot see the
    launcher' and trained on, orphaned. /proc shows both start times
    on this one's clock: the later one began after it, so it is no launcher."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    named = tmp_path / "launcher"
    code = (
        "import os, time\n"
        f"path = {str(named)!r}\n"
        "while not os.path.exists(path + '.done'): time.sleep(0.05)\n"
        "os.environ['DISTCONV_LAUNCHER'] = open(path).read()\n"
        f"{_FOLLOW_STOPPED_AT_ONCE}"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    time.sleep(0.5)  # the follower has begun: the later process starts after it
    later = subprocess.Popen(["unshare", "--time", "--boottime", "1000", "sleep", "30"])
    with _killed_after(later, proc):
        _sleeping(later)  # in its time namespace
        if os.readlink(f"/proc/{later.pid}/ns/time") == os.readlink("/proc/self/ns/time"):
            pytest.skip("unshare --time made no time namespace")
        *where, pid, start = _identity_of(later.pid).split(" ")
        named.write_text(" ".join([*where, pid, str(int(start) - 1)]))  # the launcher's start
        (tmp_path / "launcher.done").write_text("")
        assert proc.stdout.readline().strip() == "True", proc.stderr.read()
        assert proc.wait(timeout=10) == -signal.SIGTERM
        said = proc.stderr.read()
        assert "has ended" in said and "cannot see the launcher" not in said, said
        assert later.poll() is None  # the later process is not the follower's to stop


#: a program printing ``process_identity()`` of process ``argv[1]``, as a launcher writes it
_NAME_LAUNCHER = (
    "import sys; from distconv.procfs import pid_namespace as n; "
    "print(*n(), sys.argv[1], "
    "open(f'/proc/{sys.argv[1]}/stat').read().rsplit(')', 1)[1].split()[19])"
)


def _in_own_pid_namespace(script: str, follower: str) -> subprocess.CompletedProcess:
    """``sh -c script`` as root of a PID and mount namespace of its own, with ``$1`` the
    program that names a launcher (:data:`_NAME_LAUNCHER`) and ``$2`` the follower's. The
    namespace ends with ``unshare`` (``--kill-child``): at the timeout, killing ``unshare``
    alone left the script and every process in it running. A script that gave up waiting
    (:func:`_until`) fails the test here, naming the wait, before any skip can take it for
    an unfit host."""
    done = subprocess.run(
        ["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", script, "sh",
         _NAME_LAUNCHER, follower],
        env=ENV, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode != _GAVE_UP, (done.stdout, done.stderr)
    return done


def _still_training_after(seconds: float, looked: Path, go_on: Path | None = None) -> str:
    """A follower's program: says whether it follows, creates ``looked`` once its first look
    at the launcher is done, and says ``still training`` ``seconds`` after ``go_on`` appears
    (at once without one) unless stopped. Scripts wait for ``looked``: a fixed 2 s pause for
    "more than a look's interval" waited for time, not for the look."""
    wait = f"while not os.path.exists({str(go_on)!r}):\n    time.sleep(0.01)\n" if go_on else ""
    return (
        "import os, time\n"
        f"{_FAST_LOOKS}"
        "first_look = _env._first_look\n"
        "def looking(*args):\n"
        "    try:\n"
        "        return first_look(*args)\n"
        "    finally:\n"
        f"        open({str(looked)!r}, 'w').close()\n"
        "_env._first_look = looking\n"
        "print('following', _env.stop_with_launcher() is not None, flush=True)\n"
        f"{wait}"
        f"time.sleep({seconds})\n"
        "print('still training', flush=True)\n"
    )


#: the exit status of a script that gave up a wait (:func:`_until`)
_GAVE_UP = 97


def _until(condition: str, failure: str, tries: int = 1000) -> str:
    """A shell loop until ``condition`` holds, 0.01 s between tries. After ``tries`` (10 s or
    more) the script says ``failure`` on stderr and exits :data:`_GAVE_UP`: an unbounded loop
    held the namespace's init, and with it the test's processes, after the test had timed
    out, and a follower that never looked passed the hidden-later test as a skip."""
    return (
        f"n=0; until {condition}; do n=$((n + 1)); if [ $n -ge {tries} ]; then "
        f'echo "{failure}" >&2; exit {_GAVE_UP}; fi; sleep 0.01; done\n'
    )


#: a shell loop until process $L has exec'd ``sleep`` (a wrapper changed its user first)
_UNTIL_L_SLEEPS = _until('[ "$(cat /proc/$L/comm)" = sleep ]', "process $L never ran sleep")


def _until_exists(path: Path) -> str:
    """A shell loop until ``path`` exists (see :func:`_until`)."""
    return _until(f"[ -e {path} ]", f"{path} never appeared")


@pytest.mark.timeout(40)
def test_a_launcher_hidden_after_the_first_look_is_not_taken_for_ended(tmp_path):
    """The launcher (another user's) was seen at the first look, then ``/proc`` hid it
    (remounted ``hidepid=2``; a process that gives up its user or capabilities alike): its
    missing entry was taken for its end, and the follower SIGTERMed itself while the launcher
    ran on. ``kill(pid, 0)`` says it is there: no news."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not _can_unshare("--mount", "--pid"):
        pytest.skip("needs root, setpriv, and mount and PID namespaces")
    looked, hidden = tmp_path / "looked", tmp_path / "hidden"
    follower = _still_training_after(SEVERAL_LOOKS, looked, go_on=hidden)
    script = (
        "mount -t proc proc /proc\n"
        "setpriv --reuid=65534 --regid=65534 --clear-groups sleep 30 & L=$!\n"
        f"{_UNTIL_L_SLEEPS}"  # nobody's by now
        f'export DISTCONV_LAUNCHER="$({sys.executable} -c "$1" $L)"\n'
        # root without capabilities or group 0: hidepid=2 hides nobody's process from it
        "setpriv --regid=65534 --clear-groups --bounding-set=-all --inh-caps=-all "
        f'{sys.executable} -c "$2" & F=$!\n'
        f"{_until_exists(looked)}"  # followed, and looked at as seen
        f"mount -o remount,hidepid=2 /proc; touch {hidden}\n"
        "wait $F; echo follower $?; kill -0 $L && echo launcher runs\n"
    )
    done = _in_own_pid_namespace(script, follower)
    assert "following True" in done.stdout, (done.stdout, done.stderr)
    assert "launcher runs" in done.stdout, (done.stdout, done.stderr)
    assert "still training\nfollower 0\n" in done.stdout, (done.stdout, done.stderr)
    assert "has ended" not in done.stderr, done.stderr


@pytest.mark.timeout(40)
def test_a_hidden_later_process_on_the_followed_pid_stops_the_follower(tmp_path):
    """The launcher, seen at the first look, was killed and another user's process took its
    pid, which ``/proc`` mounted ``hidepid=2`` hides from the follower: ``kill(pid, 0)`` found
    it there, the follower took it for the launcher hidden and trained on as long as it ran.
    It follows the process it looked at, not the pid. A PID namespace of its
    own makes the pid's reuse certain (``ns_last_pid``)."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not _can_unshare("--mount", "--pid"):
        pytest.skip("needs root, setpriv, and mount and PID namespaces")
    if not _can_open_pidfd():  # the looks then read /proc, which cannot tell
        pytest.skip("needs pidfd_open: Linux 5.3, and a seccomp profile that allows it")
    looked = tmp_path / "looked"
    follower = _still_training_after(15, looked)  # stopped long before, unless it follows X
    script = (
        "mount -t proc proc /proc\n"
        # root without capabilities, group nobody: sees a process of its own credentials only
        "C='setpriv --regid=65534 --clear-groups --bounding-set=-all --inh-caps=-all'\n"
        "$C sleep 30 & L=$!\n"
        f"{_UNTIL_L_SLEEPS}"
        f'export DISTCONV_LAUNCHER="$({sys.executable} -c "$1" $L)"\n'
        "mount -o remount,hidepid=2 /proc\n"
        f'$C {sys.executable} -c "$2" & F=$!\n'
        f"{_until_exists(looked)}"  # followed, and looked at as seen
        "kill -9 $L; wait $L\n"
        "echo $((L - 1)) > /proc/sys/kernel/ns_last_pid\n"
        "setpriv --reuid=65534 --regid=65534 --clear-groups sleep 30 & X=$!\n"
        '[ "$X" = "$L" ] && echo pid taken\n'
        "wait $F; echo follower $?; kill $X\n"
    )
    done = _in_own_pid_namespace(script, follower)
    assert "following True" in done.stdout, (done.stdout, done.stderr)
    if "pid taken" not in done.stdout:
        pytest.skip(f"the launcher's pid was not reused: {done.stdout}")
    assert f"follower {128 + signal.SIGTERM}" in done.stdout, (done.stdout, done.stderr)
    assert "has ended" in done.stderr, done.stderr


@pytest.mark.timeout(60)
def test_a_child_whose_launcher_died_before_its_exec_never_runs():
    """A launcher gone before its child's prctl: the child's SIGTERM to itself ran the
    supervisor's inherited handler, which only records it, and the program started orphaned."""
    script = """if True:
        import os, signal, subprocess
        from launcher import process_group
        signal.signal(signal.SIGTERM, lambda signum, frame: None)  # as Supervisor._on_signal
        own = os.getpid
        os.getpid = lambda: 1  # the launcher the child checks for is not its parent: gone
        preexec = process_group.parent_death_signal()
        os.getpid = own
        done = subprocess.run(["sh", "-c", "echo started"], preexec_fn=preexec,
                              capture_output=True, text=True)
        print(done.returncode, repr(done.stdout))
        """
    done = subprocess.run(
        [sys.executable, "-c", script], env=ENV, capture_output=True, text=True, timeout=30
    )
    assert done.stdout.split(maxsplit=1) == [str(-signal.SIGTERM), "''\n"], done.stderr
