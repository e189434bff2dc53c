"""The types of the fields a job's checks read (part of
:func:`distconv.deploy.check.manifest_problems`).

A manifest is YAML that people write: a ``spec`` may be missing or a string, ``labels`` a list,
an ``env`` entry a number. The API server refuses such an object; the checks, which index and
``.get`` the fields they read, stopped with a traceback on it, and judged nothing else.
:func:`well_typed` names each field of a type the API server refuses, once, and hands the
checks the objects without it (as if it were not written), so that what else is wrong with
them is named all the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from distconv.deploy.bounds import refuse_unreadable
from distconv.deploy.counts import _is_count, known_count, whole_quantity
from distconv.deploy.walk import (
    GENERATED,
    HOST_NAME_MAX,
    Manifest,
    _namespace,
    _of_kind,
    _where,
    as_applied,
    metadata_of,
    object_name,
    spec_of,
)


@dataclass(frozen=True)
class Required:
    """A field the API server needs: an entry without it (a volume with no ``name``) is refused,
    and is judged as if it were not written."""

    rule: Any


@dataclass(frozen=True)
class Each:
    """A mapping whose every value follows ``rule`` (an MPIJob's ``mpiReplicaSpecs``)."""

    rule: Any


@dataclass(frozen=True)
class NamedElsewhere:
    """A field whose wrong type another check names (``metadata``:
    :func:`~distconv.deploy.walk.metadata_problem`): left as it is where it does not fit."""

    rule: Any


@dataclass(frozen=True)
class Devices:
    """A count of devices (``nvidia.com/gpu``), which the API server takes only as a whole
    number, none below 0, of any quantity's spelling (``2``, ``"2"``, ``2.0``, ``"2000m"``:
    :func:`~distconv.deploy.counts.whole_quantity`)."""


#: the GPUs a container asks: a count, or the checks that add them up stop on ``"x"``
RESOURCES = {"nvidia.com/gpu": Devices()}
#: text: a name or a namespace of a number (namespace: 5) is refused by kubectl too
METADATA = NamedElsewhere(
    {"name": str, "generateName": str, "namespace": str, "labels": dict, "annotations": dict}
)
#: a probe's or a hook's action; an ``exec`` command is joined as text
HANDLER = {"httpGet": dict, "exec": {"command": [str]}, "tcpSocket": dict, "grpc": dict}
CONTAINER = {
    "name": str,
    "command": [str],
    "args": [str],
    "workingDir": str,
    "restartPolicy": str,
    "env": [{"name": Required(str), "value": str, "valueFrom": dict}],
    "envFrom": [dict],
    "ports": [{"name": str, "containerPort": Required(int)}],
    "volumeMounts": [{"name": Required(str), "mountPath": Required(str)}],
    "resources": {"requests": RESOURCES, "limits": RESOURCES},
    "securityContext": dict,
    "lifecycle": {"preStop": HANDLER, "postStart": HANDLER},
    "readinessProbe": HANDLER,
    "livenessProbe": HANDLER,
    "startupProbe": HANDLER,
}
POD_SPEC = {
    "containers": [CONTAINER],
    "initContainers": [CONTAINER],
    "volumes": [{"name": Required(str), "secret": {"secretName": str}}],
    "securityContext": dict,
    "hostname": str,
    "subdomain": str,
    "restartPolicy": str,
}
TEMPLATE = {"metadata": METADATA, "spec": POD_SPEC}
JOB_SPEC = {"template": TEMPLATE, "completionMode": str}
#: the ``spec`` of a kind not in :data:`SPECS`: a pod template's holder (a Deployment's)
HOLDER = {"template": TEMPLATE}
#: each kind's ``spec``; any other kind's is read as :data:`HOLDER`
SPECS = {
    "Pod": POD_SPEC,
    "Job": JOB_SPEC,
    # a jobTemplate's metadata is named here: metadata_problem reads objects and pod templates
    "CronJob": {"jobTemplate": Required({"metadata": METADATA.rule, "spec": Required(JOB_SPEC)})},
    "StatefulSet": {
        "template": TEMPLATE,
        "serviceName": str,
        "podManagementPolicy": str,
        "ordinals": dict,
    },
    "Service": {"selector": dict, "clusterIP": str},
    "MPIJob": {"mpiReplicaSpecs": Each({"template": TEMPLATE})},
}
#: the kinds the API server refuses without a ``spec`` (a ConfigMap or a Secret has none)
NEEDS_SPEC = (*SPECS, "Deployment", "ReplicaSet", "ReplicationController", "DaemonSet")
_TYPE_NAMES = {dict: "a mapping", list: "a list", str: "a string", int: "an integer"}


def applied_objects(docs: Sequence[Any]) -> tuple[list[Manifest], list[str]]:
    """The objects ``kubectl apply`` creates from the YAML documents ``docs``, as the API server
    takes them (:func:`~distconv.deploy.walk.as_applied`, :func:`well_typed`), and a line for
    each thing in them it refuses. Raises :class:`ValueError` for a document the checks cannot
    read (:func:`~distconv.deploy.bounds.refuse_unreadable`)."""
    refuse_unreadable(docs)
    refused: list[str] = []
    objs, problems = well_typed([as_applied(obj) for obj in _listed(docs, refused)])
    problems.extend(filter(None, map(_name_too_long, objs)))
    # a CronJob without a jobTemplate (or its spec), named above, creates no Job
    cronjobs = [obj for obj in _of_kind(objs, "CronJob") if "jobTemplate" in spec_of(obj)]
    return [*objs, *map(_job_of, cronjobs)], [*refused, *problems]


#: the longest name of a kind whose objects the cluster can run, and why; each longer name
#: ends in a label value (or a name) over the 63 characters of a DNS label
NAME_MAX = {
    # its pods' label controller-revision-hash is the ControllerRevision's name, <name>-<hash>
    # (pkg/controller/history: ControllerRevisionName, hashControllerRevision: the FNV-32 sum
    # in decimal, SafeEncodeString'd, 1 to 10 characters; kubernetes#64023)
    "StatefulSet": (
        52,
        "its pods' controller-revision-hash label is <name>-<revision hash>, the hash the pod "
        "template's FNV-32 sum in decimal, 10 characters for about 3 revisions in 4 "
        "(Kubernetes' ControllerRevisionName); for such a revision the label passes the 63 a "
        "label holds, and the API server refuses every pod the StatefulSet controller creates "
        "(a 53- or 54-character name runs only the revisions of a shorter hash)",
    ),
    # each Job it creates is <name>-<scheduled time in minutes> (11 more characters)
    "CronJob": (
        52,
        "the API server refuses it: the Job made at each run, named <name>-<scheduled time>, "
        "would be longer than the 63 a Job's name holds",
    ),
    # its pods' label batch.kubernetes.io/job-name holds the name
    "Job": (
        63,
        "the API server refuses it: its pods' job-name label (the name) would be longer than "
        "a label's 63",
    ),
}


#: what the API server keeps of a ``generateName`` before it appends 5 random characters
#: (apiserver's storage/names: maxGeneratedNameLength, 63 - 5)
GENERATE_NAME_KEPT = 58
#: what the CronJob controller appends to its name for the Job of each run:
#: ``-<scheduled time in minutes since 1970>`` (getJobName), 8 digits until the year 2160
CRONJOB_JOB_SUFFIX = len("-12345678")


def _applied_name(obj: Manifest) -> str | None:
    """The name the API server gives ``obj``: its ``name``, or its ``generateName`` cut to
    :data:`GENERATE_NAME_KEPT` and the stand-in for what it appends; None where it gives
    neither as text."""
    metadata = metadata_of(obj)
    name, prefix = metadata.get("name"), metadata.get("generateName")
    if isinstance(name, str) and name:
        return name
    return f"{prefix[:GENERATE_NAME_KEPT]}{GENERATED}" if isinstance(prefix, str) else None


def _name_too_long(obj: Manifest) -> str | None:
    """Why ``obj`` (a StatefulSet, CronJob or Job: :data:`NAME_MAX`) is refused or creates no
    pod, where its name (or the one its ``generateName`` gives) is too long; else None."""
    kind, name = obj.get("kind"), _applied_name(obj)
    most, why = NAME_MAX.get(kind, (0, "")) if isinstance(kind, str) else (0, "")
    if kind == "Job" and spec_of(obj).get("manualSelector") is True:
        most = 0  # no job-name label is added (ValidateGeneratedSelector): a subdomain's 253
    if not most or name is None or len(name) <= most:
        return _indexed_host_too_long(obj, name) if kind in ("Job", "CronJob") else None
    if kind == "StatefulSet":  # the API server takes the name: only its pods are refused
        return f"{_where(obj)}: a StatefulSet's name over {most} characters, {len(name)}: {why}"
    return f"{_where(obj)}: a {kind}'s name holds at most {most} characters, got {len(name)}: {why}"


def _indexed_host_too_long(obj: Manifest, name: str | None) -> str | None:
    """Why the Indexed Job ``obj`` (or the one a CronJob ``obj`` creates at each run, named
    ``<name>-<scheduled time>``), of a name that fits, cannot create all its pods: the Job
    controller sets each one's hostname to ``<job name>-<index>``, a DNS label the API server
    refuses over 63 characters; else None."""
    cron = obj.get("kind") == "CronJob"
    spec = spec_of(spec_of(obj).get("jobTemplate", {})) if cron else spec_of(obj)
    completions = known_count(spec, "completions", None)  # none: named elsewhere
    if spec.get("completionMode") != "Indexed" or not completions or name is None:
        return None
    last = completions - 1
    most = HOST_NAME_MAX - len(f"-{last}") - (CRONJOB_JOB_SUFFIX if cron else 0)
    if len(name) <= most:
        return None
    whose, host = ("an Indexed Job's", "<name>")
    if cron:
        whose, host = "a CronJob's", "<name>-<scheduled time>"
    return (
        f"{_where(obj)}: {whose} name holds at most {most} characters with "
        f"{completions} completions{' of its Indexed Job' if cron else ''}, got {len(name)}: "
        f"its pod of index {last} gets the host name {host}-{last}, which the API server "
        f"refuses over {HOST_NAME_MAX}"
    )


def _job_of(cronjob: Manifest) -> Manifest:
    """The Job ``cronjob`` creates at each run, held to every check of a Job: its
    ``jobTemplate``, named ``<cronjob>-<scheduled time>`` (a ``generateName`` here, whose
    stand-in names it in problems), in the CronJob's namespace, with the jobTemplate's labels
    and annotations only, as the CronJob controller copies them (getJobFromTemplate2)."""
    template = spec_of(cronjob)["jobTemplate"]
    copied = ("labels", "annotations")
    metadata = {key: value for key, value in metadata_of(template).items() if key in copied}
    metadata["generateName"] = f"{object_name(cronjob)}-"
    if _namespace(cronjob) is not None:
        metadata["namespace"] = _namespace(cronjob)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": template["spec"]}


def _listed(objs: Sequence[Any], refused: list[str]) -> Iterator[Manifest]:
    """Each object as ``kubectl apply`` creates it: a ``List`` (``kubectl get -o yaml`` writes
    one; so does a ``...List`` kind) stands for its ``items``, each applied on its own, nested
    ones too. Judged as a whole, a bad Job in a List passed every check. An empty YAML
    document (``---`` with nothing after it: None), which kubectl skips, is no object, nor is
    a List's null or absent ``items:`` (none). A value that is no mapping, and a List whose
    ``items`` is no list (one object written without its ``-``), which kubectl refuses, is
    named in ``refused``."""
    lists, end = [iter(objs)], object()  # the Lists being read, innermost last: no recursion
    while lists:
        obj = next(lists[-1], end)
        if obj is end:  # that List is read
            lists.pop()
            continue
        if obj is None:
            continue
        kind = obj.get("kind") if isinstance(obj, dict) else None
        if not isinstance(obj, dict):
            refused.append(f"{obj!r} is no object (kind, metadata, ...): kubectl apply refuses it")
        elif not str(kind).endswith("List"):
            yield obj
        elif obj.get("items") is None or isinstance(obj["items"], list):  # {} is no list
            lists.append(iter(obj.get("items") or []))
        else:
            got = "a mapping" if isinstance(obj["items"], dict) else repr(obj["items"])
            refused.append(
                f"{kind} items must be a list of objects, got {got}: kubectl apply refuses it"
            )


def well_typed(objs: Sequence[Manifest]) -> tuple[list[Manifest], list[str]]:
    """``objs`` without the fields of a type the API server refuses (or the entries without a
    field it needs), and a line naming each one."""
    problems: list[str] = []
    kept = []
    for obj in objs:
        kind = obj.get("kind")
        text = isinstance(kind, str)  # kind: [Job] is refused, its fields typed as any kind's
        rule = {"metadata": METADATA, "spec": SPECS.get(kind, HOLDER) if text else HOLDER}
        lines = []
        if kind is None or kind == "":  # none, null or '': "Object 'Kind' is missing"
            lines.append("kind is missing: kubectl apply refuses an object without one")
        elif not text:
            lines.append(f"kind must be a string, got {kind!r}: kubectl apply refuses it")
        if text and kind in NEEDS_SPEC and "spec" not in obj:
            lines.append(f"spec is missing: the API server refuses a {kind} without one")
        kept.append(_kept(obj, rule, "", lines))
        problems.extend(f"{_where(obj)}: {line}" for line in lines)
    return kept, problems


#: what :func:`_kept` gives for an entry that lacks a field the API server needs
_DROPPED = object()


def _kept(value: Any, rule: Any, path: str, lines: list[str]) -> Any:
    """``value`` (which fits ``rule``) with what in it does not fit its rule left out, and a
    line in ``lines`` for each; :data:`_DROPPED` where it lacks a :class:`Required` field."""
    if isinstance(rule, (NamedElsewhere, Required)):
        return _kept(value, rule.rule, path, lines)
    if isinstance(rule, Each):
        rule = dict.fromkeys(value, rule.rule)
    if isinstance(rule, list):
        items = (_field(item, rule[0], f"{path}[{i}]", lines) for i, item in enumerate(value))
        return [item for item in items if item is not _DROPPED]
    if rule is int:  # 8080.0 reaches the API server as 8080 (counts._is_count)
        return int(value)
    if isinstance(rule, Devices):  # "2", 2.0 and "2000m" are 2 devices
        return whole_quantity(value)
    if rule is str and isinstance(value, date):  # 2024-01-01: text to kubectl (see _fits)
        return value.isoformat()
    if not isinstance(rule, dict):
        return value
    kept = dict(value)
    for key, sub in rule.items():
        field = f"{path}.{key}" if path else key
        if key not in value:
            if isinstance(sub, Required):
                lines.append(f"{path} has no {key}, which the API server needs")
                return _DROPPED
            continue
        kept[key] = _field(value[key], sub, field, lines)
        if kept[key] is _DROPPED:
            if isinstance(sub, Required):
                return _DROPPED
            del kept[key]
    return kept


def _field(value: Any, rule: Any, path: str, lines: list[str]) -> Any:
    """``value`` at ``path`` as :func:`_kept` keeps it, or :data:`_DROPPED` where it is of
    another type than ``rule`` asks (named in ``lines``, unless another check names it)."""
    if _fits(value, rule):
        return _kept(value, rule, path, lines)
    if isinstance(rule, NamedElsewhere):
        return value
    lines.append(f"{path} must be {_type_name(rule)}, got {value!r}")
    if rule is str and isinstance(value, (int, float)):  # bool too
        # a number where text goes (value: 2, args: [--epochs, 3]): the rest is judged as the
        # text meant, not as a command line that lost an argument
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    return _DROPPED


def _fits(value: Any, rule: Any) -> bool:
    """Whether ``value`` is of the type ``rule`` asks (a bool is no integer: YAML's ``true``;
    a whole float is one, as kubectl sends it: :func:`~distconv.deploy.counts._is_count`; a
    date that PyYAML read from ``2024-01-01`` is text, as kubectl reads it)."""
    if isinstance(rule, (NamedElsewhere, Required)):
        return _fits(value, rule.rule)
    if isinstance(rule, (dict, Each)):
        return isinstance(value, dict)
    if isinstance(rule, list):
        return isinstance(value, list)
    if rule is int:
        return _is_count(value)
    if isinstance(rule, Devices):
        return whole_quantity(value) is not None
    if rule is str:  # kubectl's go-yaml v2 keeps a timestamp-like plain scalar as its text
        return isinstance(value, (str, date))
    return isinstance(value, rule)


def _type_name(rule: Any) -> str:
    if isinstance(rule, (NamedElsewhere, Required)):
        return _type_name(rule.rule)
    if isinstance(rule, (dict, Each)):
        return "a mapping"
    if isinstance(rule, list):
        return "a list"
    if isinstance(rule, Devices):
        return "a whole number of devices"
    return _TYPE_NAMES.get(rule, getattr(rule, "__name__", str(rule)))
