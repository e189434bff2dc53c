"""``distconv train``'s flags read elsewhere (a manifest) as the command reads them: each
abbreviation written out in full, checked against argparse itself."""

from __future__ import annotations

import argparse

import pytest

from distconv.job import TrainConfig
from distconv.train_args import FlagError, full_flag, spelled_out, train_options, train_parser


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = train_parser()
    parser.exit_on_error = False
    return parser.parse_args(argv)


@pytest.mark.parametrize(
    "argv, full",
    [
        (["--ep", "3", "--ou", "runs/x"], ["--epochs", "3", "--out", "runs/x"]),
        (["--ou=runs/x", "--re", "auto"], ["--out=runs/x", "--resume", "auto"]),
        (["--lr", "0.1", "--lr-d", "0.5"], ["--lr", "0.1", "--lr-decay", "0.5"]),  # exact wins
        (["--data", "digits", "--data-d", "/d"], ["--data", "digits", "--data-dir", "/d"]),
        (["--push=0", "--syn", "pserver"], ["--push-kb=0", "--sync", "pserver"]),
        (["--seed", "-1"], ["--seed", "-1"]),  # values are kept, even ones like a short option
        (["--job-id", "a=b", "--grad=bfloat16"], ["--job-id", "a=b", "--grad-dtype=bfloat16"]),
        (["--out", "--my dir", "--ep", "1"], ["--out", "--my dir", "--epochs", "1"]),  # a value
        (["--ou=--x y", "--lr", "-.5"], ["--out=--x y", "--lr", "-.5"]),
    ],
)
def test_abbreviations_are_written_out_as_argparse_reads_them(argv, full):
    assert spelled_out(argv) == full
    parser = train_parser()
    parser.exit_on_error = False
    try:
        expected = parser.parse_args(argv)
    except (argparse.ArgumentError, SystemExit):  # a bad value: the same for both spellings
        with pytest.raises((argparse.ArgumentError, SystemExit)):
            _parse(full)
        return
    assert _parse(full) == expected


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--p", "1"], "--p could be any of --pservers, --push-kb"),
        (["--d", "x"], "--d could be any of --data, --data-dir, --device, --dtype"),
        (["--bogus=1"], "distconv train takes no --bogus"),
        (["--epochs", "3", "--"], "distconv train takes no --"),
        (["-x"], "distconv train takes no -x"),  # a short option, as unknown as a long one
        (["--epochs", "3", "-e", "4"], "distconv train takes no -e"),
    ],
)
def test_a_flag_argparse_refuses_is_refused_naming_it(argv, words, capsys):
    with pytest.raises(FlagError, match=words):
        spelled_out(argv)
    with pytest.raises(SystemExit):  # argparse refuses them too
        train_parser().parse_args(argv)


def test_every_train_option_is_its_own_full_name():
    options = train_options()
    assert {"--epochs", "--resume", "--overwrite", "--sync", "--push-kb"} <= options
    assert all(full_flag(o) == o for o in options)


@pytest.mark.parametrize("port", ["65536", "70000", "-1"])
def test_a_health_port_outside_0_to_65535_is_a_usage_error(port, capsys):
    """--health-port 70000 reached bind(), whose OverflowError ended the run in a traceback."""
    with pytest.raises(SystemExit) as exit_:
        train_parser().parse_args(["--health-port", port])
    assert exit_.value.code == 2
    assert f"a port is 0..65535, got {port}" in capsys.readouterr().err
    assert train_parser().parse_args(["--health-port", "65535"]).health_port == 65535


@pytest.mark.parametrize("seconds", ["0", "-5", "inf", "nan", "soon"])
def test_a_stall_limit_must_be_a_finite_positive_number(seconds, capsys):
    with pytest.raises(SystemExit) as exit_:
        train_parser().parse_args(["--stall-seconds", seconds])
    assert exit_.value.code == 2 and "--stall-seconds" in capsys.readouterr().err
    # unset, so that one given without --health-port can be refused; TrainConfig's applies
    assert train_parser().parse_args([]).stall_seconds is None
    assert TrainConfig().stall_seconds == 300.0
    assert train_parser().parse_args(["--stall-seconds", "1800"]).stall_seconds == 1800.0


@pytest.mark.parametrize("size", ["1e-9", "9e-7"])
def test_a_bucket_under_one_byte_is_a_usage_error(size, capsys):
    """--bucket-mb 1e-9 passed the parse as a positive number, became 0 bytes, and every rank
    of the MPI job ended in the sync's traceback (bucket_bytes must be a positive integer)."""
    with pytest.raises(SystemExit) as exit_:
        train_parser().parse_args(["--bucket-mb", size])
    assert exit_.value.code == 2
    assert f"--bucket-mb: must be at least 1 byte (9.53674e-07 MiB), got {size}" in (
        capsys.readouterr().err
    )
    assert train_parser().parse_args(["--bucket-mb", "1e-6"]).bucket_mb == 1e-6  # 1 byte


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_data_dir_is_a_usage_error(empty, capsys):
    """``--data-dir "$MNIST"`` with the variable unset read the MNIST files of the working
    directory (``Path("")`` is ``.``), or failed naming ``.``, a directory nobody gave."""
    with pytest.raises(SystemExit) as exit_:
        train_parser().parse_args(["--data", "mnist", "--data-dir", empty])
    assert exit_.value.code == 2
    assert "--data-dir: must not be empty" in capsys.readouterr().err
    assert train_parser().parse_args(["--data-dir", "mnist"]).data_dir == "mnist"


def test_keys_and_insecure_together_are_refused(capsys):
    """``--keys DIR --insecure`` trained without CURVE and never read DIR;
    ``distconv pserver`` refuses the two together, and so does ``distconv train`` now."""
    with pytest.raises(SystemExit) as stopped:
        train_parser().parse_args(["--sync", "pserver", "--keys", "/k", "--insecure"])
    assert stopped.value.code == 2
    assert "--insecure: not allowed with argument --keys" in capsys.readouterr().err


@pytest.mark.parametrize("servers", ["", " , "])
def test_an_empty_server_list_is_refused(servers, capsys):
    """``--pservers ""`` (a variable that was not set) trained alone with local sync, without a
    word, even where DISTCONV_PSERVERS named the job's shards."""
    with pytest.raises(SystemExit) as stopped:
        train_parser().parse_args(["--pservers", servers])
    assert stopped.value.code == 2
    assert "must name at least one HOST:PORT" in capsys.readouterr().err


def test_a_blank_health_host_is_refused(capsys):
    """``--health-host ""`` (a variable that was not set) bound the probes and /metrics to
    every interface, where the default is loopback alone."""
    with pytest.raises(SystemExit) as stopped:
        train_parser().parse_args(["--health-port", "0", "--health-host", ""])
    assert stopped.value.code == 2
    assert "argument --health-host: must not be empty" in capsys.readouterr().err


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_keys_directory_is_refused(blank, capsys):
    """``--keys ""`` (a variable that was not set) read as no --keys at all: DISTCONV_KEYS
    won over the flag, or the worker asked for the --keys it had been given, and with local
    sync it passed where ``--keys DIR`` is refused as unused."""
    with pytest.raises(SystemExit) as stopped:
        train_parser().parse_args(["--sync", "pserver", "--keys", blank])
    assert stopped.value.code == 2
    assert "argument --keys: must not be empty" in capsys.readouterr().err
    assert train_parser().parse_args(["--keys", "k"]).keys_dir == "k"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--rank", "1_0", "--world-size", "40"], "--rank: must be an integer, got '1_0'"),
        (["--world-size", "1_6"], "--world-size: must be an integer, got '1_6'"),
        (["--rank", "\u0663", "--world-size", "4"], "--rank: must be an integer, got '\u0663'"),
        (["--epochs", "1_0"], "--epochs: must be an integer, got '1_0'"),
    ],
)
def test_an_integer_flag_with_an_underscore_or_other_digits_is_refused(argv, words, capsys):
    """45fbe34 refused RANK=1_0 and flags={'rank': '1_0'}, but distconv train's own flags are
    turned into ints by argparse first, with int(): --rank 1_0 was rank 10 of 40, the
    Arabic-Indic digit three rank 3, without a word."""
    with pytest.raises(SystemExit):
        train_parser().parse_args(argv)
    assert words in capsys.readouterr().err
    assert train_parser().parse_args(["--rank", " +3 ", "--world-size", "4"]).rank == 3


@pytest.mark.parametrize(
    "argv, words",
    [
        (["pserver", "--shard", "1_0"], "--shard: must be an integer, got '1_0'"),
        (["pserver", "--workers", "\u0663"], "--workers: must be an integer, got '\u0663'"),
        (["pserver", "--health-port", "8_080"], "--health-port: must be an integer, got '8_080'"),
        (["keys", "d", "--workers", "1_6"], "--workers: must be an integer, got '1_6'"),
    ],
)
def test_a_shard_s_integer_flag_is_read_as_distconv_train_reads_one(argv, words, capsys):
    """3348e68 refused --rank 1_0 in distconv train, but distconv pserver and keys read their
    integers with int(): --shard 1_0 --num-shards 20 served shard 10 without a word."""
    from distconv.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert words in capsys.readouterr().err
    shard = ["pserver", "--bind", "h:1", "--shard", " +3 ", "--num-shards", "4", "--workers", "2"]
    assert build_parser().parse_args(shard).shard == 3


@pytest.mark.parametrize("name", ["GPU", "Cpu", "cpu"])
def test_the_device_flag_takes_any_case_as_distconv_device_does(name):
    assert _parse(["--device", name]).device == name.lower()
