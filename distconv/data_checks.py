"""What :meth:`~distconv.trainer.Trainer.fit` checks of its data sets against the model before
its first step, after its sync's setup and the job check: every rank holds the same sets then,
so every rank refuses alike and none waits for another.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from distconv.arg import NOT_FINITE_CHUNK_BYTES, marked_rows, rows_named
from distconv.backend import to_host
from distconv.data import DataError
from distconv.feed_layout import refuse_other_channels
from distconv.id_reads import id_reads
from distconv.layers.base import Layer, forward_only
from distconv.messages import exception_line
from distconv.network import Network
from distconv.sequence_set import (
    SequenceSet,
    arrays_of,
    first_example,
    one_example,
    row_words,
    set_length,
)

#: what fit forwards: the examples ``index`` of a set (arrays by feed name, or a
#: :class:`~distconv.sequence_set.SequenceSet`); returns (summed loss, right answers)
Forward = Callable[[Any, np.ndarray], tuple[Any, Any]]


def check_sets(
    network: Network,
    forward: Forward,
    train: Mapping[str, Any],
    test: Mapping[str, Any] | None,
) -> None:
    """Refuse, before the first step, data sets the model would fail on or misread later:
    images of other channels than the convolution that reads them takes (channels last:
    :func:`~distconv.feed_layout.refuse_other_channels`), ids past what a layer reads
    (:func:`refuse_ids_out_of_range`), labels past the classes
    (:func:`refuse_labels_past_classes`), a test set that is empty or
    that the model cannot read (:func:`check_test_set`), or whose examples have another shape
    than the training set's while the model's outputs do not (:func:`refuse_other_shapes`),
    and a sequence set whose loss reads another number of rows than the set counts (the
    forward of its example: :func:`~distconv.sequence_set.loss_rows_checked`).
    ``forward`` is the trainer's. A set is arrays by feed name or a
    :class:`~distconv.sequence_set.SequenceSet` (its example:
    :meth:`~distconv.sequence_set.SequenceSet.first_example`, its first sequence of two rows
    or more, else its first that holds a row, with the offsets fed).

    Raises:
        DataError: naming the set (and the feed and rows where it can).
    """
    if test is not None and set_length(test) == 0:
        raise DataError("the test set is empty; pass test=None to evaluate on none")
    for what, data in [("training", train), ("test", test)]:  # before a layer refuses them
        refuse_other_channels(network, what, data)
    refuse_ids_out_of_range(network, train, test)  # first: the forwards below would meet them
    refuse_labels_past_classes(network, forward, train, test)
    if isinstance(train, SequenceSet):  # the forward checks the rows the loss reads
        with forward_only():  # after the label check: a label past the classes named there
            forward(train, first_example(train))
    check_test_set(network, forward, train, test)  # first: its refusal names the failing layer
    refuse_other_shapes(network, forward, train, test)


def check_evaluation_set(network: Network, data: Mapping[str, Any]) -> None:
    """What :meth:`~distconv.trainer.Trainer.evaluate` refuses of its set before a batch, as
    :func:`check_sets` refuses it of fit's: images of other channels than the convolution that
    reads them takes (:func:`~distconv.feed_layout.refuse_other_channels`), and ids past what
    a layer reads (:func:`refuse_set_ids_out_of_range`), in the words of the evaluation set.

    Raises:
        DataError: naming the evaluation set, the feed and the way out.
    """
    refuse_other_channels(network, "evaluation", data)
    refuse_set_ids_out_of_range(network, "evaluation", data)


def refuse_ids_out_of_range(
    network: Network, train: Mapping[str, Any], test: Mapping[str, Any] | None
) -> None:
    """Refuse an id of either set outside the range of the layer that reads its feed
    (:func:`~distconv.id_reads.id_reads`: a table's rows, a multiplex's candidates, a
    selective FC's columns). The layer checks each batch, so such an id stopped a fit at
    whatever step the shuffle reached its row (a resume met it again), naming the layer and
    not the feed or the row. Every integer id of both sets is read, in chunks, as labels are.

    Raises:
        DataError: naming the set, the feed, the range, its reader and the first rows outside.
    """
    for what, data in [("training", train), ("test", test)]:
        refuse_set_ids_out_of_range(network, what, data)


def refuse_set_ids_out_of_range(
    network: Network, what: str, data: Mapping[str, Any] | None
) -> None:
    """:func:`refuse_ids_out_of_range` of one set, ``data`` (None: none), which the refusal
    calls the ``what`` set (``"training"``, ``"evaluation"``).

    Raises:
        DataError: naming the set, the feed, the range, its reader and the first rows outside.
    """
    arrays = arrays_of(data)
    for read in id_reads(network):
        ids = arrays.get(read.feed)
        if ids is None or ids.dtype.kind not in "iu":  # not ids: the layer names that
            continue
        found = rows_outside(ids, read.low, read.high)
        if found[0]:
            reader = f"the ids {read.reader} reads"
            raise outside_refusal(what, data, read.feed, (read.low, read.high), reader, found)


def outside_refusal(
    what: str,
    data: Any,
    feed: str,
    span: tuple[int, int],
    reader: str,
    found: tuple[int, list[int], int, int],
    kind: str = "ids",
) -> DataError:
    """The refusal of the rows ``found`` (:func:`rows_outside`) of ``feed`` of the ``what``
    set ``data`` outside ``span`` (``low <= v < high``), which ``reader`` reads (``"the
    classes SoftmaxCrossEntropy 'loss' scores"``, ``"the ids Multiplex 'mp' reads"``): the set,
    the feed, the span, the reader, the lowest and highest of the ``kind`` it holds (``"ids"``,
    ``"labels"``; noting that they count from 0 where they lie in ``[1, high]``) and the first
    rows outside, a sequence set's named by their sequence
    (:func:`~distconv.sequence_set.row_words`)."""
    count, first, low, high = found
    counted = "class ids" if kind == "labels" else kind
    start = f" ({counted} count from 0)" if low >= 1 and high == span[1] else ""
    rows = rows_named(count, first, row_words(data).get(feed, str))
    return DataError(
        f"the {what} set's {feed!r} holds {count} row(s) outside [{span[0]}, {span[1]}), "
        f"{reader}; its {kind} lie in [{low}, {high}]{start}: {rows}"
    )


def refuse_labels_past_classes(
    network: Network, forward: Forward, train: Mapping[str, Any], test: Mapping[str, Any] | None
) -> None:
    """Refuse a label of either set outside ``[0, classes)`` of the loss that reads it.

    The loss checks each batch, so such a label stopped a fit at whatever step the shuffle
    reached its row, naming the batch's range and not the row; a test set's after the whole
    first epoch, in its evaluation, before its checkpoint. Every integer label of both sets is
    read here, in chunks, as the NaN check reads floats.

    Raises:
        DataError: naming the set, the feed, the range and the first rows outside it.
    """
    for what, arrays in [("training", train), ("test", test)]:
        if arrays is None:
            continue
        try:  # each set's own width: a selective FC scores the columns its rows select
            scored = scored_classes(network, forward, arrays)
        except ValueError:
            if what == "training":
                raise
            continue  # a test set the model cannot read: check_test_set names the layer
        for feed, (classes, loss) in scored.items():
            found = label_rows_outside(arrays_of(arrays)[feed], classes)
            if found[0]:
                reader = f"the classes {loss.label} scores"
                raise outside_refusal(what, arrays, feed, (0, classes), reader, found, "labels")


def scored_classes(
    network: Network, forward: Forward, arrays: Mapping[str, Any]
) -> dict[str, tuple[int, Layer]]:
    """For each feed of integer labels of ``arrays`` (a data set) that a softmax cross-entropy
    (the one loss of :mod:`distconv.layers` that takes class ids, or a subclass) reads as they
    are: how many classes its logits score on that set, and that loss; the fewest where
    several losses read one feed.

    Their width is known once an example has gone through the model: one of ``arrays`` is
    forwarded, its labels set to class 0 (a label of its own past the classes failed there,
    unnamed). It is the set's own: a selective FC's logits are the columns its rows select,
    and a test set may select more candidates than the training set (a sampled softmax
    evaluated on a longer list). A model that cannot read the training set fails there as its
    first step would. A network with no such loss forwards nothing.
    """
    feeds, flat = set(network.feed_names), arrays_of(arrays)
    losses = [
        (network[name], labels)
        for name in network.wiring
        if (pair := network.softmax_inputs(name)) is not None
        and (labels := pair[1]) in feeds
        and labels in flat
        and flat[labels].dtype.kind in "iu"  # not ids: the loss names that at the forward
    ]
    if not losses or set_length(arrays) == 0:
        return {}
    # its labels zeros on the host: fed as any host array (the set's may be a device's)
    example = one_example(arrays, tuple(feed for _, feed in losses))
    with forward_only():
        forward(example, np.arange(1))
    classes: dict[str, tuple[int, Layer]] = {}
    for loss, feed in losses:
        width = int(loss.inputs[0].value.shape[1])  # (1, classes): it refused any other shape
        if feed not in classes or width < classes[feed][0]:
            classes[feed] = (width, loss)
    return classes


def label_rows_outside(
    labels: Any, classes: int, chunk_bytes: int = NOT_FINITE_CHUNK_BYTES
) -> tuple[int, list[int], int, int]:
    """How many rows of ``labels`` (class ids, one per row or a row of them each) hold one
    outside ``[0, classes)``: :func:`rows_outside`."""
    return rows_outside(labels, 0, classes, chunk_bytes)


def rows_outside(
    ids: Any, low: int, high: int, chunk_bytes: int = NOT_FINITE_CHUNK_BYTES
) -> tuple[int, list[int], int, int]:
    """How many rows of ``ids`` (one per row or a row of them each) hold one outside
    ``[low, high)``, the first few, and the lowest and highest id (0 and 0 for none). Read
    about ``chunk_bytes`` at a time; a chunk in range, by its min and max, gets no mask."""
    lowest, highest = [], []

    def outside(rows: Any) -> Any:
        part = to_host(rows).reshape(len(rows), -1)
        if part.size == 0:
            return None
        lowest.append(int(part.min()))
        highest.append(int(part.max()))
        if lowest[-1] >= low and highest[-1] < high:
            return None
        return ((part < low) | (part >= high)).any(axis=1)

    count, first = marked_rows(ids, outside, chunk_bytes)
    return count, first, min(lowest, default=0), max(highest, default=0)


def refuse_other_shapes(
    network: Network, forward: Forward, train: Mapping[str, Any], test: Mapping[str, Any] | None
) -> None:
    """Refuse a test set whose examples of a float feed of the model both sets have differ in
    shape from the training set's where the model's outputs do not: a model whose pooling
    floors 18x18 and 16x16 images to one size reads both, and evaluated a test set left
    uncropped without a word. A fully convolutional model evaluated on whole images after
    training on crops gives outputs of their size, scored against targets of it: that test set
    is the model's own. The outputs compared are the layers' that a layer no other reads (a
    loss) reads, of one example of each set (forwarded only where a feed differs). Ids
    (integer and bool feeds) are not compared: a model floors none of them, and one reads
    another count of them by design (a selective FC's candidate columns: a sampled softmax
    evaluated on a longer list; labels ``(N, 1)`` beside ``(N,)``); ids it cannot read fail
    the test example's forward. Nor is an array no layer reads: it is not fed.

    Raises:
        DataError: naming the feed, both shapes and the way out: a reshape where both hold as
            many values an example (a transpose too where the sizes are another order of the
            training set's), else a crop or resize.
    """
    differ = _other_shapes(network, train, test)
    if not differ or _output_shapes(network, forward, test) != _output_shapes(
        network, forward, train
    ):
        return
    feed, mine, theirs = differ[0]
    said = _shapes_told(feed, mine, theirs)
    raise DataError(f"{said}; give both sets one example shape ({_one_shape(mine, theirs)})")


def _other_shapes(
    network: Network, train: Any, test: Any
) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """``(feed, test example shape, training example shape)`` of each float feed of
    ``network`` both sets have whose examples differ in shape, in the test set's order: every
    rank alike. An array no layer reads (a note beside the images) is none: it is not fed."""
    tested, trained = arrays_of(test), arrays_of(train)
    feeds = set(network.feed_names)
    return [
        (feed, tuple(a.shape[1:]), tuple(trained[feed].shape[1:]))
        for feed, a in tested.items()
        if feed in trained
        and feed in feeds
        and a.dtype.kind not in "iub"
        and trained[feed].dtype.kind not in "iub"
        and a.shape[1:] != trained[feed].shape[1:]
    ]


def _shapes_told(feed: str, mine: tuple[int, ...], theirs: tuple[int, ...]) -> str:
    """Both example shapes of ``feed``, the test set's ``mine``, as a refusal says them."""
    return f"the test set's {feed!r} holds examples of shape {mine}, the training set's {theirs}"


def _one_shape(mine: tuple[int, ...], theirs: tuple[int, ...]) -> str:
    """How a test set's examples of shape ``mine`` get the training set's ``theirs``: the same
    number of values reshaped (a crop or resize would change them), else cropped or resized;
    the same sizes in another order (images channels last, ``(H, W, C)`` for ``(C, H, W)``)
    transposed where they are the same axes, which a reshape would mix without an error; not
    where only axes of size 1 moved (``(H, W, 1)``), which a reshape mixes none of. Axes of
    size 1 are left out of both sides alike: ``(1, H, W, C)`` for ``(C, H, W)`` is told to
    transpose too, that axis left out."""
    values = math.prod(theirs)
    if math.prod(mine) != values:
        return "crop or resize"
    sizes, wanted = [n for n in mine if n > 1], [n for n in theirs if n > 1]
    if sizes != wanted and sorted(sizes) == sorted(wanted):
        # a transpose keeps the number of axes: say those of size 1 to leave out or add
        units = "" if len(mine) == len(theirs) else ", its axes of size 1 left out or added,"
        return (
            f"transpose the test set's axes{units} to {theirs} where they are the same axes in "
            f"another order, channels last perhaps: a reshape would mix their values; else "
            f"reshape them: both hold {values} values"
        )
    return f"reshape the test set's to {theirs}: both hold {values} values"


def _output_shapes(network: Network, forward: Forward, arrays: Any) -> dict[str, tuple[int, ...]]:
    """The example shape of each layer's output that a layer no other reads (a loss) reads,
    once one example of ``arrays`` has gone through the model."""
    read = {name for inputs in network.wiring.values() for name in inputs}
    scored = {
        name
        for sink, inputs in network.wiring.items()
        if sink not in read
        for name in inputs
        if name in network.layers
    }
    with forward_only():
        forward(arrays, first_example(arrays))
    return {
        name: tuple(network.outputs[name].shape[1:])
        for name in sorted(scored)
        if network.outputs[name].value is not None
    }


def check_test_set(
    network: Network,
    forward: Forward,
    train: Mapping[str, Any],
    test: Mapping[str, Any] | None,
) -> None:
    """Forward one test example: a test set the model cannot read (images of another size,
    say) failed only in the first epoch's evaluation, and that epoch was lost.

    Raises:
        DataError: its example does not go through the model (one of the training set does:
            a model that reads neither fails as its first step would, and its traceback does
            not start with the test set's error), naming the layer that refused it and, as
            that layer may be far from the data (``fc1`` for images of another size), the
            first float feed whose example shape is not the training set's, with the way out.
    """
    if test is None:
        return
    with forward_only():
        try:
            forward(test, first_example(test))
            return
        except ValueError as exc:
            refused = exc
        forward(train, first_example(train))  # outside the except: see Raises
    said = f"the test set does not fit the model: {exception_line(refused)}"
    for feed, mine, theirs in _other_shapes(network, train, test)[:1]:
        said += f"; {_shapes_told(feed, mine, theirs)}: {_one_shape(mine, theirs)}"
    raise DataError(said) from refused
