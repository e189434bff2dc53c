"""The ``--timeout`` a job's parameter-server shards are given, and the text of a number in a
shard's flags. Both ways of starting a job's shards use them: ``distconv-launch local``
(``launcher/commands.py``) and the rendered Kubernetes StatefulSet
(:mod:`distconv.deploy.pserver`). A module of its own: the reading belongs to neither, and
distconv cannot import the launcher, which installs as ``distconv.launch``.

The shards take the workers' ``--timeout``. Left at their 60 s, ``-- --timeout 10`` had every
worker warn at setup that its shards outwait it, and give up at 15 s on a healthy shard,
blamed, where a worker never came: a worker waits 1.5x its timeout, so a shard at the same
value names the missing worker first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn


def workers_timeout(train_args: Sequence[str]) -> float | None:
    """The ``--timeout`` that ``distconv train`` takes from ``train_args`` (after ``train``),
    read by its own parser, so in every form it reads (``--timeout=5``, ``--tim 5``, the last
    of several); None where they give none.

    Raises:
        ValueError: ``train_args`` that ``distconv train`` refuses, in argparse's words (both
            callers refuse them, naming where they came from, before they ask).
    """
    from distconv.train_args import parse_train_values  # the whole parser: for train jobs

    def refuse(message: str) -> NoReturn:
        raise ValueError(message)

    return parse_train_values(train_args, refuse, "-h/--help trains nothing").timeout


def shard_timeout(seconds: float) -> float:
    """``seconds`` as a shard takes its ``--timeout``: no shorter than its least
    (``MIN_TIMEOUT``, 0.2 s), below which a shard refuses to start."""
    from distconv.sync.ps.config import MIN_TIMEOUT  # numpy and zmq: for pserver jobs only

    return max(seconds, MIN_TIMEOUT)


def below_the_shards_least(seconds: float) -> str | None:
    """Why the workers' ``--timeout`` of ``seconds`` cannot be their shards' too, where it is
    below a shard's least (``MIN_TIMEOUT``): the shards would wait that least, longer than the
    workers asked, and every worker warns at setup that it gives up on them first; None where
    it is not below it. One text for every place that meets it: ``distconv-launch local``
    refuses such a launch before it starts anything, the Kubernetes renderer such a job
    (:mod:`distconv.deploy.render_args`), and ``distconv check-manifests`` names such workers
    in manifests edited by hand (:mod:`distconv.deploy.check_timeouts`)."""
    from distconv.sync.ps.config import MIN_TIMEOUT  # numpy and zmq: for pserver jobs only

    if seconds >= MIN_TIMEOUT:
        return None
    return (
        f"--timeout {exact_text(seconds)} is below {MIN_TIMEOUT:g} s, the least a "
        f"parameter-server shard takes: a job's shards are given its workers' --timeout; "
        f"give --timeout {MIN_TIMEOUT:g} or more"
    )


def shard_timeout_args(train_args: Sequence[str]) -> list[str]:
    """``["--timeout", S]`` for the rendered shards of workers that run ``train_args``: the
    workers' own (:func:`workers_timeout`), as written; [] where they give none, which leaves
    the shards their default. No floor applies: the renderer refuses workers' ``--timeout``
    below a shard's least (:func:`below_the_shards_least`) before it builds the shards."""
    return _timeout_flag(workers_timeout(train_args))


def shard_timeout_flag(seconds: float | None) -> list[str]:
    """``["--timeout", S]`` for shards whose workers wait ``seconds`` (floored by
    :func:`shard_timeout`, written by :func:`exact_text`); [] for None, which leaves the
    shards their default."""
    return _timeout_flag(None if seconds is None else shard_timeout(seconds))


def _timeout_flag(seconds: float | None) -> list[str]:
    """``["--timeout", S]`` (:func:`exact_text`); [] for None."""
    return [] if seconds is None else ["--timeout", exact_text(seconds)]


def exact_text(value: float) -> str:
    """``value`` as a flag's text that reads back as exactly ``value``: the shortest one
    (``repr``), less a trailing ``.0`` (``30``). ``:g`` kept six digits: ``--grace 1234567``
    had the shards drain for 1234570 seconds."""
    return repr(float(value)).removesuffix(".0")
