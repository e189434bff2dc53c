"""The kubelet GETs the probes on the pod's address: a shard or a rank that serves none (no
--health-port) or serves them on loopback only (--health-host 127.0.0.1, the default) fails
every probe, and its startup probe restarts it for ever. The checks name both, reading the flags
as the process does."""

from __future__ import annotations

import copy
import ssl
import urllib.error
import urllib.request

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.service import ServiceEndpoints

pytestmark = pytest.mark.timeout(60)

HOST = {"name": "HOST", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}


def _problems(kind: str, edit) -> list[str]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    container["env"].append(HOST)
    args = container["args"]
    edit(args)
    return [p for p in manifest_problems(objs) if "health" in p]


def _drop(flag: str):
    def edit(args: list[str]) -> None:
        i = args.index(flag)
        del args[i : i + 2]

    return edit


def _set(flag: str, value: str | None = None, spelled: str | None = None):
    def edit(args: list[str]) -> None:
        i = args.index(flag)
        args[i] = spelled or flag
        if value is not None:
            args[i + 1] = value

    return edit


def _judged(problems: list[str], refused: bool, start: str, saying: str) -> None:
    """``problems`` is one that starts with ``start`` and says ``saying`` if ``refused``,
    else none."""
    if refused:
        (problem,) = problems
        assert problem.startswith(start), problem
        assert saying in problem, problem
    else:
        assert problems == [], problems


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda args: None, None),
        (_set("--health-host", "::"), None),
        (_set("--health-host", "$(HOST)"), None),  # only the cluster knows it
        (_set("--health-host", None, "--health-ho"), None),  # abbreviated, as argparse reads it
        (_set("--health-host", "127.0.0.1"), "--health-host 127.0.0.1 is loopback"),
        (_set("--health-host", "localhost"), "--health-host localhost is loopback"),
        (_drop("--health-host"), "--health-host 127.0.0.1 (the default) is loopback"),
        (lambda a: (_drop("--health-host")(a), _drop("--health-port")(a)), "no --health-port"),
        (lambda a: (_drop("--health-host")(a), a.append("$(HOST)")), None),  # may be the flag
        # after a flag written with its value, or a switch, it may be the flag too; not as the
        # value of a flag written apart
        (lambda a: (_drop("--health-host")(a), a.extend(["--timeout=20", "$(HOST)"])), None),
        (lambda a: (_drop("--health-host")(a), a.extend(["--insecure", "$(HOST)"])), None),
        (
            lambda a: (_drop("--health-host")(a), a.extend(["--timeout", "$(HOST)"])),
            "--health-host 127.0.0.1 (the default) is loopback",
        ),
    ],
)
def test_probes_the_kubelet_cannot_reach_are_refused(kind, edit, words):
    problems = _problems(kind, edit)
    if words is None:
        assert problems == []
    else:
        (problem,) = problems
        assert words in problem and problem.startswith(f"{kind} j-"), problem


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.2", True),  # all of 127.0.0.0/8 is loopback
        ("127.1", True),  # the C library's short form of 127.0.0.1
        ("0:0:0:0:0:0:0:1", True),  # ::1 written out
        ("::ffff:127.0.0.1", True),
        ("[::1]", True),  # the health server strips the brackets URLs write
        ("[127.0.0.1]", True),
        ("[::]", False),
        ("LOCALHOST", True),  # names are matched without regard to case
        ("ip6-localhost", True),  # in the kubelet's /etc/hosts
        ("10.0.0.7", False),
        ("fd00::2", False),
        ("0.0.0.0", False),
        ("my-pod.example", False),  # resolved in the pod: not judged
    ],
)
def test_a_loopback_host_however_written_is_refused(kind, host, loopback):
    """The health server binds what the socket makes of --health-host: the check reads it so,
    not by its spelling (127.0.0.2 and 127.1 were accepted, and no probe could reach them)."""
    problems = _problems(kind, _set("--health-host", host))
    if loopback:
        (problem,) = problems
        assert f"--health-host {host} is loopback" in problem, problem
    else:
        assert problems == []


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
@pytest.mark.parametrize(
    "value, loopback", [("127.0.0.1", True), ("localhost", True), ("0.0.0.0", False)]
)
def test_a_host_the_manifest_gives_in_a_variable_is_read_filled_in(kind, value, loopback):
    """The kubelet fills in ``--health-host $(H)`` from the container's own H before a rank or a
    shard reads it: a loopback value there is refused for both (a rank's was accepted)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    container["env"].append({"name": "H", "value": value})
    _set("--health-host", "$(H)")(container["args"])
    problems = [p for p in manifest_problems(objs) if "health" in p]
    if loopback:
        (problem,) = problems
        assert f"--health-host {value} is loopback" in problem, problem
    else:
        assert problems == []


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
@pytest.mark.parametrize(
    "spelled, value, env, wrong",
    [
        ("--health-po", "9090", None, True),  # abbreviated, as argparse reads it
        ("--health-port", "$(P)", "9090", True),
        ("--health-port", "$(P)", "8080", False),  # the health port, from a variable
        ("--health-port", "$(P)", None, False),  # only the cluster knows it: not judged
        ("--health-port", "8080", None, False),
        # the number as distconv train reads it (number_text.integer): 8080
        ("--health-port", "+8080", None, False),
        ("--health-port", " 8080", None, False),
    ],
)
def test_the_health_port_is_compared_as_the_process_reads_it(kind, spelled, value, env, wrong):
    """The probes GET the container port named health: a shard or a rank that serves them on
    another fails them all. Its --health-port is read as the process reads it, so an abbreviated
    flag is compared too (it was accepted) and a $(VAR) holding the health port passes (it was
    refused)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    container["env"].append(
        {"name": "P", "value": env} if env is not None else HOST | {"name": "P"}
    )
    _set("--health-port", value, spelled)(container["args"])
    problems = [p for p in manifest_problems(objs) if "health" in p]
    if wrong:
        (problem,) = problems
        assert "--health-port 9090 is no container port named health" in problem, problem
    else:
        assert problems == []


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
def test_a_host_only_the_cluster_knows_without_a_port_is_refused(kind):
    """--health-host $(VAR) the cluster fills in, but no --health-port: the rank or the shard
    refuses it at start (no probes to set), and the check says so. A rank's passed once its
    $(VAR) was read filled in."""
    edit = lambda a: (_set("--health-host", "$(HOST)")(a), _drop("--health-port")(a))  # noqa: E731
    (problem,) = _problems(kind, edit)
    assert "--health-port" in problem and problem.startswith(f"{kind} j-"), problem


@pytest.mark.parametrize(
    "edit, refused",
    [
        (lambda args: None, False),
        (lambda a: (_drop("--health-host")(a), _drop("--health-port")(a)), True),
        (_drop("--health-port"), True),
        (_set("--health-port", None, "--health-po"), False),  # abbreviated, as the rank reads it
        (lambda a: (_drop("--health-port")(a), a.append("$(HOST)")), False),  # may be the flag
        # after a flag written with its value, or a switch, it stands where a flag goes too
        (lambda a: (_drop("--health-port")(a), a.extend(["--epochs=2", "$(HOST)"])), False),
        (lambda a: (_drop("--health-port")(a), a.extend(["--no-progress", "$(HOST)"])), False),
        (lambda a: (_drop("--health-port")(a), a.extend(["--epochs", "$(HOST)"])), True),
    ],
)
def test_mpi_ranks_without_a_health_port_are_refused(edit, refused):
    """The worker pods' liveness asks the /healthz of each rank on the health port: ranks
    started without --health-port serve none, so it found no rank, passed for good, and never
    restarted a rank stuck in a collective; the checks passed such an MPIJob."""
    objs = copy.deepcopy(
        render_manifests(
            job_name="j", workers=2, servers=0, image="d:1", train_args=["--epochs", "2"]
        )
    )
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]
    (container,) = launcher["template"]["spec"]["containers"]
    container["env"].append(HOST)
    edit(container["args"])
    _judged(
        manifest_problems(objs),
        refused,
        "MPIJob j Launcher container launcher: no --health-port",
        "liveness would find no rank",
    )


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
@pytest.mark.parametrize(
    "field, value, words",
    [
        ("host", "127.0.0.1", "sets host '127.0.0.1': the kubelet would ask that address"),
        ("host", "j-pserver", "sets host 'j-pserver'"),
        ("scheme", "HTTPS", "scheme 'HTTPS': the health server speaks plain HTTP"),
        ("scheme", "HTTP", None),
    ],
)
def test_probes_sent_elsewhere_or_over_tls_are_refused(kind, field, value, words):
    """A probe with ``host`` (127.0.0.1 is the node's loopback, where the kubelet runs) or
    ``scheme: HTTPS`` fails every time, and the startup probe restarts the pod for ever; the
    checks passed both."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    probes = ("startupProbe", "readinessProbe", "livenessProbe")
    for probe in probes:
        container[probe]["httpGet"][field] = value
    problems = manifest_problems(objs)
    if words is None:
        assert problems == []
    else:
        assert len(problems) == 3, problems
        for probe, problem in zip(probes, problems):
            assert problem.startswith(f"{kind} j-") and f"{probe} {words}" in problem, problem


def test_the_health_server_answers_no_tls():
    """What ``scheme: HTTPS`` would meet: the probes' server speaks plain HTTP only."""
    with ServiceEndpoints(role="worker", rank=0) as service:
        port = service.start("127.0.0.1", 0)
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with pytest.raises(urllib.error.URLError, match="SSL"):
            urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=context, timeout=5)


@pytest.mark.parametrize(
    "host, refused",
    [
        ("0.0.0.0", False),  # rendered
        ("::", False),  # both families
        ("127.0.0.1", False),  # where the liveness dials
        ("localhost", False),
        ("$(HOST)", False),  # only the cluster knows
        ("::1", True),
        ("127.0.0.2", True),
        ("10.0.0.5", True),
    ],
)
def test_mpi_ranks_the_worker_liveness_cannot_reach_are_refused(host, refused):
    """An MPI worker pod's liveness dials each rank's /healthz on 127.0.0.1: ranks whose
    probes listen elsewhere (::1, 127.0.0.2, one address of the pod) were never found, so the
    liveness passed for good; the checks passed such an MPIJob."""
    objs = copy.deepcopy(
        render_manifests(
            job_name="j", workers=2, servers=0, image="d:1", train_args=["--epochs", "2"]
        )
    )
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]
    (container,) = launcher["template"]["spec"]["containers"]
    container["env"].append(HOST)
    _set("--health-host", host)(container["args"])
    _judged(
        manifest_problems(objs),
        refused,
        f"MPIJob j Launcher container launcher: --health-host {host}:",
        "liveness asks each rank on 127.0.0.1",
    )


@pytest.mark.parametrize(
    "port, slots, refused",
    [
        ("8080", 2, False),  # rendered: the liveness asks 8080-8081
        ("9090", 2, True),  # another --health-port, the container port moved with it
        ("$(PORT)", 2, False),  # only the cluster knows
        ("8080", 4, True),  # more slots than the liveness counts: ranks on 8082-8083
        ("8081", 2, True),  # the second rank on 8082
    ],
)
def test_mpi_ranks_on_ports_the_worker_liveness_does_not_ask_are_refused(port, slots, refused):
    """An MPI worker pod's liveness asks the ports its script counts (8080 up to the slots it
    was rendered for) and passes where none listens: ranks on other ports (another
    --health-port, slotsPerWorker raised) were never asked, so a stalled one was never
    restarted; the checks passed such an MPIJob."""
    objs = copy.deepcopy(
        render_manifests(job_name="j", workers=4, servers=0, image="d:1", slots_per_worker=2)
    )
    mpijob = objs[0]
    mpijob["spec"]["slotsPerWorker"] = slots
    replicas = mpijob["spec"]["mpiReplicaSpecs"]
    (launcher,) = replicas["Launcher"]["template"]["spec"]["containers"]
    launcher["env"].append({**HOST, "name": "PORT"})
    _set("--health-port", port)(launcher["args"])
    (worker,) = replicas["Worker"]["template"]["spec"]["containers"]
    for container_port in worker["ports"]:
        if container_port["name"] == "health" and port.isdigit():
            container_port["containerPort"] = int(port)
    # slotsPerWorker 4 leaves a pod idle and its threads oversubscribed too: other checks' lines
    _judged(
        [problem for problem in manifest_problems(objs) if "livenessProbe" in problem],
        refused,
        "MPIJob j Worker container worker: livenessProbe asks ports",
        "8080-8081, but the ranks listen on",
    )
