"""``distconv check-manifests`` names the images of a job's pods that would fail it: one the
kubelet cannot parse (every pod stays in ``InvalidImageName``; ``distconv-launch k8s --image``
refuses it, and the check passed it), and a job whose shards and workers, or an MPIJob's
Launcher and Worker, run different images (a tag edited in one file of three: one job on two
builds). Each test copies the shipped ``k8s/`` example to real files, edits its images by
hand, and runs the real check command on the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.deploy.image_ref import FORM
from tests.deploy.hand_edits import (
    assert_examples_still_pass,
    copied_example,
    edit,
    passes,
    problems,
)

pytestmark = pytest.mark.timeout(120)

SHARDS = "statefulset-digits-ps-pserver.yaml"
WORKERS = "job-digits-ps-worker.yaml"
MPIJOB = "mpijob-digits-mpi.yaml"
PUSHED = "registry.example.com/ml/distconv:0.1.0-72d553ae1234"
#: why a job on two builds may fail, as the line says it, by its kind
SHARDS_LATER = "a shard of another build at its first checkpoint"
MPIRUN_LATER = "the launcher's mpirun starting the workers' ranks of another build"


def _image(image: str, role: str | None = None):
    """An edit that sets the image of the one container of a Job's or StatefulSet's pods, or
    of an MPIJob's ``role`` replica's pods."""

    def change(obj: dict) -> None:
        spec = obj["spec"]
        template = spec["template"] if role is None else spec["mpiReplicaSpecs"][role]["template"]
        (container,) = template["spec"]["containers"]
        container["image"] = image

    return change


def _two_builds(first: str, image: str, second: str, other: str, later: str) -> str:
    return (
        f"{first} runs image {image!r} but {second} runs {other!r}: one job on two images, "
        f"which may hold two builds of distconv and fail it only later ({later}); give both "
        "the same image, as a render gives a job one (two tags of one build: write one of "
        "them in both)"
    )


@pytest.mark.parametrize(
    "image",
    [
        "registry.example.com/ml/Distconv:0.1.0",  # a repository in capitals
        "distconv:",  # an empty tag
        "distconv@sha256:abc",  # a digest cut short
    ],
)
def test_an_image_the_kubelet_cannot_parse_is_named_in_the_renderers_words(tmp_path, image):
    folder = copied_example("pserver", tmp_path)
    for name in (SHARDS, WORKERS):  # the tag edited in every file, as the docs ask
        edit(folder / name, _image(image))
    assert problems(folder) == [
        f"{where}: image must be an image reference ({FORM}), got {image!r}: the pod would "
        "fail with InvalidImageName"
        for where in ("Job digits-ps-worker container worker",
                      "StatefulSet digits-ps-pserver container pserver")
    ]  # fmt: skip


def test_an_init_containers_image_of_a_shards_pod_is_judged_too(tmp_path):
    folder = copied_example("pserver", tmp_path)

    def with_init(sts: dict) -> None:
        pod = sts["spec"]["template"]["spec"]
        (shard,) = pod["containers"]
        pod["initContainers"] = [{**shard, "name": "smoke", "image": "Distconv:1",
                                  "args": ["pserver", "--help"]}]  # fmt: skip
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            pod["initContainers"][0].pop(probe, None)

    edit(folder / SHARDS, with_init)
    (problem,) = problems(folder)
    assert problem.startswith(
        "StatefulSet digits-ps-pserver container smoke: image must be an image reference ("
    ), problem
    assert problem.endswith("got 'Distconv:1': the pod would fail with InvalidImageName")


def test_workers_on_another_image_than_their_shards_are_named_with_both(tmp_path):
    folder = copied_example("pserver", tmp_path)
    edit(folder / WORKERS, _image(PUSHED))
    assert problems(folder) == [
        _two_builds("StatefulSet digits-ps-pserver container pserver", "distconv:0.1.0",
                    "Job digits-ps-worker container worker", PUSHED, SHARDS_LATER)
    ]  # fmt: skip
    edit(folder / SHARDS, _image(PUSHED))  # the same tag in both: one build
    passes(folder)


@pytest.mark.parametrize(
    "edited, kept",
    [("Launcher", "Worker"), ("Worker", "Launcher")],
)
def test_an_mpijobs_launcher_and_worker_on_two_images_are_named(tmp_path, edited, kept):
    folder = copied_example("mpijob", tmp_path)
    edit(folder / MPIJOB, _image(PUSHED, edited))
    images = {edited: PUSHED, kept: "distconv:0.1.0"}
    assert problems(folder) == [
        _two_builds("MPIJob digits-mpi Launcher container launcher", images["Launcher"],
                    "MPIJob digits-mpi Worker container worker", images["Worker"], MPIRUN_LATER)
    ]  # fmt: skip
    edit(folder / MPIJOB, _image(PUSHED, kept))
    passes(folder)


def test_a_pod_beside_the_job_on_an_image_of_its_own_is_not_judged(tmp_path: Path):
    """A dashboard beside the shards runs no shard, rank nor sshd: its image is its own."""
    folder = copied_example("pserver", tmp_path)
    (folder / "deployment-dashboard.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: board, labels: {"
        "app.kubernetes.io/name: d, app.kubernetes.io/instance: d, "
        "app.kubernetes.io/component: board}}\n"
        "spec:\n  selector: {matchLabels: {app: board}}\n  template:\n    metadata: {labels: {"
        "app: board, app.kubernetes.io/name: d, app.kubernetes.io/instance: d, "
        "app.kubernetes.io/component: board}}\n    spec:\n"
        "      securityContext: {runAsNonRoot: true, runAsUser: 10001}\n"
        "      containers:\n      - name: board\n        image: Grafana:latest\n"
        "        securityContext: {allowPrivilegeEscalation: false}\n"
        "        resources: {requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}\n"
    )
    passes(folder)


def test_the_examples_still_pass(tmp_path):
    assert_examples_still_pass(tmp_path)


@pytest.mark.parametrize(
    ("shards", "workers"),
    [
        ("distconv:0.1.0", "docker.io/library/distconv:0.1.0"),
        ("distconv", "index.docker.io/library/distconv:latest"),
        (f"{PUSHED}@sha256:{'ab' * 32}", f"registry.example.com/ml/distconv@sha256:{'ab' * 32}"),
    ],
    ids=["docker-hub-spelled-out", "latest-spelled-out", "digest-with-and-without-its-tag"],
)
def test_one_image_written_two_ways_is_one_image(tmp_path, shards, workers):
    """The kubelet pulls each pair as one image: Docker Hub's ``library/`` and ``:latest`` are
    what a short name means, and an image given by digest is pulled by it, its tag aside."""
    folder = copied_example("pserver", tmp_path)
    edit(folder / SHARDS, _image(shards))
    edit(folder / WORKERS, _image(workers))
    passes(folder)


def test_two_registries_or_digests_are_two_images(tmp_path):
    folder = copied_example("pserver", tmp_path)
    edit(folder / SHARDS, _image(f"{PUSHED}@sha256:{'ab' * 32}"))
    edit(folder / WORKERS, _image(f"{PUSHED}@sha256:{'cd' * 32}"))
    (problem,) = problems(folder)
    assert problem.startswith("StatefulSet digits-ps-pserver container pserver runs image "), (
        problem
    )


def test_an_mpijob_of_the_operators_own_image_may_give_its_launcher_another(tmp_path):
    """A Launcher image apart from the Workers' is common in MPIJobs of an image of one's own
    (its sshd not this image's): only this image's job is held to one image."""
    folder = copied_example("mpijob", tmp_path)

    def own_images(mpijob: dict) -> None:
        _image("registry.example.com/team/mpi-launcher:3", "Launcher")(mpijob)
        _image("registry.example.com/team/mpi-train:3", "Worker")(mpijob)
        (worker,) = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
        worker["args"] = ["/usr/sbin/sshd", "-De"]
        mpijob["spec"].update(mpiImplementation="Intel", sshAuthMountPath="/root/.ssh")

    edit(folder / MPIJOB, own_images)
    passes(folder)
