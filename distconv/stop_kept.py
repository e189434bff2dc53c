"""What a run stopped by SIGTERM or Ctrl-C kept, and the command that goes on from it: the lines
``distconv train`` and :func:`~distconv.script_main.run_main` say before their stop line.

The stop line (``stopped by SIGTERM after step N``: :meth:`~distconv.stop_agreement.AgreedStop.
said`) stays the process's last, as the launcher reads it; it names neither the checkpoint nor
how to go on, and a user reading a plain terminal (no ``distconv-launch``, whose report says
how to go on itself) was left to guess both. So the chief says, before it, which checkpoint
holds the step (read from the run's folder: what a resume will find, not what the save meant
to write) and, where no launcher says it, the command that resumes the run.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from distconv import stop_request
from distconv.checkpoint import CheckpointError
from distconv.checkpoint_manifest import CHIEF
from distconv.files import describe_os_error
from distconv.launch_env import launch_id
from distconv.logs import as_log_line
from distconv.messages import quoted_in, say, shell_word
from distconv.run_dir import RunDirectory
from distconv.run_files import CHECKPOINTS
from distconv.stop_request import Preempted

#: the flags a resume command replaces with its own ``--resume`` (``--overwrite`` would
#: delete the run it is meant to continue; ``--resume auto`` would start afresh, unsaid,
#: where the checkpoint is gone)
_RESUME_FLAGS = ("--resume", "--overwrite")


def kept_words(out: str | os.PathLike, step: int | None) -> tuple[str, Path | None]:
    """What the run in ``out`` kept at a stop after step ``step`` (None: not known): the words,
    and the chief's file of the checkpoint a resume continues from (None where none is
    complete). The run's folder is read, not trusted: a resume finds what is there."""
    try:
        newest = RunDirectory(out).latest()
    except (CheckpointError, OSError) as exc:  # a checkpoints link to a disk gone, EACCES
        why = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
        return f"cannot tell which checkpoint {out} holds: {why}", None
    if newest is None:
        return (
            f"no complete checkpoint in {Path(out) / CHECKPOINTS}: --resume finds nothing "
            "to continue, --resume auto starts afresh"
        ), None
    file = newest.part(CHIEF)
    if step is None or newest.step == step:
        return f"the checkpoint of step {newest.step} is kept in {file}", file
    return (
        f"no complete checkpoint of step {step}: the newest, which a resume continues from, "
        f"is step {newest.step}'s, kept in {file}"
    ), file


def program_words(
    argv: Sequence[str] | None = None, orig: Sequence[str] | None = None
) -> list[str]:
    """The words that started this program, as typed: ``python3 -m distconv``, ``python3
    script.py``, ``python3 -m mpi4py script.py`` (the interpreter's own words before
    ``sys.argv``'s); ``distconv`` for the installed command where it is on ``PATH`` (its
    interpreter, from the script's first line, was never typed)."""
    argv = sys.argv if argv is None else argv
    orig = getattr(sys, "orig_argv", argv) if orig is None else orig
    if os.path.basename(argv[0]) == "distconv":  # the console script
        return ["distconv"] if shutil.which("distconv") else [argv[0]]
    return list(orig[: len(orig) - len(argv) + 1])


def without_resume_flags(args: Sequence[str], options: Sequence[str] | None = None) -> list[str]:
    """``args`` (a command's own, after its program's words) without ``--resume [auto]`` and
    ``--overwrite``, written in full, with ``=``, or, given the parser's ``options``, as the
    unique prefix of them that argparse takes them by (``--overw``); everything after ``--``
    stays. Without ``options`` (a script's, whose parser is not known) only the full words."""
    kept: list[str] = []
    at = 0
    while at < len(args):
        word = args[at]
        if word == "--":
            return [*kept, *args[at:]]
        name, eq, _ = word.partition("=")
        flag = _option_named(name, options or _RESUME_FLAGS, abbreviated=options is not None)
        at += 1
        if flag not in _RESUME_FLAGS:
            kept.append(word)
        elif flag == "--resume" and not eq and args[at : at + 1] == ["auto"]:
            at += 1  # its one value, which argparse took from the next word (another word
            # there is a positional argument of a script whose own --resume takes none)
    return kept


def _option_named(name: str, options: Sequence[str], abbreviated: bool) -> str | None:
    """The option of ``options`` that ``name`` names as argparse reads it: itself, or
    (``abbreviated``) the one option it is a prefix of; None where it names none, or several."""
    if name in options:
        return name
    if not abbreviated or not name.startswith("--"):
        return None
    matches = [option for option in options if option.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def script_resume_words() -> tuple[list[str], bool]:
    """The words of a script's command that resumes its run, and whether they are known to:
    its command line with ``--resume`` in place of the resume flags it was given. A script
    that was given ``--resume`` or ``--overwrite`` takes them
    (:func:`~distconv.script_flags.add_run_flags`); of another, whose parser is not known
    here, the words are a guess its caller says as one."""
    args = sys.argv[1:]
    ends = args.index("--") if "--" in args else len(args)
    takes = any(word.partition("=")[0] in _RESUME_FLAGS for word in args[:ends])
    return [*program_words(), *without_resume_flags(args), "--resume"], takes


def resume_command(words: Sequence[str]) -> str:
    """``words`` as one line that pastes back into a shell as the same command."""
    return " ".join(shell_word(word) for word in words)


def train_resume_words(out: str, out_given: bool, argv: Sequence[str] | None = None) -> list[str]:
    """The words of the ``distconv train`` command that resumes the run this process trains in
    ``out``: its own command line, ``--resume`` in place of its resume flags, ``--out OUT``
    where it took the default (``out_given`` false: a later default may name another folder).
    ``argv``: the words :func:`distconv.cli.main` was handed in place of ``sys.argv[1:]`` (a
    caller's own ``main([...])``), said after ``distconv`` (``python -m distconv`` where no
    ``distconv`` is on ``PATH``: a notebook's kernel run without its environment's ``bin``);
    None: the process's command line."""
    from distconv.train_args import add_train

    parser = add_train(argparse.ArgumentParser().add_subparsers())
    # argparse lists no options publicly; its abbreviations are read against all of them
    options = [option for action in parser._actions for option in action.option_strings]
    program, args = (program_words(), sys.argv[1:]) if argv is None else (_distconv(), argv)
    at = args.index("train") + 1 if "train" in args else 0  # -q before it stays as it is
    rest = without_resume_flags(args[at:], options)
    extra = [] if out_given else ["--out", out]
    return [*program, *args[:at], *rest, *extra, "--resume"]


def _distconv() -> list[str]:
    """The words that run ``distconv`` from a shell: the installed command where it is on
    ``PATH``, else this interpreter's ``-m distconv``."""
    return ["distconv"] if shutil.which("distconv") else [sys.executable, "-m", "distconv"]


def say_kept(
    program: str,
    out: str | os.PathLike,
    stop: Preempted,
    words: Callable[[], Sequence[str]],
    fmt: str | None = None,
    guess: str = "",
) -> None:
    """Say, as ``program``'s lines before its stop line, what ``stop`` kept in ``out`` and,
    given ``words`` (the words of the command that resumes it, made only now), that command
    (``guess``: words that say when it holds, where that is not known), which each of the
    stop's ranks (:attr:`Preempted.world_size`) runs again. Under ``distconv-launch``
    (``DISTCONV_LAUNCH``) the launcher's report says how to go on, with its own ``--job-id``:
    the command is not said twice. JSON lines under a JSON log (``fmt``: the format asked for,
    for a log not set up), each with its facts as keys (``checkpoint``, ``command``)."""
    kept, file = kept_words(out, stop.step)
    checkpoint = None if file is None else str(file)
    _say(program, quoted_in(kept, [out]), fmt, out=os.fspath(out), checkpoint=checkpoint)
    if launch_id() is not None:
        return
    again = list(words())
    if file is None:  # nothing to resume: --resume would be refused
        again[-1:] = ["--resume", "auto"]
    command = resume_command(again)
    if stop.world_size > 1:  # another rank's command differs (its --rank): this one's, named
        how = f"start the job's {stop.world_size} ranks again as before, with --resume{guess}"
        _say(program, f"to go on, {how}; this rank's command: {command}", fmt, command=command)
    else:
        _say(program, f"to go on{guess}: {command}", fmt, command=command)


def say_script_kept(program: str, stop: Preempted, fmt: str | None = None) -> None:
    """Say, as a script's lines before its stop line (:func:`~distconv.script_main.run_main`'s),
    the notes ``stop`` carries but the fit's own way on, then, on the chief (the rank that
    wrote the checkpoint) of a fit's stop, what it kept: the checkpoint file, as ``distconv
    train`` names it, and where no launcher says it (``DISTCONV_LAUNCH``) the command that
    resumes the run; or that it saved nothing (the Trainer had no ``out_dir``). The script's
    own flags are not known here: the command is the script's own with ``--resume``, said as a
    guess unless the script was given a resume flag."""
    from distconv.epoch_run import way_on  # the fit's own note, which these lines say better

    notes = [note for note in getattr(stop, "__notes__", ()) if isinstance(note, str)]
    for note in notes:
        if stop.step is None or note != way_on(stop.out_dir):
            _say(program, quoted_in(note, sys.argv[1:]), fmt)
    if stop.step is None or not stop.is_chief:  # a script's own stop; a rank that wrote none
        return
    if stop.out_dir is None:
        _say(program, f"{_SAVED_NOTHING}: a new run of the script starts afresh", fmt)
        return
    words, takes = script_resume_words()
    guess = "" if takes else " (if the script takes distconv.script_flags' --resume)"
    say_kept(program, stop.out_dir, stop, lambda: words, fmt, guess)


#: a script's stop whose Trainer had no output directory
_SAVED_NOTHING = "nothing saved (the Trainer had no out_dir, --out)"


def _say(
    program: str, line: str, fmt: str | None = None, level: int = logging.INFO, **fields: object
) -> None:
    """Say ``line`` as ``program``'s (JSON under a JSON log, at ``level``; ``fmt``: the format
    asked for, for a log not set up), whatever the log's level: a stop's lines are its ending,
    said under ``-q`` as the stop line is."""
    say(as_log_line(f"{program}: {line}", level, fmt, **fields))


@contextmanager
def kept_said_at_stop(program: str, out: str, words: Callable[[], Sequence[str]]) -> Iterator[None]:
    """Around a command's one fit, into ``out``: where a stop (:class:`Preempted`) ends it, the
    chief (the rank that writes the checkpoint) says what it kept and the command that goes on
    (:func:`say_kept`), then the stop propagates to say its own line.

    A stop signal after the fit's last stop check (in its last evaluation, its last checkpoint,
    its plot) stops nothing: the run finished. The library's warning of it speaks of a later fit
    of this process and of ``drop_carried()``, which a command has neither of: it is dropped, and
    each rank that got one says so in the command's words (a warning; the run ends as finished)."""
    warned, stop_request.warns_handed_on = stop_request.warns_handed_on, False
    try:
        yield
    except Preempted as stop:
        stop_request.hold_sigterm_until_exit()  # from the stop to the command's 143
        if stop.is_chief:
            say_kept(program, out, stop, words)
        raise
    finally:
        stop_request.warns_handed_on = warned
        late = stop_request.drop_carried()
    name = stop_request.stop_signal([float(signal.SIGTERM in late), float(signal.SIGINT in late)])
    if name is not None:
        _say(program, f"{name.name} {_LATE}", level=logging.WARNING)


#: what a command says of a stop signal that came after its fit's last stop check
_LATE = (
    "came after the last stop check, as the run wrote its last files: it finished all the "
    "same, its last checkpoint and metrics written; nothing is left to go on with"
)
