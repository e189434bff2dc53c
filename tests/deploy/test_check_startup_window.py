"""``distconv check-manifests`` holds a worker's startup probe to the window the renderer gives
beside the shards' ``--timeout``.

A worker whose peers are late to the start-up job check waits for them up to 10 rounds of the
shards' ``--timeout``, its ``/readyz`` at 503, and the renderer gives its startup probe twice
that (``--timeout 300``: 600 failures of 10 s). The docs invite raising the ``--timeout`` by
hand on both sides; the check passed the example so raised with its probe left at 120 x 10 s,
and the kubelet would have restarted workers that waited as designed.

Each test copies the example, or renders a job, into real files, edits them as an operator
would, and runs the real check command on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.hand_edits import (
    PS_SHARDS_FILE,
    PS_WORKERS_FILE,
    copied_examples,
    edit,
    one_container,
    one_problem,
    passes,
    rendered_demo,
    rendered_examples,
)

pytestmark = pytest.mark.timeout(120)

WORKERS = "Job digits-ps-worker container worker"
SHARDS = "StatefulSet digits-ps-pserver container pserver"


def _timeout(seconds: str):
    """The edit that adds ``--timeout SECONDS`` to the one container's args."""

    def edit(obj: dict) -> None:
        one_container(obj)["args"] += ["--timeout", seconds]

    return edit


def _startup(**fields: int):
    """The edit that sets the startup probe's ``fields`` (``failureThreshold=600``)."""

    def edit(obj: dict) -> None:
        one_container(obj)["startupProbe"].update(fields)

    return edit


def _short(window: str, timeout: str, waits: str, threshold: int, seconds: int) -> str:
    return (
        f"{WORKERS}: startupProbe holds liveness off for {window}, but beside {SHARDS} "
        f"(--timeout {timeout}) a worker waits up to {waits} s for ranks late to the start-up "
        "job check, its /readyz at 503, and the kubelet would restart it as it waits: give "
        f"failureThreshold {threshold} ({seconds} s), as a rendered job's workers are given at "
        "that --timeout"
    )


@pytest.mark.parametrize(
    ("timeout", "probe", "said"),
    [
        # the docs' edit: --timeout 300 on both sides, the probe left as rendered
        ("300", {}, _short("1200 s (periodSeconds 10 x failureThreshold 120)", "300", "3000",
                           600, 6000)),
        # the window kept, at another period: the threshold to write is at that period
        ("300", {"periodSeconds": 5, "failureThreshold": 240},
         _short("1200 s (periodSeconds 5 x failureThreshold 240)", "300", "3000", 1200, 6000)),
        # a delay counts: 300 + 2700 s is still no longer than the 3000 s wait
        ("300", {"initialDelaySeconds": 300, "failureThreshold": 270},
         _short("3000 s (initialDelaySeconds 300 + periodSeconds 10 x failureThreshold 270)",
                "300", "3000", 600, 6000)),
        # the shards' default left, the probe shortened: the renderer's least window
        (None, {"failureThreshold": 60},
         _short("600 s (periodSeconds 10 x failureThreshold 60)", "60, the default", "600",
                120, 1200)),
    ],
    ids=["timeout-raised", "other-period", "with-delay", "probe-shortened"],
)  # fmt: skip
def test_a_startup_probe_shorter_than_the_rendered_window_is_named(
    tmp_path: Path, timeout: str | None, probe: dict, said: str
):
    (example,) = copied_examples(tmp_path, "pserver")
    if timeout is not None:
        edit(example / PS_WORKERS_FILE, _timeout(timeout))
        edit(example / PS_SHARDS_FILE, _timeout(timeout))
    if probe:
        edit(example / PS_WORKERS_FILE, _startup(**probe))
    files, what = one_problem(example)
    assert what == said
    assert files == [str(example / PS_WORKERS_FILE), str(example / PS_SHARDS_FILE)]


@pytest.mark.parametrize(
    "probe",
    [
        {"failureThreshold": 600},
        {"periodSeconds": 20, "failureThreshold": 300},
        # longer than the worker's 3000 s wait, shorter than a render's 6000 s: sized by hand
        {"failureThreshold": 301},
        {"initialDelaySeconds": 600, "failureThreshold": 250},
    ],
)
def test_the_window_raised_with_the_timeout_passes(tmp_path: Path, probe: dict):
    """The docs' advice (``failureThreshold`` twice the ``--timeout`` at the 10 s period), or a
    window sized by hand that still outlasts the worker's wait for late ranks."""
    (example,) = copied_examples(tmp_path, "pserver")
    for name in (PS_WORKERS_FILE, PS_SHARDS_FILE):
        edit(example / name, _timeout("300"))
    edit(example / PS_WORKERS_FILE, _startup(**probe))
    passes(example)


@pytest.mark.parametrize("timeout", ["20", "300", "300.5", "2e9"])
def test_a_fresh_render_at_any_timeout_passes(tmp_path: Path, timeout: str):
    passes(rendered_demo(tmp_path, timeout))


@pytest.mark.parametrize("made", [copied_examples, rendered_examples], ids=["checked-in", "fresh"])
def test_the_examples_pass(tmp_path: Path, made):
    for example in made(tmp_path, "pserver", "pserver-gpu", "mpijob", "mpijob-gpu"):
        passes(example)
