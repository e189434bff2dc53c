"""Each benchmark script's docstring usage names every flag its ``--help`` lists."""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "script",
    [
        "pserver.py",
        "allreduce.py",
        "train_step.py",
        "conv.py",
        "conv_operator.py",
        "selective_fc.py",
        "network_build.py",
        "layers.py",
    ],
)
def test_the_docstring_usage_names_every_flag(script):
    """pserver.py's usage left out ``--modes``, ``--push-bytes``, ``--json`` and
    ``--keep-freed-buffers``, allreduce.py's seven of its flags: a reader of the file took the
    usage line for the whole interface."""
    path = BENCHMARKS / script
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(path), "--help"], env=env, capture_output=True, text=True, timeout=50
    )
    assert done.returncode == 0, done.stderr
    flags = set(re.findall(r"--[a-z][a-z-]*", done.stdout)) - {"--help"}
    doc = ast.get_docstring(ast.parse(path.read_text()))
    usage = doc[doc.index("Usage:") : doc.index("``", doc.index("Usage:") + 10)]
    assert flags and sorted(f for f in flags if f not in usage) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "script, flag, value, said",
    [
        ("allreduce.py", "--mb", "0", "must be more than 0"),
        ("pserver.py", "--repeat", "0", "must be at least 1"),
        ("allreduce.py", "--epochs", "0", "must be at least 1"),
        ("pserver.py", "--push-bytes", "-1", "must be at least 0"),
        # a row of inf and nan (exit 0), an empty table, an IndexError, a StatisticsError, a
        # table of empty batches, a worker's LayerError
        ("conv_operator.py", "--repeat", "0", "must be at least 1"),
        ("conv_operator.py", "--rounds", "0", "must be at least 1"),
        ("conv_operator.py", "--threads", "0", "must be at least 1"),
        ("train_step.py", "--rounds", "0", "must be at least 1"),
        ("train_step.py", "--repeat", "0", "must be at least 1"),
        ("train_step.py", "--threads", "0", "must be at least 1"),
        ("selective_fc.py", "--batch", "0", "must be at least 1"),
        ("selective_fc.py", "--in-features", "0", "must be at least 1"),
        ("selective_fc.py", "--threads", "0", "must be at least 1"),
        ("conv.py", "--threads", "0", "must be at least 1"),
    ],
)
def test_a_size_or_count_that_times_nothing_is_refused(script, flag, value, said):
    """``allreduce.py --mb 0`` ran a whole table of zero-byte calls, whose times read as a
    measurement: the sizes and counts are refused at the command line instead. ``pserver.py
    --push-bytes -1`` started the echoes and shards before PServerSync refused it with a
    traceback (0 is a setting: each gradient leaves as soon as the link is free). The other
    scripts' counts took 0 as plain ints."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), flag, value],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 2 and f"argument {flag}: {said}, got {value}" in done.stderr


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_a_number_that_is_not_finite_is_refused(monkeypatch, text):
    """No comparison with the bound refuses NaN, and infinity is over any: ``--mb nan`` ended
    in ``int(nan)``'s traceback, ``--compute-ms inf`` in a sleep's."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from harness import at_least

    with pytest.raises(argparse.ArgumentTypeError, match=f"must be finite, got '{text}'"):
        at_least(0)(text)
    assert at_least(0)("2.5") == 2.5


@pytest.mark.parametrize(
    "text, kind, said",
    [("1.5", int, "must be an integer"), ("1_0", float, "must be a number"), ("١٠", int, "")],
)
def test_a_number_is_read_as_distconv_train_reads_one(monkeypatch, text, kind, said):
    """``at_least`` read with ``int()`` and ``float()``, which take ``1_0`` and other scripts'
    digits, and said "not a number" of ``1.5`` where an integer is asked for: it reads as
    ``distconv.number_text`` does, the rule of every distconv command line."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from harness import at_least

    with pytest.raises(argparse.ArgumentTypeError, match=said):
        at_least(0, kind)(text)


def test_a_count_too_large_for_a_float_is_read_not_a_traceback(monkeypatch):
    """``math.isfinite`` of an int over a float's range raised OverflowError, an argparse
    traceback for ``--reps 1`` followed by 400 zeros: an int is finite."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from harness import at_least

    assert at_least(1, int)("1" + "0" * 400) == 10**400


def test_a_size_too_large_for_any_array_is_refused_not_a_traceback(monkeypatch):
    """``--mb 1e303`` is finite, so ``at_least`` took it, but its bytes (``mb * 2**20``) are
    not: ``int(inf)`` ended the run in an OverflowError's traceback. Past what an array can
    hold (``sys.maxsize`` bytes) it is refused at the command line."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from harness import refuse_empty_gradients

    parser = argparse.ArgumentParser()
    errors: list[str] = []
    monkeypatch.setattr(parser, "error", lambda message: errors.append(message))
    for mb in (1e303, 1e13):  # bytes inf; finite but over sys.maxsize
        refuse_empty_gradients(parser, mb, 100, "--grads")
    assert len(errors) == 2
    assert errors[0] == "--mb 1e+303 is more bytes than an array can hold"
    refuse_empty_gradients(parser, 4.0, 100, "--grads")
    assert len(errors) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "script, flags",
    [
        ("allreduce.py", ["--mb", "0.0001", "--grads", "100"]),
        ("pserver.py", ["--mb", "0.0001"]),
    ],
)
def test_a_size_of_fewer_floats_than_gradients_is_refused(script, flags):
    """``--mb 0.0001`` passed ``--mb``'s own check (more than 0) and gave 74 of 100 gradients
    no float: their zero-byte calls were timed as ``--mb 0``'s were (pserver.py's all 100)."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 2, done.stderr
    assert (
        "--mb 0.0001 is 104 bytes, under one float32 for each of the 100 gradients" in done.stderr
    )


@pytest.mark.parametrize(
    "forced", [{}, {"OPENBLAS_L2_SIZE": "512"}, {"OPENBLAS_CORETYPE": "Haswell"}]
)
def test_the_header_says_how_to_run_the_cpus_own_kernels(monkeypatch, forced):
    """The header named the variables that force numpy's kernels, and docs/benchmarks.md
    said "the benchmarks unset both", which none does: the line gives the command that does."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from harness import blas_kernels

    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        monkeypatch.delenv(var, raising=False)
    for var, value in forced.items():
        monkeypatch.setenv(var, value)
    line = blas_kernels()
    assert line.startswith("numpy's BLAS: ")
    if not forced:
        assert "set by the environment" not in line and "env -u" not in line
    else:
        ((var, value),) = forced.items()
        said = f"(set by the environment: {var}={value}; for the CPU's own kernels, run under "
        assert said + f"env -u {var})" in line
