"""The ``distconv train`` flags a launch sets itself, and why each is refused when given
(:func:`launcher.commands.refuse_owned_flags`)."""

from __future__ import annotations

#: distconv train flags a launch sets itself (see commands.refuse_owned_flags), and why
DROP = "; drop it from the train arguments"
ONLY_LAUNCHER = (
    "the launcher already sets it, on the workers and the shards, from {}; "
    "pass it only to the launcher"
)
LOCAL_OWNED = {
    "--rank": "the launcher gives each worker its RANK" + DROP,
    "--world-size": "the launcher sets WORLD_SIZE from --workers" + DROP,
    "--pservers": "the launcher gives the workers its shards' addresses" + DROP,
    "--keys": "the launcher gives the workers the job's keys (<run-dir>/keys)" + DROP,
    "--insecure": ONLY_LAUNCHER.format("distconv-launch local --insecure"),
    "--job-id": ONLY_LAUNCHER.format("distconv-launch local --job-id"),
}
MPI_OWNED = {
    "--rank": "MPI gives each rank its rank" + DROP,
    "--world-size": "-np sets the world size" + DROP,
    **dict.fromkeys(
        ("--pservers", "--keys", "--insecure"),
        "a parameter-server flag, and this launch trains with allreduce" + DROP,
    ),
}
