"""The optimizer state the shards hold for a worker: gathered and restored block by block, and
the shards' own checkpoint parts and counters.

A shard keeps a per-parameter scalar of the optimizer (Adam's ``step``) once per *block*. The
blocks of a dense parameter advance together in sync mode, but a sparse table's block takes a
step only when one of its rows is touched, and in async mode a push can be dropped as stale on
one shard and applied on another (staleness is judged per shard), so their blocks' counts
differ. The gathered state therefore carries, for each scalar key ``K``, counts that do not
depend on the block layout: for each sparse parameter ``K + PER_ROW``, one count per row (each row
holds its block's count); for each dense one ``K + RUNS``, the same as runs of rows
(:mod:`~distconv.sync.ps.row_counts`: a dense parameter's row is one element, and one count each
would outweigh its values), in async mode, and in sync mode where its blocks differ (a resume
from an async checkpoint: the sync run's own checkpoint keeps them). ``K`` itself holds the
largest. Restoring sends each block the count of its rows (a dense parameter cut into other
blocks since: the largest of a block's rows).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.sync.base import PER_ROW, StateDict, SyncError
from distconv.sync.local import state_problems
from distconv.sync.ps.blocks import Block, ParamSpec, rows_view
from distconv.sync.ps.part_failures import failures_of
from distconv.sync.ps.row_counts import RUNS, block_count, count_problems, count_runs

log = logging.getLogger("distconv.pserver")

#: what a ``get_state`` reply without the values asked for says of its shard: one of a release
#: before ``with_values``, which ignores the field (unknown fields are ignored)
_WITHOUT_VALUES = (
    "get_state reply without the values it was asked for (with_values), as a shard of an older "
    "distconv answers: run workers and shards of the same release"
)


class RemoteState:
    """The state side of :class:`~distconv.sync.ps.client.PServerSync`."""

    def state_dict(self) -> StateDict:
        """Gather every block's optimizer state from the shards, by parameter name then key.

        Sparse parameters also get ``K + PER_ROW`` for each scalar key ``K``, and in async mode
        dense ones ``K + RUNS`` (see the module).
        In async mode each reply also carries its blocks' values of the same moment, written
        into the parameters (as a pull does): a push landing after the checkpoint's pull (a
        rank declared lost, a worker without the ``Trainer``'s gathers) moved the state past
        the values pulled, and the checkpoint held state and values of two moments. Those
        values are checked finite before any is written, as a pull's are.

        Raises:
            SyncError: a reply is malformed, or (async) its values hold a NaN or inf; nothing
                is written.
        """
        return self._gather_state(self.mode == "async")

    def checkpoint_state(self) -> StateDict:
        """:meth:`state_dict` with the parameters made current, for the chief's checkpoint.

        In async mode one ``get_state`` with values does both: it carries every block's values,
        so a pull before it (``refresh_parameters``) would move the whole model a second time.
        Each shard's counts are read first, as a pull reads them: a refresh after the checkpoint
        (a stop's) pulls only where a shard moved since. Sync mode as every strategy.
        """
        if self.mode != "async":
            return super().checkpoint_state()
        stamps = self._stamps("get_state")  # a silent shard is not named as asked for a pull
        state = self._gather_state(True, finite=False)  # the checkpoint checks, naming its step
        self._lagging, self._stamps_at_pull = False, stamps
        return state

    def _gather_state(self, with_values: bool, finite: bool = True) -> StateDict:
        """:meth:`state_dict`, the values of its moment written into the parameters or not;
        ``finite``: those values checked finite first (a checkpoint's are by the checkpoint)."""
        state = {p.name: self.optimizer.init_state(to_host(p.value)) for p in self.params}
        # a dense parameter's blocks' (start, count)s: they may differ (module doc)
        dense_counts: dict[tuple[str, str], list[tuple[int, int]]] = {}
        runs = []
        for s in range(len(self._socks)):
            blocks = self.layout.blocks_on(s)
            sizes = self._state_sizes(blocks, with_values)
            runs += [(s, run) for run in self._runs(s, blocks, sizes)]
        head: dict[str, Any] = {"op": "get_state", **({"with_values": True} if with_values else {})}
        asks = [(s, {**head, "blocks": [b.id for b in run]}, ()) for s, run in runs]
        sizes = [sum(self._state_sizes(run, with_values)) for _, run in runs]  # time on the link
        # stoppable: a shard answers get_state at once, so one silent past a stop's patience is
        # gone, as for a pull (the checkpoint is given up; the one before stays the newest)
        replies = self._ask_all(asks, "get_state", stoppable=True, link_bytes=sizes)
        # every reply is checked before any is used: one refused after another shard's values
        # were written left the parameters half of another moment
        parts = [
            self._state_part(s, run, h, arrays, with_values)
            for (s, run), (h, arrays) in zip(runs, replies)
        ]
        if with_values:
            written = [(run, v, h) for (_, run), (h, _), (_, v) in zip(runs, replies, parts)]
            self._write_all(written, finite=finite)
        for (_, run), (h, _), (ours, _) in zip(runs, replies, parts):
            it = iter(ours)
            for b in run:
                spec = self._specs[b.param]
                for key in h["keys"]:
                    shaped = key in self.optimizer.buffers
                    value = next(it)
                    _gather_block(state[spec.name], spec, b, key, value, shaped)
                    if not (shaped or spec.sparse):
                        dense_counts.setdefault((spec.name, key), []).append((b.start, int(value)))
        for (name, key), counts in dense_counts.items():
            kept = count_runs(counts)
            # sync mode: only after a resume from an async checkpoint whose blocks differed
            if self.mode == "async" or len(kept) > 1:
                state[name][key + RUNS] = kept
        return state

    def _state_part(
        self, shard: int, run: Sequence[Block], reply: dict[str, Any], arrays: list, values: bool
    ) -> tuple[list, list]:
        """A ``get_state`` reply's arrays as its blocks' state (each key of each block, of its
        shape and dtype) and the values after it, if asked for (checked when written).

        Raises:
            SyncError: naming ``shard``: keys other than the optimizer's, or too few arrays, or
                one of another shape or dtype; or no values where they were asked for.
        """
        if values and "versions" not in reply:  # a shard that ignores the field
            raise self._malformed(shard, _WITHOUT_VALUES)
        keys, n = reply.get("keys"), 0
        dtype = np.dtype(self._specs[run[0].param].dtype) if run else np.float32
        zero = self.optimizer.init_state(np.zeros((), dtype))  # each key's dtype and kind
        if keys != sorted(zero):
            raise self._malformed(
                shard, f"state keys {keys!r:.80}, the optimizer keeps {sorted(zero)}"
            )
        for b in run:
            spec = self._specs[b.param]
            for key in keys:
                shaped = key in self.optimizer.buffers
                want = (
                    (b.stop - b.start, spec.row_len) if shaped else (),
                    np.dtype(spec.dtype) if shaped else zero[key].dtype,
                )
                got = arrays[n] if n < len(arrays) else None
                if got is None or (got.shape, got.dtype) != want:
                    said = "none" if got is None else f"{got.dtype}{list(got.shape)}"
                    raise self._malformed(
                        shard,
                        f"state {key!r} of block {b.id}: {said}, expected {want[1]}{list(want[0])}",
                    )
                n += 1
        return arrays[:n], arrays[n:]

    def _check_state_fits(self) -> None:
        """Say at setup, not at the first checkpoint, when a shard's cap cannot carry a block's
        optimizer state: ``get_state`` (a checkpoint) and ``set_state`` (a resume) move each
        block's state in one message, twice or more its gradient's bytes (Adam's two moments),
        which the frame and push checks before let through, so a job trained an epoch and then
        stopped at its checkpoint.

        In async mode a checkpoint's ``get_state`` carries the block's values too, counted and
        said so; a sync job's message counts and names the state alone.

        Raises:
            SyncError: naming the block, its state's bytes and the shard's cap.
        """
        with_values = self.mode == "async"
        values = (
            ", with its values (an async checkpoint reads both at once)," if with_values else ""
        )
        for s in range(len(self._socks)):
            blocks = self.layout.blocks_on(s)
            for b, n in zip(blocks, self._state_sizes(blocks, with_values)):
                if n > self._caps[s]:
                    name = self.params[b.param].name
                    raise SyncError(
                        f"rank {self.rank}: the {type(self.optimizer).__name__} state of block "
                        f"{b.id} of {name}{values} is {n} bytes, more than the "
                        f"{self._caps[s]} of --max-message-bytes of pserver {self.endpoints[s]}"
                        ", which a checkpoint or a resume moves in one message: raise that "
                        "bound, or give PServerSync a smaller block_bytes"
                    )

    def _state_sizes(self, blocks: Sequence[Block], with_values: bool = False) -> list[int]:
        """The bytes of each block's optimizer state in a ``get_state`` reply, and of its
        values where the reply carries them too (async mode)."""
        sizes = []
        for b in blocks:
            spec = self._specs[b.param]
            # a block is rows x row_len (a sparse table's rows are whole rows of the table)
            template = self.optimizer.init_state(
                np.zeros((b.stop - b.start, spec.row_len), np.dtype(spec.dtype))
            )
            state = sum(int(np.asarray(v).nbytes) for v in template.values())
            sizes.append(state + (b.nbytes if with_values else 0))
        return sizes

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Rank 0 sends ``state`` to the shards (the others have nothing to do), each array in
        the dtype the shards keep (as a local optimizer copies it into its buffers).

        A parameter ``state`` has no entry for (one frozen when the checkpoint was written,
        trained now) keeps the fresh state the seed gave it, as with the other syncs.

        Raises:
            ValueError: ``state`` names a parameter or key that is not this setup's, or gives
                one of another shape (as :class:`~distconv.sync.local.LocalSync` refuses them:
                a moment of a ``(3, 2)`` parameter went to a ``(2, 3)`` one, its rows cut
                differently, without a word), a parameter's entry lacks one of the optimizer's
                keys (a stateful optimizer needs them all), a sparse parameter's rows disagree
                on a scalar within one block (the checkpoint was cut into other blocks), a
                per-row array has the wrong shape, a count (a scalar key such as ``step``, or
                a per-row one) holds what is no count (a whole number from 0 to int64's
                largest), or a dense parameter's runs of counts (``K + RUNS``) are not of
                their form. Nothing is sent then.
        """
        if not self.is_chief:
            return
        fresh = self._fresh_state()
        problems = state_problems(fresh, state) or count_problems(state)
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: {'; '.join(problems)}")
        keys = set(self.optimizer.init_state(np.zeros(1)))
        if not keys:
            return  # a stateless optimizer (plain SGD): the shards hold nothing to restore
        for p in self.params:
            if p.name not in state:
                continue
            missing = sorted(keys - set(state[p.name]))
            if missing:
                raise ValueError(
                    f"optimizer state to restore lacks {missing[0]!r} of parameter {p.name} "
                    f"({self.optimizer} keeps {sorted(keys)} for every parameter)"
                )
        asks = []
        for s in range(len(self._socks)):
            blocks = [b for b in self.layout.blocks_on(s) if self._specs[b.param].name in state]
            keys = _shard_keys(state[self._specs[blocks[0].param].name]) if blocks else []
            arrays = [
                [
                    _block_state(
                        state[self._specs[b.param].name],
                        self._specs[b.param],
                        b,
                        key,
                        key in self.optimizer.buffers,
                        fresh[self._specs[b.param].name][key].dtype,
                    )
                    for key in keys
                ]
                for b in blocks
            ]
            sizes = [sum(a.nbytes for a in per_block) for per_block in arrays]
            for run in self._runs(s, list(zip(blocks, arrays)), sizes):
                head = {"op": "set_state", "blocks": [b.id for b, _ in run], "keys": keys}
                asks.append((s, head, [a for _, per_block in run for a in per_block]))
        self._ask_all(asks, "set_state")

    def _fresh_state(self) -> dict[str, dict[str, np.ndarray]]:
        """Per parameter, what the shards keep of it: each key's shape and dtype, as read-only
        views of one zero (no memory of the parameter's size)."""
        fresh = {}
        for i, p in enumerate(self.params):  # (none before setup, nor any _specs)
            zero = self.optimizer.init_state(np.zeros((), np.dtype(self._specs[i].dtype)))
            fresh[p.name] = {
                k: np.broadcast_to(v, p.shape) if k in self.optimizer.buffers else v
                for k, v in zero.items()
            }
        return fresh

    def save_remote_parts(self, step: int, keep: int | None = None) -> dict[str, str]:
        """Ask every shard to write its part of checkpoint ``step``; part name -> path, of the
        parts written.

        A shard whose disk could not take its part (full, a quota, a file in the way) says so
        in its reply (``unwritten``): a warning here, naming the shard and its line, once per
        kind of failure in each setup (each fit) and once when it writes a part again
        (:mod:`~distconv.sync.ps.part_failures`), and the part is left out, while the chief's
        own checkpoint is written and training goes on, since parts are never read back
        (:mod:`~distconv.sync.ps.parts`).

        Args:
            step: the checkpoint's step.
            keep: the chief's number of kept checkpoints: each shard then deletes its parts
                but those of its ``keep`` newest steps up to ``step`` (None: the shard's own
                ``--keep-parts``).

        Raises:
            SyncError: a shard refused the request, or its reply holds neither the path it
                wrote nor why it wrote none (each a string), naming the shard.
        """
        writers = self._part_writers
        head: dict[str, Any] = {"op": "checkpoint", "step": int(step)}
        if keep is not None:
            head["keep"] = int(keep)
        asks = [(s, head, ()) for s in writers]
        replies = [h for h, _ in self._ask_all(asks, f"checkpoint {step}")] if asks else []
        for s, h in zip(writers, replies):  # all checked before any is warned of
            if not (_a_line(h.get("path")) or _a_line(h.get("unwritten"))):
                # listed as a part, read by the resume: a number there failed only then
                raise self._malformed(
                    s, "checkpoint reply without the path (a string) it wrote, nor why it "
                    "wrote none (unwritten, a string)"
                )  # fmt: skip
        written = {s: h["path"] for s, h in zip(writers, replies) if _a_line(h.get("path"))}
        failures = failures_of(self.__dict__, self._setups)
        for s, h in zip(writers, replies):
            said = f"rank {self.rank}, checkpoint {step}: pserver shard {self._named([s])}"
            failures.heard(s, None if s in written else h["unwritten"], step, said)
        return {f"pserver-shard{s}": path for s, path in written.items()}

    def shard_stats(self) -> list[dict[str, Any]]:
        """Each shard's counters, shard 0 first, as its ``stats`` reply carries them: pushes,
        updates, bytes in/out, update seconds, errors and, in async mode, what the staleness
        rule did (``drops`` per parameter, ``push_messages_applied`` and
        ``push_messages_dropped`` per push message, ``updates_by_staleness``: the updates
        applied at each staleness). Each shard counts its own, since it started
        (docs/protocol.md, "Stats").

        Raises:
            SyncError: naming the shard, a reply without its counters (a map).
        """
        asks = [(s, {"op": "stats"}, ()) for s in range(len(self._socks))]
        replies = self._ask_all(asks, "stats")
        for s, (h, _) in enumerate(replies):  # a KeyError here named no shard
            if not isinstance(h.get("stats"), dict):
                raise self._malformed(s, "stats reply without its counters (a map)")
        return [h["stats"] for h, _ in replies]


def _a_line(field: Any) -> bool:
    """Whether a reply's ``field`` is a string with something in it."""
    return isinstance(field, str) and bool(field)


def _gather_block(
    state: dict[str, Any],
    spec: ParamSpec,
    block: Block,
    key: str,
    value: np.ndarray,
    shaped: bool,
) -> None:
    """Write one block's ``key`` into ``state``: a slice of rows when ``shaped`` (a buffer
    shaped like the parameter), else a per-block scalar, the largest in ``key`` and, for a
    sparse parameter, each row's in ``key + PER_ROW`` (a dense one's runs are the caller's).
    Not told by ``state[key].ndim``: a 0-d parameter's moments are 0-d too, and would be saved
    as the largest of them and 0."""
    target = state[key]
    if shaped:
        rows_view(target, spec)[block.start : block.stop] = value
        return
    if spec.sparse:
        counts = state.setdefault(key + PER_ROW, np.zeros(spec.rows, dtype=value.dtype))
        counts[block.start : block.stop] = value
    target[...] = np.maximum(target, value)


def _shard_keys(state: Mapping[str, Any]) -> list[str]:
    """The keys a shard keeps: the optimizer's, without the per-row copies."""
    return sorted(k for k in state if not k.endswith(PER_ROW))


def _block_state(
    state: Mapping[str, Any],
    spec: ParamSpec,
    block: Block,
    key: str,
    shaped: bool,
    dtype: np.dtype,
) -> np.ndarray:
    """One block's ``key``, C-contiguous and of ``dtype`` (the shards'), as ``set_state`` sends
    it: a ``(rows, row_len)`` slice when ``shaped`` (a 0-d parameter's moment too), else a
    per-block scalar, the count :func:`~distconv.sync.ps.row_counts.block_count` gives it.
    """
    if shaped:
        a = np.asarray(to_host(state[key]))
        return np.array(rows_view(a, spec)[block.start : block.stop], dtype, order="C")
    return np.array(block_count(state, spec, block, key), dtype=dtype)
