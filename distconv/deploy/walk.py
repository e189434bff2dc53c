"""Walking a job's manifests: the pod templates an object holds, their containers, argv and env.

Shared by :mod:`distconv.deploy.check`, :mod:`distconv.deploy.check_ranks` and
:mod:`distconv.deploy.check_shards`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from typing import Any

from distconv.deploy.commands import unprinted
from distconv.deploy.env_options import split_env_strings
from distconv.deploy.pod import HOME
from distconv.deploy.shell import SHELL_SYNTAX, removes_variable, sets_variable, shell_command
from distconv.deploy.words import split_words

Manifest = dict[str, Any]
#: what makes a value more or less than one word, as written, where the shell reads it
_QUOTE_OR_SPACE = re.compile(r"[\s'\"]")
#: where a container's process starts without a ``workingDir``: the image's WORKDIR (the image
#: user's home, docker/Dockerfile), not ``/``
IMAGE_WORKDIR = HOME


def as_applied(node: Any) -> Any:
    """``node`` (a manifest, or a part of one) as the API server takes it: a field set to null
    (``env:`` with nothing after it in YAML) is unset, as if not written, so each check reads
    the field's default, not None. A copy, each alias's value copied where it stands; built
    without recursion, a CRD's schema nested thousands of levels deep too (bounds.MAX_DEPTH)."""
    copy = _empty_like(node)
    pending = [(node, copy)] if copy is not node else []
    while pending:
        written, copied = pending.pop()
        if isinstance(written, dict):
            pairs = [(key, value) for key, value in written.items() if value is not None]
        else:
            pairs, copied[:] = list(enumerate(written)), [None] * len(written)
        for key, value in pairs:
            copied[key] = inner = _empty_like(value)
            if inner is not value:  # a mapping or a list: copied in turn
                pending.append((value, inner))
    return copy


def _empty_like(node: Any) -> Any:
    """An empty mapping or list for one, ``node`` itself for any other value."""
    return {} if isinstance(node, dict) else [] if isinstance(node, list) else node


def _where(obj: Manifest) -> str:
    """How a problem names ``obj``: its kind and name (:func:`object_name`, a ``generateName``
    with its stand-in), ``?`` for what the manifest does not give."""
    named = any(metadata_of(obj).get(key) for key in ("name", "generateName"))
    kind = obj.get("kind")
    return f"{'?' if kind in (None, '') else kind} {object_name(obj) if named else '?'}"


def metadata_of(node: Manifest) -> Manifest:
    """The ``metadata`` of an object or pod template; empty where it gives none, or gives no
    mapping (``metadata: x``, which the API server refuses and :func:`metadata_problem`
    names), so that what else is wrong with it is named all the same."""
    metadata = node.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def spec_of(obj: Manifest) -> Manifest:
    """The ``spec`` of an object; empty where it gives none (the API server refuses a Job or a
    StatefulSet without one) or gives no mapping (:mod:`distconv.deploy.shapes` names it), so
    that what else is wrong with it is named all the same."""
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def metadata_problem(where: str, node: Manifest) -> str | None:
    """The problem of a ``metadata`` that is no mapping in the object or pod template at
    ``where``; None where it is one or is not given."""
    metadata = node.get("metadata", {})
    if isinstance(metadata, dict):
        return None
    return f"{where}: metadata must be a mapping, got {metadata!r}"


def _namespace(obj: Manifest) -> str | None:
    """The namespace the manifest gives ``obj``; None where it leaves it to ``kubectl -n``."""
    return metadata_of(obj).get("namespace")


#: a stand-in for the five random characters the API server appends to a ``generateName``
GENERATED = "xxxxx"


def object_name(obj: Manifest) -> str:
    """The name the API server gives ``obj``: its ``metadata.name``, or where it gives only a
    ``generateName``, that prefix and :data:`GENERATED` for what the server appends; where it
    gives neither (the API server refuses it), ``unnamed``, so that what else is wrong with it
    is named all the same."""
    metadata = metadata_of(obj)
    if metadata.get("name"):
        return str(metadata["name"])
    return f"{metadata.get('generateName') or 'unnamed-'}{GENERATED}"


#: the most characters a host name holds (one DNS label)
HOST_NAME_MAX = 63


def pod_hostname(name: str) -> str:
    """The host name the kubelet gives a pod named ``name`` (with no ``hostname`` of its own):
    the name, cut to :data:`HOST_NAME_MAX` characters where longer (a bare Pod's name may be
    253) and stripped of the ``-`` and ``.`` it then ends in (kubelet's
    truncatePodHostnameIfNeeded): ``<name>-12`` may so become ``<name>-1``, or lose its
    ordinal."""
    return name if len(name) <= HOST_NAME_MAX else name[:HOST_NAME_MAX].rstrip("-.")


def _templates(obj: Manifest) -> Iterator[tuple[str, Manifest]]:
    """(where, pod template) for each pod template the object holds; a bare Pod that runs a
    rank or a shard (``distconv train`` or ``pserver``, for its life) is its own, held to what
    their pods must do (one that runs another program is no part of the job's pods)."""
    spec = spec_of(obj)
    if obj.get("kind") == "Pod":
        pod = {"metadata": metadata_of(obj), "spec": spec}
        if any(_runs(c, "train", "pserver") for c in _main_containers(pod)):
            yield _where(obj), pod
    elif obj.get("kind") == "MPIJob":
        for role, replica in spec.get("mpiReplicaSpecs", {}).items():
            yield f"{_where(obj)} {role}", replica.get("template", {})
    elif "template" in spec:
        yield _where(obj), spec["template"]


def _template(obj: Manifest) -> Manifest:
    """The pod template of a Job's or a StatefulSet's ``spec``; empty where it gives none."""
    return spec_of(obj).get("template", {})


def _containers(template: Manifest) -> list[Manifest]:
    """Every container of the pod template: its init containers, then its containers."""
    spec = template.get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _is_sidecar(container: Manifest) -> bool:
    """Whether an init container is a sidecar (``restartPolicy: Always``): it starts before the
    pod's containers, then runs beside them for the pod's life."""
    return container.get("restartPolicy") == "Always"


def _main_containers(template: Manifest) -> list[Manifest]:
    """The containers of the pod template that run for the pod's life, and are held to what a
    shard or a rank must do (keep serving, resume, answer probes): its sidecars, its containers."""
    spec = template.get("spec", {})
    sidecars = [c for c in spec.get("initContainers", []) if _is_sidecar(c)]
    return [*sidecars, *spec.get("containers", [])]


def _init_containers(template: Manifest) -> list[Manifest]:
    """The init containers of the pod template that run to completion, one after another,
    before its containers start (an image's smoke test: ``distconv pserver --help``). Each need
    only exit 0; the pod never starts while one fails."""
    return [c for c in template.get("spec", {}).get("initContainers", []) if not _is_sidecar(c)]


def _argv(container: Manifest) -> list[str]:
    """The container's command line: its ``command`` and ``args``, or where they run a shell's
    plain command string (``sh -c "exec distconv train --out /x"``), that command's words
    (:func:`shell_command`; ``$NAME`` of a plain value filled in), so that a rank or a shard
    started so is held to the same checks; an ``env -S STRING`` in it split as env splits it
    (:func:`~distconv.deploy.env_options.split_env_strings`)."""
    argv = [str(a) for a in (*container.get("command", []), *container.get("args", []))]
    environment = None if container.get("envFrom") else _env(container)  # what the shell exports
    words = shell_command(argv, _plain_variables(container), _plain_values(container), environment)
    return split_env_strings(argv if words is None else words)


def set_on_command_line(container: Manifest, name: str) -> str | None:
    """The value the container's command line gives variable ``name`` for the distconv it
    starts, which its ``env`` does not say, as written (``$(VAR)`` not filled in); None where it
    gives none (:func:`~distconv.deploy.shell.sets_variable`)."""
    return sets_variable(_argv(container), name)


def unset_on_command_line(container: Manifest, name: str) -> bool:
    """Whether an ``env`` on the container's command line starts ``distconv`` without the pod's
    variable ``name`` (:func:`~distconv.deploy.shell.removes_variable`)."""
    return removes_variable(_argv(container), name)


def _plain_variables(container: Manifest) -> set[str]:
    """The container's variables that the kubelet fills into a shell's string as one word the
    shell leaves alone: a value with no space or shell syntax, or one only the cluster knows
    (``valueFrom``: a pod's name, its index)."""
    return {
        var["name"]
        for var in container.get("env", [])
        if "name" in var and ("valueFrom" in var or _one_word(str(var.get("value") or "")))
    }


def _plain_values(container: Manifest) -> dict[str, str]:
    """What a shell's ``$NAME`` reads of the container's variables that it reads as one word,
    by name (the last of a name wins, as the kubelet sets them): a plain value as it is, one
    only the cluster knows (``valueFrom``) as the kubelet's ``$(NAME)``, which the checks take
    for a value they cannot judge (:func:`_plain_variables`)."""
    values: dict[str, str | None] = {}
    for var in (v for v in container.get("env", []) if "name" in v):
        value = f"$({var['name']})" if "valueFrom" in var else str(var.get("value") or "")
        values[var["name"]] = value if "valueFrom" in var or _one_word(value) else None
    return {name: value for name, value in values.items() if value is not None}


def _one_word(value: str) -> bool:
    """Whether the shell reads ``value`` as one word as it is: not empty (a word the shell
    drops), no space (two words), no shell syntax, no quote (the shell strips ``'/x'`` to
    ``/x``, and one left open ends the string in an error)."""
    return bool(value) and not SHELL_SYNTAX.search(value) and not _QUOTE_OR_SPACE.search(value)


def _command_args(argv: list[str], command: str) -> list[str] | None:
    """The arguments after ``distconv <command>`` in ``argv``, or None when it runs no such
    command (``mpirun ... python -m mpi4py -m distconv train ...`` runs ``train``; so do
    ``/opt/venv/bin/distconv train`` and ``distconv -q train``, distconv's own options first)."""
    argv = unprinted(argv)
    for i, word in enumerate(argv):
        if word.rsplit("/", 1)[-1] == "distconv":
            rest = _after_options(argv[i + 1 :])
            if rest[:1] == [command]:
                return rest[1:]
    return None


def _after_options(args: list[str]) -> list[str]:
    """``args`` after the options distconv takes before its command (``-q``, ``--quiet``)."""
    while args and args[0].startswith("-"):
        args = args[1:]
    return args


def _words(container: Manifest, newlines: bool = False) -> list[str]:
    """The words of the container's command line, a shell's command string split as the shell
    splits it (``sh -c "cd /x;distconv train"`` holds ``distconv`` and ``train``); with
    ``newlines``, a newline that ends a command is a separator (:func:`split_words`)."""
    return [w for arg in _argv(container) for w in split_words(arg, newlines)]


def program_words(container: Manifest) -> list[str]:
    """The words of the container's command line, its newlines as separators (:func:`_words`),
    less those that name no program it runs (:func:`~distconv.deploy.commands.unprinted`)."""
    return unprinted(_words(container, newlines=True))


def _runs(container: Manifest, *programs: str) -> bool:
    """Whether ``container`` may run one of ``programs`` (``"train"``, ``"pserver"``: that
    command of distconv; ``"sshd"``), however started: exec'd (``/opt/venv/bin/distconv
    train``), through Python (``python -m distconv train``), after distconv's own options
    (``distconv -q train``), or in a shell's command string. A container that runs none is a
    sidecar beside the shards or ranks (a log shipper), not held to their needs."""
    words = [w.rsplit("/", 1)[-1] for w in program_words(container)]
    if "sshd" in programs and "sshd" in words:
        return True
    for i, word in enumerate(words):
        rest = _after_options(words[i + 1 :]) if word == "distconv" else []
        if rest and rest[0] in programs:
            return True
    return False


def _any_runs(obj: Manifest, program: str) -> bool:
    """Whether a container of ``obj`` that runs for its pod's life may run ``program``, however
    started (:func:`_runs`): one in a shell's command string, which :func:`_running` does not
    read, too."""
    return any(_runs(c, program) for _, t in _templates(obj) for c in _main_containers(t))


def _process_counts(argv: list[str]) -> list[str]:
    """Every process count mpirun's own options give (``-np``/``-n``; Hydra reads them with
    two dashes or ``=`` too), before the Python it starts: the arguments after are the
    program's."""
    names = ("-np", "-n", "--np", "--n")
    counts = []
    for i, arg in enumerate(argv):
        if arg.rsplit("/", 1)[-1].startswith("python"):
            break
        name, eq, value = arg.partition("=")
        if arg in names and i + 1 < len(argv):
            counts.append(argv[i + 1])
        elif eq and name in names:
            counts.append(value)
    return counts


def _running(
    objs: Sequence[Manifest], command: str, *, init: bool = False
) -> Iterator[tuple[Manifest, str, Manifest, Manifest, list[str]]]:
    """(object, where, pod template, container, arguments after ``distconv <command>``) of
    every container that runs ``distconv <command>`` for the pod's life (a shard, a rank:
    :func:`_main_containers`), or with ``init``, of every init container that runs it to
    completion (:func:`_init_containers`)."""
    pick = _init_containers if init else _main_containers
    for obj in objs:
        for where, template in _templates(obj):
            for container in pick(template):
                args = _command_args(_argv(container), command)
                if args is not None:
                    yield obj, where, template, container, args


def _here(where: str, container: Manifest) -> str:
    """How a problem names one container of the pod template at ``where``."""
    return f"{where} container {container.get('name')}"


def _flag(argv: list[str], *names: str, last: bool = False) -> str | None:
    """The value after the first of ``names`` in ``argv`` (``--x v`` or ``--x=v``); with
    ``last``, after the last one, which is the one argparse keeps."""
    found = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(name + "="):
                found = arg.split("=", 1)[1]
            else:
                continue
            if not last:
                return found
    return found


def _digits(text: str) -> bool:
    """Whether ``text`` is a number in ASCII digits, which ``int()`` reads as the programs do:
    ``str.isdigit`` takes ``²`` too, on which ``int()`` raises, and ``٤``, which it reads as 4
    where mpirun reads no number."""
    return text.isascii() and text.isdigit()


def _env(container: Manifest) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", []) if "name" in e}


def _of_kind(objs: Sequence[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objs if o.get("kind") == kind]


def _pod(replica: Manifest) -> Manifest:
    return replica.get("template", {}).get("spec", {})


def _writable(
    where: str, template: Manifest, out: str, workdir: str | None, what: str = "--out"
) -> Iterator[str]:
    """A problem for each container of ``template`` where ``out`` (``what``: the flag or file
    that names it), relative to ``workdir``, lies on no writable volume mount."""
    path = in_container(out, workdir)
    for container in template.get("spec", {}).get("containers", []):
        mounts = [
            posixpath.normpath(m["mountPath"])
            for m in container.get("volumeMounts", [])
            if not m.get("readOnly")
        ]
        if not any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts):
            yield (
                f"{where} container {container.get('name')}: {what} {path} is on no writable "
                "volume (the root file system is read-only)"
            )


def in_container(path: str, workdir: str | None) -> str:
    """``path`` as a container's process resolves it, as the kernel does: from ``workdir`` (its
    ``workingDir``; without one, :data:`IMAGE_WORKDIR`) where relative, ``..`` climbing out of a
    folder, ``/etc/distconv/keys/`` the folder ``/etc/distconv/keys`` (a mount point itself)."""
    return posixpath.normpath(posixpath.join("/", workdir or IMAGE_WORKDIR, path))
