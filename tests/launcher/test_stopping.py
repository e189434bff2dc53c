"""How the launcher stops a job, with real processes and real signals: every process of a
child's group gets the grace period, workers before servers, whichever signal or failure began
the stop; and what it reports when a stop and a failure meet."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from test_supervision import ENV, alive, launch_argv, launch_workers, wait_for

from launcher.child import Child
from launcher.second_signal import REPEAT_SECONDS
from launcher.supervisor import ChildSpec, Supervisor
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import launcher_command
from tests.processes import job_env, job_left, kill_job, run_job

#: a process that writes ARGV[1].up once its handler is in place, and on SIGTERM writes
#: ARGV[1].term, "checkpoints" for ARGV[2] s, then writes ARGV[1].done and exits 0
CHECKPOINTS = textwrap.dedent(
    """
    import pathlib, signal, sys, time
    out = pathlib.Path(sys.argv[1])
    def on_term(*_):
        out.with_suffix(".term").write_text("")
        time.sleep(float(sys.argv[2]))
        out.with_suffix(".done").write_text(repr(time.time()))
        sys.exit(0)
    signal.signal(signal.SIGTERM, on_term)
    out.with_suffix(".up").write_text("")
    while True:
        time.sleep(0.05)
    """
)


def checkpointing(tmp_path: Path, name: str, seconds: float) -> list[str]:
    script = tmp_path / "checkpoints.py"
    script.write_text(CHECKPOINTS)
    return [sys.executable, str(script), str(tmp_path / name), str(seconds)]


def until_up(tmp_path: Path, name: str) -> str:
    """A shell loop that waits until the child ``name`` has its SIGTERM handler in place."""
    return f"while [ ! -e {tmp_path / (name + '.up')} ]; do sleep 0.05; done"


def done_at(tmp_path: Path, name: str) -> float | None:
    path = tmp_path / f"{name}.done"
    return float(path.read_text()) if path.exists() else None


def signal_once_up(tmp_path: Path, events: list[str], *signals: tuple[float, int]) -> None:
    """Send each ``(seconds, signum)`` to this process (the launcher's) that many seconds
    after the files ``events`` exist in ``tmp_path`` (``<name>.up``: the child ``name`` has
    its SIGTERM handler in place; ``<name>.term``: it got its SIGTERM), or once
    :func:`wait_for` gives up on them (said on stderr): a test then fails on what the signals
    ended, not at its own timeout with its children still running."""

    def send() -> None:
        try:
            wait_for([tmp_path / event for event in events])
        except AssertionError as gave_up:
            print(f"signalling all the same: {gave_up}", file=sys.stderr, flush=True)
        began = time.monotonic()
        for seconds, signum in signals:
            time.sleep(max(0.0, began + seconds - time.monotonic()))
            os.kill(os.getpid(), signum)

    threading.Thread(target=send, daemon=True).start()


def supervise(
    tmp_path: Path,
    specs: list[ChildSpec],
    grace: float = 20,
    signal_at=None,
    out=None,
    poll=0.05,
    shared: bool = False,
):
    """Run ``specs`` under a real :class:`Supervisor`, its messages captured; ``signal_at``:
    ``(events, seconds, signum)``, see :func:`signal_once_up`; ``out``: the children's lines'
    stream (default: discarded; ``shared``: the messages' own, ``2>&1``)."""
    err_r, err_w = os.pipe()
    err = os.fdopen(err_w, "wb")
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(os.fdopen(err_r, "rb")), daemon=True)
    reader.start()
    if signal_at is not None:
        signal_once_up(tmp_path, signal_at[0], signal_at[1:])
    with open(os.devnull, "wb") as devnull:
        supervisor = Supervisor(
            tmp_path / "run", grace, err if shared else out or devnull, err, poll
        )
        status = supervisor.run(lambda r: specs)
    err.close()
    reader.join(5)
    return status, b"".join(lines).decode()


@pytest.mark.timeout(60)
def test_a_wrapper_that_exits_at_once_leaves_the_trainer_its_grace(tmp_path):
    """The group's leader (a shell script) dies on SIGTERM; its child checkpoints for 1.5 s."""
    run = tmp_path / "run"
    command = " ".join(checkpointing(tmp_path, "w", 1.5))
    argv = launch_argv(run, "--workers", "1", "--servers", "0", "--grace", "30", "--")
    with job_env(ENV) as env:  # a hung launcher's trainer (a loop) goes with it
        launcher = subprocess.Popen(
            [*argv, "sh", "-c", f"{command}; echo after"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for([tmp_path / "w.up"])
            launcher.send_signal(signal.SIGTERM)
            _, stderr = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 143, stderr
    assert done_at(tmp_path, "w") is not None, "the trainer was killed before its checkpoint"


@pytest.mark.timeout(60)
def test_servers_serve_until_the_workers_have_stopped(tmp_path):
    specs = [
        ChildSpec("server", 0, checkpointing(tmp_path, "s", 0)),
        ChildSpec("worker", 0, checkpointing(tmp_path, "w", 1.0)),
    ]
    status, said = supervise(tmp_path, specs, signal_at=(["s.up", "w.up"], 0.3, signal.SIGTERM))
    assert status == 143, said
    worker, server = done_at(tmp_path, "w"), done_at(tmp_path, "s")
    assert worker is not None and server is not None, said
    assert server >= worker, "the server was stopped before the worker had checkpointed"


@pytest.mark.timeout(60)
def test_a_server_that_exits_while_workers_run_fails_the_attempt(tmp_path):
    """A shard stops with 0 on SIGTERM; the workers would wait for it until their timeout."""
    specs = [
        ChildSpec("server", 0, ["sh", "-c", "sleep 0.5; exit 0"]),
        ChildSpec("worker", 0, ["sleep", "30"]),
    ]
    began = time.monotonic()
    status, said = supervise(tmp_path, specs, grace=5)
    assert time.monotonic() - began < 10
    assert status == 1
    assert "server 0 exited (code 0) while workers were running" in said
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("server", 0, 0)


@pytest.mark.timeout(60)
def test_a_server_may_stop_once_the_workers_are_done(tmp_path):
    specs = [
        ChildSpec("server", 0, ["sleep", "30"]),
        ChildSpec("worker", 0, ["sh", "-c", "sleep 0.3"]),
    ]
    assert supervise(tmp_path, specs, grace=5)[0] == 0


@pytest.mark.timeout(60)
def test_a_signal_while_a_failed_attempt_stops_keeps_the_grace_and_the_report(tmp_path):
    """Worker 1 fails; worker 0 checkpoints for 2 s; a scheduler's SIGTERM lands meanwhile."""
    specs = [
        ChildSpec("worker", 0, checkpointing(tmp_path, "w", 2.0)),
        ChildSpec("worker", 1, ["sh", "-c", f"{until_up(tmp_path, 'w')}; echo giving up; exit 3"]),
    ]
    # worker 0 checkpoints from the failure on, for 2 s: the signal lands 0.2 s into that (1 s
    # after w.up raced the failure's notice and the checkpoint on a loaded host)
    status, said = supervise(tmp_path, specs, signal_at=(["w.term"], 0.2, signal.SIGTERM))
    assert status == 143, said
    assert done_at(tmp_path, "w") is not None, "worker 0 was killed in its checkpoint"
    assert "worker 1 failed with exit code 3 (after 0 restart(s)); then stopped by SIGTERM" in said
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["rank"], report["exit_code"], report["then"]) == (1, 3, "stopped by SIGTERM")
    assert report["tail"] == ["giving up"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shared", [False, True], ids=["own stderr", "2>&1"])
def test_a_second_signal_kills_at_once(tmp_path, shared):
    specs = [ChildSpec("worker", 0, checkpointing(tmp_path, "w", 30))]
    # past the window in which a signal repeats the first stop: no terminal here to make it a
    # person's Ctrl-C (test_launch_repeated_stop has one)
    again = 0.3 + REPEAT_SECONDS + 0.5
    signal_once_up(tmp_path, ["w.up"], (0.3, signal.SIGINT), (again, signal.SIGINT))
    began = time.monotonic()
    status, said = supervise(tmp_path, specs, grace=30, shared=shared)
    assert status == 130 and time.monotonic() - began < 10
    assert done_at(tmp_path, "w") is None
    # the kill is said, naming whom it hit (it was silent, the stop read as clean)
    assert "got SIGINT during the stop: worker-0 killed without the rest of the grace" in said
    # its last words, queued just before the end, on a stderr read at once: the second signal
    # cut the end's wait for them before the writer took them: dropped from a queue of
    # their own (every time), or left to the children's (2>&1) as the launcher ended (at times:
    # test_launch_second_signal_slow_stderr checks that one in-process, every time)
    assert said.endswith("distconv-launch: stopped by SIGINT\n"), said


@pytest.mark.timeout(60)
def test_a_child_killed_at_the_graces_end_is_named(tmp_path):
    """A SIGKILL at the grace's end is said, naming whom it hit: never a silent kill."""
    specs = [
        ChildSpec("worker", 0, checkpointing(tmp_path, "w", 30)),
        ChildSpec("worker", 1, ["sh", "-c", f"{until_up(tmp_path, 'w')}; exit 3"]),
    ]
    status, said = supervise(tmp_path, specs, grace=1)
    assert status == 3, said
    assert "worker-0 still running 1 s after SIGTERM: killed" in said
    assert done_at(tmp_path, "w") is None


def _signal_once_stopped(pid_file: Path, signum: int, limit: float = 30) -> dict[str, bool]:
    """Send ``signum`` to this process (the launcher's) once the child whose pid is in
    ``pid_file`` is stopped (state ``T``), or ``limit`` seconds on; the dict returned holds
    ``stopped``: whether it was, once the signal is sent."""
    seen: dict[str, bool] = {}

    def send() -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            text = pid_file.read_text() if pid_file.exists() else ""
            if text.strip().isdigit() and _state(int(text)) == "T":
                seen["stopped"] = True
                break
            time.sleep(0.01)
        else:
            seen["stopped"] = False
        os.kill(os.getpid(), signum)

    threading.Thread(target=send, daemon=True).start()
    return seen


@pytest.mark.timeout(60)
def test_a_stopped_child_gets_its_sigterm_and_its_grace(tmp_path):
    """A child stopped (SIGSTOP, Ctrl-Z) holds a SIGTERM pending until it runs again: without
    a SIGCONT after it, as a shell's ``kill`` sends a stopped job, it sat out the whole grace
    and was killed without its checkpoint."""
    script, pid_file = tmp_path / "stops_itself.py", tmp_path / "w.pid"
    stop_itself = f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
    stop_itself += "os.kill(os.getpid(), signal.SIGSTOP)\n"
    script.write_text(
        CHECKPOINTS.replace("import ", "import os, ", 1).replace(
            "while True:", f"{stop_itself}while True:"
        )
    )
    specs = [ChildSpec("worker", 0, [sys.executable, str(script), str(tmp_path / "w"), "0.2"])]
    # the signal lands once the child is stopped: a fixed 0.5 s after w.up could land before
    # its SIGSTOP on a loaded host, and the test then passed without a stopped child
    seen = _signal_once_stopped(pid_file, signal.SIGTERM)
    status, said = supervise(tmp_path, specs, grace=5)
    assert seen.get("stopped"), f"the child was not stopped when the signal landed: {seen}"
    assert status == 143, said
    assert "still running" not in said
    assert done_at(tmp_path, "w") is not None, said


@pytest.mark.timeout(60)
def test_a_server_killed_at_the_graces_end_is_said_with_the_time_it_had(tmp_path):
    """Workers that use the whole grace leave the server none: its SIGTERM comes at the
    grace's end, and the line says so, not that it ignored a SIGTERM for the whole grace."""
    specs = [
        ChildSpec("server", 0, checkpointing(tmp_path, "s", 30)),
        ChildSpec("worker", 0, checkpointing(tmp_path, "w", 30)),
    ]
    signal_at = (["s.up", "w.up"], 0.2, signal.SIGTERM)
    status, said = supervise(tmp_path, specs, grace=1, signal_at=signal_at)
    assert status == 143, said
    assert "worker-0 still running 1 s after SIGTERM, server-0 still running 0 s after" in said
    assert "server-0 still running 1 s" not in said


@pytest.mark.timeout(60)
def test_a_closed_terminal_still_gives_the_children_their_grace(tmp_path):
    """The launcher's stderr is gone (a hung-up terminal): its messages fail, its job stops."""
    specs = [ChildSpec("worker", 0, checkpointing(tmp_path, "w", 1.0))]
    err_r, err_w = os.pipe()
    os.close(err_r)  # every write to err now fails with EPIPE, as one to a hung-up tty does
    signal_once_up(tmp_path, ["w.up"], (0.3, signal.SIGHUP))
    with open(os.devnull, "wb") as out, os.fdopen(err_w, "wb", buffering=0) as err:
        status = Supervisor(tmp_path / "run", grace=20, out=out, err=err).run(lambda r: specs)
    assert status == 129
    assert done_at(tmp_path, "w") is not None


@pytest.mark.timeout(60)
def test_under_nohup_a_hangup_does_not_stop_the_job(tmp_path):
    run, started, hung_up = tmp_path / "run", tmp_path / "started", tmp_path / "hung-up"
    # the hangup lands while the job runs (a fixed 1 s pause could land in the launcher's own
    # start-up on a loaded host), and the job ends once the launcher has had time to act on it
    job = f"touch {started}; until [ -e {hung_up} ]; do sleep 0.01; done; echo ok"
    with job_env(ENV) as env:  # and what is left of the job goes at the block's end
        launcher = subprocess.Popen(
            launch_argv(run, "--workers", "1", "--servers", "0", "--", "sh", "-c", job),
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # what nohup does
        )  # fmt: skip
        try:
            wait_for([started])
            launcher.send_signal(signal.SIGHUP)
            time.sleep(0.5)  # many of the launcher's looks (0.05 s): a stop would have begun
            hung_up.touch()
            stdout, stderr = launcher.communicate(timeout=30)
        finally:
            hung_up.touch()  # also where a check gave up: the job's loop ends, not only its parent
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 0, stderr
    assert stdout == "[worker 0] ok\n"


@pytest.mark.timeout(30)
def test_a_real_time_signal_is_reported_by_its_name(tmp_path):
    run = tmp_path / "run"
    done = launch_workers(run, 1, "sh", "-c", "kill -40 $$")
    name = f"SIGRTMIN+{40 - signal.SIGRTMIN}"
    assert done.returncode == 128 + 40, done.stderr
    assert f"worker 0 failed with signal {name}" in done.stderr
    report = json.loads((run / "failure.json").read_text())
    assert (report["signal"], report["signal_number"]) == (name, 40)


@pytest.mark.timeout(60)
def test_a_process_that_left_its_group_does_not_hold_the_launcher(tmp_path):
    """It keeps the output pipe open; the job is done, the launcher says so and goes."""
    run, pid_file = tmp_path / "run", tmp_path / "stray.pid"
    # the worker ends once the stray has left the group (setsid has exec'd its shell, which
    # writes the file): a fixed 1 s pause raced setsid on a loaded host, and the group's
    # SIGKILL took a stray still in it
    stray_sh = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 40"
    # (at most 1000 looks, 10 s or more: a stray that never writes, setsid failing, left the
    # worker looping for ever after the test, and the launcher waiting on it to the timeout)
    worker = (
        f"setsid sh -c '{stray_sh}' & n=0; until [ -e {pid_file} ]; do n=$((n + 1)); "
        "[ $n -lt 1000 ] || exit 97; sleep 0.01; done"
    )
    argv = launch_argv(run, "--workers", "1", "--servers", "0", "--", "sh", "-c", worker)
    assert argv[:3] == launcher_command()
    # the wait for a child's output after its group is gone cut to 1 s (the product's 5 s)
    argv[:3] = launcher_command(OUTPUT_DRAIN_SECONDS=1.0)
    began = time.monotonic()
    done = run_job(argv, env=ENV, timeout=40, cwd=tmp_path)  # a hang kills the stray too
    took = time.monotonic() - began
    if not pid_file.exists():
        pytest.fail(f"the stray never wrote its pid:\n{done.stderr}")
    stray = int(pid_file.read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert took < 30
        assert "worker-0: a process that left its process group" in done.stderr
        assert alive(stray), "the stray was stopped: it never left the group"
    finally:
        if alive(stray):
            os.kill(stray, signal.SIGKILL)


@pytest.mark.timeout(30)
def test_a_child_whose_log_cannot_be_opened_never_starts(tmp_path):
    run = tmp_path / "run"
    (run / "logs" / "worker-0.log").mkdir(parents=True)
    started = tmp_path / "started"
    done = launch_workers(run, 1, "sh", "-c", f"touch {started}; sleep 30")
    try:
        assert done.returncode == 1
        log = run / "logs" / "worker-0.log"
        assert f"cannot start worker-0: its log '{log}': is a directory" in done.stderr
        # the launcher is gone: once no process of its job is left, none can start the child
        # any more (a fixed 0.5 s pause missed a child that started, or ran, late)
        assert job_left(done.env, 10) == {}
        assert not started.exists()
    finally:
        kill_job(done.env)


@pytest.mark.timeout(30)
def test_a_successful_launch_removes_the_report_of_a_failed_one(tmp_path):
    run = tmp_path / "run"
    assert launch_workers(run, 1, "sh", "-c", "exit 3").returncode == 3
    assert (run / "failure.json").exists()
    assert launch_workers(run, 1, "true").returncode == 0
    assert not (run / "failure.json").exists()


@pytest.mark.timeout(30)
def test_a_childs_log_has_each_line_as_it_comes(tmp_path):
    """Not at the end only: a launcher killed with -9 leaves whole logs behind."""
    run = tmp_path / "run"
    job = ("--workers", "1", "--servers", "0", "--", "sh", "-c", "echo 1st; sleep 30")
    log = run / "logs" / "worker-0.log"
    with job_env(ENV) as env:  # the job goes also where the launcher hangs on the SIGTERM
        launcher = subprocess.Popen(
            launch_argv(run, *job),
            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 15
            while not (log.exists() and logged(log) == b"1st\n"):
                assert time.monotonic() < deadline, "the line never reached the log"
                time.sleep(0.05)
        finally:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(timeout=20)
            finally:
                launcher.kill()
                launcher.wait()


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def _reuse_pid(pid: int) -> subprocess.Popen | None:
    """An unrelated session leader (another job's child) given ``pid``, where the kernel lets
    this process choose the next pid (``ns_last_pid``: root); None where it does not."""
    for _ in range(50):
        try:
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


@pytest.mark.timeout(60)
def test_an_exited_leaders_pid_stays_the_jobs_until_the_attempt_ends(tmp_path):
    """Worker 0 exits at once, worker 1 runs on: worker 0's pid (its group's id) is held as a
    zombie, so no later process group can get it and be signalled by the stop."""
    specs = [
        ChildSpec("worker", 0, ["sh", "-c", "echo $$"]),
        ChildSpec("worker", 1, ["sleep", "3"]),
    ]
    log, seen, stranger = tmp_path / "run" / "logs" / "worker-0.log", [], {}

    def look() -> None:
        while not (log.exists() and log.read_text().strip()):
            time.sleep(0.01)
        pid = int(log.read_text())
        time.sleep(1.0)  # worker 0 is long gone, worker 1 still sleeps
        seen.append(_state(pid))
        stranger["proc"] = _reuse_pid(pid)

    watcher = threading.Thread(target=look)
    watcher.start()
    status, said = supervise(tmp_path, specs, grace=10)
    watcher.join()
    assert status == 0, said
    assert seen == ["Z"], "the exited leader's pid was given back during the attempt"
    proc = stranger.get("proc")
    if proc is not None:  # the kernel gave it out anyway: it must not be the job's to kill
        try:
            assert proc.poll() is None, "the stop signalled a process group not the job's"
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(60)
def test_a_failure_just_before_a_signal_is_still_reported(tmp_path):
    """Both land between two looks at the children (at 0 and 0.6 s): the failure came first.
    The worker's leader exits 3 at 0.3 s, and what it leaves in its group signals the launcher
    50 ms later (which also keeps the stop waiting until that signal is in)."""
    fail = f"trap '' TERM; sleep 0.3; (sleep 0.05; kill -TERM {os.getpid()}) & exit 3"
    specs = [ChildSpec("worker", 0, ["sh", "-c", fail])]
    status, said = supervise(tmp_path, specs, poll=0.6)
    assert status == 143, said
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["rank"], report["exit_code"], report["then"]) == (0, 3, "stopped by SIGTERM")


@pytest.mark.timeout(60)
def test_a_signal_after_the_job_finished_leaves_it_a_success(tmp_path):
    """The workers are done; the signal lands while the server writes its part on the way out."""
    finish = f"{until_up(tmp_path, 's')}; touch {tmp_path / 'w.up'}"
    specs = [
        ChildSpec("server", 0, checkpointing(tmp_path, "s", 1.5)),
        # the worker finishes once the server is up (its SIGTERM handler in place)
        ChildSpec("worker", 0, ["sh", "-c", finish]),
    ]
    status, said = supervise(tmp_path, specs, signal_at=(["s.up", "w.up"], 0.8, signal.SIGTERM))
    assert status == 0, said
    assert "got SIGTERM after the job had finished" in said
    assert done_at(tmp_path, "s") is not None  # the server had its grace


@pytest.mark.timeout(90)
def test_a_stalled_reader_of_the_output_does_not_hold_up_the_stop(tmp_path, monkeypatch):
    """Nobody reads the launcher's stdout (a hung log shipper): the children still get their
    SIGTERM and grace, and the launcher ends."""
    monkeypatch.setattr("launcher.child.OUTPUT_DRAIN_SECONDS", 1.0)  # the wait for the pump
    script = tmp_path / "loud.py"
    script.write_text("print('x' * 200_000, flush=True)\n" + CHECKPOINTS)
    specs = [ChildSpec("worker", 0, [sys.executable, str(script), str(tmp_path / "w"), "0.5"])]
    out_r, out_w = os.pipe()
    out = os.fdopen(out_w, "wb", buffering=0)
    unstall = threading.Timer(45, os.close, (out_r,))  # lets a blocked pump go, at worst
    unstall.start()
    began = time.monotonic()
    try:
        status, said = supervise(tmp_path, specs, 10, (["w.up"], 0.5, signal.SIGTERM), out)
        took = time.monotonic() - began
    finally:
        unstall.cancel()
        unstall.join()
        try:
            os.close(out_r)
        except OSError:  # the timer closed it
            pass
        out.close()
    assert took < 40, "the stop waited for the stalled reader"
    assert status == 143, said
    assert done_at(tmp_path, "w") is not None, "the child never got its SIGTERM"


@pytest.mark.timeout(60)
def test_a_signal_just_after_the_workers_finished_leaves_it_a_success(tmp_path):
    """Both land between two looks at the children (at 0 and 0.6 s): the job finished first.
    The worker's leader exits at 0.3 s, and what it leaves in its group signals the launcher
    50 ms later (which also keeps the stop waiting until that signal is in)."""
    later = f"trap '' TERM; sleep 0.3; (sleep 0.05; kill -TERM {os.getpid()}) & exit 0"
    specs = [ChildSpec("worker", 0, ["sh", "-c", later])]
    status, said = supervise(tmp_path, specs, poll=0.6)
    assert status == 0, said
    assert "got SIGTERM after the job had finished" in said
    assert "stopping every child" not in said  # nothing was stopped


@pytest.mark.timeout(30)
def test_without_proc_a_group_counts_while_any_member_runs(tmp_path, monkeypatch):
    """macOS has neither /proc nor os.waitid: the leader is reaped at once, and the kernel
    says whether any member is left (a wrapper's trainer still checkpointing)."""
    monkeypatch.delattr(os, "waitid", raising=False)
    spec = ChildSpec("worker", 0, ["sh", "-c", "(sleep 1.5) & exit 0"])
    with open(os.devnull, "wb") as out:
        child = Child(spec, tmp_path / "worker.log", out, threading.Lock())
        try:
            deadline = time.monotonic() + 10
            while child.poll() is None:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            assert child.group_alive(None), "the member still sleeping was not counted"
            # (once it exits, whether the group empties depends on PID 1 reaping the orphan,
            # which this sandbox's init does not do promptly)
        finally:
            child.finish()


@pytest.mark.timeout(60)
def test_a_stop_sends_each_child_its_own_stop_signals(tmp_path):
    """A shard's is SIGINT (stop at once): its workers are gone by then, and a SIGTERM would
    only start a drain. Here the server would take 20 s to go on SIGTERM."""
    server = textwrap.dedent(
        """
        import pathlib, signal, sys, time
        out = pathlib.Path(sys.argv[1])
        signal.signal(signal.SIGTERM, lambda *_: time.sleep(20))
        signal.signal(signal.SIGINT, lambda *_: (out.write_text("SIGINT"), sys.exit(0)))
        out.with_suffix(".up").write_text("")
        while True:
            time.sleep(0.05)
        """
    )
    (tmp_path / "server.py").write_text(server)
    specs = [
        ChildSpec("server", 0, [sys.executable, str(tmp_path / "server.py"), str(tmp_path / "s")],
                  stop_signals=(signal.SIGINT,)),
        ChildSpec("worker", 0, ["sh", "-c", until_up(tmp_path, "s")]),
    ]  # fmt: skip
    began = time.monotonic()
    status, said = supervise(tmp_path, specs, grace=30)
    assert status == 0, said
    assert (tmp_path / "s").read_text() == "SIGINT"
    assert time.monotonic() - began < 15


@pytest.mark.timeout(30)
def test_without_proc_but_with_waitid_an_exited_leader_ends_its_group(tmp_path, monkeypatch):
    """Linux without /proc mounted: the leader is a zombie the kernel still counts, so the
    group is known by its leader alone (else every stop would wait the whole grace)."""
    import launcher.gang as gang_module
    import launcher.gang_stop as gang_stop_module

    # both lookups: the stop's wait for the groups to go is gang.any_running's since 2b4a94eb,
    # and a test that faked the stop's alone passed with the no-/proc branch broken
    for module in (gang_module, gang_stop_module):
        monkeypatch.setattr(module, "running_groups", lambda: None)
    specs = [ChildSpec("worker", 0, checkpointing(tmp_path, "w", 0))]
    began = time.monotonic()
    status, said = supervise(tmp_path, specs, grace=20, signal_at=(["w.up"], 0.2, signal.SIGTERM))
    assert status == 143, said
    assert time.monotonic() - began < 10, "the stop waited for a zombie leader"


@pytest.mark.timeout(90)
def test_a_job_failing_at_once_stops_its_shard_at_once_even_with_sigint_ignored(tmp_path):
    """A script's `launcher ... &` runs it with SIGINT ignored, which the shard inherits; the
    worker fails before the shard is even up: the stop must not wait the whole grace."""
    run = tmp_path / "run"
    began = time.monotonic()
    done = run_job(
        launch_argv(run, "--workers", "1", "--servers", "1", "--grace", "60", "--", "sh", "-c",
                    "exit 3"),
        env=ENV, timeout=80, cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert time.monotonic() - began < 30, "the stop waited out the grace for the shard"
    assert "KeyboardInterrupt" not in done.stdout + done.stderr
