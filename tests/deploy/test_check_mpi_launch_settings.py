"""``distconv check-manifests`` refuses an MPIJob of distconv ranks that leaves
``mpiImplementation`` or ``sshAuthMountPath`` to the operator, or sets another value.

Both fields are optional in the operator's CRD, so the schema takes an MPIJob without them.
Its defaults break this image: under ``OpenMPI`` the operator names the worker pods in
``OMPI_MCA_orte_default_hostfile``, which the image's mpirun (MPICH's Hydra) ignores, so every
rank starts in the launcher pod; under ``/root/.ssh`` it mounts the keys where the image's sshd
does not read them, so every worker's sshd exits. The check passed both (exit 0).

Each test copies the repo's example into real files, edits it as an operator would, and runs
the real check command on the folder.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from distconv.deploy.check_mpi import OPERATOR_DEFAULTS
from distconv.deploy.mpijob import MPI_IMPLEMENTATION, SSH_AUTH_MOUNT_PATH, SSHD_CONFIG
from tests.deploy.hand_edits import copied_example, edit, one_problem, passes, problems, rendered
from tests.deploy.test_manifests import CRD, REPO_ROOT

pytestmark = pytest.mark.timeout(120)

MPIJOB_FILE = "mpijob-digits-mpi.yaml"
#: what the operator does with a host list it names in Open MPI's variable, or keys it mounts
#: where the image's sshd does not look
HOSTS_UNREAD = (
    "the operator names the worker pods to mpirun in {variable}, which the image's mpirun "
    "(MPICH's Hydra) does not read: it would start every rank in the launcher pod, and the "
    "worker pods would sit idle; set mpiImplementation: MPICH"
)
KEYS_UNREAD = (
    "the operator mounts its ssh keys there, but the image's sshd reads its host key and "
    "authorized_keys in /home/distconv/.ssh, and the launcher's ssh its identity: every "
    "worker's sshd would exit (no host key) and mpirun reach no worker pod; set "
    "sshAuthMountPath: /home/distconv/.ssh"
)


@functools.cache
def crd_default(field: str) -> str:
    """The default the operator's CRD gives an MPIJob's ``spec.FIELD``."""
    crd = yaml.safe_load(CRD.read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2beta1"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec["properties"][field]["default"]


def _set(field: str, value: object):
    def change(mpijob: dict) -> None:
        if value is None:
            del mpijob["spec"][field]
        else:
            mpijob["spec"][field] = value

    return change


def _unset(field: str) -> str:
    return f"{field} is unset, so the operator's default, {crd_default(field)}, applies"


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("mpiImplementation", None,
         f"{_unset('mpiImplementation')}: "
         + HOSTS_UNREAD.format(variable="OMPI_MCA_orte_default_hostfile")),
        ("mpiImplementation", "OpenMPI",
         "mpiImplementation is 'OpenMPI': "
         + HOSTS_UNREAD.format(variable="OMPI_MCA_orte_default_hostfile")),
        ("mpiImplementation", "Intel",
         "mpiImplementation is 'Intel': " + HOSTS_UNREAD.format(variable="I_MPI_HYDRA_HOST_FILE")),
        ("sshAuthMountPath", None, f"{_unset('sshAuthMountPath')}: {KEYS_UNREAD}"),
        ("sshAuthMountPath", "/root/.ssh", f"sshAuthMountPath is '/root/.ssh': {KEYS_UNREAD}"),
        ("sshAuthMountPath", "/home/distconv",
         f"sshAuthMountPath is '/home/distconv': {KEYS_UNREAD}"),
    ],
    ids=["implementation-unset", "openmpi", "intel", "mount-unset", "root", "home"],
)  # fmt: skip
def test_an_mpijob_the_operator_would_start_wrongly_is_named(
    tmp_path: Path, field: str, value: object, said: str
):
    folder = copied_example("mpijob", tmp_path)
    path = edit(folder / MPIJOB_FILE, _set(field, value))  # the CRD's schema takes it
    assert one_problem(folder) == ([str(path)], f"MPIJob digits-mpi: {said}")


def test_the_operators_defaults_named_are_its_crds():
    """The line names the default that applies where the field is unset: the CRD's own."""
    assert OPERATOR_DEFAULTS == {field: crd_default(field) for field in OPERATOR_DEFAULTS}
    assert set(OPERATOR_DEFAULTS) == {"mpiImplementation", "sshAuthMountPath"}


@pytest.mark.parametrize("mount", ["/home/distconv/.ssh/", "/home/distconv//.ssh"])
def test_the_images_ssh_directory_however_written_passes(tmp_path: Path, mount: str):
    folder = copied_example("mpijob", tmp_path)
    edit(folder / MPIJOB_FILE, _set("sshAuthMountPath", mount))
    passes(folder)


def test_an_mpijob_of_other_ranks_than_distconvs_is_not_judged(tmp_path: Path):
    """An MPIJob whose launcher runs no ``distconv train`` (another image's job beside this
    one) may use the operator's defaults: they are not this image's to judge."""
    folder = copied_example("mpijob", tmp_path)

    def other_job(mpijob: dict) -> None:
        for field in ("mpiImplementation", "sshAuthMountPath"):
            del mpijob["spec"][field]
        launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        (container,) = launcher["containers"]
        container["args"] = ["mpirun", "-np", "4", "/opt/app/solver"]

    edit(folder / MPIJOB_FILE, other_job)
    passes(folder)


def _own_image(sshd: list[str]):
    """The MPIJob on an image of the operator's own: Intel MPI, its sshd started with ``sshd``
    reading keys in /root/.ssh, its ranks still ``distconv train`` (installed in that image)."""

    def change(mpijob: dict) -> None:
        mpijob["spec"].update(mpiImplementation="Intel", sshAuthMountPath="/root/.ssh")
        for role in ("Launcher", "Worker"):
            (container,) = mpijob["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"]
            container["image"] = "registry.example.com/team/intel-mpi-train:3"
            if role == "Worker":
                container["args"] = sshd

    return change


def test_distconv_ranks_on_an_image_of_the_operators_own_are_not_judged(tmp_path: Path):
    """Intel MPI and keys in /root/.ssh are right for an image whose sshd is its own: only
    worker pods that start this image's sshd (its configuration file) run its MPICH."""
    folder = copied_example("mpijob", tmp_path)
    edit(folder / MPIJOB_FILE, _own_image(["/usr/sbin/sshd", "-De"]))
    passes(folder)


@pytest.mark.parametrize(
    "sshd",
    [
        ["/usr/sbin/sshd", "-Def", SSHD_CONFIG],
        ["/usr/sbin/sshd", "-De", f"-f{SSHD_CONFIG}"],
        ["/bin/sh", "-c", f"exec /usr/sbin/sshd -De -f {SSHD_CONFIG}"],
    ],
    ids=["flags-joined", "value-joined", "shell"],
)
def test_this_images_sshd_however_started_is_judged(tmp_path: Path, sshd: list[str]):
    folder = copied_example("mpijob", tmp_path)
    edit(folder / MPIJOB_FILE, _own_image(sshd))
    lines = problems(folder)
    assert [line.split(":", 1)[0] for line in lines] == ["MPIJob digits-mpi"] * 2, lines
    assert lines[0].startswith("MPIJob digits-mpi: mpiImplementation is 'Intel'"), lines


def test_the_expected_values_are_what_the_image_reads():
    """The renderer and the check share their values (``mpijob``); they are the image's: its
    sshd reads its host key and authorized_keys there, and its mpirun is MPICH's."""
    config = (REPO_ROOT / "docker" / "sshd_config").read_text(encoding="utf-8")
    read = re.findall(r"^(?:HostKey|AuthorizedKeysFile) (\S+)/[^/\s]+$", config, flags=re.M)
    assert read == [SSH_AUTH_MOUNT_PATH, SSH_AUTH_MOUNT_PATH]
    assert MPI_IMPLEMENTATION == "MPICH"
    dockerfile = (REPO_ROOT / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert f"COPY --chown=10001:10001 docker/sshd_config {SSHD_CONFIG}" in dockerfile


@pytest.mark.parametrize("example", ["mpijob", "mpijob-gpu"])
def test_the_examples_and_a_fresh_render_still_pass(tmp_path: Path, example: str):
    passes(copied_example(example, tmp_path))
    argv = ("--mpi", "--workers", "8", "--slots-per-worker", "4", "--image", "d:1")
    passes(rendered(tmp_path, *argv, "--gpus", "1" if example == "mpijob-gpu" else "0"))
