"""Checks on the probes of a job's pods (part of :func:`distconv.deploy.check.manifest_problems`):
the kubelet GETs ``/readyz`` and ``/healthz`` on the health port of the pod's address, so a shard
or a rank must serve them there; an MPI worker pod, whose ranks start long after its sshd, checks
its ranks from inside and waits for them before it stops.
"""

from __future__ import annotations

import functools
import re
from argparse import ArgumentTypeError
from collections.abc import Iterator, Sequence

from distconv.deploy.check_ranks import _as_read
from distconv.deploy.check_shards import (
    ArgvRefused,
    _is_filled,
    expand,
    pserver_parser,
    shard_flag,
)
from distconv.deploy.counts import count
from distconv.deploy.loopback import answers_127_0_0_1, on_loopback
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _command_args,
    _digits,
    _flag,
    _here,
    _pod,
    _runs,
    _where,
    _words,
    spec_of,
)
from distconv.number_text import integer


def _probe_problems(here, container, health_ports) -> Iterator[str]:
    port_flag = _port_as_read(container)
    if port_flag is not None and (not _digits(port_flag) or int(port_flag) not in health_ports):
        yield f"{here}: --health-port {port_flag} is no container port named health"
    if _serves_nothing(container):  # a sidecar beside the ranks (a log shipper)
        return
    if " Launcher container " in here:  # mpirun runs no training code: nothing to probe
        yield from _mpi_ranks_serve(here, container)
        return
    ports = {p.get("name"): p.get("containerPort") for p in container.get("ports", [])}
    if "health" not in ports:
        yield f"{here}: no container port named health for the probes"
        return
    if " Worker container " in here:  # sshd, up long before mpirun starts any rank
        yield from _mpi_worker_probes(here, container)
        return
    yield from _probes_reach(here, container)
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container.get(probe, {}).get("httpGet", {})
        if get.get("path") != path or get.get("port") not in ("health", ports["health"]):
            yield f"{here}: {probe} must GET {path} on the health port, got {get or None}"
    yield from _startup_problems(here, container)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        yield from _get_reaches_the_server(here, probe, container.get(probe, {}).get("httpGet"))


def _startup_problems(here: str, container: Manifest) -> Iterator[str]:
    """A rank's startup probe must GET /readyz: its /healthz is 200 before the first beat, so
    one on that would pass at once. A shard's must GET /healthz: a shard whose job fails before
    worker 0 seeds it keeps /readyz at 503 for good, so a probe on that holds liveness off, and
    the failed shard refuses every worker, for the probe's whole window."""
    startup = container.get("startupProbe")
    if startup is None:
        return
    path = startup.get("httpGet", {}).get("path")
    if _command_args(_argv(container), "pserver") is None:
        if path != "/readyz":
            yield f"{here}: startupProbe must GET /readyz, got {startup.get('httpGet')}"
    elif path != "/healthz":
        yield (
            f"{here}: a shard's startupProbe must GET /healthz, got {startup.get('httpGet')} "
            "(/readyz stays 503 for a shard whose job failed before it was seeded: it would "
            "not be restarted)"
        )


def _get_reaches_the_server(here: str, probe: str, get: Manifest | None) -> Iterator[str]:
    """The kubelet sends an ``httpGet`` probe from the node to its ``host`` where one is set
    (127.0.0.1 is the node's own loopback there; a pod template cannot name each pod's
    address), else to the pod's address, and speaks TLS for ``scheme: HTTPS``: the health
    server answers plain HTTP on the pod's address, so either fails every probe."""
    if not get:
        return
    if get.get("host"):
        yield (
            f"{here}: {probe} sets host {get['host']!r}: the kubelet would ask that address "
            "from the node, not the pod's (leave host out)"
        )
    if get.get("scheme", "HTTP") != "HTTP":
        yield f"{here}: {probe} scheme {get['scheme']!r}: the health server speaks plain HTTP"


def _serves_nothing(container: Manifest) -> bool:
    """Whether ``container`` runs no shard, no rank and no sshd that starts MPI ranks, has no
    port named health and takes no ``--health-port``: a sidecar beside them (a log shipper),
    with no probes to serve."""
    if _runs(container, "train", "pserver", "sshd"):  # however started (:func:`_runs`)
        return False
    if _flag(_words(container), "--health-port") is not None:
        return False
    return all(p.get("name") != "health" for p in container.get("ports", []))


def _port_as_read(container: Manifest) -> str | None:
    """The ``--health-port`` a shard or a rank of ``container`` reads (abbreviated, ``$(VAR)``
    filled in as the kubelet does); None where none is given or only the cluster knows it."""
    argv = _argv(container)
    args = _command_args(argv, "pserver")
    if args is not None:
        return shard_flag(args, container, "health_port")[1]
    args = _command_args(argv, "train")
    train = argv if args is None else _as_read(args)[0]  # no distconv: the flag as written
    port = _flag(train, "--health-port", last=True)
    port = None if port is None else expand(port, container)
    return None if port is None or _is_filled(port) else _as_integer(port)


def _as_integer(text: str) -> str:
    """A rank's ``--health-port`` as it reads the number (``+8080`` and `` 8080`` are 8080, as
    the shard's parser gives it above), written out; as written where it reads none."""
    try:
        return str(integer(text))
    except ArgumentTypeError:  # the rank refuses it: no container port is that
        return text


def _probes_reach(here: str, container: Manifest) -> Iterator[str]:
    """The kubelet GETs the probes on the pod's address: a shard or rank that serves none
    (no ``--health-port``) or serves them on loopback only (``--health-host``, 127.0.0.1 when
    not given) fails them all, and its startup probe restarts it for ever. The flags are read
    as the process reads them (abbreviated, ``$(VAR)``); a value the cluster fills in passes."""
    for command in ("train", "pserver"):
        args = _command_args(_argv(container), command)
        if args is None:
            continue
        if command == "pserver":
            (given, port), (said, host) = (shard_flag(args, container, d) for d in _PROBE_DESTS)
            if said and host is None:  # a host only the cluster knows
                continue
        else:
            train, wrong = _as_read(args)
            if wrong is not None:  # named by _train_runs
                continue
            port, host = (_flag(train, f, last=True) for f in ("--health-port", "--health-host"))
            given = port is not None
            # the kubelet fills in $(VAR) before the rank reads it, as for a shard
            host = None if host is None else expand(host, container)
            # a host only the cluster knows passes, but not without a port: the rank refuses
            # --health-host without --health-port at start, which nothing else here names
            if given and _is_filled(host):
                continue
        if (not given or host is None) and _loose(command, args, container):
            continue  # a value the cluster fills in may be the missing flag
        if not given:
            yield f"{here}: no --health-port: nothing would answer the probes on the health port"
        elif port is not None and on_loopback(host or "127.0.0.1"):
            yield (
                f"{here}: --health-host {host or '127.0.0.1 (the default)'} is loopback: "
                "the kubelet probes the pod's address"
            )


def _loose(command: str, args: list[str], container: Manifest) -> bool:
    """Whether a ``$(VAR)`` the cluster fills in stands where a flag may go in ``args`` (as
    ``distconv pserver`` parses them; for a rank, :func:`may_hold_a_flag`): it may be any flag."""
    if command == "pserver":
        try:
            _, extra = pserver_parser().parse_known_args([expand(a, container) for a in args])
        except ArgvRefused:  # named by the shard's own check
            return True
        return any(_is_filled(a) for a in extra)
    return may_hold_a_flag(_as_read(args)[0])


def may_hold_a_flag(train: list[str]) -> bool:
    """Whether a ``$(VAR)`` in ``train`` (spelled out) stands where ``distconv train`` may read
    a flag: anywhere but as the value of a flag written apart from the value it takes
    (``--timeout $(T)``). After ``--timeout=20``, a switch (``--insecure``) or ``--resume``
    (its value optional), its ``--timeout=200`` or ``--health-port 8080`` would be read."""
    takes = _flags_taking_the_next()
    return any(a.startswith("$(") and b not in takes for b, a in zip([None, *train], train))


@functools.cache
def _flags_taking_the_next() -> frozenset[str]:
    """The options of ``distconv train`` that always take the token after them as their one
    value: not a switch's none, nor ``--resume``'s optional one."""
    from distconv.train_args import train_parser

    actions = train_parser()._actions  # argparse lists its options nowhere public
    return frozenset(s for a in actions if a.nargs in (None, 1) for s in a.option_strings)


_PROBE_DESTS = ("health_port", "health_host")


def _mpi_ranks_serve(here: str, container: Manifest) -> Iterator[str]:
    """The ranks an MPIJob's launcher starts serve ``/healthz`` on the health port, which the
    worker pods' liveness asks (:func:`_mpi_worker_probes`): without ``--health-port`` it finds
    no rank listening, passes for good, and a rank stuck in a collective is never restarted.
    A ``$(VAR)`` the cluster fills in where a flag may go may hold it."""
    args = _command_args(_argv(container), "train")
    if args is None:
        return
    train, wrong = _as_read(args)
    if wrong is None and _flag(train, "--health-port", last=True) is None:
        if not _loose("train", args, container):
            yield (
                f"{here}: no --health-port: the worker pods' liveness would find no rank to "
                "ask, and never restart a stalled one"
            )
    host = _flag(train, "--health-host", last=True) if wrong is None else None
    host = None if host is None else expand(host, container)  # as the kubelet passes it
    if host is not None and not _is_filled(host) and answers_127_0_0_1(host) is False:
        yield (
            f"{here}: --health-host {host}: the worker pods' liveness asks each rank on "
            "127.0.0.1, where it would find none, and never restart a stalled one"
        )


#: the ports an MPI worker pod's liveness script asks (``for port in range(8080, 8082)``)
_LIVENESS_PORTS = re.compile(r"range\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def _mpi_liveness_ports(objs: Sequence[Manifest]) -> Iterator[str]:
    """An MPI worker pod's liveness asks its ranks' ``/healthz`` on the ports its script counts
    and passes where none listens: a rank on another port (the launcher's ``--health-port`` +
    its local rank, up to ``slotsPerWorker``) is never asked, and one stuck in a collective is
    never restarted. A script that counts no ``range(A, B)``, or a port only the cluster
    knows, is not judged."""
    for obj in objs:
        if obj.get("kind") != "MPIJob":
            continue
        spec = spec_of(obj)
        replicas, slots = spec.get("mpiReplicaSpecs", {}), count(spec, "slotsPerWorker", 1)
        launcher = _pod(replicas.get("Launcher", {})).get("containers", [])
        ports = {_port_as_read(c) for c in launcher if _command_args(_argv(c), "train") is not None}
        for first in sorted(int(p) for p in ports if p is not None and _digits(p)):
            for container in _pod(replicas.get("Worker", {})).get("containers", []):
                exec_ = container.get("livenessProbe", {}).get("exec", {})
                asked = _LIVENESS_PORTS.search(" ".join(exec_.get("command", [])))
                low, stop = (int(asked[1]), int(asked[2])) if asked else (first, first + slots)
                if not (low <= first and first + slots <= stop):
                    yield (
                        f"{_here(_where(obj) + ' Worker', container)}: livenessProbe asks ports "
                        f"{low}-{stop - 1}, but the ranks listen on {first}-{first + slots - 1} "
                        f"(--health-port + local rank, {slots} slots): it would never restart "
                        "a stalled one there"
                    )


def _mpi_worker_probes(here: str, container: Manifest) -> Iterator[str]:
    for probe in ("readinessProbe", "startupProbe"):
        if probe in container:
            yield f"{here}: no {probe} on sshd: it would fail while the gang is scheduled"
    liveness = " ".join(container.get("livenessProbe", {}).get("exec", {}).get("command", []))
    if "/healthz" not in liveness:
        yield f"{here}: livenessProbe must check the running ranks' /healthz"
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command")
    # the ranks are `python -m mpi4py ...`; "distconv" would match sshd itself for ever
    if not pre_stop or "pi4py" not in " ".join(pre_stop):  # "[m]pi4py" too
        yield f"{here}: a preStop hook must wait while the ranks (python -m mpi4py) run"
