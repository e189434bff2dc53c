"""A shell's ``exec`` is read with its options, as the shell reads them: bash's ``exec -c``
starts the rank with an empty environment (the pod's DISTCONV_WORLD_SIZE, DISTCONV_JOB_ID and
JOB_COMPLETION_INDEX gone), and was read as if it kept them; ``-a NAME`` and ``-l`` change
only the command's ``argv[0]``. Another shell (dash, the images' ``sh``) runs ``-c`` as a
command (``exec: -c: not found``): that string is left unread."""

from __future__ import annotations

import copy
import os
import shlex
import subprocess

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.walk import shell_command

pytestmark = pytest.mark.timeout(60)


def _objs_with(script_head: str, shell: str = "bash") -> list[dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [shell, "-c", script_head + shlex.join(container["args"])]
    return objs


@pytest.mark.parametrize("head", ["exec -c ", "exec -cl ", "exec -c -a rank ", "X=1 exec -c "])
def test_bash_exec_c_is_read_as_an_empty_environment(head):
    """Every rank starts without the pod's variables (the Job index too): the check passed
    the job."""
    problems = manifest_problems(_objs_with(head))
    assert any("takes JOB_COMPLETION_INDEX from them" in p for p in problems), problems
    assert any("job id 'local' (the default, without DISTCONV_JOB_ID)" in p for p in problems)


@pytest.mark.parametrize("head", ["exec ", "exec -a rank ", "exec -arank ", "exec -l ", "exec -- "])
def test_bash_exec_without_c_keeps_the_environment(head):
    assert manifest_problems(_objs_with(head)) == []
    argv = ["bash", "-c", f"{head}distconv train --epochs 1"]
    assert shell_command(argv, set()) == ["distconv", "train", "--epochs", "1"]


def test_bash_exec_c_reads_as_env_i():
    words = shell_command(["bash", "-c", "A=1 exec -ca x distconv train"], set())
    assert words == ["env", "-i", "distconv", "train"]


@pytest.mark.parametrize("shell", ["sh", "dash", "ash", "/bin/sh"])
@pytest.mark.parametrize("option", ["-c", "-a x", "--", "-l"])
def test_an_exec_option_under_another_shell_is_left_unread(shell, option):
    assert shell_command([shell, "-c", f"exec {option} distconv train"], set()) is None


def test_bash_with_an_exec_option_it_refuses_is_left_unread():
    assert shell_command(["bash", "-c", "exec -x distconv train"], set()) is None


def test_the_shells_do_what_the_reading_says(tmp_path):
    """bash's exec -c empties the environment, the variables set before it too; dash does
    not take the option at all."""
    env = {**os.environ, "KEPT": "1"}
    script = "X=1 exec -c env"
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "KEPT" not in out.stdout and "X=1" not in out.stdout
    dash = "/usr/bin/dash" if os.path.exists("/usr/bin/dash") else None
    if dash is not None:
        out = subprocess.run([dash, "-c", "exec -c env"], env=env, capture_output=True)
        assert out.returncode == 127
