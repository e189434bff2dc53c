"""``runuser -u app --``, ``sudo -u app``, ``doas -u app``, ``chpst -u app``, ``setpriv
--reuid ...``, ``s6-setuidgid app`` and ``chroot /srv`` run the command after them, as ``gosu``
does, but were read as the program: a program only the cluster knows behind one
(``sh -c 'runuser -u app -- $PROG'``) was read as another program and let through with the
default 30 s grace period, and an ``echo`` behind one was read as running a rank."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.commands import command_starts
from tests.deploy.test_programs_first_command import (
    _FROM_CLUSTER,
    _GRACE,
    _RANK,
    _beside_the_job,
)

pytestmark = pytest.mark.timeout(60)

_WRAPPED = {
    "runuser": ["runuser", "-u", "app", "-g", "app", "--"],
    "runuser-long": ["runuser", "--user", "app", "--whitelist-environment", "PATH", "--"],
    "sudo": ["sudo", "-E", "-u", "app", "-g", "app"],
    "sudo-long": ["sudo", "--preserve-env", "--user=app", "--chdir", "/w", "--"],
    "doas": ["doas", "-n", "-u", "app"],
    "chpst": ["chpst", "-u", "app:app", "-o", "4096", "-/", "/srv"],
    "setpriv": ["setpriv", "--reuid", "1000", "--regid=1000", "--clear-groups"],
    "s6-setuidgid": ["s6-setuidgid", "app"],
    "chroot": ["chroot", "--userspec", "app:app", "/srv"],
}


@pytest.mark.parametrize("wrapper", list(_WRAPPED), ids=list(_WRAPPED))
def test_a_program_only_the_cluster_knows_behind_a_wrapper_is_held(wrapper):
    command = ["sh", "-c", " ".join([*_WRAPPED[wrapper], "$PROG", "--epochs", "3"])]
    assert _GRACE in manifest_problems(_beside_the_job(command, _FROM_CLUSTER, []))


@pytest.mark.parametrize("wrapper", list(_WRAPPED), ids=list(_WRAPPED))
def test_an_echo_behind_a_wrapper_runs_no_rank(wrapper):
    command = [*_WRAPPED[wrapper], "echo", *_RANK.split()]
    assert manifest_problems(_beside_the_job(command, [], [])) == []


@pytest.mark.parametrize("wrapper", list(_WRAPPED), ids=list(_WRAPPED))
def test_the_command_behind_the_wrapper_is_its_program(wrapper):
    words = [*_WRAPPED[wrapper], "rclone", "sync", "/a", "s3:b"]
    assert command_starts(words) == [len(_WRAPPED[wrapper])]


def test_a_login_shell_string_of_runuser_is_no_program_only_the_cluster_knows():
    """su's form (``runuser -l app -c STRING``): ``app`` is a user, not a variable."""
    command = ["runuser", "-l", "app", "-c", "rclone sync /a s3:b"]
    assert manifest_problems(_beside_the_job(command, _FROM_CLUSTER, [])) == []
