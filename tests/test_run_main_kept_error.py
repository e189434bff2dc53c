"""The error ``run_main`` ends on, kept as the interpreter keeps an uncaught one (a dropped
parameter-server worker's bye at the exit reads it): before Python 3.11, where
:mod:`distconv.notes` says an uncaught error's notes at the exit from ``sys.last_value``, its
notes were said a second time (a peer failure's, under the traceback that said them already)
or after the one line (a data error's, a JSON log's too); and a later ``run_main`` in the
process inherited it, with the failed run's network held alive by its traceback."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import pytest

from distconv.data import DataError
from distconv.script_main import run_main
from tests.child_env import child_env

NOTE = "the other ranks were told"

#: a script whose notes are made as before Python 3.11, whatever Python runs it, ending under
#: run_main on the error its argument names, noted
NOTED_ENDING = f"""\
import sys
from distconv import notes
from distconv.data import DataError
from distconv.script_main import run_main
from distconv.sync.peers import PeerFailed

notes.NATIVE_NOTES = False


def main():
    error = PeerFailed("rank 1 failed", [1]) if sys.argv[1] == "peer" else DataError("bad row 5")
    notes.add_note(error, {NOTE!r})
    raise error


run_main(main)
"""


@pytest.mark.parametrize(
    ("ending", "status", "last"),
    [
        ("peer", 75, ["distconv.sync.peers.PeerFailed: rank 1 failed", NOTE]),
        ("data", 1, ["-c: error: DataError: bad row 5"]),
    ],
)
def test_before_3_11_run_mains_ending_says_no_note_again_at_the_exit(ending, status, last):
    done = subprocess.run(
        [sys.executable, "-c", NOTED_ENDING, ending],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert done.returncode == status, done.stderr
    assert done.stderr.splitlines()[-len(last) :] == last, done.stderr


def test_a_later_run_main_inherits_no_kept_error():
    """A loop of runs (or tests) catching ``SystemExit``: the next ``run_main`` drops the
    error, and the failed run's objects its traceback held are freed."""

    class Network:  # stands in for the failed run's network and worker
        pass

    held: list[weakref.ref] = []

    def failing() -> None:
        network = Network()
        held.append(weakref.ref(network))
        raise DataError("the training set's 'image' holds NaN in 1 row(s): row 5")

    try:
        run_main(failing)
    except SystemExit as exc:
        assert exc.code == 1 and getattr(sys, "last_exc", None) is exc.__context__
    seen = run_main(lambda: (gc.collect(), held[0](), getattr(sys, "last_exc", None))[1:])
    assert seen == (None, None)
