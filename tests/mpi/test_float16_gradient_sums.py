"""float16 gradients summed over each rank's 512 examples overflow in the layers, before the
wire, though every mean gradient fits. On two ranks the refusal blamed the wire: with a
bfloat16 one it claimed "past bfloat16's range" (bfloat16 has float32's range) and offered the
setting in use; with a float32 one the infinity reached the parameters and the run stopped as
diverged, told to lower the learning rate. Each now names float16's sums and the batch size."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.parameter import Parameter
from distconv.sync.mpi.comm import WireRefused
from tests.mpi.common import mpiexec, one_rank_step, run_mpi, script


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "dtype, wire, says",
    [
        # the wire is the gradient buffer itself: the rank's own sums are gone once reduced
        (np.float16, None, "the gradients summed over a rank's (512 on this rank) examples"),
        (np.float16, "bfloat16", "the gradients summed over this rank's 512 examples"),
        (np.float32, "bfloat16", "this rank's gradients were NaN or infinite before the wire"),
    ],
)
def test_a_refused_wire_says_what_this_rank_can_tell(dtype, wire, says):
    """On a world of one, a gradient already infinite before the wire: the refusal names this
    rank's sums where it can read them, and no bfloat16 range, which is float32's."""
    if wire == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    param = Parameter("w", np.zeros(4, dtype))
    with pytest.raises(WireRefused) as caught:
        one_rank_step(param, np.array([np.inf, 1, 1, 1]), 512, grad_dtype=wire)
    said = str(caught.value)
    assert said.startswith(f"gradient bucket 0 (w) is not finite after the {wire or 'float16'}")
    assert says in said and "range" not in said.replace("float16 (65504)", ""), said
    np.testing.assert_array_equal(param.value, np.zeros(4))


@pytest.mark.timeout(60)
@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("wire", ["bfloat16", "none", "float32"])
def test_two_ranks_name_float16_sums_not_the_wire(wire, tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    if wire == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    proc = run_mpi(["-n", "2", *script("run_float16_sums.py"), wire, str(tmp_path)], timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in range(2):
        said = (tmp_path / f"rank{rank}.err").read_text()
        assert "bfloat16's range" not in said, said
        assert "float16" in said and "65504" in said and "--batch-size" in said, said
        if wire != "float32":  # the bucket's refusal names the Trainer's argument too
            assert "batch_size=" in said, said
        if wire == "float32":  # a native wire is not checked: the fold finds the loss NaN
            assert said.startswith("TrainingError: the loss became NaN or infinite"), said
        else:  # each rank's own sums are in its host buffer, beside the wire's copy
            assert said.startswith("WireRefused: gradient bucket 0 (out.bias, out.weight)"), said
            assert "the gradients summed over this rank's 512 examples overflowed" in said, said


@pytest.mark.timeout(60)
@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.parametrize("wire", ["none", "float16", "bfloat16"])
def test_a_rank_whose_own_sums_fit_names_the_other_ranks_float16_sums(wire, tmp_path):
    """Rank 1's float16 sums overflowed, rank 0's fit. On a float16 wire rank 0 blamed an
    average past the wire's range and offered grad_dtype 'bfloat16' or 'float32', which cannot
    help (a float16 model's averages never pass what its sums hold); it now says, as on a
    bfloat16 wire, that another rank's float16 sums overflowed, and the batch size."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    if wire == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    args = ["-n", "2", *script("run_other_rank_overflows.py"), wire, str(tmp_path)]
    proc = run_mpi(args, timeout=45)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [(tmp_path / f"rank{rank}.err").read_text() for rank in range(2)]
    on = "float16" if wire == "none" else wire
    head = f"WireRefused: gradient bucket 0 (w) is not finite after the {on} wire: "
    assert all(s.startswith(head) for s in said), said
    assert "the gradients summed over this rank's 512 examples overflowed float16" in said[1]
    other = "another rank's gradients, summed over its examples, overflowed float16 (65504)"
    assert other in said[0] and "--batch-size" in said[0], said[0]
    assert "grad_dtype" not in said[0] and "range" not in said[0].replace("(65504)", ""), said[0]
