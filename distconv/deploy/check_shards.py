"""A shard's command line read by ``distconv pserver``'s own parser (part of
:func:`distconv.deploy.check.manifest_problems`): a flag it does not take, a value it cannot
read or a flag it needs and misses would stop every shard at start, after the job was applied.

The kubelet fills in ``$(VAR)`` from the container's environment before the shard starts. A
variable set to a value is filled in here as it would be there (its own ``$(VAR)`` first, from
the variables defined before it); one whose value only the cluster knows (``valueFrom``,
``envFrom``; the shard's ``--shard $(DISTCONV_SHARD)``) is taken for a good value, as is one
the kubelet may define for a Service (``X_SERVICE_PORT``). One the container does not define
stays as written, as the kubelet leaves it.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from distconv.deploy.counts import known_count
from distconv.deploy.loopback import on_loopback
from distconv.deploy.shell import KUBELET_REFERENCE, STAND_IN
from distconv.deploy.walk import (
    Manifest,
    _here,
    _running,
    _where,
    _writable,
    set_on_command_line,
    unset_on_command_line,
)
from distconv.endpoint import split_endpoint
from distconv.runtime import RuntimeConfigError
from distconv.sync.ps.cli import add_pserver, shard_config, unread_staleness
from distconv.transport_flags import refuse_probe_flags_without_port

#: what stands for a value only the cluster knows: no flag starts so, no value is written so
_FILLED = STAND_IN
#: the variables the kubelet defines for the namespace's Services (``enableServiceLinks``; the
#: API server's ``KUBERNETES_SERVICE_PORT`` always): a container may refer to them undeclared
_SERVICE_LINK = re.compile(
    r"[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)"
)
#: a token argparse may take for the value of a flag though it starts with "-"
_NEGATIVE = re.compile(r"-\d+|-\d*\.\d+")
#: the default of a required flag in :func:`pserver_parser`: still there after the parse, the
#: flag was not given (argparse sets a flag's default only where it does not see the flag)
_ABSENT = object()


class ArgvRefused(ValueError):
    """The complaint argparse would print before it exits (a flag it does not take, a value it
    cannot read, a required flag missing), raised instead."""


class HelpShown(ArgvRefused):
    """``-h/--help``: the usage printed, then exit status 0, a success where the command need
    only exit 0 (an init container), not where it must keep serving (a shard)."""


class _QuietParser(argparse.ArgumentParser):
    """An argparse parser that raises its complaint instead of printing the usage on stderr and
    exiting: the checks report it beside their other findings."""

    def error(self, message: str) -> NoReturn:
        raise ArgvRefused(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        # only --help exits without an error here (the subcommand has no --version)
        raise HelpShown(message or "-h/--help prints the usage and exits")

    def print_help(self, file: Any = None) -> None:
        pass

    def print_usage(self, file: Any = None) -> None:
        pass


class _AnyFilled(tuple):
    """An action's choices, which also hold any value the cluster fills in."""

    def __contains__(self, value: object) -> bool:
        return _is_filled(value) or super().__contains__(value)


def _is_filled(value: object) -> bool:
    return isinstance(value, str) and _FILLED in value


def _or_filled(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """``convert``, except that a value the cluster fills in is kept as it is."""

    # argparse names the type by its __name__ ("invalid int value"); a type's own __dict__
    # (int's methods) is no use to the wrapper, so it is not copied
    @functools.wraps(convert, updated=())
    def read(text: str) -> Any:
        return text if _is_filled(text) else convert(text)

    return read


@functools.cache
def pserver_parser() -> argparse.ArgumentParser:
    """``distconv pserver``'s parser, as the shard builds it, raising :class:`ArgvRefused` instead
    of exiting, and taking any value the cluster fills in for a good one.

    A required flag is not required of the parse: it defaults to a marker that
    :func:`shard_argv_problem` looks for afterwards, since a token the cluster fills in that the
    parse leaves over may be that flag (``$(ARGS)`` set to ``--workers=4``), which argparse
    cannot know before it refuses.
    """
    parser = add_pserver(_QuietParser(prog="distconv").add_subparsers())
    for action in parser._actions:  # argparse lists its actions nowhere public
        if action.type is not None:
            action.type = _or_filled(action.type)
        if action.choices is not None:
            action.choices = _AnyFilled(action.choices)
        if action.required:
            action.required, action.default = False, _ABSENT
    return parser


def _defined_at(container: Manifest, name: str) -> int | None:
    """The index in ``container``'s env of the last definition of ``name``, the one the
    process sees; None where there is none."""
    names = [var.get("name") for var in container.get("env", [])]
    return len(names) - 1 - names[::-1].index(name) if name in names else None


def env_as_seen(container: Manifest, name: str) -> tuple[bool, str | None]:
    """The container's variable ``name`` as its process sees it: ``(True, value)`` where the
    manifest decides it (value None: not set), ``$(VAR)`` filled in as the kubelet fills in a
    variable's value, from those defined before it; ``(False, None)`` where only the cluster
    knows (a ``valueFrom``, an ``envFrom`` that may set it, a reference to such a variable).
    A value the command line sets (``env NAME=v distconv ...``:
    :func:`~walk.set_on_command_line`) is the one seen, filled in from all the env; one it
    removes (``env -u NAME``, ``env -i``: :func:`~walk.unset_on_command_line`) is not set."""
    given = set_on_command_line(container, name)
    if given is not None:
        # a blank: a shell string left unread (``sh -c "NAME=v exec distconv ... $HOME"``,
        # one word here), whose words only the shell knows
        unread = any(c.isspace() for c in given)
        value = expand(given, container)
        return (False, None) if unread or _is_filled(value) else (True, value)
    if unset_on_command_line(container, name):  # env -u NAME, env -i: not the pod's value
        return True, None
    at = _defined_at(container, name)
    if at is None:
        return (False, None) if container.get("envFrom") else (True, None)
    var = container["env"][at]
    if "valueFrom" in var:
        return False, None
    value = expand(str(var.get("value") or ""), container, at)
    return (False, None) if _is_filled(value) else (True, value)


def expand(token: str, container: Manifest, before: int | None = None) -> str:
    """``token`` as the kubelet passes it to the container: ``$(NAME)`` replaced by the value of
    the container's variable NAME, ``$$`` by ``$``; a reference to a variable whose value only
    the cluster knows becomes a stand-in that :func:`pserver_parser` accepts for any value.

    Each variable's value is itself filled in first, as the kubelet does, from the variables
    defined before it only (``BIND=$(HOST):5555`` after ``HOST=127.0.0.1`` is
    ``127.0.0.1:5555``; ``$$`` in it is ``$``), once: what it is filled in with is not read
    again. ``before``: ``token`` is the value of the container's ``env[before]``, so filled in
    from ``env[:before]``; a command line sees them all."""
    values: dict[str, str] = {}  # as the kubelet sets them: the last of a name is kept
    for var in container.get("env", [])[:before]:
        name, value = var.get("name"), var.get("value")
        if "valueFrom" in var:
            values[name] = f"{_FILLED}{name}{_FILLED}"
        else:  # no value is the empty string
            values[name] = _fill_in(container, values, "" if value is None else str(value))
    return _fill_in(container, values, token)


def _fill_in(container: Manifest, values: dict[str, str], text: str) -> str:
    """``text`` with each ``$(NAME)`` and ``$$`` replaced in one pass, as the kubelet's
    expansion does: NAME's entry in ``values``, else a stand-in where only the cluster may
    define NAME (``envFrom``, a Service's variable), else the reference as written."""

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        if name in values:
            return values[name]
        if _may_come_from_env_from(container, name) or _SERVICE_LINK.fullmatch(name):
            return f"{_FILLED}{name}{_FILLED}"
        return match.group(0)  # no such variable: the kubelet leaves the reference

    return KUBELET_REFERENCE.sub(fill, text)


#: a ConfigMap's or a Secret's key, which ``envFrom`` makes a variable's name (after its
#: ``prefix``): the API server takes no other character in one
_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def _may_come_from_env_from(container: Manifest, name: str) -> bool:
    """Whether an ``envFrom`` of ``container`` may define variable ``name``: its ``prefix``
    and a key. The kubelet reads ``$((N+1))``'s ``$(`` to the first ``)``, as a reference to
    ``(N+1``, which no key holds: it leaves that as written (a shell's arithmetic), no value
    only the cluster knows."""
    return any(
        name.startswith(prefix := str(source.get("prefix") or ""))
        and _KEY.fullmatch(name[len(prefix) :])
        for source in container.get("envFrom", [])
    )


def shard_argv_problem(
    args: Sequence[str], container: Manifest, *, serving: bool = True
) -> str | None:
    """Why ``distconv pserver`` would refuse ``args`` (the arguments after ``pserver``) in
    ``container``, in argparse's words naming the flag and in its order (a value it cannot
    read, then a required flag missing, then what it does not take), then as the shard refuses
    a parsed command line (``--health-host`` or ``--stall-seconds`` without ``--health-port``);
    None when it would start.
    ``serving``: the command must keep serving, as a shard; else it need only exit 0, as an init
    container, and ``--help`` (which exits 0 before any other complaint) is no problem.

    A token the cluster fills in that the parse leaves over may be any flag (``envFrom`` may
    define any name, to any value): a required flag missing may be in it. The kubelet does not
    split what it fills in, so each such token is one argument, at most one flag: a command line
    missing more required flags than it has such tokens is refused.
    """
    argv = [expand(a, container) for a in args]
    parser = pserver_parser()
    try:
        namespace, extra = parser.parse_known_args(argv)
    except HelpShown as exc:
        return _shown(str(exc)) if serving else None
    except ArgvRefused as exc:
        return _shown(str(exc))
    filled = sum(_is_filled(a) for a in extra)  # each one argument: $(ARGS) is not split
    loose = filled > 0
    missing = [a for a in parser._actions if getattr(namespace, a.dest, None) is _ABSENT]
    if len(missing) > filled:
        names = ", ".join("/".join(a.option_strings) for a in missing)  # as argparse names them
        held = f" ({filled} value(s) the cluster fills in, one argument each)" if loose else ""
        return f"the following arguments are required: {names}{held}"
    wrong = _surely_wrong(extra, loose)
    if wrong:
        return _shown(f"unrecognized arguments: {' '.join(wrong)}")
    if filled > len(missing):  # one token the cluster fills in is left for any flag
        return None
    unread = unread_staleness(namespace)  # the shard's usage error, first after the parse
    if unread is not None:
        return _shown(unread)
    try:  # the shard's own refusals after the parse, in its order: it exits 1 at start
        shard_config(_with_stand_ins(namespace), "").check()
        refuse_probe_flags_without_port(namespace)
    except (ValueError, RuntimeConfigError) as exc:
        return _shown(str(exc))
    return None


#: a value :meth:`ShardConfig.check` takes, for each flag whose value only the cluster knows
#: (or a required one a token the cluster fills in may hold): judged by what is written only
_STAND_INS: dict[str, Any] = {
    "bind": "0.0.0.0:0",
    "shard": 0,
    "num_shards": 1,
    "workers": 1,
    # async: the mode whose check takes either --on-worker-loss; with sync, a written
    # "--on-worker-loss continue" was refused beside a --mode only the cluster knows
    "mode": "async",
    "max_staleness": 0,
    "timeout": 60.0,
    "on_worker_loss": "fail",
    "keep_parts": 0,
    "max_message_bytes": 1,
    "max_frame_bytes": 1,
    "drain_seconds": 0.0,
}


def _with_stand_ins(namespace: argparse.Namespace) -> argparse.Namespace:
    """``namespace`` with a value the shard's settings check takes in place of each one the
    cluster fills in or a filled token may hold (``--keys $(DIR)`` stays: any text is a
    directory named): ``--workers 0`` or ``--timeout 0`` stops every shard at start although
    the parse takes it."""
    args = argparse.Namespace(**vars(namespace))
    for name, value in vars(namespace).items():
        if (value is _ABSENT or _is_filled(value)) and name in _STAND_INS:
            setattr(args, name, _STAND_INS[name])
    if args.num_shards is not namespace.num_shards and isinstance(args.shard, int):
        args.num_shards = max(1, args.shard + 1)  # a --shard written as 3 fits a filled count
    return args


def shard_flag(args: Sequence[str], container: Manifest, dest: str) -> tuple[bool, str | None]:
    """Whether ``distconv pserver`` reads its flag ``dest`` from ``args``, however written
    (``--job`` is ``--job-id``), and the value it reads, ``$(VAR)`` filled in as by
    :func:`expand`: None where only the cluster knows it, or the command line is refused."""
    argv = [expand(a, container) for a in args]
    try:  # a dest already in the namespace keeps its value where the flag is not given
        namespace, _ = pserver_parser().parse_known_args(
            argv, argparse.Namespace(**{dest: _ABSENT})
        )
    except ArgvRefused:
        return True, None
    value = getattr(namespace, dest)
    if value is _ABSENT:
        return False, None
    return True, None if _is_filled(value) else str(value)


def _surely_wrong(extra: list[str], loose: bool) -> list[str]:
    """The tokens of ``extra`` (what the parser left) the shard would refuse; ``loose``: one of
    them is a token the cluster fills in. That one may be a flag, and the token after it its
    value; a flag whose name is written out is wrong whatever its value (``--bogus=$(T)``)."""

    def wrong(token: str) -> bool:
        if token.startswith("-") and not (loose and _NEGATIVE.fullmatch(token)):
            return not _is_filled(token.split("=", 1)[0])
        return not loose and not _is_filled(token)

    return [a for a in extra if wrong(a)]


def _shown(message: str) -> str:
    """``message`` with each stand-in for a cluster's value written as the reference it was."""
    return re.sub(f"{_FILLED}([^{_FILLED}]*){_FILLED}", r"$(\1)", message)


def _shard_args(objs: Sequence[Manifest]) -> Iterator[str]:
    """Every ``distconv pserver`` takes its arguments. A shard refused would exit at start. An
    init container is no shard: it need only exit 0 (``distconv pserver --help``, an image's
    smoke test), but one whose command line is refused keeps its pod from ever starting. (One
    that starts a shard would hold the pod until that shard ends: not judged here.)"""
    for init, outcome in ((False, "every shard would exit"), (True, "the pod would never start")):
        for obj, where, _, container, args in _running(objs, "pserver", init=init):
            problem = shard_argv_problem(args, container, serving=not init)
            if problem is not None:
                yield f"{_here(where, container)}: distconv pserver: {problem} ({outcome})"
            elif not init:
                yield from _parts_writable(where, container, args)
                yield from _bind_reachable(where, container, args)
                yield from _shard_per_pod(obj, where, container, args)


def _parts_writable(where: str, container: Manifest, args: Sequence[str]) -> Iterator[str]:
    """A shard checks at start that it can make its ``--checkpoint-dir`` or write there: on the
    read-only root (a path no writable volume of its container holds) every shard exits."""
    _, directory = shard_flag(args, container, "checkpoint_dir")
    if directory:  # none: no parts kept; a value only the cluster knows is not judged
        only = {"spec": {"containers": [container]}}  # the shard's own mounts, not a sidecar's
        for problem in _writable(
            where, only, directory, container.get("workingDir"), "--checkpoint-dir"
        ):
            yield f"{problem} (every shard would exit at start)"


def _bind_reachable(where: str, container: Manifest, args: Sequence[str]) -> Iterator[str]:
    """Workers dial a shard at its pod's address (``--pservers``, its DNS name): a shard whose
    ``--bind`` is loopback (``127.0.0.1``, ``[::1]``, ``localhost``, the interface ``lo``),
    read as the shard reads it, answers its own pod only, and every worker waits out its
    timeout for a hello."""
    _, bind = shard_flag(args, container, "bind")
    try:
        host = split_endpoint(bind)[0] if bind else None  # none: only the cluster knows it
    except ValueError:  # the shard refuses it at start: named by its own check
        return
    if host is not None and (host == "lo" or on_loopback(host)):
        yield (
            f"{_here(where, container)}: --bind {bind} is loopback: no worker in another pod "
            "could reach the shard (bind 0.0.0.0 or [::], every interface of the pod)"
        )


def _shard_per_pod(
    obj: Manifest, where: str, container: Manifest, args: Sequence[str]
) -> Iterator[str]:
    """Each replica of the shards' pods serves a shard of its own, from its pod
    (``--shard $(DISTCONV_SHARD)``, the pod-index label): a ``--shard`` written out, or filled
    in from a literal value, is the same in every replica, so they all serve that one shard,
    and every worker's hello fails (``pserver ... is set up as {'shard': 0, ...}, this worker
    expects {'shard': 1, ...}``)."""
    replicas = known_count(obj.get("spec", {}), "replicas", 1)  # None: no integer, named
    _, shard = shard_flag(args, container, "shard")
    if replicas is not None and replicas > 1 and shard is not None:
        yield (
            f"{_here(where, container)}: --shard {shard} is in every shard's arguments, so "
            f"the {replicas} replicas of {_where(obj)} would all serve shard {shard} (each "
            "takes its own from its pod: --shard $(DISTCONV_SHARD))"
        )
