"""The images a job's pods run (part of :func:`distconv.deploy.check.manifest_problems`): each
one the kubelet can pull, and one build of distconv for the whole job.

A typo in a tag edited by hand (``ml/Distconv:0.1.0``, ``distconv:``) leaves every pod in
``InvalidImageName`` after the job was applied, where ``distconv-launch k8s --image`` refuses
it; and a tag edited in one file of three runs a job on two builds, which may fail it only
later. A render gives every pod of a job one image.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.check_mpi import runs_the_images_sshd
from distconv.deploy.image_ref import FORM, is_image_reference, pulled_image
from distconv.deploy.programs import runs_the_jobs_processes, trains_with_the_shards
from distconv.deploy.walk import (
    Manifest,
    _containers,
    _here,
    _main_containers,
    _of_kind,
    _running,
    _runs,
    _templates,
)

#: how a shard of another build fails the job, as the docs tell it
SHARDS_LATER = "a shard of another build at its first checkpoint"
#: how an MPIJob's launcher of another build fails it
MPIRUN_LATER = "the launcher's mpirun starting the workers' ranks of another build"


def image_problems(objs: Sequence[Manifest]) -> Iterator[str]:
    """Each image of a pod of the job that no kubelet can pull, and each job whose shards and
    workers (or an MPIJob's Launcher and Worker, where its workers run this image's sshd:
    :func:`~distconv.deploy.check_mpi.runs_the_images_sshd`) run different images. A launcher
    image apart from the workers' is the operator's own choice in an MPIJob of its own image."""
    yield from _unpullable(objs)
    yield from _two_images(_shard_job(objs), SHARDS_LATER)
    for mpijob in _of_kind(objs, "MPIJob"):
        if not runs_the_images_sshd(mpijob):  # an image of the operator's own: its own MPI
            continue
        ours = [
            (_here(where, c), c)
            for where, template in _templates(mpijob)
            for c in _main_containers(template)
            if _runs(c, "train", "pserver", "sshd")
        ]
        yield from _two_images(ours, MPIRUN_LATER)


def _unpullable(objs: Sequence[Manifest]) -> Iterator[str]:
    """Every container's image, init containers' too, of a pod that runs a shard, a rank or
    sshd that the kubelet cannot parse, in the renderer's words for ``--image``."""
    for obj in objs:
        for where, template in _templates(obj):
            if not runs_the_jobs_processes(template):  # a dashboard beside the job: not ours
                continue
            for container in _containers(template):
                image = container.get("image")
                if isinstance(image, str) and not is_image_reference(image):
                    yield (
                        f"{_here(where, container)}: image must be an image reference ({FORM}), "
                        f"got {image!r}: the pod would fail with InvalidImageName"
                    )


def _shard_job(objs: Sequence[Manifest]) -> list[tuple[str, Manifest]]:
    """(where, container) of the shards and of the ranks that train with them (a baseline
    beside them, ``--sync local``, is no part of their job); none where there are no shards."""
    shards = [(_here(where, c), c) for _, where, _, c, _ in _running(objs, "pserver")]
    if not shards:
        return []
    ranks = [
        (_here(where, c), c)
        for obj, where, _, c, _ in _running(objs, "train")
        if obj.get("kind") != "MPIJob" and trains_with_the_shards(c)
    ]
    return shards + ranks


def _two_images(containers: list[tuple[str, Manifest]], later: str) -> Iterator[str]:
    """One line where the ``containers`` of one job, each named by where it is, run two images
    (each one the kubelet can pull: another is named above), as the kubelet pulls them
    (:func:`~distconv.deploy.image_ref.pulled_image`: ``distconv`` and
    ``docker.io/library/distconv:latest`` are one): the first of each, as written."""
    first: dict[str, tuple[str, str]] = {}
    for here, container in containers:
        image = container.get("image")
        pulled = pulled_image(image) if isinstance(image, str) else None
        if pulled is not None:
            first.setdefault(pulled, (image, here))
    if len(first) > 1:
        (image, here), (other, there), *_ = first.values()
        yield (
            f"{here} runs image {image!r} but {there} runs {other!r}: one job on two images, "
            f"which may hold two builds of distconv and fail it only later ({later}); give "
            "both the same image, as a render gives a job one (two tags of one build: write "
            "one of them in both)"
        )
