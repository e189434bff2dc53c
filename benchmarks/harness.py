"""Shared benchmark plumbing: timing, thread pinning, one process per library and thread count.

PyTorch and numpy each bring a thread pool; in one process they fight over the cores, so every
measurement runs in a fresh subprocess with the thread count fixed before any import.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

#: the checkout this file belongs to: workers import its distconv, not an installed one
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "DISTCONV_NUM_THREADS")


#: ``wall``: elapsed time. ``cpu``: CPU time of the whole process (all its threads), which a
#: busy shared machine barely disturbs; a fair comparison at 1 thread, where neither library
#: spin-waits
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def best_ms(
    fn: Callable[[], object],
    repeat: int = 7,
    warmup: int = 2,
    budget_s: float = 20.0,
    clock: str = "wall",
) -> float:
    """The fastest of ``repeat`` timed calls in milliseconds (stops early past ``budget_s``)."""
    tick = CLOCKS[clock]
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    for _ in range(repeat):
        t = tick()
        fn()
        times.append(tick() - t)
        if time.perf_counter() - start > budget_s and len(times) >= 2:
            break
    return min(times) * 1e3


def run_worker(
    script: str,
    library: str,
    threads: int,
    extra: list[str] | None = None,
    code: str = REPO_ROOT,
    env_extra: dict[str, str] | None = None,
) -> dict:
    """Run ``script --worker LIBRARY`` in a fresh process pinned to ``threads``; its JSON result.

    ``code``: the checkout whose distconv the worker imports (another one measures old code).
    ``env_extra``: more environment variables for the worker. The worker ends with this
    process, however it ends (:func:`killed_with_this_process`).
    """
    env = {**os.environ, **(env_extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [code, env.get("PYTHONPATH")]))
    for var in THREAD_VARS:
        env[var] = str(threads)
    cmd = [sys.executable, script, "--worker", library, "--threads", str(threads), *(extra or [])]
    out = subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        # a worker measures for a minute or more: one left by a SIGKILLed (or, where no
        # handler stops it, SIGTERMed) driver loaded the cores under whatever ran next
        preexec_fn=killed_with_this_process(),
    )
    if out.returncode != 0:
        raise RuntimeError(f"{library} worker failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def exit_on_sigterm() -> None:
    """Make SIGTERM (``timeout``, a CI cancel, ``kill``) end this process as an exception
    would, so the ``finally`` blocks and ``with`` exits that stop a driver's servers and MPI
    jobs run: by default SIGTERM ends the process at once, and the children it started in
    sessions of their own run on, adopted by init, loading the cores under whatever runs next.
    The exit status is the shell's for a death by SIGTERM (143)."""

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)


#: ``prctl``'s option that sets the signal a process gets when its parent dies (Linux)
PR_SET_PDEATHSIG = 1


def killed_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a driver's child (a shard, an echo, an ``mpiexec`` job, a worker,
    the child that tries ``import torch``): the kernel SIGKILLs the child as soon as the
    driver ends, however it ends. A SIGKILLed driver runs no ``finally``, and its children,
    in sessions of their own, serving for ever or measuring for minutes, ran on,
    adopted by init, loading the cores under whatever ran next (hydra's proxy and ranks end as
    their ``mpiexec`` does). Call it, and start the child, from the main thread: the signal
    comes when the thread that started the child ends. None where the kernel has no such
    signal (not Linux), or ctypes finds no ``prctl``: the child then outlives a SIGKILL.

    Everything is looked up here, in the driver: between fork and exec the child only calls
    the prepared function (the driver may have threads, whose locks the child may not take).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    driver, kill = os.getpid(), int(signal.SIGKILL)

    def die_with_driver() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != driver:  # the driver died before the prctl took hold
            os._exit(1)

    return die_with_driver


#: how long the child that tries ``import torch`` may take (seconds): a hung import is said
TORCH_IMPORT_S = 300
#: the code of the child that tries ``import torch``: ``-c`` puts the working directory first
#: on the path, where the workers, scripts, have their own folder; run from a PyTorch source
#: tree, its ``torch/`` failed to import there and the torch rows were dropped, though the
#: workers import the installed one
IMPORT_TORCH = """
import sys
if not getattr(sys.flags, "safe_path", False):
    del sys.path[0]
import torch
"""


@functools.cache
def torch_unimportable() -> str | None:
    """Why ``import torch`` fails here (its error's last line), or None where it works. A
    child process imports it, as the workers do: a ``torch`` that is found but fails to import
    (a broken install, a wheel for another CUDA or Python, a package in its place) passed a
    look-up of its spec, and the worker that imported it died after the distconv side's runs,
    their figures never printed."""
    import importlib.util

    try:
        if importlib.util.find_spec("torch") is None:  # not installed: no child needed
            return "No module named 'torch'"
    except Exception as exc:  # a finder's own error: as good as no torch
        return f"{type(exc).__name__}: {exc}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", IMPORT_TORCH],
            capture_output=True,
            text=True,
            timeout=TORCH_IMPORT_S,
            preexec_fn=killed_with_this_process(),  # a hung import outlived a killed driver
        )
    except subprocess.TimeoutExpired:  # the child is killed: go on without PyTorch
        return f"import torch took more than {TORCH_IMPORT_S} s"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"import torch exited with status {done.returncode}"


def torch_or_say(without: str) -> bool:
    """Whether ``import torch`` works here (:func:`torch_unimportable`); where it does not, a
    line saying so, what the run goes on ``without``, and the import's error, which tells a
    missing torch from a broken one."""
    why = torch_unimportable()
    if why is not None:
        print(f"PyTorch is not importable: {without} ({why})", flush=True)
    return why is None


#: the code of the child that says numpy's BLAS with this checkout's distconv (``-c`` puts the
#: working directory first on the path, which may hold another checkout's ``distconv/``)
SAY_BLAS = """
import sys
if not getattr(sys.flags, "safe_path", False):
    del sys.path[0]
from distconv.kernels.blas import kernels_said
print(kernels_said())
"""


def blas_kernels() -> str:
    """Which BLAS numpy runs here and on which kernels, for a benchmark's header
    (:func:`distconv.kernels.blas.kernels_said`, which ``distconv train``'s start says too).

    OpenBLAS picks its kernels for the CPU when it loads, unless ``OPENBLAS_CORETYPE`` names
    them; the line names the variables that force them and the command that runs the CPU's
    own. Said by a child with this environment and this checkout's distconv: the workers
    inherit the environment, so they run what this line says, and a driver measuring another
    checkout (``pserver.py --code DIR``) has that one's distconv imported by now, which may
    predate the description (its header failed on an ImportError before measuring anything).
    """
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", SAY_BLAS], env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RuntimeError(f"could not say numpy's BLAS with {REPO_ROOT}'s distconv: {why}")
    return done.stdout.strip()


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join(f"{{:>{w}}}" for w in widths)
    print(line.format(*header))
    for r in rows:
        print(line.format(*r))


def at_least(low: float, kind: type = float, *, strict: bool = False) -> Callable[[str], float]:
    """An argparse ``type`` that reads ``kind`` as ``distconv train``'s flags do
    (:func:`distconv.number_text.number`: ASCII digits, finite) and refuses a value under
    ``low`` (or equal to it, ``strict``): a run of ``--mb 0`` or ``--reps 0`` times nothing and
    prints a table that reads as measured."""
    from distconv.number_text import number  # the checkout measured, on sys.path by now

    def read(text: str) -> float:
        value = number(text, kind)
        if value < low or (strict and value == low):
            bound = "more than" if strict else "at least"
            raise argparse.ArgumentTypeError(f"must be {bound} {low:g}, got {text}")
        return value

    return read


def refuse_empty_gradients(
    parser: argparse.ArgumentParser, mb: float, count: int, flag: str
) -> None:
    """Refuse (``parser.error``) ``--mb`` of fewer float32s than ``count`` gradients (the
    ``flag``'s): each of the rest had none, and their calls, timed as the others, of zero
    bytes read as measured, as ``--mb 0``'s did (``--mb 0.0001`` with 100 gradients); and one
    of more bytes than an array can hold (``sys.maxsize``): ``--mb 1e303``, finite, was
    ``int(inf)`` bytes, an OverflowError's traceback."""
    if not mb * 2**20 <= sys.maxsize:  # inf too
        parser.error(f"--mb {mb:g} is more bytes than an array can hold")
    elif int(mb * 2**20) // 4 < count:
        parser.error(
            f"--mb {mb:g} is {int(mb * 2**20)} bytes, under one float32 for each of the "
            f"{count} gradients ({flag})"
        )
