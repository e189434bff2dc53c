"""Writing rendered manifests into folders, one job per folder, all files or none
(:func:`distconv.deploy.render.write_manifests` and ``write_examples``).

Everything that would stop a write part-way is refused before the first file is written:
another job's manifests in a folder (``kubectl apply -f`` would deploy them too), a folder or
other non-file where a manifest goes. :func:`~distconv.files.write_all_atomically` would
put every target back if a rename failed there; checking first names the problem in one line
before anything is staged.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path

from distconv.files import write_all_atomically

#: what ``kubectl apply -f FOLDER`` reads
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def write_folders(folders: Mapping[Path, Mapping[str, bytes]]) -> list[Path]:
    """Write each folder's files (file name -> contents), every folder made if missing; return
    the paths written, in order. Each folder is checked (:func:`folder_write_problem`) before
    any file is written, and the files are replaced together: a write that fails (a full disk)
    leaves every earlier file as it was.

    Raises:
        ValueError: a folder holds other manifests, or a manifest's path is no file.
        OSError: a file could not be written.
    """
    for out, contents in folders.items():
        problem = folder_write_problem(out, contents)
        if problem is not None:
            raise ValueError(problem)
    for out in folders:
        out.mkdir(parents=True, exist_ok=True)
    files = {out / name: data for out, named in folders.items() for name, data in named.items()}
    write_all_atomically(files)  # all or none: a cut file, or two renders, may still apply
    return list(files)


def folder_write_problem(out: Path, names: Collection[str]) -> str | None:
    """Why the job's files ``names`` cannot be written into ``out`` alone, or None: ``out``
    holds manifests (YAML, JSON) the job does not write, or something other than a file
    stands where one of them goes (a folder named ``job-x.yaml``)."""
    present = sorted(out.iterdir()) if out.is_dir() else []
    others = [p.name for p in present if p.suffix in MANIFEST_SUFFIXES and p.name not in names]
    if others:
        return (
            f"{out} holds manifests this job does not have ({', '.join(others)}): "
            "`kubectl apply -f` would deploy them too; remove them or choose an empty folder"
        )
    for path in (p for p in present if p.name in names):
        if not os.path.isfile(path):  # a link to a file is replaced, as a file is
            return f"{path} is not a file: the manifest cannot be written there"
    return None
