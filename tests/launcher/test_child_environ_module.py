"""A child's environment (the launcher's, cleaned, plus the runtime's variables and the thread
pools' sizes) is a module of its own, :mod:`launcher.child_environ`; every name
:mod:`launcher.commands` held for it is still importable from there, as the CLI imports it."""

from __future__ import annotations

import launcher.child_environ
import launcher.commands
from tests.moved_names import assert_moved

MOVED = (
    "PLACEMENT_VARS",
    "PLACEMENT_PREFIXES",
    "BLAS_THREAD_VARS",
    "THREAD_VARS",
    "threads_per_process",
    "usable_cpus",
    "clean_environ",
    "JobEnv",
    "child_env",
)


def test_the_childs_environment_is_its_own_module_and_still_importable_from_commands():
    assert_moved(launcher.commands, launcher.child_environ, MOVED)
    job = launcher.commands.JobEnv("j", threads=3)
    env = launcher.child_environ.child_env({"PMI_RANK": "4", "HOME": "/h"}, job, "worker", 1, 2)
    assert env["RANK"] == "1" and env["HOME"] == "/h" and "PMI_RANK" not in env
    assert all(env[name] == "3" for name in launcher.commands.THREAD_VARS)
