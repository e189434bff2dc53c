"""Checks of parameters and optimizer state against a checkpoint, or against themselves
before a save, each returning its problems as lines in the syncs' words
(:func:`~distconv.sync.local.state_problems`): :mod:`distconv.checkpoint` raises them as one
:class:`~distconv.checkpoint.CheckpointError`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from distconv import plain_json
from distconv.backend import to_host
from distconv.kernels.shape import is_int
from distconv.scheme_history import EARLIER, WORLD_SIZE
from distconv.sync.local_state import (
    is_count,
    not_counts,
    not_numbers,
    per_row_count,
    state_problems,
)

OptimState = Mapping[str, Mapping[str, Any]]
#: the keys of a checkpoint's ``extra`` it keeps its own facts under, beside the run's
#: (:class:`~distconv.resume.StepCheckpoints`), each with what it holds there: a config key of
#: one of these names is kept beside it, as ``config <key>`` (:func:`savable_facts`)
OWN_KEYS = {
    "step_in_epoch": "the steps of its epoch done",
    "sums": "its epoch's metric sums",
    "scheme": "the sync scheme it was written under",
    EARLIER: "the sync schemes of its epoch's earlier steps",
    "train_data": "the training set's fingerprint",
    "facts_form": "the form its facts are written in (resume_facts.FACTS_FORM)",
    "layers": "the network's structure (Network.structure)",
    WORLD_SIZE: "the world size it was written on",
}


def extra_text(extra: Mapping[str, Any]) -> str:
    """A checkpoint's ``extra`` (and its optimizer's config) as its metadata holds it: JSON, a
    value JSON has no form for written as the job check writes it (:mod:`distconv.plain_json`:
    a set as a sorted list, a numpy number as its number, an object as its text without its
    address, a tuple as a key as its JSON text)."""
    return plain_json.dumps(dict(extra))


def as_saved(facts: Mapping[str, Any]) -> dict[str, Any]:
    """``facts`` as a checkpoint's ``extra`` reads them back (:func:`extra_text`): a resume
    compares like with like (a live set with its saved list, a tuple with its list)."""
    return json.loads(extra_text(facts))


def savable_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """``facts`` (a Trainer's config) as each checkpoint keeps them: a key a checkpoint keeps
    its own fact under (:data:`OWN_KEYS`: ``scheme``, a script's ``--scheme``) as ``config
    <key>`` (:func:`beside`), where its own fact wrote over it in each checkpoint without a
    word; refused where a checkpoint could not hold one of them (:func:`extra_text`: a value
    that holds itself): at the start, naming it, not at the first checkpoint with a bare error
    that names nothing. Its own facts keep their keys, which a resume (and an older distconv's)
    reads; a config's under another key is read by none of them, as it was by none before.

    Raises:
        ValueError: ``config 'grid' cannot be saved in a checkpoint ...``.
    """
    kept = {}
    for key, value in facts.items():
        kept[beside({*OWN_KEYS, *facts}, key, "config ") if key in OWN_KEYS else key] = value
        try:
            extra_text({key: value})
        except (TypeError, ValueError, RecursionError) as exc:  # too deep: one line, named
            raise ValueError(
                f"config {key!r} cannot be saved in a checkpoint (its metadata is JSON): {exc}"
            ) from None
    return kept


def beside(taken: Collection[Any], key: str, prefix: str) -> str:
    """``key``, or where ``taken`` holds it, ``prefix`` before it (again while that is taken
    too): where a config keeps a key of its own beside one of distconv's of that name."""
    while key in taken:
        key = prefix + key
    return key


def native(dtype: Any) -> np.dtype:
    """``dtype`` in this machine's byte order: ``>f8`` is float64, stored and compared alike."""
    return np.dtype(dtype).newbyteorder("=")


def save_problems(state: Any, counts: Mapping[str, Any], seed: Any = None) -> list[str]:
    """What keeps ``state``, the run's ``counts`` (``{"step": 7, "epoch": 2}``) and ``seed``
    from being saved: :func:`malformed` state, then a count of it (a 0-d integer value, Adam's
    ``step``) or one of ``counts`` that is no count (a whole number from 0 to int64's largest),
    which a restore or a sync's ``load_state_dict`` would refuse, or ``int()`` would cut (2.5
    to 2), or a ``seed`` that is no integer (:func:`not_a_seed`): refused at the save, a run
    keeps its checkpoint before instead of writing one it cannot resume from."""
    problems = malformed(state) or [
        f"optimizer state {name}/{key}: {what}"
        for name, entry in state.items()
        for key, what in bad_counts(entry).items()
    ]
    problems += [
        f"{name} {value!r}: {what}"
        for name, value in counts.items()
        if (what := _not_one_count(value)) is not None
    ]
    if (what := not_a_seed(seed)) is not None:
        problems.append(f"seed {seed!r}: {what}")
    return problems


def _not_one(value: Any, what: str) -> str | None:
    """Why numbers ``value`` are not one number, ``what`` (``"a count"``), or None: an array
    (``[1, 2]``, ``np.array([5])``) or a bool (numpy counts it an integer)."""
    a = np.asarray(to_host(value))
    if a.ndim != 0:
        return f"shape {a.shape} given, not {what}"
    return f"a bool given, not {what}" if a.dtype.kind == "b" else None


def _not_one_count(value: Any) -> str | None:
    """Why ``value`` is not one count (:func:`~distconv.sync.local.not_counts`), or None: an
    array of counts (``[1, 2]``, ``np.array([5])``) passed that check and ``int()`` then raised
    a bare TypeError, and a bool (``True``) was saved as 1."""
    if (what := not_counts(value)) is not None:
        return what
    return _not_one(value, "a count")


def not_a_seed(seed: Any) -> str | None:
    """Why ``seed`` is no seed a checkpoint can keep, or None where it is one: None (no seed),
    an int (numpy's too, of any size, as numpy's generators take), or one whole number (a 0-d
    integer array, a float 7.0). A save kept ``int(seed)``: 2.5 as 2 and True as 1, which a
    resume then compared with the run's seed, and NaN raised a bare ValueError."""
    if seed is None or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)):
        return None
    if (what := not_numbers(seed)) is not None:
        return f"{what} given, not an integer"
    if (what := _not_one(seed, "an integer")) is not None:
        return what
    a = np.asarray(to_host(seed))
    if a.dtype.kind in "iu":
        return None
    with np.errstate(invalid="ignore"):
        whole = a.dtype.kind == "f" and bool(np.isfinite(a)) and bool(a == np.floor(a))
    return None if whole else f"holds {a.item()!r}, not an integer"


def bad_counts(entry: Mapping[str, Any]) -> dict[str, str]:
    """The counts of one parameter's (or a shard's block's) optimizer state ``entry`` that are
    no count (:func:`~distconv.sync.local.not_counts`), by key, each with what it holds; a
    count is a 0-d integer value (Adam's ``step``), every other buffer a float, or a parameter
    server's per-row copy of one (``step_per_row``, ``step_runs_per_row`` beside ``step``:
    :func:`~distconv.sync.local.per_row_count`), which its resume checks alike."""
    return {
        key: what
        for key, value in entry.items()
        if _is_count(entry, key) and (what := not_counts(value)) is not None
    }


def _is_count(entry: Mapping[str, Any], key: Any) -> bool:
    """Whether ``entry[key]`` holds counts: a 0-d integer value (whatever its key: a save takes
    keys that are no string; :func:`~distconv.sync.local.is_count`, told by dtype and shape on
    its device, no copy to the host) or a per-row copy of one. An optimizer's own buffer whose
    name ends in ``_per_row`` (``v_per_row``, a float) is no count, as a restore takes it."""
    return per_row_count(entry, key) or is_count(entry[key])


def malformed(state: Any, keys: OptimState | None = None) -> list[str]:
    """State, an entry (``{"w": array}``) or a value (``None``) that is no mapping or no numbers,
    in the sync's words; at a restore (``keys``: the checkpoint's) a key that is no string."""
    odd: dict[Any, Any] = {}
    no_numbers: dict[Any, Any] = {}  # a bare error of safetensors at a save, of .shape here
    for name, s in state.items() if isinstance(state, Mapping) else ():
        if not isinstance(s, Mapping):
            odd[name] = s
            continue
        if keys is not None and any(not isinstance(k, str) for k in s):
            odd[name] = {k: v for k, v in s.items() if not isinstance(k, str)}
        no_numbers[name] = {k: v for k, v in s.items() if isinstance(k, str) and not_numbers(v)}
    ours = {name: (keys or {}).get(name, {}) for name in odd}
    problems = state_problems(ours, odd if isinstance(state, Mapping) else state)
    problems += state_problems({n: dict.fromkeys(b) for n, b in no_numbers.items()}, no_numbers)
    return [optimizer_words(said.removesuffix(" (it has [])")) for said in problems]


def optimizer_words(said: str) -> str:
    """The sync's words of optimizer state (``state for 'w' is ...``, ``'w' has no state 1``)."""
    return f"optimizer {said}" if said.startswith("state") else f"optimizer state {said}"


def read_otherwise(ours: OptimState, theirs: OptimState) -> list[str]:
    """State whose ``name/key`` text the checkpoint has under another split: a name ``1`` (read
    as ``"1"``), a key ``"a/b"`` of ``"w"`` (read as ``"b"`` of ``"w/a"``): a KeyError at copy."""
    return [
        f"optimizer state {name!r}/{key!r} is read back from a checkpoint as {read[0]!r}/"
        f"{read[2]!r} (names and keys are strings, and keys hold no '/')"
        for name, s in ours.items()
        for key in s
        if key not in theirs.get(name, {}) and (read := f"{name}/{key}".rpartition("/"))
    ]


def flatten(state: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``state`` by ``"name/key"``, as a checkpoint file names its tensors."""
    return {f"{name}/{key}": v for name, s in state.items() for key, v in s.items()}


def mismatches(kind: str, ours: Mapping[str, Any], theirs: Mapping[str, np.ndarray]) -> list[str]:
    """Names of ``kind`` missing from ``theirs`` or only in it, and shapes or dtypes that differ."""
    missing = sorted(set(ours) - set(theirs))
    unexpected = sorted(set(theirs) - set(ours))
    problems = [f"{kind} {n!r} is missing from the checkpoint" for n in missing]
    problems += [f"{kind} {n!r} is in the checkpoint but not in the model" for n in unexpected]
    for name in sorted(set(ours) & set(theirs)):
        want, got = tuple(ours[name].shape), tuple(theirs[name].shape)
        if want != got:
            problems.append(f"{kind} {name!r}: model shape {want}, checkpoint shape {got}")
        # a silent cast would resume another computation than the one checkpointed
        want_type, got_type = native(ours[name].dtype), native(theirs[name].dtype)
        if want_type != got_type:
            problems.append(
                f"{kind} {name!r}: model dtype {want_type}, checkpoint dtype {got_type}"
            )
    return problems


def whole_set_each_step(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> bool:
    """Whether a checkpoint's facts (``theirs``) and a resuming run's (``ours``) both record a
    ``global_batch`` that reaches the size of the same training set (``train_data``, its
    :func:`~distconv.data.fingerprint`). Then each epoch is one step of every example, which a
    synchronous step sums over ranks and divides by that size however the batch is split (as
    for an equal global batch of another world size), so the two train the same. False where
    either records no training set."""
    sets = theirs.get("train_data"), ours.get("train_data")
    if not all(isinstance(s, Mapping) for s in sets) or sets[0] != sets[1]:
        return False
    examples = sets[1].get("examples")
    batches = theirs.get("global_batch"), ours.get("global_batch")
    if not is_int(examples) or not all(is_int(b) for b in batches):
        return False
    return all(b >= examples for b in batches)
