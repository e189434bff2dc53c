"""Under ``distconv train --log-format json`` every line the launcher writes is JSON.

The workers' JSON lines came behind ``[worker 0] ``, a shard's text lines behind ``[server 0] ``
and the launcher's own messages behind ``distconv-launch: ``, so a collector parsing the
launcher's output as JSON lost them all.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.json_lines import JsonLines, asks_json
from tests.launcher.launch_cli import launch


def _objects(text: str) -> list[dict]:
    lines = text.splitlines()
    assert lines, "no output"
    objects = []
    for line in lines:
        try:
            objects.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}")
    return objects


@pytest.mark.timeout(90)
def test_a_jobs_lines_are_all_json(tmp_path: Path):
    done = launch(
        "local", "--workers", "1", "--servers", "1", "--run-dir", str(tmp_path / "run"),
        "--job-id", "j", "--", "--epochs", "1", "--no-progress", "--log-f", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out, err = _objects(done.stdout), _objects(done.stderr)
    worker = [o for o in out if o["role"] == "worker"]
    assert worker and all(o["logger"].startswith("distconv") for o in worker), out
    assert any(o["message"].startswith("epoch 1/1 ") for o in worker)  # its own, unwrapped
    shard = [o for o in out if o["role"] == "server"]  # a shard's text lines, wrapped
    assert shard and all(o["rank"] == 0 and o["job_id"] == "j" for o in shard), out
    assert any("stats" in o["message"] for o in shard) and shard[0]["restart"] == 0
    assert {o["role"] for o in err} == {"launcher"}, err
    assert err[0]["message"].startswith("job j: 1 worker(s), 1 server(s); logs in ")


@pytest.mark.timeout(60)
def test_a_failure_report_is_a_json_line(tmp_path: Path):
    done = launch(
        "local", "--workers", "1", "--servers", "1", "--run-dir", str(tmp_path / "run"),
        "--job-id", "j", "--", "--epochs", "1", "--data", "mnist", "--data-dir",
        str(tmp_path / "none"), "--log-format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    out, err = _objects(done.stdout), _objects(done.stderr)
    assert any(o["role"] == "worker" and o["level"] == "error" for o in out), out
    assert {o["role"] for o in err} == {"launcher"}, err
    report, way_on = err[-2:]  # the failure, then where the run stands and how it goes on
    assert way_on["message"].startswith("no checkpoint kept yet: "), way_on
    assert report["level"] == "error" and report["restart"] == 0
    assert report["message"].startswith("worker 0 failed with exit code 1"), report
    assert "MNIST directory" in report["message"]  # the tail, within the message


def test_a_refusal_before_the_job_is_a_json_line(tmp_path: Path):
    done = launch(
        "local", "--workers", "2", "--run-dir", str(tmp_path / "run"), "--",
        "--sync", "mpi", "--log-format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2  # a usage error
    (line,) = _objects(done.stderr)
    assert line["level"] == "error" and line["role"] == "launcher"
    assert "--sync mpi after --" in line["message"]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", ["--bogus", "-x", "--s"])  # unknown, short, ambiguous
def test_a_refusal_of_a_train_flag_is_a_json_line_too(tmp_path: Path, flag):
    """A flag distconv train does not take (or abbreviates several) hid the --log-format json
    beside it, and its refusal came as text, though the docs say only the launcher's own usage
    errors before -- do."""
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(tmp_path / "run"), "--",
        "--log-f", "json", flag,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = _objects(done.stderr)
    assert line["level"] == "error" and line["role"] == "launcher"
    assert flag in line["message"], line
    assert not (tmp_path / "run").exists()


def test_text_stays_text_without_json(tmp_path: Path):
    done = launch("local", "--workers", "2", "--", "--sync", "mpi", cwd=tmp_path)
    assert done.stderr.startswith("distconv-launch local: error: --sync mpi after --")


@pytest.mark.parametrize(
    "line, role, rank, message",
    [
        (b"[1] 12:00:01 epoch 1\n", "worker", 1, "12:00:01 epoch 1"),  # MPICH's -prepend-rank
        (b"[1,0]<stderr>:Traceback\n", "worker", 0, "Traceback"),  # Open MPI's --tag-output
        (b"[1,0]<stderr>: Traceback\n", "worker", 0, "Traceback"),  # Open MPI 5's (PMIx's)
        (b"=   BAD TERMINATION\n", "mpiexec", None, "=   BAD TERMINATION"),  # mpiexec's own
    ],
)
def test_an_mpi_ranks_line_is_read_behind_its_tag(line, role, rank, message):
    got = json.loads(JsonLines("j").child_line("mpiexec", 0, 2, line))
    assert (got["role"], got["rank"], got["message"], got["restart"]) == (role, rank, message, 2)


def test_an_mpi_ranks_json_line_comes_unchanged():
    body = b'{"message": "epoch 1", "rank": 1}'
    assert JsonLines("j").child_line("mpiexec", 0, 0, b"[1] " + body + b"\n") == body + b"\n"


def test_only_train_arguments_asking_for_json_ask_for_it():
    assert asks_json(["train", "--log-format=json"])
    assert not asks_json(["--log-format", "text"])
    assert not asks_json(["my_script.py", "--log-format", "json"])  # the script's own flag


def test_a_renders_refusal_stays_text(tmp_path: Path):
    """k8s renders manifests: its pods log JSON, the command itself does not."""
    done = launch(
        "k8s", "--workers", "2", "--mpi", "--image", "x", "--", "--log-format", "json",
        "--pservers", "a:1",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2  # --pservers, which the deployment sets: a usage error
    assert done.stderr.startswith("distconv-launch k8s: error: "), done.stderr


def test_a_ranks_line_nested_past_jsons_depth_is_wrapped():
    """A rank's line that opens like a JSON object but nests past ``json.loads``' recursion
    (a RecursionError, no ValueError) is text: wrapped, not the launcher's end."""
    body = b'{"a": ' + b"[" * 5000
    got = json.loads(JsonLines("j").child_line("mpiexec", 0, 0, b"[1] " + body + b"\n"))
    assert (got["role"], got["rank"], got["message"]) == ("worker", 1, body.decode())
