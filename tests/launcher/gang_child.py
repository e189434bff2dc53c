"""A stand-in worker for the supervision tests, run by the real launcher as a user's script.

``python gang_child.py OUT ACTION [ARGS]``: records its pid, runtime and environment under OUT,
checkpoints and exits 0 on SIGTERM (as distconv train does), then does ACTION:

- ``fail``: rank 1 exits 3 once every rank is up; the others sleep (each with a grandchild
  ``sleep``).
- ``stubborn-fail``: like ``fail``, but rank 0 ignores SIGTERM, so only SIGKILL stops it.
- ``sleep``: sleep, with a grandchild, until signalled.
- ``steps``: ten steps; the chief checkpoints each one to OUT/ckpt.json and resumes from it. On
  the first start the chief gets stuck at step 7, and rank 1 exits 3 once step 5 is saved.
- ``race``: rank 1 exits 4 once rank 0 has started, rank 0 exits 5 30 ms after rank 1 said it
  goes, the others sleep.
- ``chatter N LENGTH``: print N lines of LENGTH characters as fast as possible.
- ``env``: nothing more.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from distconv.runtime import detect_runtime


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # a restarted job never reads half a checkpoint


def main() -> int:
    out, action, args = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    runtime = detect_runtime()
    restart = int(os.environ["DISTCONV_RESTART"])
    me = out / f"{runtime.role}-{runtime.rank}-r{restart}"
    names = ("DISTCONV_PSERVERS", "DISTCONV_KEYS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    names += ("MKL_NUM_THREADS", "DISTCONV_NUM_THREADS", "DISTCONV_JOB_ID")
    record = {"runtime": runtime.__dict__, "env": {k: os.environ.get(k) for k in names}}
    record["pid"] = os.getpid()
    write_json(me.with_suffix(".json"), record)

    def on_sigterm(signum, frame):
        write_json(me.with_suffix(".sigterm"), {"checkpointed": True})
        raise SystemExit(0)

    stubborn = action == "stubborn-fail" and runtime.rank == 0
    signal.signal(signal.SIGTERM, signal.SIG_IGN if stubborn else on_sigterm)
    if action in ("fail", "stubborn-fail", "sleep"):
        grandchild = subprocess.Popen(["sleep", "300"])
        write_json(me.with_suffix(".grandchild"), {"pid": grandchild.pid})
        if action != "sleep" and runtime.rank == 1:
            # once every rank has its handler and grandchild: a fixed 0.5 s pause failed
            # before a slow starter had either on a loaded host, so it died of the SIGTERM
            # unrecorded and the test found fewer processes than it started
            for rank in range(runtime.world_size):
                wait_for(out / f"{runtime.role}-{rank}-r{restart}.grandchild")
            print(f"rank {runtime.rank} gives up", flush=True)
            return 3
        time.sleep(300)
    elif action == "steps":
        return steps(out, runtime.rank, runtime.is_chief, restart)
    elif action == "race":
        race(out, runtime.rank)
    elif action == "chatter":
        count, length = int(args[0]), int(args[1])
        body = chr(ord("a") + runtime.rank) * length
        for i in range(count):
            sys.stdout.write(f"{runtime.rank}:{i}:{body}\n")
        sys.stdout.flush()
    return 0


def race(out: Path, rank: int) -> None:
    """Rank 1 exits 4 as soon as rank 0 is up, rank 0 exits 5 30 ms later: often within one
    poll of the launcher. Files order them, not a wall-clock time, which had to lie seconds
    ahead for a busy machine to start both before it."""
    if rank > 1:
        time.sleep(300)
    if rank == 0:
        (out / "up-0").touch()
    wait_for(out / ("up-0" if rank == 1 else "going-1"))
    if rank == 1:
        (out / "going-1").touch()
        os._exit(4)  # no interpreter teardown: exits now
    time.sleep(0.03)
    os._exit(5)


def wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            sys.exit(f"{path} never appeared")
        time.sleep(0.001)


def steps(out: Path, rank: int, chief: bool, restart: int) -> int:
    ckpt = out / "ckpt.json"
    start = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    for step in range(start, 10):
        if chief and restart == 0 and step == 7:
            time.sleep(300)  # stuck until the launcher stops the gang
        if rank == 1 and restart == 0:
            while not (ckpt.exists() and json.loads(ckpt.read_text())["step"] >= 5):
                time.sleep(0.02)
            print("rank 1 fails after the checkpoint of step 5", flush=True)
            return 3
        if chief:
            write_json(ckpt, {"step": step + 1})
    if chief:
        write_json(out / "done.json", {"start": start, "restart": restart})
    return 0


if __name__ == "__main__":
    sys.exit(main())
