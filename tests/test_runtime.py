"""Runtime detection: every source, precedence, disagreement, ranges, and the log lines."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from distconv.logs import configure_logging
from distconv.runtime import (
    Runtime,
    RuntimeConfigError,
    check_address,
    detect_runtime,
    runtime_flags,
)
from distconv.train_args import train_parser
from tests.child_env import child_path

REPO_ROOT = Path(__file__).resolve().parents[1]


def detect(env=None, flags=None, hostname="laptop"):
    return detect_runtime(flags=flags, environ=env or {}, hostname=hostname)


def test_nothing_set_is_a_single_worker():
    rt = detect()
    assert rt == Runtime(source="default")
    assert rt.is_chief and rt.log_prefix == "" and rt.job_id == "local"


@pytest.mark.parametrize(
    "env, source, placement",
    [
        ({"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0"}, "distconv", (2, 4, 0)),
        ({"RANK": "1", "WORLD_SIZE": "2"}, "distconv", (1, 2, 0)),
        (
            {
                "OMPI_COMM_WORLD_RANK": "3",
                "OMPI_COMM_WORLD_SIZE": "4",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            },
            "openmpi",
            (3, 4, 1),
        ),
        ({"PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1"}, "pmi", (1, 3, 1)),
        ({"PMI_RANK": "2", "PMI_SIZE": "3"}, "pmi", (2, 3, 0)),
        ({"JOB_COMPLETION_INDEX": "5", "DISTCONV_WORLD_SIZE": "8"}, "kubernetes", (5, 8, 0)),
    ],
)
def test_each_environment_source(env, source, placement):
    rt = detect(env)
    assert rt.source == source
    assert (rt.rank, rt.world_size, rt.local_rank) == placement
    assert rt.is_chief == (placement[0] == 0)


ALONE = r"DISTCONV_WORLD_SIZE=4 says the job has 4 workers, but nothing says which one .* is off"


def test_hostname_ordinal_only_when_asked():
    env = {"DISTCONV_WORLD_SIZE": "4"}
    # a CI machine whose name ends in a number must not become rank 2; nor may a world size
    # with no rank beside it train alone as rank 0 of 1, without a word
    assert detect({"DISTCONV_WORLD_SIZE": "1"}, hostname="ci-runner-2") == Runtime()
    with pytest.raises(RuntimeConfigError, match=ALONE):
        detect(env, hostname="ci-runner-2")
    assert detect({**env, "DISTCONV_ROLE": "server"}).world_size == 1  # a shard has no rank
    rt = detect({**env, "DISTCONV_RANK_FROM_HOSTNAME": "1"}, hostname="pserver-3.svc.local")
    assert (rt.source, rt.rank, rt.world_size, rt.local_rank) == ("hostname", 3, 4, 0)


@pytest.mark.parametrize("value", ["1", "on", "ON", "yes", "True", " 1 "])
def test_hostname_ordinal_opt_in_is_read_as_a_switch(value):
    """DISTCONV_RANK_FROM_HOSTNAME=on (or ON, True) was read as off: every pod of a StatefulSet
    then trained as rank 0 of 1, its DISTCONV_WORLD_SIZE silently ignored. It is read as
    DISTCONV_DEBUG and DISTCONV_PROGRESS are (messages.env_switch)."""
    env = {"DISTCONV_RANK_FROM_HOSTNAME": value, "DISTCONV_WORLD_SIZE": "4"}
    rt = detect(env, hostname="pserver-3")
    assert (rt.source, rt.rank, rt.world_size) == ("hostname", 3, 4)


@pytest.mark.parametrize("value", ["0", "off", "False", "no", "", " "])
def test_hostname_ordinal_opt_out_values_leave_the_host_name_alone(value):
    env = {"DISTCONV_RANK_FROM_HOSTNAME": value, "DISTCONV_WORLD_SIZE": "4"}
    with pytest.raises(RuntimeConfigError, match=ALONE):  # not rank 3 from the host name
        detect(env, hostname="pserver-3")


def test_hostname_opt_in_without_ordinal_names_the_host():
    with pytest.raises(RuntimeConfigError, match="'laptop' does not end in -<ordinal>"):
        detect({"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "2"})


def test_hostname_uses_the_real_host_name_by_default():
    env = {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "100000"}
    host = socket.gethostname().split(".")[0]
    if host.rsplit("-", 1)[-1].isdigit():
        assert detect_runtime(environ=env).source == "hostname"
    else:
        with pytest.raises(RuntimeConfigError, match=repr(host)):
            detect_runtime(environ=env)


def test_kubernetes_index_needs_the_world_size():
    with pytest.raises(RuntimeConfigError, match="JOB_COMPLETION_INDEX=1.*DISTCONV_WORLD_SIZE"):
        detect({"JOB_COMPLETION_INDEX": "1"})


def test_disagreeing_sources_name_both():
    env = {"RANK": "1", "WORLD_SIZE": "2", "PMI_RANK": "0", "PMI_SIZE": "2"}
    with pytest.raises(RuntimeConfigError) as err:
        detect(env)
    message = str(err.value)
    assert "RANK=1, WORLD_SIZE=2 (distconv)" in message
    assert "PMI_RANK=0, PMI_SIZE=2 (pmi)" in message


@pytest.mark.parametrize(
    "env, named",
    [
        ({"PMI_RANK": "0", "PMI_SIZE": "2"}, "PMI_RANK=0, PMI_SIZE=2 (pmi)"),
        (
            {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"},
            "OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2 (openmpi)",
        ),
        ({"RANK": "1", "WORLD_SIZE": "2"}, "RANK=1, WORLD_SIZE=2 (distconv)"),
    ],
)
def test_distconv_world_size_must_agree_with_the_launchers_size(env, named):
    """DISTCONV_WORLD_SIZE (a manifest's, an MPIJob worker pod's) beside an MPI launcher's or
    distconv-launch's variables was never read: a job of 4 the manifest said trained as 2
    ranks without a word. It agrees with them, or both are named."""
    with pytest.raises(RuntimeConfigError) as err:
        detect({**env, "DISTCONV_WORLD_SIZE": "4"})
    message = str(err.value)
    assert "DISTCONV_WORLD_SIZE=4" in message and named in message, message
    rt = detect({**env, "DISTCONV_WORLD_SIZE": "2"})  # agreeing: the launcher's placement
    assert (rt.rank, rt.world_size) == (int(named.split("=")[1][0]), 2)
    with pytest.raises(RuntimeConfigError, match=r"DISTCONV_WORLD_SIZE must be an integer"):
        detect({**env, "DISTCONV_WORLD_SIZE": "two"})
    flags = {"rank": 0, "world_size": 3}  # flags override everything, silently
    assert detect({**env, "DISTCONV_WORLD_SIZE": "4"}, flags=flags).world_size == 3


def test_disagreeing_world_sizes_and_local_ranks():
    with pytest.raises(RuntimeConfigError, match=r"\(openmpi\) vs .*\(kubernetes\)"):
        detect(
            {
                "OMPI_COMM_WORLD_RANK": "1",
                "OMPI_COMM_WORLD_SIZE": "2",
                "JOB_COMPLETION_INDEX": "1",
                "DISTCONV_WORLD_SIZE": "3",
            }
        )
    with pytest.raises(RuntimeConfigError, match="disagree"):
        detect(
            {
                "RANK": "1",
                "WORLD_SIZE": "2",
                "LOCAL_RANK": "1",
                "OMPI_COMM_WORLD_RANK": "1",
                "OMPI_COMM_WORLD_SIZE": "2",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            }
        )


def test_agreeing_sources_take_the_first_and_its_local_rank():
    env = {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "PMI_RANK": "1",
        "PMI_SIZE": "2",
        "MPI_LOCALRANKID": "1",
    }
    rt = detect(env)
    assert (rt.source, rt.rank, rt.world_size, rt.local_rank) == ("distconv", 1, 2, 1)


def test_flags_override_everything_silently():
    env = {"RANK": "1", "WORLD_SIZE": "2", "PMI_RANK": "0", "PMI_SIZE": "2"}
    rt = detect(env, flags={"rank": 3, "world_size": 4, "local_rank": 1})
    assert (rt.source, rt.rank, rt.world_size, rt.local_rank) == ("flags", 3, 4, 1)


def test_flags_override_one_key_and_keep_the_rest():
    env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}
    rt = detect(env, flags={"rank": 2, "world_size": None})  # None = flag not given
    assert (rt.source, rt.rank, rt.world_size) == ("flags", 2, 4)
    rt = detect(env, flags={"local_rank": 1})
    assert (rt.source, rt.rank, rt.local_rank) == ("openmpi", 1, 1)


def test_roles_servers_keys_and_job_id_from_env_and_flags():
    env = {
        "DISTCONV_ROLE": "server",
        "DISTCONV_PSERVERS": "10.0.0.1:7000, ps-1.ps:7000,[::1]:7001",
        "DISTCONV_JOB_ID": "job-42",
        "DISTCONV_KEYS": "/run/keys",
        "RANK": "1",
        "WORLD_SIZE": "2",
    }
    rt = detect(env)
    assert rt.role == "server" and not rt.is_chief and rt.log_prefix == "[server 1/2]"
    assert rt.pservers == ("10.0.0.1:7000", "ps-1.ps:7000", "[::1]:7001")
    assert (rt.job_id, rt.keys_dir) == ("job-42", "/run/keys")
    rt = detect(env, flags={"role": "worker", "pservers": ["h:1"], "job_id": "x", "keys_dir": "k"})
    assert (rt.role, rt.pservers, rt.job_id, rt.keys_dir) == ("worker", ("h:1",), "x", "k")
    assert rt.log_prefix == "[1/2]"


@pytest.mark.parametrize(
    "env, flags, message",
    [
        (
            {"RANK": "2", "WORLD_SIZE": "2"},
            None,
            r"rank 2 is out of range for world size 2.*RANK=2",
        ),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, None, "rank -1 is out of range"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, None, "world size must be at least 1"),
        ({"RANK": "x", "WORLD_SIZE": "2"}, None, "RANK must be an integer, got 'x'"),
        ({"RANK": "1"}, None, r"RANK is set but WORLD_SIZE is not \(distconv\)"),
        ({"PMI_SIZE": "2"}, None, "PMI_SIZE is set but PMI_RANK is not"),
        ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "5"}, None, "local rank 5 is out of range"),
        ({}, {"rank": 4, "world_size": 4}, "rank 4 is out of range.*rank=4, world_size=4"),
        # one number from a flag, the other from the environment: each named by its source
        (
            {"RANK": "1", "WORLD_SIZE": "2"},
            {"world_size": 1},
            r"rank 1 is out of range for world size 1 \(need 0 <= rank < world size\), "
            r"from rank=1 \(distconv\) and world_size=1 \(flags\)$",
        ),
        (
            {"RANK": "1", "WORLD_SIZE": "2"},
            {"rank": 3},
            r"from world_size=2 \(distconv\) and rank=3 \(flags\)$",
        ),
        # one number from a flag, the other the default (nothing set): not the flags'
        (
            {},
            {"rank": 3},
            r"rank 3 is out of range for world size 1 \(need 0 <= rank < world size\), "
            r"from world_size=1 \(default\) and rank=3 \(flags\)$",
        ),
        ({}, {"world_size": 0}, r"got 0 from rank=0 \(default\) and world_size=0 \(flags\)$"),
        ({}, {"rank": "two"}, "--rank must be an integer, got 'two'"),
        ({}, {"ranks": 1}, r"unknown runtime flag\(s\) \['ranks'\]"),
        ({"DISTCONV_ROLE": "chief"}, None, "DISTCONV_ROLE must be one of worker, server"),
        # an empty flag leaves the role to the environment: the message names the variable
        ({"DISTCONV_ROLE": "chief"}, {"role": ""}, "^DISTCONV_ROLE must be one of"),
        ({}, {"role": "boss"}, r"^flags\['role'\] must be one of worker, server, got 'boss'"),
        ({}, {"local_rank": "x"}, r"^flags\['local_rank'\] must be an integer, got 'x'"),
        ({"DISTCONV_PSERVERS": "host"}, None, "DISTCONV_PSERVERS: 'host' is not host:port"),
        ({}, {"pservers": "h:0"}, "--pservers: 'h:0' is not host:port"),
        # only separators read as no servers: the job trained without its shards, silently
        ({"DISTCONV_PSERVERS": " , "}, None, r"^DISTCONV_PSERVERS: an empty entry in ' , '"),
        ({"DISTCONV_PSERVERS": "a:1,,b:2"}, None, "an empty entry in 'a:1,,b:2'"),
        ({}, {"pservers": ["a:1", " "]}, r"^--pservers: an empty entry"),
        ({"DISTCONV_PSERVERS": "a:1, a:01"}, None, "^DISTCONV_PSERVERS: 'a:01' repeats 'a:1'"),
        ({"DISTCONV_PSERVERS": "[::1]:5,[::1]:5"}, None, r"'\[::1\]:5' repeats"),
        ({"DISTCONV_JOB_ID": "a b"}, None, "job id must be a non-empty word"),
        ({"DISTCONV_WORLD_SIZE": "2", "JOB_COMPLETION_INDEX": "2"}, None, "out of range"),
    ],
)
def test_bad_input_is_one_clear_error(env, flags, message):
    with pytest.raises(RuntimeConfigError, match=message) as err:
        detect(env, flags)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("value", ["", "  "])
def test_a_blank_server_list_is_no_servers(value):
    assert detect({"DISTCONV_PSERVERS": value}, None).pservers == ()


@pytest.mark.parametrize(
    "servers, repeat",
    [
        ("Node-1:5,node-1:5", "'node-1:5' repeats 'Node-1:5'"),  # DNS names ignore case
        ("[::1]:5,[0:0::1]:5", r"'\[0:0::1\]:5' repeats '\[::1\]:5'"),  # one IPv6 address
        ("[FD00::7]:5,[fd00::7]:5", r"'\[fd00::7\]:5' repeats"),
    ],
)
def test_a_shard_spelled_twice_is_a_repeat(servers, repeat):
    """Two spellings of one address named one shard twice: the worker connected to it twice
    and stopped at the hello, in words about shard numbers."""
    with pytest.raises(RuntimeConfigError, match=f"^DISTCONV_PSERVERS: {repeat}"):
        detect({"DISTCONV_PSERVERS": servers}, None)


@pytest.mark.parametrize(
    "servers",
    [
        "localhost:5,127.0.0.1:5",  # names are not resolved: the hello tells such shards apart
        "[fe80::1%eth0]:5,[fe80::1%ETH0]:5",  # interface names keep their case
        "h:5,h:6,[::1]:5,127.0.0.1:5",
    ],
)
def test_distinct_shards_are_no_repeat(servers):
    assert detect({"DISTCONV_PSERVERS": servers}, None).pservers == tuple(servers.split(","))


@pytest.mark.parametrize("good", ["h:1", "a.b-c:65535", "[::1]:80", "10.0.0.1:5555"])
def test_check_address_accepts(good):
    check_address(good)


@pytest.mark.parametrize("bad", ["h", ":80", "h:", "h:70000", "::1:80", "h:8x"])
def test_check_address_rejects(bad):
    with pytest.raises(RuntimeConfigError, match="not host:port"):
        check_address(bad)


@pytest.fixture
def restore_root_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)  # a json configure_logging turned it on


def test_text_log_lines_carry_the_rank(restore_root_logging):
    out = io.StringIO()
    configure_logging(Runtime(rank=2, world_size=4), stream=out, environ={})
    logging.getLogger("distconv.test").info("hello %s", "there")
    configure_logging(Runtime(rank=2, world_size=4), stream=out, environ={})  # no duplicates
    logging.getLogger("other").warning("second")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(" [2/4] hello there") and lines[1].endswith(" [2/4] second")
    out = io.StringIO()
    configure_logging(Runtime(), stream=out, environ={})
    logging.getLogger("x").info("alone")
    assert out.getvalue().split(" ", 1)[1] == "alone\n"


def test_json_log_lines(restore_root_logging):
    out = io.StringIO()
    runtime = Runtime(role="server", rank=1, world_size=2, job_id="j7")
    configure_logging(runtime, fmt="json", stream=out, environ={"DISTCONV_RESTART": "3"})
    logging.getLogger("distconv").debug("hidden")
    try:
        raise KeyError("boom")
    except KeyError:
        logging.getLogger("distconv").exception("step %d failed", 5)
    (line,) = out.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["time"].endswith("Z") and "T" in entry["time"]
    expected = {"level": "error", "message": "step 5 failed", "role": "server", "rank": 1}
    assert {k: entry[k] for k in expected} == expected
    assert (entry["world_size"], entry["job_id"], entry["restart"]) == (2, "j7", 3)
    assert "KeyError: 'boom'" in entry["exception"]


def test_json_log_lines_keep_the_stack_asked_for(restore_root_logging):
    """``log.warning(..., stack_info=True)``: the text line carries the call stack, and so
    must the JSON one (it was dropped without a word)."""
    out = io.StringIO()
    configure_logging(Runtime(), fmt="json", stream=out, environ={})
    logging.getLogger("distconv").warning("where from?", stack_info=True)
    (line,) = out.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["message"] == "where from?"
    assert entry["stack"].startswith("Stack (most recent call last):")
    assert "test_json_log_lines_keep_the_stack_asked_for" in entry["stack"]


def test_text_logs_leave_a_scripts_capture_of_warnings_on(restore_root_logging):
    """configure_logging under the text format turned ``logging.captureWarnings`` off: a
    script that captured its warnings into its log before ``distconv.distributed.setup`` (text
    by default) had them back as raw lines on stderr, out of its log."""
    out = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        logging.captureWarnings(True)
        try:
            configure_logging(Runtime(rank=1, world_size=2), stream=out, environ={})
            warnings.warn("the script's own", UserWarning, stacklevel=1)
        finally:
            logging.captureWarnings(False)
    assert " [1/2] " in out.getvalue() and "UserWarning: the script's own" in out.getvalue()


def test_bad_log_settings(restore_root_logging):
    with pytest.raises(RuntimeConfigError, match="log format must be 'text' or 'json'"):
        configure_logging(Runtime(), fmt="xml")
    # a negative count was logged (and recorded) as it came; int() read "1_0" as 10
    for count in ("once", "-1", "1_0", "\u0661"):
        with pytest.raises(
            RuntimeConfigError, match=f"DISTCONV_RESTART must be an integer >= 0, got '{count}'"
        ):
            configure_logging(Runtime(), environ={"DISTCONV_RESTART": count})


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_real_mpiexec_ranks(tmp_path):
    """Under a real ``mpiexec -n 2`` each process detects its own rank from PMI or OpenMPI."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH")
    # each rank writes its own file: two ranks printing to one pipe can interleave mid-line
    script = (
        "import pathlib, sys; from distconv.runtime import detect_runtime as d; r = d(); "
        "pathlib.Path(sys.argv[1], f'rank{r.rank}').write_text(f'{r.source} {r.rank} "
        "{r.world_size}')"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = child_path()
    done = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-c", script, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr
    lines = [p.read_text() for p in sorted(tmp_path.glob("rank*"))]
    sources = {line.split()[0] for line in lines}
    assert sources <= {"pmi", "openmpi"} and len(sources) == 1
    assert [line.split()[1:] for line in lines] == [["0", "2"], ["1", "2"]]


def test_command_line_flags_override_the_environment():
    parser = train_parser()
    env = {"RANK": "0", "WORLD_SIZE": "2", "DISTCONV_JOB_ID": "env-job"}
    args = parser.parse_args([])
    assert runtime_flags(args) == dict.fromkeys(
        ["job_id", "keys_dir", "local_rank", "pservers", "rank", "role", "world_size"]
    )
    assert detect(env, runtime_flags(args)) == Runtime(
        rank=0, world_size=2, job_id="env-job", source="distconv"
    )
    argv = ["--rank", "1", "--world-size", "3", "--pservers", "h:1,h:2"]
    argv += ["--keys", "/k", "--job-id", "cli-job", "--log-format", "json"]
    args = parser.parse_args(argv)
    assert args.log_format == "json"
    assert detect(env, runtime_flags(args)) == Runtime(
        rank=1,
        world_size=3,
        job_id="cli-job",
        pservers=("h:1", "h:2"),
        keys_dir="/k",
        source="flags",
    )


@pytest.mark.parametrize(
    "env,flags,message",
    [
        ({"RANK": "1_0", "WORLD_SIZE": "40"}, None, "RANK must be an integer, got '1_0'"),
        ({"PMI_RANK": "0", "PMI_SIZE": "1_6"}, None, "PMI_SIZE must be an integer, got '1_6'"),
        (
            {"JOB_COMPLETION_INDEX": "0", "DISTCONV_WORLD_SIZE": "1_0"},
            None,
            "DISTCONV_WORLD_SIZE must",
        ),
        ({}, {"rank": "1_0", "world_size": 40}, r"--rank must be an integer, got '1_0'"),
    ],
)
def test_an_integer_with_an_underscore_is_malformed_not_another_rank(env, flags, message):
    """int() reads "1_0" as 10 (Python's digit grouping): RANK=1_0 made this process rank 10
    of 40 without a word, where no launcher writes such a number."""
    with pytest.raises(RuntimeConfigError, match=message):
        detect(env, flags)
    assert detect({"RANK": " 3 ", "WORLD_SIZE": "+4"}).rank == 3  # spaces and a sign, as before


def test_a_world_size_flag_with_nothing_that_names_the_rank_is_refused():
    """--world-size 2 alone made every worker rank 0 of 2: two took one rank, none took 1."""
    with pytest.raises(RuntimeConfigError, match=r"--world-size 2 says the job has 2 workers"):
        detect({}, {"world_size": 2})
    assert detect({}, {"world_size": 1}).world_size == 1
    assert detect({"RANK": "1", "WORLD_SIZE": "2"}, {"world_size": 2}).rank == 1
    assert detect({}, {"world_size": 2, "rank": 1}).rank == 1
    assert detect({}, {"world_size": 2, "role": "server"}).rank == 0  # a shard: its --shard


@pytest.mark.parametrize(
    "bad", ["[]:5555", "h h:5555", "h]:5555", "[h:5555", "h:\u0663", "h:\u00b2"]
)
def test_an_address_with_no_host_a_stray_bracket_or_odd_digits_is_not_host_port(bad):
    """'[]:5555' passed as host '' (the client then said "expected HOST:PORT, got ':5555'",
    not what was written), 'h h:5555' reached ZeroMQ's "Invalid argument", 'h]:5555' was
    read as host h, the Arabic-Indic digit three as port 3 and '²' gave int()'s own words."""
    with pytest.raises(RuntimeConfigError, match=r"--pservers: .* is not host:port"):
        detect({}, {"pservers": bad})


def test_numpy_integers_as_rank_flags_are_taken_as_python_ints():
    """flags={"rank": np.int64(1), "world_size": np.int64(2)} (a rank worked out with numpy)
    was refused with "--rank must be an integer, got np.int64(1)", though the sync takes
    numpy's integers; a numpy bool is still no integer."""
    import numpy as np

    runtime = detect(
        {}, {"rank": np.int64(1), "world_size": np.int32(2), "local_rank": np.uint8(1)}
    )
    assert (runtime.rank, runtime.world_size, runtime.local_rank) == (1, 2, 1)
    assert {type(runtime.rank), type(runtime.world_size), type(runtime.local_rank)} == {int}
    with pytest.raises(RuntimeConfigError, match=r"--rank must be an integer, got"):
        detect({}, {"rank": np.bool_(True), "world_size": 2})


@pytest.mark.parametrize(
    "env, flags, said",
    [
        (
            {},
            {"job_id": "   "},
            "--job-id: job id must be a non-empty word, got '   ' (only whitespace, 3 characters)",
        ),
        ({}, {"job_id": " a b "}, "--job-id: job id must be a non-empty word, got ' a b '"),
        (
            {"DISTCONV_JOB_ID": "\t"},
            None,
            "DISTCONV_JOB_ID: job id must be a non-empty word, "
            "got '\\t' (only whitespace, 1 character)",
        ),
    ],
)
def test_a_bad_job_id_is_quoted_as_given_naming_where_it_came_from(env, flags, said):
    """``--job-id '   '`` was reported as ``got ''``: the value after stripping, which is not
    what the user typed and names no flag."""
    with pytest.raises(RuntimeConfigError) as err:
        detect(env, flags=flags)
    assert str(err.value) == said


@pytest.mark.parametrize("value", ["", "  ", "\t"])
def test_a_blank_keys_variable_names_no_directory(value):
    """``DISTCONV_KEYS='  '`` was the key directory ``'  '``: a worker looked for
    ``  /worker-0.key_secret``, and beside ``DISTCONV_INSECURE=1`` it was a clash of two
    variables. Blank, as empty, it names none (``--keys '  '`` is a usage error)."""
    rt = detect({"DISTCONV_KEYS": value})
    assert (rt.keys_dir, rt.keys_from_env) == (None, False)
    rt = detect({"DISTCONV_KEYS": " /run/keys"})  # a path is kept as given
    assert (rt.keys_dir, rt.keys_from_env) == (" /run/keys", True)
