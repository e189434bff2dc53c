"""The pods of an Indexed Job started for real: each pod's command line run as the kubelet runs
it (``$(VAR)`` filled in from the container's env and the Job controller's
``JOB_COMPLETION_INDEX``, which it adds last), its ``env``, ``sh -c`` and all, with a stand-in
for ``/opt/venv/bin/distconv`` that parses ``train``'s arguments with the real parser and
places itself with :func:`distconv.runtime.detect_runtime`, as ``distconv train`` does at
start. The check's verdict on a manifest is held to what these pods do."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.child_env import child_path

#: the path the rendered manifests start distconv by
DISTCONV = "/opt/venv/bin/distconv"
_PLACE = (
    "import sys; from distconv.train_args import train_parser as t; "
    "from distconv.runtime import detect_runtime as d, runtime_flags as f; "
    "assert sys.argv[1] == 'train', sys.argv; "
    "r = d(f(t().parse_args(sys.argv[2:]))); print(r.rank, r.world_size)"
)
_REFERENCE = re.compile(r"\$\$|\$\(([^)]*)\)")


@dataclass(frozen=True)
class Started:
    """What one pod's rank did at start: its exit status, and rank and world where placed."""

    returncode: int
    placed: tuple[int, int] | None
    stderr: str


def _kubelet(text: str, values: dict[str, str]) -> str:
    """``text`` with ``$(NAME)`` of a defined variable filled in and ``$$`` as ``$``."""

    def fill(match: re.Match) -> str:
        name = match.group(1)
        return "$" if name is None else values.get(name, match.group(0))

    return _REFERENCE.sub(fill, text)


def _stand_in(folder: Path) -> str:
    """A ``distconv`` that places itself and prints where (PYTHONPATH written in, as
    ``env -i`` drops the caller's)."""
    path = folder / "distconv"
    path.write_text(
        "#!/bin/sh\n"
        f"PYTHONPATH={shlex.quote(child_path())} exec {shlex.quote(sys.executable)} "
        f'-c {shlex.quote(_PLACE)} "$@"\n'
    )
    path.chmod(0o755)
    return str(path)


def start_pod(job: dict, index: int, folder: Path) -> Started:
    """Start the rank of pod ``index`` of Job ``job`` (one container) in ``folder``."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    values: dict[str, str] = {}
    for var in container.get("env", []):  # each filled in from those before it
        values[var["name"]] = _kubelet(str(var.get("value") or ""), values)
    if job["spec"].get("completionMode") == "Indexed":  # another Job's pods get no index
        values.setdefault("JOB_COMPLETION_INDEX", str(index))
    stand_in = _stand_in(folder)
    argv = [
        _kubelet(word, values).replace(DISTCONV, stand_in)
        for word in [*container.get("command", []), *container.get("args", [])]
    ]
    env = {"PATH": os.environ["PATH"], **values}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    words = out.stdout.split()
    placed = (int(words[0]), int(words[1])) if out.returncode == 0 and len(words) == 2 else None
    return Started(out.returncode, placed, out.stderr)


@dataclass(frozen=True)
class Training:
    """Every pod of a Job started: true where each placed itself as its own rank of a world of
    completions. Its repr names each pod's status and the end of its stderr, so a failed
    ``assert trains(...)`` says why a pod did not start (seen once under load, unexplained)."""

    pods: tuple[Started, ...]

    def __bool__(self) -> bool:
        placed = [pod.placed for pod in self.pods]
        ranks = [(rank, len(self.pods)) for rank in range(len(self.pods))]
        return None not in placed and sorted(placed) == ranks  # type: ignore[type-var]

    def __repr__(self) -> str:
        said = (
            f"pod {i}: {p.returncode} {p.placed} {p.stderr[-800:]!r}"
            for i, p in enumerate(self.pods)
        )
        return "Training(" + "; ".join(said) + ")"


def trains(job: dict, folder: Path) -> Training:
    """Every pod of ``job`` started; true where each starts as its own rank of a world of
    completions."""
    completions = int(job["spec"].get("completions", 1))
    return Training(tuple(start_pod(job, index, folder) for index in range(completions)))
