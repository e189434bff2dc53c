"""A parameter-server worker's setup before its ``hello``, on its rank alone: the parameters it
trains, cut into blocks over the shards, and the job description its hello carries.

Laid out anew at each setup: a later fit may train another set of parameters (a layer frozen
or unfrozen). Every refusal here (two parameters of one name, a
dtype the shards do not keep, an optimizer they cannot run, a shard left without a block) is
this rank's own, made before any shard hears of the setup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.optim import Optimizer
from distconv.parameter import Parameter, trainable
from distconv.sync.base import SyncError, setup_params
from distconv.sync.description import job_description
from distconv.sync.ps.blocks import Layout, ParamSpec
from distconv.sync.ps.gradients import GradientRuns
from distconv.sync.ps.param_dtypes import refuse_unkept_dtypes
from distconv.sync.ps.shard_optimizer import refuse_unservable
from distconv.sync.ps.wire import VALUE_DTYPES, dtype_name


class WorkerLayout:
    """The layout side of :class:`~distconv.sync.ps.client.PServerSync` (a mixin): it sets
    ``params``, ``sparse``, ``layout`` and the per-parameter blocks, shard targets and
    gradient runs that the steps read."""

    rank: int
    optimizer: Optimizer
    endpoints: list[str]
    block_bytes: int
    sparse: set[str]
    params: list[Parameter]
    _socks: Sequence[Any]
    _sockets: Any  # the worker's sockets (worker_sockets.WorkerSockets): a bye owed from now
    _host: dict[str, np.ndarray]
    _drop_pushes: Callable[[], None]
    _init_sparse_rows: Callable[[], None]
    _end_step: Callable[[], None]

    def _lay_out(self, params: Sequence[Parameter], config: Mapping | None) -> dict[str, Any]:
        """Setup's work before its hello, on this rank alone: its job description."""
        refuse_unservable(self.optimizer)  # every rank, before its hello: not rank 0 at its seed
        params = trainable(params)
        refuse_unkept_dtypes(params, self.rank)  # not yet in self.params: close says no bye
        self._drop_pushes()  # those of a step cut short (a second Ctrl-C), if any
        self.params = setup_params(params)  # before any hello: as the base's
        self._error_at_setup = self._sockets.owe_bye(bool(self.params))  # a bye owed from now
        # anew at each setup: a later fit may train another set (a layer frozen or unfrozen)
        self._by_name = {p.name: i for i, p in enumerate(self.params)}
        # and the sparse rows of a step cut short, kept by the old indices: the parameter now at
        # one had its gradient cleared in those rows alone, the rest carried into the next step
        self._init_sparse_rows()
        self._end_step()  # a step cut short is over: its pushes were dropped
        self._stamps_at_pull = None  # another layout, and the chief seeds: no pull stands for it
        self._host.clear()  # a sparse pull writes some rows, then copies the whole host copy
        self.sparse = {p.name for p in self.params if p.sparse_rows}
        self._specs = [self._spec(p) for p in self.params]
        self.layout = Layout(self._specs, len(self._socks), self.block_bytes)
        if (idle := self.layout.idle_problem(self.endpoints)) is not None:  # before any hello
            raise SyncError(f"rank {self.rank}: {idle}")
        self._param_blocks = [self.layout.blocks_of(i) for i in range(len(self.params))]
        self._versions = [0] * len(self.layout.blocks)
        self._targets = [
            [(s, self.layout.blocks_on(s, i)) for s in range(len(self._socks))]
            for i in range(len(self.params))
        ]
        self._targets = [[(s, bl) for s, bl in t if bl] for t in self._targets]
        self._runs_of_gradients = GradientRuns(
            self.params,
            [{s for s, _ in t} for t in self._targets],
            [
                not s.sparse and isinstance(p.grad, np.ndarray)
                for s, p in zip(self._specs, self.params)
            ],
        )
        pserver = {"block_bytes": self.block_bytes, "shards": len(self._socks)}
        pserver["sparse"] = sorted(self.sparse)
        return {**job_description(self.params, self.optimizer, config or {}), "pserver": pserver}

    def _spec(self, p: Parameter) -> ParamSpec:
        """``p``'s spec as the shards hold it: its name, shape, value dtype and sparsity."""
        host = to_host(p.value)
        if not host.flags.c_contiguous:
            raise ValueError(f"parameter {p.name} is not C-contiguous")
        dtype = dtype_name(host.dtype, VALUE_DTYPES, f"parameter {p.name!r}: ")
        return ParamSpec(p.name, tuple(p.shape), dtype, p.name in self.sparse)
