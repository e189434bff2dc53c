"""A local size with a plus sign is the number it says."""

from distconv.cores import processes_on_this_host


def test_a_local_size_with_a_plus_sign_counts_as_the_number_it_is():
    # int() reads "+2" as 2, a positive integer as the docstring asks: it was passed over,
    # and two ranks side by side each took every core
    assert processes_on_this_host({"LOCAL_WORLD_SIZE": "+2"}) == 2
    assert processes_on_this_host({"MPI_LOCALNRANKS": " +4 ", "LOCAL_WORLD_SIZE": "2"}) == 4
    # still no count: zero, a minus sign, two signs, a sign alone
    for text in ("+0", "-2", "++2", "+", "+-2", "+ 2"):
        assert processes_on_this_host({"MPI_LOCALNRANKS": text}) == 1, text
