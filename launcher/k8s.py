"""``distconv-launch k8s``: the job's manifests from the deploy renderer, and what the cluster
must hold before they are applied (:func:`secrets_needed`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from distconv.files import describe_os_error

from .async_launch import async_retelling
from .commands import (
    LaunchError,
    UsageError,
    names_a_program,
    parse_program,
    refuse_owned_flags,
)
from .pyenv_shim import one_launch
from .shown import shown
from .stderr_line import write_last
from .stdout import write_stdout
from .train_words import not_a_program, reads_as_program

#: where the operator learns to make the parameter-server job's Secrets
SECRETS_DOCS = 'docs/kubernetes.md, "Deploying with parameter servers", step 1'


def mounted_secrets(objects: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the Secrets the pods of ``objects`` (rendered manifests) mount, in the
    order the manifests first mount them."""
    names: dict[str, None] = {}
    for obj in objects:
        template = obj.get("spec", {}).get("template", {})
        for volume in template.get("spec", {}).get("volumes", []):
            name = volume.get("secret", {}).get("secretName")
            if name is not None:
                names[name] = None
    return list(names)


def secrets_needed(objects: Sequence[dict[str, Any]], workers: int) -> str | None:
    """The line that names the Secrets the rendered ``objects`` mount and do not hold, and how
    to make them (the job's CURVE keys for ``workers`` workers); None where they mount none
    (an MPIJob). Applied without them, every pod stayed in ContainerCreating (``secret
    "distconv-server-keys" not found``), and the render had said nothing of them."""
    names = mounted_secrets(objects)
    if not names:
        return None
    return (
        f"the pods mount the Secrets {' and '.join(names)}, which the cluster must hold "
        f"before the manifests are applied: make them with 'distconv keys DIR --workers "
        f"{workers}' and 'kubectl create secret generic' ({SECRETS_DOCS})"
    )


def checked_manifests(args: argparse.Namespace, rest: Sequence[str]) -> list[dict[str, Any]]:
    """The manifests of ``distconv-launch k8s`` ``args`` with ``rest`` after ``--``, checked.

    Raises:
        UsageError: a train flag the deployment sets or excludes (``-- --rank 1``), or of the
            other transport (``--mpi -- --push-kb 3``); train's parse of the arguments; a
            value the renderer refuses of them (``-- --timeout 0.1`` beside shards).
        LaunchError: what the renderer refuses of the launch's own flags, or the checks of
            the manifests (``-- --out /opt/x`` on the read-only root).
    """
    try:
        from distconv.deploy import manifest_problems, render  # noqa: F401 (render: _render's)
    except ImportError as exc:
        raise LaunchError(
            f"the Kubernetes renderer distconv.deploy.render is missing: {exc}"
        ) from None
    # before parse_program, which would look for the program here, not in the image
    if names_a_program(rest):  # not 'distconv train --epochs 1': its words are dropped
        if not reads_as_program(rest[0]):  # '-- epochs 2': a train flag's dashes left out
            image = "k8s renders distconv train jobs: a program of yours goes in the image"
            raise UsageError(f"{not_a_program(rest[0], rest[1:])} ({image})")
        raise LaunchError("k8s renders distconv train jobs; put the program in the image instead")
    with async_retelling(args, rest):  # '-- --mode async': this render with shards, async
        program = parse_program(rest)
    try:
        objects = _render(args, program.argv)
    except ValueError as exc:  # the renderer's check of the job's shape, or of a train flag
        raise _refusal(exc) from None
    # the renderer refused the flags it sets (in the pods' arguments or environment): what
    # is left to check is a flag of the other transport, a usage error (exit 2) as local's
    # and mpi's, before the manifests' check would say it as a problem of theirs (exit 1)
    refuse_owned_flags(program, {}, "mpi" if objects[0]["kind"] == "MPIJob" else "pserver")
    # what the schema cannot see (e.g. a train --out on the read-only root) would fail only
    # in the cluster, at the first checkpoint: refuse it here, before anything is applied
    problems = manifest_problems(objects)
    if problems:
        raise LaunchError(f"the manifests would not work: {'; '.join(problems)}")
    return objects


def _render(args: argparse.Namespace, train_args: Sequence[str]) -> list[dict[str, Any]]:
    """The deploy renderer's manifests of ``args`` with ``train_args``; its ValueError as is."""
    from distconv.deploy import render

    return render.render_manifests(
        job_name=args.job_name,
        workers=args.workers,
        servers=(0 if args.mpi else 1) if args.servers is None else args.servers,
        image=args.image,
        gpus=args.gpus,
        train_args=list(train_args),
        mode=args.mode,
        slots_per_worker=args.slots_per_worker,
        mpi=True if args.mpi else None,
        ipv6=args.ipv6,
        max_staleness=args.max_staleness,
    )


def _refusal(exc: ValueError) -> LaunchError:
    """The renderer's refusal ``exc`` as the launcher's: a usage error (exit 2, as local's and
    mpi's refusals of train arguments) where it refuses the train arguments alone
    (:class:`~distconv.deploy.train_values.TrainArgsError`, raised once the launch's own flags
    pass): a flag the deployment sets or excludes (``-- --rank 1``), or a value of theirs
    (``-- --timeout 0.1`` beside shards, which ``distconv-launch local`` refuses with exit 2
    too). Else a plain LaunchError, exit 1: the launch's own flags (``--job-name``); and bytes
    no manifest can hold (not UTF-8), in a train argument as in ``--image``."""
    from distconv.deploy.train_values import TrainArgsError

    if isinstance(exc, TrainArgsError):
        return UsageError(str(exc))
    return LaunchError(str(exc))


@one_launch()
def run_k8s(args: argparse.Namespace, rest: list[str]) -> int:
    """``distconv-launch k8s``: render the job's manifests with the deploy renderer; then say
    on stderr which Secrets the cluster must hold first (:func:`secrets_needed`)."""
    from distconv.deploy import render

    objects = checked_manifests(args, rest)
    notes = [secrets_needed(objects, args.workers)]
    if args.out:
        try:
            render.write_manifests(objects, args.out)
        except ValueError as exc:  # the folder holds another job's manifests
            raise LaunchError(str(exc)) from None
        except OSError as exc:  # it said '[Errno 2] No such file or directory: ...', no flag
            why = describe_os_error(exc)
            raise LaunchError(f"--out {shown(args.out)}: cannot write there: {why}") from None
        notes.insert(0, f"wrote {len(objects)} object(s) to {shown(args.out)}")
    else:
        write_stdout(render.dump_yaml(objects), "the manifests", "pass --out DIR for the manifests")
    said = "\n".join(note for note in notes if note)
    if said:
        write_last(said)  # bounded, one write for both lines: stderr may stall
    return 0
