"""``benchmarks/pserver.py``: a shard that cannot start is named and nothing is left running;
``--code`` of an older checkout; ``--modes`` checked before anything runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.probes import run_as_group

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "pserver.py"


def _bench(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``benchmarks/pserver.py ARGS`` run to its end (50 s at most, its output as text), with
    this checkout's distconv importable: for the flags' checks, which end it before it runs."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    argv = [sys.executable, str(BENCH), *args]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=50)


@pytest.mark.timeout(120)
def test_a_shard_that_cannot_start_is_named_with_its_status_and_stderr(tmp_path):
    """A shard that ended before printing its address (here a ``--code`` checkout whose
    ``python -m distconv`` fails) stopped the benchmark with ``IndexError: list index out of
    range``, its stderr thrown away."""
    shutil.copytree(ROOT / "distconv", tmp_path / "distconv")
    (tmp_path / "distconv" / "__main__.py").write_text('raise SystemExit("no shard here")\n')
    argv = [sys.executable, str(BENCH), "--code", str(tmp_path), "--mb", "1", "--params", "2"]
    # the benchmark, its echoes and shards: one group, whose leader's pid it keeps
    proc, out, err = run_as_group([*argv, "--repeat", "1", "--modes", "insecure"], 90)
    assert proc.returncode == 1, out + err
    assert "IndexError" not in err
    assert "-m distconv pserver" in err and "exited with status 1 before saying where" in err
    assert "no shard here" in err
    assert out.startswith("# numpy's BLAS: ")  # which kernels, as the other benchmarks say
    with pytest.raises(ProcessLookupError):  # the echoes started before it were stopped
        os.killpg(proc.pid, 0)


@pytest.mark.timeout(120)
def test_code_measures_a_checkout_older_than_the_flags_number_rule(tmp_path):
    """The flags' types imported ``distconv.number_text`` from the ``--code`` checkout, first
    on ``sys.path`` by then: any checkout before it (fa333b7 too, the one docs/benchmarks.md
    compares against) crashed with an ImportError before measuring anything. The flags are
    read with this checkout's code, everything measured is the old one's."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "fa333b7"], capture_output=True, timeout=60
    )
    if archive.returncode != 0:
        pytest.skip("this clone lacks fa333b7 (a shallow checkout)")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    argv = [sys.executable, str(BENCH), "--code", str(tmp_path), "--mb", "1", "--params", "2"]
    env = {**os.environ, "PYTHONPATH": child_path()}
    argv += ["--repeat", "1", "--modes", "insecure", "--json"]
    proc, out, err = run_as_group(argv, 90, env=env)
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["code"] == str(tmp_path) and result["insecure"]["transport"] > 0


@pytest.mark.timeout(60)
def test_the_flags_are_read_with_this_checkouts_code(tmp_path):
    """The same without git history: a ``--code`` checkout whose ``distconv.number_text``
    cannot be imported, as one written before it, still gets its usage read."""
    shutil.copytree(ROOT / "distconv", tmp_path / "distconv")
    (tmp_path / "distconv" / "number_text.py").write_text('raise ImportError("not written yet")\n')
    done = _bench("--code", str(tmp_path), "--help")
    assert done.returncode == 0 and "usage: pserver.py" in done.stdout, done.stderr[-3000:]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("modes", ["insecure,curv", "", "curve,curve"])
def test_a_mode_that_is_not_one_is_refused_before_anything_runs(modes):
    """``--modes "insecure,curv"`` measured insecure, then threw its figures away as the echo
    of ``curv`` refused its hidden ``--echo`` flag, the error naming that flag, not ``--modes``."""
    done = _bench("--modes", modes)
    assert done.returncode == 2 and done.stdout == ""
    assert f"error: --modes {modes!r}: name insecure and/or curve" in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("code", ["", "no-such-checkout"])
def test_a_code_with_no_distconv_is_refused(tmp_path, code):
    """``--code ""`` (an unset variable) passed the check for a distconv there and measured
    the working directory's: here none, so the worker ran this checkout's code against shards
    of whatever distconv the environment had, and the JSON named the working directory."""
    done = _bench(f"--code={code}", "--repeat", "1", "--modes", "insecure", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert f"error: --code {code!r}: no distconv package there" in done.stderr
