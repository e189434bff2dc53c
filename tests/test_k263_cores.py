"""Local-size variables that are no ASCII integer are skipped, as any other non-integer is."""

from distconv.cores import processes_on_this_host


def test_a_local_size_in_other_digits_is_skipped_not_a_crash():
    assert processes_on_this_host({"MPI_LOCALNRANKS": "²"}) == 1
    assert processes_on_this_host({"MPI_LOCALNRANKS": "²", "LOCAL_WORLD_SIZE": "3"}) == 3
    assert processes_on_this_host({"OMPI_COMM_WORLD_LOCAL_SIZE": "٣"}) == 1
