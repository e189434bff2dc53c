"""A step checkpoint's manifest: the JSON file, written last, that ties its parts together.

:class:`~distconv.run_dir.RunDirectory` writes one when every part of a step is on disk,
reads them to find where to resume, and sets one aside with its step directory when its part
is damaged. Both it and the parts it names are written in a fixed byte form: the same content,
the same bytes (:func:`sorted_header` for the safetensors parts), so checkpoints can be hashed
and diffed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from distconv.build_identity import build_id

CHIEF = "chief"  # the part the chief writes: weights, optimizer state, position
#: a manifest's file name, which says its step (eight digits, more past 99,999,999)
MANIFEST_NAME = re.compile(r"step-([0-9]+)\.json")  # ASCII digits: see run_files.STEP_DIR


@dataclass(frozen=True)
class Manifest:
    """One complete checkpoint: its step, where each local part lives (relative to the
    checkpoint root), the parts remote holders (parameter-server shards) acknowledged, and the
    job that wrote it: its job id and ``distconv-launch`` invocation (None where it had none,
    or the manifest is older), and the distconv that wrote it
    (:func:`~distconv.build_identity.build_id`: this process's for a manifest made here; None
    for a file of a distconv before 12-07, which records none)."""

    step: int
    parts: dict[str, str]
    path: Path
    remote: dict[str, str] = field(default_factory=dict)
    job: str | None = None
    launch: str | None = None
    build: str | None = field(default_factory=build_id)

    def part(self, name: str) -> Path:
        return self.path.parent / self.parts[name]

    def text(self) -> str:
        """The manifest file's JSON (``path`` is where it lies, not part of it)."""
        record = {
            "step": self.step,
            "parts": self.parts,
            "remote": self.remote,
            "job": self.job,
            "launch": self.launch,
            "build": self.build,
        }
        return json.dumps({k: v for k, v in record.items() if v is not None}, indent=1)

    @classmethod
    def parse(cls, raw: bytes, path: Path) -> Manifest:
        """The manifest whose file at ``path`` holds ``raw``.

        Raises:
            ValueError, KeyError, TypeError: it is damaged (not JSON, not an object, a field
                missing or of another type, a step that is not an int or not the one its name
                says, no :data:`CHIEF` part).
        """
        data = json.loads(raw)  # bytes: a decoding error is damage too (a ValueError)
        step = data["step"]  # first: a TypeError for JSON that is not an object
        if type(step) is not int:  # int() took 2.5 and true as steps, and 1e999 overflowed
            raise TypeError(f"the step must be a whole number, got {step!r}")
        # the step sorts the checkpoints: one wrong digit (manifests carry no checksum) made an
        # old checkpoint the newest, every resume went back to it, and prunes deleted the rest
        named = MANIFEST_NAME.fullmatch(path.name)
        if named is None or int(named[1]) != step:
            said = f"its name's {int(named[1])}" if named else "in its name (step-N.json)"
            raise ValueError(f"its step {step} is not {said}")
        parts = dict(data["parts"])
        if not all(isinstance(part, str) for part in parts.values()):
            raise TypeError(f"a part's file must be a string, got {parts}")
        if CHIEF not in parts:  # the part every resume reads
            raise KeyError(f"no {CHIEF!r} part among {sorted(parts)}")
        job, launch, build = (
            None if data.get(k) is None else str(data[k]) for k in ("job", "launch", "build")
        )
        return cls(step, parts, path, dict(data.get("remote", {})), job, launch, build)

    def moved(self, folder: str, to: str) -> Manifest:
        """This manifest with its local parts in folder ``folder`` of the checkpoint root
        named in folder ``to``; remote parts, on their holders' disks, stay as named."""

        def where(part: str) -> str:
            top, *rest = PurePosixPath(part).parts
            return str(PurePosixPath(to, *rest)) if top == folder and rest else part

        return replace(self, parts={k: where(v) for k, v in self.parts.items()})


def sorted_header(raw: bytes, chunk: int) -> list[bytes | memoryview]:
    """Safetensors' file ``raw`` (a checkpoint's part) as its header, then its data (views, no
    copy) in pieces of at most ``chunk`` bytes; the header's metadata in key order:
    safetensors 0.8 writes that map in a Rust HashMap's order, random per process (its issue
    #584, no option sorts it), so two saves of one checkpoint differed in bytes. Data offsets
    count from the data's start: the same JSON entries, padded to 8 bytes with spaces as
    safetensors pads them, read alike (by ``safetensors.torch`` too). Its tensors' entries
    are in a fixed order already."""
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    data = memoryview(raw)[8 + n :]
    pieces = (data[i : i + chunk] for i in range(0, len(data), chunk))
    return [len(text).to_bytes(8, "little") + text, *pieces]
