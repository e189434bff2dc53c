"""A CronJob whose Job runs the job's processes (part of
:func:`distconv.deploy.check.manifest_problems`): with ``concurrencyPolicy: Allow``, the
default, the CronJob controller starts the next run while the last one still runs, and the two
Jobs' pods claim the same ranks (each places its ranks from rank 0 of the shards' one world)
and write the same checkpoint directory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.programs import runs_the_jobs_processes
from distconv.deploy.walk import Manifest, _of_kind, _where, spec_of

#: the policies that never let two of a CronJob's Jobs run at once (the next run is skipped,
#: or the running Job is deleted first)
ONE_AT_A_TIME = ("Forbid", "Replace")
#: the policies the API server takes (validateConcurrencyPolicy); an empty one is defaulted
POLICIES = ("Allow", *ONE_AT_A_TIME)


def overlapping_runs(objs: Sequence[Manifest]) -> Iterator[str]:
    """A problem for each CronJob whose Job runs a shard, a rank, the sshd or the launcher
    (:func:`~distconv.deploy.programs.runs_the_jobs_processes`) and may run beside the Job of
    its last run: its ``concurrencyPolicy`` (unset or empty: ``Allow``) is not one of
    :data:`ONE_AT_A_TIME`. A CronJob that runs another program (a checkpoint backup) is not
    judged so; one whose policy is none the API server takes is named as such, whatever it
    runs."""
    for cron in _of_kind(objs, "CronJob"):
        spec = spec_of(cron)
        # only an empty string is defaulted: a number or a boolean (YAML's no) is refused
        policy = spec.get("concurrencyPolicy", "")
        policy = "Allow" if policy == "" else policy
        if not isinstance(policy, str) or policy not in POLICIES:
            yield (
                f"{_where(cron)}: concurrencyPolicy {policy!r} is none the API server takes "
                f"({', '.join(POLICIES)})"
            )
        elif policy not in ONE_AT_A_TIME and runs_the_jobs_processes(_pod_template(spec)):
            yield (
                f"{_where(cron)}: concurrencyPolicy {policy} lets a run start while the last "
                "one still runs, and the two Jobs would claim the same ranks and checkpoint "
                "directory: set concurrencyPolicy: Forbid (or Replace)"
            )


def _pod_template(spec: Manifest) -> Manifest:
    """The pod template of a CronJob's ``spec``; empty where its ``jobTemplate`` gives none
    (the API server refuses it; :mod:`~distconv.deploy.shapes` names it)."""
    job = spec.get("jobTemplate")
    job_spec = job.get("spec") if isinstance(job, dict) else None
    template = job_spec.get("template") if isinstance(job_spec, dict) else None
    return template if isinstance(template, dict) else {}
