"""The checks of :func:`distconv.deploy.render.render_manifests`'s arguments, before anything
renders: what cannot render is refused naming the ``distconv-launch k8s`` flag that sets it.
The names are re-exported by :mod:`distconv.deploy.render`, where callers import them from."""

from __future__ import annotations

import re
from collections.abc import Sequence

from distconv.deploy.gpus_per_rank import too_many_gpus
from distconv.deploy.image_ref import FORM, is_image_reference
from distconv.deploy.train_values import TrainArgsError, refuse_train_values
from distconv.shard_timeout import below_the_shards_least, workers_timeout
from distconv.sync.ps.limits import MAX_SETTING, staleness_in_sync
from distconv.train_args import FlagError, spelled_out

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
#: leaves room for "-pserver-NNNNN" inside the 63-character DNS label a pod's hostname is
MAX_JOB_NAME = 40
MODES = ("sync", "async")
#: flags the deployment sets itself; a second copy in train_args would silently win or clash
OWNED_FLAGS = (
    "--sync",
    "--pservers",
    "--keys",
    "--insecure",
    "--health-port",
    "--health-host",
    "--resume",
)
#: flags the deployment sets through the pods' environment, and why: a flag would win there, so
#: every worker's hello would name a job its shards do not serve, or every pod claim one rank
ENVIRONMENT_FLAGS = {
    "--rank": "each worker's rank comes from its Job index (or MPI under an MPIJob)",
    "--world-size": "the deployment sets the world size from --workers",
    "--job-id": "the deployment sets DISTCONV_JOB_ID on every pod (the job's one name), from "
    "--job-name",
}
#: flags the deployment does not set but excludes, and why
EXCLUDED_FLAGS = {
    "--overwrite": "every rank would refuse it beside the deployment's --resume auto (a "
    "restarted rank resumes its run, never starts it over)",
}


def _check_args(job_name, workers, servers, image, gpus, train_args, mode, slots) -> None:
    """Refuse what cannot render of the launch's own flags, and train arguments no manifest
    can hold (no strings, or not UTF-8): :func:`_check_train_args` judges their flags."""
    if not isinstance(job_name, str) or not _DNS_LABEL.fullmatch(job_name):
        raise ValueError(
            f"--job-name must be a DNS label (a-z, 0-9, '-', starting with a letter), got "
            f"{job_name!r}"
        )
    if len(job_name) > MAX_JOB_NAME:
        raise ValueError(f"--job-name must be at most {MAX_JOB_NAME} characters, got {job_name!r}")
    for name, value, low in (
        ("--workers", workers, 1),
        ("--servers", servers, 0),
        ("--gpus", gpus, 0),
        ("--slots-per-worker", slots, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if (too_many := too_many_gpus(gpus)) is not None:  # a rank trains on one CUDA device
        raise ValueError(f"--gpus {too_many}")
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise ValueError(f"--image must be a non-empty image reference without spaces: {image!r}")
    if mode not in MODES:
        raise ValueError(f"--mode must be one of {MODES}, got {mode!r}")
    if isinstance(train_args, str) or not all(isinstance(a, str) for a in train_args):
        raise ValueError(f"the train arguments must be a sequence of strings, got {train_args!r}")
    for text in (image, *train_args):
        if _undecoded(text):  # no YAML file holds it: kubectl would refuse the whole manifest
            raise ValueError(
                f"{text!r} is not UTF-8 text (bytes this system's locale did not decode); a "
                "manifest cannot hold it"
            )
    if not is_image_reference(image):  # every pod would fail with InvalidImageName
        raise ValueError(f"--image must be an image reference ({FORM}), got {image!r}")


def _check_train_args(train_args: Sequence[str]) -> list[str]:
    """Refuse the ``distconv train`` arguments after ``--`` where every rank would, or where
    they set what the deployment sets; returns them spelled out in full. Run once the launch's
    own flags are judged, so that a refusal of them is named before one of the train arguments
    (``--mpi --servers 2 -- --rank 1`` is refused for its shards, the launch's own slip)."""
    try:  # every rank would refuse such a flag; abbreviated, one could pass the checks below
        spelled = spelled_out(train_args)
    except FlagError as exc:
        raise TrainArgsError(f"{exc} (the train arguments after --)") from None
    for name in (full.split("=", 1)[0] for full in spelled):
        why = ENVIRONMENT_FLAGS.get(name) or EXCLUDED_FLAGS.get(name)
        if why is not None:
            raise TrainArgsError(f"{name} after --: {why}; drop it from the train arguments")
    owned = [
        a if a == full else f"{a} ({full.split('=', 1)[0]})"
        for a, full in zip(train_args, spelled)
        if full.split("=", 1)[0] in OWNED_FLAGS
    ]
    if owned:
        raise TrainArgsError(
            f"the train arguments after -- must leave {', '.join(owned)} to the deployment"
        )
    refuse_train_values(spelled)  # as distconv-launch k8s does: every rank would refuse them
    return spelled


def _check_staleness(max_staleness, mode, use_mpi: bool) -> None:
    """Refuse a shards' ``--max-staleness`` that no shard reads (an MPIJob's, a sync job's) or
    that every shard refuses at its start (``distconv pserver``'s bounds), as
    ``distconv-launch local --max-staleness`` is refused."""
    if max_staleness is None:
        return
    if isinstance(max_staleness, bool) or not isinstance(max_staleness, int):
        raise ValueError(f"--max-staleness must be an integer, got {max_staleness!r}")
    if not 0 <= max_staleness <= MAX_SETTING:
        raise ValueError(
            f"--max-staleness must be >= 0 and at most {MAX_SETTING} (2**63 - 1), got "
            f"{max_staleness}"
        )
    if use_mpi:
        raise ValueError("--max-staleness is for parameter-server shards; an MPIJob has none")
    if mode != "async":
        raise ValueError(staleness_in_sync(max_staleness))


def _check_shards_timeout(train_args: Sequence[str], use_mpi: bool) -> None:
    """Refuse a workers' ``--timeout`` (in ``train_args``, spelled out) below a shard's least,
    in a job with shards, as ``distconv-launch local`` refuses it and in its words: the shards
    are given the workers' ``--timeout``, and a shorter one than their least would have them
    wait longer than the workers, each of which would warn of it at setup. (The shards were
    once raised to their least in silence, so the two sides of a rendered job disagreed.)"""
    if use_mpi:  # no shards: the ranks' --timeout is their MPI watchdog's alone
        return
    seconds = workers_timeout(train_args)
    why = None if seconds is None else below_the_shards_least(seconds)
    if why is not None:
        raise TrainArgsError(f"{why} (the train arguments after --)")


def _undecoded(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate: how Python keeps an argument's bytes that are
    not UTF-8 (``os.fsdecode``), which neither UTF-8 nor a YAML escape can write."""
    return any(0xD800 <= ord(c) < 0xE000 for c in text)
