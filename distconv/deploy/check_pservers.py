"""The workers' list of shards (``--pservers``, ``DISTCONV_PSERVERS``) and count
(``--num-shards``) against the StatefulSet that runs them (part of
:func:`distconv.deploy.check.manifest_problems`): each shard's DNS name, in ordinal order, on the
port it binds, qualified as the dialling pod resolves it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import overload

from distconv.deploy.check_shards import (
    _defined_at,
    _is_filled,
    env_as_seen,
    expand,
    shard_flag,
)
from distconv.deploy.check_workers import _shard_setting
from distconv.deploy.counts import MAX_NAMED, known_count
from distconv.deploy.pserver import POD_INDEX_LABEL
from distconv.deploy.walk import (
    Manifest,
    _any_runs,
    _argv,
    _containers,
    _flag,
    _namespace,
    _of_kind,
    _running,
    _templates,
    _where,
    metadata_of,
    spec_of,
)
from distconv.endpoint import split_endpoint
from distconv.short_lists import short_list


class ShardNames(Sequence[str]):
    """The DNS names of ``count`` shards of StatefulSet ``name`` (``<name>-<i>.<service>:<port>``)
    in ordinal order, from ordinal ``first`` (``spec.ordinals.start``), each made as it is
    read: ``replicas: 1000000000`` (an int32 the API server takes) listed at once was a billion
    strings, past the process's memory, and a ``--pservers`` of another length is told apart by
    ``len`` alone."""

    def __init__(
        self, name: str, service: object, port: object, count: int, first: int = 0
    ) -> None:
        # not a format string: a name as written may hold braces
        self._before, self._after, self._count = f"{name}-", f".{service}:{port}", count
        self._first = first

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return f"{self._before}{self._first + index % self._count}{self._after}"


def _shard_names(
    objs: Sequence[Manifest],
) -> tuple[ShardNames | None, int | None, str | None] | None:
    """The shards' addresses in ordinal order, their count (None where it is no integer) and their
    namespace (None where the manifest leaves it to ``kubectl -n``), from the StatefulSet that runs
    ``distconv pserver``; None where the job has none. ``--bind`` is read as the shard reads it
    (abbreviated, ``$(VAR)`` filled in from the container's literal values); the addresses are None
    where it is not written out (a value the cluster fills in, ``$(ARGS)``, may hold it), only the
    cluster knows it, the shard refuses it, or a shell runs more than it."""
    for sts in _of_kind(objs, "StatefulSet"):
        spec, shard = spec_of(sts), next(_running([sts], "pserver"), None)
        if shard is None and not _any_runs(sts, "pserver"):
            continue
        replicas, namespace = known_count(spec, "replicas", 1), _namespace(sts)
        first = _first_ordinal(sts)
        # a shard all the same: "the job has no shard StatefulSet" was false; replicas or a
        # first ordinal that are no integer, or below 0 (named by count_problems), give no
        # names to compare with, nor do shards that take their index from pods past 0 (named
        # by _shard_ordinals)
        if shard is None or replicas is None or first is None or first < 0:
            return None, replicas, namespace
        container, args = shard[3], shard[4]
        if first and _index_from_pod(container, args):
            return None, replicas, namespace
        try:
            port = split_endpoint(shard_flag(args, container, "bind")[1] or "")[1]
        except ValueError:
            return None, replicas, namespace
        name, service = metadata_of(sts).get("name"), spec.get("serviceName")
        # a generateName's random part: no address is known before it is made
        if not name:
            return None, replicas, namespace
        return ShardNames(name, service, port, replicas, first), replicas, namespace
    return None


#: what may follow a shard's ``<pod>.<service>`` in a name that reaches the same pod: its
#: namespace, then ``svc`` and the cluster's domain (``.default.svc.cluster.local``)
_QUALIFIED = re.compile(
    r"\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.svc(\.[a-z0-9]([-.a-z0-9]*[a-z0-9])?)?)?"
)


def _first_ordinal(sts: Manifest) -> int | None:
    """StatefulSet ``sts``'s first pod's ordinal (``spec.ordinals.start``, 0 unset), None where
    it is no integer (named by ``count_problems``)."""
    return known_count(spec_of(sts).get("ordinals") or {}, "start", 0)


def _index_from_pod(container: Manifest, args: Sequence[str]) -> bool:
    """Whether the shard that ``container`` runs with ``args`` takes its index from its pod's
    ordinal: ``--shard $(VAR)``, the container's ``VAR`` the pod-index label, as rendered. A
    ``--shard`` written out, or taken from elsewhere (a value only the cluster or a shell
    knows), is not known to be."""
    token = _flag(list(args), "--shard", last=True)
    var = re.fullmatch(r"\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)", token or "")
    at = None if var is None else _defined_at(container, var[1])
    source = {} if at is None else container["env"][at].get("valueFrom") or {}
    field = (source.get("fieldRef") or {}).get("fieldPath")
    return field == f"metadata.labels['{POD_INDEX_LABEL}']"


def _shard_ordinals(objs: Sequence[Manifest]) -> Iterator[str]:
    """The shards are 0 to replicas - 1, each its pod's ordinal where it takes its index from
    its pod (:func:`_index_from_pod`), dialled as ``<name>-0`` on: a StatefulSet that runs them
    so with ``spec.ordinals.start`` above 0 serves no shard 0 and a shard past the count, at
    names no worker dials (one below 0 is named by ``count_problems``, and makes no pod). A
    shard whose index is written out (``--shard 0`` of one) serves it from any ordinal."""
    named = set()
    for sts, _, _, container, args in _running(objs, "pserver"):
        first = _first_ordinal(sts) if sts.get("kind") == "StatefulSet" else None
        if first and first > 0 and id(sts) not in named and _index_from_pod(container, args):
            named.add(id(sts))
            name = metadata_of(sts).get("name")
            yield (
                f"{_where(sts)}: spec.ordinals.start {first} numbers the shards' pods from "
                f"{name}-{first}, but a shard serves its pod's ordinal and the shards are 0 to "
                f"replicas - 1, dialled as {name}-0 on (set spec.ordinals.start 0)"
            )


def _same_shards(
    given: list[str], names: Sequence[str], namespace: str | None, reader: str | None = None
) -> bool:
    """Whether ``given`` addresses are the shards' ``names`` in order, each as written or
    qualified with a namespace (theirs, where the manifest names it: another namespace's
    shards of the same name are other shards) and the cluster's domain, on the same port.
    A name as written resolves in the namespace of the pod that dials it (``reader``): where
    both are written and differ, it names another namespace's pods too. A name may be absolute,
    with a trailing dot (``....svc.cluster.local.``, which spares the resolver its search
    list), where it goes down to the cluster's domain."""
    if len(given) != len(names):
        return False
    short_ok = namespace is None or reader is None or reader == namespace
    for address, name in zip(given, names):
        # as the ranks read each entry: blanks around it stripped, the port a number (05555)
        host, _, port = address.strip().rpartition(":")
        port = str(int(port)) if port.isascii() and port.isdigit() else port
        host, absolute = host.removesuffix("."), host.endswith(".")
        short, _, want = name.rpartition(":")
        rest = host[len(short) :] if host.startswith(short) else None
        qualified = rest is not None and _QUALIFIED.fullmatch(rest) is not None
        if qualified and namespace is not None:
            qualified = rest.split(".")[1] == namespace
        if absolute:  # no search list: only a name down to the cluster's domain resolves
            qualified = qualified and len(rest.split(".")) > 3
        if port != want or not ((host == short and short_ok and not absolute) or qualified):
            return False
    return True


def _server_lists(objs: Sequence[Manifest]) -> Iterator[str]:
    yield from _shard_ordinals(objs)
    shards = _shard_names(objs)
    replicas = None if shards is None else shards[1]  # None too where it is no integer
    for obj in objs:
        for where, template in _templates(obj):
            for container in _containers(template):
                argv = _argv(container)
                num_shards = _shard_setting(container, "num_shards")
                if replicas is not None and num_shards not in (None, str(replicas)):
                    yield (
                        f"{where}: --num-shards {num_shards} but the "
                        f"StatefulSet has {replicas} replicas"
                    )
                # as the kubelet passes them; a value only the cluster knows is not judged
                flag = _flag(argv, "--pservers", last=True)
                _, from_env = env_as_seen(container, "DISTCONV_PSERVERS")
                for source, text in (
                    ("--pservers", None if flag is None else expand(flag, container)),
                    ("DISTCONV_PSERVERS", from_env),
                ):
                    # a blank DISTCONV_PSERVERS is unset, as the ranks read it
                    if (
                        text is None
                        or _is_filled(text)
                        or (source != "--pservers" and not text.strip())
                    ):
                        continue
                    if shards is None:
                        yield f"{where}: {source} is set but the job has no shard StatefulSet"
                    elif shards[0] is not None and not _same_shards(
                        text.split(","), shards[0], shards[2], _namespace(obj)
                    ):
                        yield f"{where}: {source} " + _not_the_shards(
                            source, text.split(","), shards, _namespace(obj)
                        )


def _listed(names: Sequence[str], namespace: str | None = None) -> str:
    """``names`` as a line shows them: the first :data:`MAX_NAMED` ``,``-joined and quoted, as
    written (``'a-0.a:5555,a-1.a:5555'``), one item, then how many more (``... and 995 more``);
    each qualified with ``namespace`` where given (``'a-0.a.ml:5555,...'``)."""
    shown = names[:MAX_NAMED]
    if namespace is not None:  # a shard's name holds no ':' before its port's
        shown = [name.replace(":", f".{namespace}:", 1) for name in shown]
    return short_list([repr(",".join(shown))], 1, more=max(len(names) - MAX_NAMED, 0))


def _not_the_shards(source: str, given: list[str], shards: tuple, reader: str | None) -> str:
    """Why ``given``, a worker's list of shards from ``source``, is not theirs, after its
    name: where it holds the shards' short names, led by the namespaces (those resolve in the
    dialling pod's, ``reader``, not the shards'; two equal lists read "X is not the shards'
    DNS names X") and the value to write; else the list and the shards' names."""
    names, namespace = shards[0], shards[2]
    if reader in (None, namespace) or not _same_shards(given, names, namespace, namespace):
        return f"{_listed(given)} is not the shards' DNS names {_listed(names)}"
    return (
        f"names the shards short, which resolve in namespace {reader}, the dialling pod's, "
        f"but the shards are in {namespace}: write {source} {_listed(names, namespace)}"
    )
