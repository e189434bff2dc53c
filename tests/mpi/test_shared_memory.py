"""Which MPICH shared-memory files a process maps, read from its ``/proc/<pid>/maps``
(:mod:`distconv.sync.mpi.shared_memory`, which unlinks them as MPI comes up; real jobs:
``test_segment_unlinked_at_start.py``, ``test_failures.py::test_one_rank_raising_ends_the_job``)."""

from __future__ import annotations

from distconv.sync.mpi.shared_memory import mapped_segments

MAPS = """\
7f0000000000-7f0000200000 rw-s 00000000 00:1a 123 /dev/shm/mpich_shm_1a2b3c4d_0
7f0000200000-7f0000400000 rw-s 00200000 00:1a 123 /dev/shm/mpich_shm_1a2b3c4d_0
7f0000400000-7f0000600000 rw-s 00000000 00:1a 124 /dev/shm/mpich_shm_99_0 (deleted)
7f0000600000-7f0000800000 rw-s 00000000 00:1a 125 /dev/shm/other_segment
7f0000800000-7f0000a00000 r--p 00000000 08:01 126 /tmp/dev/shm/mpich_shm_fake_0
7f0000a00000-7f0000c00000 rw-p 00000000 00:00 0
7f0000c00000-7f0000e00000 rw-s 00000000 00:1a 127 /dev/shm/mpich_vci_1a2b3c4d_0
"""


def test_each_mapped_segment_is_named_once_and_an_unlinked_one_not(tmp_path):
    """The VCIs' file too: ``MPIR_CVAR_CH4_NUM_VCIS`` above 1 makes it beside the first, and
    MPICH unlinks it only in ``MPI_Finalize`` as well."""
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    assert mapped_segments(str(maps)) == [
        "/dev/shm/mpich_shm_1a2b3c4d_0",
        "/dev/shm/mpich_vci_1a2b3c4d_0",
    ]


def test_no_maps_to_read_names_none(tmp_path):
    assert mapped_segments(str(tmp_path / "missing")) == []
