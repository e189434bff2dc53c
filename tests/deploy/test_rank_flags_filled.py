"""A rank's ``--resume`` and ``--out``, a rank's or a shard's ``--keys`` and mpirun's ``-np``
are read as the kubelet passes them: ``$(VAR)`` filled in from the container's literal values,
passed where only the cluster knows it."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

CONFIG_MAP = {"configMapKeyRef": {"name": "c", "key": "k"}}


def _problems(kind: str, flag: str, value: str, var: dict) -> list[str]:
    """The problems of a job whose ranks take ``flag value``, ``var`` in their environment."""
    servers = 1 if kind == "Job" else 0
    objs = render_manifests(
        job_name="j", workers=2, servers=servers, image="d:1", train_args=["--data", "digits"]
    )
    (obj,) = [o for o in objs if o["kind"] == kind]
    spec = obj["spec"]["mpiReplicaSpecs"]["Launcher"] if kind == "MPIJob" else obj["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    container["env"].append(var)
    args = container["args"]
    args[args.index(flag) + 1] = value
    return manifest_problems(objs)


@pytest.mark.parametrize("kind", ["Job", "MPIJob"])
@pytest.mark.parametrize(
    "flag, value, var, words",
    [
        ("--resume", "$(R)", {"name": "R", "value": "auto"}, None),
        ("--resume", "$(R)", {"name": "R", "valueFrom": CONFIG_MAP}, None),
        ("--resume", "$(R)", {"name": "R", "value": "never"}, "needs --resume auto"),
        ("--out", "$(OUT)", {"name": "OUT", "value": "/var/lib/distconv/run/x"}, None),
        ("--out", "/$(OUT)", {"name": "OUT", "valueFrom": CONFIG_MAP}, None),
        ("--out", "$(OUT)", {"name": "OUT", "value": "/data/x"}, "--out /data/x is on no"),
    ],
)
def test_a_ranks_flag_in_a_variable_is_read_filled_in(kind, flag, value, var, words):
    """``--resume $(R)`` with R=auto was refused as not resuming, and ``--out $(OUT)`` was
    judged as the path '$(OUT)' ('--out /$(OUT) is on no writable volume' for a run directory
    on the run volume), where the kubelet passes what the variable holds."""
    problems = _problems(kind, flag, value, var)
    if words is None:
        assert problems == []
    else:
        assert problems and all(words in p for p in problems), problems


@pytest.mark.parametrize("kind", ["StatefulSet", "Job"])
@pytest.mark.parametrize(
    "value, var, words",
    [
        ("$(K)", {"name": "K", "value": "/etc/distconv/keys"}, None),
        ("$(K)", {"name": "K", "valueFrom": CONFIG_MAP}, None),  # only the cluster knows
        ("/etc/distconv/keys/", None, None),  # the same folder
        ("$(K)", {"name": "K", "value": "/elsewhere"}, "/elsewhere"),
        ("/etc/distconv/keys/x", None, "/etc/distconv/keys/x"),
    ],
)
def test_the_keys_folder_is_read_as_the_process_reads_it(kind, value, var, words):
    """``--keys $(K)`` with K=/etc/distconv/keys, or ``--keys /etc/distconv/keys/``, was
    refused twice ('DISTCONV_KEYS must be '$(K)'', '--keys $(K) is not a mounted Secret
    volume'), though the shard or rank reads the mounted Secret's folder. A shard, which reads
    no DISTCONV_KEYS, is given none: only its --keys is judged."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    container["env"].extend([var] if var else [])
    args = container["args"]
    args[args.index("--keys") + 1] = value
    problems = manifest_problems(objs)
    if words is None:
        assert problems == []
    else:
        said = [f"--keys {words} is not a mounted Secret volume"]  # and a rank's DISTCONV_KEYS
        said[:0] = [f"DISTCONV_KEYS must be '{words}'"] if kind == "Job" else []
        assert len(problems) == len(said), problems
        assert all(words in p for words, p in zip(said, problems)), problems


@pytest.mark.parametrize(
    "var, world_size, words",
    [
        ({"name": "N", "value": "2"}, None, None),
        ({"name": "N", "valueFrom": CONFIG_MAP}, None, None),  # only the cluster knows
        ({"name": "N", "value": "9"}, None, "-np 9 exceeds the workers' slots (2 ="),
        ({"name": "N", "value": "2"}, "3", "--world-size 3 but MPIJob j runs 2 ranks"),
    ],
)
def test_mpiruns_process_count_in_a_variable_is_read_filled_in(var, world_size, words):
    """``mpirun -np $(N)`` with N=2 was refused ("mpirun needs -np with a number, got
    '$(N)'"), and the ranks' --world-size was then compared with nothing."""
    objs = render_manifests(
        job_name="j", workers=2, servers=0, image="d:1", train_args=["--data", "digits"]
    )
    launcher = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]
    (container,) = launcher["template"]["spec"]["containers"]
    container["env"].append(var)
    args = container["args"]
    args[args.index("-np") + 1] = "$(N)"
    args += ["--world-size", world_size] if world_size else []
    problems = manifest_problems(objs)
    if words is None:
        assert problems == []
    else:
        (problem,) = problems
        assert words in problem, problem


def _shard(objs: list) -> dict:
    """The shards' container, which the render gives no workingDir."""
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert "workingDir" not in container
    return container


def _set(container: dict, flag: str, value: str, volume: str, mount: str) -> None:
    """``flag value`` in ``container``'s args, and its ``volume`` mounted at ``mount``."""
    args = container["args"]
    args[args.index(flag) + 1] = value
    (mounted,) = [m for m in container["volumeMounts"] if m["name"] == volume]
    mounted["mountPath"] = mount


@pytest.mark.parametrize("mount, refused", [("/keys", True), ("/home/distconv/keys", False)])
def test_a_relative_keys_folder_is_read_from_the_images_workdir(mount, refused):
    """Without a workingDir a process starts in the image's WORKDIR (/home/distconv), not in
    /: ``--keys keys`` beside a Secret mounted at /keys passed, and every shard failed to read
    its keys; one mounted at /home/distconv/keys, where they are read, was refused."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    container = _shard(objs)
    _set(container, "--keys", "keys", "keys", mount)
    # a shard reads no DISTCONV_KEYS, and is given none; one set must still agree with --keys
    container["env"].append({"name": "DISTCONV_KEYS", "value": mount})
    problems = manifest_problems(objs)
    if not refused:
        assert problems == []
    else:
        assert len(problems) == 2, problems
        assert "DISTCONV_KEYS must be 'keys'" in problems[0], problems
        assert "--keys keys (/home/distconv/keys) is not a mounted Secret" in problems[1]


@pytest.mark.parametrize(
    "mount, refused", [("/checkpoints", True), ("/home/distconv/checkpoints", False)]
)
def test_a_relative_checkpoint_dir_is_judged_from_the_images_workdir(mount, refused):
    """``--checkpoint-dir checkpoints`` without a workingDir is /home/distconv/checkpoints:
    judged as /checkpoints, a volume there passed and one at the real place was refused."""
    objs = render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    _set(_shard(objs), "--checkpoint-dir", "checkpoints", "checkpoints", mount)
    problems = manifest_problems(objs)
    assert bool(problems) is refused, problems
    if refused:
        (problem,) = problems
        assert "--checkpoint-dir /home/distconv/checkpoints is on no writable" in problem


@pytest.mark.parametrize(
    "args, var, words",
    [
        (["--world-size", "$(W)"], {"name": "W", "value": "3"}, "--world-size 3 but Job j-worker"),
        (["--rank", "$(R)"], {"name": "R", "value": "0"}, "--rank 0 is in every rank's"),
        (["--job-id", "$(J)"], {"name": "J", "value": "k"}, "job id 'k' (--job-id) but"),
        # DISTCONV_JOB_ID itself filled in from a variable defined before it
        ([], {"name": "J", "value": "k"}, "job id 'k' (DISTCONV_JOB_ID) but"),
        (["--world-size", "$(W)"], {"name": "W", "value": "2"}, None),
        (["--world-size", "$(W)"], {"name": "W", "valueFrom": CONFIG_MAP}, None),
        (["--job-id", "$(J)"], {"name": "J", "value": "j"}, None),
        # the Job controller adds it to each pod: the manifest does not define it
        (["--rank", "$(JOB_COMPLETION_INDEX)"], {"name": "X", "value": ""}, None),
    ],
)
def test_a_ranks_settings_in_a_variable_are_read_filled_in(args, var, words):
    """``--world-size $(W)``, ``--rank $(R)``, ``--job-id $(J)`` and ``DISTCONV_JOB_ID=$(J)``
    were passed unjudged whatever the variable held: a world size the Job does not run, one
    rank claimed by every pod, a job id the shards do not serve (every hello refused)."""
    objs = render_manifests(
        job_name="j", workers=2, servers=1, image="d:1", train_args=["--data", "digits"]
    )
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"].insert(0, var)
    container["args"] += args
    if not args:
        (env,) = [e for e in container["env"] if e["name"] == "DISTCONV_JOB_ID"]
        env["value"] = "$(J)"
    problems = manifest_problems(objs)
    if words is None:
        assert problems == []
    else:
        (problem,) = problems
        assert problem.startswith("Job j-worker container ") and words in problem, problem
