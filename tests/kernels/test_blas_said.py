"""One description of numpy's BLAS and its kernels, in distconv: a metrics log's run line, the
benchmarks' headers and ``distconv train``'s start say the same library in the same words.
Two copies (one in the run line, one in the benchmarks) had drifted apart already: one named
the threading layer, the other every BLAS loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from distconv import run_line
from distconv.kernels.blas import (
    blas_said,
    kernel_vars_set,
    kernels_forced,
    kernels_said,
    numpy_blas,
)
from tests.child_env import child_env

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_run_line_and_the_benchmarks_name_the_blas_by_the_one_description(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from harness import blas_kernels

    assert run_line.numpy_blas is numpy_blas  # one, not a copy: tests import it from there
    assert run_line.software()["blas"] == numpy_blas()
    assert blas_kernels() == kernels_said()
    assert kernels_said({}) == f"numpy's BLAS: {numpy_blas() or 'none found'}"


def test_kernels_forced_by_the_environment_are_named_with_the_command_for_the_cpu_s_own():
    said = kernels_said({"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512", "X": "1"})
    assert said == (
        f"numpy's BLAS: {numpy_blas() or 'none found'} (set by the environment: "
        "OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=512; for the CPU's own kernels, run under "
        "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)"
    )


@pytest.mark.parametrize(
    "environ, forced",
    [
        ({}, False),
        ({"OPENBLAS_L2_SIZE": "512"}, False),  # a cache size: the kernels stay the CPU's
        ({"OPENBLAS_CORETYPE": "Haswell"}, True),
        ({"OPENBLAS_CORETYPE": ""}, False),  # blank: OpenBLAS picks the CPU's own
    ],
)
def test_only_a_named_core_type_forces_the_kernels(environ, forced):
    assert kernels_forced(environ) is forced
    assert ("(set by the environment" in kernels_said(environ)) is any(environ.values())


#: what threadpoolctl's controllers read for a numpy built on another BLAS (numpy_blas's words)
OTHER_BLAS = ["mkl 2024.2-Product intel", "blis 0.9.0 skx pthreads"]


@pytest.mark.parametrize("blas", [None, *OTHER_BLAS])
def test_the_openblas_variables_are_not_said_to_hold_a_blas_that_is_not_openblas(blas):
    """A numpy on MKL or BLIS, or one whose BLAS threadpoolctl does not find, reads no
    OPENBLAS_* variable: the start log said its kernels were forced and slower all the same."""
    environ = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "512"}
    assert kernel_vars_set(blas, environ) == []
    assert blas_said(blas, environ) == f"numpy's BLAS: {blas or 'none found'}"


def test_the_openblas_variables_are_said_where_numpy_s_blas_is_openblas():
    environ = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": ""}
    said = blas_said("openblas 0.3.31.188.0 Haswell pthreads", environ)
    assert said == (
        "numpy's BLAS: openblas 0.3.31.188.0 Haswell pthreads (set by the environment: "
        "OPENBLAS_CORETYPE=Haswell; for the CPU's own kernels, run under env -u OPENBLAS_CORETYPE)"
    )


#: a driver measuring an older checkout (``benchmarks/pserver.py --code DIR``): its distconv
#: first on the path and imported, then the header
HEADER_UNDER_OLDER_CODE = """
import sys
sys.path.insert(0, {benchmarks!r})
from harness import blas_kernels
sys.path.insert(0, {older!r})
for name in [m for m in sys.modules if m == "distconv" or m.startswith("distconv.")]:
    del sys.modules[name]
import distconv.kernels.blas
assert distconv.kernels.blas.__file__.startswith({older!r}), distconv.kernels.blas.__file__
print(blas_kernels())
"""


def test_the_benchmarks_header_is_said_while_an_older_checkout_s_distconv_is_imported(tmp_path):
    """``pserver.py --code DIR`` of a checkout from before the description crashed on an
    ImportError at its header, before measuring anything."""
    older = tmp_path / "older"
    for package in ("distconv", "distconv/kernels"):
        (older / package).mkdir(parents=True)
        (older / package / "__init__.py").write_text("")
    (older / "distconv/kernels/blas.py").write_text('"""gemm alone, no description yet."""\n')
    code = HEADER_UNDER_OLDER_CODE.format(benchmarks=str(BENCHMARKS), older=str(older))
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == kernels_said(), done.stdout
