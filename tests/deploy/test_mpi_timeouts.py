"""An MPIJob's ranks name a hang before Kubernetes restarts them: their watchdog's --timeout
(600 s by default), whose error names the rank and step that did not come, was longer than
their --stall-seconds (300 s), after which /healthz turns 503 and the worker pods' liveness
restarts every pod, the waiting ranks' too, before that error is written. The renderer now
gives the ranks a --timeout below their stall limit, refuses one that is not, and the checks
name such a pair in an edited manifest."""

from __future__ import annotations

import copy

import pytest

from distconv.cli import build_parser
from distconv.deploy import manifest_problems, render_manifests
from distconv.job import TrainConfig
from distconv.sync.mpi.watchdog import DEFAULT_TIMEOUT
from tests.deploy.test_manifests import CONFIGS, checked_mpijob, mpijob_containers
from tests.launcher.launch_cli import launch

pytestmark = pytest.mark.timeout(60)

#: how a problem names the values a rank takes where the flag is not given
DEFAULT_TIMEOUT_SAID, DEFAULT_STALL = "(600, the default)", "(300, the default)"
MPI_CONFIGS = [name for name, kw in CONFIGS.items() if kw["servers"] == 0]
VALUE_FROM = {"valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}


def _said(timeout: str, stall: str) -> str:
    return f"--timeout {timeout} is not below their --stall-seconds {stall}"


def _limits(mpijob: dict) -> tuple[float, float]:
    """The ranks' watchdog timeout and stall limit, as ``distconv train`` reads its
    arguments: the flag's value, else the rank's own default."""
    launcher, _ = mpijob_containers(mpijob)
    argv = launcher["args"]
    args = build_parser().parse_args(argv[argv.index("distconv") + 1 :])
    timeout = DEFAULT_TIMEOUT if args.timeout is None else args.timeout
    return timeout, TrainConfig.stall_seconds if args.stall_seconds is None else args.stall_seconds


def _render(train_args: list[str]) -> dict:
    kw = dict(job_name="m", workers=4, servers=0, image="d:1", slots_per_worker=2)
    (mpijob,) = render_manifests(**kw, train_args=train_args)
    return mpijob


@pytest.mark.parametrize("name", MPI_CONFIGS)
def test_every_rendered_mpijob_times_out_before_its_ranks_stall(name):
    mpijob = checked_mpijob(name)
    timeout, stall = _limits(mpijob)
    assert (timeout, stall) == (240.0, 300.0)
    # the liveness restarts a pod (failureThreshold) probes after /healthz turns 503, 30 s
    # apart: the first at once at the earliest; the watchdog fires within its one-second tick
    live = mpijob_containers(mpijob)[1]["livenessProbe"]
    assert (live["periodSeconds"], live["failureThreshold"]) == (30, 3)
    assert timeout + 1 < stall + live["periodSeconds"] * (live["failureThreshold"] - 1)
    assert timeout + 1 < stall


@pytest.mark.parametrize(
    "train_args, limits",
    [
        (["--stall-seconds", "900"], (720.0, 900.0)),  # raised for slow checkpoints: both are
        (["--stall", "450"], (360.0, 450.0)),  # abbreviated as distconv train reads it
        (["--stall-seconds=2.5"], (2.0, 2.5)),
        (["--timeout", "100"], (100.0, 300.0)),
        (["--timeout=250", "--stall-seconds=400"], (250.0, 400.0)),
        (["--stall-seconds", "200", "--stall-seconds", "500"], (400.0, 500.0)),  # the last wins
    ],
)
def test_the_rendered_timeout_follows_the_stall_limit_the_user_gives(train_args, limits):
    mpijob = _render(train_args)
    assert _limits(mpijob) == limits
    assert manifest_problems([mpijob]) == []


@pytest.mark.parametrize(
    "train_args, said",
    [
        (["--timeout", "300"], ("300", DEFAULT_STALL)),
        (["--time", "900"], ("900", DEFAULT_STALL)),
        (["--timeout", "500", "--stall-seconds", "500"], ("500", "500")),
        (["--stall-seconds", "60", "--timeout=61"], ("61", "60")),
    ],
)  # fmt: skip
def test_a_timeout_not_below_the_stall_limit_is_refused_when_rendered(train_args, said):
    with pytest.raises(ValueError) as refused:
        _render(train_args)
    assert _said(*said) in str(refused.value)
    assert str(refused.value).endswith(
        "give --timeout below --stall-seconds (the train arguments after --)"
    )


def test_a_stall_limit_with_no_timeout_below_it_is_refused_not_rendered():
    """The least positive float: its 4/5 rounds back up to it, so the rendered --timeout was
    not below the stall limit, and the checks refused the manifest just rendered."""
    with pytest.raises(ValueError, match="--stall-seconds 4.94065645841247e-324 leaves no"):
        _render(["--stall-seconds", "5e-324"])
    assert _limits(_render(["--stall-seconds", "1e-320"]))[0] < 1e-320  # one just above: fine


def test_the_launcher_refuses_it_before_writing_a_manifest(tmp_path):
    done = launch(
        "k8s", "--mpi", "--workers", "2", "--image", "d:1", "--", "--timeout", "400", cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr  # a usage error, as a refused train flag is
    assert "--timeout 400 is not below their --stall-seconds (300, the default)" in done.stderr
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def _edited(edit) -> list[str]:
    """The problems the checks name in the rendered MPIJob of 4 ranks with its launcher's
    container changed by ``edit``, of the watchdog's order alone."""
    mpijob = copy.deepcopy(_render([]))
    edit(*mpijob_containers(mpijob))
    return [p for p in manifest_problems([mpijob]) if "is not below their --stall-seconds" in p]


def _drop(*flags: str):
    def edit(launcher: dict, _worker: dict) -> None:
        for flag in flags:
            at = launcher["args"].index(flag)
            del launcher["args"][at : at + 2]

    return edit


def _set(flag: str, value: str, spelled: str | None = None, env: dict | None = None):
    def edit(launcher: dict, _worker: dict) -> None:
        at = launcher["args"].index(flag)
        launcher["args"][at : at + 2] = [spelled or flag, value]
        if env is not None:
            launcher["env"].append(env)

    return edit


def _then(*edits):
    def edit(launcher: dict, worker: dict) -> None:
        for each in edits:
            each(launcher, worker)

    return edit


def _no_liveness(_launcher: dict, worker: dict) -> None:
    del worker["livenessProbe"]


def _loose_token(launcher: dict, _worker: dict) -> None:
    launcher["args"].append("$(EXTRA)")
    launcher["env"].append({"name": "EXTRA", **VALUE_FROM})


@pytest.mark.parametrize(
    "edit, said",
    [
        (lambda *_: None, None),
        (_drop("--timeout"), (DEFAULT_TIMEOUT_SAID, "300")),
        (_drop("--timeout", "--stall-seconds"), (DEFAULT_TIMEOUT_SAID, DEFAULT_STALL)),
        (_set("--timeout", "300"), ("300", "300")),
        (_set("--timeout", "299.5"), None),
        (_set("--timeout", "400", spelled="--time"), ("400", "300")),
        (_set("--stall-seconds", "240"), ("240", "240")),
        (_then(_drop("--timeout"), _set("--stall-seconds", "601")), None),
        (_set("--timeout", "$(T)", env={"name": "T", "value": "400"}), ("400", "300")),
        (_set("--timeout", "$(T)", env={"name": "T", **VALUE_FROM}), None),  # the cluster's
        (_set("--timeout", "$(NOWHERE)"), None),  # an undefined reference: judged elsewhere
        (_then(_drop("--timeout"), _loose_token), None),  # $(EXTRA) may be --timeout=1
        (_then(_drop("--timeout"), _no_liveness), None),  # nothing acts on /healthz
        (_then(_drop("--timeout"), _drop("--health-port")), None),  # no /healthz at all
        (_set("--timeout", "-1"), None),  # every rank refuses it: named by the ranks' check
    ],
)  # fmt: skip
def test_the_checks_name_an_edited_mpijob_whose_timeout_is_not_below_its_stall_limit(edit, said):
    problems = _edited(edit)
    if said is None:
        assert problems == []
    else:
        (problem,) = problems
        assert problem.startswith(f"MPIJob m Launcher: the ranks' {_said(*said)}: "), problem
        assert "the worker pods' liveness restarts every pod" in problem
