"""mpiexec -n 2 python -m mpi4py run_grad_hook.py OUT MODE ...: MPISync's ``grad_hook``.

``clip OVERLAP BUCKET_BYTES MAX_NORM [GRAD_DTYPE]``: the float64 LeNet of the equivalence
tests, each rank half of every global batch, the gradients clipped by their global norm in the
hook (``examples/own_sync.py``'s :func:`clip_by_global_norm`), on a ``GRAD_DTYPE`` wire where
given; ``OUT/rank<r>.npz``: the weights, and under ``_norms`` each step's norm before clipping.

``fired OVERLAP``: three parameters, a bucket each; rank 0 fires ``a`` (3 examples), rank 1
``b`` (4 examples), none ``c``. ``OUT/rank<r>.json``: what the hook got (names, examples,
gradients, values) and the values after the step.

``mixed OVERLAP WIRE``: a float64 parameter beside a float16 one (``WIRE`` ``none``), or beside
a float32 one on a float32 wire (``WIRE`` ``float32``): buckets of sums beside averages, which
setup refuses. Each rank catches setup's error, then tries a step, and writes what each said,
the hook's calls and the values to ``OUT/rank<r>.json``, then closes.

``cast OVERLAP``: two float64 parameters, a step, then every rank casts ``b`` to float16
(buckets of sums beside averages, laid out anew by ``start_step``, no setup between) and tries
a step; then casts it back and takes one. ``OUT/rank<r>.json``: what each step said, the
hook's calls and the values after; then each rank closes.

``hooks KIND``: each rank its own hook: ``object``, the example's ``ClipHook`` with a
``max_norm`` of 1 + rank; ``closure``, a clip closing over 1 + rank; ``function``, another
lambda on each rank; ``same``, one clip on both, closing over a list and the rank under a
private name; ``delegating``, one clip on both whose ``__getattr__`` reads its settings from a
dict of its own (a name it lacks: ``KeyError``); ``partial``, a ``functools.partial`` of one
clip binding the rank under a private keyword; ``method``, an ``MPISync`` of one's own whose
hook is a method of its own (the sync, whose ``rank`` is public, its object); ``failing``, a
hook whose ``describe()`` raises on rank 1. Each rank catches setup's error, else takes a
step (``same``'s, ``delegating``'s, ``partial``'s and ``method``'s hooks clipping every
gradient to 1e-3), and writes what setup said and the values to ``OUT/rank<r>.json``.

``raise HOW``: step 0 as ``fired``'s, then in step 1 the hook raises on rank 1 alone. Rank 1
writes its values after the failure to ``OUT/values1.json``, rank 0 its after step 1 to
``OUT/values0.json``, then each runs a step 2. ``HOW`` ``uncaught``: the error goes up out of
the script; ``closed``: each rank catches its error, writes it to ``OUT/rank<r>.err``, then
closes its sync.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    bucket_params,
    bucket_sync,
    fire,
    recorded,
    small_lenet,
    train,
    weights,
)

from distconv.optim import create_optimizer  # noqa: E402
from distconv.parameter import Parameter  # noqa: E402
from distconv.sync.base import SyncError  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_sync.py"
_spec = importlib.util.spec_from_file_location("own_sync", _EXAMPLE)
_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_example)
clip_by_global_norm = _example.clip_by_global_norm


def clip(
    out: Path, overlap: bool, bucket_bytes: int, max_norm: float, wire: str | None = None
) -> None:
    norms: list[float] = []

    def hook(params: list[Parameter], examples: int) -> None:
        norms.append(clip_by_global_norm(params, examples, max_norm))

    sync = MPISync(
        create_optimizer("momentum"),
        overlap=overlap,
        bucket_bytes=bucket_bytes,
        grad_dtype=wire,
        grad_hook=hook,
    )
    net = small_lenet(0)
    sync.setup(net.parameters(), {})
    with recorded(sync, out):
        assert sync.overlap is overlap
        train(net, sync, sync.rank, sync.world_size)
        buckets = len(sync.buckets)
    np.savez(out / f"rank{sync.rank}.npz", _norms=norms, _buckets=buckets, **weights(net))


def fired(out: Path, overlap: bool) -> None:
    calls: list[dict] = []

    def hook(params: list[Parameter], examples: int) -> None:
        calls.append(
            {
                "names": [p.name for p in params],
                "examples": examples,
                "grads": {p.name: p.grad.tolist() for p in params},
                "values": {p.name: p.value.tolist() for p in params},
            }
        )

    sync = bucket_sync(overlap=overlap, grad_hook=hook)
    params = bucket_params("abc")
    sync.setup(params, {})
    with recorded(sync, out):
        sync.start_step(3 + sync.rank)
        fire(sync, params[sync.rank], sync.rank + 1.0)  # a on rank 0, b on rank 1
        sync.finish_step()
    after = {p.name: p.value.tolist() for p in params}
    (out / f"rank{sync.rank}.json").write_text(json.dumps({"calls": calls, "after": after}))


def mixed(out: Path, overlap: bool, wire: str) -> None:
    calls: list[int] = []
    grad_dtype = None if wire == "none" else wire
    sync = bucket_sync(
        overlap=overlap, grad_dtype=grad_dtype, grad_hook=lambda _, n: calls.append(n)
    )
    other = np.float16 if grad_dtype is None else np.float32
    params = [Parameter("a", np.arange(3.0)), Parameter("b", np.arange(3, dtype=other))]
    said: dict[str, str] = {}
    try:
        try:
            sync.setup(params, {})
        except SyncError as exc:
            said["setup"] = f"{type(exc).__name__}: {exc}"
        try:  # refused where setup was; else a step, whose finish_step refused it before
            sync.start_step(1)
            for p in reversed(params):
                fire(sync, p, 1.0)
            sync.finish_step()
        except SyncError as exc:
            said["step"] = f"{type(exc).__name__}: {exc}"
        after = {p.name: p.value.tolist() for p in params}
        record = {"said": said, "calls": calls, "after": after}
        (out / f"rank{sync.rank}.json").write_text(json.dumps(record))
    finally:
        sync.close()


def cast(out: Path, overlap: bool) -> None:
    calls: list[int] = []
    sync = bucket_sync(overlap=overlap, grad_hook=lambda _, n: calls.append(n))
    params = bucket_params("ab")
    said: dict[str, str] = {}

    def step(name: str) -> None:
        try:
            sync.start_step(1)
            for p in reversed(params):
                fire(sync, p, 1.0)
            sync.finish_step()
            said[name] = "done"
        except SyncError as exc:
            said[name] = f"{type(exc).__name__}: {exc}"

    sync.setup(params, {})
    try:
        step("first")
        params[1].cast(np.float16)
        step("cast")
        params[1].cast(np.float64)
        step("back")
        after = {p.name: p.value.tolist() for p in params}
        record = {"said": said, "calls": calls, "after": after}
        (out / f"rank{sync.rank}.json").write_text(json.dumps(record))
    finally:
        sync.close()


def _clip_to(max_norm: float):
    def hook(params: list[Parameter], examples: int) -> None:
        clip_by_global_norm(params, examples, max_norm)

    return hook


class _Failing:
    """A hook whose ``describe()`` raises on rank ``failing``."""

    def __init__(self, rank: int, failing: int) -> None:
        self._rank, self._failing = rank, failing

    def describe(self) -> dict:
        if self._rank == self._failing:
            raise ValueError(f"describe fails on rank {self._rank}")
        return {}

    def __call__(self, params: list[Parameter], examples: int) -> None:
        pass


class _Delegating:
    """A clip whose settings are read from a dict of its own by ``__getattr__``, which raises
    ``KeyError`` for a name the dict lacks (``describe`` among them)."""

    def __init__(self, **settings: float) -> None:
        self._settings = settings

    def __getattr__(self, name: str) -> float:
        return self._settings[name]

    def __call__(self, params: list[Parameter], examples: int) -> None:
        clip_by_global_norm(params, examples, self.max_norm)


def _clip_on(params: list[Parameter], examples: int, max_norm: float, _rank: int) -> None:
    """A clip told the rank it runs on (to log on one alone, say), as ``_rank``."""
    clip_by_global_norm(params, examples, max_norm)


class _ClipSync(MPISync):
    """An ``MPISync`` of one's own that clips by ``max_norm`` in a method of its own, its hook
    (as :func:`~tests.mpi.common.bucket_sync` makes one otherwise)."""

    def __init__(self, max_norm: float) -> None:
        self.max_norm = max_norm
        super().__init__(create_optimizer("sgd", lr=0.5), bucket_bytes=24, grad_hook=self.clip)

    def clip(self, params: list[Parameter], examples: int) -> None:
        clip_by_global_norm(params, examples, self.max_norm)


def _hook_of(kind: str, rank: int):
    """The hook of ``hooks KIND`` on ``rank``."""
    if kind == "object":
        return _example.ClipHook(1.0 + rank)
    if kind == "closure":
        return _clip_to(1.0 + rank)
    if kind == "failing":
        return _Failing(rank, 1)
    if kind == "delegating":
        return _Delegating(max_norm=1e-3)
    if kind == "partial":
        return functools.partial(_clip_on, max_norm=1e-3, _rank=rank)
    if kind == "function":
        first = lambda params, examples: None  # noqa: E731 - two functions alike but for the line
        second = lambda params, examples: None  # noqa: E731
        return first if rank == 0 else second
    seen: list[int] = []  # changes with use: by its type's name
    _rank, max_norm = rank, 1e-3  # the rank is the rank's own: a private name

    def clip(params: list[Parameter], examples: int) -> None:
        seen.append(_rank)
        clip_by_global_norm(params, examples, max_norm)

    return clip


def hooks(out: Path, kind: str) -> None:
    from mpi4py import MPI

    if kind == "method":
        sync = _ClipSync(1e-3)
    else:
        sync = bucket_sync(grad_hook=_hook_of(kind, MPI.COMM_WORLD.Get_rank()))
    params = bucket_params("ab")
    said: dict[str, str] = {}
    try:
        try:
            sync.setup(params, {})
        except Exception as exc:  # noqa: BLE001 - the test reads it
            said["setup"] = f"{type(exc).__name__}: {exc}"
        else:
            sync.start_step(1)
            for p in reversed(params):
                fire(sync, p, 1.0 + sync.rank)
            sync.finish_step()
        after = {p.name: p.value.tolist() for p in params}
        (out / f"rank{sync.rank}.json").write_text(json.dumps({"said": said, "after": after}))
    finally:
        sync.close()


def failing(out: Path, how: str) -> None:
    def hook(params: list[Parameter], examples: int) -> None:
        if sync.rank == 1 and sync.step == 1:
            raise FloatingPointError("the hook fails on rank 1")

    sync = bucket_sync(grad_hook=hook, timeout=120)  # not the watchdog that ends the job
    params = bucket_params("ab")
    sync.setup(params, {})

    def step() -> None:
        sync.start_step(1)
        for p in reversed(params):
            fire(sync, p, 1.0)
        sync.finish_step()

    def steps() -> None:
        step()
        try:
            step()
        finally:
            values = {p.name: p.value.tolist() for p in params}
            (out / f"values{sync.rank}.json").write_text(json.dumps(values))
        step()

    if how == "uncaught":
        steps()
        return
    try:  # caught, closed after the except clause: close leaves (no error propagating)
        steps()
    except Exception as exc:  # noqa: BLE001 - the test reads it
        (out / f"rank{sync.rank}.err").write_text(f"{type(exc).__name__}: {exc}")
    sync.close()


def main() -> None:
    out, mode, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if mode == "clip":
        clip(out, args[0] == "1", int(args[1]), float(args[2]), *args[3:])
    elif mode == "fired":
        fired(out, args[0] == "1")
    elif mode == "mixed":
        mixed(out, args[0] == "1", args[1])
    elif mode == "cast":
        cast(out, args[0] == "1")
    elif mode == "hooks":
        hooks(out, args[0])
    else:
        failing(out, args[0])


if __name__ == "__main__":
    main()
