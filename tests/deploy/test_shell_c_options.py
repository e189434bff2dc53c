"""A shell's options written apart (``bash -l -c``, ``sh -e -c``, ``bash -o pipefail -c``,
``bash --login -c``) or after ``c`` (``sh -ce``) leave its ``-c`` string the command it runs,
as ``-lc`` does: such a string was left unread, so a rank's ``--out`` on the read-only root
passed."""

from __future__ import annotations

import copy
import shlex
import subprocess

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.walk import shell_command

pytestmark = pytest.mark.timeout(60)

FORMS = [
    ["bash", "-c"],
    ["bash", "-lc"],
    ["bash", "-l", "-c"],
    ["sh", "-e", "-c"],
    ["sh", "-ce"],
    ["bash", "-o", "pipefail", "-c"],
    ["bash", "-eo", "pipefail", "-c"],
    ["bash", "-O", "extglob", "-c"],
    ["bash", "--login", "-c"],
    ["bash", "--norc", "-ec"],
    ["sh", "-c", "--"],
]


@pytest.mark.parametrize("shell", FORMS, ids=" ".join)
def test_the_string_is_the_command_whatever_the_options(shell):
    argv = [*shell, "exec distconv train --epochs 1"]
    assert shell_command(argv, set()) == ["distconv", "train", "--epochs", "1"]
    # the shell itself runs the string so
    run = [*shell, "echo ran"] if shell[0] == "bash" or "-e" in shell else None
    if run is not None:
        out = subprocess.run(run, capture_output=True, text=True, timeout=30)
        assert out.stdout == "ran\n", out


@pytest.mark.parametrize("shell", FORMS, ids=" ".join)
def test_a_rank_in_such_a_shell_gets_the_checks(shell):
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    args[args.index("--out") + 1] = "/opt/run"
    container["args"] = [*shell, "exec " + shlex.join(args)]
    (problem,) = manifest_problems(objs)
    assert "--out /opt/run is on no writable volume" in problem


@pytest.mark.parametrize(
    "argv",
    [
        ["sh", "-e", "exec distconv train"],  # no -c: a script file named so
        ["bash", "-c", "exec distconv train", "sh", "--epochs", "1"],  # its $0, $1
        ["bash", "-l", "-c", "exec distconv train", "x"],
        ["dash", "--login", "-c", "exec distconv train"],  # dash: "Illegal option --"
        ["bash", "-o", "-c", "exec distconv train"],  # -o takes -c as its name
    ],
)
def test_what_is_no_one_command_string_stays_unread(argv):
    assert shell_command(argv, set()) is None
