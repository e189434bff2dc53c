"""A script run through ``dist.run_main`` whose data or model is wrong ends as ``distconv train``
ends on the same errors: one line naming the script and the cause, exit 1, the traceback under
``DISTCONV_DEBUG=1`` (:mod:`distconv.user_errors`, shared by both). It ended in a fifteen-line
traceback, where the README says run_main "ends the script as ``distconv train`` ends". Under
``mpiexec`` in ``tests/mpi/test_run_main_data.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.script_main import run_main
from distconv.sync.peers import PEER_FAILED_STATUS
from tests.child_env import child_path
from tests.setup_failures import told_by_a_shard

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(__file__).resolve().parent / "user_data_script.py"


def run_script(*args: str, **environ: str) -> subprocess.CompletedProcess:
    """:mod:`tests.user_data_script` run alone with ``args``, ``environ`` set in its
    environment (``DISTCONV_DEBUG`` unset unless given there)."""
    env = {**os.environ, "PYTHONPATH": child_path(), **environ}
    for name in ("DISTCONV_DEBUG", "DISTCONV_PSERVERS", "RANK", "WORLD_SIZE"):
        if name not in environ:
            env.pop(name, None)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=50
    )


@pytest.mark.parametrize(
    "case, said",
    [  # the class named: an error of the job itself, which distconv-launch does not restart
        ("nan", "DataError: the training set's 'x' holds NaN or infinity in 1 row(s): row 5"),
        ("empty", "DataError: the training set is empty"),
        (
            "lengths",
            "DataError: a data set needs arrays of one common length, got {'x': 64, 'label': 63}",
        ),
        (
            "label",
            "DataError: the training set's 'label' holds 1 row(s) outside [0, 3), the classes "
            "SoftmaxCrossEntropy 'loss' scores; its labels lie in [0, 3]: row 63",
        ),
        ("model", "LayerError: Breaks 'fc': forward 6 failed"),
        ("feed", "NetworkError: input 'x' was not fed (feeds: ['image', 'label'])"),
    ],
)
def test_a_data_or_model_error_is_one_line_naming_the_script_and_status_1(case, said):
    done = run_script(case)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1:] == [f"user_data_script.py: error: {said}"], done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_debug_keeps_the_traceback_and_the_status():
    done = run_script("nan", DISTCONV_DEBUG="1")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr, done.stderr[-2000:]
    assert done.stderr.splitlines()[-1].startswith("distconv.data.DataError: the training set's")


def test_the_scripts_own_file_error_keeps_its_traceback():
    """An OSError in a script is most often the script's own (its data file): the traceback
    shows its line. distconv train's OSErrors are distconv's own, one line there."""
    done = run_script("oserror")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" in done.stderr and "no-such-file.npy" in done.stderr, done.stderr


def test_a_refusal_telling_of_another_ranks_failure_exits_75_under_debug(capsys, monkeypatch):
    """As distconv train: the traceback, and still the status that says "a peer" (run_main
    exited 1 there, blamed by the launcher for the other rank's failure)."""
    monkeypatch.setenv("DISTCONV_DEBUG", "1")
    told = told_by_a_shard(1, 0)

    def main():
        raise told

    with pytest.raises(SystemExit) as ended:
        run_main(main)
    assert ended.value.code == PEER_FAILED_STATUS
    assert "Traceback" in capsys.readouterr().err
