"""The cupy path on a GPU machine: the device tests, then cuDNN against im2col on the device.

Usage, on a machine with a CUDA device after ``pip install -e '.[gpu,test]'``::

    python benchmarks/gpu.py

First runs ``pytest -m gpu`` (the whole layer catalogue on the device against numpy:
convolutions, FC and pooling with and without cuDNN, projections, operators, sequences,
selective FC, multiplex, expand, concatenation), then times forward+backward in float32 on the
device with cuDNN and with the im2col kernels (``DISTCONV_CUDNN=0``) of the conv benchmark's
shapes and of ``ConvOperator`` (a filter bank per sample, one grouped convolution), and prints
both with their ratio. Exits non-zero if the tests fail.
"""

from __future__ import annotations

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


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests"], cwd=root)
    import cupy

    from distconv.backend import set_device

    set_device("gpu")
    sync = cupy.cuda.Device().synchronize
    rows = []
    cases = [(name, _step, case) for name, case in CASES.items()]
    for name, case in OPERATOR_CASES.items():
        cases.append((f"ConvOperator {name}", _device_operator_step, case))
    for name, make, case in cases:
        times = {}
        for flag in ("1", "0"):
            os.environ["DISTCONV_CUDNN"] = flag
            times[flag] = _best_ms(make(case), sync)
        rows.append(
            [name, f"{times['1']:.2f}", f"{times['0']:.2f}", f"{times['0'] / times['1']:.1f}"]
        )
    print_table(["case (fwd+bwd, float32)", "cuDNN ms", "im2col ms", "im2col / cuDNN"], rows)
    return tests.returncode


if __name__ == "__main__":
    raise SystemExit(main())
