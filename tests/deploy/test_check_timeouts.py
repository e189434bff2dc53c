"""``distconv check-manifests`` names shards whose ``--timeout`` outlasts their workers' wait.

The renderer gives the shards the workers' ``--timeout``: left at their 60 s, the shards
outwaited workers of ``--timeout 10``, and a worker that never came was blamed on a healthy
shard. A StatefulSet edited since (``--timeout 120`` beside workers of 20, or its ``--timeout``
removed) passed with "no problems"; each worker only warned at setup, in the cluster. The check
now names it by the same rule, in the same words, as that warning: compared here with the
warning of a real worker on a real shard given the edited values.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from distconv.deploy import manifest_problems, render_manifests
from tests.deploy.test_check_manifests_command import check
from tests.deploy.test_manifests import validate
from tests.launcher.launch_cli import launch
from tests.shorter_wait import warned_at_setup_alone
from tests.sync.ps.ps_helpers import Shards, shard_argv

pytestmark = pytest.mark.timeout(120)

RENDER = ("k8s", "--workers", "2", "--servers", "2", "--image", "d:1", "--job-name", "demo")
TRAIN = ("--", "--epochs", "1", "--timeout", "20")
SHARDS = "StatefulSet demo-pserver container pserver"
WORKERS = "Job demo-worker container worker"
VALUE_FROM = {"valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
#: the part of a problem line that tells it from every other check's
SAID = "for a shard's reply"

Edit = Callable[[dict], None]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """The objects ``distconv-launch k8s`` renders for 2 shards and 2 workers of
    ``--timeout 20``."""
    done = launch(*RENDER, *TRAIN, cwd=tmp_path_factory.mktemp("render"))
    assert done.returncode == 0, done.stderr
    return list(yaml.safe_load_all(done.stdout))


def _container(objs: list[dict], kind: str) -> dict:
    (obj,) = [o for o in objs if o["kind"] == kind]
    (container,) = obj["spec"]["template"]["spec"]["containers"]
    return container


def timeout(value: str | None, flag: str = "--timeout", env: dict | None = None) -> Edit:
    """An edit of a container's ``--timeout``: set to ``value`` (as ``flag``, which may be
    ``--timeout=``), or removed for None; ``env`` added to the container's."""

    def edit(container: dict) -> None:
        args = container["args"]
        at = args.index("--timeout")
        new = [] if value is None else [f"{flag}{value}"] if flag.endswith("=") else [flag, value]
        args[at : at + 2] = new
        container["env"].extend([env] if env else [])

    return edit


def flag_value(flag: str, value: str) -> Edit:
    """An edit of the value after a container's ``flag`` (``--workers``, ``--sync``) to
    ``value``."""

    def edit(container: dict) -> None:
        args = container["args"]
        args[args.index(flag) + 1] = value

    return edit


def appended_extra(value: dict) -> Edit:
    """``$(EXTRA)`` appended to a container's args, ``value`` its env entry's rest: a value
    only the cluster knows (``VALUE_FROM``) may be any ``--timeout``, and a ``--timeout=`` in
    it, after the one written, is the one ``distconv train`` keeps, the last."""

    def edit(container: dict) -> None:
        container["args"].append("$(EXTRA)")
        container["env"].append({"name": "EXTRA", **value})

    return edit


#: ``$(EXTRA)`` appended, a value only the cluster knows: it may be ``--timeout=1``
loose_token = appended_extra(VALUE_FROM)


def _edited(rendered: list[dict], shards: Edit | None = None, workers: Edit | None = None):
    objs = copy.deepcopy(rendered)
    for kind, edit in (("StatefulSet", shards), ("Job", workers)):
        if edit is not None:
            edit(_container(objs, kind))
    return objs


def _timeout_problems(objs: list[dict]) -> list[str]:
    return [p for p in manifest_problems(objs) if SAID in p]


def _line(shards: str, wait: str, workers: str, fix: str) -> str:
    """The problem line for shards that wait ``shards`` (`` s`` and a note), workers that wait
    ``wait`` s for ``workers`` (their --timeout as said), told ``fix``."""
    return (
        f"{SHARDS}: the shards wait up to {shards} for every worker, and the workers of "
        f"{WORKERS} wait {wait} s for a shard's reply (1.5 x their --timeout {workers}): a "
        "worker that does not come would be reported by the workers as a shard that gives no "
        f"answer, and named only in the shard's log; {fix}"
    )


def _fix(longest: str, below: str) -> str:
    return (
        f"pass timeout={longest} or more (distconv train: --timeout {longest}), or start the "
        f"shards with a --timeout below {below}"
    )


EDITED_120 = _line("120 s (their --timeout)", "30", "20", _fix("120", "30"))
REMOVED = _line("60 s (their --timeout, the default)", "30", "20", _fix("60", "30"))


def test_the_render_as_it_is_has_no_problem_and_validates(rendered, tmp_path: Path):
    for obj in rendered:
        validate(obj)  # Kubernetes' own schemas
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(rendered), encoding="utf-8")
    assert check(str(path)) == (0, "no problems\n", "")


@pytest.mark.parametrize(
    ("shards", "said"),
    [(timeout("120"), EDITED_120), (timeout(None), REMOVED)],
    ids=["edited-to-120", "removed"],
)
def test_the_command_names_shards_edited_to_outwait_their_workers(
    rendered, tmp_path: Path, shards: Edit, said: str
):
    objs = _edited(rendered, shards)
    for obj in objs:
        validate(obj)  # still manifests the API server takes: only the checks can tell
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(objs), encoding="utf-8")
    status, out, err = check(str(path))
    (line,) = out.splitlines()
    assert (status, err) == (1, ""), err
    assert line.startswith(f"{path}:") and line.endswith(f": {said}"), line


@pytest.mark.parametrize(
    ("shards", "workers", "said"),
    [
        (timeout("29.9"), None, None),  # below the workers' wait of 30 s
        (timeout("30"), None, _line("30 s (their --timeout)", "30", "20", _fix("30", "30"))),
        (timeout(None), timeout(None), None),  # both their 60 s: the workers wait 90
        (timeout("89"), timeout(None), None),
        (timeout("90"), timeout(None),
         _line("90 s (their --timeout)", "90", "60, the default", _fix("90", "90"))),
        (timeout("120"), timeout("20", "--time"), EDITED_120),  # as train reads it
        (timeout("120"), timeout("20", "--timeout="), EDITED_120),
        (timeout("120", "--timeout="), None, EDITED_120),
        (timeout("$(T)", env={"name": "T", "value": "120"}), None, EDITED_120),
        (timeout("$(T)", env={"name": "T", **VALUE_FROM}), None, None),  # the cluster's
        (None, timeout("$(T)", env={"name": "T", **VALUE_FROM}), None),
        (timeout("120"), timeout("$(T)", env={"name": "T", "value": "20"}), EDITED_120),
        (timeout("120"), lambda c: (timeout("100")(c), c["args"].extend(["--timeout", "20"])),
         EDITED_120),  # argparse keeps the last
        (timeout("120"), flag_value("--sync", "mpi"), None),  # a baseline waits on no shard
        (timeout("120"), lambda c: (timeout(None)(c), loose_token(c)), None),  # any timeout
        (timeout("120"), loose_token, None),  # it may be --timeout=200
        (timeout("120"), appended_extra({"value": "--timeout=200"}), None),  # a wait of 300 s
        (None, timeout("$(NOWHERE)"), None),  # an undefined reference: the ranks' check's
        (lambda c: (timeout(None)(c), loose_token(c)), None, None),  # $(EXTRA): any timeout
        (lambda c: (timeout("120")(c), flag_value("--workers", "1")(c)), None, None),  # none waits
        (timeout("120"), timeout("-1"), None),  # every rank refuses it: the ranks' check's
        (timeout("0.2"), timeout("0.05"), None),  # the shards' least, as rendered for 0.05
        (timeout("0.3"), timeout("0.05"),
         _line("0.3 s (their --timeout)", "0.075", "0.05",
               "pass timeout=0.3 or more (distconv train: --timeout 0.3)")),
    ],
    ids=[
        "below", "at-the-wait", "both-default", "below-default-wait", "at-default-wait",
        "abbreviated", "equals-form", "shard-equals-form", "shard-var", "shard-cluster-var",
        "worker-cluster-var", "worker-var", "worker-last", "worker-other-transport",
        "worker-loose-token", "worker-loose-after-written", "worker-token-after-written",
        "worker-undefined-var", "shard-loose-token", "one-worker",
        "worker-refused", "shard-least", "above-shard-least",
    ],
)  # fmt: skip
def test_the_check_judges_what_the_processes_read(rendered, shards, workers, said):
    problems = _timeout_problems(_edited(rendered, shards, workers))
    assert problems == ([] if said is None else [said])


@pytest.mark.parametrize(
    "extra", [VALUE_FROM, {"value": "--timeout=1"}], ids=["cluster", "literal"]
)
def test_an_mpijob_whose_timeout_a_later_token_may_set_is_not_judged_either(extra: dict):
    """The ranks' seconds are read once for both checks (``rank_seconds``): an MPIJob's ranks
    edited to ``--timeout 400``, not below their ``--stall-seconds`` (300), are named; a
    ``$(EXTRA)`` after it may hold the ``--timeout`` they keep (``--timeout=1``): not judged."""
    (mpijob,) = render_manifests(job_name="m", workers=2, servers=0, image="d:1", train_args=[])
    launcher = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["args"][launcher["args"].index("--timeout") + 1] = "400"
    said = "--timeout 400 is not below their --stall-seconds"
    assert [p for p in manifest_problems([mpijob]) if said in p] != []
    appended_extra(extra)(launcher)
    assert [p for p in manifest_problems([mpijob]) if "--stall-seconds" in p] == []


@pytest.mark.parametrize(("shards", "warned"), [("0.75", True), ("0.7", False)])
def test_the_check_and_a_real_worker_agree_on_the_rule_and_its_words(
    rendered, tmp_path: Path, caplog, shards: str, warned: bool
):
    """Workers of ``--timeout 0.5`` (a wait of 0.75 s) beside shards edited to ``shards``: a
    real worker on a real shard started with those values warns at setup exactly where the
    check names the manifests, and the check gives the warning's cause and ways out."""
    objs = _edited(rendered, timeout(shards), timeout("0.5"))
    problems = _timeout_problems(objs)
    runner = Shards(tmp_path)
    try:
        endpoint = runner.launch(
            shard_argv(["-m", "distconv"], workers=2, timeout=float(shards)), tmp_path / "s.log"
        )
        warnings = warned_at_setup_alone(endpoint, 0.5, caplog)
    finally:
        runner.stop()
    assert (len(problems), len(warnings)) == (int(warned), int(warned)), (problems, warnings)
    for problem, warning in zip(problems, warnings):
        why_and_fix = warning.split("(their --timeout) for every worker: ", 1)[1]
        assert problem.endswith(why_and_fix.replace("reported here", "reported by the workers"))
