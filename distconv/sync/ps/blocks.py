"""Cutting parameters into blocks and spreading the blocks over the shards.

The rule (``docs/protocol.md`` repeats it for other clients):

1. Each parameter is seen as a matrix of rows: a dense parameter as its flattened elements (one
   element per row), a sparse one as ``shape[0]`` rows of ``prod(shape[1:])`` elements, so a
   sparse block always holds whole rows.
2. A parameter is cut into ``n = ceil(rows / max(1, block_bytes // row_bytes))`` blocks of
   consecutive rows, block ``k`` holding rows ``[rows*k//n, rows*(k+1)//n)`` (none for a
   parameter of no rows). Block ids count up over the parameters in their given order, then
   over the blocks of each.
3. Blocks are dealt out largest first (ties: smaller id first), each to the shard holding the
   fewest bytes so far (ties: smaller shard index). So the shards' loads differ by at most one
   block, and a parameter larger than a block spans several shards.

Every worker computes the same table from the same parameters, ``block_bytes`` and shard count;
worker 0 also sends each shard its part of the table when it seeds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: default block size: small enough to balance ~100 parameters over a few shards
BLOCK_BYTES = 1 << 20


@dataclass(frozen=True)
class ParamSpec:
    """What the servers know of a parameter: name, shape, dtype, and whether it is sparse."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    sparse: bool = False

    @property
    def rows(self) -> int:
        return self.shape[0] if self.sparse else math.prod(self.shape)

    @property
    def row_len(self) -> int:
        return math.prod(self.shape[1:]) if self.sparse else 1

    @property
    def row_bytes(self) -> int:
        return self.row_len * np.dtype(self.dtype).itemsize

    def to_wire(self) -> list:
        return [self.name, list(self.shape), self.dtype, self.sparse]


@dataclass(frozen=True)
class Block:
    """Rows ``[start, stop)`` of parameter ``param`` (an index into the parameter list)."""

    id: int
    param: int
    start: int
    stop: int
    nbytes: int

    def to_wire(self) -> list[int]:
        return [self.id, self.param, self.start, self.stop]


class Layout:
    """The block table of a job and the shard of every block.

    Args:
        params: the parameters, in the network's order.
        num_shards: how many shards share the blocks.
        block_bytes: the largest block, in bytes (a row bigger than this is one block).

    Attributes:
        blocks: every block, by id.
        shard_of: the shard of each block, by id.
    """

    def __init__(self, params: Sequence[ParamSpec], num_shards: int, block_bytes: int) -> None:
        if num_shards < 1:
            raise ValueError(f"num_shards must be >= 1, got {num_shards}")
        if block_bytes < 1:
            raise ValueError(f"block_bytes must be >= 1, got {block_bytes}")
        self.params = list(params)
        self.num_shards = num_shards
        self.blocks = cut_blocks(self.params, block_bytes)
        self.shard_of = assign_shards(self.blocks, num_shards)
        # each parameter's blocks: a worker's setup asks for them parameter by parameter, and
        # a scan of the whole table each time made it quadratic (25,000 parameters: 30 s)
        self._of_param: list[list[Block]] = [[] for _ in self.params]
        for b in self.blocks:
            self._of_param[b.param].append(b)

    def blocks_on(self, shard: int, param: int | None = None) -> list[Block]:
        """The blocks held by ``shard`` (of one parameter, if given), in id order."""
        blocks = self.blocks if param is None else self._of_param[param]
        return [b for b in blocks if self.shard_of[b.id] == shard]

    def idle_problem(self, endpoints: Sequence[str]) -> str | None:
        """Why the job cannot be seeded where a shard gets no block (a small model on many
        shards: each shard needs one), naming them; None where every shard gets some."""
        used = set(self.shard_of)
        idle = [endpoints[s] for s in range(self.num_shards) if s not in used]
        if not idle:
            return None
        blocks = len(self.blocks)
        # one block is common: a small model (a tied table) tried on a few shards
        cut, most = ("block leaves", "shard") if blocks == 1 else ("blocks leave", "shards")
        return (
            f"the model's {blocks} {cut} {len(idle)} of the {self.num_shards} pservers "
            f"without one ({', '.join(idle)}), and a pserver holds at least one: run at "
            f"most {blocks} {most}"
        )

    def blocks_of(self, param: int) -> list[Block]:
        """All blocks of parameter ``param``, whatever their shards, in id order."""
        return list(self._of_param[param])

    def shard_bytes(self) -> list[int]:
        """The bytes each shard holds."""
        load = [0] * self.num_shards
        for b in self.blocks:
            load[self.shard_of[b.id]] += b.nbytes
        return load


def rows_bytes(count: int, row_bytes: int) -> int:
    """The array bytes of ``count`` rows of ``row_bytes`` each with their ids (int64), as a
    sparse pull's reply or push carries them and a shard counts them against its cap."""
    return count * (8 + row_bytes)


def cut_blocks(params: Sequence[ParamSpec], block_bytes: int) -> list[Block]:
    """Rule 1 and 2: consecutive row ranges, ids in parameter order."""
    blocks: list[Block] = []
    for index, spec in enumerate(params):
        rows_per_block = max(1, block_bytes // max(spec.row_bytes, 1))
        n = math.ceil(spec.rows / rows_per_block)  # none for a parameter of no elements
        for k in range(n):
            start, stop = spec.rows * k // n, spec.rows * (k + 1) // n
            nbytes = (stop - start) * spec.row_bytes
            blocks.append(Block(len(blocks), index, start, stop, nbytes))
    return blocks


def assign_shards(blocks: Sequence[Block], num_shards: int) -> list[int]:
    """Rule 3: largest block first to the least-loaded shard; ties by id, then shard index."""
    load = [0] * num_shards
    shard_of = [0] * len(blocks)
    for b in sorted(blocks, key=lambda b: (-b.nbytes, b.id)):
        shard = min(range(num_shards), key=lambda s: (load[s], s))
        shard_of[b.id] = shard
        load[shard] += b.nbytes
    return shard_of


def rows_view(array: np.ndarray, spec: ParamSpec) -> np.ndarray:
    """``array`` (shaped like the parameter) as the (rows, row_len) matrix blocks cut."""
    return array.reshape(spec.rows, spec.row_len)
