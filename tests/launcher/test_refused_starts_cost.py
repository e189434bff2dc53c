"""The launcher reads a failed rank's last line for a start refused for good
(:func:`distconv.refused_starts.refused_for_good_in`) before it restarts the job, on a line of up
to :data:`launcher.kept_line.KEPT_LINE_BYTES`. Lines that repeat the start of a refusal's words
and never finish them cost the reader time growing with the square of the line where a group
of it scanned on to the line's end at each repeat: 2 to 8 seconds at 64 KiB (the version's
words, ``--overwrite``'s linked folder), minutes at 1 MiB, while the launcher neither restarted
nor reported. Each such line is now read in time that grows with its length."""

from __future__ import annotations

import time

import pytest

from distconv.refused_starts import init_from_refused_in, refused_for_good_in
from launcher.kept_line import KEPT_LINE_BYTES

_BEFORE = ("x: error: ", "rank 0 could not set up: RunDirError: ")
#: a refusal's start repeated, its end never said
_REPEATED = {
    "version": ("checkpoint ", "has format version x; "),
    "version words": ("checkpoint ", "has format version "),
    "version, ours": ("checkpoint has format version x", "; this distconv reads version "),
    "linked": ("cannot clear the run in a: ", "b links to c, "),
    "linked, path": ("cannot clear the run in a: b links to ", "c, which "),
}


@pytest.mark.parametrize("before", _BEFORE)
@pytest.mark.parametrize("name", sorted(_REPEATED))
def test_a_long_line_that_repeats_a_refusals_start_is_read_at_once(before, name):
    start, again = _REPEATED[name]
    line = before + start + again * (KEPT_LINE_BYTES // len(again))
    took = time.perf_counter()
    assert refused_for_good_in([line]) is None
    took = time.perf_counter() - took
    assert took < 0.5, f"{took:.2f} s for a line of {len(line)} characters"  # some 30 ms now


def test_the_refusals_bounded_so_are_still_read():
    """Each bound keeps the words it bounds: a version and a linked folder's refusal read."""
    version = (
        "x: error: checkpoint /r/checkpoints/step-00000003/chief.safetensors has format version "
        "'3'; this distconv reads version '2': resume it with the distconv that wrote it"
    )
    linked = (
        "x: error: cannot clear the run in /r: /r/checkpoints links to /disk/c, which holds "
        "files no distconv run writes (/disk/c/notes.txt); move them away"
    )
    assert refused_for_good_in([version]) == (
        "the checkpoint to resume has format version '3' where this distconv reads version '2'"
    )
    assert refused_for_good_in([linked]) == (
        "the checkpoints folder the output directory links to holds files no distconv run writes"
    )


@pytest.mark.parametrize("before", _BEFORE)
def test_a_long_line_that_repeats_init_froms_start_is_read_at_once(before):
    """``--init-from``'s refusals (:func:`~distconv.refused_starts.init_from_refused_in`): a
    lazy scan from each repeat of their start took 3.5 s on such a line."""
    line = before + "--init-from " + "x: error: --init-from " * (KEPT_LINE_BYTES // 22)
    took = time.perf_counter()
    assert init_from_refused_in([line]) is None
    took = time.perf_counter() - took
    assert took < 0.5, f"{took:.2f} s for a line of {len(line)} characters"
    said = before + "--init-from /a: no such file or folder"  # still read
    assert init_from_refused_in([said]) == "the --init-from path holds no checkpoint"
