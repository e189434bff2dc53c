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
    _of_kind,
    _running,
    _template,
    _templates,
    _where,
    metadata_of,
    spec_of,
)


def _services_by_name(objs: Sequence[Manifest]) -> dict[str, Manifest]:
    """The job's Services by name; one named by ``generateName`` (or by nothing) gets a name
    no ``serviceName`` or ``subdomain`` can give, so it is left out, not a KeyError."""
    named = ((metadata_of(s).get("name"), s) for s in _of_kind(objs, "Service"))
    return {name: s for name, s in named if isinstance(name, str)}


def _services_named(objs: Sequence[Manifest]) -> Iterator[str]:
    services = _services_by_name(objs)
    for obj in objs:
        named = []
        if obj.get("kind") == "StatefulSet":
            named.append(("serviceName", spec_of(obj).get("serviceName"), _template(obj)))
        for _, template in _templates(obj):
            sub = template.get("spec", {}).get("subdomain")
            if sub is not None:
                named.append(("subdomain", sub, template))
        for field, name, template in named:
            yield from _service_matches(_where(obj), field, name, template, services)


def _service_matches(where, field, name, template, services) -> Iterator[str]:
    service = services.get(name)
    if service is None:
        yield f"{where}: {field} {name!r} names no Service of this job"
        return
    if spec_of(service).get("clusterIP") != "None":
        yield f"{where}: {field} {name!r} is not headless (clusterIP must be None)"
    selector = spec_of(service).get("selector") or {}
    labels = metadata_of(template).get("labels", {})
    missing = {k: v for k, v in selector.items() if labels.get(k) != v}
    if not selector or missing:
        yield f"{where}: Service {name!r} selector does not match the pods (differs: {missing})"


def _shards_start_together(objs: Sequence[Manifest]) -> Iterator[str]:
    """A shard is ready (``/readyz``) only once worker 0 has seeded it, and worker 0 seeds none
    before every shard has answered its hello, by its DNS name. A StatefulSet that starts a
    shard only once the one before is ready (``OrderedReady``, the default), or a Service that
    names no shard before it is ready, would leave every shard unready for good."""
    services = _services_by_name(objs)
    shard_sets = {id(obj): obj for obj, *_ in _running(objs, "pserver")}.values()
    for sts in (o for o in shard_sets if o.get("kind") == "StatefulSet"):
        spec = spec_of(sts)
        policy = spec.get("podManagementPolicy", "OrderedReady")
        if policy != "Parallel" and count(spec, "replicas", 1) > 1:
            yield (
                f"{_where(sts)}: podManagementPolicy must be Parallel, got {policy!r}: shard 1 "
                "would wait for shard 0 to be ready, which waits for worker 0 to seed every shard"
            )
        service = services.get(spec.get("serviceName"))
        if service is not None and spec_of(service).get("publishNotReadyAddresses") is not True:
            yield (
                f"{_where(sts)}: Service {service['metadata']['name']!r} must set "
                "publishNotReadyAddresses: true: a shard is ready only once worker 0 has seeded "
                "it, and worker 0 cannot resolve its name before"
            )
