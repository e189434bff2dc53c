"""The checks read each shard's command line with ``distconv pserver``'s own parser: a flag it
does not take, a value it cannot read, a flag it needs and misses are reported, naming the
container and the flag, before any shard exits in the cluster; ``$(VAR)`` is read as the kubelet
fills it in."""

from __future__ import annotations

import copy

import pytest
import yaml

from distconv.deploy import manifest_problems, render_manifests
from distconv.deploy.render import EXAMPLE_TRAIN_ARGS, EXAMPLES

pytestmark = pytest.mark.timeout(60)

#: the parameter-server shapes: the examples, one shard and one worker, many shards
CONFIGS = {
    "pserver": {**EXAMPLES["pserver"], "train_args": EXAMPLE_TRAIN_ARGS},
    "pserver-gpu": {**EXAMPLES["pserver-gpu"], "train_args": EXAMPLE_TRAIN_ARGS},
    "one-worker": dict(job_name="solo", workers=1, servers=1, image="d:1", mode="async"),
    "many-shards": dict(job_name="wide", workers=16, servers=8, image="d:1", gpus=1),
}


def _shards(objs: list[dict]) -> tuple[str, dict]:
    """(how the problems name it, the container) of the shards' StatefulSet."""
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return f"StatefulSet {sts['metadata']['name']} container {container['name']}", container


def _problems_with(name: str, *args: str, env: list[dict] | None = None) -> tuple[str, list]:
    """The shard container's name and the problems once ``args`` are appended to its argv
    (and ``env`` to its environment)."""
    objs = copy.deepcopy(render_manifests(**CONFIGS[name]))
    here, container = _shards(objs)
    container["args"].extend(args)
    container["env"].extend(env or [])
    return here, manifest_problems(objs)


def _shard_problems(here: str, problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith(f"{here}: distconv pserver: ")]


@pytest.mark.parametrize("name", CONFIGS)
def test_a_rendered_shard_passes_and_a_flag_it_does_not_take_is_caught(name):
    here, problems = _problems_with(name)
    assert problems == []
    assert "$(DISTCONV_SHARD)" in _shards(render_manifests(**CONFIGS[name]))[1]["args"]
    here, problems = _problems_with(name, "--bogus-flag")
    assert problems == [
        f"{here}: distconv pserver: unrecognized arguments: --bogus-flag (every shard would exit)"
    ]


@pytest.mark.parametrize("flag", ["-q", "--quiet"])
def test_a_shard_told_to_be_quiet_after_the_command_passes(flag):
    """``distconv pserver -q`` is what ``distconv -q pserver`` is: the check, which reads the
    shard's argv with the pserver parser alone, refused it where the shard takes it."""
    assert _problems_with("pserver", flag)[1] == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["--bogus-flag", "1"], "unrecognized arguments: --bogus-flag 1"),
        (["--bogus-flag=1"], "unrecognized arguments: --bogus-flag=1"),
        (["--workers", "two"], "argument --workers: must be an integer, got 'two'"),
        (["--mode", "bsp"], "argument --mode: invalid choice: 'bsp'"),
        (["--health-port", "70000"], "argument --health-port: a port is 0..65535, got 70000"),
        (["--timeout"], "argument --timeout: expected one argument"),
        (["--max", "3"], "ambiguous option: --max could match --max-staleness"),
        (["--insecure"], "argument --insecure: not allowed with argument --keys"),
        (["-h"], "-h/--help prints the usage and exits"),
        # a renamed variable: the kubelet leaves the reference as written; not an integer
        (["--shard", "$(SHARD_INDEX)"], "--shard: must be an integer, got '$(SHARD_INDEX)'"),
        # $$ is a literal $: no expansion
        (["--shard", "$$(DISTCONV_SHARD)"], "must be an integer, got '$(DISTCONV_SHARD)'"),
    ],
)
def test_what_the_shard_would_refuse_is_reported_naming_the_flag(args, words, capsys):
    here, problems = _problems_with("pserver", *args)
    (problem,) = _shard_problems(here, problems)
    assert words in problem and problem.endswith("(every shard would exit)"), problem
    # reported, not printed: argparse's usage goes nowhere and nothing exits
    assert capsys.readouterr() == ("", "")


def test_a_required_flag_missing_is_reported():
    objs = copy.deepcopy(render_manifests(**CONFIGS["pserver"]))
    here, container = _shards(objs)
    at = container["args"].index("--workers")
    del container["args"][at : at + 2]
    assert _shard_problems(here, manifest_problems(objs)) == [
        f"{here}: distconv pserver: the following arguments are required: --workers "
        "(every shard would exit)"
    ]


def test_placeholders_are_read_as_the_kubelet_fills_them_in():
    """A literal variable is filled in and judged; one only the cluster knows passes."""
    literal = [{"name": "MODE", "value": "async"}]
    assert _problems_with("pserver", "--mode", "$(MODE)", env=literal)[1] == []
    here, problems = _problems_with(
        "pserver", "--mode", "$(MODE)", env=[{"name": "MODE", "value": "bsp"}]
    )
    assert _shard_problems(here, problems) == [
        f"{here}: distconv pserver: argument --mode: invalid choice: 'bsp' (choose from "
        "'sync', 'async') (every shard would exit)"
    ]
    from_cluster = [{"name": "T", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    assert _problems_with("pserver", "--timeout", "$(T)", "--mode=$(T)", env=from_cluster)[1] == []
    # a value that refers to one defined before it: filled in, here with what the cluster knows
    nested = [*from_cluster, {"name": "M", "value": "$(T)"}]
    assert _problems_with("pserver", "--keep-parts", "$(M)", env=nested)[1] == []
    # to one defined after it: the kubelet leaves the reference as written, int() refuses it
    here, problems = _problems_with("pserver", "--keep-parts", "$(M)", env=nested[::-1])
    assert _shard_problems(here, problems) == [
        f"{here}: distconv pserver: argument --keep-parts: must be an integer, got '$(T)' "
        "(every shard would exit)"
    ]
    # a variable filled in may stand for a flag; the tokens around it are still read
    here, problems = _problems_with("pserver", "$(T)", "--bogus", env=from_cluster)
    assert _shard_problems(here, problems) == [
        f"{here}: distconv pserver: unrecognized arguments: --bogus (every shard would exit)"
    ]


def test_env_from_a_config_map_may_define_any_name():
    objs = copy.deepcopy(render_manifests(**CONFIGS["pserver"]))
    here, container = _shards(objs)
    container["args"] += ["--mode", "async", "--max-staleness", "$(STALENESS)"]
    assert "must be an integer, got '$(STALENESS)'" in "; ".join(manifest_problems(objs))
    container["envFrom"] = [{"configMapRef": {"name": "shard-settings"}}]
    assert manifest_problems(objs) == []


CONFIG_KEY = {"configMapKeyRef": {"name": "shard-settings", "key": "k"}}


@pytest.mark.parametrize(
    "args, env",
    [
        # the kubelet defines these for the namespace's Services (the API server's always)
        (["--mode", "async", "--max-staleness", "$(KUBERNETES_SERVICE_PORT)"], []),
        (["--health-port", "$(SHARD_METRICS_SERVICE_PORT_HTTP)"], []),
        # the last of two variables of one name is the one the kubelet keeps
        (
            ["--mode", "async", "--max-staleness", "$(S)"],
            [{"name": "S", "value": "x"}, {"name": "S", "valueFrom": CONFIG_KEY}],
        ),
        # a variable filled in may be a flag, and the token after it its value
        (["$(F)", "5"], [{"name": "F", "valueFrom": CONFIG_KEY}]),
        (["$(F)", "-5"], [{"name": "F", "valueFrom": CONFIG_KEY}]),
    ],
)
def test_what_the_kubelet_may_fill_in_is_not_refused(args, env):
    here, problems = _problems_with("pserver", *args, env=env)
    assert _shard_problems(here, problems) == []


def test_a_flag_written_out_is_refused_whatever_the_value_filled_in():
    from_cluster = [{"name": "T", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    here, problems = _problems_with("pserver", "--bogus=$(T)", "$(T)", "--bogus2", env=from_cluster)
    assert _shard_problems(here, problems) == [
        f"{here}: distconv pserver: unrecognized arguments: --bogus=$(T) --bogus2 "
        "(every shard would exit)"
    ]
    # a literal value kept last; a variable with no value (or null) is the empty string
    dup = [{"name": "S", "valueFrom": CONFIG_KEY}, {"name": "S", "value": "x"}]
    here, problems = _problems_with("pserver", "--max-staleness", "$(S)", env=dup)
    assert _shard_problems(here, problems) == [
        f"{here}: distconv pserver: argument --max-staleness: must be an integer, got 'x' "
        "(every shard would exit)"
    ]
    for empty in ({"name": "E"}, {"name": "E", "value": None}):
        here, problems = _problems_with("pserver", "--keep-parts", "$(E)", env=[empty])
        assert _shard_problems(here, problems) == [
            f"{here}: distconv pserver: argument --keep-parts: must be an integer, got '' "
            "(every shard would exit)"
        ]


#: a shard that takes its flags from a ConfigMap, as a user may write it: whatever the cluster
#: fills in for $(BIND) ... $(WORKERS) may hold the flags the shard needs, one each (the kubelet
#: passes each filled-in token as one argument, never split); --keys written, as the shard
#: refuses to start with neither it nor --insecure
ARGS_FROM_A_CONFIG_MAP = """
args: [distconv, pserver, "--mode", sync, "--keys", /etc/distconv/keys,
  "$(BIND)", "$(SHARD)", "$(NUM_SHARDS)", "$(WORKERS)"]
envFrom: [{configMapRef: {name: shard-settings}}]
"""
#: all four required flags in one value the cluster fills in: the shard gets it as one argument
#: ("--bind=0.0.0.0:5555 --shard=0 ...": --bind's value), and exits missing the other three
ALL_IN_ONE_TOKEN = """
args: [distconv, pserver, "$(ARGS)"]
env:
  - name: ARGS
    valueFrom: {configMapKeyRef: {name: shard-settings, key: args}}
"""
REQUIRED = "the following arguments are required: --bind, --shard, --num-shards, --workers"


def _shard_with(text: str, *args: str) -> tuple[str, list[str]]:
    """The shard container's name and its problems once its args and env are those of the
    YAML ``text``, with ``args`` appended."""
    objs = copy.deepcopy(render_manifests(**CONFIGS["pserver"]))
    here, container = _shards(objs)
    container.update(yaml.safe_load(text))
    container["args"].extend(args)
    return here, _shard_problems(here, manifest_problems(objs))


def test_a_required_flag_may_be_in_a_token_the_cluster_fills_in():
    assert _shard_with(ARGS_FROM_A_CONFIG_MAP)[1] == []
    # what the checks can still prove is refused: a value it cannot read, a flag it does not take
    here, problems = _shard_with(ARGS_FROM_A_CONFIG_MAP, "--workers", "two", "--bogus")
    assert problems == [
        f"{here}: distconv pserver: argument --workers: must be an integer, got 'two' "
        "(every shard would exit)"
    ]
    here, problems = _shard_with(ARGS_FROM_A_CONFIG_MAP, "--bogus")
    assert problems == [
        f"{here}: distconv pserver: unrecognized arguments: --bogus (every shard would exit)"
    ]


@pytest.mark.parametrize(
    "text",
    [
        # the token the cluster fills in is the value of --mode: it cannot hold a flag
        "args: [distconv, pserver, '--mode', '$(ARGS)']\n"
        "envFrom: [{configMapRef: {name: shard-settings}}]",
        # no such variable: the kubelet leaves $(ARGS) as written, which is no flag
        "args: [distconv, pserver, '--mode', sync, '$(ARGS)']\nenv: []",
    ],
)
def test_a_required_flag_missing_with_no_token_that_may_hold_it_is_refused(text):
    here, problems = _shard_with(text)
    (problem,) = problems
    assert problem.startswith(f"{here}: distconv pserver: {REQUIRED}"), problem


def test_one_token_the_cluster_fills_in_holds_one_required_flag_not_four():
    here, problems = _shard_with(ALL_IN_ONE_TOKEN)
    assert problems == [
        f"{here}: distconv pserver: {REQUIRED} (1 value(s) the cluster fills in, one argument "
        "each) (every shard would exit)"
    ]
    # three tokens for four flags: one is surely missing
    text = ARGS_FROM_A_CONFIG_MAP.replace(' "$(WORKERS)"', "")
    assert _shard_with(text)[1] == [
        f"{here}: distconv pserver: {REQUIRED} (3 value(s) the cluster fills in, one argument "
        "each) (every shard would exit)"
    ]


def test_a_shard_with_all_its_flags_in_a_config_map_passes_every_check():
    """``--bind`` in $(BIND) too: the shards' addresses cannot be read, so the workers'
    ``--pservers`` is not compared with them, nor taken for naming no StatefulSet."""
    objs = copy.deepcopy(render_manifests(**CONFIGS["pserver"]))
    _, container = _shards(objs)
    container.update(yaml.safe_load(ARGS_FROM_A_CONFIG_MAP))
    assert manifest_problems(objs) == []
    # a StatefulSet that runs no distconv pserver is no shards' StatefulSet
    container["args"] = ["sleep", "infinity"]
    assert "--pservers is set but the job has no shard StatefulSet" in "\n".join(
        manifest_problems(objs)
    )


def test_a_shard_run_by_the_path_of_distconv_is_a_shard():
    """The shards' StatefulSet is the one running ``distconv pserver``: one written as
    ``/usr/local/bin/distconv pserver`` was taken for none, and every worker's --pservers was
    reported as naming no shard StatefulSet."""
    objs = copy.deepcopy(render_manifests(**CONFIGS["pserver"]))
    here, container = _shards(objs)
    container["args"][0] = "/usr/local/bin/distconv"
    assert manifest_problems(objs) == []
    container["args"].append("--bogus")  # and its command line is read
    assert _shard_problems(here, manifest_problems(objs)) == [
        f"{here}: distconv pserver: unrecognized arguments: --bogus (every shard would exit)"
    ]


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--health-host", "0.0.0.0"], "--health-host"),
        (["--stall-seconds", "60"], "--stall-seconds"),
        (["--health-host=$(POD_IP)", "--stall-seconds", "60"], "--health-host"),
    ],
)
def test_a_probe_setting_without_the_health_port_is_refused_as_the_shard_refuses_it(args, flag):
    """The shard refuses these once parsed (exit 1 at start): the parse alone
    passed them, so an edited StatefulSet whose --health-port was dropped checked clean."""
    objs = copy.deepcopy(render_manifests(**CONFIGS["pserver"]))
    here, container = _shards(objs)
    at = container["args"].index("--health-port")
    del container["args"][at : at + 2]
    at = container["args"].index("--health-host")
    del container["args"][at : at + 2]
    assert _shard_problems(here, manifest_problems(objs)) == []  # no probe flag: it starts
    container["args"].extend(args)
    container["env"].append({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
    assert _shard_problems(here, manifest_problems(objs)) == [
        f"{here}: distconv pserver: {flag} is a setting of the probes, and this run serves "
        "none; add --health-port PORT (every shard would exit)"
    ]


def test_a_health_port_the_cluster_may_fill_in_is_not_refused_for_a_probe_setting():
    """Four required flags from four tokens the cluster fills in leave none for the port; a
    fifth may hold it."""
    here, problems = _shard_with(ARGS_FROM_A_CONFIG_MAP, "--stall-seconds", "60")
    assert problems == [
        f"{here}: distconv pserver: --stall-seconds is a setting of the probes, and this run "
        "serves none; add --health-port PORT (every shard would exit)"
    ]
    text = ARGS_FROM_A_CONFIG_MAP.replace('"$(WORKERS)"', '"$(WORKERS)", "$(PROBES)"')
    assert _shard_with(text, "--stall-seconds", "60")[1] == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["--timeout", "0"], "--timeout must be finite and >= 0.2, got 0.0"),
        (["--keep-parts", "-1"], "--keep-parts must be >= 0, got -1"),
        # (inf no longer gets past the parse: "must be finite, got 'inf'")
        (["--drain-seconds", "-1"], "--drain-seconds must be finite and >= 0, got -1.0"),
        (["--mode", "async", "--max-staleness", "-1"], "--max-staleness must be >= 0, got -1"),
        # checked before the probe flags, as the shard checks them
        (["--timeout", "0", "--stall-seconds", "5"], "--timeout must be finite"),
    ],
)
def test_a_setting_the_shard_refuses_at_start_is_refused(args, words):
    """The parse takes these, then the shard's settings check refuses them and every shard
    exits 1 at start: the deploy checks passed them."""
    here, problems = _problems_with("pserver", *args)
    (problem,) = _shard_problems(here, problems)
    assert words in problem and problem.endswith("(every shard would exit)"), problem


def test_a_count_the_cluster_fills_in_is_not_judged_by_the_settings_check():
    """``--num-shards $(N)`` from a valueFrom may be any count: ``--shard 3`` fits one."""
    env = [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]
    here, problems = _problems_with("pserver", "--num-shards", "$(N)", "--shard", "3", env=env)
    assert _shard_problems(here, problems) == []


@pytest.mark.parametrize(
    "name, args, refused",
    [
        ("pserver", ("--on-worker-loss", "continue"), True),  # rendered --mode sync
        ("one-worker", ("--on-worker-loss", "continue"), False),  # rendered --mode async
        ("pserver", ("--mode", "$(MODE)", "--on-worker-loss", "continue"), False),
        ("pserver", ("--on-worker-loss", "$(LOSS)"), False),
    ],
)
def test_continue_is_refused_beside_sync_and_not_beside_a_mode_the_cluster_fills_in(
    name, args, refused
):
    """A sync shard refuses ``--on-worker-loss continue`` at start, so the checks refuse it; a
    ``--mode $(MODE)`` from a ConfigMap may be async, which takes it: that manifest was refused
    as if every shard would exit."""
    env = [
        {"name": var, "valueFrom": {"configMapKeyRef": {"name": "shard-settings", "key": var}}}
        for var in ("MODE", "LOSS")
    ]
    here, problems = _problems_with(name, *args, env=env)
    expected = [
        f"{here}: distconv pserver: --on-worker-loss continue needs --mode async: a sync step "
        "waits for every worker's push, so losing one fails the job whatever this flag says "
        "(every shard would exit)"
    ]
    assert _shard_problems(here, problems) == (expected if refused else [])


@pytest.mark.parametrize(
    "name, args, refused",
    [
        ("pserver", ("--max-staleness", "2"), "2"),  # rendered --mode sync
        ("pserver", ("--max-staleness", "$(S)"), "$(S)"),  # whatever the bound, sync reads none
        ("one-worker", ("--max-staleness", "2"), None),  # rendered --mode async
        ("pserver", ("--mode", "$(MODE)", "--max-staleness", "2"), None),  # may be async
    ],
)
def test_a_staleness_bound_is_refused_beside_sync_as_the_shard_refuses_it(name, args, refused):
    """A sync shard refuses ``--max-staleness`` as a usage error (exit 2 at start), in
    ``distconv-launch k8s``'s words: a StatefulSet edited to ``--mode sync`` that kept
    ``--max-staleness 2`` checked clean."""
    env = [
        {"name": var, "valueFrom": {"configMapKeyRef": {"name": "shard-settings", "key": var}}}
        for var in ("MODE", "S")
    ]
    here, problems = _problems_with(name, *args, env=env)
    expected = [
        f"{here}: distconv pserver: --max-staleness {refused} is for --mode async; a sync step "
        "takes every worker's push of that step, so none is stale (every shard would exit)"
    ]
    assert _shard_problems(here, problems) == (expected if refused else [])


@pytest.mark.parametrize(
    "args, refused",
    [
        ((), False),  # the rendered one: on the shard's PersistentVolumeClaim
        (("--checkpoint-dir", "/tmp/parts"), False),  # an emptyDir: writable
        (("--checkpoint-dir", "/var/lib/distconv/ckpt"), True),  # the read-only root
        (("--checkpoint-dir=/data/parts",), True),
        (("--check", "/var/lib/distconv/checkpoints/../x"), True),  # read as the shard reads it
        (("--checkpoint-dir", "$(PARTS)"), False),  # only the cluster knows where
    ],
)
def test_a_shard_checkpoint_dir_on_the_read_only_root_is_refused(args, refused):
    """The shard makes --checkpoint-dir and writes there at start, so one on no writable volume
    stops every shard in the cluster (``cannot make it: Read-only file system``); the checks
    accepted it, though they refuse a rank's --out there."""
    env = [{"name": "PARTS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]
    here, problems = _problems_with("pserver", *args, env=env)
    wrong = [p for p in problems if "--checkpoint-dir" in p]
    assert bool(wrong) is refused, problems
    if refused:
        assert wrong[0].startswith(f"{here}: --checkpoint-dir /")
        assert "on no writable volume" in wrong[0] and "every shard would exit" in wrong[0]


@pytest.mark.parametrize(
    "args, env, refused",
    [
        ((), None, False),  # the rendered 0.0.0.0:5555
        (("--bind", "[::]:5555"), None, False),  # both families
        (("--bind", "10.0.0.7:5555"), None, False),  # one of the pod's own: not judged
        (("--bind", "127.0.0.1:5555"), None, True),
        (("--bind=127.0.0.2:5555",), None, True),  # all of 127.0.0.0/8
        (("--bind", "localhost:5555"), None, True),
        (("--bind", "[::1]:5555"), None, True),
        (("--bind", "lo:5555"), None, True),  # ZeroMQ binds the interface lo: 127.0.0.1
        (("--bind", "LOCALHOST:5555"), None, True),  # names without regard to case
        (("--bind", "$(BIND)"), {"name": "BIND", "value": "127.0.0.1:5555"}, True),
        (("--bind", "$(BIND)"), {"name": "BIND", "value": "0.0.0.0:5555"}, False),
        (("--bind", "$(BIND)"), {"name": "BIND", "valueFrom": {"fieldRef": {}}}, False),
    ],
)
def test_a_shard_bound_to_loopback_is_refused(args, env, refused):
    """Workers dial a shard at its pod's address: one whose --bind is loopback answers its own
    pod only, and every worker waits out its timeout for a hello; the checks accepted it."""
    here, problems = _problems_with("pserver", *args, env=[env] if env else None)
    wrong = [p for p in problems if "--bind" in p]
    assert bool(wrong) is refused, problems
    if refused:
        (problem,) = wrong
        assert problem.startswith(f"{here}: --bind ") and "is loopback" in problem, problem
        assert "no worker in another pod could reach the shard" in problem


@pytest.mark.parametrize(
    "bind, env, port",
    [
        ("$(BIND)", {"name": "BIND", "value": "0.0.0.0:5555"}, None),
        ("0.0.0.0:$(PORT)", {"name": "PORT", "value": "5555"}, None),
        ("$(BIND)", {"name": "BIND", "valueFrom": {"fieldRef": {}}}, None),  # not judged
        ("$(BIND)", {"name": "BIND", "value": "0.0.0.0:6000"}, "6000"),
        ("0.0.0.0:$(PORT)", {"name": "PORT", "value": "6000"}, "6000"),
        ("0.0.0.0:6000", None, "6000"),
    ],
)
def test_the_workers_pservers_are_compared_with_the_bind_the_shard_reads(bind, env, port):
    """A shard's ``--bind $(BIND)`` is read filled in, as the kubelet passes it: the port of the
    shards' addresses was '$(BIND)', and the workers' right --pservers was refused as not the
    shards' DNS names ('j-pserver-0.j-pserver:$(BIND)')."""
    here, problems = _problems_with("pserver", "--bind", bind, env=[env] if env else None)
    if port is None:
        assert problems == []
    else:
        assert len(problems) == 2, problems  # --pservers and DISTCONV_PSERVERS
        for problem in problems:
            assert "is not the shards' DNS names" in problem, problem
            assert problem.endswith(f"-pserver-1.digits-ps-pserver:{port}'"), problem


@pytest.mark.parametrize("flag, dest_words", [("--workers", "ranks"), ("--num-shards", "replicas")])
@pytest.mark.parametrize(
    "value, env, wrong",
    [
        ("$(N)", {"name": "N", "value": "{right}"}, None),
        ("$(N)", {"name": "N", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}, None),
        ("0{right}", None, None),  # the shard reads the number
        ("$(N)", {"name": "N", "value": "7"}, "7"),
        ("7", None, "7"),
    ],
)
def test_a_shards_counts_are_compared_as_the_shard_reads_them(flag, dest_words, value, env, wrong):
    """``--workers $(N)`` and ``--num-shards $(N)`` are read filled in, as the kubelet passes
    them: the text '$(N)' was compared with the Job's completions and the replicas, and a right
    manifest refused ('--workers $(N) but Job ... runs 4 ranks')."""
    right = {"--workers": "4", "--num-shards": "2"}[flag]  # the example's
    if env is not None and "value" in env:
        env = {**env, "value": env["value"].format(right=right)}
    here, problems = _problems_with(
        "pserver", flag, value.format(right=right), env=[env] if env else None
    )
    if wrong is None:
        assert problems == []
    else:
        (problem,) = problems
        assert f"{flag} {wrong} but" in problem and dest_words in problem, problem


@pytest.mark.parametrize(
    "args, env, words",
    [
        # a value filled in from a variable defined before it, as the kubelet fills it in
        (
            ["--bind", "$(BIND)"],
            [{"name": "HOST", "value": "127.0.0.1"}, {"name": "BIND", "value": "$(HOST):5555"}],
            "--bind 127.0.0.1:5555 is loopback",
        ),
        (
            ["--workers", "$(N)"],
            [{"name": "M", "value": "7"}, {"name": "N", "value": "$(M)"}],
            "--workers 7 but Job digits-ps-worker runs 4 ranks",
        ),
        # $$ in a value is a literal $: the shard reads '$(X)', no mode
        (["--mode", "$(MODE)"], [{"name": "MODE", "value": "$$(X)"}], "invalid choice: '$(X)'"),
        # the last of a name, itself filled in from the one before it
        (
            ["--workers", "$(N)"],
            [{"name": "N", "value": "1"}, {"name": "N", "value": "$(N)1"}],
            "--workers 11 but",
        ),
        # filled in once: what a value is filled in with is not read again
        (
            ["--mode", "$(A)"],
            [
                {"name": "C", "value": "sync"},
                {"name": "B", "value": "$$(C)"},
                {"name": "A", "value": "$(B)"},
            ],
            "invalid choice: '$(C)'",
        ),
    ],
)
def test_a_variable_that_refers_to_others_is_filled_in_as_the_kubelet_does(args, env, words):
    """The kubelet fills in a variable's value from those defined before it (``$$`` is ``$``)
    before it fills in the command line: the checks took any value holding ``$(`` for one only
    the cluster knows, so a shard bound to loopback through ``BIND=$(HOST):5555`` passed, and
    read ``$$`` in a value as two dollars."""
    here, problems = _problems_with("pserver", *args, env=env)
    (problem,) = problems
    assert problem.startswith(here.split(" container ")[0]) and words in problem, problem
