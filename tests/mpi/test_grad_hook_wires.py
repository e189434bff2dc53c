"""The example's clip in MPISync's ``grad_hook`` on a cast wire (``grad_dtype``), on a real
``mpiexec -n 2`` (``run_grad_hook.py clip``): the hook divides by ``examples`` to read the
mean's norm, so on a float32, float16 or bfloat16 wire, which carries averages (``examples``
1), it clips as one process clipping the whole batch does, up to the wire's rounding."""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, max_relative, params_of, run_two_ranks
from tests.mpi.test_grad_hook_ranks import MAX_NORM, _one_process

pytestmark = NEEDS_MPIEXEC


@pytest.mark.parametrize(
    ("wire", "rounding"), [("float32", 1e-6), ("float16", 3e-3), ("bfloat16", 2e-2)]
)
def test_on_a_cast_wire_two_ranks_clip_as_one_process_does(tmp_path, wire, rounding):
    """The norms and weights of one process clipping every global batch (every step clipped),
    to the wire's rounding. With the global count for ``examples`` on these wires (the
    buckets held averages), the norm read was 16 times too small and no step was clipped."""
    if wire == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    run_two_ranks("run_grad_hook.py", tmp_path, "clip", "1", str(256), str(MAX_NORM), wire)
    expected, norms = _one_process()
    assert min(norms) > MAX_NORM  # every step clipped
    for rank in (0, 1):
        saved = dict(np.load(tmp_path / f"rank{rank}.npz"))
        np.testing.assert_allclose(saved["_norms"], norms, rtol=rounding)
        assert max_relative(params_of(saved), expected) <= rounding
