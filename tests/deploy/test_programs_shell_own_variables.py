"""The variables a shell sets itself as it starts (``PPID``, ``PWD``, ``IFS``, ``OPTIND``;
bash's ``SHLVL``, ``RANDOM``...) hold the shell's value, not the pod's ``env`` value of the same
name (``env -i PPID=x sh -c 'echo $PPID'`` prints the parent's pid). A ``$PPID`` in a rank's
string was filled in from the pod's env, and a ``$PWD`` in a sidecar's program read as a value
only the cluster knows under an ``envFrom``."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import fill_in_variables
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job
from tests.deploy.test_programs_shell_sync import _shell_pod

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("name", ["PPID", "PWD", "IFS", "OPTIND", "SHLVL", "RANDOM"])
def test_a_variable_the_shell_sets_is_not_filled_in_from_the_pods_env(name):
    assert fill_in_variables(f"exec run ${name}", {name: "pserver"}) == f"exec run ${name}"


def test_one_the_string_sets_first_is_filled_in():
    assert fill_in_variables("PWD=/x; exec run $PWD", {}) == "PWD=/x exec run /x"


def test_a_rank_whose_sync_is_the_shells_own_variable_is_not_taken_from_the_env():
    """The shell's pid is no transport: the string stays unread, as one of an unknown value."""
    assert manifest_problems(_shell_pod("$PPID", [{"name": "PPID", "value": "pserver"}])) == []


def test_a_sidecar_run_from_the_shells_working_directory_runs_no_rank():
    command = ["sh", "-c", "cd /opt/backup && exec $PWD/backup.sh"]
    env_from = [{"configMapRef": {"name": "c"}}]
    assert manifest_problems(_beside_the_job(command, [], env_from)) == []


def test_a_program_only_the_cluster_knows_is_still_held():
    command = ["sh", "-c", "cd /opt && exec $PROG"]
    env_from = [{"configMapRef": {"name": "c"}}]
    assert _GRACE in manifest_problems(_beside_the_job(command, [], env_from))
