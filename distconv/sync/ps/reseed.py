"""Rank 0's seed, and the optimizer state a second ``setup`` keeps through it.

A seed replaces everything a shard holds, its optimizer state with the optimizer's fresh one.
A second ``setup`` of one worker (a second ``Trainer.fit`` in one process) on the same shards
seeds them again: rank 0's values may have changed since (weights loaded); in async mode they
are the shards' of the last epoch's end (the Trainer has every rank pull them then), so the
seed loses no update of other workers. As
:class:`~distconv.sync.local.LocalSync` keeps the state of a parameter trained again (momentum,
Adam's moments and step count), rank 0 reads the shards' state before it seeds them and sends
it back after, for each parameter that is the same object as one its last seed held (that
seed and its send-back went through, even if its setup failed later, at the barrier);
a new parameter of the same name (another model on this sync) starts afresh, as there, and so
does every parameter under another optimizer given to this sync (``sync.optimizer = ...``). The
shards took this setup's hello, so the job they hold (parameters, layout, optimizer) is this
one: a changed optimizer or layout is refused there (but for a rate set with
``optimizer.set_base_lr`` on every rank, which the seed gives the shards' optimizer), and
shards started afresh for a new job hold nothing to keep.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.parameter import Parameter
from distconv.sync.ps.blocks import ParamSpec, rows_view
from distconv.sync.ps.shard_optimizer import refuse_unservable

log = logging.getLogger("distconv.pserver")


class Reseed:
    """The seeding side of :class:`~distconv.sync.ps.client.PServerSync`."""

    def _init_reseed(self) -> None:
        #: the parameters (by name) whose state the shards hold: those of rank 0's last seed
        #: that went through, state sent back and all (a setup may fail later, at the barrier)
        self._trained: dict[str, Parameter] = {}
        #: the optimizer of that seed: another one given since starts afresh, as on LocalSync
        self._trained_by: Any = None
        #: state read from the shards and not sent back yet (a setup failed in between), with
        #: the parameter and what it was then: one cast or reshaped since starts afresh
        self._kept: dict[str, tuple[Parameter, ParamSpec, Any]] | None = None

    def _seed_keeping_state(self, heads: list[dict[str, Any]]) -> None:
        """Rank 0: read the state to keep (see the module), seed, and send it back; first
        refuse an optimizer the shards would not rebuild as itself, before anything is read
        or sent (:mod:`.shard_optimizer`)."""
        refuse_unservable(self.optimizer)
        if self.optimizer is not self._trained_by:  # (of the same settings: the shards took
            self._trained, self._kept = {}, None  # the hello): its state starts afresh
        if self._kept is None:
            self._kept = self._state_to_keep(heads)
        held = self._kept
        kept = {
            p.name: held[p.name][2]
            for p, spec in zip(self.params, self._specs)
            if p.name in held and held[p.name][0] is p and held[p.name][1] == spec
        }
        self._seed()
        if kept:
            self.load_state_dict(kept)
        self._kept = None
        self._trained = {p.name: p for p in self.params}
        self._trained_by = self.optimizer

    def _state_to_keep(self, heads: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
        trained = self._trained  # kept until the seed goes through: a read cut short reads again
        again = [(p, s) for p, s in zip(self.params, self._specs) if trained.get(p.name) is p]
        if not again or not self.optimizer.init_state(np.zeros(1)):
            return {}  # a first setup, another model, or a stateless optimizer (plain SGD)
        fresh = [self.endpoints[s] for s, h in enumerate(heads) if not h.get("seeded")]
        if fresh:
            log.warning(
                "rank %d: pservers %s hold no seed (started afresh): the optimizer state of "
                "the setup before is lost, training goes on from a fresh one",
                self.rank,
                fresh,
            )
            return {}
        # the state alone: values written now would be of the seed a new one replaces
        state = self._gather_state(with_values=False)
        return {p.name: (p, s, state[p.name]) for p, s in again}

    def _seed(self) -> None:
        """Send every shard its blocks, in as many ``seed`` parts as its cap needs."""
        specs = [s.to_wire() for s in self._specs]
        config = self.optimizer.config()
        asks = []
        for s in range(len(self._socks)):
            blocks = self.layout.blocks_on(s)
            host = {
                b.param: rows_view(to_host(self.params[b.param].value), self._specs[b.param])
                for b in blocks
            }
            runs = self._runs(s, blocks, [b.nbytes for b in blocks])
            for part, run in enumerate(runs):
                head = {
                    "op": "seed",
                    "params": specs,
                    "table": [b.to_wire() for b in run],
                    "optimizer": config,
                    "part": part,
                    "parts": len(runs),
                }
                asks.append((s, head, [host[b.param][b.start : b.stop] for b in run]))
        self._ask_all(asks, "seed")
