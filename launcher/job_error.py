"""Whether an attempt ended on an error of the job itself that the failure blamed did not say:
a rank that stopped on its ``DataError`` and was slow to exit, so that the victim it left (a
worker's exit 75) came first and was blamed, and the launcher's stop then ended that rank. Its
last words say the job error, and the victim's quote it; a restart would meet it again
(:func:`said_elsewhere`, read into :attr:`launcher.failure.Failure.job_error_elsewhere`)."""

from __future__ import annotations

from collections.abc import Sequence

from distconv.rank_endings import job_error_in

from .child import Child
from .failure import last_words
from .named_cause import told_rank
from .rank_reason import rank_text
from .settle import ended_by_stop

#: how much of a job error's message a victim's words must hold (:func:`_quoted`): a rank's
#: word of another's error is cut (``distconv.messages.SENT_ERROR_CHARS``), and said again
#: behind its own words
QUOTED_CHARS = 60


def said_elsewhere(
    children: Sequence[Child], stopped: list[Child], restart: int
) -> tuple[str, str] | None:
    """The job's own error (its class) that a child of the attempt (``restart``) said in its
    last words, and who (``worker 0``; the rank a victim's words tell of, where they say it
    could not set up), where every child that failed of itself failed on it:
    each other child succeeded, stopped because another rank failed (a worker's exit 75), or
    was ended by the launcher's stop (:func:`~launcher.settle.ended_by_stop`: running as it
    began, in ``stopped``). None where none said one, or where a child failed of anything
    else before the stop, a signal of its own included (an OOM kill, a node lost): that may
    be the cause, and a restart may get past it. A job error in the last words of a child
    that the stop ended counts only where a victim's words quote it (:func:`_quoted`): one
    that said it and went on (a bad shard skipped), at work when the stop came, is no rank
    that the victims waited for."""
    victims = [rank_text(line)[1] for c in children if c.victim for line in c.tail]
    found = None
    for child in children:
        code, who = child.poll(), f"{child.spec.role} {child.spec.rank}"
        if code == 0 and (child.spec.role != "server" or child in stopped):
            continue  # a worker that succeeded, a server that the stop ended
        if child.victim:
            said = job_error_in(last_words(list(child.tail)))
            if said is not None and (told := told_rank(list(child.tail))) is not None:
                who = f"worker {told}"  # it only tells of that rank's: "rank 0 could not set up"
        elif ended_by_stop(child, stopped):
            said = job_error_in(last_words(list(child.tail)))
            said = said if said is not None and _quoted(said, victims) else None
        elif (said := child.failure(restart).job_error) is None:  # failed of itself
            return None
        if said is not None and found is None:
            found = (said[0], who)
    return found


def _quoted(error: tuple[str, str], victims: Sequence[str]) -> bool:
    """Whether a line of the victims' (each as its rank wrote it) holds the message of
    ``error`` (its class and message), its first :data:`QUOTED_CHARS` characters (its class
    where it has none): they stopped because of it (``closed on "LayerError: ..."``, ``rank 0
    could not set up: DataError: ...``). Not by its class: a script's own subclass is told by
    its own name, said by the one of distconv's it derives from."""
    quoted = error[1][:QUOTED_CHARS] or error[0]
    return any(quoted in line for line in victims)
