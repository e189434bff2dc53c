"""The job's CURVE keys for a local launch with parameter servers: made once into
``<run-dir>/keys`` by ``distconv keys`` (a subprocess with a bound), or those already there
reused by a launch into the same run directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

from distconv.sync.ps.key_names import holds_keys

from .commands import LaunchError, keys_command
from .interrupt import run_captured
from .shown import shown

#: seconds ``distconv keys`` may take: a Python start and a few key pairs, far under it even
#: on a slow shared file system; a hung one held the launch (and a batch job's hosts) for ever
KEYS_BOUND = 120.0


def make_keys(
    keys_dir: Path, workers: int, in_run_dir: bool = True, own_out: str | None = None
) -> bool:
    """The job's CURVE keys: made by ``distconv keys DIR --workers N`` (a subprocess, in a
    process group of its own killed whole past :data:`KEYS_BOUND` or on a stop), or those
    already in ``keys_dir`` when they are a whole set for ``workers`` (each file there loads;
    an empty one, left by a ``distconv keys`` cut short, is refused as damaged before any
    child starts), so a job can be launched again into its run directory. Returns True when
    existing keys are reused. ``in_run_dir``: the job is
    ``distconv train`` writing into the run directory's ``train/`` (no ``--out`` of its own),
    so that another run directory begins a new run; ``own_out``: train's own ``--out``, which
    holds the run whatever the run directory (the refusal's hint says which).

    Raises:
        LaunchError: one line, when ``distconv keys`` fails, takes over :data:`KEYS_BOUND`, or
            the existing keys do not fit.
        Interrupted: a stop kept before the launcher armed (by a caller that called
            :func:`launcher.interrupt.defer` itself) killed it; raised once.
    """
    if holds_keys(keys_dir):  # any key file, not only server.key: a set cut short is checked too
        from distconv.sync.ps.keys import key_set_mismatch  # pyzmq: only for keys there

        differs = key_set_mismatch(keys_dir, workers)
        if differs is not None:
            raise LaunchError(
                f"{shown(keys_dir)} {differs}, so its keys cannot be reused; "
                f"{_how_to_go_on(keys_dir, workers, in_run_dir, own_out)}"
            )
        return True
    try:  # its group killed past the bound or on a stop: nothing it started outlives it
        done = run_captured(
            keys_command(str(keys_dir), workers), KEYS_BOUND, kill_group=True, kept_stops=True
        )
    except subprocess.TimeoutExpired:
        raise LaunchError(
            f"`distconv keys` made no CURVE keys in {KEYS_BOUND:g} s (killed); the job did not "
            "start"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LaunchError(f"`distconv keys` failed to make the job's CURVE keys: {last}")
    return False


def _how_to_go_on(keys_dir: Path, workers: int, in_run_dir: bool, own_out: str | None) -> str:
    """What to do about keys that do not fit: remove them, and the launch makes new ones for
    ``workers`` in the same run directory. Not done unasked: the launcher cannot tell its own
    keys from an operator's, nor whether a process started by hand still uses them. Where the
    run lives in the run directory (``in_run_dir``), another one begins a new run: a
    ``--resume`` there finds nothing. Where it does not (train's ``own_out``, or a program's
    own files), another run directory is as good a way on, and was said to begin a new run."""
    run = keys_dir.parent
    remove = f"remove {shown(keys_dir)} and launch again: new keys are made (stop first anything "
    remove += "still using these)"
    if in_run_dir:
        return (
            f"to go on with the run in {shown(run)} on {workers} worker(s), {remove}. Another "
            "--run-dir or --job-id starts a new run, not this one"
        )
    kept = "" if own_out is None else f"; the run is in --out {shown(own_out)} either way"
    return (
        f"to launch on {workers} worker(s) with the run directory {shown(run)}, {remove}, or "
        f"choose another --run-dir or --job-id{kept}"
    )
