"""The flags a training script built on the public API takes (``examples/`` do), checked
where they are read, with the types ``distconv train`` reads its own with.

A bad value is argparse's one usage line and status 2, as ``distconv train`` says it, where
the examples printed a traceback from deep in the Trainer (``--batch-size 0``, ``--epochs -1``,
``--resume bogus``, ``--lr 0``, ``--optimizer bogus``) or, for ``--out ""``, wrote the run into
the current directory. :func:`refusals` turns what the output directory refuses (a run there
and no ``--resume``, a file in the way) into one line too, and :func:`print_last_epoch` and
:func:`print_result` print a script's closing lines as ``distconv train`` prints its own.

Example:
    >>> parser = argparse.ArgumentParser()
    >>> add_run_flags(parser, epochs=30, batch_size=32)
    >>> parser.add_argument("--lr", type=positive_float, default=0.01)
    >>> args = parser.parse_args()
    >>> with refusals(parser):
    ...     Trainer(model, sync, args.batch_size, out_dir=args.out).fit(data, None, args.epochs,
    ...                                                                 resume=args.resume)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import distconv  # annotations name types through it: get_type_hints imports them then
from distconv.checkpoint import CheckpointError
from distconv.logs import as_log_line, error_line
from distconv.messages import quote_in_errors, quoted_in
from distconv.names import OPTIMIZER_NAMES
from distconv.number_text import int_at_least
from distconv.stdout_drop import drop_stdout
from distconv.sync.mpi import leaving
from distconv.sync.peers import peer_failure
from distconv.train_args import add_accumulate_flag, add_dtype_flag, add_resume_flags
from distconv.train_flag_types import not_blank, positive_float

if TYPE_CHECKING:  # the Trainer imports the whole stack; a type is all this module needs
    import distconv.trainer

__all__ = [
    "add_accumulate_flag",
    "add_dtype_flag",
    "add_run_flags",
    "count",
    "directory",
    "optimizer",
    "positive_float",
    "print_last_epoch",
    "print_result",
    "refusals",
]

#: argparse types: an integer of at least ``low``; a finite number above 0; a path that is not
#: blank (an unset variable names no directory). ``distconv train``'s own, not copies of them.
count = int_at_least
directory = not_blank


def optimizer(text: str) -> str:
    """An argparse type: the name of one of distconv's optimizers, in any case."""
    if text.lower() not in OPTIMIZER_NAMES:
        raise argparse.ArgumentTypeError(
            f"unknown optimizer {text!r}; choose one of {', '.join(OPTIMIZER_NAMES)}"
        )
    return text.lower()


def add_run_flags(parser: argparse.ArgumentParser, epochs: int, batch_size: int) -> None:
    """``--epochs``, ``--batch-size``, ``--out``, and ``--resume [auto]`` or ``--overwrite``
    (:func:`~distconv.train_args.add_resume_flags`: ``args.resume`` is what
    :meth:`~distconv.trainer.Trainer.fit` takes), as every example takes them."""
    # at least 1, as distconv train's --epochs: 0 trained nothing, said nothing, exited 0 and
    # left --out holding an empty metrics.jsonl
    parser.add_argument(
        "--epochs", type=count(1), default=epochs, help="epochs in all (%(default)s)"
    )
    parser.add_argument(
        "--batch-size",
        type=count(1),
        default=batch_size,
        help="examples per forward/backward pass on each worker (%(default)s)",
    )
    parser.add_argument("--out", type=directory, help="checkpoints and metrics (none when omitted)")
    add_resume_flags(parser)  # distconv train's: the two exclude each other


@contextmanager
def refusals(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Inside it, a checkpoint or output directory refused (:class:`CheckpointError`: a run in
    ``--out`` and no ``--resume``, nothing to resume, a file in the way, a full disk) ends the
    script with ``prog: error: ...`` and status 1, after a ``prog: note: ...`` line for each
    line of the notes the error carries (a JSON line each under
    ``init(log_format="json")``, as :func:`~distconv.distributed.run_main` writes its own; a
    value of the command line with a character that does not print in it shown as a shell
    word, ``$'a\\nb'``, as ``distconv train`` shows it). Under MPI, where the sync closed
    in a ``finally`` aborts the job first, the rank's abort line says it (its notes on lines
    before it), without the traceback, as under ``distconv train``. Another rank's failure
    goes on to ``run_main``, which exits 75."""
    brief = leaving.BRIEF_ERRORS
    leaving.BRIEF_ERRORS = (*brief, CheckpointError)
    # one_line squeezed --out $'a\nb' to "a b", a path with a space: another folder
    quote_in_errors(_given_values(sys.argv[1:]))
    try:
        yield
    except CheckpointError as exc:
        if peer_failure(exc) is not None:
            raise
        # JSON under a JSON log; the notes it carries (the way out) on lines before it
        parser.exit(1, error_line(parser.prog, exc) + "\n")
    finally:
        leaving.BRIEF_ERRORS = brief


def _given_values(argv: list[str]) -> list[str]:
    """The values on a command line: each word, and what follows ``=`` in ``--flag=value``."""
    return [word.partition("=")[2] if word.startswith("--") else word for word in argv]


def print_result(line: str, **fields: Any) -> None:
    """Print a script's closing ``line`` on stdout as ``distconv train`` prints its own: a
    JSON object under ``init(log_format="json")`` (``fields`` as keys of their own), and a
    reader gone (``script.py | head -c 0``) no failure of a run that finished: stdout then goes
    to /dev/null, where a bare ``print`` raised a BrokenPipeError traceback and status 1."""
    try:
        print(as_log_line(line, **fields), flush=True)
    except BrokenPipeError:
        drop_stdout()


def nothing_left(out: str | None, epoch: int, steps: int) -> str:
    """The closing line of a run resumed past its ``--epochs``: ``nothing left to do: the run
    in OUT has finished epoch N``, and where its newest checkpoint lies ``steps`` into epoch
    N + 1 (a checkpoint mid-epoch), how to finish that epoch: its weights are past N's end, and
    the line alone read as though it had stopped there."""
    line = f"nothing left to do: the run in {out} has finished epoch {epoch}"
    if not steps:
        return line
    return (
        f"{line} and is {steps} steps into epoch {epoch + 1}; --epochs counts the run's epochs "
        f"from its start: --epochs {epoch + 1} finishes that one"
    )


def print_last_epoch(trainer: distconv.trainer.Trainer, out: str | None) -> dict[str, Any] | None:
    """Print how the rank's ``fit`` ended, as ``distconv train`` says it (:func:`print_result`):
    the last epoch's test loss (its training loss where ``fit`` had no test set), or, where a
    resume found the run in ``out`` past ``--epochs``, ``nothing left to do: the run in OUT has
    finished epoch N`` (nothing was said: a run that trained nothing looked like a script that
    never ran). Call it on the chief only.

    Returns:
        The last epoch's record (``trainer.history[-1]``), or None where nothing trained.
    """
    where = {} if out is None else {"out": out}  # a JSON key, as distconv train's lines have
    if not trainer.history:
        epoch = trainer.pos.epoch
        line = nothing_left(out, epoch, trainer.pos.step_in_epoch)
        print_result(quoted_in(line, [out or ""]), epoch=epoch, **where)  # $'a\nb': one line
        return None
    last = trainer.history[-1]
    kind = "test" if "test_loss" in last else "train"  # a fit without a test set has no test loss
    loss = last[f"{kind}_loss"]
    print_result(f"{kind} loss {loss:.5f} after epoch {last['epoch']}", epoch=last["epoch"],
                 **{f"{kind}_loss": loss}, **where)  # fmt: skip
    return last
