"""The learning rate every rank of a synchronous step trains at, and the refusal where the ranks'
rates differ.

A synchronous step sums every rank's gradients and applies that one sum: under MPI on every
rank, with its own optimizer; on a parameter server once, on the shards. Each rank sets its own
rate (``set_lr_scale``: ``base_lr * factor``), so a schedule that reads a rank-local value (the
rank, this rank's own loss or examples) gives the ranks different rates: MPI ranks then apply
the same sum at different rates and hold different models from that step on, and a shard
applied one rank's rate to all. So the ranks compare their rates at every step, bit for bit.

Exact equality refuses no honest job: every rank computes ``base_lr * factor`` alike (the same
float64 operations on the same operands: the job check compares ``base_lr`` and the Trainer's
``lr_decay`` at each fit's setup, and ``lr_decay ** epoch`` of the same epoch is the same libm
``pow``), so rates that differ at all differ because the ranks set different factors, or
different base rates (``optimizer.set_base_lr``) inside a fit, where no job check compares them
(between fits, the next setup's job check refuses that first, naming ``optimizer.lr``).
"""

from __future__ import annotations

import struct

#: the way out every refusal of differing rates names
SAME_FACTOR = (
    "every rank must set the same lr factor (set_lr_scale) at every step, and change the rate "
    "alike (optimizer.set_base_lr, on every rank, outside a step): a schedule must not "
    "read rank-local values (the rank, its own loss or examples); compute it from what every "
    "rank shares (the step, the epoch, a loss summed over the ranks)"
)

#: the way out of ranks whose next fit's jobs differ in their rates: the shards' refusal of a
#: hello (a setup's first moved the rate) and every job check's (MPI's, the workers')
SAME_NEW_RATE = (
    "a rate changed between fits is changed on every rank alike "
    "(optimizer.set_base_lr with the same lr on each)"
)
#: the way out of ranks whose first setup's hellos differ in their rates alone: the ranks were
#: started with different flags (nothing was seeded yet, so no fit before moved a rate)
SAME_START_RATE = (
    "start every rank with the same --lr (distconv train's flags; a script of your own makes "
    "every rank's optimizer at the same lr)"
)
#: the way out of a job check (MPI's, the workers') that finds the ranks' rates differ: a
#: first fit's too, whose ranks made their optimizers at different rates (two notebooks)
SAME_RATE = f"every rank's optimizer is made at the same lr, and {SAME_NEW_RATE}"


def rate_bits(lr: float) -> int:
    """``lr`` as its float64 bits, a signed int64 (what an MPI exchange of int64 carries)."""
    return struct.unpack("<q", struct.pack("<d", lr))[0]


def rate_of(bits: int) -> float:
    """The float64 whose bits are ``bits`` (:func:`rate_bits`' inverse)."""
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def rates_differ(step: int, ours: tuple[int, float], theirs: tuple[int, float]) -> str:
    """The refusal of ``step``, at which rank ``ours[0]`` trains at rate ``ours[1]`` and rank
    ``theirs[0]`` at ``theirs[1]``: both ranks and both rates (``repr``: two rates that differ
    in their last bit print differently), and the way out."""
    (rank, lr), (other, other_lr) = ours, theirs
    return (
        f"step {step}: rank {rank} trains at lr {lr!r} and rank {other} at lr {other_lr!r}: "
        f"the ranks' learning rates differ; {SAME_FACTOR}"
    )


def first_other_rate(rates: dict[int, float], rank: int) -> int | None:
    """The lowest rank of ``rates`` (rank -> lr) whose rate is not bitwise ``rank``'s, or None."""
    ours = rate_bits(rates[rank])
    return next((r for r in sorted(rates) if rate_bits(rates[r]) != ours), None)
