"""What a checkpoint read or write raises: a :class:`CheckpointError`, of one of three kinds
that tell a resume what to do with the file (set it aside, pass it over, retry). Each message is
one line that names the file. :mod:`distconv.checkpoint` raises them, and callers import them
from there: each class is named as its (``distconv.checkpoint.CheckpointError``).
"""

from __future__ import annotations


class CheckpointError(RuntimeError):
    """A checkpoint is missing, unreadable, or does not fit the model; the message names it."""


class CheckpointDamaged(CheckpointError):
    """The file's content is unusable (truncated, failing its checksum, bad metadata, another
    format): reading it again gives the same answer."""


class CheckpointVersionError(CheckpointError):
    """The file is a distconv checkpoint of another format version: whole, most likely, and
    readable by the distconv that wrote it, so it is neither damage nor passed over."""


class CheckpointReadError(CheckpointError):
    """The operating system could not read the file (I/O error, permissions, missing), or this
    host lacks what reading it takes (memory, ``ml_dtypes``): the content may be fine, so a
    caller retries rather than treating the file as damaged."""


# named where callers import them and where they were defined until they moved here: a
# traceback's last line (``distconv.checkpoint.CheckpointError: ...``, which the launcher reads),
# a pickle an earlier distconv can load, and the user errors' names
# (:data:`distconv.user_errors.USER_ERROR_NAMES`) all say distconv.checkpoint
for _error in (CheckpointError, CheckpointDamaged, CheckpointVersionError, CheckpointReadError):
    _error.__module__ = "distconv.checkpoint"
del _error
