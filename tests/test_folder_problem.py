"""distconv.files.folder_problem names only what truly stops ``mkdir -p``: a link into a
folder this user may not search is not 'not there', and a link that refuses readlink (a
/proc magic link) is a usage error, not a traceback out of argparse."""

from __future__ import annotations

import argparse
import errno
import os
import stat

import pytest

from distconv.files import folder, folder_problem


@pytest.mark.timeout(30)
def test_a_link_into_a_folder_out_of_reach_is_not_named_as_not_there(tmp_path, monkeypatch):
    """``runs -> /scratch/team/runs`` with ``team`` 0700 of another user: it was named
    'a symlink to /scratch/team/runs, not there', as if the scratch were unmounted; mkdir's
    own 'Permission denied' is the truth."""
    team = tmp_path / "team"
    (team / "runs").mkdir(parents=True)
    runs = tmp_path / "runs"
    runs.symlink_to(team / "runs")
    if os.geteuid() == 0:  # root searches any folder: stat fails as it does for a user
        real_stat = os.stat

        def refused(path, *args, **kwargs):
            if os.fspath(path) == str(runs):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real_stat(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", refused)
    else:
        team.chmod(0)
    try:
        assert folder_problem(runs / "j1") is None
    finally:
        team.chmod(stat.S_IRWXU)


@pytest.mark.timeout(30)
def test_a_link_that_refuses_readlink_is_a_usage_error(tmp_path, monkeypatch):
    """``/proc/1/cwd/keys`` (or ``/proc/2/exe/x``): stat and readlink both refused, and the
    readlink's PermissionError escaped argparse as a traceback."""
    link = tmp_path / "gone"
    link.symlink_to(tmp_path / "nowhere")

    def refused(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))

    monkeypatch.setattr(os, "readlink", refused)
    with pytest.raises(argparse.ArgumentTypeError, match=r"gone is a symlink to nowhere, not"):
        folder(str(link / "keys"))
