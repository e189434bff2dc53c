"""How a weights loader's messages name what it was given: the command line's flags, or a
script's call, which has none.

:func:`distconv.init_from.load_weights` serves both ``distconv train --init-from PATH`` and a
script that loads a run's weights itself. The command line's words name its flags
(``--init-from``, ``--out``, ``--dtype``). A script passed no flag: its words begin with the
call it made (``load_weights run/a: ...``) and name the model rather than a run. One template
per message, filled from the words of the caller: no message is written twice.

The launcher reads the refusals of both back (``distconv.refused_starts``), behind
:data:`SOURCES`' :attr:`SourceWords.flag`: a refusal every attempt of a job would meet again
(weights that do not fit, nothing at PATH) is restarted by none. So a change of a ``flag``
here is read there, and the words behind it stay as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceWords:
    """The words that differ between the command line's messages and a script's.

    Attributes:
        flag: what names the source before its path, and begins each refusal: the command
            line's flag (``"--init-from "``) or the script's call (``"load_weights "``).
        run_folder: what a run's output folder is called (``"--out"``, ``"folder"``).
        ours: whose dtype the weights are cast to (``"this run's"``, ``"this model's"``).
        dtype_flag: the flag that sets that dtype, in parentheses, or "".
        cast_why: why the weights are cast, where a resume would refuse the cast.
        start: what to do with the distconv that wrote a checkpoint of another format version.
    """

    flag: str
    run_folder: str
    ours: str
    dtype_flag: str
    cast_why: str
    start: str

    @property
    def name(self) -> str:
        """What names the source, without its space: ``--init-from``, ``load_weights``."""
        return self.flag.strip()

    def source(self, path: str | os.PathLike) -> str:
        """The source as a message names it first: ``--init-from run/a``, or
        ``load_weights run/a``."""
        return f"{self.flag}{os.fspath(path)}"


#: ``distconv train --init-from PATH`` (and :class:`~distconv.init_from.InitFromCheckpoints`)
INIT_FROM_FLAG = SourceWords(
    flag="--init-from ",
    run_folder="--out",
    ours="this run's",
    dtype_flag=" (--dtype)",
    cast_why="a new run reproduces nothing, so they are cast as it starts",
    start="start the new run",
)

#: a script's own :func:`~distconv.init_from.load_weights` call
SCRIPT_CALL = SourceWords(
    flag="load_weights ",
    run_folder="folder",
    ours="this model's",
    dtype_flag="",
    cast_why="weights alone are loaded, so they are cast (restore_checkpoint casts none)",
    start="load it",
)

#: ``distconv evaluate --from PATH``, which loads the weights into the model its run recorded
#: (in that run's dtype); not a launched job's loader, so not among :data:`SOURCES`
EVALUATE_FROM = SourceWords(
    flag="--from ",
    run_folder="--out",
    ours="its run's",
    dtype_flag="",
    cast_why="evaluate computes in the dtype the checkpoint records for its run",
    start="evaluate it",
)

#: every loader's words, by which the launcher tells their refusals (``distconv.refused_starts``)
SOURCES = (INIT_FROM_FLAG, SCRIPT_CALL)
