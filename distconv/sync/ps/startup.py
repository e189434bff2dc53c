"""A shard's start-up requests: a worker's ``hello`` (checked against the job the first
accepted hello set) and rank 0's ``seed``, part by part (split from
:mod:`~distconv.sync.ps.handlers`, which dispatches to them).

The held job changes in one way without a new job: a later setup of the same workers (a
notebook's next ``fit``) whose hellos carry another ``optimizer.lr`` alone
(``optimizer.set_base_lr``). Its first hello here sets the job at that rate; the others of
the setup must carry the same one, and one that does not is refused, naming both ranks
(:meth:`StartupHandlers._took_rate`)."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from distconv.sync.ps.config import HOST_CHARS
from distconv.sync.ps.duplicates import Links
from distconv.sync.ps.incarnations import Incarnation, hello_incarnation, older
from distconv.sync.ps.job_hello import REFUSED_JOB, HelloJob, hello_setup
from distconv.sync.ps.seeding import Seeding
from distconv.sync.ps.setup_notes import SetupNotes
from distconv.sync.ps.state import _Refused
from distconv.sync.ps.stuck import different_jobs, different_rates, one_line
from distconv.sync.ps.values import ValueStore
from distconv.sync.ps.wire import WireError, short

log = logging.getLogger("distconv.pserver")

#: the most characters of a refused hello's first difference quoted (both values, cut short:
#: whole, two large entries made an error reply over the header cap, which no worker reads)
DIFFERENCE_CHARS = 1000

#: the error a held push gets when a new seed drops it
STALE_PUSH = (
    "the shards were seeded again (rank 0 started a new run): this push is of the run before, "
    "dropped"
)


class StartupHandlers(SetupNotes):
    """The ``hello`` and ``seed`` side of :class:`~distconv.sync.ps.server.Shard` (whose state
    it shares), reached through :class:`~distconv.sync.ps.handlers.RequestHandlers`."""

    def _op_hello(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        self._next_job()  # the job before ended: this hello binds it afresh (job_state.py)
        if self._hold_if_claimed(ident, header, arrays):  # another process claims a live rank
            return  # answered once its worker of now speaks, or stays silent (duplicates.py)
        rank, run, host = header["rank"], header.get("run"), header["host"]
        self._heard_run(rank, run)  # a worker of it may outlive the job (job_state.py)
        new_run = run is None or run != self.run_of.get(rank)  # not a second setup of a worker
        setup = self._count_setup(rank, run, hello_setup(header))  # refused or not
        if len(host) > HOST_CHARS or not host.isprintable():  # quoted in every later failure
            if new_run:  # it closes: its bye counts, so the ranks waiting for it learn why
                self.refused_at[rank] = (self.requests, run)
            self.other_job.pop(rank, None)  # its own failure, unlike another job: blamed
            what = f"{len(host)} characters" if len(host) > HOST_CHARS else "not printable"
            raise WireError(
                f"hello: host {short(host)} ({what}): at most {HOST_CHARS} printable characters"
            )
        job = HelloJob.of(header)  # checked first: a malformed one never becomes the job's
        incarnation = hello_incarnation(header)  # as malformed as a bad digest
        self._refuse_earlier_start(rank, incarnation)  # before its note or its job are read
        self._refuse_lost(rank)
        self.hosts[rank] = host  # a note's too: its rank's newest worker (_restarted)
        # a note binds, compares, fails nothing
        self._take_setup_note(rank, run, job, header, incarnation)
        if self.job is None:
            self.job, self.job_rank = job, rank  # which rank set it: see different_jobs
        elif (diff := job.difference(self.job)) is not None and not self._took_rate(
            rank, job, new_run, setup
        ):
            # in the words the waiting ranks get (stuck()), and MPI's JobMismatch: one
            # mismatch reads alike on every rank, the refused one too
            said = self._other_job_words(rank, job, setup, one_line(diff, DIFFERENCE_CHARS))
            if new_run:  # it closes: its bye counts (see _of_latest_run)
                self.refused_at[rank] = (self.requests, run)
            # a second setup of the rank's worker (its own run) too: its bye counts as its
            # run's, and the ranks it leaves waiting hear this, not a peer's failure (stuck())
            self.other_job[rank] = (self.requests, said)
            raise _Refused(said, **REFUSED_JOB)
        self._end_run_before(rank, run)  # (runs.py) with the rank's hello before still known
        self.left.discard(rank)
        self.abandoned.pop(rank, None)  # a step its worker abandoned: a setup starts anew
        if new_run:
            self.hello_at[rank] = self.requests  # see _check_stuck
        self.accepted_at[rank] = self.requests  # see _of_latest_run
        self.accepted_setup[rank] = setup  # see _setup_peers
        self.run_of[rank] = run
        self.processes.track(rank, header.get("process", ""), host)  # see _check_timeouts
        self.process_of[rank] = header.get("process") or ""  # see _hold_if_claimed
        self.links_of[rank] = {}  # its worker's are noted as it speaks (handlers.py)
        self._note_alive(header)
        self.last_step.pop(rank, None)
        self.pushed.pop(rank, None)  # a new worker's steps start again (async: _refuse_repeat)
        self._forget_gathers(rank)
        self._reply(ident, header, seeded=bool(self.blocks), **self._settings())

    def _refuse_earlier_start(self, rank: int, incarnation: Incarnation | None) -> None:
        """Refuse ``rank``'s hello from an earlier start of the job than the rank's hello
        before (:func:`~distconv.sync.ps.incarnations.older`: one launch, a lower restart
        count): the launcher restarted every worker since, so this one is a worker it stopped
        (a hello left in flight, or a process that outlived its stop). Taken, a hello of the
        job took the rank from its worker of the newer start, ended that run (every worker
        restarts) and, as the rank's worker, set the rate of its next fit. The rank's state is
        left as it is: its newer worker's incarnation, run and setup count."""
        latest = self.incarnations.get(rank)
        if incarnation is None or latest is None or not older(incarnation, latest):
            return
        said = (
            f"rank {rank}: this worker is of restart {incarnation[1]} of its launch, and the "
            f"rank's worker of restart {latest[1]} said hello since: a worker of an earlier "
            "start of the job, which the launcher stopped; refused (stop this process)"
        )
        log.warning("shard %d: %s", self.index, said)
        raise _Refused(said)

    def _clear_job(self) -> None:
        super()._clear_job()  # type: ignore[misc]
        #: per worker (its rank and run id), which setup since the latest seed its latest
        #: hello is of (:meth:`_count_setup`); of two workers per rank at most
        #: (:meth:`_forget_replaced_workers`)
        self.setup_of: dict[tuple[int, int | None], int] = {}
        #: per worker that numbers its setups (its hello's ``setup``), its latest hello's
        #: number; of the same workers
        self.setup_said: dict[tuple[int, int | None], int] = {}
        #: per rank, which setup since the latest seed its latest accepted hello is of
        self.accepted_setup: dict[int, int] = {}
        self.process_of: dict[int, str] = {}  # (duplicates.py)
        self.heard_at: dict[int, int] = {}  # (duplicates.py)
        self.links_of: dict[int, Links] = {}  # (duplicates.py)
        #: held hellos outlive a job that ends meanwhile: the next tick takes them in afresh
        self.held_hellos = getattr(self, "held_hellos", {})

    def _seeded_setup(self) -> None:
        """A seed ends the setup its hellos were of: each worker's next hello is of the next."""
        self.setup_of = dict.fromkeys(self.setup_of, 0)
        self.accepted_setup = {}

    def _count_setup(self, rank: int, run: int | None, said: int | None) -> int:
        """Which setup since the latest seed ``rank``'s hello of ``run`` is of, noted; ``said``:
        the hello's ``setup``, its worker's number of the setup (a count of its run's setups
        begun), None from a worker that sends none. A worker's first hello (of a run id not
        seen, or none) is 0, the seeded setup's number: the first setup's are all first hellos,
        and a worker taken back into a seeded job (async, ``--on-worker-loss continue``) starts
        no setup of the others. A later hello is as many setups on as its number is past the
        worker's hello before: 0 for one said again within its setup (while ranks are late to
        the job check: :mod:`~distconv.sync.ps.late_ranks`), 2 after a setup that failed before
        its hello. So the hellos of two workers of one setup are of one number since the seed,
        however they interleave with refusals and rounds, and a slow rank of a failed setup is
        not taken for the next one's. A worker that sends no number is one setup on at each
        hello (its own rounds, or a setup it failed before its hello, put it out of step until
        the next seed: docs/protocol.md, ``hello``).

        Only the counts of two of the rank's workers are kept (:meth:`_forget_replaced_workers`).

        Raises:
            WireError: a number below the worker's hello before (its setups are only begun).
        """
        self._forget_replaced_workers(rank, run)
        worker = (rank, run)
        if run is None or worker not in self.setup_of:
            setup = 0
        else:
            before = self.setup_said.get(worker)
            if said is not None and before is not None and said < before:
                raise WireError(
                    f"hello: setup {said} of this worker's run after its setup {before}"
                )
            on = 1 if said is None or before is None else said - before
            setup = self.setup_of[worker] + on
        self.setup_of[worker] = setup
        if said is not None:
            self.setup_said[worker] = said
        return setup

    def _forget_replaced_workers(self, rank: int, run: int | None) -> None:
        """Before ``rank``'s hello of ``run`` is counted, forget the setup counts of the rank's
        other workers but the one whose hello this shard took last (``run_of``: it may live on
        beside a refused restart, and its next setup must be counted on from its own). A
        restart replaces its rank's worker, so a rank restarted again and again within a job
        (a crash loop, a lost worker taken back each time) added a count per restart for as
        long as the job lasted. A worker forgotten so that speaks again is counted as a first
        hello (:meth:`_count_setup`)."""
        keep = {(rank, run), (rank, self.run_of.get(rank))}
        for worker in [w for w in self.setup_of if w[0] == rank and w not in keep]:
            del self.setup_of[worker]
            self.setup_said.pop(worker, None)

    def _setup_peers(self, rank: int, setup: int) -> list[int]:
        """The other ranks whose hello of ``setup`` (:meth:`_count_setup`) was accepted,
        earliest first."""
        peers = [q for q, at in self.accepted_setup.items() if q != rank and at == setup]
        return sorted(peers, key=self.accepted_at.__getitem__)

    def _took_rate(self, rank: int, job: HelloJob, new_run: bool, setup: int) -> bool:
        """Whether ``job`` (``rank``'s hello) is the held job at a new rate, which this shard
        now holds: a later setup of the same worker (a second ``fit``, after
        ``optimizer.set_base_lr``) whose hello is the first of its setup here (``setup``:
        :meth:`_count_setup`). The others of that setup must carry the same rate
        (:meth:`_other_job_words`); the seed that follows builds the shard's optimizer from it,
        and its checkpoint parts record it. A restarted worker (a new run) with another rate
        is another job, as before: its peers train on."""
        lr = job.new_rate(self.job)
        if lr is None or new_run or self._setup_peers(rank, setup):
            return False
        log.info(
            "shard %d: rank %d's next fit trains at a new rate: optimizer.lr %s, was %s "
            "(optimizer.set_base_lr between fits)",
            *(self.index, rank, lr, (self.job.described or {})["optimizer"].get("lr")),
        )
        self.job, self.job_rank = job, rank
        if self.optimizer is not None:  # as the seed to come will build it (parts record it)
            self.optimizer.set_base_lr(lr)
        return True

    def _other_job_words(self, rank: int, job: HelloJob, setup: int, diff: str) -> str:
        """Why ``rank``'s hello of ``job`` is refused (``diff``): its rate is not the one its
        setup's first hello carried, naming that rank; else another job than the held one."""
        peers = self._setup_peers(rank, setup)
        if peers and job.new_rate(self.job) is not None:  # first: nothing seeded, no fit before
            return different_rates(rank, peers[0], diff, first=not self.blocks)
        return different_jobs(rank, self.job_rank, diff)

    def _op_seed(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """One part of a seed: ``part`` of ``parts`` (0 of 1 when absent), each within the
        message cap. Part 0 starts a fresh seed; the blocks replace the shard's state once the
        last part has arrived, so a shard is never seen half seeded."""
        if header["rank"] != 0:  # (another rank's seed leaves rank 0's in progress alone)
            raise WireError(f"only rank 0 seeds the shards, got rank {header['rank']}")
        # a refused part spoils the seed, rank 0 starts again from part 0: see _spoil_seed
        seeding = self._seed_part(header, arrays)
        seeding.next += 1
        if seeding.next == seeding.parts:
            self._seeding = None
            self._install_seed(seeding)
        self._reply(ident, header)

    def _seed_part(self, header: dict[str, Any], arrays: list) -> Seeding:
        """The seed in progress with this part's blocks added (part 0 starts one); WireError
        for a part out of range or order, or whose params, optimizer or blocks do not fit."""
        part, parts = header.get("part", 0), header.get("parts", 1)
        if not 0 <= part < parts:
            raise WireError(f"seed part {part} of {parts}")
        if part == 0:
            self._seeding = Seeding(header, parts)
        elif self._seeding is None or (part, parts) != (self._seeding.next, self._seeding.parts):
            expected = None if self._seeding is None else self._seeding.next
            raise WireError(f"seed part {part} of {parts} out of order (expected {expected})")
        seeding = self._seeding
        if (header["params"], header["optimizer"]) != (seeding.params_wire, seeding.config):
            raise WireError(f"seed part {part}: params or optimizer differ from part 0")
        seeding.add(header["table"], arrays)
        return seeding

    def _install_seed(self, seeding: Seeding) -> None:
        self.params, self.blocks, self.optimizer = seeding.params, seeding.blocks, seeding.optimizer
        self.store = ValueStore(self.blocks)  # one buffer per dtype: a reply is one frame
        self.seed_id = secrets.randbits(62)  # values no push count of the seed before tells
        self.by_param = {}
        for bid in sorted(self.blocks):
            self.by_param.setdefault(self.blocks[bid].param, []).append(bid)
        self.completed, self.pushed = {}, {}
        self.top_step = -1  # a new run's steps (a resumed one's may start lower)
        self.seeded_at = self.requests  # the ranks that said hello before it are its run's
        self._seeded_setup()
        # a push held now is of the run before (a run's pushes follow its seed): its worker,
        # if still alive, stops now, naming why, instead of at its timeout
        stale = [w for key, w in self.waiting.items() if key not in self.gathers_held]
        self.waiting = {k: w for k, w in self.waiting.items() if k in self.gathers_held}
        self._dismiss([e for w in stale for e in w.by_rank.values()], STALE_PUSH)
        log.info(
            "shard %d: seeded with %d blocks of %d parameters in %d part(s), %s",
            self.index,
            len(self.blocks),
            len(self.by_param),
            seeding.parts,
            self.optimizer,
        )
