"""Checks on the Services that name a job's pods (part of
:func:`distconv.deploy.check.manifest_problems`): the headless Service a StatefulSet or a pod's
``subdomain`` names exists and selects the pods, and the shards can meet the workers before any
of them is ready.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.counts import count
from distconv.deploy.walk import (
    Manifest,
    _namespace,
    _of_kind,
    _running,
    _template,
    _templates,
    _where,
    metadata_of,
    spec_of,
)


class JobServices:
    """The job's Services by (namespace, name), as a StatefulSet's ``serviceName`` or a pod's
    ``subdomain`` reaches one: in the pod's own namespace only. A namespace a manifest leaves
    to ``kubectl -n`` is unknown and may be any (the rule the ``--pservers`` check follows);
    only two written and different keep a Service from the pods. A Service named by
    ``generateName`` (or by nothing) gets a name no ``serviceName`` or ``subdomain`` can give,
    so it is left out, not a KeyError."""

    def __init__(self, objs: Sequence[Manifest]) -> None:
        self._named = [
            s for s in _of_kind(objs, "Service") if isinstance(metadata_of(s).get("name"), str)
        ]

    def reached(self, name: object, namespace: str | None) -> Manifest | None:
        """The Service ``name`` that pods in ``namespace`` reach; one in that very namespace
        before one whose namespace is unknown; None where there is none."""
        same = [s for s in self._named if metadata_of(s)["name"] == name]
        reached = [s for s in same if namespace is None or _namespace(s) in (namespace, None)]
        reached.sort(key=lambda s: _namespace(s) != namespace)
        return reached[0] if reached else None

    def elsewhere(self, name: object) -> list[str]:
        """The namespaces written on the Services ``name``, which pods of another reach not."""
        return sorted(
            {_namespace(s) for s in self._named if metadata_of(s)["name"] == name} - {None}
        )


def _services_named(objs: Sequence[Manifest]) -> Iterator[str]:
    services = JobServices(objs)
    for obj in objs:
        named = []
        if obj.get("kind") == "StatefulSet":
            named.append(("serviceName", spec_of(obj).get("serviceName"), _template(obj)))
        for _, template in _templates(obj):
            sub = template.get("spec", {}).get("subdomain")
            if sub is not None:
                named.append(("subdomain", sub, template))
        for field, name, template in named:
            yield from _service_matches(obj, field, name, template, services)


def _service_matches(obj, field, name, template, services: JobServices) -> Iterator[str]:
    where, namespace = _where(obj), _namespace(obj)
    service = services.reached(name, namespace)
    if service is None:
        yield f"{where}: {field} {name!r} names no Service of this job" + _other_namespaces(
            name, namespace, services.elsewhere(name)
        )
        return
    if spec_of(service).get("clusterIP") != "None":
        yield f"{where}: {field} {name!r} is not headless (clusterIP must be None)"
    selector = spec_of(service).get("selector") or {}
    labels = metadata_of(template).get("labels", {})
    missing = {k: v for k, v in selector.items() if labels.get(k) != v}
    if not selector or missing:
        yield f"{where}: Service {name!r} selector does not match the pods (differs: {missing})"


def _other_namespaces(name: object, namespace: str | None, others: list[str]) -> str:
    """Why the job's Service ``name`` is not the one the pods in ``namespace`` reach: it is in
    another namespace, and names only pods of its own in DNS. Empty where there is none."""
    if not others:
        return ""
    return (
        f" in its namespace, {namespace}: Service {name!r} is in {', '.join(others)}, and "
        f"names only pods of its own in DNS (give it namespace: {namespace})"
    )


def _shards_start_together(objs: Sequence[Manifest]) -> Iterator[str]:
    """A shard is ready (``/readyz``) only once worker 0 has seeded it, and worker 0 seeds none
    before every shard has answered its hello, by its DNS name. A StatefulSet that starts a
    shard only once the one before is ready (``OrderedReady``, the default), or a Service that
    names no shard before it is ready, would leave every shard unready for good."""
    services = JobServices(objs)
    shard_sets = {id(obj): obj for obj, *_ in _running(objs, "pserver")}.values()
    for sts in (o for o in shard_sets if o.get("kind") == "StatefulSet"):
        spec = spec_of(sts)
        policy = spec.get("podManagementPolicy", "OrderedReady")
        if policy != "Parallel" and count(spec, "replicas", 1) > 1:
            yield (
                f"{_where(sts)}: podManagementPolicy must be Parallel, got {policy!r}: shard 1 "
                "would wait for shard 0 to be ready, which waits for worker 0 to seed every shard"
            )
        service = services.reached(spec.get("serviceName"), _namespace(sts))
        if service is not None and spec_of(service).get("publishNotReadyAddresses") is not True:
            yield (
                f"{_where(sts)}: Service {service['metadata']['name']!r} must set "
                "publishNotReadyAddresses: true: a shard is ready only once worker 0 has seeded "
                "it, and worker 0 cannot resolve its name before"
            )
