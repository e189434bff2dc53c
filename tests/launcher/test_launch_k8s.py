"""``distconv-launch k8s``: the deploy renderer's manifests, every argument passed through."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO_ROOT = Path(__file__).resolve().parents[2]
HAS_RENDERER = importlib.util.find_spec("distconv.deploy") is not None
needs_renderer = pytest.mark.skipif(not HAS_RENDERER, reason="distconv.deploy is not merged yet")


def launch(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", "k8s", *argv],
        env={**os.environ, "PYTHONPATH": child_path()},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


JOBS = [
    (["--workers", "3", "--servers", "2", "--image", "reg/distconv:1", "--mode", "async"], 2),
    (["--workers", "4", "--servers", "0", "--image", "reg/distconv:1", "--gpus", "1",
      "--slots-per-worker", "2", "--job-name", "ar"], 0),
]  # fmt: skip


@needs_renderer
@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv, servers", JOBS)
def test_stdout_is_the_renderers_yaml(argv, servers):
    from distconv.deploy.check import manifest_problems
    from distconv.deploy.render import dump_yaml, render_manifests

    done = launch(*argv, "--", "--epochs", "2", "--batch-size", "32")
    assert done.returncode == 0, done.stderr
    value = dict(zip(argv[::2], argv[1::2]))
    objects = render_manifests(
        job_name=value.get("--job-name", "distconv"),
        workers=int(value["--workers"]),
        servers=servers,
        image=value["--image"],
        gpus=int(value.get("--gpus", 0)),
        train_args=["--epochs", "2", "--batch-size", "32"],
        mode=value.get("--mode", "sync"),
        slots_per_worker=int(value.get("--slots-per-worker", 1)),
    )
    assert done.stdout == dump_yaml(objects)
    assert manifest_problems(objects) == []
    assert "--batch-size" in done.stdout


@needs_renderer
@pytest.mark.timeout(60)
def test_out_folder_gets_one_file_per_object(tmp_path):
    """Each object in a file of its own; the note of them quotes the folder as the
    launcher's other messages quote a path (a space in it made two words)."""
    from distconv.deploy.render import manifest_filename, render_manifests

    out = tmp_path / "my manifests"
    done = launch(*JOBS[0][0], "--out", str(out), "--", "--epochs", "1")
    assert done.returncode == 0, done.stderr
    objects = render_manifests(
        job_name="distconv", workers=3, servers=2, image="reg/distconv:1", mode="async",
        train_args=["--epochs", "1"],
    )  # fmt: skip
    assert sorted(p.name for p in out.iterdir()) == sorted(manifest_filename(o) for o in objects)
    assert f"wrote {len(objects)} object(s) to '{out}'" in done.stderr


@needs_renderer
@pytest.mark.timeout(60)
def test_renderer_refusals_are_one_line():
    done = launch("--workers", "2", "--image", "x", "--job-name", "Bad_Name")
    assert done.returncode == 1
    assert done.stderr.startswith("distconv-launch k8s: error: ")
    assert len(done.stderr.strip().splitlines()) == 1


@needs_renderer
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "argv, said",
    [
        (["--job-name", "Bad_Name"], "--job-name must be a DNS label"),
        (["--job-name", "a" * 41], "--job-name must be at most 40 characters"),
        (["--image", "my image"], "--image must be a non-empty image reference"),
        (["--servers", "0", "--slots-per-worker", "4"],  # with --workers 2: one pod, 2 idle slots
         "--workers 2 is not a multiple of --slots-per-worker 4"),
        (["--mpi", "--servers", "2"], "(--mpi) runs allreduce without shards, not --servers 2"),
        (["--mpi", "--ipv6"], "--ipv6 renders parameter-server jobs only, not an MPIJob"),
        (["--gpus", "1", "--", "--device", "cpu"],  # GPUs requested, left idle
         "the pod requests 1 nvidia.com/gpu but its ranks train on the CPU"),
    ],
)  # fmt: skip
def test_renderer_refusals_name_the_flag_the_operator_typed(argv, said):
    done = launch("--workers", "2", "--image", "x", *argv)
    assert done.returncode == 1, done.stderr
    assert said in done.stderr
    assert "_" not in done.stderr.replace("Bad_Name", "")  # job_name, slots_per_worker: none


@pytest.mark.timeout(60)
@pytest.mark.parametrize("here", [True, False])
def test_a_user_program_is_refused(tmp_path, here):
    # one in the image, not on this machine: it was "script ... does not exist"
    script = tmp_path / "mine.py"
    if here:
        script.write_text("")
    done = launch("--workers", "2", "--image", "x", "--", str(script))
    assert done.returncode == 1
    expected = "renders distconv train jobs; put the program in the image instead"
    if not HAS_RENDERER:
        expected = "the Kubernetes renderer distconv.deploy.render is missing"
    assert expected in done.stderr


@needs_renderer
@pytest.mark.timeout(60)
def test_mpi_means_no_servers_unless_told():
    import yaml

    done = launch("--workers", "2", "--image", "d:1", "--mpi", "--", "--epochs", "1")
    assert done.returncode == 0, done.stderr
    assert [o["kind"] for o in yaml.safe_load_all(done.stdout)] == ["MPIJob"]
    plain = launch("--workers", "2", "--image", "d:1", "--", "--epochs", "1")
    assert [o["kind"] for o in yaml.safe_load_all(plain.stdout)] == [
        "Service",
        "StatefulSet",
        "Job",
    ]


@needs_renderer
@pytest.mark.timeout(60)
def test_ipv6_is_passed_to_the_renderer():
    from distconv.deploy.render import dump_yaml, render_manifests

    done = launch("--workers", "2", "--servers", "1", "--image", "d:1", "--ipv6")
    assert done.returncode == 0, done.stderr
    objects = render_manifests(job_name="distconv", workers=2, servers=1, image="d:1", ipv6=True)
    assert done.stdout == dump_yaml(objects)
    assert '"[::]:5555"' in done.stdout and "0.0.0.0" not in done.stdout


@needs_renderer
@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["train", "image"])
def test_an_argument_that_is_not_utf8_is_refused_by_name(where):
    """Python keeps bytes it cannot decode as lone surrogates; JSON's escape of one is no YAML,
    so kubectl would have refused the whole manifest the launcher printed with exit 0."""
    odd = "runs/\udcff"  # the bytes b"runs/\xff", as subprocess passes it (os.fsencode)
    image, train = (odd, []) if where == "image" else ("reg/distconv:1", ["--out", odd])
    done = launch("--workers", "2", "--servers", "1", "--image", image, "--", *train)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"distconv-launch k8s: error: {odd!r} is not UTF-8 text (bytes this system's locale did "
        "not decode); a manifest cannot hold it"
    ]


@needs_renderer
@pytest.mark.timeout(60)
def test_a_render_to_a_closed_stdout_is_refused_in_one_line():
    """Started with stdout closed (``>&-``) and no ``--out``, the renderer's YAML has nowhere
    to go: it ended with a traceback (``None.write``) rather than the launcher's error line
    (0246610 gave /dev/null for such a stream to the supervisor alone)."""
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "k8s", *JOBS[0][0]],
        env={**os.environ, "PYTHONPATH": child_path()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),  # as a shell's >&-
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert (
        done.stderr
        == "distconv-launch k8s: error: stdout is closed: pass --out DIR for the manifests\n"
    )
