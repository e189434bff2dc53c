"""The cupy path on a GPU machine: the device tests, then cuDNN against im2col on the device.

Usage, on a machine with a CUDA device after ``pip install -e '.[gpu,test]'``::

    python benchmarks/gpu.py

First runs ``pytest -m gpu`` on the files holding device tests (the whole layer catalogue on
the device against numpy: convolutions with and without cuDNN, FC, pooling, projections,
operators, sequences, selective FC, multiplex, expand, concatenation), then times
forward+backward in float32 on the device with cuDNN and with the im2col kernels
(``DISTCONV_CUDNN=0``) of the conv benchmark's shapes and of ``ConvOperator`` (a filter bank per
sample, one grouped convolution), and prints both with their ratio (im2col alone where the CuPy
has no cuDNN: CuPy 14 removed it). Exits non-zero if the tests fail.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from conv import CASES  # noqa: E402
from conv_operator import CASES as OPERATOR_CASES  # noqa: E402
from conv_operator import make_arrays, operator_step  # noqa: E402
from harness import print_table  # noqa: E402


def _best_ms(fn, sync, repeat: int = 10) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def _step(case):
    import cupy

    from distconv import Arg
    from distconv.layers import Conv2D, ConvTranspose3D

    kind, n, c, sp, o, k, s, p = case
    layer = (Conv2D if kind == "conv2d" else ConvTranspose3D)(c, o, k, stride=s, padding=p)
    x = Arg(cupy.random.standard_normal((n, c, *sp), dtype=cupy.float32))

    def run():
        y = layer(x)
        y.grad = cupy.ones_like(y.value)
        x.grad = None
        layer.backward(lambda p: None)

    return run


def _device_operator_step(case):
    import cupy

    x, f, dout = (cupy.asarray(a) for a in make_arrays(case))
    return operator_step(x, f, dout, case)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpu_test_files() -> list[str]:
    """The test files that hold device tests (``pytest.mark.gpu``), relative to the root.

    pytest is pointed at these alone: collecting the whole suite would import modules (the
    parameter server's ZeroMQ, the manifests' schema checker) that a GPU image may lack. The
    marks are found in the code (``pytest.mark.gpu`` or ``mark.gpu``), not in its strings.
    """
    found = []
    for folder, _, names in os.walk(os.path.join(ROOT, "tests")):
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith("test_") and name.endswith(".py") and _marks_gpu(path):
                found.append(os.path.relpath(path, ROOT))
    if not found:
        raise SystemExit("no test file under tests/ carries pytest.mark.gpu")
    return sorted(found)


def _marks_gpu(path: str) -> bool:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "gpu"
        and (
            (isinstance(node.value, ast.Attribute) and node.value.attr == "mark")
            or (isinstance(node.value, ast.Name) and node.value.id == "mark")
        )
        for node in ast.walk(tree)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.parse_args(argv)  # no options: --help prints the above, anything else is refused
    # no .pytest_cache/ or .benchmarks/ (pytest-benchmark's, which no device test uses) left
    # in the checkout: a run here only reads it
    quiet = ["-p", "no:cacheprovider", "-p", "no:benchmark"]
    command = [sys.executable, "-m", "pytest", "-q", *quiet, "-m", "gpu", *gpu_test_files()]
    tests = subprocess.run(command, cwd=ROOT)
    try:
        import cupy
    except ImportError as exc:  # the tests above skipped: nothing ran on a device
        print(f"gpu.py: no cupy ({exc}); pip install -e '.[gpu,test]' on a CUDA machine")
        return 1

    from distconv.backend import set_device
    from distconv.kernels import cudnn

    set_device("gpu")
    sync = cupy.cuda.Device().synchronize
    flags = ("1", "0") if cudnn.available() else ("0",)
    if len(flags) == 1:
        print(f"no cuDNN ({cudnn.unavailable_reason()}): im2col on the device only")
    rows = []
    cases = [(name, _step, case) for name, case in CASES.items()]
    for name, case in OPERATOR_CASES.items():
        cases.append((f"ConvOperator {name}", _device_operator_step, case))
    for name, make, case in cases:
        times = {}
        for flag in flags:
            os.environ["DISTCONV_CUDNN"] = flag
            times[flag] = _best_ms(make(case), sync)
        row = [name, f"{times['0']:.2f}"]
        if "1" in times:
            row += [f"{times['1']:.2f}", f"{times['0'] / times['1']:.1f}"]
        rows.append(row)
    header = ["case (fwd+bwd, float32)", "im2col ms"]
    print_table(header + (["cuDNN ms", "im2col / cuDNN"] if len(flags) == 2 else []), rows)
    return tests.returncode


if __name__ == "__main__":
    raise SystemExit(main())
