"""The chief's line that ``resume="auto"`` found no checkpoint and trains a fresh run is said
where the user asked for ``"auto"``, not where a launcher's restart turned its first start's
``resume=False`` into ``"auto"`` (:meth:`~distconv.resume.JobStart.restarts_run_in`): that
restart goes on with its own run, and told a user who never typed ``--resume auto`` of it.
Real Trainers on real folders."""

from __future__ import annotations

import logging

import pytest

from distconv.resume import JobStart
from distconv.run_dir import RunDirectory
from tests.restart_job import small_trainer

FRESH = "--resume auto: no checkpoint in"


def _fresh_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(FRESH)]


@pytest.mark.timeout(60)
def test_resume_auto_asked_for_says_it_trains_afresh_once(tmp_path, small_data, caplog):
    caplog.set_level(logging.INFO, logger="distconv.resume")
    small_trainer(tmp_path / "run", job_id="j1", launch="a").fit(*small_data, resume="auto")
    assert _fresh_lines(caplog) == [
        f"{FRESH} {tmp_path / 'run'}: training a fresh run (in a script: resume='auto')"
    ]


@pytest.mark.timeout(60)
def test_a_restart_going_on_with_its_own_launchs_run_does_not_say_it(tmp_path, small_data, caplog):
    """The first start claimed the directory and died before its first checkpoint; its
    restart, given no resume, starts that run afresh as its own, without the line."""
    out = tmp_path / "run"
    first = RunDirectory(out)
    first.acquire()
    JobStart(job_id="j1", launch="a").claim(first)
    first.release()
    caplog.set_level(logging.INFO, logger="distconv.resume")
    restart = small_trainer(out, job_id="j1", launch="a", restart=1)
    assert [r["epoch"] for r in restart.fit(*small_data)] == [1]
    assert _fresh_lines(caplog) == []
