"""A rank or a shard started through a shell's plain command string (``sh -c "exec distconv
train ..."``) is held to the checks one started directly gets: its --out, --resume,
--pservers, --rank and --keys were not read, so a job whose ranks would all fail passed."""

from __future__ import annotations

import copy
import shlex

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.walk import shell_command

pytestmark = pytest.mark.timeout(60)


def _set(flag: str, value: str):
    return lambda args: args.__setitem__(args.index(flag) + 1, value)


def _drop(flag: str):
    def edit(args: list[str]) -> None:
        i = args.index(flag)
        del args[i : i + 2]

    return edit


EDITS = {
    "out on the read-only root": ("Job", _set("--out", "/opt/run")),
    "no --resume": ("Job", _drop("--resume")),
    "--pservers not the shards": ("Job", _set("--pservers", "x:5555")),
    "--rank in every rank": ("Job", lambda args: args.extend(["--rank", "0"])),
    "--keys not mounted": ("Job", _set("--keys", "/opt/keys")),
    "shard --num-shards": ("StatefulSet", _set("--num-shards", "3")),
    "shard checkpoints on the root": ("StatefulSet", _set("--checkpoint-dir", "/opt/ckpt")),
}


def _container(objs: list[dict], kind: str) -> dict:
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    return container


def _problems(kind: str, edit, start) -> list[str]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    container = _container(objs, kind)
    edit(container["args"])
    start(container)
    return manifest_problems(objs)


def _direct(container: dict) -> None:
    pass


def _sh_exec(container: dict) -> None:
    container["args"] = ["sh", "-c", "exec " + shlex.join(container["args"])]


def _bash_command(container: dict) -> None:
    container["command"] = ["/bin/bash", "-c"]
    container["args"] = [shlex.join(container["args"])]


def _block_scalar(container: dict) -> None:
    """As YAML's ``args: [sh, -c, |]`` gives it: the string ends in a newline."""
    container["args"] = ["sh", "-c", f"exec {shlex.join(container['args'])}\n"]


@pytest.mark.parametrize(
    "start", [_sh_exec, _bash_command, _block_scalar], ids=["sh-exec", "bash-command", "block"]
)
@pytest.mark.parametrize("case", EDITS)
def test_a_shell_started_rank_or_shard_gets_the_same_checks(case, start):
    kind, edit = EDITS[case]
    direct = _problems(kind, edit, _direct)
    assert direct  # each edit is refused when started directly
    assert _problems(kind, edit, start) == direct


def test_a_rendered_job_in_a_shell_passes():
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    for kind in ("Job", "StatefulSet"):  # the shard's --shard $(DISTCONV_SHARD) filled in
        _sh_exec(_container(objs, kind))
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(
    "script",
    [
        "cd /tmp; exec distconv train --out /opt/run",  # another command first: not read
        "exec distconv train --out $HOME/run",  # the shell's own variable
        "exec distconv train --out /opt/$(UNSET)",  # no such variable: the shell runs it
        "exec distconv train --out /opt/run > /tmp/log",
        "exec distconv train --out '/opt/run",  # an unbalanced quote
    ],
)
def test_a_string_only_the_shell_can_read_is_not_read(script):
    assert shell_command(["sh", "-c", script], set()) is None


def test_a_plain_string_is_read_as_the_shell_splits_it():
    argv = ["/bin/sh", "-c", "exec distconv train --out '/opt/a b' --job-id $(J)"]
    assert shell_command(argv, {"J"}) == [
        "distconv", "train", "--out", "/opt/a b", "--job-id", "$(J)"
    ]  # fmt: skip
    assert shell_command(["distconv", "-c", "train"], set()) is None  # no shell


def test_words_after_the_string_are_no_command_read():
    assert shell_command(["sh", "-c", "exec distconv train", "sh", "--out", "/x"], set()) is None


def _set_in_the_shell(container: dict, name: str) -> None:
    """Move env ``name`` from the container's env into its shell string (``NAME=v exec ...``)."""
    (var,) = [v for v in container["env"] if v["name"] == name]
    container["env"].remove(var)
    script = f"{name}={shlex.quote(var['value'])} exec {shlex.join(container['args'])}"
    container["args"] = ["sh", "-c", script]


@pytest.mark.parametrize(
    ("gpus", "name"), [(0, "DISTCONV_JOB_ID"), (1, "CUPY_CACHE_DIR"), (1, "DISTCONV_DEVICE")]
)
def test_a_variable_the_shell_sets_for_the_rank_is_not_read_as_unset(gpus, name):
    """``sh -c "DISTCONV_JOB_ID=j exec distconv train ..."`` runs the rank with that variable:
    read without it, the rank's job id was the default, which the shards refuse, and its
    kernel cache the read-only home: a job that works was refused."""
    objs = copy.deepcopy(
        render_manifests(job_name="j", workers=2, servers=1, image="d:1", gpus=gpus)
    )
    container = _container(objs, "Job")
    _set_in_the_shell(container, name)
    assert manifest_problems(objs) == []
    assert shell_command(container["args"], set()) is not None  # the rest is still read


def _moved_into_the_command(container: dict, name: str, before: list[str]) -> None:
    """Move env ``name`` from the container's env onto its command line, ``before`` its
    arguments: ``env NAME=v``, ``mpirun -x NAME=v``, ``mpirun -genv NAME v``."""
    (var,) = [v for v in container["env"] if v["name"] == name]
    container["env"].remove(var)
    words = [w.replace("VALUE", var["value"]).replace("NAME", name) for w in before]
    container["args"] = [*words, *container["args"]]


@pytest.mark.parametrize("name", ["DISTCONV_JOB_ID", "CUPY_CACHE_DIR"])
def test_a_variable_env_sets_for_the_rank_is_not_read_as_unset(name):
    """``env DISTCONV_JOB_ID=j distconv train ...``: the same refusal as for the shell's
    ``NAME=v exec`` came from the command started directly (before the audit too)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1", gpus=1))
    _moved_into_the_command(_container(objs, "Job"), name, ["env", "NAME=VALUE"])
    assert manifest_problems(objs) == []


@pytest.mark.parametrize("option", [["-x", "NAME=VALUE"], ["-genv", "NAME", "VALUE"]])
@pytest.mark.parametrize("name", ["CUPY_CACHE_DIR", "DISTCONV_DEVICE"])
def test_a_variable_mpirun_sets_for_the_ranks_is_not_read_as_unset(name, option):
    """mpirun's ``-x NAME=v`` (Open MPI) or ``-genv NAME v`` (Hydra) sets it for every rank."""
    objs = copy.deepcopy(render_manifests(job_name="m", workers=2, servers=0, image="d:1", gpus=1))
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    (container,) = launcher["containers"]
    mpirun = container["args"].pop(0)
    _moved_into_the_command(container, name, [mpirun, *option])
    assert manifest_problems(objs) == []


def test_a_variable_holding_a_quote_is_not_read_as_the_shell_word():
    """The kubelet puts $(OUT) into the string before the shell reads it: the shell strips the
    quotes of ``'/var/lib/...'``. Read as one word, quotes and all, --out was a relative path
    under the read-only home: a working job was refused."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    container = _container(objs, "Job")
    del container["workingDir"]
    _set("--out", "$(OUT)")(container["args"])
    container["env"].append({"name": "OUT", "value": "'/var/lib/distconv/run/train'"})
    container["args"] = ["sh", "-c", "exec " + " ".join(container["args"])]
    assert manifest_problems(objs) == []
    assert shell_command(container["args"], {"OUT"}) is not None  # read where OUT is plain


@pytest.mark.parametrize(
    "before",
    [["env", "NAME=VALUE"], ["/usr/bin/env", "NAME=VALUE"], ["sh", "-c"]],
    ids=["env", "env-path", "shell"],
)
def test_a_job_id_the_command_line_sets_is_read_as_set(before):
    """``env DISTCONV_JOB_ID=other distconv train ...`` (or the shell's ``NAME=v exec``) runs
    the ranks under job id ``other``, which the shards do not serve: every worker's hello is
    refused. Read as unknown, the job passed."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    container = _container(objs, "Job")
    (var,) = [v for v in container["env"] if v["name"] == "DISTCONV_JOB_ID"]
    var["value"] = "other"
    if before[0] == "sh":
        _set_in_the_shell(container, "DISTCONV_JOB_ID")
    else:
        _moved_into_the_command(container, "DISTCONV_JOB_ID", before)
    container["env"].append({"name": "DISTCONV_JOB_ID", "value": "j"})  # what the line replaces
    (problem,) = manifest_problems(objs)
    assert "job id 'other' (DISTCONV_JOB_ID)" in problem


@pytest.mark.parametrize("option", [["-x", "NAME=VALUE"], ["-genv", "NAME", "VALUE"]])
def test_a_kernel_cache_mpirun_sets_for_the_ranks_is_judged(option):
    """``mpirun -x CUPY_CACHE_DIR=/home/...`` puts every GPU rank's kernel cache on the
    read-only home: read as unknown, the job passed."""
    objs = copy.deepcopy(render_manifests(job_name="m", workers=2, servers=0, image="d:1", gpus=1))
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    (container,) = launcher["containers"]
    (var,) = [v for v in container["env"] if v["name"] == "CUPY_CACHE_DIR"]
    var["value"] = "/home/distconv/.cupy"
    mpirun = container["args"].pop(0)
    _moved_into_the_command(container, "CUPY_CACHE_DIR", [mpirun, *option])
    problems = manifest_problems(objs)
    assert problems and all("/home/distconv/.cupy" in p for p in problems), problems


def test_a_variable_an_unread_shell_string_sets_is_not_judged():
    """``sh -c "DISTCONV_WORLD_SIZE=2 exec distconv train ... --seed $SEED"`` is left unread: one
    word that starts ``NAME=``. What it sets only the shell knows, and nothing is refused for it
    (its value was read as the whole string, and refused as the world size)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    container = _container(objs, "Job")
    _set_in_the_shell(container, "DISTCONV_WORLD_SIZE")
    container["args"][2] += " --seed $SEED"
    assert shell_command(container["args"], set()) is None  # $SEED: only the shell knows it
    assert manifest_problems(objs) == []


@pytest.mark.parametrize(
    "before",
    [
        ["env", "-u", "DISTCONV_JOB_ID"],
        ["env", "--unset=DISTCONV_JOB_ID"],
        ["/usr/bin/env", "-uDISTCONV_JOB_ID"],
        ["env", "-i", "PATH=/usr/bin"],
        ["env", "--ignore-environment"],
        ["env", "-"],
        ["env", "-iu", "OTHER"],
        ["env", "-vu", "DISTCONV_JOB_ID"],
        ["env", "-C", "/tmp", "-vi"],
        ["env", "DISTCONV_JOB_ID=j", "env", "-u", "DISTCONV_JOB_ID"],
    ],
    ids=[
        "u",
        "unset=",
        "uNAME",
        "i",
        "ignore-environment",
        "dash",
        "iu",
        "vu",
        "C-vi",
        "set-then-u",
    ],
)
def test_a_job_id_env_removes_is_read_as_unset(before):
    """``env -u DISTCONV_JOB_ID distconv train ...`` (or ``env -i``) starts the ranks without
    the pod's DISTCONV_JOB_ID: under the default job id, which the shards do not serve. Read
    as the pod's value, the job passed."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    container = _container(objs, "Job")
    container["args"] = [*before, *container["args"]]
    problems = manifest_problems(objs)
    assert [p for p in problems if "(the default, without DISTCONV_JOB_ID) but" in p]


@pytest.mark.parametrize(
    "before",
    [
        ["env", "-u", "OTHER"],
        ["env", "-u", "DISTCONV_JOB_ID", "DISTCONV_JOB_ID=j"],
        ["env", "-vuOTHER"],
        ["env", "-C", "-i", "-vu", "OTHER"],
    ],
    ids=["another", "set-again", "vuOTHER", "C-takes-i"],
)
def test_a_job_id_env_keeps_or_sets_again_is_read_as_set(before):
    """``env -u OTHER`` leaves DISTCONV_JOB_ID alone; ``NAME=v`` after ``-u NAME`` sets it."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    container = _container(objs, "Job")
    container["args"] = [*before, *container["args"]]
    assert manifest_problems(objs) == []
