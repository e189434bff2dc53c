"""The note on an error that a rank told the other ranks of before raising it (a setup that
failed on this rank alone, a meeting's description that cannot be sent), in the user's words:
what it means for them is that the others' errors are this one's echo, and the job stops."""

from __future__ import annotations


def others_told(rank: int) -> str:
    """``the other ranks were told of this error and stop too, naming rank R (...)``: so a user
    who reads rank ``rank``'s one-line error knows the other ranks' failures follow from it,
    and that none waits for it until a timeout. Where every rank failed alike (NaN data on
    each), each says its own error, not R's: the note says so too."""
    return (
        f"the other ranks were told of this error and stop too, naming rank {rank} (a rank "
        "that failed as well names its own error)"
    )
