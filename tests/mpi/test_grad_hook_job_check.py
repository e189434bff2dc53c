"""Setup's job check compares MPISync's ``grad_hook`` (:func:`~distconv.sync.mpi.hook.
hook_description`): on a real ``mpiexec -n 2`` (``run_grad_hook.py hooks``) ranks given
different hooks are refused alike, naming what differs, and ranks running one script with
one configuration train; here, what the description tells apart and what it leaves alone."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.errors import HOOK_ADVICE
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.hook import hook_description
from tests.mpi.common import NEEDS_MPIEXEC, bucket_params, bucket_sync, run_two_ranks

#: where the ranks' hooks differ (``hooks KIND``): the key, and rank 0's and rank 1's values
DIFFERENT = {"object": ("settings.max_norm", 1.0, 2.0), "closure": ("closure.max_norm", 1.0, 2.0)}


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("kind", ["object", "closure", "function"])
def test_ranks_given_different_hooks_are_refused_at_setup_naming_the_difference(tmp_path, kind):
    """The example's ClipHook with another max_norm on each rank, a clip closing over another
    number, another lambda: each passed the job check (the hook was not in it), and each rank
    clipped by its own norm. Now every rank's setup refuses the job alike, naming the
    setting and the other rank, and where a value the hook holds differs, how to keep one
    meant to differ by rank out of the check (not for two functions: there is no value to
    keep out); nothing moves, and close leaves the job (exit 0)."""
    run_two_ranks("run_grad_hook.py", tmp_path, "hooks", kind)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    said = [r["said"].get("setup", "") for r in records]
    # how to go on, where a value the hook holds was meant to differ by rank; not where the
    # hooks are two functions: no value of theirs to keep out of the check
    advice = HOOK_ADVICE
    if kind == "function":  # the two lambdas' lines, one after the other
        line = int(said[0].rsplit("grad_hook.line: ", 1)[1].split()[0])
        key, *values = "line", line, line + 1
        advice = ""
    else:
        key, *values = DIFFERENT[kind]
        assert "under a private name, _rank = rank" in HOOK_ADVICE  # the advice has words
    for rank, other in ((0, 1), (1, 0)):
        assert said[rank] == (
            f"JobMismatch: rank {rank} and rank {other} run different jobs: "
            f"config.sync.grad_hook.{key}: {values[rank]} here, {values[other]} there{advice}"
        )
        assert records[rank]["after"] == {"a": [0.0, 1.0, 2.0], "b": [1.0, 2.0, 3.0]}


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("kind", ["same", "delegating", "partial", "method"])
def test_ranks_running_one_script_with_one_configuration_agree(tmp_path, kind):
    """One clip closing over a list the hook appends to and the rank under a private name, one
    object whose ``__getattr__`` answers from a dict of its own (``KeyError`` for
    ``describe``, which every rank's setup raised, bare), a partial binding the rank under
    a private keyword (compared, it was refused), or a method of an MPISync of one's own (its
    public ``rank``, compared, refused it): both ranks pass the check and take
    the same clipped step (the sums 3 over 2 examples, their mean's norm 3 * sqrt(6) / 2 cut
    to 1e-3, SGD at lr 0.5)."""
    run_two_ranks("run_grad_hook.py", tmp_path, "hooks", kind)
    moved = 0.5 * 1e-3 / np.sqrt(6.0)
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record["said"] == {}
        np.testing.assert_allclose(record["after"]["a"], np.arange(3.0) - moved, rtol=1e-12)
        np.testing.assert_allclose(record["after"]["b"], np.arange(3.0) + 1 - moved, rtol=1e-12)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_a_describe_raising_on_one_rank_fails_its_setup_and_the_other_is_told(tmp_path):
    """Raised inside setup's guard: rank 1 raises its error, rank 0's job check names it (it
    did not wait in the check until the watchdog's timeout), and both close cleanly."""
    run_two_ranks("run_grad_hook.py", tmp_path, "hooks", "failing")
    said = [json.loads((tmp_path / f"rank{r}.json").read_text())["said"] for r in (0, 1)]
    assert said[1] == {"setup": "ValueError: describe fails on rank 1"}
    assert said[0] == {
        "setup": "JobMismatch: rank 1 could not set up: ValueError: describe fails on rank 1"
    }


def _clip_to(max_norm: float, names: tuple = ("a",), _rank: int = 0):
    seen: list[float] = []
    calls = 0

    def hook(params, examples, scale=1.0):
        nonlocal calls
        calls += 1
        seen.append((names, max_norm * scale))

    return hook


class _Clip:
    def __init__(self, max_norm: float, rank: int = 0) -> None:
        self.max_norm, self.norms, self._rank, self._last = max_norm, [], rank, 0.0

    def __call__(self, params, examples) -> None:
        self._last = float(self.max_norm)
        self.norms.append(self._last)


class _Described(_Clip):
    def describe(self) -> dict:
        return {"max_norm": self.max_norm}


def _apart(a, b) -> bool:
    return hook_description(a) != hook_description(b)


def test_the_description_tells_apart_what_a_user_means_and_leaves_alone_what_differs_by_use():
    """Another number in a closure, a default, a partial or an object's settings differs;
    a copy made alike agrees, after use too (a list filled in, a count of calls, a private
    attribute: by kind, or left out); the rank under a private name is left out."""
    assert _apart(_clip_to(1.0), _clip_to(2.0))
    assert _apart(_clip_to(1.0, ("a",)), _clip_to(1.0, ("b",)))
    used = _clip_to(1.0)
    used(None, 1)
    assert not _apart(used, _clip_to(1.0))
    assert not _apart(_clip_to(1.0, _rank=0), _clip_to(1.0, _rank=1))
    assert _apart(_Clip(1.0), _Clip(2.0))
    filled = _Clip(1.0, rank=1)
    filled(None, 1)
    assert not _apart(filled, _Clip(1.0))
    assert _apart(functools.partial(_Clip.__call__, _Clip(1.0)), functools.partial(len))
    assert _apart(functools.partial(_clip_to, 1.0), functools.partial(_clip_to, 2.0))
    assert _apart(functools.partial(_clip_to, 1.0), functools.partial(_clip_to, max_norm=1.0))
    assert _apart(functools.partial(_clip_to, _rank=0), functools.partial(_clip_to, rank=0))
    assert not _apart(functools.partial(_clip_to, _rank=0), functools.partial(_clip_to, _rank=1))
    assert _apart(_Clip(1.0).__call__, _Clip(2.0).__call__)
    assert _apart(_Clip(1.0), _Described(1.0))  # another class
    assert hook_description(_Described(1.0, rank=3)) == {
        "class": "tests.mpi.test_grad_hook_job_check._Described",
        "describe": {"max_norm": 1.0},
    }
    line = _clip_to.__code__.co_firstlineno + 4
    assert hook_description(_clip_to(0.5)) == {
        "function": "tests.mpi.test_grad_hook_job_check._clip_to.<locals>.hook",
        "line": line,
        "defaults": {"scale": 1.0},
        "closure": {"calls": "<int>", "max_norm": 0.5, "names": ["a"], "seen": "<list>"},
    }


class _Failing(_Clip):
    def describe(self) -> dict:
        raise ValueError("describe fails")


def test_a_describe_that_raises_fails_setup_with_its_error():
    """Raised inside setup's guard (on several ranks the others are told, not left waiting in
    the job check); the sync, never set up, closes."""
    sync = bucket_sync(comm=SingleRankComm(), grad_hook=_Failing(1.0))
    try:
        with pytest.raises(ValueError, match="describe fails"):
            sync.setup(bucket_params("ab"), {})
    finally:
        sync.close()


class _Delegating:
    def __init__(self, **settings) -> None:
        self.name, self._settings = "clip", settings

    def __getattr__(self, name: str):
        return self._settings[name]  # KeyError for a name it lacks

    def __call__(self, params, examples) -> None:
        pass


def test_an_object_answering_from_a_dict_of_its_own_is_described_by_its_attributes():
    """Its ``__getattr__`` is not asked for a ``describe`` (a ``KeyError`` from it failed
    every rank's setup, naming nothing): the object, or its method, is described by its class
    and public attributes, as any other."""
    hook = _Delegating(max_norm=1.0)
    expected = {
        "class": "tests.mpi.test_grad_hook_job_check._Delegating",
        "settings": {"name": "clip"},
    }
    assert hook_description(hook) == expected
    assert hook_description(hook.__call__)["self"] == expected


class _OwnSync(MPISync):
    def __init__(self, max_norm: float, **options) -> None:
        self.max_norm = max_norm
        super().__init__(create_optimizer("sgd"), grad_hook=self.clip, **options)

    def clip(self, params, examples) -> None:
        pass


class _DescribedSync(_OwnSync):
    def describe(self) -> dict:
        return {"max_norm": self.max_norm}


def test_a_method_of_the_sync_itself_is_described_by_its_class_not_its_running_state():
    """The sync's own public attributes are its rank, its counters and its timings (another on
    each rank, after a fit too) and its settings, which the job check compares already: a
    method of the sync (or the sync itself as the hook) is described by the sync's class, and
    its ``describe()`` where it has one (a subclass's settings); another object's method by
    its attributes still."""
    sync = _OwnSync(1.0, comm=SingleRankComm())
    try:
        function = hook_description(_OwnSync.clip)
        cls = "tests.mpi.test_grad_hook_job_check._OwnSync"
        expected = {"method": function, "self": {"class": cls}}
        assert hook_description(sync.clip, sync) == expected
        assert hook_description(sync, sync) == {"class": cls}
        assert "settings" in hook_description(sync.clip)["self"]  # not the sync set up
        described_sync = _DescribedSync(2.0, comm=SingleRankComm())
        said = hook_description(described_sync.clip, described_sync)["self"]
        assert said["describe"] == {"max_norm": 2.0}
        described_sync.close()
    finally:
        sync.close()
