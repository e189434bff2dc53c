"""The :class:`~distconv.trainer.Trainer`'s arguments, checked where they are given.

A count that is not an int, or an accuracy pair naming nothing in the network, failed steps
later with Python's own words (``'float' object cannot be interpreted as an integer``,
``KeyError: 'nolabel'``) or trained something else without a word (``epochs=1.5`` ran two
epochs, ``batch_size=True`` a batch of one). Each check here names the argument instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from numbers import Real
from pathlib import Path
from typing import Any

from distconv.arg import not_finite_once
from distconv.backend import TRAINING_DTYPES as TRAINING_DTYPES  # the types dtype= may name
from distconv.backend import is_gpu_array, resolve_dtype
from distconv.checkpoint_checks import as_saved, beside
from distconv.data import Arrays, DataError
from distconv.network import Network
from distconv.sampler import check_count
from distconv.sequence_set import SequenceSet, arrays_of, row_words
from distconv.sync.base import SyncStrategy
from distconv.sync.one_process import refuse_one_process_collectives

#: what ``fit(resume=...)`` accepts
RESUME_MODES = (False, True, "auto", "overwrite")


def check_resume(resume: bool | str) -> None:
    """Refuse a ``resume`` that is not one of :data:`RESUME_MODES`."""
    if resume not in RESUME_MODES:
        raise ValueError(f"resume must be one of {RESUME_MODES}, got {resume!r}")


def run_config(config: Mapping[str, Any] | None, **own: Any) -> dict[str, Any]:
    """The run's facts, which the job check compares and each checkpoint keeps: the caller's
    ``config`` and the Trainer's ``own`` (its batch size, seed, dtype, ...).

    Raises:
        ValueError: a key of ``config`` the Trainer keeps its own fact under, with another
            value (compared as a checkpoint saves them: ``8`` and ``np.int64(8)`` are one; a
            dtype by its name, ``"f8"`` and ``"float64"``): the Trainer's replaced it without a
            word. The same value (``vars(args)``) is taken,
            and so is None: not said (a ``--dtype`` flag left unset, as ``dtype=None`` is),
            the Trainer's fact in its place, as a resume takes a None fact (``UNKNOWN``).
    """
    given = _config_dict(config)
    for key in own.keys() & given.keys():
        if given[key] is None:
            continue
        try:
            same = as_saved({key: given[key]}) == as_saved({key: own[key]})
        except (TypeError, ValueError):  # a value that holds itself
            same = False
        if not same and not (key == "dtype" and _dtype_name(given[key]) == own[key]):
            raise ValueError(
                f"config key {key!r} is {given[key]!r}, but the Trainer keeps its own {key} "
                f"({own[key]!r}) under it, which would replace the config's; rename it, or "
                "leave it out"
            )
    return {**given, **own}


def _config_dict(config: Any) -> dict[str, Any]:
    """``config`` as a dict, None as an empty one.

    Raises:
        TypeError: ``config`` is no Mapping (a list, ``args`` rather than ``vars(args)``):
            it was ``dict()``'s words ("cannot convert dictionary update sequence element
            #0 to a sequence"), naming neither the argument nor the fix.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(
            f"config must be a mapping of names to values (a dict; vars(args) for argparse's "
            f"namespace), got {type(config).__name__}"
        )
    return dict(config)


def _dtype_name(dtype: Any) -> str | None:
    """The name of the dtype ``dtype`` says as ``Trainer(dtype=...)`` takes it (``"f8"``,
    ``"double"``, ``float``: ``"float64"``), or None: a config's ``dtype`` said so is the
    Trainer's own (``dtype=args.dtype, config=vars(args)``), not another value."""
    try:
        return resolve_dtype(dtype).name
    except (TypeError, ValueError):
        return None


def job_config(config: Mapping[str, Any], layers: Any) -> dict[str, Any]:
    """What a fit's job check compares (the sync's ``setup`` config): the run's ``config``
    and the network's structure ``layers``, under ``"layers"``, or where the config has a key
    of that name (``vars(args)`` of a ``--layers`` flag) under ``"network layers"``
    (``"network network layers"`` where that is taken too): both compared, neither lost. The
    network's replaced the config's, so ranks whose ``config["layers"]`` differed agreed. A
    config without the key is compared as before, under the same text."""
    return {**config, beside(config, "layers", "network "): layers}


def check_parts(network: Any, sync: Any, loss: str) -> None:
    """Refuse a model that is not a :class:`Network`, or a sync that is not a
    :class:`SyncStrategy` (an optimizer or its name passed as to ``torch``'s loops): each was
    an ``AttributeError`` ("'Adam' object has no attribute 'fetches_rows'"), or one whose base
    ``__init__`` never ran, or one of several ranks that leaves a collective to the base's
    one-process version (refused by the base's ``setup`` too, but a strategy whose own
    ``setup`` skips the base's met it at its first call: a barrier, after steps and a
    checkpoint); and a ``loss`` that is no layer of the network.

    Raises:
        TypeError: naming the argument, what it got and how to make the right one.
        ValueError: ``loss`` names no layer.
    """
    if not isinstance(network, Network):
        raise TypeError(
            f"network must be a distconv Network (layers added with add()), got "
            f"{type(network).__name__}"
        )
    if not isinstance(sync, SyncStrategy):
        raise TypeError(
            f"sync must be a sync strategy, such as distconv.distributed.init('adam', lr=0.01) "
            f"returns (it applies the optimizer), got {type(sync).__name__}"
        )
    sync.check_made()  # a dataclass strategy: "no attribute 'world_size'" further on
    refuse_one_process_collectives(sync)  # where its own setup skips the base's: not mid-run
    if loss not in network.layers:
        raise ValueError(f"no layer {loss!r}; layers: {list(network.layers)}")


def check_counts(**counts: Any) -> None:
    """:func:`~distconv.sampler.check_count` of each, at least 1."""
    for name, value in counts.items():
        check_count(name, value, 1)


def check_lr_decay(lr_decay: Any) -> None:
    """Refuse a per-epoch factor outside (0, 1] (NaN, a string, a bool included).

    Raises:
        ValueError: naming ``lr_decay`` and the value given.
    """
    if isinstance(lr_decay, bool) or not isinstance(lr_decay, Real) or not 0.0 < lr_decay <= 1.0:
        raise ValueError(f"lr_decay must lie in (0, 1], got {lr_decay!r}")


def check_progress(progress: Any) -> None:
    """Refuse a ``progress`` that is not True, False or None: ``"yes"`` was taken as True (and
    ``"no"`` too, a non-empty string).

    Raises:
        TypeError: naming ``progress`` and the value given.
    """
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(
            f"progress must be True, False or None (a bar on a terminal only), got {progress!r}"
        )


def output_dir(out_dir: str | os.PathLike | None) -> Path | None:
    """``out_dir`` as a path, None staying None (nothing written).

    Raises:
        ValueError: a blank one (``out_dir=os.environ.get("RUN_DIR", "")`` with the variable
            unset): ``Path("")`` is ``.``, so the run's checkpoints, lock and metrics went into
            the current directory without a word.
    """
    if out_dir is None:
        return None
    if isinstance(out_dir, str) and not out_dir.strip():
        raise ValueError(
            f"out_dir must name a directory, got {out_dir!r} (None writes no files; '.' is "
            "the current directory)"
        )
    return Path(out_dir)


def accuracy_pair(network: Network, accuracy: Any, loss: str) -> tuple[str, str] | None:
    """The ``(predictions, labels)`` names right answers are counted with, or None.

    ``"auto"`` takes the loss's inputs when it is a softmax cross-entropy (else None).

    Raises:
        ValueError: ``accuracy`` is not ``"auto"``, None or a pair of names, or a name is
            neither a layer nor a feed of ``network`` (a fit failed at its first step with a
            bare ``KeyError``, after the sync's setup).
    """
    if accuracy is None:
        return None
    if isinstance(accuracy, str) and accuracy == "auto":
        return network.softmax_inputs(loss)
    if (
        isinstance(accuracy, str)
        or not isinstance(accuracy, (tuple, list))
        or len(accuracy) != 2
        or not all(isinstance(n, str) for n in accuracy)
    ):
        raise ValueError(
            f'accuracy must be "auto", None or a pair of names (predictions, labels), '
            f"got {accuracy!r}"
        )
    known = set(network.layers) | set(network.feed_names)
    missing = [n for n in accuracy if n not in known]
    if missing:
        raise ValueError(
            f"accuracy={tuple(accuracy)}: {', '.join(map(repr, missing))} is neither a layer nor "
            f"an input of the network (layers: {list(network.layers)}, inputs: "
            f"{network.feed_names})"
        )
    return accuracy[0], accuracy[1]


def training_dtype(dtype: Any) -> Any:
    """``dtype`` resolved (None stays None: the network's own).

    Refused here, not only by ``Parameter.cast``: a network without weights casts none.

    Raises:
        TypeError: a type the kernels and checkpoints do not train in.
    """
    if dtype is None:
        return None
    resolved = resolve_dtype(dtype, "Trainer's dtype")  # a layer's dtype= says "dtype" alone
    if resolved.name not in TRAINING_DTYPES:
        raise TypeError(
            f"cannot train in {resolved}: weights and inputs need a floating-point type "
            f"the kernels and checkpoints carry ({', '.join(TRAINING_DTYPES)})"
        )
    return resolved


def refuse_not_finite(
    train: Arrays | SequenceSet, test: Arrays | SequenceSet | None, dtype: Any = None
) -> None:
    """Refuse a training or test set holding NaN or infinity as fed in ``dtype``, naming its
    rows (:func:`~distconv.arg.not_finite_once`: a read-only array proved finite by an earlier
    ``fit`` is not read again; a sequence set's rows also by their sequence:
    :func:`~distconv.sequence_set.row_words`). Device arrays are left to the network's check
    of each batch.

    Every rank reads all of the training set: each epoch's shards are strided over another
    permutation, so a rank's rows over the run are the whole set.

    Raises:
        DataError: naming the set, the feed and the first rows.
    """
    for what, data in [("training", train), ("test", test)]:
        host = {n: a for n, a in arrays_of(data).items() if not is_gpu_array(a)}  # by batch
        if (where := not_finite_once(host, dtype, row_words(data))) is not None:
            raise DataError(f"the {what} set's {where}")
