"""A ragged data set for :meth:`~distconv.trainer.Trainer.fit`: sequences of rows and their offsets.

A sequence batch is rows plus ``seq_starts`` (docs/architecture.md, "Layers"). A
:class:`SequenceSet` holds every sequence's rows end to end (one row per token, say) with the
``n + 1`` offsets between them, and optionally arrays of one entry per sequence (a label per
sentence). The Trainer samples **sequences** (``batch_size`` counts them, as ``global_batch``
does), and feeds the rows of the sequences drawn, in index order, with the offsets rebuilt.

What a step counts (``start_step`` and ``loss_scale``) is the number of rows its loss takes the
mean over: the pass's rows under a per-token loss, its sequences under a per-sequence one
(:func:`counted` decides which before the first step; each forward checks it). Counting
sentences for a per-token loss trains N ranks on another objective than one process, and one
process cannot tell.

The functions below the class let the Trainer's data paths take either kind of set: a dict of
arrays by feed name (:data:`~distconv.data.Arrays`) as before, or a :class:`SequenceSet`.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from distconv.arg import Arg, feeds_of
from distconv.data import Arrays, DataError, array_length, as_arrays, fingerprint
from distconv.layers.loss import MSELoss, SoftmaxCrossEntropy
from distconv.sampler import GlobalBatchSampler

#: what a set's count may be taken over: its rows (tokens), or its sequences
MEAN_OVER = ("rows", "sequences")
#: why a loss that reads neither one row a token nor one a sequence cannot be trained by fit
#: (a SequenceConcat of two row feeds: two rows a token)
OTHER_ROWS = (
    "the Trainer counts a sequence set's rows or its sequences, and cannot train a loss that "
    "reads another number of rows"
)


class SequenceSet:
    """Sequences of rows, for ``fit`` and ``evaluate``; checked when made.

    Args:
        rows: feed name -> a numpy array with one row per token (each of ``seq_starts[-1]``
            rows): token ids (integers, fed as ``ids``), vectors (floats, fed as values),
            per-token labels. Each is fed with the batch's ``seq_starts``.
        seq_starts: the ``n + 1`` offsets of the ``n`` sequences into the rows: 1-D integers
            that rise (or stay, for an empty sequence) from 0 to the rows' length.
        per_sequence: feed name -> a numpy array of ``n`` entries, one per sequence (a label
            per sentence), fed as an ordinary feed of one row per sequence.
        name: what error messages call this set.
        mean_over: ``"rows"`` or ``"sequences"``: what the loss takes its mean over, where
            :func:`counted` should not decide it from the loss's inputs (None).

    Raises:
        DataError: naming the set, the array and the rule: offsets that are not 1-D integers
            rising from 0 to the rows' length, an array that is not a numpy array of the right
            length, no row feed, a name in both mappings, a set of sequences that holds no row,
            or ``mean_over`` not one of :data:`MEAN_OVER`.
    """

    def __init__(
        self,
        rows: Mapping[str, np.ndarray],
        seq_starts: np.ndarray,
        per_sequence: Mapping[str, np.ndarray] | None = None,
        *,
        name: str = "sequence set",
        mean_over: str | None = None,
    ) -> None:
        self.name = name
        per_sequence = {} if per_sequence is None else per_sequence
        for what, arrays in [("rows", rows), ("per_sequence", per_sequence)]:
            if not isinstance(arrays, Mapping):
                raise DataError(
                    f"{name}: {what} must be a dict of numpy arrays by feed name, got "
                    f"{type(arrays).__name__}"
                )
        if not rows:
            raise DataError(f"{name}: rows holds no feed; a sequence set needs one row array")
        if both := sorted(set(rows) & set(per_sequence)):
            raise DataError(f"{name}: {both[0]!r} is in both rows and per_sequence; name it once")
        if mean_over is not None and mean_over not in MEAN_OVER:
            raise DataError(
                f"{name}: mean_over must be one of {MEAN_OVER} or None, got {mean_over!r}"
            )
        self.seq_starts = _checked_offsets(name, seq_starts)
        n, total = len(self.seq_starts) - 1, int(self.seq_starts[-1])
        for what, arrays, length in [("rows", rows, total), ("per_sequence", per_sequence, n)]:
            for feed, a in arrays.items():
                if not isinstance(a, np.ndarray) or a.ndim < 1 or len(a) != length:
                    got = f"shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                    want = "rows (seq_starts[-1])" if what == "rows" else "entries (one a sequence)"
                    raise DataError(
                        f"{name}: {what}[{feed!r}] must be a numpy array of {length} {want}, "
                        f"got {got}"
                    )
        if n and not total:  # every step empty: nothing to train on, no example to check with
            raise DataError(f"{name}: its {n} sequence(s) hold no rows (all are empty)")
        self.rows, self.per_sequence = dict(rows), dict(per_sequence)
        self.lengths = np.diff(self.seq_starts)
        self.mean_over = mean_over

    def __len__(self) -> int:
        """The number of sequences: what the Trainer's sampler indexes."""
        return len(self.lengths)

    def __repr__(self) -> str:
        return (
            f"SequenceSet({self.name!r}, {len(self)} sequences, {int(self.seq_starts[-1])} rows, "
            f"rows={sorted(self.rows)}, per_sequence={sorted(self.per_sequence)})"
        )

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """Every array by feed name, the row feeds' and the per-sequence ones'."""
        return {**self.rows, **self.per_sequence}

    def row_index(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of the sequences ``index``, in index order, and their offsets in that
        batch: each sequence's start, repeated over its rows, plus a ramp of the batch's rows
        less its own start in the batch (array operations, no loop over the sequences)."""
        lengths = self.lengths[index]
        starts = np.zeros(len(index) + 1, np.int64)
        np.cumsum(lengths, out=starts[1:])
        shift = np.repeat(self.seq_starts[index] - starts[:-1], lengths)
        return shift + np.arange(starts[-1]), starts

    def count(self, index: np.ndarray) -> int:
        """How many rows the loss takes its mean over in the batch ``index``: its rows, or its
        sequences where the set counts those (``mean_over``, as :func:`counted` set it)."""
        if self.mean_over == "sequences":
            return len(index)
        return int(self.lengths[index].sum())

    def feeds(self, index: np.ndarray, dtype: Any = None) -> dict[str, Arg]:
        """The sequences ``index`` as a network's input (:func:`~distconv.arg.feeds_of`): each
        row feed's rows with the batch's ``seq_starts``, each per-sequence feed's entries."""
        rows, starts = self.row_index(index)
        feeds = feeds_of(self.rows, rows, dtype)
        for arg in feeds.values():
            arg.seq_starts = starts
        return {**feeds, **feeds_of(self.per_sequence, index, dtype)}

    def subset(self, index: np.ndarray, zeroed: tuple[str, ...] = ()) -> SequenceSet:
        """The sequences ``index`` as a set of their own (named as this one), with the feeds
        ``zeroed`` set to zeros (the data checks' example of class 0)."""
        rows, starts = self.row_index(index)
        taken = {
            n: np.zeros_like(a[pick]) if n in zeroed else a[pick]
            for arrays, pick in [(self.rows, rows), (self.per_sequence, index)]
            for n, a in arrays.items()
        }
        return self._like(taken, starts)

    def _like(self, arrays: Mapping[str, np.ndarray], starts: np.ndarray) -> SequenceSet:
        rows = {n: arrays[n] for n in self.rows}
        per = {n: arrays[n] for n in self.per_sequence}
        return SequenceSet(rows, starts, per, name=self.name, mean_over=self.mean_over)

    def first_example(self) -> np.ndarray:
        """The index of the one sequence the data checks forward: the first of two rows or
        more, else the first that holds a row (an empty one has no mean loss). One of one row
        counts alike in rows and in sequences, so a count taken over the wrong one passed it."""
        longer = self.lengths > 1
        return np.array([int(np.argmax(longer if longer.any() else self.lengths > 0))])

    def fingerprint(self, dtype: Any = None) -> dict[str, Any]:
        """What the job check compares (:func:`~distconv.data.fingerprint`): the number
        of sequences and of rows, each feed's example shape and dtype, and a SHA-256 of every
        offset beside the sampled rows and entries: ranks handed other sentence boundaries
        over the same tokens stop too."""
        rows = fingerprint(self.rows, dtype)
        per = fingerprint(self.per_sequence, dtype) if self.per_sequence else None
        digest = hashlib.sha256(self.seq_starts.astype("<i8").tobytes())
        digest.update(rows["sampled_examples_sha256"].encode())
        if per is not None:
            digest.update(per["sampled_examples_sha256"].encode())
        return {
            "examples": len(self),
            "rows": rows["examples"],
            "feeds": {**rows["feeds"], **(per["feeds"] if per else {})},
            "sampled_examples_sha256": digest.hexdigest()[:16],
        }


def _checked_offsets(name: str, seq_starts: Any) -> np.ndarray:
    """``seq_starts`` as int64, or a DataError naming the rule it breaks (the rows' length is
    compared by the caller, array by array)."""
    s = seq_starts
    if not isinstance(s, np.ndarray) or s.ndim != 1 or s.dtype.kind not in "iu" or len(s) < 1:
        got = f"{s.dtype} shape {s.shape}" if isinstance(s, np.ndarray) else type(s).__name__
        raise DataError(
            f"{name}: seq_starts must be a 1-D numpy array of n + 1 integer offsets, got {got}"
        )
    if s[0] != 0:
        raise DataError(f"{name}: seq_starts must start at 0, got {int(s[0])}")
    s = s.astype(np.int64)
    if len(s) > 1 and (falls := np.flatnonzero(s[1:] < s[:-1])).size:
        i = int(falls[0])
        raise DataError(
            f"{name}: seq_starts must never fall, but goes from {s[i]} to {s[i + 1]} at "
            f"{i + 1} (an empty sequence repeats its start)"
        )
    return s


# -- either kind of set, as the Trainer's data paths take it ----------------------------------


def as_data_set(data: Any) -> Arrays | SequenceSet:
    """``data`` as the Trainer takes a set: a :class:`SequenceSet` as it is, else arrays by
    feed name (:func:`~distconv.data.as_arrays`: a ``Dataset``, a dict of arrays)."""
    return data if isinstance(data, SequenceSet) else as_arrays(data)


def set_length(data: Arrays | SequenceSet) -> int:
    """The examples of a set the sampler indexes: its sequences, or its arrays' rows."""
    return len(data) if isinstance(data, SequenceSet) else array_length(data)


def arrays_of(data: Arrays | SequenceSet | None) -> Mapping[str, Any]:
    """Every array of a set by feed name (none for None)."""
    if data is None:
        return {}
    return data.arrays if isinstance(data, SequenceSet) else data


def row_words(data: Arrays | SequenceSet | None) -> dict[str, Callable[[int], str]]:
    """How a data check's message names the rows of each feed of ``data`` where a row's
    number alone does not find it: a sequence set's row feed's row ``r`` as ``"r (row t of
    sequence s)"``, its sequence counted as ``seq_starts`` does and its row from that
    sequence's start. None for arrays, nor for a per-sequence feed (its rows are sequences)."""
    if not isinstance(data, SequenceSet):
        return {}
    starts = data.seq_starts

    def in_sequence(row: int) -> str:
        # the last sequence that starts at or before the row: empty ones before it start there
        s = int(np.searchsorted(starts, row, side="right")) - 1
        return f"{row} (row {row - int(starts[s])} of sequence {s})"

    return dict.fromkeys(data.rows, in_sequence)


def count_of(data: Arrays | SequenceSet, index: np.ndarray) -> int:
    """The rows the loss takes its mean over in the batch ``index``: for arrays, its examples."""
    return data.count(index) if isinstance(data, SequenceSet) else len(index)


def first_example(data: Arrays | SequenceSet) -> np.ndarray:
    """The index of the one example the data checks forward."""
    return data.first_example() if isinstance(data, SequenceSet) else np.arange(1)


def one_example(data: Arrays | SequenceSet, zeroed: tuple[str, ...] = ()) -> Any:
    """:func:`first_example` as a set of its own, with the feeds ``zeroed`` set to zeros."""
    if isinstance(data, SequenceSet):
        return data.subset(data.first_example(), zeroed)
    return {n: np.zeros(a[:1].shape, a.dtype) if n in zeroed else a[:1] for n, a in data.items()}


def counted(network: Any, loss: str, data: Any) -> Any:
    """``data``, a :class:`SequenceSet` with what its count is taken over decided (a copy
    that shares its arrays); any other set as it is.

    Its own ``mean_over`` where given. Else by the loss's inputs that are feeds of the set: a
    row feed (per-token labels) counts rows, a per-sequence one (a label per sentence)
    sequences. A loss that reads no feed of the set (a target it makes itself) counts rows:
    the layers that carry a sequence batch (projections, context windows, fully connected
    layers) keep one output row per input row, so its input has the batch's rows unless a
    layer pools them; a model that does is stopped at its first forward by
    :func:`loss_rows_checked`, which names ``mean_over`` to set.
    """
    if not isinstance(data, SequenceSet) or data.mean_over is not None:
        return data
    read = network.wiring[loss]
    over = "rows"
    if not any(n in data.rows for n in read) and any(n in data.per_sequence for n in read):
        over = "sequences"
    decided = copy.copy(data)
    decided.mean_over = over
    return decided


def loss_rows_checked(data: SequenceSet, loss: Any, index: np.ndarray) -> int:
    """After a forward of the sequences ``index`` of ``data``: their count
    (:meth:`SequenceSet.count`), or a refusal where the ``loss`` layer's input has another
    number of rows (a count :func:`counted` guessed wrong, a model that pools where none was
    expected).

    Raises:
        DataError: naming the loss, both counts and ``mean_over`` to set.
    """
    count = data.count(index)
    rows = loss.inputs[0].batch_size if loss.inputs else count
    if rows == count:
        return count
    other = "sequences" if data.mean_over == "rows" else "rows"
    others = len(index) if other == "sequences" else int(data.lengths[index].sum())
    if rows == others:
        one = "sequence" if other == "sequences" else "row of the set"
        advice = (
            f"pass SequenceSet(..., mean_over={other!r}) where the loss reads one row per {one}"
        )
    else:  # a layer that makes rows of its own (a SequenceConcat of two row feeds: two a token)
        advice = f"nor is it its {others} {other}: {OTHER_ROWS}"
    raise DataError(
        f"{loss.label} takes its mean over {rows} rows, but the batch of {len(index)} "
        f"sequence(s) of {data.name!r} counts {count} {data.mean_over}: each step would be "
        f"averaged over the wrong count on several ranks; {advice}"
    )


def refuse_misplaced_labels(
    data: SequenceSet, loss: Any, wiring: list[str], feeds: Mapping[str, Arg], index: np.ndarray
) -> None:
    """After a forward of the sequences ``index`` of ``data`` failed: where the ``loss`` layer
    (fed the inputs named ``wiring``) ran in it and read a label feed of the set whose rows are
    of the other kind (one a token where its input holds one row a sentence, after a pool, or
    the reverse), a :class:`~distconv.data.DataError` saying where the labels belong; where
    its input holds neither one row a token nor one a sentence (a
    :class:`~distconv.layers.sequence.SequenceConcat` of two row feeds), one saying that fit
    cannot train it. The loss's own words ("28 labels for a batch of 1 rows") named neither
    the set nor its parts.
    Returns where the failure was another, or the loss is not one of distconv's own (which read
    one label a row of their input): a loss of one's own may read the other kind on purpose.
    """
    if type(loss) not in (SoftmaxCrossEntropy, MSELoss):  # nor a subclass: it may read others
        return
    inputs = getattr(loss, "inputs", ())
    for i, name in enumerate(wiring[1:], start=1):
        if len(inputs) <= i or name not in feeds or inputs[i] is not feeds[name]:
            continue  # not this forward's loss, or not a feed of the set
        rows, sentences = inputs[0].batch_size, len(index)
        tokens = int(data.lengths[index].sum())
        if name in data.rows and rows == sentences != tokens:
            where = "one a row (in rows), but the loss reads one row per sequence (a pool's)"
            fix = "pass one label per sequence in per_sequence"
        elif name in data.per_sequence and rows == tokens != sentences:
            where = "one a sequence (in per_sequence), but the loss reads one row per row"
            fix = "pass one label per row in rows, or pool the rows (SequencePool) first"
        elif rows not in (tokens, sentences):
            raise DataError(
                f"{data.name!r}: {loss.label} reads {rows} rows where the batch holds "
                f"{tokens} row(s) in {sentences} sequence(s): neither one a row of the set nor "
                "one a sequence (a SequenceConcat of two row feeds makes two a row); "
                f"{OTHER_ROWS}: train it in a loop of your own (docs/operations.md, "
                '"Sequences")'
            )
        else:
            continue
        raise DataError(f"{data.name!r}: the labels {name!r} of {loss.label} are {where}: {fix}")


def empty_steps(data: Any, sampler: GlobalBatchSampler, epoch: int) -> np.ndarray | None:
    """For a :class:`SequenceSet` counted by its rows: which steps of ``sampler``'s ``epoch``
    hold no row on any rank (every sequence of the global batch empty), or None where none
    does (or for another set). Every rank computes it alike from the batch order, with no
    message, and skips those steps alike: a step of no rows has no mean loss."""
    if not isinstance(data, SequenceSet) or data.mean_over == "sequences":
        return None
    lengths = data.lengths[sampler.permutation(epoch)]
    rows = np.add.reduceat(lengths, np.arange(0, len(lengths), sampler.global_batch))
    empty = rows == 0
    return empty if empty.any() else None
