"""float16 gradients hold the sum over a rank's examples: where that passes 65,504 the run
stopped as diverged, told to lower the learning rate, though the mean gradient fits float16
and a smaller batch (or bfloat16) trains on. The error names float16's range and the batch."""

from __future__ import annotations

import pytest

from distconv.optim import create_optimizer
from distconv.step_guard import TrainingError
from distconv.sync.local import LocalSync
from tests.float16_sums import fit_float16


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow itself, in the layers
def test_a_float16_gradient_sum_past_its_range_names_the_batch_size(tmp_path):
    with pytest.raises(TrainingError, match="loss became NaN or infinite") as caught:
        fit_float16(LocalSync(create_optimizer("sgd", lr=1e-3)), tmp_path)
    said = str(caught.value)
    assert "lower the learning rate" in said
    assert "float16" in said and "65504" in said and "--batch-size" in said, said
    assert "bfloat16" in said, said
