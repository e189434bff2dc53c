"""The floating-point types a parameter server keeps its parameters in, and a worker's refusal
of a model in another (float16, bfloat16) at setup, before any hello: a configuration error
(:class:`~distconv.runtime.RuntimeConfigError`), which ``distconv train`` and a script's
``run_main`` say in one line, naming the way out. The wire's own check of each parameter's
dtype (:func:`~distconv.sync.ps.wire.dtype_name`) stays the protocol's guard: a parameter of
no floating-point type (a static int64 one) is refused there.

Without this refusal a 16-bit model failed only in the wire's words, as a ``WireError`` ("a
message does not follow the protocol") with its traceback, saying nothing of what to do.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distconv.backend import is_float_dtype
from distconv.parameter import Parameter
from distconv.runtime import RuntimeConfigError
from distconv.short_lists import short_list
from distconv.sync.ps.wire import VALUE_DTYPES

#: what to do instead, said after the dtype refused
WAY_OUT = (
    "the parameter server keeps float32 or float64 parameters; train in float32 or float64, "
    "or in 16 bits over MPI (--sync mpi) or locally"
)


def refuse_unkept_dtypes(params: Sequence[Parameter], rank: int) -> None:
    """Refuse ``params`` (a worker's, at setup) where one of them holds a floating-point type
    the shards do not keep (:data:`~distconv.sync.ps.wire.VALUE_DTYPES`).

    Raises:
        RuntimeConfigError: naming the first such parameter, its dtype, how many there are,
            and :data:`WAY_OUT`.
    """
    unkept = [
        f"{p.name!r} is {np.dtype(p.value.dtype).name}"
        for p in params
        if is_float_dtype(p.value.dtype) and np.dtype(p.value.dtype).name not in VALUE_DTYPES
    ]
    if unkept:
        said = short_list(unkept, 1, bracketed=True)
        raise RuntimeConfigError(f"rank {rank}: parameter {said}: {WAY_OUT}")
