"""``benchmarks/allreduce.py`` as a user runs it: the driver, its own ``mpiexec`` jobs, the
report, at the smallest sizes its flags allow."""

from __future__ import annotations

import argparse
import fcntl
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.mpi.common import NEEDS_MPIEXEC
from tests.probes import run_as_group

pytestmark = NEEDS_MPIEXEC

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "allreduce.py"
#: the smallest run that reaches the report and the CNN rows: 1 MB as 2 gradients, one timed
#: repetition, one epoch of the default CNN, one pair
QUICK = ["--mb", "1", "--grads", "2", "--reps", "1", "--compute-ms", "0.1", "--no-torch"]
QUICK += ["--epochs", "1", "--cnn-pairs", "1"]


def run_driver(*flags: str) -> tuple[str, dict]:
    """The driver's printed report and its JSON line; its mpiexec jobs die with it."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    proc, out, err = run_as_group(
        [sys.executable, str(BENCH), *QUICK, *flags], timeout=200, env=env
    )  # the driver and the mpiexec jobs it starts: one group
    assert proc.returncode == 0, err[-3000:]
    lines = out.strip().splitlines()
    return "\n".join(lines[:-1]), json.loads(lines[-1])


@pytest.fixture(scope="module")
def half_run(tmp_path_factory) -> tuple[str, dict]:
    """One driver run with the CNN rows, ``--grad-dtype float16`` and half a MB (``--mb`` took
    whole numbers only): the checks below share it, as each driver run costs seconds of two
    ranks' training. Under pytest-xdist the first worker to ask runs it and the others read
    its result (a module fixture runs once a worker, and the checks land on both)."""
    flags = ("--grad-dtype", "float16", "--mb", "0.5")
    if "PYTEST_XDIST_WORKER" not in os.environ:  # no xdist (or -p no:xdist): the whole run
        return run_driver(*flags)
    shared = tmp_path_factory.getbasetemp().parent  # this run's, shared by its workers
    with open(shared / "allreduce-half-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        kept = shared / "allreduce-half-run.json"
        if not kept.exists():  # written whole or not at all: another worker reads it next
            (shared / "allreduce-half-run.part").write_text(json.dumps(run_driver(*flags)))
            os.replace(shared / "allreduce-half-run.part", kept)
        report, result = json.loads(kept.read_text())
    return report, result


@pytest.mark.timeout(420)
def test_grad_dtype_is_the_wire_of_the_cnns_two_rank_runs(half_run):
    """``--grad-dtype float16`` was read by the driver and passed to no job: the CNN's 2-rank
    runs sent float32 (the very bytes of a run without it) and nothing said so."""
    report, half = half_run
    # the job's own sync says which dtype went on the wire: float32 had the flag been dropped
    assert half["cnn2"]["grad_dtype"] == "float16" and half["cnn2"]["wire"] > 0
    assert "2 ranks (float16 wire)" in report
    # the 1-rank runs have no wire, and train alone as before
    assert half["cnn1"]["wire"] == 0 and all(job["wire"] == 0 for job in half["cnn_side_by_side"])


@pytest.mark.timeout(420)
def test_the_report_names_the_sizes_that_ran(half_run):
    """``--mb 1 --grads 2`` printed 'raw Allreduce, fused 4 MB', '100 calls', 'SGD update of
    4 MB' and '4 MiB bucket' beside the figures of 1 MB as 2 gradients; the run here is of
    half a MB, as ``--mb 0.5`` (refused as no int before) asks."""
    report, result = half_run
    for label in (
        "raw Allreduce, fused 0.5 MB ",
        "raw Allreduce, 2 calls ",
        "SGD update of 0.5 MB ",
        "raw Allreduce, fused buffer as one 0.5 MiB call ",  # not '1 MiB calls': one call
    ):
        assert label in report
    assert "0.5 MiB bucket, compute none: stream off" in report
    assert report.startswith("# numpy's BLAS: ")  # the kernels, as the other benchmarks say
    assert "4 MB" not in report and "4 MiB bucket" not in report and "100 calls" not in report
    # the update rows, in the table too: 1 MiB is their buckets' cap, and this one is half that
    assert "update adam over 1 bucket(s) of at most 1 MiB," in report
    assert "1 MiB bucket" not in report
    assert (result["mb"], result["grads"]) == (0.5, 2)  # the JSON line records them too
    # the free cores' compute under the docs' name, beside what was asked of it
    assert "free cores: the sleeps took " in report and " ms (0.1 ms asked)" in report


@pytest.mark.timeout(420)
def test_the_target_is_on_one_of_the_two_default_over_raw_figures(half_run):
    """The table's default row and the line of the two alone were both 'MPISync default / raw
    fused, paired', each with 'target <= 1.1x': a reader could not tell which one the docs'
    'paired (<= 1.1)' row quotes (the table's paired column)."""
    report, _ = half_run
    row = next(line for line in report.splitlines() if line.startswith("MPISync default ("))
    assert row.endswith("target <= 1.1x, paired")
    alone = next(line for line in report.splitlines() if "the two taking turns" in line)
    assert alone.startswith("MPISync default / raw fused, alone:")
    assert "paired" not in alone.replace("paired column", "") and "target <=" not in alone
    assert report.count("target <= 1.1x") == 1


def _bench_module():
    """benchmarks/allreduce.py as a module. Its import sets one-thread variables in the
    environment and puts its folders on sys.path, as a script run alone should; both are put
    back, or every later test in this worker (and each child it starts) would run with them."""
    spec = importlib.util.spec_from_file_location("allreduce_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    environ, path = dict(os.environ), list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
    return module


def _processes_naming(token: str) -> list[str]:
    """The pids of processes whose arguments hold ``--rank TOKEN``: those two arguments, not
    the token's digits anywhere in a command line, which a process of another test (a pid or
    a random number among its arguments, in the other xdist worker) may hold too."""
    mark = f"\0--rank\0{token}\0".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if mark in b"\0" + cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:  # gone meanwhile
            pass
    return found


def _started(*args: str) -> subprocess.Popen:
    """A Python waiting on its stdin with ``args``, once ``/proc`` shows them (not yet the
    fork's copy of this process's)."""
    argv = [sys.executable, "-c", "import sys; sys.stdin.read()", *args]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE)
    shown, deadline = b"\0".join(a.encode() for a in argv) + b"\0", time.monotonic() + 10
    while Path(f"/proc/{proc.pid}/cmdline").read_bytes() != shown:
        assert time.monotonic() < deadline, "the process never showed its arguments"
        time.sleep(0.01)
    return proc


@pytest.mark.timeout(60)
def test_the_help_shows_each_sizes_default():
    """``--help`` showed no default for ``--mb``, ``--grads``, ``--reps`` or ``--compute-ms``:
    only the docs' table had them."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--help"], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # argparse wraps the lines at the terminal's width
    for words in (
        "MB of gradients (4.0)",
        "gradients (100)",
        "repetitions (40)",
        "backward (20.0): the sleeps",
    ):
        assert words in text
    assert "--worker" not in text  # the jobs' plumbing is not the user's


@pytest.mark.timeout(30)
def test_a_step_faster_than_its_compute_is_reported_as_noise(capsys):
    """A loaded machine at small ``--reps``: the sleep standing in for compute overslept in the
    compute-only case, and 'exposed off -318%' was printed as a figure a reader might quote."""
    bench = _bench_module()
    assert bench.exposed(3.0, 2.0, 4.0) == "25%"
    assert bench.exposed(1.0, 2.0, 4.0) == bench.NOISE
    times = {
        f"stream_{kind}_{case}_ms": 2.0
        for kind in ("none", "free", "full")
        for case in ("on", "off")
    }
    ratios = {
        f"stream_{kind}_{case}_x": 1.0
        for kind in ("none", "free", "full")
        for case in ("on", "one")
    }
    bench.report_streaming(
        {**times, **ratios, "mb": 1, "stream_free_on_ms": 3.0, "stream_free_compute_ms": 2.5}
    )
    free = next(line for line in capsys.readouterr().out.splitlines() if "compute free" in line)
    # off: 2.0 ms against 2.5 ms of compute; on: 0.5 ms over it, of the 2.0 ms communication
    assert free.endswith(f"exposed off {bench.NOISE}, on 25%") and "-25%" not in free


@pytest.mark.timeout(30)
def test_the_1_mib_calls_are_cut_at_every_mib_of_a_decimal_mb():
    """``--mb`` takes decimals, and the raw 1 MiB calls were ``np.array_split`` into
    ``nbytes // MB`` parts: 1.5 MB went as one 1.5 MiB call, 2.5 MB as two of 1.25 MiB, under
    the label 'fused buffer as 1 MiB calls'."""
    bench = _bench_module()
    mib = bench.MB
    assert bench.mib_calls(4 * mib) == [mib] * 4  # the default, as before
    assert bench.mib_calls(int(1.5 * mib)) == [mib, mib // 2]
    assert bench.mib_calls(int(2.5 * mib)) == [mib, mib, mib // 2]
    assert bench.mib_calls_label(4.0) == "raw Allreduce, fused buffer as 1 MiB calls"
    assert bench.mib_calls_label(2.5).endswith("as 1 MiB calls, the last 0.5 MiB")
    assert bench.mib_calls_label(0.5).endswith("as one 0.5 MiB call")


@pytest.mark.timeout(30)
def test_only_the_jobs_own_processes_are_named_by_its_token():
    """The token's digits inside another process's argument (another test's pid or number)
    are not the job's: the old substring match named that process, waited 10 s for it to end
    and SIGKILLed it. A rank's ``--rank TOKEN`` still is."""
    token = str(90000 + os.getpid() % 9999)
    procs = []
    try:
        procs.append(_started(f"1{token}5", "--rank", token + "0"))
        procs.append(_started("--sync", "local", "--rank", token))
        assert _processes_naming(token) == [str(procs[1].pid)]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)


@pytest.mark.timeout(120)
def test_a_failed_job_stops_the_job_started_beside_it():
    """The side-by-side trainings: the first failing raised at once, and the second trained on
    under its own mpiexec after the driver had exited, loading the cores for whatever ran next."""
    bench = _bench_module()
    token = str(90000 + os.getpid() % 9999)  # names the second job's processes (--rank)
    args = argparse.Namespace(
        mb=1, grads=2, reps=1, compute_ms=0.1, overlap_bucket=4 << 20, epochs=200, rotate=1
    )
    jobs = [(1, ["--sync", "nonsense"]), (1, ["--sync", "local", "--rank", token])]
    try:
        with pytest.raises(RuntimeError, match="unknown sync strategy 'nonsense'"):
            bench.together(jobs, "cnn", args)
        # hydra runs each rank in a session of its own, out of the killed group's reach: the
        # rank ends as its proxy dies, a moment after together() returns; the old code left it
        # training its 200 epochs, far longer than this wait
        deadline = time.monotonic() + 10
        while _processes_naming(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_naming(token) == []
    finally:
        for pid in _processes_naming(token):  # what the old code left: not past this test
            os.kill(int(pid), signal.SIGKILL)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "flags, words",
    [
        (["--grad-dtype", "float8"], "argument --grad-dtype: invalid choice: 'float8'"),
        (["--no-cnn", "--grad-dtype", "bfloat16"], "and --no-cnn runs none"),
        (["--update-only", "--grad-dtype", "float16"], "and --update-only runs none"),
        # the main table ran for minutes, then cnn_pairs() died on the median of no pair
        (["--cnn-pairs", "0"], "--cnn-pairs must be at least 1"),
        # acted as 1: any value but 0 rotated
        (["--rotate", "5"], "argument --rotate: invalid choice: 5 (choose from 0, 1)"),
    ],
)
def test_a_flag_the_run_cannot_use_is_refused_before_anything_runs(flags, words):
    """``--grad-dtype float8`` ran the main table and a 1-rank CNN job (minutes at the default
    sizes) before the 2-rank job died on it with a ValueError traceback; with ``--no-cnn``
    any value, ``bogus`` too, ran every table and exited 0, the flag set nothing.
    ``--cnn-pairs 0`` ran the main table, then died with an IndexError, its figures unprinted."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(BENCH), *QUICK, *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert words in done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr  # no job ran


@pytest.mark.timeout(240)
def test_the_update_rows_time_a_real_update_with_the_thread_against_without():
    """Every step row of the sync used a no-op optimizer, so none could show what updating
    each bucket as soon as the thread reduced it gained, or what waiting for every bucket
    gives up: the update rows time Adam and an update leaving the core free (a GPU's), over
    several buckets, the thread on against off in the same run."""
    report, result = run_driver("--update-only", "--mb", "3", "--grads", "6")
    # its JSON line says what ran, as the others do: the docs' update table is by --compute-ms
    assert (result["mb"], result["grads"], result["compute_ms"]) == (3, 6, 0.1)
    for rule in ("adam", "free"):
        assert result[f"update_{rule}_buckets"] > 1
        assert result[f"update_{rule}_nothread_x"] == 1.0  # the paired baseline
        assert result[f"update_{rule}_thread_x"] > 0 and result[f"update_{rule}_thread_ms"] > 0
        buckets = result[f"update_{rule}_buckets"]
        assert f"update {rule} over {buckets} bucket(s) of at most 1 MiB," in report
        assert "with / without paired" in report
        # the baseline differs by the thread alone: the same pieces (the last bucket's end
        # cut small, as the thread's default has it), not its own default of one call
        pieces = result[f"update_{rule}_thread_pieces"]
        assert result[f"update_{rule}_nothread_pieces"] == pieces
        assert len(pieces[-1]) > 1


def test_the_gloo_separate_row_makes_one_call_per_gradient():
    """``gloo_separate`` split the buffer into pieces of ``ceil(n / grads)`` floats: 150 floats
    over 100 gradients made 75 calls, timed as the ``--grads 100`` row. Its pieces are now
    :func:`make_params`'s: one per gradient, of the same sizes."""
    torch = pytest.importorskip("torch")
    bench = _bench_module()
    for n, grads in ((150, 100), (1_048_576, 100), (7, 7)):
        pieces = bench.gradient_pieces(torch.ones(n), grads)
        sizes = [p.value.size for p in bench.make_params(4 * n, grads)]
        assert [len(p) for p in pieces] == sizes


#: a ``sitecustomize`` that makes ``torch`` unimportable, as on a machine without PyTorch
#: (``find_spec`` raises, as the import does)
NO_TORCH = """
import sys


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name="torch")


sys.meta_path.insert(0, NoTorch())
"""
#: ``torch`` packages put in its place: one whose import fails as on a machine without it
#: (found, so a look-up of its spec passed it), and one without ``torch.distributed``, which
#: imports, so the gloo job starts, and dies
FAKE_TORCH = {
    "shadowed": 'raise ModuleNotFoundError("No module named torch (shadowed)", name="torch")\n',
    "no distributed": "",
}


def driver_without(torch: str, folder: Path) -> tuple[subprocess.Popen, str, str]:
    """The driver's quick run with gloo rows (no ``--no-torch``) and no CNN rows, its
    children seeing ``torch`` as ``torch`` says: ``"missing"`` or a key of ``FAKE_TORCH``."""
    if torch == "missing":
        (folder / "sitecustomize.py").write_text(NO_TORCH)
    else:
        (folder / "torch").mkdir()
        (folder / "torch" / "__init__.py").write_text(FAKE_TORCH[torch])
    env = {**os.environ, "PYTHONPATH": child_path(folder)}
    quick = [flag for flag in QUICK if flag != "--no-torch"]
    return run_as_group([sys.executable, str(BENCH), *quick, "--no-cnn"], timeout=200, env=env)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("torch", ["missing", "shadowed"])
def test_without_pytorch_the_gloo_rows_are_skipped_with_a_line(tmp_path, torch):
    """PyTorch is optional, but the driver timed the whole main table, then died in the gloo
    job with a traceback, printing none of it: it says there are no gloo rows, and why, and
    goes on. A ``torch`` that is found but cannot be imported is no PyTorch either: a look-up
    of its spec passed it, and the gloo job died after the main table, with no JSON line."""
    proc, out, err = driver_without(torch, tmp_path)
    assert proc.returncode == 0, err[-3000:]
    said = "PyTorch is not importable: no gloo rows (--no-torch; "
    assert said in out and "gloo fused" not in out
    if torch == "shadowed":
        assert said + "ModuleNotFoundError: No module named torch (shadowed))" in out
    assert "MPISync default (" in out and "gloo_fused_ms" not in json.loads(out.splitlines()[-1])


@pytest.mark.timeout(240)
def test_the_main_table_is_printed_before_a_later_job_fails(tmp_path):
    """The table was printed once every job had run: a gloo (or CNN) job failing threw away
    the main table's minutes of measurement. It is printed as soon as it is measured."""
    proc, out, err = driver_without("no distributed", tmp_path)
    assert proc.returncode == 1 and "mpiexec gloo failed" in err
    assert "No module named 'torch.distributed'" in err
    assert "MPISync default (" in out and "MPISync default / raw fused, alone:" in out


REFUSED = "allreduce.py starts its own mpiexec jobs: run it without mpiexec"


@pytest.mark.timeout(60)
def test_a_driver_started_under_mpiexec_is_refused():
    """``mpiexec -n 2 allreduce.py`` ran two drivers, each starting its own 2-rank jobs: four
    ranks on the cores, every figure at double load, and nothing said so."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        ["mpiexec", "-n", "1", sys.executable, str(BENCH), *QUICK, "--no-cnn"],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert REFUSED in done.stderr
    assert "this process has a launcher's PMI_RANK, PMI_SIZE (" in done.stderr  # hydra's


@pytest.mark.timeout(60)
@pytest.mark.parametrize("var", ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"])
def test_each_launchers_variable_is_refused_and_named(var):
    """Open MPI's and PMIx launchers' ranks (Open MPI 5, srun) have no PMI_RANK: each
    launcher's own variable is refused as hydra's is, and named, so that a shell a launcher
    started, or one where a user left them exported (not a rank), knows what to unset."""
    env = {**os.environ, "PYTHONPATH": child_path(), var: "2"}
    for other in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"):
        if other != var:
            env.pop(other, None)
    done = subprocess.run(
        [sys.executable, str(BENCH), *QUICK, "--no-cnn"],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 2 and done.stdout == "" and REFUSED in done.stderr
    said = f"a launcher's {var} (not a rank, but a shell a launcher started or variables left "
    assert said + f"exported? run it under env -u {var} python3 ...)" in done.stderr
