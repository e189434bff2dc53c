"""A parameter-server worker that cannot set up tells the other workers, through the shards
(:meth:`SetupFailure.fail_setup`): they waited in their start-up job check for it until the
shards' timeout, its close (a sync never set up says no bye) telling them nothing.

It says ``hello`` and joins the job check's gather on shard 0 as a setup does, with a
description naming its error alone (``name``: "setup failed on rank R before its job check:
Type: text"), then ``bye``. Whichever hello a shard accepted first, every other worker's setup
raises a :class:`~distconv.sync.errors.JobRefused` naming this rank and that text at once: the
shard refuses their hello as another job's, or the job check
(:func:`~.job_check.check_all_equal`) names the difference on every rank, or, where the shard
refused this rank's hello and the others wait in the gather, the shard fails that gather at
this rank's bye (it counts a refused rank there), as a refusal of the job, in those words.
No shard or wire change: hello, gather and bye are those of any job whose ranks differ.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from distconv.messages import described
from distconv.sync.errors import SyncError, setup_failure_description
from distconv.sync.ps.beats import HeartbeatOwner


class SetupFailure(HeartbeatOwner):
    """The failed start of :class:`~distconv.sync.ps.client.PServerSync` (a mixin), whose
    hello beats as a setup's: the heartbeat's owner. It reads ``world_size`` and ``closed``,
    and calls the sync's ``_hello``, ``all_equal`` and ``_say_bye``."""

    world_size: int
    closed: bool
    _hello: Callable[[dict[str, Any]], list[dict[str, Any]]]
    all_equal: Callable[[Mapping[str, Any]], None]
    _say_bye: Callable[[], None]

    def fail_setup(self, error: BaseException) -> None:
        """This rank cannot set up (``error``): say hello, make the job check with a
        description naming ``error`` and say bye (see the module docstring), then return; the
        caller raises ``error`` next (its bye then carries it, from an ``except`` clause, as
        ``Trainer.fit``'s). Its own refusal there (the other job's, as every rank's) is
        dropped, and so is a shard that cannot be reached: ``error`` is the cause. A script
        may set up again (a new hello), or close. Nothing on a closed sync, or with one
        worker (none waits for it)."""
        if self.closed or self.world_size == 1:
            return
        try:
            text = described(error)
        except Exception:  # its __str__ raised (user code): the others are told all the same
            text = f"{type(error).__name__} (its text could not be made)"
        description = setup_failure_description(self.rank, text)
        self._stop_heartbeat()  # a second setup's: the shards hear this hello's run
        try:
            with contextlib.suppress(SyncError):  # JobRefused, on every rank: the others told
                self._start_heartbeat(self._hello(description))  # as setup waits: beating
                self.all_equal(description)
        finally:
            self._stop_heartbeat()
            # now, not at close, which may never come: a rank whose hello a shard refused
            # fails the gather the others wait in at its bye
            self._say_bye()
        if hasattr(error, "add_note"):  # Python 3.11 on
            error.add_note("setup made its job check all the same, telling the other ranks")
