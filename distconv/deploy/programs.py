"""Whether a pod template runs the job's own processes (part of
:func:`distconv.deploy.check.manifest_problems`): a shard, a rank, the sshd that starts MPI
ranks, or the launcher that starts ranks and shards. Those checkpoint on SIGTERM and serve
``/readyz`` and ``/healthz``, so their pods are held to the 60 s grace period and the probes; a
pod beside the job that runs another program (a dashboard, a data download, a checkpoint
backup) is held to neither.

A command line is read as the process that starts is given it: ``$(NAME)`` filled in by the
kubelet, and in a shell's ``-c`` string, ``$NAME`` and ``${NAME}`` filled in by the shell from
the container's variables (``command: [sh, -c, exec $TRAIN]`` with ``TRAIN`` set to ``distconv
train ...`` runs a rank). A program that is a variable only the cluster knows (``valueFrom``,
``envFrom``) may be a rank: its pod is held to what a rank's is.

A rank trains with the shards only where its transport is the parameter server's
(:func:`trains_with_the_shards`): one of another (a baseline beside the job) is no rank of
theirs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from distconv.deploy.check_shards import _FILLED, _is_filled, env_as_seen, expand
from distconv.deploy.commands import SHELLS, command_starts, past_wrappers, program_name
from distconv.deploy.index_reads import _train_args
from distconv.deploy.shell import SHELL_OWN
from distconv.deploy.walk import (
    Manifest,
    _after_options,
    _argv,
    _flag,
    _main_containers,
    _running,
    _runs,
    _where,
    _words,
    program_words,
)

#: a shell's ``$NAME`` or ``${NAME}``
_SHELL_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
#: a shell string's own ``NAME=value`` as a command of its own (``CMD=rclone; $CMD sync ...``;
#: ``CMD=x $CMD`` sets CMD only for the command, after its words are filled in): NAME and the
#: value as written
_SHELL_SETS = re.compile(r"(?:^|[\s;&|(])([A-Za-z_]\w*)=([^\s;&|()]*)(?=[ \t]*(?:[;&|)\n]|$))")
#: a value the shell sets as written: no quote, no expansion (``P="$TRAIN"`` sets a rank's line)
_PLAIN_VALUE = re.compile(r"[^'\"$`\\]*")
#: the launcher's commands that start ranks and shards (``k8s`` only writes manifests)
_LAUNCHES = ("local", "mpi")
#: the launcher, as a command (``distconv-launch``) or a module (``python -m distconv.launch``)
_LAUNCHERS = ("distconv-launch", "distconv.launch")
#: a shell's own parameters (``"$@"``, ``$1``: the words after its string, read as written)
_SPECIAL = re.compile(r"\$\{?[\d@*#?$!-]")


def runs_the_jobs_processes(template: Manifest) -> bool:
    """Whether a container of ``template`` that runs for its pod's life may run a shard, a
    rank, the sshd that starts MPI ranks or the launcher, however started
    (:func:`~distconv.deploy.walk._runs`), its variables filled in as the kubelet and its
    shell fill them in; or runs a program only the cluster names."""
    return any(_may_run_ours(c) for c in _main_containers(template))


def trains_with_the_shards(container: Manifest) -> bool:
    """Whether the ``distconv train`` of ``container`` may synchronise through the shards, as
    the rank chooses its transport (:func:`~distconv.distributed.choose_transport`): its
    ``--sync`` as the kubelet passes it, not ``local`` nor ``mpi``; without one, the parameter
    server's where it is given shards (``--pservers``, else ``DISTCONV_PSERVERS`` that is not
    blank), else local. A value only the cluster knows may be either: taken as theirs."""
    train = _train_args(container)
    sync = _flag(train, "--sync", last=True)
    if sync is not None:
        return expand(sync, container) not in ("local", "mpi")
    if _flag(train, "--pservers") is not None:
        return True
    known, servers = env_as_seen(container, "DISTCONV_PSERVERS")
    return not known or bool((servers or "").strip())


def unknown_transports(objs: Sequence[Manifest], workers: Sequence[Manifest]) -> str:
    """A note, for a problem that counts ``workers`` (Jobs, bare Pods) as ranks of the shards,
    naming those whose transport only the cluster knows (``--sync $(S)`` of a ``valueFrom``;
    no ``--sync`` and a ``DISTCONV_PSERVERS`` only the cluster sets), which
    :func:`trains_with_the_shards` takes for theirs: not a guess the reader cannot see. Empty
    where every worker's transport is written."""
    unknown = {
        id(obj): _where(obj)
        for obj, _, _, container, _ in _running(objs, "train")
        if any(obj is w for w in workers) and _transport_unknown(container)
    }
    if not unknown:
        return ""
    return (
        f" ({', '.join(unknown.values())}: --sync, or DISTCONV_PSERVERS, is known only to the "
        "cluster, and is taken for the shards' transport)"
    )


def _transport_unknown(container: Manifest) -> bool:
    """Whether only the cluster knows the transport of the ``distconv train`` of ``container``
    (:func:`trains_with_the_shards`)."""
    train = _train_args(container)
    sync = _flag(train, "--sync", last=True)
    if sync is not None:
        return _is_filled(expand(sync, container))
    return _flag(train, "--pservers") is None and not env_as_seen(container, "DISTCONV_PSERVERS")[0]


def _may_run_ours(container: Manifest) -> bool:
    started = _as_started(container)
    if _runs(container, "train", "pserver", "sshd") or _runs(started, "train", "pserver", "sshd"):
        return True
    return _launches(program_words(started)) or _program_unknown(_words(started, newlines=True))


def _as_started(container: Manifest) -> Manifest:
    """``container`` with its command line as its process (or its shell) is given it:
    ``$(NAME)`` filled in (a value only the cluster knows as a stand-in), and where a shell
    runs it, ``$NAME``/``${NAME}`` filled in from the container's variables as well."""
    argv = [expand(word, container) for word in _argv(container)]
    if any(program_name(word) in SHELLS for word in argv[past_wrappers(argv) :][:1]):
        assigned = _set_in_string(argv)
        argv = [_SHELL_VARIABLE.sub(lambda m: _value(container, assigned, m), w) for w in argv]
    return {**container, "command": argv, "args": []}


def _set_in_string(argv: list[str]) -> dict[str, str]:
    """The variables a shell's string ``argv`` sets itself to a value as written, by name: one
    set anywhere to a quoted or expanded value (``P="$TRAIN"``, ``P=$(X)``) is left out, to be
    read from the container (a value it cannot read is one only the cluster knows)."""
    values: dict[str, str | None] = {}
    for name, value in (pair for word in argv for pair in _SHELL_SETS.findall(word)):
        plain = _PLAIN_VALUE.fullmatch(value) and values.get(name, "") is not None
        values[name] = value if plain else None
    return {name: value for name, value in values.items() if value is not None}


def _value(container: Manifest, assigned: dict[str, str], match: re.Match) -> str:
    """The value a shell fills in for the variable ``match`` names: the one its string sets
    (in ``assigned``), nothing of one the shell sets itself (``$PWD``), else the container's,
    a stand-in where only the cluster knows it, the empty string where it is unset."""
    name = match.group(1) or match.group(2)
    if name in assigned:
        return assigned[name]
    if name in SHELL_OWN:  # a path or a number the shell sets: no program of the pod's env
        return ""
    known, value = env_as_seen(container, name)
    return _FILLED if not known else value or ""


def _launches(words: list[str]) -> bool:
    """Whether ``words`` start the launcher's ``local`` or ``mpi``, which run ranks and shards."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] in _LAUNCHERS:
            if _after_options(words[i + 1 :])[:1] in ([c] for c in _LAUNCHES):
                return True
    return False


def _program_unknown(words: list[str]) -> bool:
    """Whether a command ``words`` run is a value only the cluster knows, or a variable the
    command line leaves unfilled: it may be a rank. Each command's program is read past the
    shell's separators, reserved words, ``-c`` and the wrappers that run it
    (:func:`~distconv.deploy.commands.command_starts`: ``tini -- $(PROG)``)."""
    for at in command_starts(words):
        word = words[at]
        if _is_filled(word) or (word.startswith("$") and not _SPECIAL.match(word)):
            return True
    return False
